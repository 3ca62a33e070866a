"""Fuzzing the decoders with Hypothesis: only the documented errors may come out, never a hang
or another exception.

- message records (store/records.py `decode`): encodings of valid messages, damaged — bits
  flipped, cut short, extended, length fields overwritten, spans replaced (tests/test_records.py
  already feeds it arbitrary bytes, which mostly fail at the first byte) → a message that
  re-encodes to itself, or BadData;
- JSONL lines (`read_records`, behind `put --jsonl` and `import`): valid lines damaged, fields
  given values of every JSON type, arbitrary JSON → records, or BadData naming the line; and
  through the CLI, exit 0, 9 (expired) or 12;
- durations and sizes (mqcli/durations.py): a finite number of seconds (at most 100 years) or
  bytes (below 8 EiB), or a usage error; through the CLI, exit 2, never 1;
- queue and format names given on the command line (MS-MQMQ 2.1 text, bytes that are not
  UTF-8) → exit 0, 2, 6 or 12. The format-name parser itself is fuzzed in
  tests/test_formatnames.py, the trace label and body decoders in tests/test_trace_codec.py.

atheris is not used: these decoders are pure Python, where Hypothesis' structured mutations
of valid inputs reach the deep paths that coverage-guided byte fuzzing would need long runs for.
"""

from __future__ import annotations

import io
import json
import math
import struct
from collections import Counter, defaultdict
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s

from cli_helpers import ERROR_PREFIX, invoke
from harness import record
from mqcli.durations import MAX_SECONDS, parse_duration, parse_size
from mqcli.exits import UsageError
from mqcli.inputs import read_records, record_line_limit
from store import errors
from store.records import _FIXED, _HEADER, Message, decode, encode
from test_formatnames import fuzz_text
from test_records import messages

