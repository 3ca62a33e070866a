"""The record codec, its JSON form and the key layouts."""


import pytest
from hypothesis import given, settings
from hypothesis import strategies as s

from store import errors, keys
from store.records import (
    AVAILABLE, FORMAT_V1, STATES, TX_LOCKED, Message, at_rest, decode, decode_many, encode, tx_put_committed,
)

texts = s.text(max_size=40)
messages = s.builds(
    Message,
    body=s.binary(max_size=300),
    queue=s.just("q"),
    state=s.sampled_from(STATES),
    priority=s.integers(0, 7),
    seq=s.integers(1, (1 << 56) - 1),
    qid=s.integers(1, 1 << 31),
    origin=s.binary(min_size=16, max_size=16),
    msg_n=s.integers(0, (1 << 32) - 1),
    lookup_hi=s.integers(0, 7),
    put_time=s.integers(0, 1 << 60),
    expires=s.none() | s.integers(1, 1 << 60),
    correl_id=s.none() | s.text(max_size=60),
    label=texts,
    props=s.dictionaries(texts, texts, max_size=4),
    app_specific=s.integers(-(1 << 31), (1 << 31) - 1),
    report=s.booleans(), express=s.booleans(), trace=s.booleans(), dead_letter=s.booleans(),
    report_queue=s.none() | texts,
    hops=s.integers(0, 0xFFFF), backouts=s.integers(0, 0xFFFF),
    confirm_id=s.none() | s.integers(1, (1 << 63) - 1),
    lock_id=s.none() | s.integers(1, (1 << 63) - 1),
    tx=s.none() | s.integers(1, (1 << 63) - 1),
    lease_expires=s.none() | s.integers(1, 1 << 60),
    since=s.none() | s.integers(1, 1 << 60),
    tx_put=s.booleans(),
    dead_letter_reason=s.none() | texts,
    original_queue=s.none() | texts,
)


@given(messages)
@settings(max_examples=300)
def test_encode_then_decode_is_the_identity(m):
    assert decode(encode(m), "q") == m


@given(messages)
@settings(max_examples=100)
def test_a_message_at_rest_decodes_as_one_in_flight_does(m):
    """decode reads an at-rest record's in-flight fields and an optional-free record's lengths
    as one field each: the same message with and without them set decodes to the same rest."""
    bare = Message(m.body, "q", m.state, m.priority, m.seq, m.qid, m.origin, m.msg_n, m.lookup_hi, m.put_time,
                   m.expires, app_specific=m.app_specific, report=m.report, express=m.express, trace=m.trace,
                   dead_letter=m.dead_letter, hops=m.hops, backouts=m.backouts, tx_put=m.tx_put)
    assert decode(encode(bare), "q") == bare
    assert len(encode(bare)) == len(encode(Message(m.body))), "an optional-free record is header and body"


@given(messages)
@settings(max_examples=300)
def test_a_committed_tx_put_record_is_the_message_made_available(m):
    """The commit of a transaction's puts rewrites each record's header (tx_put_committed):
    byte for byte what leave(m, AVAILABLE) encodes (at_rest clears the in-flight fields and
    the tx-put flag), and no record but a tx-locked put's is rewritten."""
    raw = encode(m)
    committed = tx_put_committed(raw)
    if m.state != TX_LOCKED or not m.tx_put:
        assert committed is None
        return
    assert committed == encode(at_rest(decode(raw, "q")))
    assert decode(committed, "q").state == AVAILABLE


@given(s.lists(messages, max_size=8), s.none() | s.binary(max_size=60))
@settings(max_examples=200)
def test_many_records_decode_as_each_one_does(ms, garbage):
    """decode_many (a batched get's loop) reads each record as decode does, in order, the
    common records and the others mixed; one that is not a record makes it BadData."""
    raws = [encode(m) for m in ms]
    assert decode_many(raws, "q") == ms
    if garbage is None:
        return
    try:
        bad = decode(garbage, "q")
    except errors.BadData:
        with pytest.raises(errors.BadData):
            decode_many([*raws, garbage, *raws], "q")
    else:
        assert decode_many([*raws, garbage], "q") == [*ms, bad]


@given(s.binary(max_size=200))
@settings(max_examples=500)
def test_decoding_garbage_raises_only_bad_data(raw):
    try:
        decode(raw)
    except errors.BadData:
        pass


@given(messages, s.integers(0, 1 << 16), s.binary(min_size=1, max_size=8), s.none() | s.integers(0, 1 << 16))
@settings(max_examples=500)
def test_a_damaged_record_is_bad_data_or_a_message_that_encodes_to_itself(m, at, junk, cut):
    """Bytes of a valid record overwritten (header fields, lengths, in-flight fields, body),
    maybe cut short: decode refuses it with BadData, or what it reads is a message it reads
    back the same."""
    raw = bytearray(encode(m))
    at %= len(raw)
    raw[at:at + len(junk)] = junk
    if cut is not None:
        raw = raw[:cut % (len(raw) + 1)]
    try:
        got = decode(bytes(raw), "q")
    except errors.BadData:
        return
    assert decode(encode(got), "q") == got


def test_records_carry_their_format_version():
    raw = encode(Message(b"x"))
    assert raw[0] == FORMAT_V1
    with pytest.raises(errors.BadData, match="format 99"):
        decode(bytes([99]) + raw[1:])


def test_truncated_record_is_bad_data():
    raw = encode(Message(b"hello"))
    with pytest.raises(errors.BadData):
        decode(raw[:-1])


