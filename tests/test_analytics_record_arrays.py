"""The source's whole-batch decoding (store/analytics/record_arrays.py) gives the batches the
record-by-record reference gives (columns.reference_batch), for any records: trace reports with
labels and bodies in every shape (good, wrong head, wrong rest, not a report), properties,
absent and empty optional fields, every state; and a record it cannot read goes to the
reference, which names what is wrong (BadData), never to a wrong batch."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s

pa = pytest.importorskip("pyarrow")
pytest.importorskip("numpy")

from store.analytics import record_arrays  # noqa: E402
from store.analytics.columns import (  # noqa: E402
    MESSAGE_COLUMNS, StoreIdentity, arrow_schema, property_column, record_batch, reference_batch,
)
from store.analytics.report_fields import TRACE_COLUMNS  # noqa: E402
from store.errors import BadData  # noqa: E402
from store.records import STATES, Message, encode  # noqa: E402
from store.trace import encode_body, encode_conflict_label, encode_label  # noqa: E402

WHERE = StoreIdentity(path="/stores/qm1", name="qm1", guid=str(uuid.UUID(int=7)))
NAMES = {3: "orders", 4: "reports"}
COMPUTERS = [str(uuid.UUID(int=1)), str(uuid.UUID(int=2)), "HOST-A"]
BUILT = tuple(c for c in MESSAGE_COLUMNS if record_arrays.handles([c]))
COLUMNS = BUILT + (property_column("mqcli.delivered"), property_column("mqcli.event"), property_column("a")) + TRACE_COLUMNS

text = s.text(s.characters(blacklist_categories=("Cs",)), max_size=20)
stamp = s.integers(1_700_000_000, 1_700_000_005).map(lambda t: datetime.fromtimestamp(t, timezone.utc))


@s.composite
def labels(draw) -> str:
    kind = draw(s.sampled_from(["trace", "trace", "sent", "conflict", "text", "bad-rest", "bad-head", "short"]))
    if kind == "conflict":
        return encode_conflict_label(nul=draw(s.booleans()))
    if kind == "text":
        return draw(text)
    if kind == "short":
        return draw(s.sampled_from(["", "1A2B:", "1A2B:0000002A:01"]))
    label = encode_label(draw(s.sampled_from(["1a2b", "FFFF", "0000"])), draw(s.integers(0, 0xFFFFFFFF)),
                         draw(s.integers(0, 255)), draw(s.sampled_from(COMPUTERS)), draw(stamp),
                         next_hop="host-b:1801" if kind == "sent" else None)
    if kind == "bad-rest":
        return label.replace(" at ", " on ")
    if kind == "bad-head":  # one character of the head made other than hex, colon or space
        at = draw(s.integers(0, 16))
        return label[:at] + draw(s.sampled_from(["g", "G", "-", "é", ":", " "])) + label[at + 1:]
    return label


@s.composite
def bodies(draw) -> bytes:
    kind = draw(s.sampled_from(["trace", "trace", "bytes", "lower-head", "bad-rest", "short"]))
    if kind == "bytes":
        return draw(s.binary(max_size=40))
    if kind == "short":
        return b"<MESSAGE ID>0000002A</MESSAGE ID>"
    body = encode_body(draw(s.integers(0, 0xFFFFFFFF)), draw(s.sampled_from(["DIRECT=OS:qm2\\orders",
                                                                              "PUBLIC=" + str(uuid.UUID(int=3))]))).encode()
    if kind == "lower-head":
        return body.replace(b"MESSAGE ID", b"message id", 1)
    if kind == "bad-rest":
        return body.replace(b"TARGET QUEUE", b"TARGET QUEUX")
    return body


maybe_int = s.none() | s.integers(1, (1 << 63) - 1)
messages = s.builds(
    Message,
    body=bodies(), state=s.sampled_from(STATES), priority=s.integers(0, 7), seq=s.integers(1, (1 << 56) - 1),
    qid=s.sampled_from([3, 4, 5]), origin=s.binary(min_size=16, max_size=16), msg_n=s.integers(0, 0xFFFFFFFF),
    put_time=s.integers(0, 4_000_000_000_000_000), expires=s.none() | s.integers(1, 4_000_000_000_000_000),
    correl_id=s.none() | text, label=labels(),
    props=s.sampled_from([{}, {"mqcli.event": "sent", "mqcli.delivered": "false"},
                          {"mqcli.event": "received", "mqcli.delivered": "true"}, {"a": ""}])
    | s.dictionaries(s.sampled_from(["a", "mqcli.event"]) | text, text, max_size=3),
    app_specific=s.integers(-(1 << 31), (1 << 31) - 1), report=s.booleans(), express=s.booleans(),
    trace=s.booleans(), dead_letter=s.booleans(), report_queue=s.none() | text,
    hops=s.integers(0, 0xFFFF), backouts=s.integers(0, 0xFFFF), confirm_id=maybe_int, lock_id=maybe_int,
    tx=maybe_int, lease_expires=s.none() | s.integers(1, 4_000_000_000_000_000),
    since=s.none() | s.integers(1, 4_000_000_000_000_000), dead_letter_reason=s.none() | text,
    original_queue=s.none() | text,
)


def _whole(raws, columns, report_only):
    arrays = record_arrays.record_batch(raws, NAMES, WHERE, columns, report_only)
    return None if arrays is None else pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(columns))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s.lists(messages, min_size=1, max_size=16), s.booleans(), s.permutations(COLUMNS))
def test_a_whole_batch_is_the_batch_record_by_record(batch, report_only, order):
    raws = [encode(m) for m in batch]
    columns = tuple(order)
    want = reference_batch(raws, NAMES, WHERE, columns, report_only)
    got = _whole(raws, columns, report_only)  # not Unhandled: every record is good
    if want is None:
        assert got is None
        return
    assert got.schema == want.schema
    for name in want.schema.names:
        assert got.column(name).to_pylist() == want.column(name).to_pylist(), name
    assert record_batch(raws, NAMES, WHERE, columns, report_only).equals(want)


def test_reports_sharing_a_rest_keep_their_own_route_and_hops():
    when = datetime(2026, 11, 27, 8, 0, 0, tzinfo=timezone.utc)
    raws = [encode(Message(encode_body(n, "DIRECT=OS:qm2\\orders").encode(), qid=4, report=True,
                           label=encode_label("1a2b", n, n % 3, COMPUTERS[0], when))) for n in range(1, 200)]
    got = _whole(raws, TRACE_COLUMNS, True)
    assert got.column("trace_route").to_pylist() == [0x1A2B << 32 | n for n in range(1, 200)]
    assert got.column("trace_hops").to_pylist() == [n % 3 for n in range(1, 200)]
    assert set(got.column("trace_computer").to_pylist()) == {COMPUTERS[0]}
    assert set(got.column("trace_queue").to_pylist()) == {"DIRECT=OS:qm2\\orders"}


def test_a_label_whose_head_is_wrong_anywhere_has_no_route_though_its_rest_is_shared():
    good = encode_label("1a2b", 42, 1, COMPUTERS[0], datetime(2026, 11, 27, tzinfo=timezone.utc))
    wrong = [good[:at] + c + good[at + 1:] for at in range(17) for c in "g:- é" if good[at] != c]
    raws = [encode(Message(b"", qid=4, report=True, label=label)) for label in [good, *wrong]]
    got = _whole(raws, TRACE_COLUMNS, True)
    assert got.column("trace_route").to_pylist() == [0x1A2B << 32 | 42] + [None] * len(wrong)
    assert got.equals(reference_batch(raws, NAMES, WHERE, TRACE_COLUMNS, True))


def test_a_body_whose_head_is_wrong_anywhere_is_decoded_whole_though_its_rest_is_shared():
    good = encode_body(42, "DIRECT=OS:qm2\\orders").encode()
    wrong = [good[:at] + c + good[at + 1:] for at in range(35) for c in (b"g", b"<", b"0", b"\n") if good[at:at + 1] != c]
    raws = [encode(Message(body, qid=4, report=True)) for body in [good, *wrong]]
    got = _whole(raws, TRACE_COLUMNS, True)
    assert got.column("trace_queue").to_pylist()[0] == "DIRECT=OS:qm2\\orders"
    assert got.equals(reference_batch(raws, NAMES, WHERE, TRACE_COLUMNS, True))


def test_columns_it_does_not_build_go_record_by_record():
    raws = [encode(Message(b"x", qid=3, label="abc"))]
    for name in ("msg_id", "unique_id", "lookup_id", "body", "props"):
        columns = tuple(c for c in MESSAGE_COLUMNS if c[0] == name)
        assert not record_arrays.handles(columns)
        with pytest.raises(record_arrays.Unhandled):
            record_arrays.record_batch(raws, NAMES, WHERE, columns)
        assert record_batch(raws, NAMES, WHERE, columns).equals(reference_batch(raws, NAMES, WHERE, columns))


def _bad_utf8(raw: bytes, good: bytes) -> bytes:
    at = raw.index(good)
    return raw[:at] + b"\xff" + raw[at + 1:]


@pytest.mark.parametrize("columns", [BUILT, TRACE_COLUMNS, (("label", "string"),), (("correl_id", "string"),)],
                         ids=["header-and-strings", "trace", "label", "correl_id"])
def test_a_record_it_cannot_read_is_bad_data_named_by_the_reference(columns):
    good = encode(Message(b"<MESSAGE ID>", qid=3, label="abcdefghijklmnopqrstuv", correl_id="c-123",
                          report=True, props={"k": "v"}))
    broken = [good[:20], good[:-1], good + b"!", b"\x09" + good[1:], _bad_utf8(good, b"abc"),
              _bad_utf8(good, b"c-123"), good[:2] + b"\x63" + good[3:]]  # state 99
    for raw in broken:
        try:
            want = reference_batch([good, raw], NAMES, WHERE, columns)
        except BadData as exc:
            with pytest.raises(record_arrays.Unhandled):
                record_arrays.record_batch([good, raw], NAMES, WHERE, columns)
            with pytest.raises(BadData, match=str(exc.message)[:30].replace("(", r"\(")):
                record_batch([good, raw], NAMES, WHERE, columns)
        else:  # a part the columns do not read: both read the rest alike
            assert record_batch([good, raw], NAMES, WHERE, columns).equals(want)


def test_a_batch_of_other_queues_only_is_none():
    raws = [encode(Message(b"x", qid=9))]
    assert record_batch(raws, NAMES, WHERE, BUILT) is None
    assert record_arrays.record_batch(raws, NAMES, WHERE, BUILT) is None


def test_the_first_bytes_of_any_span_are_the_spans_own_then_the_last_byte_again():
    # record_arrays._Bytes.first, which every view, label head and body head reads through, held
    # to its definition at every start and width, the spans that run past the buffer's end too
    import numpy as np
    import pyarrow as pa

    for size in (1, 2, 5, 17, 40):
        raw = bytes(range(7, 7 + size))
        data = record_arrays._Bytes(np.frombuffer(raw, np.uint8), pa.py_buffer(raw))
        at = np.arange(size, dtype=np.int64)
        for width in (1, 4, 12, 17, 35):
            want = [[raw[min(a + i, size - 1)] for i in range(width)] for a in range(size)]
            assert data.first(at, width).tolist() == want, (size, width)


@settings(max_examples=200, deadline=None)
@given(s.lists(s.tuples(s.integers(0, 80), s.integers(0, 40)), min_size=1, max_size=40), s.binary(min_size=1, max_size=120))
def test_a_view_is_byte_for_byte_the_view_arrow_builds(spans, buffer):
    # record_arrays._views writes Arrow's view layout itself: the length, then a short value's
    # bytes padded with zeros, or a long one's first four bytes, buffer 0 and its offset. Held to
    # the views pyarrow builds for the same values (the padding too, which values alone miss).
    import numpy as np
    import pyarrow as pa

    spans = [(min(at, len(buffer) - 1), length) for at, length in spans]
    spans = [(at, min(length, len(buffer) - at)) for at, length in spans]
    at = np.array([a for a, _ in spans], np.int64)
    length = np.array([n for _, n in spans], np.int64)
    data = record_arrays._Bytes(np.frombuffer(buffer, np.uint8), pa.py_buffer(buffer))
    got = record_arrays._views(data, at, length, pa.binary_view())
    want = pa.array([buffer[a:a + n] for a, n in spans], pa.binary_view())
    assert got.to_pylist() == want.to_pylist()
    got_views = np.frombuffer(got.buffers()[1], np.uint8).reshape(-1, 16)
    want_views = np.frombuffer(want.buffers()[1], np.uint8).reshape(-1, 16)[:len(spans)]
    inline = length <= 12
    assert (got_views[inline] == want_views[inline]).all()  # short: the whole view
    assert (got_views[~inline, :8] == want_views[~inline, :8]).all()  # long: length and prefix
    assert (got_views[~inline, 8:12] == 0).all()
    assert (got_views[~inline, 12:].copy().view("<i4")[:, 0] == at[~inline]).all()
