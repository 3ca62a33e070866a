"""Trace report labels and bodies ([MS-MQQB] 3.1.5.8.9, docs/design.md#trace-reports): the hand-written vectors, encode→decode
round trips over Hypothesis-generated fields, and fuzzing that lets only BadData escape."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s

from store.errors import BadData, InvalidArgument
from store.trace import (
    DAYS, MONTHS, ReportBody, ReportLabel, TraceFormatError, decode_body, decode_label,
    _fast_label, _Parser, encode_body, encode_conflict_label, encode_label,
)

VECTORS = Path(__file__).parent / "vectors"
LABELS = [json.loads(line) for line in (VECTORS / "trace_labels.jsonl").read_text("utf-8").splitlines()]
BODIES = [json.loads(line) for line in (VECTORS / "trace_bodies.jsonl").read_text("utf-8").splitlines()]
LABEL_RULES = {"label", "qm-id", "message-id", "hops", "GUID", "time-date", "hour", "date", "day",
               "month", "year"}
BODY_RULES = {"Report", "id", "queue-format"}
# what the documented forms add (store/trace.py's docstring): rules only the default decoders name
ANY_RULES = {"conflict-label", "computer", "machine-name", "address", "port", "next-hop", "hop-count"}
FUZZ = settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SPEC_LABEL = "1A2B:0000002A:01 received by 6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f at 03:15:42 PM Sun,Nov 22 26\0"
SPEC_BODY = "<MESSAGE ID>0000002A</MESSAGE ID>\r\n<TARGET QUEUE>DIRECT=OS:qm2\\orders</TARGET QUEUE>\r\n"


def _ids(vectors):
    return [f"{i}-{v['note']}" for i, v in enumerate(vectors)]


# ---- the vectors --------------------------------------------------------------------------

@pytest.mark.parametrize("vector", [v for v in LABELS if v["valid"]], ids=_ids([v for v in LABELS if v["valid"]]))
def test_valid_label_vector_decodes_to_its_fields(vector):
    # a seed label is a documented form too: both decoders give the same fields
    assert decode_label(vector["label"], strict=True).to_dict() == vector["fields"]
    assert decode_label(vector["label"]).to_dict() == vector["fields"]


@pytest.mark.parametrize("vector", [v for v in LABELS if not v["valid"]], ids=_ids([v for v in LABELS if not v["valid"]]))
def test_invalid_label_vector_fails_at_its_column_and_rule(vector):
    with pytest.raises(TraceFormatError) as caught:
        decode_label(vector["label"], strict=True)
    assert (caught.value.column, caught.value.rule) == (vector["column"], vector["rule"]), caught.value.message


@pytest.mark.parametrize("vector", [v for v in BODIES if v["valid"]], ids=_ids([v for v in BODIES if v["valid"]]))
def test_valid_body_vector_decodes_to_its_fields(vector):
    assert decode_body(vector["body"], strict=True).to_dict() == vector["fields"]
    assert decode_body(vector["body"]).to_dict() == vector["fields"]


@pytest.mark.parametrize("vector", [v for v in BODIES if not v["valid"]], ids=_ids([v for v in BODIES if not v["valid"]]))
def test_invalid_body_vector_fails_at_its_column_and_rule(vector):
    with pytest.raises(TraceFormatError) as caught:
        decode_body(vector["body"], strict=True)
    assert (caught.value.column, caught.value.rule) == (vector["column"], vector["rule"]), caught.value.message


def test_vectors_cover_every_rule_and_boundary():
    valid = [v for v in LABELS if v["valid"]]
    assert len(valid) >= 40 and len(LABELS) - len(valid) >= 40
    assert {v["rule"] for v in LABELS if not v["valid"]} == LABEL_RULES
    assert {v["rule"] for v in BODIES if not v["valid"]} == BODY_RULES
    texts = [v["label"] for v in valid]
    for name in MONTHS + DAYS:
        assert any(f"{name}," in t or f",{name} " in t for t in texts), name
    assert any(t.endswith("\0") for t in texts) and any(not t.endswith("\0") for t in texts)
    assert {v["fields"]["has_seconds"] for v in valid} == {True, False}
    times = {v["fields"]["time"][11:19] for v in valid}
    assert {"00:00:00", "12:00:00", "23:59:59", "00:59:59"} <= times
    assert any(" 12:00:00 AM " in t for t in texts) and any(" 12:00:00 PM " in t for t in texts)
    assert any(any(c in "abcdef" for c in t[:16]) for t in texts)  # lowercase hex
    assert any(any(c in "ABCDEF" for c in t[30:66]) for t in texts)  # uppercase GUID


def test_the_spec_example_encodes_exactly():
    label = ReportLabel("1A2B", 42, 1, "6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f",
                        datetime(2026, 11, 22, 15, 15, 42, tzinfo=timezone.utc))
    assert label.encode() == SPEC_LABEL
    assert label.encode(nul=False) == SPEC_LABEL[:-1]
    assert encode_body(42, "DIRECT=OS:qm2\\orders") == SPEC_BODY
    assert decode_label(SPEC_LABEL, strict=True) == label and decode_body(SPEC_BODY) == ReportBody(42, "DIRECT=OS:qm2\\orders")


@pytest.mark.parametrize("vector", [v for v in LABELS if v["valid"]], ids=_ids([v for v in LABELS if v["valid"]]))
def test_valid_label_vector_survives_reencoding(vector):
    decoded = decode_label(vector["label"])
    assert decode_label(decoded.encode()) == decoded


def test_decode_errors_are_bad_data_naming_column_and_rule():
    with pytest.raises(BadData) as caught:
        decode_label(SPEC_LABEL.replace("03:15:42", "13:15:42"))
    assert caught.value.exit_code == 12 and caught.value.status == "MQ_ERROR_BAD_DATA"
    assert caught.value.message == ("bad trace label: column 70, rule hour: 13 is not an hour of the "
                                    "12-hour clock (01-12, followed by AM or PM)")
    with pytest.raises(BadData, match=r"^bad trace body: column 57, rule queue-format: expected a protocol"):
        decode_body(SPEC_BODY.replace("=OS:", "=XS:"))
    with pytest.raises(BadData, match="is text"):
        decode_label(SPEC_LABEL.encode())  # type: ignore[arg-type]


@pytest.mark.parametrize("change", [
    {"qm_id": "1A2"}, {"qm_id": "1A2G"}, {"qm_id": 0x1A2B}, {"message_id": -1},
    {"message_id": 2**32}, {"message_id": True}, {"hops": 256}, {"hops": 1.0},
    {"computer": "qm 2"}, {"computer": ""}, {"computer": "q" * 256}, {"computer": "{6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f}"},
    {"next_hop": "10.0.0.5:65536"}, {"next_hop": ""}, {"next_hop": "10.0.0.5 "}, {"next_hop": "h:"},
    {"computer": 7}, {"time": datetime(2026, 11, 22, 15, 15, 42)},
    {"time": datetime(1999, 12, 31, 23, 59, 59, tzinfo=timezone.utc)},
    {"time": datetime(2100, 1, 1, tzinfo=timezone.utc)},
])
def test_encode_label_refuses_what_the_abnf_cannot_write(change):
    fields = dict(qm_id="1A2B", message_id=42, hops=1, computer="6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f",
                  time=datetime(2026, 11, 22, 15, 15, 42, tzinfo=timezone.utc))
    with pytest.raises(InvalidArgument):
        encode_label(**{**fields, **change})


@pytest.mark.parametrize("message_id, queue", [(-1, "PUBLIC=6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"),
                                               (1, "orders"), (1, "DIRECT=OS:qm2\\or ders"), (1, None)])
def test_encode_body_refuses_what_the_abnf_cannot_write(message_id, queue):
    with pytest.raises(InvalidArgument):
        encode_body(message_id, queue)


def test_encode_writes_utc_in_the_twelve_hour_clock():
    cet = timezone(timedelta(hours=1))
    text = encode_label("1A2B", 42, 1, uuid.UUID("6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"),
                        datetime(2026, 11, 23, 0, 30, 5, 999999, tzinfo=cet), has_seconds=False, nul=False)
    assert text.endswith(" at 11:30 PM Sun,Nov 22 26")


# ---- encode → decode is the identity --------------------------------------------------------

HEX = "0123456789abcdefABCDEF"


@s.composite
def labels(draw) -> ReportLabel:
    time = draw(s.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2099, 12, 31, 23, 59, 59),
                            timezones=s.just(timezone.utc))).replace(microsecond=0)
    has_seconds = draw(s.booleans())
    documented = draw(s.booleans())  # beyond [MS-MQQB]: machine names, and departures' `sent from`
    next_hop = draw(s.one_of(s.none(), DOCUMENTED_ADDRESS)) if documented else None
    return ReportLabel(
        qm_id=draw(s.text(s.sampled_from(HEX), min_size=4, max_size=4)),
        message_id=draw(s.integers(0, 2**32 - 1)), hops=draw(s.integers(0, 255)),
        computer=draw(MACHINE_NAME) if documented and draw(s.booleans()) else str(draw(s.uuids())),
        time=time if has_seconds else time.replace(second=0),
        has_seconds=has_seconds, event="received" if next_hop is None else "sent", next_hop=next_hop)


MACHINE_NAME = s.from_regex(r"[A-Za-z0-9._-]{1,255}", fullmatch=True).filter(lambda n: len(n) != 36)
DOCUMENTED_ADDRESS = s.one_of(
    s.from_regex(r"[0-9A-Fa-f]{8}:[0-9A-Fa-f]{12}", fullmatch=True),
    s.builds(lambda h, p: h + p, s.from_regex(r"[A-Za-z0-9._-]{1,255}", fullmatch=True),
             s.one_of(s.just(""), s.integers(0, 65535).map(lambda p: f":{p}"))))


NAME = s.text(s.one_of(s.sampled_from("abcXYZ019._-/<>$!"), s.characters(categories=("L", "Nd"))),
              min_size=1, max_size=124).filter(lambda n: all(c.isalnum() or c in "._-/<>$!" for c in n))
GUID = s.uuids().map(str) | s.uuids().map(lambda u: str(u).upper())
OCTET = s.integers(0, 255).map(str)
JOURNAL = s.sampled_from(["", ";JOURNAL", ";journal"])
SYSTEM = s.sampled_from(["JOURNAL", "DEADLETTER", "DEADXACT"])
ADDRESS = s.one_of(
    s.builds(lambda n: f"OS:{n}", s.from_regex(r"[A-Za-z0-9.\-]{1,40}", fullmatch=True)),
    s.builds(lambda *o: "TCP:" + ".".join(o), OCTET, OCTET, OCTET, OCTET),
    s.builds(lambda scheme, host, port: f"{scheme}://{host}{port}/MSMQ", s.sampled_from(["HTTP", "HTTPS"]),
             s.from_regex(r"[a-z0-9.\-]{1,30}", fullmatch=True),
             s.one_of(s.just(""), s.integers(0, 65535).map(lambda p: f":{p}"))),
)
FORMAT_NAMES = s.one_of(
    s.builds(lambda g, j: f"PUBLIC={g}{j}", GUID, JOURNAL),
    s.builds(lambda g, n, j: f"PRIVATE={g}\\{n:x}{j}", GUID, s.integers(0, 2**32 - 1), JOURNAL),
    s.builds(lambda a, n, j: f"DIRECT={a}\\{n}{j}", ADDRESS, NAME, JOURNAL),
    s.builds(lambda a, n, j: f"DIRECT={a}\\PRIVATE$\\{n}{j}", ADDRESS, NAME, JOURNAL),
    s.builds(lambda a, q: f"DIRECT={a}\\SYSTEM$;{q}", ADDRESS, SYSTEM),
    s.builds(lambda g, q: f"MACHINE={g};{q}", GUID, SYSTEM),
    s.builds(lambda a, o, p: f"MULTICAST={a}.{'.'.join(o)}:{p}", s.integers(224, 239),
             s.lists(OCTET, min_size=3, max_size=3), s.integers(0, 65535)),
)


@settings(max_examples=1000, deadline=None)
@given(labels(), s.booleans())
def test_encode_then_decode_label_is_the_identity(label, nul):
    text = label.encode(nul=nul)
    assert text.endswith("\0") == nul
    assert decode_label(text) == label


@settings(max_examples=1000, deadline=None)
@given(s.integers(0, 2**32 - 1), FORMAT_NAMES)
def test_encode_then_decode_body_is_the_identity(message_id, queue):
    assert decode_body(encode_body(message_id, queue)) == ReportBody(message_id, queue)


@settings(max_examples=500, deadline=None)
@given(s.integers(0, 2**32 - 1), FORMAT_NAMES, s.one_of(s.none(), DOCUMENTED_ADDRESS), s.one_of(s.none(), s.integers(0, 255)))
def test_encode_then_decode_documented_body_is_the_identity(message_id, queue, next_hop, hop_count):
    body = ReportBody(message_id, queue, next_hop, hop_count)
    assert decode_body(body.encode()) == body


# ---- fuzz: only BadData escapes ------------------------------------------------------------

GRAMMAR_CHARS = s.sampled_from(list(":-, \0\r\n<>/\\=;$.AMPmpJFSNODTWaecrivdbyt0123456789abcdefABCDEF"))
ANY_CHAR = s.one_of(s.characters(), s.characters(categories=("Cs",)), GRAMMAR_CHARS)


def _check_decoder(decode, text, rules):
    for strict in (True, False):
        _check_decoder_mode(decode, text, rules if strict else rules | ANY_RULES, strict)


def _check_decoder_mode(decode, text, rules, strict):
    try:
        decoded = decode(text, strict=strict)
    except TraceFormatError as exc:  # a BadData
        assert exc.rule in rules, exc.message
        assert 1 <= exc.column <= len(text) + 1, exc.message
        return
    # whatever decodes, encodes back to something that decodes the same
    assert decode(decoded.encode(), strict=strict) == decoded


@s.composite
def mutated(draw, texts):
    text = draw(texts)
    for _ in range(draw(s.integers(1, 3))):
        at = draw(s.integers(0, len(text)))
        op = draw(s.sampled_from(["replace", "insert", "delete", "swapcase"]))
        c = draw(ANY_CHAR)
        if op == "insert":
            text = text[:at] + c + text[at:]
        elif op == "replace":
            text = text[:at] + c + text[at + 1:]
        elif op == "delete":
            text = text[:at] + text[at + 1:]
        else:
            text = text[:at] + text[at:at + 1].swapcase() + text[at + 1:]
    return text


@FUZZ
@given(s.text(ANY_CHAR, max_size=120))
def test_fuzzed_text_into_decode_label_raises_only_bad_data(text):
    _check_decoder(decode_label, text, LABEL_RULES)


@FUZZ
@given(mutated(s.builds(lambda label, nul: label.encode(nul=nul), labels(), s.booleans())))
def test_fuzzed_labels_raise_only_bad_data(text):
    _check_decoder(decode_label, text, LABEL_RULES)


@FUZZ
@given(s.text(ANY_CHAR, max_size=160))
def test_fuzzed_text_into_decode_body_raises_only_bad_data(text):
    _check_decoder(decode_body, text, BODY_RULES)


@FUZZ
@given(mutated(s.builds(encode_body, s.integers(0, 2**32 - 1), FORMAT_NAMES)))
def test_fuzzed_bodies_raise_only_bad_data(text):
    _check_decoder(decode_body, text, BODY_RULES)


@FUZZ
@given(s.text(ANY_CHAR, max_size=60).map(lambda q: SPEC_BODY.replace("DIRECT=OS:qm2\\orders", q)))
def test_fuzzed_queues_raise_only_bad_data(text):
    _check_decoder(decode_body, text, BODY_RULES)


# ---- the label fast path accepts exactly what the parser accepts ------------------------------

def _parser_label(text, strict):
    try:
        return _Parser(text, "label", strict).label()
    except TraceFormatError:
        return None


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("vector", LABELS, ids=lambda v: v.get("note", v["label"])[:40])
def test_the_label_fast_path_agrees_with_the_parser_on_every_vector(vector, strict):
    assert _fast_label(vector["label"], strict) == _parser_label(vector["label"], strict)


@FUZZ
@given(s.one_of(mutated(s.builds(lambda label, nul: label.encode(nul=nul), labels(), s.booleans())),
                s.builds(lambda label, nul: label.encode(nul=nul), labels(), s.booleans())))
def test_the_label_fast_path_agrees_with_the_parser(text):
    for strict in (True, False):
        assert _fast_label(text, strict) == _parser_label(text, strict)


# ---- a bad format name in a body: the column of its first bad character -----------------------

QUEUE_COLUMN = SPEC_BODY.index("DIRECT=OS:qm2") + 1  # 50: where the body's format name begins
GUID_ = "6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"


@pytest.mark.parametrize(("queue", "at", "detail"), [
    # `at` is the 1-based column inside the format name; the body's column is offset by its start
    (f"PUBLIC={GUID_[:-1]}g", 43, "expected 12HEXDIG (11 of them so far), found 'g'"),
    (f"PRIVATE={GUID_}\\123456789", 54, "expected the end of the format name, found '9'"),
    ("DIRECT=OS:qm2\\or;ders", 18, "expected ';JOURNAL', found 'd'"),
    ("DIRECT=TCP:10.0.300.1\\q", 17, "300 is out of range (0-255)"),
    ("MULTICAST=240.0.0.1:80", 11, "240 is out of range (224-239: a class D multicast address)"),
    ("DIRECT=HTTP://h/msmq/q", 21, "expected '\\', found '/'"),  # MS-MQMQ 2.1.2: "/MSMQ" "\"
    ("DIRECT=HTTPS://h:65536/MSMQ\\q", 18, "port 65536 is out of range (0-65535)"),
    ("DIRECT=IPX:0000000G:00a0c9123456\\q", 19, "expected 8HEXDIG (the IPX network), found 'G'"),
    ("DIRECT=OS:.\\SYSTEM$;POISON", 21,
     "expected a machine queue (JOURNAL, DEADLETTER or DEADXACT), found 'P'"),
    ("DIRECT=FTP:h\\q", 8, "expected a protocol (TCP, OS, HTTPS, HTTP or IPX), found 'F'"),
    ("q;journal", 1, "expected a format name (PUBLIC=, PRIVATE=, DIRECT=, MACHINE= or MULTICAST=), "
                     "found 'q'"),
    ("DIRECT=OS:qm2\\" + "q" * 125, 139, "expected the end of the format name, found 'q'"),
    # the name stops short at "</TARGET QUEUE>": the error says what the body holds there
    ("DIRECT=OS:qm2\\", 15, "expected a queue name, found '<'"),
])
def test_a_bad_format_name_in_a_body_fails_at_its_column(queue, at, detail):
    body = SPEC_BODY.replace("DIRECT=OS:qm2\\orders", queue)
    with pytest.raises(TraceFormatError) as caught:
        decode_body(body)
    assert (caught.value.column, caught.value.rule, caught.value.detail) == (
        QUEUE_COLUMN - 1 + at, "queue-format", detail)
    assert caught.value.message == (f"bad trace body: column {QUEUE_COLUMN - 1 + at}, "
                                    f"rule queue-format: {detail}")
    with pytest.raises(InvalidArgument, match=f"is not a format name \\(MS-MQMQ 2.1\\): column {at}: "):
        encode_body(42, queue)


# ---- the documented forms (tests/vectors/trace_documented.jsonl) ------------------------------

DOCUMENTED = [json.loads(line) for line in (VECTORS / "trace_documented.jsonl").read_text("utf-8").splitlines()]


def _decode(vector, strict):
    decode = decode_label if vector["kind"] == "label" else decode_body
    try:
        return decode(vector["text"], strict=strict).to_dict()
    except TraceFormatError as exc:
        return [exc.column, exc.rule]


@pytest.mark.parametrize("vector", DOCUMENTED, ids=_ids(DOCUMENTED))
def test_documented_vector_decodes_to_its_fields_or_fails_at_its_column(vector):
    assert _decode(vector, False) == (vector["fields"] if vector["valid"] else [vector["column"], vector["rule"]])


@pytest.mark.parametrize("vector", DOCUMENTED, ids=_ids(DOCUMENTED))
def test_strict_decoding_refuses_every_form_beyond_the_seed(vector):
    assert _decode(vector, True) == (vector["fields"] if vector["strict"] == "valid" else vector["strict"])


def test_documented_vectors_cover_every_form_and_rule():
    valid = [v for v in DOCUMENTED if v["valid"]]
    labels = [v["fields"] for v in valid if v["kind"] == "label"]
    bodies = [v["fields"] for v in valid if v["kind"] == "body"]
    assert {f["event"] for f in labels} == {"received", "sent", "conflict"}
    assert any(f["computer"] and len(f["computer"]) != 36 for f in labels)  # a machine name
    assert any(f["computer"] and len(f["computer"]) == 36 for f in labels)  # a GUID
    assert {f["has_seconds"] for f in labels} == {True, False, None}
    assert {(f["next_hop"] is None, f["hop_count"] is None) for f in bodies} == {
        (True, True), (False, True), (True, False), (False, False)}
    invalid_rules = {v["rule"] for v in DOCUMENTED if not v["valid"]}
    assert ANY_RULES <= invalid_rules
    assert all(v["strict"] != "valid" for v in DOCUMENTED if not v["valid"])


def test_a_departure_and_a_conflict_encode_as_windows_writes_them():
    when = datetime(2026, 11, 22, 15, 15, 42, tzinfo=timezone.utc)
    sent = encode_label("1A2B", 42, 1, GUID_, when, next_hop="10.0.0.5", nul=False)
    assert sent == f"1A2B:0000002A:01 sent from {GUID_} to 10.0.0.5 at 03:15:42 PM Sun,Nov 22 26"
    assert decode_label(sent) == ReportLabel("1A2B", 42, 1, GUID_, when, True, "sent", "10.0.0.5")
    assert encode_conflict_label() == "Report Message Conflict\0"
    assert decode_label(encode_conflict_label()).event == "conflict"
    assert encode_body(42, "DIRECT=OS:qm2\\orders", next_hop="10.0.0.5", hop_count=1) == (
        SPEC_BODY + "<NEXT HOP>10.0.0.5</NEXT HOP>\r\n<HOP COUNT>1</HOP COUNT>\r\n")
