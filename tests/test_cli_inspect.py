"""Inspection output and your own JSONL through the command line: `-o hex` (a header block and
a hex dump per message), `--format TEMPLATE` (binary-safe), and `put --jsonl` of records with
any subset of the fields, where a bad line stores nothing (README.md: Inspecting messages,
Your own JSONL)."""

import base64
import json
import os
import re
import subprocess
import time
from datetime import datetime, timezone

import pytest

from cli_helpers import mqcli_command
from store import NewMessage, Store

ALL_BYTES = bytes(range(256))
DUMP_LINE = re.compile(r"^([0-9a-f]{8})  ((?:[0-9a-f]{2} ){0,7}[0-9a-f]{2})? *((?:[0-9a-f]{2} ?){0,8}) *\|(.*)\|$")


def undump(text):
    """The bytes a hex dump shows (each line's offset checked), and its closing offset."""
    data = b""
    end = None
    for line in text.splitlines():
        m = DUMP_LINE.match(line)
        if m:
            assert int(m.group(1), 16) == len(data), line
            chunk = bytes.fromhex((m.group(2) or "") + " " + m.group(3))
            assert m.group(4) == "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk), line
            data += chunk
        elif re.fullmatch(r"[0-9a-f]{8}", line):
            end = int(line, 16)
    return data, end


def blocks(text):
    """Each message of `-o hex` output: (header fields, body bytes)."""
    out = []
    for part in re.split(r"^---- message \d+ ----\n", text, flags=re.M)[1:]:
        head, _, dump = part.partition("\n\n")
        fields = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in head.splitlines())
        body, end = undump(dump)
        assert end == len(body)
        out.append((fields, body))
    return out


def test_hex_shows_each_messages_fields_then_its_binary_body(cli):
    first = cli.put("q", ALL_BYTES, "--prop", "region=eu", "--label", "bin", "--correl-id", "c1", "-p", "6")
    cli.put("q", b"", "--prop", "region=us")
    shown = blocks(cli.ok("browse", "q", "-o", "hex").out)
    assert [body for _, body in shown] == [ALL_BYTES, b""]
    fields = shown[0][0]
    assert fields["msg_id"] == first["msg_id"] and fields["correl_id"] == "c1"
    assert (fields["priority"], fields["label"], fields["size"]) == ("6", "bin", "256")
    assert fields["props.region"] == "eu" and fields["put_time"] == first["put_time"]
    assert shown[1][0]["correl_id"] == "-" and shown[1][0]["props.region"] == "us"
    # get -o hex takes what it shows
    assert [body for _, body in blocks(cli.ok("get", "q", "--all", "-o", "hex").out)] == [ALL_BYTES, b""]
    assert cli.jsonl("browse", "q") == []


def test_hex_of_one_get_is_one_block(cli):
    cli.put("q", b"\x00\x01hello\xff")
    out = cli.ok("get", "q", "-o", "hex").out
    assert out.startswith("---- message ----\n")
    assert undump(out.partition("\n\n")[2]) == (b"\x00\x01hello\xff", 8)


def _header_of(record):
    """The header fields `-o hex` shows for a `-o json` record: every key but the body, each
    property as props.NAME."""
    return set(record) - {"body", "body_b64", "props"} | {f"props.{k}" for k in record["props"]}


def test_hex_shows_every_field_json_has(cli):
    cli.ok("queue", "create", "R", "-q")
    cli.put("q", "traced", "--trace", "--report-queue", "R", "--no-dead-letter", "-p", "5")
    held = cli.put("q", "held")
    cli.put("q", "late", "--ttl", "1ms")
    time.sleep(0.01)
    cli.ok("sweep", "-q")
    lock_id = cli.ok("browse", "q", "--lock", "--msg-id", held["msg_id"], "--lease", "1h").out.strip()
    for browse in (("browse", "q", "--state", "all"), ("browse", "dead-letter")):
        records = cli.json(*browse)
        shown = [fields for fields, _ in blocks(cli.ok(*browse, "-o", "hex").out)]
        assert [_header_of(r) for r in records] == [set(fields) for fields in shown]
        assert [f["msg_id"] for f in shown] == [r["msg_id"] for r in records]
    traced, locked = blocks(cli.ok("browse", "q", "--state", "all", "-o", "hex").out)
    report_queue = cli.json("browse", "q", "--priority", "5")[0]["report_queue"]
    assert (traced[0]["trace"], traced[0]["report_queue"], traced[0]["dead_letter"]) == ("yes", report_queue, "no")
    assert (locked[0]["trace"], locked[0]["report_queue"], locked[0]["dead_letter"]) == ("no", "-", "yes")
    assert (locked[0]["state"], locked[0]["lock_id"], locked[0]["confirm_id"]) == ("locked-browse", lock_id, "-")
    (dead, _), = blocks(cli.ok("browse", "dead-letter", "-o", "hex").out)
    assert (dead["dead_letter_reason"], dead["dead_letter_status"], dead["original_queue"]) == (
        "expired", "MQ_ERROR_MESSAGE_TIMED_OUT", "q")
    assert dead["props.mqcli.dead_letter_time"] >= dead["put_time"]


