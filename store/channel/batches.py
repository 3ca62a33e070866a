"""BATCH, ACK and BYE bodies of protocol version 2 (docs/protocol.md §3). Each travels sealed
(`Session.seal`).

BATCH body — who sends, when, and the messages, in the order the receiver must enqueue them:

    incarnation (16), sent_at u64
    n_dest u16, then n_dest × (len u16, destination format name UTF-8)
    n_items u32, then n_items × (dest index u16, len u32, message record)

`incarnation` is the sending store's sending incarnation; with each record's seq (the sender's
SequentialID of the message in its outgoing queue, inside the record) it names one transfer,
which the receiver stores once. `sent_at` is when the batch left the sender (µs since the
epoch, the latest `since` of its messages). Destination names repeat (a batch usually goes to
one queue), so each is sent once and the items point at it. Records are the store's own binary
records (store/records.py); the receiving store decodes them strictly in its commit, never
this module.

ACK body — the sealed number of the BATCH frame this acknowledges, sent only after the
receiver's commit returned, and what became of its messages:

    batch seq u64, stored u32, duplicates u32
    n_reasons u8 (≤ 8), then n_reasons × (count u32, len u8, reason UTF-8 ≤ 120 bytes)

the arrivals the receiver could not deliver (dead-lettered there), counted by reason; more
reasons than 8 are summed under the last, "other reasons". BYE body: empty.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import MalformedBatch, ProtocolError

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_ITEM = struct.Struct(">HI")
_HEAD = struct.Struct(">16sQ")
_ACK = struct.Struct(">QIIB")
_REASON = struct.Struct(">IB")
MAX_DESTINATIONS = 0xFFFF
MAX_DEST_BYTES = 0xFFFF
MAX_REASONS = 8
MAX_REASON_BYTES = 120
OTHER_REASONS = "other reasons"


class Ack(NamedTuple):
    batch_seq: int
    stored: int
    duplicates: int
    dead_lettered: dict[str, int]


class Batch(NamedTuple):
    incarnation: bytes
    sent_at: int
    items: list[tuple[str, bytes]]


def encode_batch(items: list[tuple[str, bytes]], incarnation: bytes, sent_at: int) -> bytes:
    """The body of a BATCH frame holding `items` (destination format name, record) that the
    sending incarnation `incarnation` sends at `sent_at` (µs)."""
    if not items:
        raise ValueError("a batch holds at least one message")
    if len(incarnation) != 16:
        raise ValueError("a sending incarnation is 16 bytes")
    index: dict[str, int] = {}
    names: list[bytes] = []
    parts: list[bytes] = []
    item = _ITEM.pack
    for dest, record in items:
        i = index.get(dest)
        if i is None:
            raw = dest.encode("utf-8")
            if len(raw) > MAX_DEST_BYTES or len(index) >= MAX_DESTINATIONS:
                raise ValueError(f"destination {dest[:40]!r}… cannot be sent in a batch")
            i = index[dest] = len(names)
            names.append(_U16.pack(len(raw)) + raw)
        parts.append(item(i, len(record)))
        parts.append(record)
    return b"".join([_HEAD.pack(incarnation, sent_at), _U16.pack(len(names)), *names,
                     _U32.pack(len(items)), *parts])


def decode_batch(body: bytes | memoryview) -> Batch:
    """A BATCH body; MalformedBatch for anything that is not exactly one."""
    view = memoryview(body)
    end = len(view)
    try:
        incarnation, sent_at = _HEAD.unpack_from(view, 0)
        (n_dest,) = _U16.unpack_from(view, _HEAD.size)
        at = _HEAD.size + 2
        names: list[str] = []
        for _ in range(n_dest):
            (n,) = _U16.unpack_from(view, at)
            at += 2
            if at + n > end:
                raise MalformedBatch("BATCH destination runs past the end of the frame")
            names.append(bytes(view[at:at + n]).decode("utf-8"))
            at += n
        (count,) = _U32.unpack_from(view, at)
        at += 4
        if count == 0:
            raise MalformedBatch("BATCH holds no messages")
        if count > (end - at) // _ITEM.size:
            raise MalformedBatch(f"BATCH claims {count} messages, more than its bytes can hold")
        items: list[tuple[str, bytes]] = []
        unpack = _ITEM.unpack_from
        for _ in range(count):
            i, n = unpack(view, at)
            at += 6
            if at + n > end:
                raise MalformedBatch("BATCH record runs past the end of the frame")
            items.append((names[i], bytes(view[at:at + n])))
            at += n
    except struct.error:
        raise MalformedBatch("BATCH ends inside a field") from None
    except IndexError:
        raise MalformedBatch("BATCH item names a destination it does not hold") from None
    except UnicodeDecodeError:
        raise MalformedBatch("BATCH destination is not UTF-8") from None
    if at != end:
        raise MalformedBatch(f"BATCH has {end - at} bytes after its last message")
    return Batch(incarnation, sent_at, items)


def _short(text: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) <= MAX_REASON_BYTES:
        return raw
    return raw[:MAX_REASON_BYTES - 3].decode("utf-8", "ignore").encode("utf-8") + b"..."


def bounded_reasons(dead_lettered: dict[str, int]) -> dict[str, int]:
    """At most MAX_REASONS reasons (the most frequent; the rest summed under OTHER_REASONS),
    each at most MAX_REASON_BYTES of UTF-8: an ACK stays small whatever the receiver says."""
    ranked = sorted(((n, _short(r).decode("utf-8")) for r, n in dead_lettered.items() if n > 0),
                    key=lambda x: (-x[0], x[1]))
    out: dict[str, int] = {}
    for n, reason in ranked:
        if len(out) >= MAX_REASONS - 1 and reason not in out and len(ranked) > MAX_REASONS:
            reason = OTHER_REASONS
        out[reason] = out.get(reason, 0) + n
    return out


def encode_ack(batch_seq: int, stored: int, duplicates: int, dead_lettered: dict[str, int] | None = None) -> bytes:
    reasons = bounded_reasons(dead_lettered or {})
    parts = [_ACK.pack(batch_seq, stored, duplicates, len(reasons))]
    for reason, n in reasons.items():
        raw = reason.encode("utf-8")
        parts += (_REASON.pack(min(n, 0xFFFFFFFF), len(raw)), raw)
    return b"".join(parts)


def decode_ack(body: bytes | memoryview) -> Ack:
    view = memoryview(body)
    try:
        seq, stored, duplicates, n = _ACK.unpack_from(view, 0)
        if n > MAX_REASONS:
            raise ProtocolError(f"ACK names {n} reasons (at most {MAX_REASONS})")
        at = _ACK.size
        reasons: dict[str, int] = {}
        for _ in range(n):
            count, size = _REASON.unpack_from(view, at)
            at += _REASON.size
            if size > MAX_REASON_BYTES or at + size > len(view):
                raise ProtocolError("ACK reason runs past its limit or the frame")
            reason = bytes(view[at:at + size]).decode("utf-8")
            at += size
            reasons[reason] = reasons.get(reason, 0) + count
    except struct.error:
        raise ProtocolError(f"ACK body of {len(view)} bytes ends inside a field") from None
    except UnicodeDecodeError:
        raise ProtocolError("ACK reason is not UTF-8") from None
    if at != len(view):
        raise ProtocolError(f"ACK has {len(view) - at} bytes after its last field")
    return Ack(seq, stored, duplicates, reasons)


def decode_bye(body: bytes | memoryview) -> None:
    if len(body):
        raise ProtocolError("BYE carries no body")
