"""`mqcli batch`: commands one per line in one process against one open store (like runmqsc):
shell quoting, comments, a failing line, --keep-going, -o jsonl, and exit codes."""

import io
import json
import os
import shlex
import signal
import subprocess
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channel_helpers import wait_until
from cli_helpers import mqcli_command
from mqcli import shell_words
from mqcli.commands.batch import _command, _continued
from mqcli.inputs import COMMAND_LINE_CHARS, command_lines

SCRIPT = """\
# set up the queue and two messages
queue create orders -q
put orders "first order" --priority 5 --label 'the "label"'   # trailing comment

mqcli put orders 'second order'
browse orders -o body
"""


def test_a_batch_runs_each_line_with_shell_quoting_and_comments(cli):
    result = cli.subprocess("batch", "-", input=SCRIPT.encode())
    assert result.code == 0, result
    assert result.out.splitlines()[-2:] == ["first order", "second order"]
    [first] = cli.jsonl("browse", "orders", "--priority", "5")
    assert first["label"] == 'the "label"'


def test_a_failing_line_stops_the_batch_with_its_exit_code(cli):
    result = cli.subprocess("batch", input=b"put q one\nget nope\nput q two\n")
    assert result.code == 6, result
    assert "line 2 failed (exit 6): get nope [BATCH]" in result.stderr
    assert [m["body"] for m in cli.jsonl("browse", "q")] == ["one"]


def test_keep_going_runs_every_line_and_exits_with_the_first_failure(cli, tmp_path):
    script = tmp_path / "script.mqcli"
    script.write_text("get nope\nput q one\nput q 'unclosed\nput q two\n")
    result = cli.subprocess("batch", str(script), "--keep-going")
    assert result.code == 6, result
    assert "cannot split the line" in result.stderr
    assert [m["body"] for m in cli.jsonl("browse", "q")] == ["one", "two"]


def test_jsonl_gives_one_result_object_per_command(cli):
    result = cli.subprocess("batch", "-k", "-o", "jsonl",
                            input=b"put q 'a b'\nget nope --confirm-id auto\nbrowse q --limit 1\n# none\nqueue show q\n")
    assert result.code == 6, result
    records = result.jsonl()
    assert [(r["line"], r["exit"]) for r in records] == [(1, 0), (2, 6), (3, 0), (5, 0)]
    assert records[0]["result"]["body"] == "a b"
    assert records[1]["error"]["status"] == "MQ_ERROR_QUEUE_NOT_AVAILABLE"
    assert [m["body"] for m in records[2]["result"]] == ["a b"]
    assert records[3]["result"]["name"] == "q" and records[3]["result"]["depth"] == 1


@pytest.mark.parametrize("line, code", [("batch -", 2), ("put", 2), ("frobnicate", 2)])
def test_bad_lines_are_usage_errors_not_crashes(cli, line, code):
    result = cli.subprocess("batch", input=(line + "\n").encode())
    assert result.code == code, result
    assert "Traceback" not in result.stderr


def test_an_unreadable_file_or_a_binary_line_is_refused(cli, tmp_path):
    assert cli.subprocess("batch", str(tmp_path / "missing")).code == 2
    result = cli.subprocess("batch", input=b"put q \xff\xfe\n")
    assert result.code == 12 and "not UTF-8" in result.stderr
    assert cli.jsonl("browse", "q") == []


LINES = [
    "put q one -q", "put q two --priority 7 -q", "put q three --priority 9", "put q four --bogus",
    "browse q -o body", "get q -o body", "get q --count 2 -o body", "get q --wait 0 -o body",
    "put q 'five six' --label L -q", "browse q --limit 1 -o body", "queue list -q",
]


