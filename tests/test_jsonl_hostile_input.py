"""`put --jsonl` and `import` fed hostile lines (real processes, real stores): an overlong
line, nesting deeper than any record, NaN and Infinity, a name given twice (the record's, a
property's, one written with an escape), a byte order mark, a truncated last line, a binary file.
Each is one error line naming the line, exit 12 (MQ_ERROR_BAD_DATA), no traceback, and nothing
of a file stored (a file is checked whole first), nor of a pipe's batch. CRLF line ends, and a
name that merely looks like another once decoded from a different field, are accepted."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from cli_helpers import ERROR_PREFIX, Cli
from store import Store

GOOD = b'{"body":"kept?","priority":4,"props":{"k":"v"}}\n'
DEEP = b'{"body":"a","props":' + b"[" * 5000 + b"]" * 5000 + b"}\n"
BAD: dict[str, tuple[bytes, str]] = {  # the bad line comes after GOOD: line 2
    "overlong": (b'{"body":"' + b"x" * (2 << 20) + b'"}\n', "line 2: longer than"),  # max-message-size 1 KiB
    "deep": (DEEP, "line 2: not JSON"),
    "deep-props": (b'{"body":"a","props":' + b"[" * 300 + b"]" * 300 + b"}\n", "line 2: field 'props'"),
    "deep-escaped": (b'{"body":"\\u0041","props":' + b"[" * 1020 + b"]" * 1020 + b"}\n", "line 2: field 'props'"),  # written back only in part
    "nan": (b'{"body":"a","priority":NaN}\n', "line 2: not JSON"),
    "infinity": (b'{"body":"a","app_specific":-Infinity}\n', "line 2: not JSON"),
    "huge-exponent": (b'{"body":"a","priority":1e999}\n', "line 2: not JSON"),
    "integer-past-64-bits": (b'{"msg_id":"6f1c2a4e-0000-4000-8000-000000000001\\\\9","body":"a",'
                             b'"lookup_id":1180591620717411303424}\n', "line 2: field 'lookup_id' is out of range"),
    "name-twice": (b'{"body":"a","priority":1,"body":"b"}\n', "line 2: field 'body' is given twice"),
    "name-twice-spaced": (b'{"body" : "a:b", "body" :"c"}\n', "line 2: field 'body' is given twice"),
    "name-twice-escaped": (b'{"body":"a","b\\u006fdy":"b"}\n', "line 2: field 'body' is given twice"),
    "prop-twice": (b'{"body":"a","props":{"k":"1","k":"2"}}\n', "line 2: field 'k' is given twice"),
    "bom": (b'\xef\xbb\xbf{"body":"a"}\n', "line 2: not JSON"),
    "truncated": (b'{"body":"a"', "line 2: not JSON"),
    "binary": (bytes(range(256)) * 4, "line 2: not JSON"),
}


def _store(tmp_path, name: str) -> Cli:
    cli = Cli(tmp_path / name / "store", tmp_path / name / "xdg")
    cli.ok("init", "-q")
    cli.ok("queue", "create", "q", "-q")
    cli.ok("qmgr", "set", "--max-message-size", "1KiB", "-q")  # a line's limit: 1 MiB and 6 KiB
    return cli


def _refused(cli: Cli, args: list[str], data: bytes, says: str, from_stdin: bool) -> None:
    r = cli.subprocess(*args, input=data if from_stdin else None, timeout=120)
    assert r.code == 12, r
    assert "Traceback" not in r.stderr
    lines = r.err_lines
    assert len(lines) == 1 and lines[0].startswith(ERROR_PREFIX + says), r
    assert lines[0].endswith("[MQ_ERROR_BAD_DATA]"), r
    with Store.open(cli.env["MQCLI_STORE"]) as st:  # nothing of it stored
        assert [(q.name, st.browse(q.name, states="all")) for q in st.list_queues()
                if q.name in ("q", "r")] in ([("q", [])], [("q", []), ("r", [])]), args


@pytest.mark.slow
def test_a_hostile_line_is_one_error_naming_it_and_nothing_is_stored(tmp_path):
    stores = {case: _store(tmp_path, case) for case in BAD}  # in this process: one at a time
    source = _store(tmp_path, "source")
    source.ok("put", "q", "--jsonl", "-", "-q", input=GOOD)
    dump = source.ok("export", "q").stdout  # a queue definition and a record: the bad line is line 3
    assert dump.count(b"\n") == 2

    def one(case: str) -> None:
        bad, says = BAD[case]
        cli = stores[case]
        data = GOOD + bad
        path = tmp_path / case / "in.jsonl"
        path.write_bytes(data)
        _refused(cli, ["put", "q", "--jsonl", str(path)], data, says, from_stdin=False)
        _refused(cli, ["put", "q", "--jsonl", "-"], data, says, from_stdin=True)  # one batch: none of it
        dump_says = says.replace("line 2", "line 3")
        _refused(cli, ["import", "-", "--queue", "r"], dump + bad, dump_says, from_stdin=True)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(one, BAD))


def test_crlf_line_ends_and_lookalike_names_are_records(tmp_path):
    cli = _store(tmp_path, "ok")
    data = (b'{"body":"a:b","label":"body"}\r\n'  # a value spelled like a name, a colon in a text
            b'{"body":"\\u0063","props":{"body":"x","k":"a\\/b"}}\r\n'  # escapes, a prop named as a field
            b'\r\n')
    r = cli.subprocess("put", "q", "--jsonl", "-", "-q", input=data)
    assert r.code == 0, r
    got = cli.jsonl("get", "q", "--all", "-o", "jsonl")
    assert [(m["body"], m["label"], m["props"]) for m in got] == [
        ("a:b", "body", {}), ("c", "", {"body": "x", "k": "a/b"})]
