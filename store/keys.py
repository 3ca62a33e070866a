"""Every LMDB database of a store and the layout of its keys, in one place.

The key layouts are designed so that the order the store needs is the order LMDB keeps
(big-endian integers compare bytewise like numbers). A commit writes every B-tree page it
touched, so the hot path touches three tables only: ``msg``, ``idx`` and ``meta``.

- ``pos``   ``P qid(4) 7-priority(1) seq(8)`` → the message record: the position list of
  *available* messages, holding their records. Priority high→low then arrival is plain key
  order, so "the next available message" is one ``set_range`` on the queue prefix that yields
  the record too, never a walk past in-flight messages. ``seq`` is the SequentialID given at
  enqueue ([MS-MQDMPR] 3.1.7.1.9), also the seven low bytes of the lookup id. A table of its own: new
  positions mostly go at the end of a queue's range, and LMDB keeps pages full only for
  sequential inserts that no other key range interleaves with (measured: 20,000 positions
  interleaved with their msg_id entries in one table took 1.6x the pages).
- ``idx``   every secondary index, each under a one-byte tag; each entry's value is the
  message's *location*, ``qid(4) 7-priority(1)``: with the seq at the end of the key it names
  the position entry.

  - ``M origin(16) n(4) seq(8)``: msg_id (a copy keeps its msg_id; the seq keeps entries apart).
  - ``U origin(16) put_time(8) seq(8)``: the MQe unique id.
  - ``N`` and ``V``, laid out as ``M`` and ``U``: runs of messages put together, whose msg_id
    numbers, put times and seqs step by one; the value is a location and a count(2)
    (store/identity.py). A message put alone has ``M`` and ``U`` entries of its own.
  - ``C qid(4) len(1) correl 7-priority(1) seq(8)``: correlation ids in queue order, every state.
  - ``K qid(4) confirm_id(8) 7-priority(1) seq(8)``: messages pending under a confirm id.
  - ``L qid(4) lock_id(8) 7-priority(1) seq(8)``: messages under a browse lock.
  - ``E deadline(8) seq(8)``: in-flight messages by lease deadline; lapsed ones come first.
  - ``X expires(8) seq(8)``: messages with a time to be received, soonest first.
  - ``T qid(4) tx(8) 7-priority(1) seq(8)``: tx-locked messages of a transaction, per queue.
  - ``Y deadline(8) tx(8)``: active transactions by timeout (value ``b""``).

- ``msg``   ``seq(8)`` → the record of an *in-flight* message (any state but available); it moves
  back to its position entry when the message is available again.
- ``txs``   ``tx(8)`` → the transaction record (JSON: created, deadline, queues touched).
- ``meta``  identity and counters of the queue manager (names below),
  ``q qid(4)`` → ``count(8) bytes(8)`` per queue, and ``t qid(4)`` → ``last put(8) last get(8)``
  per queue (µs since the epoch, 0 for never; IBM MQ's LPUTTIME / LGETTIME). The ``t`` entry
  is written only by commits that put or get, in the ``meta`` page they write anyway.
- ``queues`` casefolded name → queue record (JSON); ``qids`` ``qid(4)`` → casefolded name.
- ``links`` casefolded link name → link record (JSON, store/links.py).
- ``outq``  casefolded outgoing queue name → its dispatch state (JSON, store/outgoing.py).
- ``seen``  transfers this queue manager has received over a link, so a message resent after a
  lost ack is stored once, in two entries per arrival (store/outgoing.py):
  ``I incarnation(16) seq(8)`` → arrival time(8), and ``J time(8) incarnation(16) seq(8)`` →
  ``b""`` in time order, for forgetting them after a retention period. Stores written before
  keyed them by msg_id: ``M origin(16) n(4)`` and ``T time(8) origin(16) n(4)``, read and
  forgotten the same way.
- ``holders`` token u64 → the live process holding messages in flight under that token while
  it writes them out or sends them (store/holders.py).
- ``ids``   confirm ids and lock ids whose lease lapsed, kept a day (store/ids.py) so that a late
  confirm or undo is told what happened and no new get, put or browse with lock takes the id
  meanwhile: ``K qid(4) confirm_id(8)`` and ``L qid(4) lock_id(8)`` → the lapse record (JSON:
  when, and where the id's messages went), and ``T time(8) K|L qid(4) id(8)`` → ``b""`` in
  time order, for forgetting them a few at a time. Written only when a lease lapses, so the
  hot path never touches it.
"""

from __future__ import annotations

import struct
from functools import lru_cache

from .errors import InvalidArgument

DATABASES = (b"meta", b"queues", b"qids", b"pos", b"msg", b"idx", b"txs", b"links", b"outq", b"seen",
             b"holders", b"ids")

POS, MSGID, UNIQ, CORREL, CONFIRM, LOCK, LEASE, EXPIRY = b"P", b"M", b"U", b"C", b"K", b"L", b"E", b"X"
TX, TX_TIMEOUT = b"T", b"Y"
MSGID_RUN, UNIQ_RUN = b"N", b"V"  # msg_id and unique-id entries standing for several messages
INDEX_TAGS = (POS, MSGID, UNIQ, CORREL, CONFIRM, LOCK, LEASE, EXPIRY, TX, TX_TIMEOUT, MSGID_RUN, UNIQ_RUN)