def test_each_line_prints_and_exits_as_its_own_process_does(cli, tmp_path):
    """put, get and browse lines run on mqcli/fastpath.py inside a batch and the rest on the
    Typer app: the same stdout and the same error lines as one process a line."""
    import shlex
    import shutil

    shutil.copytree(cli.store, tmp_path / "copy")  # same GUID: the same message ids
    batch = cli.subprocess("batch", "--keep-going", input="\n".join(LINES).encode() + b"\n")
    outs, errors, codes = [], [], []
    for line in LINES:
        one = cli.subprocess("--store", str(tmp_path / "copy"), *shlex.split(line))
        outs.append(one.out)
        errors += [e for e in one.err_lines if e.startswith("mqcli: error:") or e.startswith("Error")]
        codes.append(one.code)
    assert codes[2] == 2 and codes[3] == 2 and codes[7] == 3, codes  # the typer path's usage errors, an empty queue
    first = next(c for c in codes if c)
    assert batch.code == first, batch
    assert batch.out.replace(str(cli.store), "S") == "".join(outs).replace(str(tmp_path / "copy"), "S")
    assert [e for e in batch.err_lines if "[BATCH]" not in e and e.startswith(("mqcli: error:", "Error"))] == errors


def test_a_hash_starts_a_comment_only_where_it_begins_a_word(cli):
    # as in the shell: `order#42` is one word; `# note` and `'#'` are not parts of it
    script = "put q order#42 -q\nput q '#quoted' -q  # a comment\nput q --prop ref=A#7 x -q #another\n"
    assert cli.subprocess("batch", input=script.encode()).code == 0
    messages = cli.jsonl("browse", "q")
    assert [m["body"] for m in messages] == ["order#42", "#quoted", "x"]
    assert messages[2]["props"] == {"ref": "A#7"}


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=" \t\r\n'\"\\ab$é", max_size=16))
def test_a_line_splits_into_the_words_shlex_gives(line):
    try:
        expected: object = shlex.split(line)
    except ValueError:
        expected = ValueError
    try:
        words: object = shell_words.split(line)
    except ValueError:
        words = ValueError
    assert words == expected


def test_an_escaped_blank_before_a_hash_keeps_the_hash_in_its_word():
    # as in the shell (`echo a\ #b` prints `a #b`); a # after a real blank starts a comment
    assert shell_words.split("put q a\\ #b  # note") == ["put", "q", "a #b"]
    assert shell_words.split("  # only a comment") == []


def _commands(text):
    lines = [(n, line) for n, line in enumerate(text.split("\n"), 1)]
    return [(n, shell_words.split(command)) for n, command in _continued(iter(lines))]


@pytest.mark.parametrize("text", ["a\\\n  --priority 7", 'a "x \\\ny" b', "a\\\nb\\\nc", "a\\\n"])
def test_a_backslash_at_a_line_end_continues_the_command_as_in_the_shell(text):
    bash = subprocess.run(["bash", "-c", 'printf "%s\\n" ' + text], capture_output=True, text=True)
    [(number, words)] = _commands(text)
    assert number == 1 and words == bash.stdout.splitlines()


def test_a_backslash_in_a_comment_or_escaped_ends_its_line():
    assert _commands("a # note \\\nb") == [(1, ["a"]), (2, ["b"])]
    assert _commands("a \\\\\nb") == [(1, ["a", "\\"]), (2, ["b"])]


def test_a_line_as_long_as_the_limit_is_split_and_run(cli):
    # a line of the limit is split in time linear in its length (shlex builds a word a character at a time)
    body = "x" * (COMMAND_LINE_CHARS - len("put q  -q"))
    result = cli.subprocess("batch", input=f"put q {body} -q\n".encode())
    assert result.code == 0, result
    assert [m["body"] for m in cli.jsonl("browse", "q")] == [body]