def test_json_form_round_trips_binary_and_text_bodies():
    for body in (b"plain text", b"\xff\x00binary"):
        m = Message(body, queue="q", origin=bytes(range(16)), msg_n=7, put_time=1_795_000_000_123_456,
                    expires=1_795_000_060_000_000, props={"k": "v"}, correl_id="c", label="l")
        d = m.to_dict()
        assert ("body" in d) != ("body_b64" in d)
        back = Message.from_dict(d)
        assert (back.body, back.msg_id, back.put_time, back.expires, back.props) == (
            m.body, m.msg_id, m.put_time, m.expires, m.props)
        assert d["put_time"] == "2026-11-18T11:06:40.123456Z"


@pytest.mark.parametrize("bad", [
    [], {"body": "x"}, {"body": "x", "msg_id": "nope", "put_time": "2026-01-01T00:00:00Z"},
    {"body": 3, "msg_id": "00000000-0000-0000-0000-000000000000\\1", "put_time": "2026-01-01T00:00:00Z"},
    {"body_b64": "!!", "msg_id": "00000000-0000-0000-0000-000000000000\\1", "put_time": "2026-01-01T00:00:00Z"},
    {"body": "x", "msg_id": "00000000-0000-0000-0000-000000000000\\1", "put_time": "yesterday"},
    {"body": "x", "msg_id": "00000000-0000-0000-0000-000000000000\\1", "put_time": "2026-01-01T00:00:00Z",
     "state": "floating"},
])
def test_malformed_json_records_are_bad_data(bad):
    with pytest.raises((errors.BadData, errors.InvalidArgument)):
        Message.from_dict(bad)


@given(s.lists(s.tuples(s.integers(0, 7), s.integers(0, (1 << 63) - 1)), min_size=2, max_size=30))
def test_position_key_order_is_priority_high_to_low_then_arrival(entries):
    by_key = sorted(entries, key=lambda e: keys.pos_key(5, e[0], e[1]))
    assert by_key == sorted(entries, key=lambda e: (-e[0], e[1]))


@given(s.integers(1, 1 << 31), s.integers(0, 7), s.integers(0, 7), s.integers(0, 1 << 62), s.integers(0, 1 << 62))
def test_position_keys_of_one_queue_share_its_prefix(qid, p1, p2, a, b):
    prefix = keys.queue_prefix(qid)
    assert keys.pos_key(qid, p1, a).startswith(prefix)
    assert keys.pos_key(qid, p2, b).startswith(keys.priority_prefix(qid, p2))
    assert keys.pos_key(qid + 1, 7, 0) > keys.pos_key(qid, 0, (1 << 63))


@given(s.integers(0, 1 << 62), s.integers(0, 1 << 62), s.integers(0, 1 << 62))
def test_deadline_keys_sort_by_time(t1, t2, seq):
    assert (keys.deadline_key(keys.LEASE, t1, seq) < keys.deadline_key(keys.LEASE, t2, seq)) == (t1 < t2)
    assert keys.deadline_of(keys.deadline_key(keys.LEASE, t1, seq)) == t1
    assert keys.seq_of(keys.deadline_key(keys.EXPIRY, t1, seq)) == seq


def test_index_tags_are_distinct_single_bytes():
    assert len(set(keys.INDEX_TAGS)) == len(keys.INDEX_TAGS)
    assert all(len(tag) == 1 for tag in keys.INDEX_TAGS)


def test_header_layout_is_stable():
    # the v1 header is a stored format: changing it needs a new version, not an edit
    from store import records
    assert records._HEADER.format == ">BBBBIQB16sIqqiHHqqqqq"
    assert records._HEADER.size == 101


def test_a_canonical_record_with_a_bool_for_an_int_is_refused():
    d = Message(b"x", queue="q", origin=bytes(16), msg_n=1, put_time=5).to_dict()
    assert Message.from_dict(dict(d)).body == b"x"  # the canonical form reads back
    d["priority"] = True
    with pytest.raises(errors.BadData, match="priority"):
        Message.from_dict(d)


@pytest.mark.parametrize("reason, status", [
    ("expired in transit", "MQ_ERROR_MESSAGE_TIMED_OUT"), ("max-backouts", "MQMSG_CLASS_NACK_RECEIVE_REJECTED"),
    ("hop count exceeded (a message makes at most 15 hops)", "MQMSG_CLASS_NACK_HOP_COUNT_EXCEEDED"),
    ("something else", "MQ_ERROR"), (None, None)])
def test_a_dead_letter_reason_stands_for_its_msmq_status(reason, status):
    from store.outgoing import HOP_LIMIT_REASON
    from store.records import dead_letter_status

    assert HOP_LIMIT_REASON.startswith("hop count exceeded")  # the reason outgoing.receive writes
    assert dead_letter_status(reason) == status


def test_times_are_written_with_four_digit_years_and_read_only_within_them():
    from store.errors import BadData
    from store.records import MAX_US, MIN_US, iso_time, parse_iso_time

    assert iso_time(MIN_US) == "0001-01-01T00:00:00.000000Z"  # strftime("%Y") wrote "1-01-01"
    assert parse_iso_time(iso_time(MIN_US)) == MIN_US and parse_iso_time(iso_time(MAX_US)) == MAX_US
    for text in ("9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"):  # an offset takes it out
        with pytest.raises(BadData, match="is outside 0001-01-01"):
            parse_iso_time(text)