def test_format_writes_fields_and_binary_bodies_as_bytes(cli):
    a = cli.put("q", b"\x00\xff\nA", "--prop", "region=eu", "--correl-id", "c1", "--label", "L")
    b = cli.put("q", b"plain")
    template = r"{msg_id}\t{priority}|{label}|{correl_id}|{props.region}|{size}|{backouts}\0{body}\0{body_hex}{{x}}\n"
    out = cli.ok("browse", "q", "--format", template).stdout
    assert out == (f"{a['msg_id']}\t3|L|c1|eu|4|0".encode() + b"\0\x00\xff\nA\0" + b"00ff0a41{x}\n"
                   + f"{b['msg_id']}\t3||||5|0".encode() + b"\0plain\0" + b"706c61696e{x}\n")
    assert cli.ok("browse", "q", "--format", "{put_time}\n", "-n", "1").out == a["put_time"] + "\n"
    # get --format takes the messages it writes
    assert cli.ok("get", "q", "--all", "--format", "{body}|").stdout == b"\x00\xff\nA|plain|"
    assert cli.jsonl("browse", "q") == []


@pytest.mark.parametrize("command", [["get", "q"], ["get", "q", "--all"], ["browse", "q"]])
def test_an_unknown_placeholder_is_a_usage_error_before_anything_is_taken(cli, command):
    cli.put("q", "keep me")
    result = cli.fails(2, *command, "--format", "{msg_id} {nope}\n")
    assert "unknown placeholder {nope}" in cli.error_line(result)
    assert result.stdout == b""
    assert [m["body"] for m in cli.jsonl("browse", "q")] == ["keep me"]


@pytest.mark.parametrize("template, said", [("{body", "is not closed"), ("}", "a lone '}'"),
                                            (r"\q{body}", "is not an escape")])
def test_a_malformed_template_is_a_usage_error(cli, template, said):
    assert said in cli.error_line(cli.fails(2, "browse", "q", "--format", template))


def test_format_and_an_output_mode_do_not_go_together(cli):
    cli.put("q", "x")
    assert "--format" in cli.error_line(cli.fails(2, "get", "q", "--format", "{body}", "-o", "body"))
    assert len(cli.jsonl("browse", "q")) == 1


# ---- put --jsonl: your own records --------------------------------------------------------

EVERY_FIELD = {"body_b64": base64.b64encode(ALL_BYTES).decode(), "priority": 6, "label": "full",
               "correl_id": "order-17", "props": {"region": "eu", "k": ""}, "ttl": "10m",
               "app_specific": -7, "express": True}


def lines(*records):
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records).encode()


def test_minimal_records_and_one_with_every_field(cli):
    expires = "2031-02-03T04:05:06.000007Z"
    put = cli.ok("put", "q", "--jsonl", "-", "-o", "jsonl",
                 input=lines({}, {"body": "just a body"}, EVERY_FIELD, {"body": "e", "expires": expires},
                             {"body": "n", "ttl": 30, "correl_id": None, "expires": None})).jsonl()
    got = {m["msg_id"]: m for m in cli.jsonl("browse", "q")}
    assert len(put) == 5 and set(got) == {m["msg_id"] for m in put}
    empty, plain, full, until, number = (got[m["msg_id"]] for m in put)
    assert (empty["body"], empty["priority"], empty["label"], empty["correl_id"], empty["props"]) == ("", 3, "", None, {})
    assert (empty["expires"], empty["app_specific"], empty["delivery"]) == (None, 0, "recoverable")
    assert plain["body"] == "just a body"
    assert base64.b64decode(full["body_b64"]) == ALL_BYTES
    assert (full["priority"], full["label"], full["correl_id"], full["props"]) == (6, "full", "order-17", EVERY_FIELD["props"])
    assert (full["app_specific"], full["delivery"]) == (-7, "express")
    ttl = _us(full["expires"]) - _us(full["put_time"])
    assert 600_000_000 - 5_000_000 <= ttl <= 600_000_000  # expires counted from the put
    assert until["expires"] == expires
    assert 25_000_000 <= _us(number["expires"]) - _us(number["put_time"]) <= 30_000_000
    assert [m["msg_id"] for m in cli.jsonl("browse", "q", "--where", "correl_id = 'order-17'")] == [full["msg_id"]]


def _us(text):
    dt = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return int(dt.timestamp()) * 1_000_000 + dt.microsecond


def test_replayed_and_new_records_mix_in_input_order(cli):
    kept = cli.put("q", "old", "--prop", "a=1")
    dump = cli.ok("get", "q", "-o", "jsonl").stdout
    cli.ok("queue", "create", "r", "-q")
    out = cli.ok("put", "r", "--jsonl", "-", input=lines({"body": "first"}) + dump + lines({"body": "last"})).out
    ids = out.split()
    assert len(ids) == 3 and ids[1] == kept["msg_id"]
    assert [(m["msg_id"], m["body"]) for m in cli.jsonl("browse", "r")] == list(zip(ids, ["first", "old", "last"]))
    # replayed again: the record whose msg_id is stored is skipped, the new ones are put
    again = cli.ok("put", "r", "--jsonl", "-", input=lines({"body": "new"}) + dump)
    assert len(again.out.split()) == 1 and "skipped 1 already stored" in again.stderr