def test_a_batch_read_from_stdin_refuses_commands_that_read_stdin(cli):
    # `put q -` read the batch's next lines as its body; those lines never ran
    script = b"queue create r -q\nput q -\n" + b"".join(b"put r line%d -q\n" % i for i in range(2000))
    result = cli.subprocess("batch", "-k", input=script)
    assert result.code == 2 and "stdin is read by this batch" in result.stderr, result
    assert cli.jsonl("browse", "q") == [] and len(cli.jsonl("browse", "r")) == 2000


def test_a_line_that_is_not_utf8_is_named_and_the_lines_before_it_ran(cli):
    script = b"".join(b"put q m%d -q\n" % i for i in range(999)) + b"put q \xff\n" + b"put q after -q\n"
    result = cli.subprocess("batch", input=b"\xef\xbb\xbf" + script)  # a byte order mark first
    assert result.code == 12 and "line 1000 is not UTF-8" in result.stderr, result
    assert len(cli.jsonl("browse", "q")) == 999


def test_a_line_of_exactly_the_limit_is_taken():

    limit = 10
    assert list(command_lines(io.BytesIO(b"x" * limit + b"\r\n" + b"y" * limit), limit)) == [
        (1, "x" * limit), (2, "y" * limit)]
    with pytest.raises(Exception, match="line 1 is longer than 10 characters"):
        list(command_lines(io.BytesIO(b"x" * (limit + 1) + b"\n"), limit))
    with pytest.raises(Exception, match="line 2 is longer"):
        list(command_lines(io.BytesIO(b"ok\n" + "é".encode() * (4 * limit)), limit))


@pytest.mark.parametrize("line", ["--store {store} batch {inner}", "-q batch {inner}", "-o text batch {inner}"])
def test_a_batch_cannot_run_a_batch_behind_global_options(cli, tmp_path, line):
    inner = tmp_path / "inner"
    inner.write_text("put q inner -q\n")
    script = line.format(store=cli.store, inner=inner) + "\nput q after -q\n"
    result = cli.subprocess("batch", "-k", input=script.encode())
    assert result.code == 2 and "a batch cannot run a batch" in result.stderr, result
    assert [m["body"] for m in cli.jsonl("browse", "q")] == ["after"]


@pytest.mark.parametrize("mode", ["json", "jsonl"])
def test_a_destructive_get_in_a_json_batch_gives_its_messages_in_the_line_object(cli, mode):
    cli.ok("put", "q", "one\ntwo lines", "-q")
    for body in ("b", "c", "d", "e"):
        cli.ok("put", "q", body, "-q")
    script = b"get q\nget q --count 2\nget q --all -o jsonl\nget q\nqueue show q\n"
    result = cli.subprocess("batch", "-k", "-o", mode, input=script)
    assert result.code == 3, result  # the last get found none
    records = json.loads(result.out) if mode == "json" else result.jsonl()
    if mode == "jsonl":
        assert len(result.out.splitlines()) == 5  # a line each, the streamed ones too
    first, two, rest, none, show = records
    assert (first["line"], first["exit"], first["result"]["body"]) == (1, 0, "one\ntwo lines")
    assert [m["body"] for m in two["result"]] == ["b", "c"] and two["exit"] == 0
    assert [m["body"] for m in rest["result"]] == ["d", "e"] and rest["command"] == "get q --all -o jsonl"
    assert none["exit"] == 3 and none["error"]["status"] == "MQ_ERROR_IO_TIMEOUT" and "result" not in none
    assert show["result"]["depth"] == 0


