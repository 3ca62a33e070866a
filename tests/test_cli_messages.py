"""CLI: put, get, browse (with lock), unlock, confirm, undo, delete, move, inflight (docs/design.md#states)."""

import contextlib
import os
import subprocess
import time
from datetime import datetime, timezone

import pytest

from channel_helpers import wait_until
from cli_helpers import BROKEN_OUTPUTS, mqcli_command
from store import NewMessage, Store

# docs/design.md#messages: every field a message shows in JSON, and the ones present only while in flight.
FIELDS = {"msg_id", "lookup_id", "unique_id", "correl_id", "priority", "label", "size", "props",
          "app_specific", "class", "delivery", "queue", "state", "put_time", "expires", "trace",
          "report_queue", "hops", "backouts"}
IN_FLIGHT = {"confirm_id", "lock_id", "tx", "lease_expires"}


def _us(iso: str) -> int:
    dt = datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return int(dt.timestamp()) * 1_000_000 + dt.microsecond


# ---- put ----------------------------------------------------------------------------------


def test_put_prints_the_new_msg_id(cli):
    guid = cli.guid()
    r = cli.ok("put", "q", "hello")
    assert r.out == f"{guid}\\1\n" and r.stderr == ""
    r = cli.ok("put", "q", "again", "--count", "3")
    assert r.out.splitlines() == [f"{guid}\\{n}" for n in (2, 3, 4)]


def test_put_json_prints_one_object(cli):
    doc = cli.ok("put", "q", "hello", "-o", "json").json()
    assert isinstance(doc, dict) and doc["body"] == "hello"


def test_put_json_with_count_prints_an_array(cli):
    docs = cli.ok("put", "q", "x", "--count", "2", "-o", "json").json()
    assert isinstance(docs, list) and len(docs) == 2


def test_get_json_shows_every_spec_field(cli):
    guid = cli.guid()
    cli.ok("queue", "create", "reports", "-q")
    before = int(time.time() * 1_000_000)
    cli.ok("put", "q", "hello", "--priority", "5", "--correl-id", "c-1", "--label", "greeting",
           "--prop", "k=v", "--prop", "a=b=c", "--app-specific", "42", "--ttl", "1h", "--express",
           "--trace", "--report-queue", "reports")
    m = cli.json("get", "q")
    assert isinstance(m, dict)
    assert FIELDS <= m.keys()
    assert not IN_FLIGHT & m.keys()  # only while in flight
    assert "body_b64" not in m
    assert m["msg_id"] == f"{guid}\\1"
    assert m["lookup_id"] == 1  # high byte 0 (not transactional), low bytes SequentialID 1
    assert m["correl_id"] == "c-1" and m["priority"] == 5 and m["label"] == "greeting"
    assert m["body"] == "hello" and m["size"] == 5
    # a traced message keeps its report queue's queue manager, for reports made at later hops
    assert m["props"] == {"k": "v", "a": "b=c", "mqcli.report_qm": cli.json("info")["name"]}
    assert m["app_specific"] == 42 and m["class"] == "normal" and m["delivery"] == "express"
    # [MS-MQQB] 3.1.5.8.9: the report queue as its public format name
    reports_guid = cli.json("queue", "show", "reports")["guid"]
    assert m["queue"] == "q" and m["trace"] is True and m["report_queue"] == f"PUBLIC={reports_guid}"
    assert m["hops"] == 0 and m["backouts"] == 0
    put_us = _us(m["put_time"])
    assert before <= put_us <= int(time.time() * 1_000_000)
    assert m["unique_id"] == f"{guid}:{put_us}"
    assert _us(m["expires"]) - put_us == 3600 * 1_000_000


def test_get_json_defaults_for_a_plain_put(cli):
    cli.put("q", "x")
    m = cli.json("get", "q")
    assert (m["correl_id"], m["priority"], m["label"], m["props"], m["app_specific"]) == (None, 3, "", {}, 0)
    assert (m["class"], m["delivery"], m["expires"], m["trace"], m["report_queue"]) == \
        ("normal", "recoverable", None, False, None)


def test_in_flight_fields_are_shown_while_in_flight(cli):
    cli.put("q", "x")
    m = cli.json("get", "q", "--confirm-id", "42", "--lease", "5m")
    assert FIELDS | IN_FLIGHT <= m.keys()
    assert m["state"] == "get-unconfirmed" and m["confirm_id"] == 42
    assert m["lock_id"] is None and m["tx"] is None
    assert 299 <= (_us(m["lease_expires"]) - time.time() * 1_000_000) / 1e6 <= 300
    [locked] = cli.json("browse", "q", "--state", "all")
    assert locked["confirm_id"] == 42 and locked["state"] == "get-unconfirmed"


def test_a_binary_body_shows_as_body_b64(cli):
    cli.put("q", b"\xff\x00\xfe")
    m = cli.json("get", "q")
    assert "body" not in m and m["body_b64"] == "/wD+" and m["size"] == 3


def test_put_body_from_stdin_and_from_file(cli, tmp_path):
    cli.ok("put", "q", "-", input=b"from stdin")
    f = tmp_path / "body.bin"
    f.write_bytes(b"from\nfile\x00")
    cli.ok("put", "q", "--file", f)
    assert cli.ok("get", "q", "-o", "body", "--delimiter", "").stdout == b"from stdin"
    assert cli.ok("get", "q", "-o", "body", "--delimiter", "").stdout == b"from\nfile\x00"


def test_all_256_byte_values_round_trip_byte_exact_in_process(cli):
    body = bytes(range(256))
    cli.ok("put", "q", "-", input=body)
    assert cli.ok("get", "q", "-o", "body", "--delimiter", "").stdout == body


