"""The frame codec (store/channel/frames.py) and the other wire codecs: exact layouts, strict
refusals, and Hypothesis fuzzing that only the documented errors ever come out."""

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.channel.batches import (
    MAX_REASON_BYTES, MAX_REASONS, MalformedBatch, decode_ack, decode_batch, encode_ack, encode_batch,
)
from store.channel.frames import (
    HEADER_SIZE, ErrorCode, Frame, FrameDecoder, FrameTooLarge, FrameType, PeerError, ProtocolError,
    TruncatedFrame, UnknownFrameType, decode_error, encode_error, encode_frame,
)
from store.channel.handshake import decode_challenge, decode_hello
from store.errors import ChannelError

TYPES = list(FrameType)


def test_frame_layout_is_length_type_payload():
    assert encode_frame(FrameType.BATCH, b"abc") == b"\x00\x00\x00\x03\x10abc"
    assert encode_frame(FrameType.READY) == b"\x00\x00\x00\x00\x04"


def test_decoder_returns_frames_split_anywhere_in_order():
    stream = b"".join(encode_frame(t, bytes([i]) * i) for i, t in enumerate(TYPES))
    expected = [Frame(t, bytes([i]) * i) for i, t in enumerate(TYPES)]
    for step in (1, 2, 3, 5, 7, len(stream)):
        d = FrameDecoder(1000)
        got = []
        for at in range(0, len(stream), step):
            got += d.feed(stream[at:at + step])
        assert got == expected
        assert d.pending == 0
        d.eof()  # between frames: a clean end


def test_oversized_length_is_refused_from_the_header_alone():
    d = FrameDecoder(max_frame=100)
    assert d.feed(encode_frame(FrameType.BATCH, b"x" * 100)) == [Frame(FrameType.BATCH, b"x" * 100)]
    with pytest.raises(FrameTooLarge, match="BATCH frame of 101 bytes is over the limit of 100"):
        d.feed(struct.pack(">IB", 101, FrameType.BATCH))  # no payload byte was sent


def test_the_limit_can_be_raised_after_the_handshake():
    d = FrameDecoder(max_frame=10)
    with pytest.raises(FrameTooLarge):
        d.feed(struct.pack(">IB", 11, FrameType.HELLO))
    d = FrameDecoder(max_frame=10)
    d.max_frame = 20
    assert d.feed(encode_frame(FrameType.BATCH, b"y" * 20))[0].payload == b"y" * 20


@pytest.mark.parametrize("ftype", [0x00, 0x05, 0x12, 0x7E, 0x80, 0xFF])
def test_unknown_frame_type_is_refused(ftype):
    with pytest.raises(UnknownFrameType, match=f"0x{ftype:02x}"):
        FrameDecoder().feed(struct.pack(">IB", 0, ftype))


def test_end_of_stream_inside_a_frame_is_truncation():
    frame = encode_frame(FrameType.BATCH, b"0123456789")
    for cut in range(1, len(frame)):
        d = FrameDecoder()
        assert d.feed(frame[:cut]) == []
        assert d.pending == cut
        with pytest.raises(TruncatedFrame, match="ended inside"):
            d.eof()


def test_frame_errors_are_channel_errors_exit_13():
    for cls in (UnknownFrameType, FrameTooLarge, TruncatedFrame, MalformedBatch):
        assert issubclass(cls, ProtocolError) and issubclass(cls, ChannelError)
        assert cls("x").exit_code == 13


def test_error_frames_round_trip_and_cap_their_text():
    frame = FrameDecoder().feed(encode_error(ErrorCode.AUTHENTICATION, "no"))[0]
    assert frame.type == FrameType.ERROR and decode_error(frame.payload) == (2, "no")
    long = FrameDecoder().feed(encode_error(ErrorCode.STORE, "é" * 5000))[0]
    assert len(long.payload) <= 2 + 1024
    assert decode_error(b"\x01") == (0, "(malformed error frame)")
    assert "authentication" in str(PeerError(2, "bad key"))


INCARNATION = bytes(range(16))


def test_batch_round_trip_interns_destinations():
    items = [("DIRECT=OS:qm2\\orders", b"r1"), ("DIRECT=OS:qm2\\orders", b""), ("PUBLIC=x", b"r3" * 100)]
    body = encode_batch(items, INCARNATION, 1_700_000_000_000_000)
    assert body.count(b"DIRECT=OS:qm2\\orders") == 1
    assert body[:24] == INCARNATION + struct.pack(">Q", 1_700_000_000_000_000)  # incarnation, sent_at first
    assert decode_batch(body) == (INCARNATION, 1_700_000_000_000_000, items)
    assert decode_batch(memoryview(body)).items == items
    with pytest.raises(ValueError):
        encode_batch(items, INCARNATION[:15], 0)