@pytest.mark.parametrize("line, why", [
    ("get q -o body", "writes JSON"), ("-o text get q", "writes JSON"), ("get q --all -o hex", "writes JSON"),
    ("get q --correl-id x -o body --all", "writes JSON"),
    # -o in a cluster, before the command or after it, read as click reads it
    ("-qo body get q --all", "writes JSON"), ("get q -fo body", "writes JSON"), ("get q -qobody", "writes JSON"),
    # what its parser does not read (the command does): --, --help, a value get refuses
    ("-- get q", "without -- or --help"), ("get --help", "without -- or --help"),
    ("get q -qo yaml", "without -- or --help"),
])
def test_a_get_the_batch_cannot_stream_as_json_is_refused_in_a_json_batch(cli, line, why):
    # its messages go out in the line's object as they are removed, which only JSON can be part of
    cli.ok("put", "q", "one", "-q")
    result = cli.subprocess("batch", "-o", "jsonl", input=(line + "\n").encode())
    assert result.code == 2, result
    [record] = result.jsonl()
    assert record["exit"] == 2 and record["error"]["status"] == "USAGE"
    assert why in record["error"]["message"] and "a get in a -o json or jsonl batch" in record["error"]["message"]
    assert [m["body"] for m in cli.jsonl("browse", "q")] == ["one"]


@pytest.mark.parametrize("line, words", [
    ("-qo jsonl get q", ["get", "q"]), ("-qojsonl get q", ["get", "q"]), ("-oq get q", ["get", "q"]),
    ("--store=/s -q -o json get q", ["get", "q"]), ("--store /s get q", ["get", "q"]), ("-- get q", ["get", "q"]),
    ("put q -o", ["put", "q", "-o"]),
])
def test_the_command_of_a_line_is_found_after_its_global_options_as_click_reads_them(line, words):
    assert _command(shlex.split(line)) == words


def _whole_messages(out: bytes) -> list[str]:
    """The bodies of the messages whose JSON object is whole in a batch's cut output."""
    bodies, at = [], 0
    decoder = json.JSONDecoder()
    text = out.decode("utf-8", "replace")
    while True:
        at = text.find('{"msg_id"', at)
        if at < 0:
            return bodies
        try:
            m, at = decoder.raw_decode(text, at)
        except ValueError:
            return bodies
        bodies.append(m["body"])


def _batch_running(cli, mode, script, stdout=subprocess.PIPE):
    """A `mqcli batch -o MODE` process that was given all of `script` on its stdin."""
    batch = subprocess.Popen([*mqcli_command(), "batch", "-o", mode], stdin=subprocess.PIPE, stdout=stdout,
                             stderr=subprocess.PIPE, env={**os.environ, **cli.env})
    batch.stdin.write(script)
    batch.stdin.close()
    batch.stdin = None  # written: communicate() reads the rest
    return batch


@pytest.mark.parametrize("line", ["get q --all", "get q --all --correl-id --tx", "-o json get q --all"])
@pytest.mark.parametrize("mode", ["json", "jsonl"])
def test_a_json_batch_get_whose_reader_goes_away_removes_only_what_was_written(cli, mode, line):
    # the get's messages are removed only once their part of the line's object went out,
    # whatever values its options take (a correl id that reads like an option)
    cli.ok("put", "q", "x" * 200, "--count", "3000", "--correl-id", "--tx", "-q")
    batch = _batch_running(cli, mode, line.encode() + b"\n")
    try:
        out = batch.stdout.read(100_000)  # then the reader goes away
        batch.stdout.close()
        batch.stdout = None
        _, err = batch.communicate(timeout=60)
    finally:
        batch.kill()
    assert batch.returncode == 141, err
    written = len(_whole_messages(out))
    depth = cli.jsonl("queue", "show", "q")[0]["depth"]
    assert 0 < written < 3000 and depth >= 3000 - written, (written, depth)