def test_put_lines_puts_one_message_per_line(cli, tmp_path):
    f = tmp_path / "lines.txt"
    f.write_bytes(b"one\r\ntwo\nthree")
    r = cli.ok("put", "q", "--lines", f, "--priority", "6")
    assert len(r.out.splitlines()) == 3
    got = cli.json("get", "q", "--all")
    assert [m["body"] for m in got] == ["one", "two", "three"]
    assert {m["priority"] for m in got} == {6}
    cli.ok("put", "q", "--lines", "-", input=b"a\nb\n")
    assert cli.ok("get", "q", "--all", "-o", "body").stdout == b"a\nb\n"


def test_put_option_errors_are_usage_errors(cli):
    assert "--prop wants K=V, got 'novalue'" in cli.fails(2, "put", "q", "x", "--prop", "novalue").stderr
    assert "--trace needs --report-queue" in cli.fails(2, "put", "q", "x", "--trace").stderr
    assert "give a BODY" in cli.fails(2, "put", "q").stderr
    assert "not both" in cli.fails(2, "put", "q", "x", "--file", "f").stderr
    assert "invalid ttl '5x'" in cli.fails(2, "put", "q", "x", "--ttl", "5x").stderr
    assert "positive 63-bit" in cli.fails(2, "put", "q", "x", "--confirm-id", "0").stderr
    assert cli.json("queue", "show", "q")["depth"] == 0


# ---- get ----------------------------------------------------------------------------------


def test_get_takes_highest_priority_first_then_fifo(cli):
    for body, prio in (("a", 3), ("b", 7), ("c", 3), ("d", 0), ("e", 7)):
        cli.put("q", body, "--priority", str(prio))
    got = cli.ok("get", "q", "--all", "-o", "body").stdout
    assert got == b"b\ne\na\nc\nd\n"
    cli.fails(3, "get", "q")


def test_get_removes_the_message(cli):
    cli.put("q", "x")
    assert cli.json("get", "q")["body"] == "x"
    assert cli.json("queue", "show", "q")["depth"] == 0


def test_get_text_output_shows_the_fields_and_body(cli):
    m = cli.put("q", "hello", "--correl-id", "c9", "--label", "lbl")
    out = cli.ok("get", "q").out
    assert out == f"msg_id={m['msg_id']} priority=3 size=5 correl_id=c9 label=lbl\nhello\n"


def test_get_count_and_all(cli):
    cli.put("q", "m", "--count", "5")
    assert len(cli.json("get", "q", "--count", "2")) == 2
    assert len(cli.jsonl("get", "q", "--count", "10")) == 3  # fewer than asked is fine
    cli.fails(3, "get", "q", "--all")
    assert "not both" in cli.fails(2, "get", "q", "--count", "1", "--all").stderr


def test_get_filters(cli):
    a = cli.put("q", "a", "--correl-id", "x")
    b = cli.put("q", "b", "--priority", "1")
    c = cli.put("q", "c")
    d = cli.put("q", "d", "--correl-id", "x")
    assert cli.json("get", "q", "--msg-id", c["msg_id"])["body"] == "c"
    assert cli.json("get", "q", "--lookup-id", hex(b["lookup_id"]))["body"] == "b"
    assert [m["body"] for m in cli.json("get", "q", "--correl-id", "x", "--all")] == ["a", "d"]
    cli.fails(3, "get", "q", "--priority", "1")
    assert cli.json("browse", "q") == []
    assert a["correl_id"] == d["correl_id"] == "x"


def test_get_browse_and_move_by_unique_id(cli):
    cli.ok("queue", "create", "q2")
    a, b, c = (cli.put("q", body) for body in "abc")
    assert b["unique_id"] != a["unique_id"]
    assert [m["body"] for m in cli.json("browse", "q", "--unique-id", b["unique_id"])] == ["b"]
    assert cli.json("move", "q", "q2", "--copy", "--unique-id", c["unique_id"]) == {
        "source": "q", "target": "q2", "copied": 1}
    copy = cli.json("get", "q2")  # a copy is a new message: its own ids, naming the original's msg_id
    assert copy["body"] == "c" and copy["unique_id"] != c["unique_id"] and copy["msg_id"] != c["msg_id"]
    assert copy["props"]["mqcli.copy_of"] == c["msg_id"]
    got = cli.json("get", "q", "--unique-id", b["unique_id"], "--count", "5")  # one id, one message
    assert [(m["body"], m["unique_id"]) for m in got] == [("b", b["unique_id"])]
    r = cli.fails(4, "get", "q", "--unique-id", b["unique_id"])
    assert cli.error_line(r) == (f"mqcli: error: no message with unique_id {b['unique_id']} in queue 'q' "
                                 "[MQ_ERROR_MESSAGE_NOT_FOUND]")
    assert "[USAGE]" in cli.fails(2, "get", "q", "--unique-id", "not-an-id").stderr  # refused by the parser
    assert [m["body"] for m in cli.jsonl("get", "q", "--all")] == ["a", "c"]


def test_get_with_unknown_ids_exits_4(cli):
    guid = cli.guid()
    cli.put("q", "x")
    r = cli.fails(4, "get", "q", "--msg-id", f"{guid}\\99")
    assert cli.error_line(r) == (f"mqcli: error: no message with msg_id {guid}\\99 in queue 'q' "
                                 "[MQ_ERROR_MESSAGE_NOT_FOUND]")
    cli.fails(4, "get", "q", "--lookup-id", "999")
    cli.fails(4, "get", "q", "--lock-id", "123")
    assert "invalid lookup id 'zz'" in cli.fails(2, "get", "q", "--lookup-id", "zz").stderr
    assert cli.json("queue", "show", "q")["available"] == 1