BAD = [
    ({"body": "x", "prio": 3}, "field 'prio' is unknown"),
    ({"body": "x", "priority": "5"}, "field 'priority' must be an integer"),
    ({"body": "x", "priority": True}, "field 'priority' must be an integer"),
    ({"body": "x", "priority": 9}, "priority must be an int 0..7"),
    ({"body": 5}, "field 'body' must be a string"),
    ({"body": "x", "props": {"a": 1}}, "field 'props' must map names to strings"),
    ({"body": "x", "express": "yes"}, "field 'express' must be true or false"),
    ({"body": "x", "ttl": "5 parsecs"}, "field 'ttl'"),
    ({"body": "x", "ttl": 0}, "field 'ttl' must be a positive duration"),
    ({"body": "x", "ttl": "1m", "expires": "2031-01-01T00:00:00Z"}, "either 'ttl' or 'expires'"),
    ({"body": "x", "expires": "2001-01-01T00:00:00Z"}, "field 'expires' has passed"),
    ({"body": "x", "body_b64": "eA=="}, "either 'body' or 'body_b64'"),
    ({"body_b64": "not base64!"}, "field 'body_b64' is not valid base64"),
    ({"body": "x", "label": "L" * 251}, "label is longer than 250 characters"),
    ({"msg_id": "00000000-0000-0000-0000-000000000001\\1", "put_time": "2026-01-01T00:00:00Z", "body": "x",
      "ttl": "1m"}, "field 'ttl' is not a field of a message record"),
    ("[1, 2]", "a record must be a JSON object"),
    ('{"body": ', "not JSON"),
]


@pytest.mark.parametrize("record, said", BAD, ids=[s for _, s in BAD])
def test_a_bad_line_stores_nothing_of_the_input(cli, tmp_path, record, said):
    good = [{"body": f"m{i}", "priority": i % 8} for i in range(1500)]  # more than one batch of 1,000
    data = lines(*good[:1200], record, *good[1200:])
    path = tmp_path / "in.jsonl"
    path.write_bytes(data)
    result = cli.fails(12, "put", "q", "--jsonl", str(path))  # a file: checked whole first
    line = cli.error_line(result)
    assert line.startswith("mqcli: error: line 1201: ") and said in line, line
    assert result.stdout == b"" and cli.json("queue", "show", "q")["depth"] == 0


def test_a_bad_line_from_a_pipe_stores_nothing_of_its_batch(cli):
    """A real pipe is read as it comes: the batches of 1,000 before the bad line are stored
    (their ids printed), nothing of the bad line's batch is."""
    data = lines(*({"body": f"m{i}"} for i in range(2500)), {"body": "x", "colour": "red"})
    result = cli.subprocess("put", "q", "--jsonl", "-", input=data)
    assert result.code == 12 and "line 2501: field 'colour' is unknown" in result.stderr
    with Store.open(cli.store) as st:
        assert [m.body for m in st.browse("q")] == [f"m{i}".encode() for i in range(2000)]
    assert len(result.stdout.split()) == 2000


def test_put_jsonl_from_a_pipe_stores_each_batch_before_the_input_ends(cli):
    """`get --follow -o jsonl | put --jsonl -` never ends: a whole batch is stored while the
    writer still holds the pipe open."""
    proc = subprocess.Popen([*mqcli_command(), "put", "q", "--jsonl", "-", "-q"], stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, **cli.env})
    try:
        proc.stdin.write(lines(*({"body": f"m{i}"} for i in range(1000))))
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while cli.json("queue", "show", "q")["depth"] < 1000:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.1)
    finally:
        proc.stdin.close()
    assert proc.wait(timeout=60) == 0


def test_a_body_over_the_max_message_size_stores_nothing(cli):
    cli.ok("qmgr", "set", "--max-message-size", "1000", "-q")
    result = cli.fails(8, "put", "q", "--jsonl", "-", input=lines({"body": "ok"}, {"body": "x" * 1001}))
    assert "line 2: " in cli.error_line(result)
    assert cli.json("queue", "show", "q")["depth"] == 0


def test_put_records_reach_a_selector(cli):
    with Store.open(cli.store) as st:  # a message put by the library, next to the JSONL ones
        st.put_many("q", [NewMessage(b"lib", props={"region": "us"})])
    cli.ok("put", "q", "--jsonl", "-", input=lines({"body": "a", "props": {"region": "eu"}},
                                                   {"body": "b", "props": {"region": "us"}, "priority": 7}))
    got = cli.ok("browse", "q", "--where", "props.region = 'us'", "--format", "{body}\n").out
    assert got.split() == ["b", "lib"]