@pytest.mark.parametrize("read_first", [0, 1100], ids=["nothing-read", "past-the-first-delivery"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_json_batch_get_into_a_stalled_output_stops_at_a_signal_and_loses_nothing(cli, read_first, signum):
    # the reader stops reading at the first delivery or inside the second (whose write, cut by
    # the signal, leaves the get's array to end): the batch ends within the grace either way
    cli.ok("put", "q", "x" * 200, "--count", "3000", "-q")
    batch = _batch_running(cli, "json", b"get q --all\n")
    try:
        out = b""
        while out.count(b'{"msg_id"') < max(read_first, 1):
            chunk = os.read(batch.stdout.fileno(), 65536)
            assert chunk, "the batch ended early"
            out += chunk
        time.sleep(0.5)  # the pipe is full
        batch.send_signal(signum)
        batch.wait(timeout=30)
        out += batch.stdout.read()
        err = batch.stderr.read()
    finally:
        batch.kill()
    assert batch.returncode == 128 + signum, err
    written = len(_whole_messages(out))
    assert written + cli.jsonl("queue", "show", "q")[0]["depth"] >= 3000, written


def test_a_closed_output_stops_a_batch_even_with_keep_going(cli, tmp_path):

    script = tmp_path / "script"
    script.write_text("put q one\n" + "".join(f"put q m{i}\n" for i in range(200)))
    proc = subprocess.Popen([*mqcli_command(), "batch", str(script), "--keep-going"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, **cli.env})
    proc.stdout.readline()
    proc.stdout.close()
    proc.wait(timeout=120)
    assert proc.returncode == 141
    # the lines after the one whose ids could not be printed did not run
    assert len(cli.jsonl("browse", "q")) < 200


def test_check_runs_in_a_batch_after_lines_that_opened_the_store(cli):
    # check opens the store in a forked child, where LMDB refused the batch's open environment
    result = cli.subprocess("batch", input=b"put q a -q\ncheck\nput q b -q\ncheck\n")
    assert result.code == 0, result
    assert result.stderr.count("consistent") == 2
    assert [m["body"] for m in cli.jsonl("browse", "q")] == ["a", "b"]


def test_bench_runs_in_a_batch_after_lines_that_opened_the_store(cli):
    # its producers and consumers open the store in forked children, where LMDB refuses an
    # environment the batch holds open
    result = cli.subprocess("batch", "-o", "jsonl", input=b"put q a -q\nbench -m 200\nput q b -q\n")
    assert result.code == 0, result
    assert result.jsonl()[1]["result"]["messages"] == 200
    assert [m["body"] for m in cli.jsonl("browse", "q")] == ["a", "b"]


@pytest.mark.parametrize("line", ["get q --follow", "browse q --follow --from-start", "consume q --exec 'cat; echo'"])
def test_ctrl_c_in_a_following_command_stops_the_batch(cli, tmp_path, line):
    # a follower or a worker ends at Ctrl-C with exit 0 by itself; the batch ran on to its next lines

    cli.ok("queue", "create", "after")
    script = tmp_path / "script"
    script.write_text(f"{line}\nput after x\n")
    batch = subprocess.Popen([*mqcli_command(), "batch", str(script)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env={**os.environ, **cli.env})
    try:
        cli.ok("put", "q", "m1", "-q")
        assert batch.stdout.readline()  # the follower is following
        batch.send_signal(signal.SIGINT)
        wait_until(lambda: batch.poll() is not None, 60, "the batch to end")
    finally:
        batch.kill()
    assert batch.returncode == 130
    assert cli.jsonl("browse", "after") == []


def test_json_gives_the_line_objects_as_one_array_and_every_error_as_an_object(cli):
    script = b"put q a -q\nput q 'unclosed\nbrowse q -o jsonl\nget nope --confirm-id auto\nput q --lines /nonexistent\n"
    result = cli.subprocess("batch", "-k", "-o", "json", input=script)
    assert result.code == 2, result
    records = json.loads(result.out)  # one document
    assert [(r["line"], r["exit"]) for r in records] == [(1, 0), (2, 2), (3, 0), (4, 6), (5, 2)]
    assert records[1]["error"] == {"status": "USAGE", "code": None, "exit": 2,
                                   "message": "cannot split the line: No closing quotation"}
    assert [m["body"] for m in records[2]["result"]] == ["a"]  # the line's own -o jsonl: a list
    assert records[3]["error"]["status"] == "MQ_ERROR_QUEUE_NOT_AVAILABLE"
    assert all(isinstance(r.get("error", {}), dict) for r in records)


def test_what_a_line_says_on_stderr_besides_its_error_is_kept_as_notes(cli, tmp_path):
    dump = tmp_path / "dump.jsonl"
    cli.ok("put", "q", "once", "-q")
    dump.write_bytes(cli.ok("browse", "q", "-o", "jsonl").stdout)
    result = cli.subprocess("batch", "-o", "jsonl", input=f"put q --jsonl {dump}\n".encode())
    assert result.code == 0, result
    [record] = result.jsonl()
    assert record["notes"] == ["skipped 1 already stored (their msg_ids are in the store; --new-ids stores copies)"]


def test_body_mode_applies_to_every_line(cli):
    cli.ok("put", "q", "first", "-q")
    result = cli.subprocess("batch", "-o", "body", input=b"browse q\nget q\n")
    assert result.code == 0, result
    assert result.out == "first\nfirst\n"  # the bodies alone, as `browse q -o body` prints


def test_with_keep_going_each_failing_line_is_named_in_text(cli):
    result = cli.subprocess("batch", "-k", input=b"get nope\nput q a -q\nget nada\n")
    assert result.code == 6, result
    assert "mqcli: batch: line 1 failed (exit 6): get nope" in result.stderr
    assert "mqcli: batch: line 3 failed (exit 6): get nada" in result.stderr


def test_an_interrupted_line_says_so_once(cli, tmp_path):
    script = tmp_path / "script"
    script.write_text("get q --wait 60\nput q after -q\n")
    batch = subprocess.Popen([*mqcli_command(), "batch", str(script)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env={**os.environ, **cli.env})
    try:
        wait_until(lambda: list((cli.store / "wait").iterdir()), 60, "the get to wait")
        batch.send_signal(signal.SIGINT)
        _, err = batch.communicate(timeout=60)
    finally:
        batch.kill()
    assert (batch.returncode, err) == (130, b"mqcli: error: interrupted [INTERRUPTED]\n")
    assert cli.jsonl("browse", "q") == []


def _ids_in(records):
    """The msg_ids the put lines of a JSON batch printed."""
    ids = []
    for record in records:
        result = record.get("result")
        ids += [m["msg_id"] for m in (result if isinstance(result, list) else [result] if result else [])]
    return ids


@pytest.mark.parametrize("mode", ["json", "jsonl"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_in_a_json_batch_loses_no_line_object_and_is_reported_once(cli, mode, signum):
    # a line whose put committed is in the output whatever moment the signal comes, and the
    # interruption is said once in all
    for delay in (0.0, 0.07, 0.3):
        cli.ok("queue", "delete", "q", "--yes", "-q")
        cli.ok("queue", "create", "q", "-q")
        batch = subprocess.Popen([*mqcli_command(), "batch", "-o", mode], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **cli.env})
        try:
            batch.stdin.write(b"put q x --count 2000\n" * 30)
            batch.stdin.close()
            batch.stdin = None  # written: communicate() reads the rest
            wait_until(lambda: cli.jsonl("queue", "show", "q")[0]["depth"] >= 2000, 60, "a line to commit")
            time.sleep(delay)
            batch.send_signal(signum)
            out, err = batch.communicate(timeout=60)
        finally:
            batch.kill()
        records = json.loads(out) if mode == "json" else [json.loads(line) for line in out.splitlines()]
        depth = cli.jsonl("queue", "show", "q")[0]["depth"]
        assert len(_ids_in(records)) == depth, (delay, err)
        assert batch.returncode == 128 + signum
        said = [r for r in records if r["exit"] == 128 + signum] + err.decode().splitlines()
        assert len(said) == 1, (delay, said)


def test_a_json_batch_whose_output_stalled_stops_on_sigterm_and_names_the_line(cli):
    r, w = os.pipe()  # never read
    batch = _batch_running(cli, "json", b"put q x --count 3000\nqueue show q\n", stdout=w)
    os.close(w)
    try:
        wait_until(lambda: cli.jsonl("queue", "show", "q")[0]["depth"] == 3000, 60, "the put to commit")
        time.sleep(0.5)  # its object is being written into the full pipe
        batch.send_signal(signal.SIGTERM)
        _, err = batch.communicate(timeout=30)
    finally:
        batch.kill()
        os.close(r)
    assert batch.returncode == 143
    assert err.decode().startswith("mqcli: batch: line 1 ran (exit 0); the output stalled, so its object "
                                   "was not written: put q x --count 3000\n"), err


@pytest.mark.parametrize("mode", ["json", "jsonl"])
def test_a_line_whose_own_output_is_jsonl_gives_a_list_however_it_writes_its_o(cli, mode):
    # its -o read as the command reads it: in a cluster, before the command, the last one given
    cli.ok("put", "q", "one", "-q")
    lines = ["browse q -o jsonl", "browse q -qo jsonl", "browse q -qojsonl", "-qo jsonl browse q",
             "queue list -qo jsonl", "-qojsonl queue show q", "queue show q -o json -o jsonl", "queue show q -o jsonl -o json"]
    result = cli.subprocess("batch", "-o", mode, input="\n".join(lines).encode() + b"\n")
    assert result.code == 0, result
    records = json.loads(result.out) if mode == "json" else result.jsonl()
    assert [r["command"] for r in records] == lines
    assert all("output" not in r for r in records), records
    *listed, last = [r["result"] for r in records]
    assert all(isinstance(result, list) for result in listed), listed
    assert [[m["body"] for m in result] for result in listed[:4]] == [["one"]] * 4
    assert isinstance(last, dict) and last["depth"] == 1


@pytest.mark.parametrize("mode", ["json", "jsonl"])
def test_consume_is_refused_in_a_json_batch(cli, mode):
    # the commands it runs write to the batch's own stdout and stderr, between the line objects
    cli.ok("put", "q", "one", "-q")
    script = b"consume q --exec 'cat; echo; echo said >&2' --idle 100ms\n-q consume q --exec cat\nqueue show q\n"
    result = cli.subprocess("batch", "-k", "-o", mode, input=script)
    assert result.code == 2, result
    records = json.loads(result.out) if mode == "json" else result.jsonl()  # the whole output parses
    assert [(r["line"], r["exit"]) for r in records] == [(1, 2), (2, 2), (3, 0)]
    assert all(r["error"]["status"] == "USAGE" and r["error"]["message"].startswith("consume runs commands")
               for r in records[:2])
    assert records[2]["result"]["depth"] == 1 and "said" not in result.err_lines


def test_consume_runs_in_a_text_batch(cli):
    cli.ok("put", "q", "one", "-q")
    result = cli.subprocess("batch", input=b"consume q --exec 'cat; echo' --idle 100ms\n")
    assert result.code == 0, result
    assert result.out == "one\n" and cli.jsonl("browse", "q") == []


@pytest.mark.parametrize("mode", ["json", "jsonl"])
def test_a_line_error_in_a_json_batch_is_its_error_object_whatever_its_own_output(cli, mode):
    # a line's -o text or body makes its output text, and its error still the line's "error"
    script = b"queue show nope -o text\nput nope x -qo body\n-o text get nope --all\n"
    result = cli.subprocess("batch", "-k", "-o", mode, input=script)
    assert result.code == 6, result
    records = json.loads(result.out) if mode == "json" else result.jsonl()
    assert [(r["exit"], r["error"]["status"]) for r in records[:2]] == [(6, "MQ_ERROR_QUEUE_NOT_AVAILABLE")] * 2
    assert all("notes" not in r for r in records), records
    assert records[2]["exit"] == 2  # a get that would not write JSON, refused by the batch