def test_browse_by_an_id_that_names_no_message_exits_4_as_get_does(cli):
    guid = cli.guid()
    a = cli.put("q", "x")
    for option, value in (("--msg-id", f"{guid}\\99"), ("--unique-id", f"{guid}:1"), ("--lookup-id", "999")):
        for output in ((), ("-o", "json"), ("-o", "jsonl")):
            browsed = cli.fails(4, "browse", "q", option, value, *output)
            got = cli.fails(4, "get", "q", option, value, *output)
            assert browsed.stdout == b"" and browsed.stderr == got.stderr
    r = cli.fails(4, "browse", "q", "--msg-id", f"{guid}\\99")
    assert cli.error_line(r) == (f"mqcli: error: no message with msg_id {guid}\\99 in queue 'q' "
                                 "[MQ_ERROR_MESSAGE_NOT_FOUND]")
    r = cli.fails(4, "browse", "q", "--msg-id", a["msg_id"], "--where", "priority = 7")  # get's too
    assert cli.error_line(r) == (f"mqcli: error: no message with msg_id {a['msg_id']} and where priority = 7 "
                                 "in queue 'q' [MQ_ERROR_MESSAGE_NOT_FOUND]")
    # a listing that selects nothing is empty
    for selecting in (("--correl-id", "none"), ("--priority", "7"), ("--where", "label = 'none'")):
        assert cli.json("browse", "q", *selecting) == []
    # a message that is there, held or in a state --state leaves out, is there to browse
    lock_id = cli.ok("browse", "q", "--lock", "--msg-id", a["msg_id"]).out.strip()
    assert cli.json("browse", "q", "--msg-id", a["msg_id"]) == []
    locked = cli.json("browse", "q", "--lookup-id", str(a["lookup_id"]), "--state", "all")
    assert [m["lock_id"] for m in locked] == [int(lock_id)]
    cli.ok("unlock", "q", "--lock-id", lock_id)
    assert cli.json("browse", "q", "--unique-id", a["unique_id"], "--state", "tx-locked") == []
    assert [m["body"] for m in cli.json("browse", "q", "--msg-id", a["msg_id"])] == ["x"]


def test_get_names_an_equality_of_its_where_once(cli):
    cli.put("q", "x", "--correl-id", "c")
    r = cli.fails(3, "get", "q", "--where", "priority = 5")
    assert cli.error_line(r) == "mqcli: error: no message with where priority = 5 in queue 'q' [MQ_ERROR_IO_TIMEOUT]"
    r = cli.fails(3, "get", "q", "--where", "correl_id = 'c' AND priority = 5")
    assert cli.error_line(r) == ("mqcli: error: no message with where correl_id = 'c' AND priority = 5 "
                                 "in queue 'q' [MQ_ERROR_IO_TIMEOUT]")
    r = cli.fails(3, "get", "q", "--priority", "4", "--where", "priority = 5")  # two conditions, each once
    assert cli.error_line(r) == ("mqcli: error: no message with priority 4 and where priority = 5 "
                                 "in queue 'q' [MQ_ERROR_IO_TIMEOUT]")


def test_get_on_an_empty_queue_exits_3(cli):
    r = cli.fails(3, "get", "q")
    assert r.stdout == b""
    assert cli.error_line(r) == "mqcli: error: no message in queue 'q' [MQ_ERROR_IO_TIMEOUT]"


def test_get_waits_for_the_given_time(cli):
    t0 = time.monotonic()
    cli.fails(3, "get", "q", "--wait", "300ms")
    assert time.monotonic() - t0 >= 0.25


def test_get_delimiter_escapes(cli):
    cli.put("q", "a")
    cli.put("q", "b")
    cli.put("q", "c")
    assert cli.ok("get", "q", "--count", "2", "-o", "body", "--delimiter", "\\0").stdout == b"a\x00b\x00"
    assert cli.ok("get", "q", "-o", "body", "--delimiter", "\\t--\\n").stdout == b"c\t--\n"


def test_two_phase_get_then_confirm_removes(cli):
    m = cli.put("q", "x")
    got = cli.json("get", "q", "--confirm-id", "42")
    assert got["msg_id"] == m["msg_id"] and got["state"] == "get-unconfirmed"
    cli.fails(3, "get", "q")  # in flight: invisible to plain get and browse
    assert cli.json("browse", "q") == []
    assert cli.json("confirm", "q", "--confirm-id", "42") == {"queue": "q", "confirm_id": 42, "confirmed": 1}
    assert cli.json("queue", "show", "q")["depth"] == 0
    cli.fails(4, "confirm", "q", "--confirm-id", "42")


def test_two_phase_get_then_undo_puts_it_back_with_a_backout(cli):
    m = cli.put("q", "x")
    cli.ok("get", "q", "--confirm-id", "42")
    assert cli.json("undo", "q", "--confirm-id", "42") == {"queue": "q", "undone": 1}
    back = cli.json("get", "q")
    assert back["msg_id"] == m["msg_id"] and back["backouts"] == 1 and back["state"] == "available"


def test_put_with_confirm_id_is_hidden_until_confirmed(cli):
    put = cli.jsonl("put", "q", "--lines", "-", "--confirm-id", "7", input="x\ny\n")
    assert [m["state"] for m in put] == ["put-unconfirmed"] * 2
    cli.fails(3, "get", "q")
    assert cli.json("browse", "q") == []
    assert cli.json("confirm", "q", "--confirm-id", "7")["confirmed"] == 2
    assert cli.ok("get", "q", "--all", "-o", "body").stdout == b"x\ny\n"


