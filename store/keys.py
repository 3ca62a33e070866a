"""Every LMDB database of a store and the layout of its keys, in one place.

The key layouts are designed so that the order the store needs is the order LMDB keeps
(big-endian integers compare bytewise like numbers):

- ``msg``      ``seq(8)`` → message record. ``seq`` is the SequentialID given at enqueue
  (seed 000); the seven low bytes of the lookup id are these bytes, so the record table is also
  the lookup-id index.
- ``pos``      ``qid(4) 7-priority(1) seq(8)`` → ``b""``: the position list of *available*
  messages only. Priority high→low then arrival is plain key order, so "the next available
  message" is one ``set_range`` on the queue prefix, never a scan past in-flight messages.
- ``msgid``    ``origin(16) n(4) seq(8)`` → ``b""``: the msg_id index (a copy keeps its msg_id,
  so the seq makes each entry unique).
- ``uniq``     ``origin(16) put_time(8) seq(8)`` → ``b""``: the MQe unique-id index.
- ``correl``   ``qid(4) len(1) correl 7-priority(1) seq(8)`` → ``b""``: correlation ids in queue
  order within a queue, every state.
- ``confirm``  ``qid(4) confirm_id(8) 7-priority(1) seq(8)`` → ``b""``: messages pending under a
  confirm id, in queue order.
- ``lock``     ``qid(4) lock_id(8) 7-priority(1) seq(8)`` → ``b""``: messages under a browse lock.
- ``lease``    ``deadline(8) seq(8)`` → ``b""``: in-flight messages by lease deadline, so lapsed
  leases are the head of the table.
- ``expiry``   ``expires(8) seq(8)`` → ``b""``: messages with a time to be received.
- ``queues``   casefolded name → queue record (JSON); ``qids`` ``qid(4)`` → casefolded name;
  ``qstats`` ``qid(4)`` → ``count(8) bytes(8)``.
- ``meta``     identity and counters of the queue manager (names below).
"""

from __future__ import annotations

import struct

DATABASES = (
    b"meta", b"queues", b"qids", b"qstats",
    b"msg", b"pos", b"msgid", b"uniq", b"correl",
    b"confirm", b"lock", b"lease", b"expiry",
)

# meta keys
META_FORMAT = b"format"
META_GUID = b"guid"
META_NAME = b"name"
META_CREATED = b"created"
META_SEQUENTIAL_ID = b"seq"
META_MSG_N = b"msgn"
META_NEXT_QID = b"qidn"
META_QUOTA = b"quota"
META_THROTTLED = b"throttled"
META_BYTES = b"bytes"
META_COUNT = b"count"

U64 = struct.Struct(">Q")
U32 = struct.Struct(">I")
QSTATS = struct.Struct(">QQ")
_POS = struct.Struct(">IBQ")
_ID_IN_QUEUE = struct.Struct(">IQBQ")
_ORIGIN_N_SEQ = struct.Struct(">16sIQ")
_ORIGIN_TIME_SEQ = struct.Struct(">16sqQ")
_TIME_SEQ = struct.Struct(">qQ")

SEQ_SIZE = 8
LOOKUP_SEQ_MASK = (1 << 56) - 1


def seq_key(seq: int) -> bytes:
    return U64.pack(seq)


def queue_prefix(qid: int) -> bytes:
    return U32.pack(qid)


def pos_key(qid: int, priority: int, seq: int) -> bytes:
    return _POS.pack(qid, 7 - priority, seq)


def priority_prefix(qid: int, priority: int) -> bytes:
    return _POS.pack(qid, 7 - priority, 0)[:5]


def msgid_key(origin: bytes, n: int, seq: int) -> bytes:
    return _ORIGIN_N_SEQ.pack(origin, n, seq)


def msgid_prefix(origin: bytes, n: int) -> bytes:
    return _ORIGIN_N_SEQ.pack(origin, n, 0)[:20]


def uniq_key(origin: bytes, put_time: int, seq: int) -> bytes:
    return _ORIGIN_TIME_SEQ.pack(origin, put_time, seq)


def uniq_prefix(origin: bytes, put_time: int) -> bytes:
    return _ORIGIN_TIME_SEQ.pack(origin, put_time, 0)[:24]


def correl_prefix(qid: int, correl: bytes) -> bytes:
    return U32.pack(qid) + bytes((len(correl),)) + correl


def correl_key(qid: int, correl: bytes, priority: int, seq: int) -> bytes:
    return correl_prefix(qid, correl) + bytes((7 - priority,)) + U64.pack(seq)


def id_in_queue_key(qid: int, ident: int, priority: int, seq: int) -> bytes:
    """Key of the confirm and lock tables: an id's messages in queue order."""
    return _ID_IN_QUEUE.pack(qid, ident, 7 - priority, seq)


def id_in_queue_prefix(qid: int, ident: int) -> bytes:
    return _ID_IN_QUEUE.pack(qid, ident, 0, 0)[:12]


def deadline_key(deadline: int, seq: int) -> bytes:
    return _TIME_SEQ.pack(deadline, seq)


def seq_of(key: bytes) -> int:
    """The seq is the last eight bytes of every message-pointing key."""
    return U64.unpack_from(key, len(key) - SEQ_SIZE)[0]


def deadline_of(key: bytes) -> int:
    return _TIME_SEQ.unpack(key)[0]