LINE_LIMIT = record_line_limit(4 << 20)  # a store's default max-message-size
TALLY: dict[str, Counter] = defaultdict(Counter)
FAST = settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CLI = settings(max_examples=30, deadline=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def tally(target: str, accepted: bool) -> None:
    TALLY[target]["examples"] += 1
    TALLY[target]["accepted" if accepted else "refused"] += 1


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    for target, counts in TALLY.items():  # a test that met an unexpected error failed
        record("fuzz", target, {"examples": counts["examples"], "accepted": counts["accepted"],
                                "refused": counts["refused"], "unexpected": 0})


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "store"
    assert invoke(["--store", path, "init", "-q"]).code == 0
    assert invoke(["--store", path, "queue", "create", "q", "-q"]).code == 0
    return path


def cli(store, *args, input=None):
    """Run mqcli in this process; an error is exactly one `mqcli: error: ... [STATUS]` line,
    or with -o json|jsonl only its JSON object."""
    result = invoke(["--store", store, *args], input=input)
    if result.code and ("json" in args or "jsonl" in args):
        assert result.error_json()["error"]["exit"] == result.code, result
        assert not any(line.startswith(ERROR_PREFIX) for line in result.err_lines), result
    elif result.code:
        errors_ = [line for line in result.err_lines if line.startswith(ERROR_PREFIX)]
        assert len(errors_) == 1 and errors_[0].endswith("]"), result
    return result


# ---- message records --------------------------------------------------------------------------

@s.composite
def damaged_records(draw):
    raw = bytearray(encode(draw(messages)))
    how = draw(s.sampled_from(["flip", "truncate", "extend", "length", "splice"]))
    if how == "flip":
        for _ in range(draw(s.integers(1, 4))):
            raw[draw(s.integers(0, len(raw) - 1))] ^= 1 << draw(s.integers(0, 7))
    elif how == "truncate":
        del raw[draw(s.integers(0, len(raw) - 1)):]
    elif how == "extend":
        raw += draw(s.binary(min_size=1, max_size=40))
    elif how == "length":  # one of the seven length fields after the fixed header
        at = _HEADER.size + 2 * draw(s.integers(0, 4))
        raw[at:at + 2] = struct.pack(">H", draw(s.sampled_from([0, 1, 0xFFFE, 0xFFFF]) | s.integers(0, 0xFFFF)))
    else:
        at = draw(s.integers(0, len(raw) - 1))
        raw[at:at + draw(s.integers(1, 16))] = draw(s.binary(max_size=16))
    return bytes(raw)


@FAST
@given(damaged_records())
def test_damaged_records_decode_whole_or_raise_bad_data(raw):
    try:
        m = decode(raw, "q")
    except errors.BadData:
        tally("record decode (damaged encodings)", False)
        return
    tally("record decode (damaged encodings)", True)
    assert decode(encode(m), "q") == m  # what decodes is a record, not a half-read one


def test_a_damaged_record_header_is_bad_data_not_a_struct_error():
    raw = encode(Message(b"body", label="label", correl_id="c"))
    for cut in (0, 1, _HEADER.size - 1, _FIXED - 1, _FIXED + 2):
        with pytest.raises(errors.BadData):
            decode(raw[:cut])


# ---- JSONL lines ------------------------------------------------------------------------------

_YEAR_9999 = 253402300799_000_000  # µs: the JSON form writes ISO-8601 times


def _line(m: Message) -> bytes:
    def year_9999(us: int | None) -> int | None:
        return None if us is None else us % _YEAR_9999 or 1

    m = replace(m, put_time=year_9999(m.put_time), expires=year_9999(m.expires),
                lease_expires=year_9999(m.lease_expires))
    return json.dumps(m.to_dict()).encode()


JSON_CHARS = s.sampled_from(list('{}[],:"\\ 0123456789-+.eEtruefalsnb_'))
json_values = s.recursive(
    s.none() | s.booleans() | s.integers(-(1 << 70), 1 << 70) | s.floats(allow_nan=False)
    | s.text(max_size=30),
    lambda inner: s.lists(inner, max_size=4) | s.dictionaries(s.text(max_size=10), inner, max_size=4),
    max_leaves=10)


@s.composite
def damaged_lines(draw):
    text = bytearray(_line(draw(messages)))
    for _ in range(draw(s.integers(1, 4))):
        at = draw(s.integers(0, len(text)))
        op = draw(s.sampled_from(["insert", "replace", "delete", "truncate"]))
        c = draw(JSON_CHARS).encode()
        if op == "insert":
            text[at:at] = c
        elif op == "replace":
            text[at:at + 1] = c
        elif op == "delete":
            del text[at:at + 1]
        else:
            del text[at:]
    return bytes(text)


@s.composite
def retyped_records(draw):
    d = json.loads(_line(draw(messages)))
    key = draw(s.sampled_from(sorted(d) + ["body_b64", "dead_letter_reason", "extra"]))
    d[key] = draw(json_values)
    if draw(s.booleans()):
        del d[draw(s.sampled_from(sorted(d)))]
    return json.dumps(d).encode()


def _read(target: str, data: bytes) -> None:
    try:
        records = list(read_records(io.BytesIO(data), LINE_LIMIT))
    except errors.BadData as exc:
        assert exc.message.startswith("line "), exc.message
        tally(target, False)
        return
    tally(target, True)
    for _, m in records:
        assert Message.from_dict(m.to_dict()).body == m.body


@FAST
@given(damaged_lines())
def test_damaged_jsonl_lines_read_or_raise_bad_data(data):
    _read("JSONL lines (damaged valid lines)", data)


@FAST
@given(retyped_records())
def test_jsonl_fields_of_any_type_read_or_raise_bad_data(data):
    _read("JSONL lines (a field of any JSON type)", data)


@settings(max_examples=500, deadline=None)
@given(json_values)
def test_arbitrary_json_reads_or_raises_bad_data(value):
    _read("JSONL lines (arbitrary JSON)", json.dumps(value).encode())


def test_deeply_nested_json_is_bad_data():
    with pytest.raises(errors.BadData, match="line 2"):
        list(read_records(io.BytesIO(b"\n" + b"[" * 100_000 + b"]" * 100_000 + b"\n"), LINE_LIMIT))


@CLI
@given(s.lists(damaged_lines() | retyped_records() | messages.map(_line), min_size=1, max_size=4))
def test_put_jsonl_of_damaged_lines_exits_0_9_or_12(store, lines):
    result = cli(store, "put", "q", "--jsonl", "-", "-o", "jsonl", input=b"\n".join(lines) + b"\n")
    assert result.code in (0, 9, 12), result
    tally("put --jsonl (CLI)", result.code == 0)


@CLI
@given(s.lists(damaged_lines() | retyped_records() | messages.map(_line), min_size=1, max_size=4))
def test_import_of_damaged_lines_exits_0_9_or_12(store, lines):
    result = cli(store, "import", "-", input=b"\n".join(lines) + b"\n")
    assert result.code in (0, 9, 12), result
    tally("import (CLI)", result.code == 0)


# ---- durations and sizes ----------------------------------------------------------------------

durations = s.one_of(
    s.text(max_size=30),
    s.from_regex(r"\s*\d{1,400}(\.\d{0,12})?\s?(ms|s|m|h|MS|S|H)?\s*", fullmatch=True),
    s.sampled_from(["forever", " FOREVER ", "0", "0ms", "1e3s", "-5s", "inf", "nan", "1_000s"]))
sizes = s.one_of(
    s.text(max_size=30),
    s.from_regex(r"\s*\d{1,5000}\s?(b|kb|mb|gb|tb|kib|mib|gib|tib|KiB|MB)?\s*", fullmatch=True))


@settings(max_examples=1500, deadline=None)
@given(durations, s.booleans())
def test_durations_are_finite_bounded_seconds_or_a_usage_error(text, allow_forever):
    try:
        seconds = parse_duration(text, allow_forever=allow_forever)
    except UsageError:
        tally("durations", False)
        return
    tally("durations", True)
    if seconds is None:
        assert allow_forever and text.strip().lower() == "forever"
    else:
        assert math.isfinite(seconds) and 0 <= seconds <= MAX_SECONDS


@settings(max_examples=1500, deadline=None)
@given(sizes)
def test_sizes_are_bytes_below_8_eib_or_a_usage_error(text):
    try:
        size = parse_size(text)
    except UsageError:
        tally("sizes", False)
        return
    tally("sizes", True)
    assert 0 <= size < 1 << 63


@CLI
@given(durations, s.sampled_from([("get", "q", "--wait"), ("get", "q", "--confirm-id", "auto", "--lease"),
                                  ("put", "q", "x", "--ttl"), ("tx", "begin", "--timeout"),
                                  ("undo", "--older-than")]))
def test_a_duration_option_exits_2_when_it_is_not_one(store, text, command):
    if command[0] == "get":  # a message to get at once: a long --wait would wait
        assert cli(store, "put", "q", "x", "-q").code == 0
    result = cli(store, *command, text.replace("\0", ""))
    assert result.code in (0, 2), result
    tally("duration options (CLI)", result.code != 2)


@CLI
@given(sizes, s.sampled_from([("qmgr", "set", "--quota"), ("qmgr", "set", "--max-message-size"),
                              ("queue", "set", "q", "--quota")]))
def test_a_size_option_exits_2_when_it_is_not_one(store, text, command):
    result = cli(store, *command, text.replace("\0", ""))
    assert result.code in (0, 2), result
    tally("size options (CLI)", result.code == 0)
    if result.code == 0:  # leave the store usable for the other examples
        cli(store, "qmgr", "set", "--quota", "0", "--max-message-size", "4MiB")
        cli(store, "queue", "set", "q", "--quota", "0")


# ---- queue and format names on the command line ------------------------------------------------

names = (fuzz_text | s.text(s.characters(categories=["Cs"]) | s.sampled_from("q=;\\$:."), max_size=12)
         ).map(lambda t: t.replace("\0", "")).filter(bool)  # the empty name: see below


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(names, s.sampled_from([("browse",), ("put",), ("get",)]))
def test_a_queue_argument_exits_0_2_6_or_12(store, name, command):
    args = [*command, "--", name] + (["x"] if command == ("put",) else [])
    result = cli(store, *args)
    assert result.code in (0, 2, 3, 6, 12), result  # 3: an empty queue to get from
    tally("queue and format names (CLI)", result.code in (0, 3))


def test_an_empty_queue_name_is_a_queue_that_does_not_exist(store):
    for command in (("browse", ""), ("put", "", "x"), ("queue", "show", "")):
        assert cli(store, *command).code == 6, command


@pytest.mark.parametrize("how", ["option", "jsonl"])
def test_an_app_specific_above_2_31_is_stored_or_refused_not_an_internal_error(store, how):
    if how == "option":
        result = cli(store, "put", "q", "x", "--app-specific", str(1 << 31))
    else:
        record = json.loads(_line(Message(b"x", origin=bytes(16), app_specific=1 << 31)))
        result = cli(store, "put", "q", "--jsonl", "-", input=json.dumps(record).encode() + b"\n")
    assert result.code in (0, 2, 12), result