def test_put_with_confirm_id_then_undo_deletes_it(cli):
    cli.put("q", "x", "--confirm-id", "7")
    assert cli.json("undo", "q", "--confirm-id", "7")["undone"] == 1
    assert cli.json("queue", "show", "q")["depth"] == 0
    cli.fails(4, "confirm", "q", "--confirm-id", "7")


def test_wrong_confirm_id_exits_4_and_changes_nothing(cli):
    cli.put("q", "x")
    cli.ok("get", "q", "--confirm-id", "42")
    r = cli.fails(4, "confirm", "q", "--confirm-id", "99")
    assert cli.error_line(r) == ("mqcli: error: no message of queue 'q' is pending under confirm id 99 "
                                 "[MQ_ERROR_MESSAGE_NOT_FOUND]")
    cli.fails(4, "undo", "q", "--confirm-id", "99")
    assert [m["state"] for m in cli.json("browse", "q", "--state", "all")] == ["get-unconfirmed"]
    cli.ok("confirm", "q", "--confirm-id", "42")


# ---- browse, browse with lock, unlock -----------------------------------------------------


def test_browse_shows_queue_order_without_taking(cli):
    for body, prio in (("a", 1), ("b", 6), ("c", 1)):
        cli.put("q", body, "--priority", str(prio))
    assert [m["body"] for m in cli.json("browse", "q")] == ["b", "a", "c"]
    assert [m["body"] for m in cli.jsonl("browse", "q", "--limit", "2")] == ["b", "a"]
    assert cli.ok("browse", "q", "-o", "body").stdout == b"b\na\nc\n"
    assert [m["body"] for m in cli.json("browse", "q", "--priority", "1")] == ["a", "c"]
    assert cli.json("queue", "show", "q")["depth"] == 3
    text = cli.ok("browse", "q").out
    assert text.startswith("[1] msg_id=") and "\nb\n" in text


def test_browse_state_shows_in_flight_messages(cli):
    cli.put("q", "a")
    cli.put("q", "b")
    cli.ok("get", "q", "--confirm-id", "3")
    assert [m["body"] for m in cli.json("browse", "q")] == ["b"]
    assert [m["state"] for m in cli.json("browse", "q", "--state", "get-unconfirmed")] == ["get-unconfirmed"]
    assert len(cli.json("browse", "q", "--state", "all")) == 2
    assert len(cli.json("browse", "q", "--state", "available,get-unconfirmed")) == 2
    assert "unknown state" in cli.fails(2, "browse", "q", "--state", "nonsense").stderr


def test_browse_lock_prints_the_lock_id_and_locks_the_matches(cli):
    cli.put("q", "a", "--count", "3")
    r = cli.ok("browse", "q", "--lock", "--limit", "2")
    lock_id = int(r.out)  # stdout is the lock id alone: the data a script needs
    assert 0 < lock_id < 2**63
    assert r.stderr.count("msg_id=") == 2  # the locked messages are shown on stderr
    assert cli.ok("browse", "q", "--lock", "--limit", "1", "-q").stderr == ""
    assert cli.json("browse", "q") == []
    assert [m["state"] for m in cli.json("browse", "q", "--state", "all")] == ["locked-browse"] * 3
    cli.fails(3, "get", "q")


def test_browse_lock_json_shows_the_locked_records(cli):
    cli.put("q", "a", "--count", "2")
    locked = cli.json("browse", "q", "--lock", "--lock-id", "555", "--lease", "1m")
    assert [m["lock_id"] for m in locked] == [555, 555]
    assert {m["state"] for m in locked} == {"locked-browse"}
    assert all(m["lease_expires"] for m in locked)


@pytest.mark.parametrize("mode", ["text", "json", "jsonl"])
@pytest.mark.parametrize("output", BROKEN_OUTPUTS)
def test_browse_lock_whose_lock_id_cannot_be_written_leaves_nothing_locked(cli, mode, output):
    # the lock was committed, the lock id never reached anyone, and with no lease the
    # messages stayed locked-browse for ever, invisible to every get
    cli.put("q", "a", "--count", "3")
    code = cli.into(output, "-o", mode, "browse", "q", "--lock").code
    assert code in (8, 141), code
    assert [m["state"] for m in cli.json("browse", "q", "--state", "all")] == ["available"] * 3


@pytest.mark.parametrize("output", BROKEN_OUTPUTS)
@pytest.mark.parametrize("how", ["one", "count", "lines"])
def test_a_put_whose_ids_cannot_be_written_says_they_were_stored(cli, output, how):
    # exit 8 (or 141) and nothing said: a script retrying on the exit code stored them twice
    args = {"one": ["put", "q", "m"], "count": ["put", "q", "m", "--count", "3"],
            "lines": ["put", "q", "--lines", "-"]}[how]
    r = cli.into(output, *args, input=b"m\nm\nm\n")
    n = 1 if how == "one" else 3
    assert r.code == (8 if output == "/dev/full" else 141), r
    said = "1 message stored; its id could not be written" if n == 1 else \
        "3 messages stored; not all of their ids could be written"
    assert said in r.stderr, r
    assert len(cli.json("browse", "q")) == n