# meta keys
META_FORMAT = b"format"
META_GUID = b"guid"
META_NAME = b"name"
META_CREATED = b"created"
META_COUNTERS = b"counters"  # SequentialID, msg_id number, put time, messages, bytes
META_NEXT_QID = b"qidn"
META_QUOTA = b"quota"
META_TX_ID = b"txid"
META_THROTTLED = b"throttled"
META_MAX_MESSAGE_SIZE = b"maxmsgsize"  # absent (0): records.DEFAULT_MAX_MESSAGE_SIZE
META_INCARNATION = b"incarnation"  # the sending incarnation: id(16) st_dev(8) st_ino(8) (store/outgoing.py)
META_BACKUP = b"backup"  # in a backup's copy only: time(8); its first send starts a new incarnation
META_REPORT_QUEUE = b"reportq"  # the queue manager's own report queue (a queue name, UTF-8); absent: none
META_NAMES = frozenset((META_FORMAT, META_GUID, META_NAME, META_CREATED, META_COUNTERS, META_NEXT_QID,
                        META_QUOTA, META_TX_ID, META_THROTTLED, META_MAX_MESSAGE_SIZE, META_INCARNATION,
                        META_BACKUP, META_REPORT_QUEUE))

U64 = struct.Struct(">Q")
U32 = struct.Struct(">I")
QSTATS = struct.Struct(">QQ")
QTIMES = struct.Struct(">qq")
# tag, then the fields of the key functions below, in their order (7-priority where a priority is)
POS_KEY = struct.Struct(">cIBQ")
ID_IN_QUEUE_KEY = struct.Struct(">cIQBQ")
ORIGIN_N_SEQ_KEY = struct.Struct(">c16sIQ")
ORIGIN_TIME_SEQ_KEY = struct.Struct(">c16sqQ")
_TIME_SEQ = struct.Struct(">cqQ")

SEQ_SIZE = 8
LOOKUP_SEQ_MASK = (1 << 56) - 1
# LMDB's longest key, in bytes (mdb_env_get_maxkeysize; py-lmdb's Environment.max_key_size()): 511
# as LMDB is built by default and as py-lmdb bundles it. A longer key fails the put with
# MDB_BAD_VALSIZE, which says nothing of the name that made it.
MAX_KEY = 511


_LOCATION = struct.Struct(">IB")


@lru_cache(maxsize=4096)  # few queues, asked on every put and get
def location(qid: int, priority: int) -> bytes:
    """The value of every secondary index entry: where the message's position entry is."""
    return _LOCATION.pack(qid, 7 - priority)


def seq_key(seq: int) -> bytes:
    return U64.pack(seq)


def queue_key(name: str, most: int = MAX_KEY) -> bytes:
    """The key of a queue in ``queues`` (and ``outq``, and of a link in ``links``): names are
    case-insensitive, so the key is the casefolded name. A key longer than `most` bytes is
    InvalidArgument: LMDB cannot hold it, so no queue has that name (queues.validate_name asks
    for less, leaving room for the journal's)."""
    key = name.casefold().encode("utf-8")
    if len(key) > most:
        raise InvalidArgument(f"queue name {name!r} is too long in bytes: {len(key)} case-folded (UTF-8), "
                              f"at most {most}")
    return key


@lru_cache(maxsize=4096)  # few queues, asked on every put and get
def qstats_key(qid: int) -> bytes:
    return b"q" + U32.pack(qid)


@lru_cache(maxsize=4096)  # few queues, asked on every put and get
def qtimes_key(qid: int) -> bytes:
    return b"t" + U32.pack(qid)


@lru_cache(maxsize=4096)  # few queues, asked on every put and get
def queue_prefix(qid: int) -> bytes:
    """Prefix of a queue's positions."""
    return POS + U32.pack(qid)


def pos_key(qid: int, priority: int, seq: int) -> bytes:
    return POS_KEY.pack(POS, qid, 7 - priority, seq)


def priority_prefix(qid: int, priority: int) -> bytes:
    return POS_KEY.pack(POS, qid, 7 - priority, 0)[:6]


def correl_prefix(qid: int, correl: bytes) -> bytes:
    return CORREL + U32.pack(qid) + bytes((len(correl),)) + correl


def correl_key(qid: int, correl: bytes, priority: int, seq: int) -> bytes:
    return correl_prefix(qid, correl) + bytes((7 - priority,)) + U64.pack(seq)


def id_in_queue_key(tag: bytes, qid: int, ident: int, priority: int, seq: int) -> bytes:
    """Key of the confirm (K) and lock (L) indexes: an id's messages in queue order."""
    return ID_IN_QUEUE_KEY.pack(tag, qid, ident, 7 - priority, seq)


def id_in_queue_prefix(tag: bytes, qid: int, ident: int | None = None) -> bytes:
    if ident is None:
        return tag + U32.pack(qid)
    return ID_IN_QUEUE_KEY.pack(tag, qid, ident, 0, 0)[:13]


def priority_in_id_key(key: bytes) -> int:
    return 7 - key[13]


def deadline_key(tag: bytes, deadline: int, seq: int) -> bytes:
    """Key of the lease (E) and expiry (X) indexes."""
    return _TIME_SEQ.pack(tag, deadline, seq)


def seq_of(key: bytes) -> int:
    """The seq is the last eight bytes of every index key."""
    seq: int = U64.unpack_from(key, len(key) - SEQ_SIZE)[0]
    return seq


def deadline_of(key: bytes) -> int:
    deadline: int = _TIME_SEQ.unpack(key)[1]
    return deadline
