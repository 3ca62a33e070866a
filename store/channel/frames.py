"""Frames: the unit of the channel protocol (docs/protocol.md §1).

    +----------------+--------+----------------------+
    | length: u32 BE | type:u8| payload: length bytes|
    +----------------+--------+----------------------+

`length` counts the payload only. A peer must never make us allocate what it likes: the
decoder refuses an unknown type or a length above its current limit as soon as it has the five
header bytes, before any of the payload is read. The limit is small (`HANDSHAKE_MAX_FRAME`)
until the peer has authenticated, then the negotiated maximum frame size.

`FrameDecoder` is incremental and strict: feed it bytes as they arrive, it returns the whole
frames they complete and raises a `ProtocolError` subclass for anything that is not a frame.
It never blocks and keeps at most one frame's bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from ..errors import ChannelErrorCode, FrameTooLarge, TruncatedFrame, UnknownFrameType
from ..errors import PeerError, ProtocolError  # noqa: F401 (importable from here too)

ErrorCode = ChannelErrorCode  # the codes of ERROR frames

HEADER = struct.Struct(">IB")
HEADER_SIZE = HEADER.size  # 5
DEFAULT_MAX_FRAME = 16 * 1024 * 1024
#: Smallest maximum frame size either side may configure: a batch of one large-ish message
#: must always fit, and handshake frames are below it.
MIN_MAX_FRAME = 64 * 1024
#: Largest maximum frame size: the header's length and CHALLENGE's max_frame field are u32.
MAX_MAX_FRAME = 0xFFFFFFFF
#: Frames before authentication are small; an unauthenticated peer gets no bigger buffer.
HANDSHAKE_MAX_FRAME = 4096
#: Longest text an ERROR frame carries.
MAX_ERROR_TEXT = 1024


class FrameType(IntEnum):
    HELLO = 0x01      # client → server: magic, versions, client nonce, GUID, name
    CHALLENGE = 0x02  # server → client: version, server nonce, GUID, max frame, name, server proof
    AUTH = 0x03       # client → server: client proof
    READY = 0x04      # server → client: accepted
    BATCH = 0x10      # client → server: sealed batch of messages
    ACK = 0x11        # server → client: sealed, after the batch's commit
    BYE = 0x20        # client → server: sealed, no more batches; the server closes
    ERROR = 0x7F      # either way: code and text, then the sender closes


_TYPES = frozenset(int(t) for t in FrameType)


@dataclass(frozen=True, slots=True)
class Frame:
    type: FrameType
    payload: bytes


def encode_frame(ftype: FrameType, payload: bytes = b"") -> bytes:
    """One frame's bytes. Refuses a payload no u32 length can describe."""
    if len(payload) > 0xFFFFFFFF:
        raise FrameTooLarge(f"a {ftype.name} payload of {len(payload)} bytes does not fit a frame")
    return HEADER.pack(len(payload), ftype) + payload


def frame_header(ftype: FrameType, length: int) -> bytes:
    """The header alone, for writers that send a large payload without copying it."""
    return HEADER.pack(length, ftype)


def check_header(header: bytes, max_frame: int) -> tuple[FrameType, int]:
    """(type, payload length) of a five-byte header, or the ProtocolError it deserves."""
    length, ftype = HEADER.unpack(header)
    if ftype not in _TYPES:
        raise UnknownFrameType(f"unknown frame type 0x{ftype:02x}")
    if length > max_frame:
        raise FrameTooLarge(
            f"{FrameType(ftype).name} frame of {length} bytes is over the limit of {max_frame} bytes")
    return FrameType(ftype), length


class FrameDecoder:
    """Bytes in, whole frames out (see the module docstring). `max_frame` may be raised
    between feeds, e.g. after the handshake."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        if max_frame < 0:
            raise ValueError("max_frame must not be negative")
        self.max_frame = max_frame
        self._buf = bytearray()
        self._head: tuple[FrameType, int] | None = None  # header of the frame being read

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held (0 between frames)."""
        return len(self._buf) + (HEADER_SIZE if self._head is not None else 0)

    def feed(self, data: bytes) -> list[Frame]:
        """Add bytes; return the frames now complete, in order. After a ProtocolError the
        decoder is unusable (the stream has no frame boundaries left to trust)."""
        buf = self._buf
        buf += data
        frames: list[Frame] = []
        at, end = 0, len(buf)
        try:
            while True:
                if self._head is None:
                    if end - at < HEADER_SIZE:
                        return frames
                    self._head = check_header(bytes(buf[at:at + HEADER_SIZE]), self.max_frame)
                    at += HEADER_SIZE
                ftype, length = self._head
                if end - at < length:
                    return frames
                with memoryview(buf) as view:  # one copy of a large payload, not two
                    frames.append(Frame(ftype, bytes(view[at:at + length])))
                at += length
                self._head = None
        finally:
            del buf[:at]  # one move per feed, however many frames it held

    def eof(self) -> None:
        """The stream ended: fine between frames, TruncatedFrame inside one."""
        if self._head is not None or self._buf:
            have = len(self._buf) + (HEADER_SIZE if self._head is not None else 0)
            what = f"{self._head[0].name} frame" if self._head is not None else "frame header"
            raise TruncatedFrame(f"the connection ended inside a {what} ({have} bytes of it received)")


# ---- ERROR frames --------------------------------------------------------------------------

_ERROR = struct.Struct(">H")


def encode_error(code: ErrorCode, text: str) -> bytes:
    raw = text.encode("utf-8")[:MAX_ERROR_TEXT]
    return encode_frame(FrameType.ERROR, _ERROR.pack(code) + raw)


def decode_error(payload: bytes) -> tuple[int, str]:
    """(code, text) of an ERROR payload; lenient (it is only ever shown to people)."""
    if len(payload) < _ERROR.size:
        return 0, "(malformed error frame)"
    (code,) = _ERROR.unpack_from(payload)
    return code, payload[_ERROR.size:_ERROR.size + MAX_ERROR_TEXT].decode("utf-8", "replace")