def test_a_bulk_put_stores_no_batch_more_once_its_reader_has_gone(cli):
    # `yes | mqcli put q --lines - | head -1`: the batch read after head went was stored,
    # and then its ids failed to go out
    head = subprocess.Popen(["head", "-1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    put = subprocess.Popen([*mqcli_command(), "put", "q", "--lines", "-"], stdin=subprocess.PIPE,
                           stdout=head.stdin, stderr=subprocess.PIPE, env={**os.environ, **cli.env})
    head.stdin.close()  # put's stdout is head's only writer
    put.stdin.write(b"m\n" * 1000)  # one batch: stored, its ids go to head, which reads one and leaves
    put.stdin.flush()
    assert head.stdout.readline().strip()
    head.wait(timeout=30)
    put.stdin.write(b"m\n" * 1000)  # the next batch: its ids could reach no one
    put.stdin.close()
    stderr = put.stderr.read().decode()
    assert put.wait(timeout=60) == 141, stderr
    assert "1000 messages stored; not all of their ids could be written" in stderr
    assert cli.json("queue", "show", "q")["depth"] == 1000


@pytest.mark.parametrize("output", BROKEN_OUTPUTS)
def test_a_two_phase_put_whose_records_cannot_be_written_says_its_confirm_id(cli, output):
    # with -o json the records alone carried the drawn confirm id: cut, the messages waited
    # put-unconfirmed under an id nobody had (until an operator's undo --all)
    r = cli.into(output, "-o", "json", "put", "q", "m", "--count", "3", "--confirm-id", "auto")
    assert r.code == (8 if output == "/dev/full" else 141), r
    [pending] = {m["confirm_id"] for m in cli.json("browse", "q", "--state", "put-unconfirmed")}
    assert (f"3 messages stored, put-unconfirmed under confirm id {pending} (`mqcli confirm q --confirm-id "
            f"{pending}`, or `mqcli undo q --confirm-id {pending}`); not all of their ids could be written") in r.stderr
    cli.ok("confirm", "q", "--confirm-id", pending)
    assert len(cli.json("browse", "q")) == 3


@pytest.mark.parametrize("command", [["get", "q", "--all", "-o", "body"], ["put", "q", "--lines", "-"]])
def test_a_terminal_that_hangs_up_is_a_closed_output_not_a_bug(cli, command):
    # writing to a terminal that hung up (a closed ssh session) fails with EIO: exit 1
    # "internal error", and a put said nothing of the messages it had stored
    import pty

    lines = b"y" * 2000 + b"\n"
    if command[0] == "get":
        cli.ok("put", "q", "--lines", "-", input=lines * 3000)
    master, slave = pty.openpty()
    proc = subprocess.Popen([*mqcli_command(), *command], stdin=subprocess.PIPE, stdout=slave,
                            stderr=subprocess.PIPE, env={**os.environ, **cli.env}, start_new_session=True)
    os.close(slave)
    if command[0] == "put":
        proc.stdin.write(lines * 1000)  # a batch: stored, its ids written to the terminal
        proc.stdin.flush()
    got = b""
    while len(got) < 20000:
        got += os.read(master, 4096)
    os.close(master)  # the terminal hangs up
    with contextlib.suppress(BrokenPipeError):  # the put may have gone already
        if command[0] == "put":
            proc.stdin.write(lines * 1000)
        proc.stdin.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert "internal error" not in err, err
    if command[0] == "put":
        assert "messages stored; not all of their ids could be written" in err, err


@pytest.mark.parametrize("copy", [False, True])
def test_a_move_whose_later_batch_fails_says_what_the_earlier_ones_moved(cli, copy):
    # it moves 1,000 messages a commit: a later batch refused (the target's quota) printed only
    # the error, and a script retrying on exit 7 copied the first 1,000 again
    cli.ok("queue", "create", "r", "--quota", "1500", "-q")
    with Store.open(cli.store) as st:
        st.put_many("q", [NewMessage(b"m") for _ in range(2500)])
    r = cli("-o", "json", "move", "q", "r", *(["--copy"] if copy else []))
    assert r.code == 7, r
    assert r.json() == {"source": "q", "target": "r", "copied" if copy else "moved": 1000, "failed": True}
    assert cli.json("queue", "show", "r")["depth"] == 1000
    assert cli.json("queue", "show", "q")["depth"] == (2500 if copy else 1500)


@pytest.mark.parametrize("output", BROKEN_OUTPUTS)
def test_a_move_whose_summary_cannot_be_written_says_it_moved(cli, output):
    cli.ok("queue", "create", "r", "-q")
    cli.put("q", "a", "--count", "2")
    r = cli.into(output, "move", "q", "r")
    assert r.code == (8 if output == "/dev/full" else 141), r
    assert "2 messages moved from 'q' to 'r'; the summary could not be written" in r.stderr, r
    assert len(cli.json("browse", "r")) == 2


def test_browse_lock_killed_while_its_output_stalls_leaves_nothing_locked(cli):
    # the lock was committed before its id went out: a SIGKILL while the output stalled (the
    # OOM killer, timeout -s KILL) left the messages locked-browse for good, the id nowhere
    with Store.open(cli.store) as st:
        st.put_many("q", [NewMessage(b"y" * 2000) for _ in range(200)])
    r, w = os.pipe()  # nobody reads: the records stall in it
    proc = subprocess.Popen([*mqcli_command(), "-o", "jsonl", "browse", "q", "--lock"], stdout=w,
                            stderr=subprocess.PIPE, env={**os.environ, **cli.env})
    os.close(w)
    try:
        wait_until(lambda: any(m["state"] == "get-unconfirmed" for m in cli.json("inflight", "q")), 30,
                   "the browse to hold its messages")
        time.sleep(0.2)  # writing, stalled
    finally:
        proc.kill()
        proc.wait(timeout=30)
        os.close(r)
    cli.ok("sweep", "-q")  # any write finds the dead holder and gives its messages back
    assert {m["state"] for m in cli.json("browse", "q", "--state", "all")} == {"available"}
    assert len(cli.json("browse", "q")) == 200


def test_a_lock_id_taken_while_its_browse_writes_goes_to_one_holder(cli):
    # the browse holds its messages until its id is out; another browse naming the same id
    # meanwhile takes it: the first gives its messages back (exit 5) rather than share the id
    with Store.open(cli.store) as st:
        st.put_many("q", [NewMessage(b"y" * 2000) for _ in range(200)])
    r, w = os.pipe()
    first = subprocess.Popen([*mqcli_command(), "-o", "jsonl", "browse", "q", "--lock", "--lock-id", "55",
                              "--limit", "150"], stdout=w, stderr=subprocess.PIPE, env={**os.environ, **cli.env})
    os.close(w)
    try:
        wait_until(lambda: any(m["state"] == "get-unconfirmed" for m in cli.json("inflight", "q")), 30,
                   "the first browse to hold its messages")
        cli.ok("browse", "q", "--lock", "--lock-id", "55", "--limit", "10", "-q")
        with os.fdopen(r, "rb") as out:
            out.read()
        _, err = first.communicate(timeout=60)
    finally:
        first.kill()
    assert first.returncode == 5 and b"lock id 55 was taken in queue 'q'" in err, err
    states = [(m["state"], m.get("lock_id")) for m in cli.json("browse", "q", "--state", "all")]
    assert states.count(("locked-browse", 55)) == 10 and states.count(("available", None)) == 190


def test_browse_lock_on_an_empty_queue_exits_3(cli):
    r = cli.fails(3, "browse", "q", "--lock")
    assert r.stdout == b""


def test_browse_lock_options_need_lock(cli):
    assert "go with --lock" in cli.fails(2, "browse", "q", "--lock-id", "5").stderr
    assert "does not go with --lock" in cli.fails(2, "browse", "q", "--lock", "--state", "all").stderr


def test_unlock_makes_locked_messages_available(cli):
    cli.put("q", "a", "--count", "2")
    lock_id = cli.ok("browse", "q", "--lock", "-q").out.strip()
    assert cli.json("unlock", "q", "--lock-id", lock_id) == {"queue": "q", "lock_id": int(lock_id), "unlocked": 2}
    assert len(cli.json("browse", "q")) == 2
    r = cli.fails(4, "unlock", "q", "--lock-id", lock_id)
    assert cli.error_line(r) == (f"mqcli: error: no message of queue 'q' is locked under lock id {lock_id} "
                                 "[MQ_ERROR_MESSAGE_NOT_FOUND]")


def test_undo_lock_id_unlocks(cli):
    cli.put("q", "a")
    lock_id = cli.ok("browse", "q", "--lock", "-q").out.strip()
    assert cli.json("undo", "q", "--lock-id", lock_id)["undone"] == 1
    assert len(cli.json("browse", "q")) == 1


def test_get_with_lock_id_takes_the_locked_message(cli):
    m = cli.put("q", "a")
    cli.put("q", "b")
    lock_id = cli.ok("browse", "q", "--lock", "--limit", "1", "-q").out.strip()
    assert cli.json("get", "q", "--lock-id", lock_id)["msg_id"] == m["msg_id"]
    assert [x["body"] for x in cli.json("browse", "q", "--state", "all")] == ["b"]


def test_get_with_lock_id_and_confirm_id_then_undo_returns_to_the_lock(cli):
    cli.put("q", "a")
    lock_id = cli.ok("browse", "q", "--lock", "-q").out.strip()
    got = cli.json("get", "q", "--lock-id", lock_id, "--confirm-id", "9")
    assert got["state"] == "browse-get-unconfirmed" and got["lock_id"] == int(lock_id) and got["confirm_id"] == 9
    cli.ok("undo", "q", "--confirm-id", "9")
    assert [m["state"] for m in cli.json("browse", "q", "--state", "all")] == ["locked-browse"]
    cli.ok("unlock", "q", "--lock-id", lock_id)
    assert [m["state"] for m in cli.json("browse", "q")] == ["available"]


def test_a_message_held_by_a_lock_exits_5(cli):
    m = cli.put("q", "a")
    cli.ok("browse", "q", "--lock", "-q")
    r = cli.fails(5, "delete", "q", "--msg-id", m["msg_id"])
    assert "[MQ_ERROR_MESSAGE_ALREADY_RECEIVED]" in r.stderr
    cli.fails(5, "get", "q", "--msg-id", m["msg_id"])


# ---- delete -------------------------------------------------------------------------------


def test_delete_removes_one_message_by_msg_id(cli):
    a = cli.put("q", "a")
    cli.put("q", "b")
    assert cli.json("delete", "q", "--msg-id", a["msg_id"]) == {"queue": "q", "msg_id": a["msg_id"], "deleted": True}
    assert [m["body"] for m in cli.json("browse", "q")] == ["b"]
    cli.fails(4, "delete", "q", "--msg-id", a["msg_id"])
    assert "[MQ_ERROR_BAD_DATA]" in cli.fails(12, "delete", "q", "--msg-id", "not-an-id").stderr


def test_delete_a_locked_message_with_its_lock_id(cli):
    m = cli.put("q", "a")
    lock_id = cli.ok("browse", "q", "--lock", "-q").out.strip()
    cli.ok("delete", "q", "--msg-id", m["msg_id"], "--lock-id", lock_id)
    assert cli.json("queue", "show", "q")["depth"] == 0


# ---- undo for operators -------------------------------------------------------------------


def test_undo_needs_exactly_one_selector(cli):
    msg = "mqcli: error: give exactly one of --confirm-id, --lock-id, --older-than and --all [USAGE]"
    assert cli.error_line(cli.fails(2, "undo", "q")) == msg
    assert cli.error_line(cli.fails(2, "undo", "q", "--all", "--confirm-id", "1")) == msg
    assert "need the QUEUE" in cli.fails(2, "undo", "--confirm-id", "1").stderr
    assert "invalid age '5x'" in cli.fails(2, "undo", "--older-than", "5x").stderr


def test_undo_older_than_undoes_only_old_in_flight_messages(cli):
    old = cli.put("q", "old")
    cli.put("q", "new")
    with Store.open(cli.store, clock=lambda: time.time() - 3600) as st:
        st.get("q", wait=0, msg_id=old["msg_id"], confirm_id=1)
    cli.ok("get", "q", "--confirm-id", "2")
    assert cli.json("undo", "--older-than", "30m")["undone"] == 1
    assert [m["msg_id"] for m in cli.json("browse", "q")] == [old["msg_id"]]
    assert [m["confirm_id"] for m in cli.json("inflight")] == [2]


def test_undo_all_undoes_every_in_flight_message(cli):
    cli.ok("queue", "create", "r", "-q")
    cli.put("q", "a", "--count", "2")
    cli.put("r", "b")
    cli.ok("get", "q", "--confirm-id", "1")
    cli.ok("browse", "q", "--lock", "-q")
    cli.ok("get", "r", "--confirm-id", "2")
    assert cli.json("undo", "q", "--all") == {"queue": "q", "undone": 2, "discarded": 0}
    assert [m["queue"] for m in cli.json("inflight")] == ["r"]
    assert cli.json("undo", "--all") == {"queue": None, "undone": 1, "discarded": 0}
    assert cli.json("inflight") == []


def test_undo_all_says_how_many_of_the_undone_were_puts_it_removed(cli):
    # an undone put awaiting its confirm is removed (MQe), a get is given back: {"undone": 2}
    # while the depth grew by 1 did not add up
    cli.put("q", "got")
    cli.ok("get", "q", "--confirm-id", "1")
    cli.ok("put", "q", "pending", "--confirm-id", "2")
    assert cli.json("undo", "q", "--all") == {"queue": "q", "undone": 2, "discarded": 1}
    assert [m["body"] for m in cli.json("browse", "q", "--state", "all")] == ["got"]


# ---- move ---------------------------------------------------------------------------------


def test_move_moves_available_messages_keeping_ids(cli):
    cli.ok("queue", "create", "r", "-q")
    ids = [cli.put("q", b)["msg_id"] for b in ("a", "b", "c")]
    assert cli.json("move", "q", "r", "--count", "2") == {"source": "q", "target": "r", "moved": 2}
    moved = cli.json("browse", "r")
    assert [m["msg_id"] for m in moved] == ids[:2] and {m["queue"] for m in moved} == {"r"}
    assert [m["msg_id"] for m in cli.json("browse", "q")] == ids[2:]


def test_move_copy_keeps_the_source(cli):
    cli.ok("queue", "create", "r", "-q")
    src = [cli.put("q", b, "--correl-id", b) for b in ("a", "b")]
    assert cli.json("move", "q", "r", "--copy")["copied"] == 2
    copies = cli.json("browse", "r")
    assert [m["props"]["mqcli.copy_of"] for m in copies] == [m["msg_id"] for m in src]
    assert not {m["msg_id"] for m in copies} & {m["msg_id"] for m in src}
    assert [m["body"] for m in copies] == ["a", "b"]
    assert len(cli.json("browse", "q")) == 2


def test_move_dry_run_counts_and_changes_nothing(cli):
    cli.ok("queue", "create", "r", "-q")
    cli.put("q", "a", "--count", "3")
    cli.put("q", "z", "--correl-id", "only")
    assert cli.json("move", "q", "r", "--dry-run") == {"source": "q", "target": "r", "would_move": 4, "dry_run": True}
    assert cli.json("move", "q", "r", "--dry-run", "--correl-id", "only")["would_move"] == 1
    assert cli.json("queue", "show", "r")["depth"] == 0 and cli.json("queue", "show", "q")["depth"] == 4
    cli.fails(6, "move", "q", "nope", "--dry-run")


def test_a_move_to_the_same_queue_by_another_name_is_refused(cli):
    # 'move q DIRECT=OS:.\\q' moved q's messages to its own end for ever ("moved 459000" of 2,500);
    # with --copy to PUBLIC=<q's guid> the queue grew without end
    cli.put("q", "a", "--count", "3")
    guid = cli.json("queue", "show", "q")["guid"]
    for other in ("DIRECT=OS:.\\q", f"PUBLIC={guid}", "Q"):
        for args in ([], ["--copy"], ["--dry-run"]):
            r = cli.fails(2, "move", "q", other, *args)
            assert "source and target are the same queue" in cli.error_line(r), (other, args)
    assert [m["body"] for m in cli.json("browse", "q")] == ["a"] * 3


def test_move_with_a_filter_and_to_a_missing_queue(cli):
    cli.ok("queue", "create", "r", "-q")
    cli.put("q", "a")
    cli.put("q", "z", "--correl-id", "only")
    assert cli.json("move", "q", "r", "--correl-id", "only")["moved"] == 1
    assert [m["body"] for m in cli.json("browse", "r")] == ["z"]
    cli.fails(6, "move", "q", "nope")
    assert [m["body"] for m in cli.json("browse", "q")] == ["a"]


def test_move_leaves_in_flight_messages(cli):
    cli.ok("queue", "create", "r", "-q")
    cli.put("q", "a", "--count", "2")
    cli.ok("get", "q", "--confirm-id", "1")
    assert cli.json("move", "q", "r")["moved"] == 1
    assert [m["state"] for m in cli.json("browse", "q", "--state", "all")] == ["get-unconfirmed"]


# ---- inflight -----------------------------------------------------------------------------


def test_inflight_lists_locked_and_unconfirmed_messages(cli):
    cli.ok("queue", "create", "r", "-q")
    a = cli.put("q", "a")
    cli.put("q", "b")
    cli.put("r", "c")
    cli.ok("get", "q", "--confirm-id", "11", "--lease", "1m")
    lock_id = int(cli.ok("browse", "q", "--lock", "-q").out)
    cli.put("r", "d", "--confirm-id", "12")
    rows = cli.json("inflight")
    assert [(r["queue"], r["state"]) for r in rows] == [
        ("q", "get-unconfirmed"), ("q", "locked-browse"), ("r", "put-unconfirmed")]
    first = rows[0]
    assert first["msg_id"] == a["msg_id"] and first["confirm_id"] == 11 and first["lock_id"] is None
    assert first["lease_expires"].endswith("Z") and 0 < float(first["lease_left"].rstrip("s")) <= 60
    assert first["since"].endswith("Z") and first["age_s"] >= 0
    assert rows[1]["lock_id"] == lock_id and rows[1]["lease_left"] is None
    assert [r["state"] for r in cli.json("inflight", "q")] == ["get-unconfirmed", "locked-browse"]
    text = cli.ok("inflight").out
    assert "get-unconfirmed" in text and str(lock_id) in text
    assert cli.json("inflight", "dead-letter") == []
    cli.fails(6, "inflight", "nope")


# ---- leases, poison messages, journal, format names ---------------------------------------


def test_a_lapsed_lease_is_undone_on_the_next_access(cli):
    m = cli.put("q", "a")
    with Store.open(cli.store, clock=lambda: time.time() - 3600) as st:
        st.get("q", wait=0, confirm_id=5, lease=60)
    got = cli.json("get", "q")
    assert got["msg_id"] == m["msg_id"] and got["backouts"] == 1
    cli.fails(4, "confirm", "q", "--confirm-id", "5")


@pytest.mark.parametrize("args", [["get", "q", "--confirm-id", "5", "--lease", "0.0001ms"],
                                  ["put", "q", "b", "--confirm-id", "5", "--lease", "0.0001ms"],
                                  ["browse", "q", "--lock", "--lease", "0.0001ms"],
                                  ["tx", "begin", "--timeout", "0.0001ms"]])
def test_a_lease_or_timeout_below_a_microsecond_is_refused_not_taken_for_none(cli, args):
    # it was stored as 0 µs, which reads as no lease: the message stayed held until an undo
    cli.put("q", "a")
    r = cli.fails(2, *args)
    assert "must be at least a microsecond" in cli.error_line(r)
    assert cli.json("inflight") == [] and cli.json("tx", "list") == []
    assert [m["body"] for m in cli.json("browse", "q")] == ["a"]


def test_a_message_undone_max_backouts_times_goes_to_the_dead_letter_queue(cli):
    cli.ok("queue", "set", "q", "--max-backouts", "2", "-q")
    m = cli.put("q", "poison")
    for _ in range(2):
        cli.ok("get", "q", "--confirm-id", "1", "-q")
        cli.ok("undo", "q", "--confirm-id", "1", "-q")
    cli.fails(3, "get", "q")
    [dead] = cli.json("browse", "dead-letter")
    assert dead["msg_id"] == m["msg_id"] and dead["backouts"] == 2
    assert dead["dead_letter_reason"] == "max-backouts" and dead["original_queue"] == "q"


def test_move_out_of_the_dead_letter_queue_starts_fresh_so_one_undo_does_not_send_it_back(cli):
    cli.ok("queue", "set", "q", "--max-backouts", "2", "-q")
    m = cli.put("q", "poison")
    for _ in range(2):
        cli.ok("get", "q", "--confirm-id", "1", "-q")
        cli.ok("undo", "q", "--confirm-id", "1", "-q")
    assert cli.json("move", "dead-letter", "q") == {"source": "dead-letter", "target": "q", "moved": 1}
    (back,) = cli.json("browse", "q")
    assert back["msg_id"] == m["msg_id"] and back["backouts"] == 0
    assert "dead_letter_reason" not in back and "original_queue" not in back  # not a dead letter
    cli.ok("get", "q", "--confirm-id", "1", "-q")
    cli.ok("undo", "q", "--confirm-id", "1", "-q")
    assert [d["backouts"] for d in cli.json("browse", "q")] == [1]
    assert cli.json("browse", "dead-letter") == []
    assert cli.ok("check").code == 0


def test_a_binary_body_in_text_mode_says_how_to_see_it(cli):
    cli.put("q", b"\xff\xfe")
    assert cli.ok("get", "q").out.endswith("\n<2 bytes, not UTF-8: use -o body or -o json>\n")


def test_journal_keeps_a_copy_of_each_got_message(cli):
    cli.ok("queue", "create", "j", "--journal", "-q")
    m = cli.put("j", "a")
    cli.ok("get", "j", "-q")
    assert [x["msg_id"] for x in cli.json("browse", "j;journal")] == [m["msg_id"]]


def test_format_names_name_local_queues(cli):
    guid = cli.guid()
    queue_guid = cli.json("queue", "show", "q")["guid"]
    cli.ok("put", "q", "a", "-q")
    assert cli.json("browse", f"PUBLIC={queue_guid}")[0]["body"] == "a"
    assert cli.json("browse", "DIRECT=OS:.\\q")[0]["body"] == "a"
    assert cli.json("browse", f"MACHINE={guid};DEADLETTER") == []
