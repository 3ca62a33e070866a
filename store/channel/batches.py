"""BATCH, ACK and BYE bodies (docs/protocol.md §3). Each travels sealed (`Session.seal`).

BATCH body — the messages, in the order the receiver must enqueue them:

    n_dest u16, then n_dest × (len u16, destination format name UTF-8)
    n_items u32, then n_items × (dest index u16, len u32, message record)

Destination names repeat (a batch usually goes to one queue), so each is sent once and the
items point at it. Records are the store's own binary records (store/records.py); the receiving
store decodes them strictly in its commit, never this module.

ACK body — `batch seq u64, stored u32, duplicates u32`: the sealed number of the BATCH frame
this acknowledges, sent only after the receiver's commit returned. BYE body: empty.
"""

from __future__ import annotations

import struct

from .frames import ProtocolError

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_ITEM = struct.Struct(">HI")
_ACK = struct.Struct(">QII")
MAX_DESTINATIONS = 0xFFFF
MAX_DEST_BYTES = 0xFFFF


class MalformedBatch(ProtocolError):
    pass


def encode_batch(items: list[tuple[str, bytes]]) -> bytes:
    """The body of a BATCH frame holding `items` (destination format name, record)."""
    if not items:
        raise ValueError("a batch holds at least one message")
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
    return b"".join([_U16.pack(len(names)), *names, _U32.pack(len(items)), *parts])


def decode_batch(body: bytes | memoryview) -> list[tuple[str, bytes]]:
    """The items of a BATCH body; MalformedBatch for anything that is not exactly one."""
    view = memoryview(body)
    end = len(view)
    try:
        (n_dest,) = _U16.unpack_from(view, 0)
        at = 2
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
    return items


def encode_ack(batch_seq: int, stored: int, duplicates: int) -> bytes:
    return _ACK.pack(batch_seq, stored, duplicates)


def decode_ack(body: bytes | memoryview) -> tuple[int, int, int]:
    if len(body) != _ACK.size:
        raise ProtocolError(f"ACK body of {len(body)} bytes (expected {_ACK.size})")
    return _ACK.unpack(body)


def decode_bye(body: bytes | memoryview) -> None:
    if len(body):
        raise ProtocolError("BYE carries no body")
