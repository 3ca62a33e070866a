"""`mqcli batch`: commands one per line in one process against one open store (like runmqsc):
shell quoting, comments, a failing line, --keep-going, -o jsonl, and exit codes."""

import pytest

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
                            input=b"put q 'a b'\nget nope\nbrowse q --limit 1\n# none\nqueue show q\n")
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
