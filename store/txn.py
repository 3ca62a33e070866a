"""One write transaction of a store: the message-state machine and its indexes.

Every public operation of `Store` runs as one `Txn`: one LMDB write transaction, committed
whole or not at all (SPEC §2). All index maintenance lives here, in `_index_state` /
`_unindex_state` and `insert` / `remove`, so that records and indexes cannot disagree.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

import lmdb

from . import keys
from .errors import (
    AlreadyReceived, MessageExpired, MessageNotFound, QueueNotAvailable, QueueQuotaExceeded,
    StoreCorrupt, StoreQuotaExceeded, Throttled, UnknownConfirmId, UnknownLockId,
)
from .keys import U32, U64
from .queues import DEAD_LETTER, QueueInfo, decode_queue, queue_key
from .records import (
    AVAILABLE, BROWSE_GET_UNCONFIRMED, GET_UNCONFIRMED, LOCKED_BROWSE, PUT_UNCONFIRMED,
    TX_LOCKED, Message, decode, encode,
)

if TYPE_CHECKING:
    from .filters import Filter

MAINTENANCE_BATCH = 256


class Txn:
    """A write transaction with the store's tables, the time it runs at, and its effects."""

    def __init__(self, lt: lmdb.Transaction, dbs: dict[str, lmdb._Database], now: int) -> None:
        self.lt = lt
        self.dbs = dbs
        self.now = now
        self.durable = False          # True once a change must survive an OS crash (SPEC §2)
        self.woke: set[int] = set()   # queues where a message became available
        self._queues: dict[bytes, QueueInfo] = {}
        self._qnames: dict[int, str] = {}
        self._qstats: dict[int, list[int]] = {}
        self._meta: dict[bytes, int] = {}
        self._meta_dirty: set[bytes] = set()
        self._origin: bytes | None = None
        self.msg_db = dbs["msg"]

    # ---- meta counters -----------------------------------------------------------------

    def meta_int(self, name: bytes) -> int:
        value = self._meta.get(name)
        if value is None:
            raw = self.lt.get(name, db=self.dbs["meta"])
            value = self._meta[name] = U64.unpack(raw)[0] if raw else 0
        return value

    def set_meta_int(self, name: bytes, value: int) -> None:
        self._meta[name] = value
        self._meta_dirty.add(name)

    @property
    def origin(self) -> bytes:
        if self._origin is None:
            self._origin = bytes(self.lt.get(keys.META_GUID, db=self.dbs["meta"]))
        return self._origin

    def flush(self) -> None:
        """Write the counters this transaction changed."""
        meta = self.dbs["meta"]
        for name in self._meta_dirty:
            self.lt.put(name, U64.pack(self._meta[name]), db=meta)
        qstats = self.dbs["qstats"]
        for qid, (count, size) in self._qstats.items():
            self.lt.put(U32.pack(qid), keys.QSTATS.pack(count, size), db=qstats)

    # ---- queues ------------------------------------------------------------------------

    def queue(self, name: str) -> QueueInfo:
        key = queue_key(name)
        q = self._queues.get(key)
        if q is None:
            raw = self.lt.get(key, db=self.dbs["queues"])
            if raw is None:
                raise QueueNotAvailable(f"queue {name!r} does not exist (create it with `mqcli queue create {name}`)")
            q = self._queues[key] = decode_queue(raw)
        return q

    def queue_name(self, qid: int) -> str:
        name = self._qnames.get(qid)
        if name is None:
            raw = self.lt.get(U32.pack(qid), db=self.dbs["qids"])
            if raw is None:
                raise StoreCorrupt(f"a message points at queue number {qid}, which does not exist")
            name = self._qnames[qid] = self.queue(bytes(raw).decode()).name
        return name

    def qstats(self, qid: int) -> list[int]:
        stats = self._qstats.get(qid)
        if stats is None:
            raw = self.lt.get(U32.pack(qid), db=self.dbs["qstats"])
            stats = self._qstats[qid] = list(keys.QSTATS.unpack(raw)) if raw else [0, 0]
        return stats

    # ---- records -----------------------------------------------------------------------

    def load(self, seq: int) -> Message | None:
        raw = self.lt.get(keys.seq_key(seq), db=self.msg_db)
        if raw is None:
            return None
        m = decode(raw)
        m.queue = self.queue_name(m.qid)
        return m

    def _store(self, m: Message) -> None:
        self.lt.put(keys.seq_key(m.seq), encode(m), db=self.msg_db)

    def _index_state(self, m: Message) -> None:
        """Add the index entries that depend on the message's state."""
        lt, dbs = self.lt, self.dbs
        if m.state == AVAILABLE:
            lt.put(keys.pos_key(m.qid, m.priority, m.seq), b"", db=dbs["pos"])
            self.woke.add(m.qid)
        if m.confirm_id:
            lt.put(keys.id_in_queue_key(m.qid, m.confirm_id, m.priority, m.seq), b"", db=dbs["confirm"])
        if m.lock_id:
            lt.put(keys.id_in_queue_key(m.qid, m.lock_id, m.priority, m.seq), b"", db=dbs["lock"])
        if m.lease_expires:
            lt.put(keys.deadline_key(m.lease_expires, m.seq), b"", db=dbs["lease"])

    def _unindex_state(self, m: Message) -> None:
        lt, dbs = self.lt, self.dbs
        if m.state == AVAILABLE:
            lt.delete(keys.pos_key(m.qid, m.priority, m.seq), db=dbs["pos"])
        if m.confirm_id:
            lt.delete(keys.id_in_queue_key(m.qid, m.confirm_id, m.priority, m.seq), db=dbs["confirm"])
        if m.lock_id:
            lt.delete(keys.id_in_queue_key(m.qid, m.lock_id, m.priority, m.seq), db=dbs["lock"])
        if m.lease_expires:
            lt.delete(keys.deadline_key(m.lease_expires, m.seq), db=dbs["lease"])

    def insert(self, m: Message) -> None:
        """Store a message that already has its seq, with every index entry."""
        lt, dbs = self.lt, self.dbs
        lt.put(keys.seq_key(m.seq), encode(m), db=self.msg_db, append=True)
        lt.put(keys.msgid_key(m.origin, m.msg_n, m.seq), b"", db=dbs["msgid"])
        lt.put(keys.uniq_key(m.origin, m.put_time, m.seq), b"", db=dbs["uniq"])
        if m.correl_id is not None:
            lt.put(keys.correl_key(m.qid, m.correl_id.encode(), m.priority, m.seq), b"", db=dbs["correl"])
        if m.expires is not None:
            lt.put(keys.deadline_key(m.expires, m.seq), b"", db=dbs["expiry"])
        self._index_state(m)
        self._count(m, +1)

    def remove(self, m: Message) -> None:
        """Delete a message and every index entry pointing at it."""
        lt, dbs = self.lt, self.dbs
        lt.delete(keys.seq_key(m.seq), db=self.msg_db)
        lt.delete(keys.msgid_key(m.origin, m.msg_n, m.seq), db=dbs["msgid"])
        lt.delete(keys.uniq_key(m.origin, m.put_time, m.seq), db=dbs["uniq"])
        if m.correl_id is not None:
            lt.delete(keys.correl_key(m.qid, m.correl_id.encode(), m.priority, m.seq), db=dbs["correl"])
        if m.expires is not None:
            lt.delete(keys.deadline_key(m.expires, m.seq), db=dbs["expiry"])
        self._unindex_state(m)
        self._count(m, -1)

    def _count(self, m: Message, sign: int) -> None:
        stats = self.qstats(m.qid)
        stats[0] += sign
        stats[1] += sign * len(m.body)
        self.set_meta_int(keys.META_COUNT, self.meta_int(keys.META_COUNT) + sign)
        self.set_meta_int(keys.META_BYTES, self.meta_int(keys.META_BYTES) + sign * len(m.body))
        if not m.express:
            self.durable = True

    def transition(self, m: Message, *, durable: bool, **changes: object) -> Message:
        """Move a message to another state (and/or change its in-flight fields)."""
        self._unindex_state(m)
        for name, value in changes.items():
            setattr(m, name, value)
        if m.state == AVAILABLE:
            m.confirm_id = m.lock_id = m.tx = m.lease_expires = m.since = None
        self._index_state(m)
        self._store(m)
        if durable and not m.express:
            self.durable = True
        return m

    # ---- enqueue (seed 000) ------------------------------------------------------------

    def next_msg_n(self) -> int:
        n = (self.meta_int(keys.META_MSG_N) + 1) & 0xFFFFFFFF
        self.set_meta_int(keys.META_MSG_N, n)
        return n

    def next_put_time(self) -> int:
        """Put times are strictly increasing in a store, so unique ids are unique."""
        t = max(self.now, self.meta_int(b"ptime") + 1)
        self.set_meta_int(b"ptime", t)
        return t

    def check_enqueue(self, q: QueueInfo, m: Message) -> None:
        """The checks of seed 000 §3.1.7.1.9, in the seed's order."""
        size = len(m.body)
        if self.meta_int(keys.META_THROTTLED):
            raise Throttled("the queue manager is throttled; no message is accepted (`mqcli qmgr set --no-throttle`)")
        quota = self.meta_int(keys.META_QUOTA)
        if quota and self.meta_int(keys.META_BYTES) + size > quota:
            raise StoreQuotaExceeded(
                f"the store quota of {quota} bytes would be exceeded "
                f"({self.meta_int(keys.META_BYTES)} used, message {size})")
        if q.quota and self.qstats(q.qid)[1] + size > q.quota:
            raise QueueQuotaExceeded(
                f"the quota of queue {q.name!r} ({q.quota} bytes) would be exceeded "
                f"({self.qstats(q.qid)[1]} used, message {size})")
        if m.expires is not None and m.expires <= self.now:
            raise MessageExpired("the message expired before it could be enqueued")

    def enqueue(self, q: QueueInfo, m: Message, *, check: bool = True, transactional: bool = False) -> Message:
        if check:
            self.check_enqueue(q, m)
        seq = self.meta_int(keys.META_SEQUENTIAL_ID) + 1
        self.set_meta_int(keys.META_SEQUENTIAL_ID, seq)
        m.seq = seq
        # seed 000: high byte 0x07-priority for a transactional message, else 0x00
        m.lookup_hi = (7 - m.priority) if transactional else 0
        m.qid = q.qid
        m.queue = q.name
        self.insert(m)
        return m

    # ---- dead-lettering, backouts, leases, expiry --------------------------------------

    def dead_letter(self, m: Message, reason: str) -> Message | None:
        """Move a message to the dead-letter queue, or drop it if sent without dead-lettering."""
        self.remove(m)
        if not m.dead_letter:
            return None
        dlq = self.queue(DEAD_LETTER)
        moved = replace(
            m, state=AVAILABLE, confirm_id=None, lock_id=None, tx=None, lease_expires=None,
            since=None, expires=None, dead_letter_reason=reason, original_queue=m.queue,
        )
        return self.enqueue(dlq, moved, check=False)

    def backout(self, m: Message, **changes: object) -> Message | None:
        """Count one backout; at the queue's max-backouts the message is dead-lettered."""
        m.backouts = min(m.backouts + 1, 0xFFFF)
        q = self.queue(m.queue)
        if q.max_backouts and m.backouts >= q.max_backouts:
            return self.dead_letter(m, "max-backouts")
        return self.transition(m, durable=True, **changes)

    def undo_one(self, m: Message) -> Message | None:
        """SPEC §5 `undo` of one in-flight message; returns it, or None if it is gone."""
        if m.state == PUT_UNCONFIRMED:
            self.remove(m)
            self.durable = True
            return None
        if m.state == GET_UNCONFIRMED:
            return self.backout(m, state=AVAILABLE)
        if m.state == BROWSE_GET_UNCONFIRMED:
            return self.backout(m, state=LOCKED_BROWSE, confirm_id=None)
        if m.state == LOCKED_BROWSE:
            return self.transition(m, durable=True, state=AVAILABLE)
        return m

    def maintain(self) -> None:
        """Undo lapsed leases and expire messages past their time to be received.

        Runs at the start of every write, so lapses and expiry happen "on the next access"
        (SPEC §5); `sweep` runs it until nothing is left.
        """
        self.lapse_leases()
        self.expire_messages()

    def _due(self, db_name: str) -> list[int]:
        due = []
        cur = self.lt.cursor(db=self.dbs[db_name])
        if cur.first():
            for key in cur.iternext(values=False):
                if keys.deadline_of(key) > self.now or len(due) >= MAINTENANCE_BATCH:
                    break
                due.append(keys.seq_of(key))
        return due

    def lapse_leases(self) -> int:
        done = 0
        for seq in self._due("lease"):
            m = self.load(seq)
            if m is None or m.state in (AVAILABLE, TX_LOCKED):
                continue
            # a lapsed lease undoes the whole in-flight state, browse lock included
            m = self.undo_one(m)
            if m is not None and m.state == LOCKED_BROWSE:
                self.transition(m, durable=True, state=AVAILABLE)
            done += 1
        return done

    def expire_messages(self) -> int:
        done = 0
        for seq in self._due("expiry"):
            m = self.load(seq)
            if m is None or m.state == TX_LOCKED:
                continue
            self.dead_letter(m, "expired")
            done += 1
        return done

    # ---- finding messages --------------------------------------------------------------

    def queue_messages(self, q: QueueInfo) -> Iterator[Message]:
        """Every message of a queue, any state, in queue order."""
        available = self.available(q)
        held = sorted(self._held_seqs(q.qid).items())
        pending = next(available, None)
        for (_, seq), _ in held:
            m = self.load(seq)
            if m is None:
                continue
            while pending is not None and (7 - pending.priority, pending.seq) < (7 - m.priority, m.seq):
                yield pending
                pending = next(available, None)
            yield m
        while pending is not None:
            yield pending
            pending = next(available, None)

    def _held_seqs(self, qid: int) -> dict[tuple[int, int], None]:
        prefix = keys.queue_prefix(qid)
        held: dict[tuple[int, int], None] = {}
        for name in ("confirm", "lock"):
            cur = self.lt.cursor(db=self.dbs[name])
            if cur.set_range(prefix):
                for key in cur.iternext(values=False):
                    if not key.startswith(prefix):
                        break
                    held[(key[12], keys.seq_of(key))] = None
        return held

    def available(self, q: QueueInfo, priority: int | None = None) -> Iterator[Message]:
        """Available messages in queue order: a cursor walk of the position list."""
        prefix = keys.queue_prefix(q.qid) if priority is None else keys.priority_prefix(q.qid, priority)
        cur = self.lt.cursor(db=self.dbs["pos"])
        seek = prefix
        # Re-seek after each message: the caller may have removed the position it was given.
        # Position keys have one length, so key + b"\0" sorts after key and before its successor.
        while cur.set_range(seek):
            key = cur.key()
            if not key.startswith(prefix):
                return
            m = self.load(keys.seq_of(key))
            if m is None:
                raise StoreCorrupt(f"position {key.hex()} points at no message")
            yield m
            seek = key + b"\0"

    def by_index(self, db_name: str, prefix: bytes) -> Iterator[Message]:
        seqs = []
        cur = self.lt.cursor(db=self.dbs[db_name])
        if cur.set_range(prefix):
            for key in cur.iternext(values=False):
                if not key.startswith(prefix):
                    break
                seqs.append(keys.seq_of(key))
        for seq in seqs:
            m = self.load(seq)
            if m is not None:
                yield m

    def by_lookup_id(self, lookup_id: int) -> Iterator[Message]:
        m = self.load(lookup_id & keys.LOOKUP_SEQ_MASK)
        if m is not None and m.lookup_id == lookup_id:
            yield m

    def with_confirm_id(self, q: QueueInfo, confirm_id: int) -> list[Message]:
        found = list(self.by_index("confirm", keys.id_in_queue_prefix(q.qid, confirm_id)))
        if not found:
            raise UnknownConfirmId(f"no message of queue {q.name!r} is pending under confirm id {confirm_id}")
        return found

    def with_lock_id(self, q: QueueInfo, lock_id: int) -> list[Message]:
        found = list(self.by_index("lock", keys.id_in_queue_prefix(q.qid, lock_id)))
        if not found:
            raise UnknownLockId(f"no message of queue {q.name!r} is locked under lock id {lock_id}")
        return found

    def candidates(self, q: QueueInfo, f: Filter, lock_id: int | None = None) -> Iterator[Message]:
        """Messages a get or browse may take, in queue order, using the most selective index.

        With an exact id (msg_id, lookup_id) a message that exists but is held raises
        AlreadyReceived, and one that does not exist raises MessageNotFound (seed 002).
        """
        if lock_id is not None:
            held = [m for m in self.with_lock_id(q, lock_id) if f.matches(m)]
            eligible = [m for m in held if m.state == LOCKED_BROWSE]
            if held and not eligible:
                raise AlreadyReceived(f"the messages under lock id {lock_id} are already got, pending confirm")
            yield from eligible
            return
        if f.msg_id is not None or f.lookup_id is not None:
            source = (self.by_index("msgid", keys.msgid_prefix(*f.msg_id_parts)) if f.msg_id is not None
                      else self.by_lookup_id(f.lookup_id))  # type: ignore[arg-type]
            found = [m for m in source if m.qid == q.qid and f.matches(m) and m.state != PUT_UNCONFIRMED]
            if not found:
                raise MessageNotFound(f"no message {f.describe()} in queue {q.name!r}")
            eligible = [m for m in found if m.state == AVAILABLE]
            if not eligible:
                raise AlreadyReceived(f"message {f.describe()} is held by a lock, confirm id or transaction")
            yield from eligible
            return
        if f.correl_id is not None:
            prefix = keys.correl_prefix(q.qid, f.correl_id.encode())
            if f.priority is not None:
                prefix += bytes((7 - f.priority,))
            for m in self.by_index("correl", prefix):
                if m.state == AVAILABLE and f.matches(m):
                    yield m
            return
        yield from self.available(q, f.priority)

    def take(self, q: QueueInfo, f: Filter, count: int, lock_id: int | None = None) -> list[Message]:
        taken = []
        for m in self.candidates(q, f, lock_id):
            taken.append(m)
            if len(taken) >= count:
                break
        return taken


def new_guid() -> bytes:
    return uuid.uuid4().bytes


Deliver = Callable[[Message], None]