@pytest.mark.parametrize("body, error", [
    (b"", "ends inside"),
    (b"\x00\x00\x00\x00\x00\x00", "no messages"),
    (b"\x00\x01\x00\x05abc", "runs past"),
    (b"\x00\x01\x00\x01\xff\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00", "not UTF-8"),
    (b"\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00", "destination it does not hold"),
    (b"\x00\x01\x00\x01q\x00\x00\x00\x01\x00\x00\x00\x00\x00\x09ab", "runs past"),
    (b"\x00\x01\x00\x01q\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00!", "1 bytes after"),
    (b"\x00\x01\x00\x01q\xff\xff\xff\xff", "more than its bytes"),
])
def test_malformed_batches_are_refused(body, error):
    with pytest.raises(MalformedBatch, match=error):
        decode_batch(INCARNATION + bytes(8) + body if body else body)
    with pytest.raises(MalformedBatch, match="ends inside"):
        decode_batch(INCARNATION + bytes(7))  # cut inside sent_at


def test_ack_layout():
    assert encode_ack(7, 1000, 2) == struct.pack(">QIIB", 7, 1000, 2, 0)
    assert decode_ack(encode_ack(7, 1000, 2)) == (7, 1000, 2, {})
    body = encode_ack(7, 998, 0, {"expired in transit": 2})
    assert body == struct.pack(">QIIB", 7, 998, 0, 1) + struct.pack(">IB", 2, 18) + b"expired in transit"
    assert decode_ack(body) == (7, 998, 0, {"expired in transit": 2})
    for bad in (b"\x00" * 16, body[:-1], body + b"!", struct.pack(">QIIB", 1, 0, 0, 9) + bytes(200)):
        with pytest.raises(ProtocolError):
            decode_ack(bad)


def test_ack_reasons_stay_few_and_short_and_keep_the_total():
    many = {f"destination not available: queue 'q{i}' does not exist": i + 1 for i in range(20)}
    many["x" * 1000] = 5
    many["é" * 100] = 1  # cut on a character boundary
    ack = decode_ack(encode_ack(3, 0, 0, many))
    assert len(ack.dead_lettered) == MAX_REASONS and "other reasons" in ack.dead_lettered
    assert sum(ack.dead_lettered.values()) == sum(many.values())
    assert max(len(r.encode()) for r in ack.dead_lettered) <= MAX_REASON_BYTES
    assert ack.dead_lettered["destination not available: queue 'q19' does not exist"] == 20  # the most frequent kept
    assert len(encode_ack(3, 0, 0, many)) < 4096 - 40  # fits what a client reads from the server, sealed
    short = decode_ack(encode_ack(1, 0, 0, {"é" * 100: 1, "ok": 2}))
    assert short.dead_lettered["ok"] == 2 and all(len(r.encode()) <= MAX_REASON_BYTES for r in short.dead_lettered)


# ---- fuzzing ------------------------------------------------------------------------------

frames_st = st.lists(st.tuples(st.sampled_from(TYPES), st.binary(max_size=300)), max_size=8)
DOCUMENTED = (UnknownFrameType, FrameTooLarge, TruncatedFrame)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=2000), cuts=st.lists(st.integers(0, 2000), max_size=20),
       limit=st.integers(0, 1 << 33))
def test_fuzz_decoder_raises_only_documented_errors(data, cuts, limit):
    """Arbitrary bytes, split anywhere: whole frames come out, or one of the documented errors;
    never another exception, never a hang (each feed is bounded by the bytes given)."""
    d = FrameDecoder(max_frame=min(limit, 1 << 32))
    bounds = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
    consumed = 0
    try:
        for a, b in zip(bounds, bounds[1:], strict=False):
            for f in d.feed(data[a:b]):
                assert isinstance(f.type, FrameType) and len(f.payload) <= d.max_frame
                consumed += HEADER_SIZE + len(f.payload)
        d.eof()
        assert consumed == len(data)  # a clean end means every byte was a whole frame
    except DOCUMENTED:
        pass


@settings(max_examples=200, deadline=None)
@given(frames=frames_st, cuts=st.lists(st.integers(0, 3000), max_size=30), garbage=st.binary(min_size=1, max_size=40))
def test_fuzz_valid_frames_then_garbage(frames, cuts, garbage):
    """Valid frames decode exactly however the stream is split; what follows them is either
    more frames, a documented error, or truncation at the end."""
    stream = b"".join(encode_frame(t, p) for t, p in frames)
    d = FrameDecoder(max_frame=300)
    bounds = sorted({0, len(stream), *(c for c in cuts if c <= len(stream))})
    got = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        got += d.feed(stream[a:b])
    assert got == [Frame(t, p) for t, p in frames]
    try:
        d.feed(garbage)
        d.eof()
    except DOCUMENTED:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_fuzz_body_decoders_raise_only_protocol_errors(data):
    for decode in (decode_batch, decode_hello, decode_challenge, decode_ack):
        try:
            decode(data)
        except ProtocolError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["q", "DIRECT=OS:b\\q", "PUBLIC=é"]), st.binary(max_size=50)),
                min_size=1, max_size=30))
def test_fuzz_batch_round_trip(items):
    assert decode_batch(encode_batch(items, INCARNATION, 5)) == (INCARNATION, 5, items)
