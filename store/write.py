"""One LMDB write of a store (`Write`): the message-state machine and its indexes.

Every public operation of `Store` runs as one `Write`: one LMDB write transaction, committed
whole or not at all (docs/design.md#store). (Not to be confused with an MSMQ transaction, which spans
invocations and lives in store/msmq_transactions.py.) All index maintenance lives here, in `_place` / `_unplace`
and `insert_many` / `remove_many` (the msg_id and unique-id runs through store/identity.py), so
that records and indexes cannot disagree.

Where a record lives depends on its state (see keys.py): an available message's record is the
value of its position entry, so the next message is one cursor step that yields the record
too; an in-flight message's record is in the `msg` table under its seq. Every other index
entry carries the message's location (queue, priority) as its value, so a record is found
from any index in one or two reads.
"""

from __future__ import annotations

import bisect
import itertools
import struct
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import replace
from operator import itemgetter
from typing import TYPE_CHECKING, Unpack

import lmdb

from . import holders, identity, ids, keys, queue_counters
from .errors import (
    AlreadyReceived, InvalidArgument, MessageExpired, QueueExists, QueueNotAvailable,
    QueueQuotaExceeded,
    MessageTooLarge, StoreCorrupt, StoreQuotaExceeded, Throttled,
)
from .deadletters import dead_lettered
from .keys import U32, U64, queue_key
from .queue_counters import QueueCounters
from .queues import (
    QueueAttrs, QueueInfo, dead_letter_queue, decode_queue, encode_queue, journal_name, new_queue, validate_name,
)
from .records import (
    AVAILABLE, BROWSE_GET_UNCONFIRMED, DEFAULT_MAX_MESSAGE_SIZE, FORMAT_V1, GET_UNCONFIRMED, LOCKED_BROWSE,
    PUT_UNCONFIRMED, TX_LOCKED, VERSION_AND_PUT_TIME, Message, RecordView, at_rest, decode, encode, iso_time,
    body_size_of, put_time_of, tx_put_committed,
)

if TYPE_CHECKING:
    from .filters import Filter
    from .selectors import Selector

MAINTENANCE_BATCH = 256
GONE = None  # where `Write.leave` sends a message that leaves the store


class Counters:
    """The queue manager's hot counters: one meta record, read once per transaction, written
    at flush. SequentialID ([MS-MQDMPR] 3.1.7.1.9), the last msg_id number and put time, messages, bytes."""

    __slots__ = ("seq", "msg_n", "put_time", "count", "bytes")
    RECORD = struct.Struct(">QQqqq")

    def __init__(self, raw: bytes | None) -> None:
        values = self.RECORD.unpack(raw) if raw else (0, 0, 0, 0, 0)
        self.seq, self.msg_n, self.put_time, self.count, self.bytes = values

    def encode(self) -> bytes:
        return self.RECORD.pack(self.seq, self.msg_n, self.put_time, self.count, self.bytes)


class Carry:
    """The meta records a committed write of this process read or wrote (counters, per-queue
    stats and counters, settings, the origin), as they are after its commit, for this process's
    next write to use instead of reading them again. Valid only in the write transaction whose
    id is the committed one's plus one: no other write came between (an aborted one, or a
    commit that changed nothing, takes no id). So it is made only by a commit that changed the
    store (Write.flush wrote), and used once: Store._write hands it over at the start of a
    write and takes a new one after its commit."""

    __slots__ = ("txn", "origin", "counters", "meta", "qstats", "qcounters", "qtimes", "last_run", "any_held",
                 "soonest", "queues", "qnames")

    def __init__(self) -> None:
        self.txn = -1
        self.origin: bytes | None = None
        self.counters: Counters | None = None
        self.meta: dict[bytes, int] = {}
        self.qstats: dict[int, list[int]] = {}
        self.qcounters: dict[int, QueueCounters] = {}
        self.qtimes: dict[int, tuple[int, int]] = {}
        self.last_run: tuple[bytes, int, int, bytes] | None = None  # Write.last_run
        self.any_held: bool | None = None  # Write.any_held, when read and no hold changed since
        self.soonest: int | None = None  # Write.maintenance_due
        self.queues: dict[bytes, QueueInfo] = {}  # Write.find_queue: the records as they are after the commit
        self.qnames: dict[int, str] = {}


_NO_CARRY = Carry()  # read only: a Write with nothing carried looks here and finds nothing


class Write:
    """A write transaction with the store's tables, the time it runs at, and its effects."""

    __slots__ = ("lt", "dbs", "now", "durable", "woke", "_queues", "_queue_cache", "_qnames", "_qstats", "_qtimes",
                 "_qtimes_stored", "_qcounters", "_qcounters_dirty", "_qreasons", "_meta", "_meta_dirty", "_origin",
                 "_qm_name", "_counters", "msg_db", "idx_db", "pos_db", "_placed", "_any_held", "_soonest",
                 "_cursors", "last_run", "_carried", "_committed")  # one made per operation: no instance dict to fill

    def __init__(self, lt: lmdb.Transaction[bytes], dbs: dict[str, lmdb._Database], now: int,
                 queue_cache: dict[bytes, tuple[bytes, QueueInfo]] | None = None,
                 committed: Callable[[], lmdb.Transaction[bytes]] | None = None) -> None:
        self.lt = lt
        # a write's: a read transaction of the store as last committed (queue_counters)
        self._committed = committed
        self.dbs = dbs
        self.now = now
        self.durable = False          # True once a change must survive an OS crash (docs/design.md#store)
        self.woke: set[int] = set()   # queues where a message became available
        self._queues: dict[bytes, QueueInfo] = {}
        # decoded queue records of earlier transactions, reused while their bytes are unchanged;
        # QueueInfo objects are therefore never changed in place (use dataclasses.replace)
        self._queue_cache = {} if queue_cache is None else queue_cache
        self._qnames: dict[int, str] = {}
        self._qstats: dict[int, list[int]] = {}
        self._qtimes: dict[int, list[int]] = {}  # qid -> [last put, last get] this commit set (0: not)
        self._qtimes_stored: dict[int, tuple[int, int]] = {}  # qid -> (last put, last get) as stored
        self._qcounters: dict[int, QueueCounters] = {}  # store/queue_counters.py, as read or computed
        self._qcounters_dirty: set[int] = set()
        self._qreasons: dict[int, dict[str, int]] = {}  # dead-lettered by reason, changed here
        self._meta: dict[bytes, int] = {}
        self._meta_dirty: set[bytes] = set()
        self._origin: bytes | None = None
        self._qm_name: str | None = None
        self._counters: Counters | None = None
        self.msg_db = dbs["msg"]
        self.idx_db = dbs["idx"]
        self.pos_db = dbs["pos"]
        # qid -> seq -> (7-priority, hold) of the messages held in place (store/holders.py),
        # read on first use and again after a hold changes
        self._placed: dict[int, dict[int, tuple[int, holders.Hold]]] | None = None
        self._any_held: bool | None = None  # whether `holders` has a row, read on first use
        # no lease, expiry or transaction deadline is sooner than this (maintenance_due); None: not known
        self._soonest: int | None = None
        self._cursors: dict[str, lmdb.Cursor[bytes]] = {}
        # (key, first seq, count, location) of the msg_id run identity.release found last
        self.last_run: tuple[bytes, int, int, bytes] | None = None
        self._carried = _NO_CARRY

    def cursor(self, name: str) -> lmdb.Cursor[bytes]:
        """This write's one cursor on table `name`, made on first use: for a lookup that is done
        with it before it returns (never kept across a yield, where another lookup would move it)."""
        cur = self._cursors.get(name)
        if cur is None:
            cur = self._cursors[name] = self.lt.cursor(db=self.dbs[name])
        return cur

    def adopt(self, carry: Carry) -> None:
        """Use what the previous commit left (Carry): only when this transaction's id follows it."""
        self._carried = carry
        self._origin = carry.origin
        self.last_run = carry.last_run
        self._any_held, self._soonest = carry.any_held, carry.soonest
        self._queues, self._qnames = carry.queues, carry.qnames

    def carry(self, txn: int) -> Carry:
        """What this write leaves for the next, once committed as transaction `txn`."""
        c = Carry() if self._carried is _NO_CARRY else self._carried
        c.txn = txn
        c.origin = self._origin
        c.last_run = self.last_run
        c.any_held, c.soonest = self._any_held, self._soonest
        c.queues, c.qnames = self._queues, self._qnames  # every change of a queue record popped its entry
        if self._counters is not None:
            c.counters = self._counters
        c.meta.update(self._meta)
        c.qstats.update(self._qstats)
        c.qcounters.update(self._qcounters)
        c.qtimes.update(self._qtimes_stored)
        return c

    # ---- meta counters -----------------------------------------------------------------

    def meta_int(self, name: bytes) -> int:
        value = self._meta.get(name)
        if value is None:
            value = self._carried.meta.get(name)
            if value is None:
                raw = self.lt.get(name, db=self.dbs["meta"])
                value = U64.unpack(raw)[0] if raw else 0
            self._meta[name] = value
        return value

    def set_meta_int(self, name: bytes, value: int) -> None:
        self._meta[name] = value
        self._meta_dirty.add(name)

    @property
    def counters(self) -> Counters:
        if self._counters is None:
            self._counters = self._carried.counters or Counters(self.lt.get(keys.META_COUNTERS, db=self.dbs["meta"]))
        return self._counters

    @property
    def origin(self) -> bytes:
        if self._origin is None:
            guid = self.lt.get(keys.META_GUID, db=self.dbs["meta"])
            assert guid is not None, "Store.open refuses a store without its GUID"
            self._origin = guid
        return self._origin

    @property
    def report_queue(self) -> str | None:
        """The queue manager's own report queue (qmgr set --report-queue), or None."""
        raw = self.lt.get(keys.META_REPORT_QUEUE, db=self.dbs["meta"])
        return None if raw is None else bytes(raw).decode()

    @property
    def qm_name(self) -> str:
        if self._qm_name is None:
            self._qm_name = bytes(self.lt.get(keys.META_NAME, db=self.dbs["meta"]) or b"").decode()
        return self._qm_name

    def flush(self) -> bool:
        """Write the counters this transaction changed. True if it wrote any: the commit then
        changes the store, and so takes a transaction id of its own (an LMDB commit that
        changed nothing leaves the id to the next writer; Store._write carries nothing then)."""
        meta = self.dbs["meta"]
        wrote = bool(self._meta_dirty or self._counters is not None or self._qstats or self._qtimes
                     or self._qcounters_dirty or self._qreasons)
        for name in self._meta_dirty:
            self.lt.put(name, U64.pack(self._meta[name]), db=meta)
        qid: int | None = None  # the queue whose counters are being written
        try:
            if self._counters is not None:
                self.lt.put(keys.META_COUNTERS, self._counters.encode(), db=meta)
            for qid, (count, size) in self._qstats.items():
                self.lt.put(keys.qstats_key(qid), keys.QSTATS.pack(count, size), db=meta)
            for qid in self._qtimes:
                times = self._qtimes_stored[qid] = self._times(qid)
                self.lt.put(keys.qtimes_key(qid), keys.QTIMES.pack(*times), db=meta)
            for qid in self._qcounters_dirty:
                self.lt.put(queue_counters.counters_key(qid), self._qcounters[qid].encode(), db=meta)
        except struct.error:
            # counters are trusted as read, not checked on every change: one that went below zero
            # or past its 64 bits here was read from a damaged store
            whose = "the store's counters" if qid is None else f"the counters of queue {self.queue_name(qid)!r}"
            raise StoreCorrupt(f"{whose} are out of range (a damaged store); run `mqcli check`") from None
        for qid, reasons in self._qreasons.items():
            self.lt.put(queue_counters.reasons_key(qid), queue_counters.encode_reasons(reasons), db=meta)
        return wrote

    # ---- queues ------------------------------------------------------------------------

    def queue(self, name: str) -> QueueInfo:
        """The queue stored under `name` (casefolded). A name from outside the store (a user's,
        a file's, a peer's, maybe a format name) is resolved by store/addressing.py instead."""
        q = self.find_queue(name)
        if q is None:
            try:  # the way to make it, only for a name a queue may have (no shell quoting needed)
                how = f" (create it with `mqcli queue create {'-- ' if name[:1] == '-' else ''}{validate_name(name)}`)"
            except InvalidArgument:
                how = ""
            raise QueueNotAvailable(f"queue {name!r} does not exist{how}")
        return q

    def find_queue(self, name: str) -> QueueInfo | None:
        """`queue`, or None when no queue is stored under `name`."""
        if type(name) is not str:
            raise InvalidArgument(f"a queue name must be a str, got {type(name).__name__} {name!r:.40}")
        if not name:  # LMDB takes no empty key
            raise QueueNotAvailable("the queue name is empty")
        key = queue_key(name)
        q = self._queues.get(key)
        if q is None:
            raw = self.lt.get(key, db=self.dbs["queues"])
            if raw is None:
                return None
            cached = self._queue_cache.get(key)
            if cached is not None and cached[0] == raw:
                q = cached[1]
            else:
                q = decode_queue(raw)
                self._queue_cache[key] = (raw, q)
            self._queues[key] = q
            self._qnames[q.qid] = q.name  # what queue_name would read back for its qid
        return q

    def queue_changed(self, name: str) -> None:
        """The record of queue `name` was written or deleted in this write: `find_queue` reads
        it again (this write's queues go on to the next one: Carry)."""
        self._queues.pop(queue_key(name), None)

    def create_queue(self, name: str, **attrs: Unpack[QueueAttrs]) -> QueueInfo:
        key = queue_key(name)
        if self.lt.get(key, db=self.dbs["queues"]) is not None:
            raise QueueExists(f"queue {name!r} already exists")
        qid = self.meta_int(keys.META_NEXT_QID) + 1
        self.set_meta_int(keys.META_NEXT_QID, qid)
        q = new_queue(name, qid, self.now, **attrs)
        self.lt.put(key, encode_queue(q), db=self.dbs["queues"])
        self._queues.pop(key, None)
        self.lt.put(U32.pack(qid), key, db=self.dbs["qids"])
        self.lt.put(keys.qstats_key(qid), keys.QSTATS.pack(0, 0), db=self.dbs["meta"])
        self.durable = True
        return q

    def got(self, q: QueueInfo, removed: list[Message], size: int | None = None) -> None:
        """Messages a get removed (a plain get, a confirmed one, a committed transactional one):
        the queue's last get time, and a copy of each in NAME;journal if the queue is journaled
        (docs/design.md#queues; made on first use, with the removal time in the property mqcli.journal_time).
        `size`: the bytes of their bodies, when the caller counted them already."""
        if not removed:
            return
        self._qtimes.setdefault(q.qid, [0, 0])[1] = self.now
        c = self.queue_counters(q.qid, change=True)
        c.got_messages += len(removed)
        if size is None:
            size = 0
            for m in removed:
                size += len(m.body)
        c.got_bytes += size
        if not q.journal:
            return
        jq = self.journal_queue(q.name)
        stamp = iso_time(self.now)
        copies = [at_rest(replace(m, expires=None, original_queue=q.name,
                                  props={**m.props, "mqcli.journal_time": stamp}))
                  for m in removed]
        self.enqueue(jq, copies, check=False)

    def journal_queue(self, name: str) -> QueueInfo:
        """The journal of queue `name` (NAME;journal), made on first use."""
        try:
            return self.queue(journal_name(name))
        except QueueNotAvailable:
            return self.create_queue(journal_name(name), label=f"journal of {name}")

    def queue_names(self) -> list[str]:
        """Casefolded names of every queue, in name order."""
        return [bytes(k).decode() for k in self.lt.cursor(db=self.dbs["queues"]).iternext(values=False)]

    def queue_exists(self, qid: int) -> bool:
        return qid in self._qnames or self.lt.get(U32.pack(qid), db=self.dbs["qids"]) is not None

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
            stats = self._carried.qstats.get(qid)
            if stats is None:
                raw = self.lt.get(keys.qstats_key(qid), db=self.dbs["meta"])
                stats = list(keys.QSTATS.unpack(raw)) if raw else [0, 0]
            self._qstats[qid] = stats
        return stats

    def _times(self, qid: int) -> tuple[int, int]:
        """Last put and last get (0: never): what this commit set, else what is stored."""
        stored = self._qtimes_stored.get(qid) or self._carried.qtimes.get(qid)
        if stored is None:
            raw = self.lt.get(keys.qtimes_key(qid), db=self.dbs["meta"])
            stored = self._qtimes_stored[qid] = keys.QTIMES.unpack(raw) if raw else (0, 0)
        put, got = stored
        pending = self._qtimes.get(qid)
        if pending is not None:
            put, got = pending[0] or put, pending[1] or got
        return put, got

    def queue_times(self, qid: int) -> tuple[int | None, int | None]:
        """When a message was last put on the queue and last got from it (None: never)."""
        put, got = self._times(qid)
        return put or None, got or None

    def forget_queue(self, qid: int) -> None:
        """Delete a deleted queue's counters and times, and keep flush from writing them back."""
        meta = self.dbs["meta"]
        self.lt.delete(keys.qstats_key(qid), db=meta)
        self.lt.delete(keys.qtimes_key(qid), db=meta)
        self.lt.delete(queue_counters.counters_key(qid), db=meta)
        self.lt.delete(queue_counters.reasons_key(qid), db=meta)
        self._qnames.pop(qid, None)
        self._carried.qstats.pop(qid, None)
        self._carried.qcounters.pop(qid, None)
        self._carried.qtimes.pop(qid, None)
        self._qtimes_stored.pop(qid, None)
        self._qstats.pop(qid, None)
        self._qtimes.pop(qid, None)
        self._qcounters.pop(qid, None)
        self._qcounters_dirty.discard(qid)
        self._qreasons.pop(qid, None)

    # ---- per-queue counters (store/queue_counters.py) ----------------------------------

    def queue_counters(self, qid: int, change: bool = False) -> QueueCounters:
        """The queue's counters; with `change`, to be written at the commit."""
        c = self._qcounters.get(qid)
        if c is None:
            c = self._carried.qcounters.get(qid)
            if c is None:
                raw = self.lt.get(queue_counters.counters_key(qid), db=self.dbs["meta"])
                if raw is not None and len(raw) == queue_counters.SIZE:
                    c = QueueCounters.decode(bytes(raw))
                else:  # an older mqcli's store: found from the messages, once (then written)
                    c = self._counted(qid, None if raw is None or len(raw) not in queue_counters.SIZES
                                      else QueueCounters.decode(bytes(raw)))
                    self._qcounters_dirty.add(qid)
            self._qcounters[qid] = c
        if change:
            self._qcounters_dirty.add(qid)
        return c

    def _counted(self, qid: int, c: QueueCounters | None) -> QueueCounters:
        """Counters an older mqcli did not write, found from the queue's messages: all of them
        (`c` None: a store from before them), or the put order of `c` (counters from before it
        was kept). In a write, as the store was last committed: the write may have moved some
        of the queue's messages already, and counts each move after it (counted from here, the
        move was missed or counted twice: an unlock exited 11 "out of range" every time)."""
        with self._committed() if self._committed is not None else nullcontext() as lt:
            then = self if lt is None else Write(lt, self.dbs, self.now)
            if c is None:
                return then.count_queue(qid)
            then.find_put_order(qid, c)
            return c

    def count_queue(self, qid: int) -> QueueCounters:
        """The queue's in-flight and by-priority counts and its put order from its messages
        (cumulative counts 0)."""
        c = QueueCounters()
        cur = self.lt.cursor(db=self.pos_db)
        prefix = keys.queue_prefix(qid)
        if cur.set_range(prefix):
            for key in cur.iternext(values=False):
                if not key.startswith(prefix):
                    break
                c.by_priority[7 - key[5]] += 1
        for _, seq in self._held_seqs(qid):
            raw = self.lt.get(keys.seq_key(seq), db=self.msg_db)
            if raw is not None:
                m = decode(raw)
                c.in_flight[m.state] += 1
                c.by_priority[m.priority] += 1
        self.find_put_order(qid, c)
        return c

    def find_put_order(self, qid: int, c: QueueCounters) -> None:
        """Set the put order of `c` (store/queue_counters.py) from the queue's messages, in any
        state: a walk, for counters written without it."""
        found: list[list[tuple[int, int]]] = [[] for _ in range(8)]  # by priority: (seq, put time)
        cur = self.lt.cursor(db=self.pos_db)
        prefix = keys.queue_prefix(qid)
        if cur.set_range(prefix):
            for key, record in cur.iternext():
                if not key.startswith(prefix):
                    break
                found[7 - key[5]].append((keys.seq_of(key), put_time_of(record)))
        for p7, seq in self._held_seqs(qid):
            raw = self.lt.get(keys.seq_key(seq), db=self.msg_db)
            if raw is not None:
                found[7 - p7].append((seq, put_time_of(raw)))
        c.out_of_order = 0
        for priority, messages in enumerate(found):
            put_times = [put for _, put in sorted(messages)]
            c.latest_put[priority] = max(put_times, default=0)
            if any(earlier > later for earlier, later in itertools.pairwise(put_times)):
                c.out_of_order |= 1 << priority

    def oldest_times(self, qid: int) -> tuple[int | None, int | None]:
        """The earliest put time among the queue's messages, in any state, and the earliest time
        one of its messages went in flight (µs; None if none).

        At a priority in put order (store/queue_counters.py) the first message by seq is the
        oldest: the first available one, unless one in flight comes before it, and every one
        in flight is read anyway. A priority out of put order (a message imported, replayed,
        moved, dead-lettered or arrived behind younger ones) has every available message's put
        time read: a walk of that priority alone, until it is empty again."""
        oldest: int | None = None
        c = self.queue_counters(qid)
        cur = self.lt.cursor(db=self.pos_db)
        for p7 in range(8):
            prefix = _pack_pos(keys.POS, qid, p7, 0)[:6]
            if not (cur.set_range(prefix) and cur.key().startswith(prefix)):
                continue
            put = put_time_of(cur.value())
            if not c.in_put_order(7 - p7):
                put = _earliest_put_time(cur, prefix, put)
            oldest = put if oldest is None else min(oldest, put)
        since: int | None = None
        for hold in holders.holds(self):
            if hold.qid == qid and hold.places:
                since = hold.since if since is None else min(since, hold.since)
        for _, seq in self._held_seqs(qid):
            raw = self.lt.get(keys.seq_key(seq), db=self.msg_db)
            if raw is not None:
                m = decode(raw)
                oldest = m.put_time if oldest is None else min(oldest, m.put_time)
                if m.since is not None:
                    since = m.since if since is None else min(since, m.since)
        return oldest, since

    def reasons(self, qid: int) -> dict[str, int]:
        """How many messages were dead-lettered from the queue, by reason (reason_kind)."""
        found = self._qreasons.get(qid)
        if found is None:
            raw = self.lt.get(queue_counters.reasons_key(qid), db=self.dbs["meta"])
            try:
                found = queue_counters.decode_reasons(bytes(raw) if raw is not None else None)
            except ValueError:
                found = {}  # check reports it; counting starts again
        return found

    def count_dead_letter(self, qid: int, reason: str) -> None:
        c = self.queue_counters(qid, change=True)
        c.dead_lettered += 1
        reasons = self._qreasons[qid] = dict(self.reasons(qid))
        kind = queue_counters.reason_kind(reason)
        reasons[kind] = reasons.get(kind, 0) + 1

    # ---- records -----------------------------------------------------------------------

    def load(self, seq: int, location: bytes, in_flight: bool = False) -> Message | None:
        """The message `seq` at `location` (an index entry's value): its position entry if it
        is available, else its held record. `in_flight`: an entry of an in-flight index (K, L,
        T), whose record is in `msg` unless held in place, so that is read first (a record is
        never in both)."""
        if in_flight:
            raw = self.lt.get(_pack_seq(seq), db=self.msg_db)
            if raw is not None:
                m = decode(raw)
                m.queue = self.queue_name(m.qid)
                return m
        raw = self.lt.get(keys.POS + location + keys.seq_key(seq), db=self.pos_db)
        if raw is None:
            raw = self.lt.get(keys.seq_key(seq), db=self.msg_db)
            if raw is None:
                return None
            m = decode(raw)
        else:
            m = decode(raw)
            placed = self.placed(m.qid).get(seq)
            if placed is not None:
                _as_held(m, placed[1])
        m.queue = self.queue_name(m.qid)
        return m

    def _place(self, m: Message) -> None:
        """Write the record where its state puts it, with the state's index entries."""
        lt, idx = self.lt, self.idx_db
        entries = state_entries(m)
        if m.state == AVAILABLE:
            lt.put(entries[0], encode(m), db=self.pos_db)
            entries = entries[1:]
            self.woke.add(m.qid)
        else:
            lt.put(_pack_seq(m.seq), encode(m), db=self.msg_db)
            self.queue_counters(m.qid, change=True).in_flight[m.state] += 1
            if m.lease_expires:  # its E entry (state_entries)
                self.deadline_added(m.lease_expires)
        location = keys.location(m.qid, m.priority)
        for key in entries:
            lt.put(key, location, db=idx)

    def _unplace(self, m: Message) -> None:
        """Delete the record and the state's index entries (the position holds the record)."""
        lt, idx = self.lt, self.idx_db
        entries = state_entries(m)
        if m.state == AVAILABLE:
            lt.delete(entries[0], db=self.pos_db)
            del entries[0]
        elif (hold := self._placed_hold(m)) is not None:  # held in place: its position holds the record
            lt.delete(_pack_pos(keys.POS, m.qid, 7 - m.priority, m.seq), db=self.pos_db)
            holders.unplace(self, hold, m.seq)
            return
        else:
            lt.delete(_pack_seq(m.seq), db=self.msg_db)
            self.queue_counters(m.qid, change=True).in_flight[m.state] -= 1
        for key in entries:
            lt.delete(key, db=idx)

    # ---- messages held in place (store/holders.py) -------------------------------------

    def holds_changed(self) -> None:
        """A hold was made, changed or ended in this transaction: read them again."""
        self._placed = self._any_held = None

    def maintenance_due(self) -> bool:
        """Whether a write's maintenance (Store._maintain) has anything to do: a holder's row, or
        a lease, an expiry or a transaction timeout whose deadline passed. The first entry of
        each deadline index is the soonest: one cursor step each. Nothing to read when this
        process's previous commit left the soonest deadline (Carry): no other write came between,
        and each deadline this process wrote since went through `deadline_added`."""
        if self.any_held():
            return True
        now = self.now
        if self._soonest is not None and self._soonest > now:
            return False
        cur, soonest = self.cursor("idx"), _NO_DEADLINE
        for tag in _DEADLINE_TAGS:
            if cur.set_range(tag):
                key = cur.key()
                if key[:1] == tag:
                    deadline = keys.deadline_of(key)
                    if deadline <= now:
                        self._soonest = None
                        return True
                    soonest = min(soonest, deadline)
        self._soonest = soonest
        return False

    def deadline_added(self, deadline: int) -> None:
        """A lease, expiry or transaction-timeout entry was written (maintenance_due keeps the soonest)."""
        if self._soonest is not None and deadline < self._soonest:
            self._soonest = deadline

    def any_held(self) -> bool:
        """Does any process hold messages (a row in `holders`, store/holders.py; consumers'
        rows, after every hold's, hold none)?"""
        if self._any_held is None:
            cur = self.cursor("holders")
            self._any_held = cur.first() and cur.key() < _FIRST_CONSUMER
        return self._any_held

    def placed(self, qid: int) -> dict[int, tuple[int, holders.Hold]]:
        """seq -> (7-priority, hold) of the queue's messages held in place by a process:
        available records in the position list that readers step over and show in flight."""
        if self._placed is None:
            placed: dict[int, dict[int, tuple[int, holders.Hold]]] = {}
            if self.any_held():
                for hold in holders.holds(self):
                    if hold.places:
                        mine = placed.setdefault(hold.qid, {})
                        for p7, seq in hold.placed:
                            mine[seq] = (p7, hold)
            self._placed = placed
        return self._placed.get(qid, _NOTHING_PLACED)

    def _placed_hold(self, m: Message) -> holders.Hold | None:
        """The hold that holds `m` in place, if one does (and `m` says so)."""
        if m.state != GET_UNCONFIRMED or m.confirm_id is None:
            return None
        placed = self.placed(m.qid).get(m.seq)
        return placed[1] if placed is not None and placed[1].token == m.confirm_id else None

    def positions(self, prefix: bytes, start: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """(position key, record) of the available messages under a position prefix (a queue,
        or one priority of it) in queue order, from `start` if given: the position list, less
        the messages held in place."""
        placed = self.placed(U32.unpack_from(prefix, 1)[0])
        items = self.index_items(prefix, self.pos_db, start)
        if not placed:
            return items
        return ((key, raw) for key, raw in items if keys.seq_of(key) not in placed)

    def insert_many(self, q: QueueInfo, messages: list[Message]) -> None:
        """Store messages of one queue that already have their seqs, with every index entry."""
        if not messages:
            return
        held: list[tuple[bytes, bytes]] = []
        positions: list[tuple[bytes, bytes]] = []
        entries: list[tuple[bytes, bytes]] = []
        append, place = entries.append, positions.append
        size = unseen = unseen_size = 0
        qid = q.qid
        pos_tag = keys.POS
        locations: dict[int, bytes] = {}
        c = self.queue_counters(qid, change=True)
        by_priority, in_flight, latest_put = c.by_priority, c.in_flight, c.latest_put
        if c.out_of_order:  # an empty priority is in put order again (store/queue_counters.py)
            c.out_of_order &= ~sum(1 << p for p in range(8) if not by_priority[p])
        express = True  # all of them express: nothing to sync for them
        for m in messages:  # one pass: the batched-put hot path
            record = encode(m)
            express = express and m.express
            priority = m.priority
            # its seq is the queue's newest: its priority stays in put order if it is no older
            # than the latest there (store/queue_counters.py)
            put_time = m.put_time
            if put_time >= latest_put[priority]:
                latest_put[priority] = put_time
            elif by_priority[priority]:  # behind a younger one
                c.out_of_order |= 1 << priority
            else:  # the first of an empty priority
                latest_put[priority] = put_time
            by_priority[priority] += 1
            size += len(m.body)
            if m.state == AVAILABLE:  # its only state entry is its position, which holds the record
                place((_pack_pos(pos_tag, qid, 7 - priority, m.seq), record))
                if m.correl_id is None and m.expires is None:
                    continue  # no identity entries (identity_entries) either
                state_keys = []
            else:
                held.append((keys.seq_key(m.seq), record))
                in_flight[m.state] += 1
                state_keys = state_entries(m)
                if m.hidden:  # counted as put when it is made visible (put_made_visible)
                    unseen += 1
                    unseen_size += len(m.body)
            location = locations.get(priority)
            if location is None:
                location = locations[priority] = keys.location(qid, priority)
            for key in state_keys:
                append((key, location))
            for key in identity_entries(m):
                append((key, location))
            if m.expires is not None:  # its X entry (identity_entries)
                self.deadline_added(m.expires)
            if m.lease_expires:  # its E entry if in flight (state_entries): a bound either way
                self.deadline_added(m.lease_expires)
        entries += identity.run_entries(q.qid, messages)
        c.put_messages += len(messages) - unseen
        c.put_bytes += size - unseen_size
        lt = self.lt
        for db, items in ((self.pos_db, positions), (self.idx_db, entries), (self.msg_db, held)):
            if len(items) > 4:
                lt.cursor(db=db).putmulti(items)
            else:  # a few entries (one put): no cursor to make
                for key, value in items:
                    lt.put(key, value, db=db)
        if len(held) < len(messages):
            self.woke.add(q.qid)
        self._count(q.qid, len(messages), size, durable=not express)
        if unseen < len(messages):
            self._qtimes.setdefault(q.qid, [0, 0])[0] = self.now

    def remove(self, m: Message) -> None:
        """Delete a message and every index entry pointing at it."""
        self.remove_many([m])

    def remove_many(self, messages: list[Message]) -> None:
        lt, idx = self.lt, self.idx_db
        by_queue: dict[int, list[int]] = {}
        durable = False
        for m in messages:
            self._unplace(m)
            self.queue_counters(m.qid, change=True).by_priority[m.priority] -= 1
            if m.correl_id is not None or m.expires is not None:  # else identity_entries has none
                for key in identity_entries(m):
                    lt.delete(key, db=idx)
            counted = by_queue.get(m.qid)
            if counted is None:
                counted = by_queue[m.qid] = [0, 0]
            counted[0] -= 1
            counted[1] -= len(m.body)
            durable = durable or not m.express
        identity.release(self, messages)
        for qid, (count, size) in by_queue.items():
            self._count(qid, count, size, durable)

    def _count(self, qid: int, count: int, size: int, durable: bool) -> None:
        stats = self.qstats(qid)
        stats[0] += count
        stats[1] += size
        c = self.counters
        c.count += count
        c.bytes += size
        if durable:
            self.durable = True

    def transition(self, m: Message, *, durable: bool, **changes: object) -> Message:
        """Move a message to another state (and/or change its in-flight fields)."""
        self._unplace(m)
        for name, value in changes.items():
            setattr(m, name, value)
        if m.state == AVAILABLE:
            at_rest(m)
        self._place(m)
        if durable and not m.express:
            self.durable = True
        return m

    # ---- enqueue ([MS-MQDMPR] 3.1.7.1.9) ------------------------------------------------

    def allocate_ids(self, n: int) -> tuple[int, int]:
        """The first of `n` new msg_id numbers and put times (both strictly increasing)."""
        c = self.counters
        first_n = (c.msg_n + 1) & 0xFFFFFFFF
        c.msg_n = (c.msg_n + n) & 0xFFFFFFFF
        first_time = max(self.now, c.put_time + 1)  # put times never repeat: unique ids are unique
        c.put_time = first_time + n - 1
        return first_n, first_time

    def give_new_ids(self, messages: list[Message]) -> None:
        """Make each message a new one of this queue manager: a new msg_id and put time, as a
        put gives them (a copy, `import --new-ids`). The put time is part of the unique id,
        which must not repeat the original's either (SPEC section 5: a msg_id is unique)."""
        first_n, first_time = self.allocate_ids(len(messages))
        origin = self.origin
        for i, m in enumerate(messages):
            m.origin, m.msg_n, m.put_time = origin, (first_n + i) & 0xFFFFFFFF, first_time + i

    def check_enqueue(self, q: QueueInfo, messages: list[Message], *,
                      arrivals: bool = False) -> tuple[list[Message], list[Message]]:
        """The checks of [MS-MQDMPR] 3.1.7.1.9 Enqueue Message for each message in turn, in its order;
        each message counts the ones before it in the same batch. Returns (the messages that
        pass, those over the queue's quota).

        Only `arrivals` (from another queue manager) may be over the queue's quota, instead of
        failing the batch: MSMQ dead-letters such a message on the computer where delivery
        failed. It still counts against the store quota, as it goes to this store's dead-letter
        queue.
        """
        over: list[Message] = []
        store_quota = self.meta_int(keys.META_QUOTA)
        store_used = store_before = self.counters.bytes
        queue_used = queue_before = self.qstats(q.qid)[1]
        throttled = self.meta_int(keys.META_THROTTLED)
        max_size = self.meta_int(keys.META_MAX_MESSAGE_SIZE) or DEFAULT_MAX_MESSAGE_SIZE
        now = self.now
        for m in messages:
            size = len(m.body)
            if size > max_size:  # first: MSMQ refuses it at send, before [MS-MQDMPR]'s checks
                raise MessageTooLarge(
                    f"the message body is {size} bytes, more than the store's max-message-size of "
                    f"{max_size} bytes (`mqcli qmgr set --max-message-size`)")
            if throttled:
                raise Throttled("the queue manager is throttled; no message is accepted (`mqcli qmgr set --no-throttle`)")
            if store_quota and store_used + size > store_quota:
                raise StoreQuotaExceeded(
                    f"the store quota of {store_quota} bytes would be exceeded "
                    f"({store_before} used, {_adding(messages)})")
            if q.quota and queue_used + size > q.quota:
                if not arrivals:
                    raise QueueQuotaExceeded(
                        f"the quota of queue {q.name!r} ({q.quota} bytes) would be exceeded "
                        f"({queue_before} used, {_adding(messages)})")
                over.append(m)
                store_used += size
                continue
            if m.expires is not None and m.expires <= now:
                raise MessageExpired("the message expired before it could be enqueued")
            store_used += size
            queue_used += size
        if not over:  # nothing is added per message on the put path
            return messages, over
        refused = {id(m) for m in over}
        return [m for m in messages if id(m) not in refused], over

    def enqueue(self, q: QueueInfo, messages: list[Message], *, check: bool = True,
                transactional: bool = False) -> list[Message]:
        """Enqueue Message ([MS-MQDMPR] 3.1.7.1.9) for each message, in one transaction."""
        if check:
            self.check_enqueue(q, messages)
        c = self.counters
        seq = c.seq
        qid, name = q.qid, q.name
        for m in messages:
            seq += 1  # Increment LocalQueueManager.SequentialID
            m.seq = seq
            # high byte 0x07-priority for a transactional message, else 0x00
            m.lookup_hi = (7 - m.priority) if transactional else 0
            m.qid = qid
            m.queue = name
        c.seq = seq
        self.insert_many(q, messages)
        return messages

    # ---- dead-lettering, backouts, leases, expiry --------------------------------------

    def dead_letter(self, m: Message, reason: str, *, poison: bool = False) -> Message | None:
        """Move a message to the dead-letter queue, or drop it if sent without dead-lettering.

        A `poison` message (max-backouts) is always moved: the sender's choice covers expiry
        (docs/design.md#leases), and dropping a message that no application could process would lose it
        without a trace: at max-backouts it moves to the dead-letter queue (docs/design.md#leases).
        """
        self.remove(m)
        if not (m.dead_letter or poison):
            return None
        self.count_dead_letter(m.qid, reason)
        dlq = self.queue(dead_letter_queue(self.queue(m.queue).transactional))
        moved = at_rest(dead_lettered(m, reason, m.queue, self.now, expires=None))
        return self.enqueue(dlq, [moved], check=False)[0]

    def expired_on_arrival(self, q: QueueInfo, messages: list[Message]) -> tuple[list[Message], list[Message]]:
        """Existing messages about to be enqueued in `q` with their ids (an import, a replayed
        `put --jsonl`) split into those to store and those whose time to be received passed
        meanwhile: these go where expiry would have sent them in their old place, the
        dead-letter queue with the reason `expired` (dropped if sent without dead-lettering),
        counted as expired and dead-lettered in `q`, instead of failing the whole batch."""
        now = self.now
        kept: list[Message] = []
        late: list[Message] = []
        for m in messages:
            (late if m.expires is not None and m.expires <= now else kept).append(m)
        if not late:
            return messages, late
        dlq = self.queue(dead_letter_queue(q.transactional))
        for m in late:
            self.queue_counters(q.qid, change=True).expired += 1
            if m.dead_letter:
                self.count_dead_letter(q.qid, "expired")
                self.enqueue(dlq, [at_rest(dead_lettered(m, "expired", q.name, now, expires=None))], check=False)
        return kept, late

    # ---- leaving an in-flight state ----------------------------------------------------

    def leave(self, m: Message, to: str | None, *, backout: bool = False, durable: bool = True) -> Message | None:
        """The one way out of an in-flight state, for confirm, undo, a lapsed lease, the commit
        and abort of a transaction, a deletion and a holder giving a message back. Returns the
        message where it went, or None when it is gone.

        - `to` GONE (None): removed, record and index entries (a confirmed get or a get
          committed in a transaction, an undone or aborted put, a deletion);
        - AVAILABLE: every in-flight field cleared (records.at_rest);
        - LOCKED_BROWSE: back under the browse lock it was got from: its lock id and lease
          stay, the get's confirm id goes, and it is locked since now.

        `backout` counts one backout first (an undone or aborted get, a lapse): at the queue's
        max-backouts the message goes to the dead-letter queue instead (always: a poison
        message is never dropped), and the dead letter is returned.
        """
        if to is GONE:
            self.remove_many([m])
            if durable:
                self.durable = True
            return None
        if backout:
            m.backouts = min(m.backouts + 1, 0xFFFF)
            q = self.queue(m.queue)
            self.queue_counters(q.qid, change=True).backed_out += 1
            if q.max_backouts and m.backouts >= q.max_backouts:
                return self.dead_letter(m, "max-backouts", poison=True)
        if to == LOCKED_BROWSE:
            return self.transition(m, durable=durable, state=LOCKED_BROWSE, confirm_id=None, since=self.now)
        if to != AVAILABLE:
            raise InvalidArgument(f"a message leaves an in-flight state for available, locked-browse or gone, not {to!r}")
        if m.hidden:
            self.put_made_visible(m.qid, 1, len(m.body))
        return self.transition(m, durable=durable, state=AVAILABLE)

    def put_made_visible(self, qid: int, count: int, size: int) -> None:
        """Count as put, now, the messages of a confirmed two-phase put or a committed
        transaction: a hidden put (Message.hidden) is not counted when it is stored, nor is it
        the queue's last put, as an undone or aborted one never was put (the queue's put
        counters add up to what it received)."""
        c = self.queue_counters(qid, change=True)
        c.put_messages += count
        c.put_bytes += size
        self._qtimes.setdefault(qid, [0, 0])[0] = self.now

    def commit_tx_puts(self, tx_id: int, qid: int) -> int:
        """Make the messages transaction `tx_id` put in queue `qid` available, as
        leave(m, AVAILABLE) does for each: its record moves from `msg` to its position, at rest
        (records.tx_put_committed, in the header's bytes: a commit of 10,000 puts decoded and
        encoded each), and its one in-flight entry, T, goes (a put in a transaction has no
        confirm id, lock or lease). Returns how many; the transaction's other operations (its
        gets) are left for leave."""
        lt, msg_db, pos_db, idx_db = self.lt, self.msg_db, self.pos_db, self.idx_db
        prefix = keys.id_in_queue_prefix(keys.TX, qid, tx_id)
        done = size = 0
        for seq, location in self._entries(prefix):
            seq_key = keys.seq_key(seq)
            raw = lt.get(seq_key, db=msg_db)
            committed = None if raw is None else tx_put_committed(raw)
            if committed is None:
                continue  # a get in the transaction
            lt.delete(seq_key, db=msg_db)
            lt.delete(_pack_id_in_queue(keys.TX, qid, tx_id, location[4], seq), db=idx_db)  # its state_entries
            lt.put(keys.POS + location + seq_key, committed, db=pos_db)
            done += 1
            size += body_size_of(committed)
        if done:
            self.queue_counters(qid, change=True).in_flight[TX_LOCKED] -= done
            self.put_made_visible(qid, done, size)
            self.woke.add(qid)
            self.durable = True
        return done

    def undo_one(self, m: Message, backout: bool = True) -> Message | None:
        """`undo` of one in-flight message (docs/design.md#states); returns it, or None if it is
        gone. An undone get counts a backout unless not `backout` (the message was never handed
        to its handler whole: Store.undo)."""
        if m.state == PUT_UNCONFIRMED:
            return self.leave(m, GONE)
        if m.state == GET_UNCONFIRMED:
            return self.leave(m, AVAILABLE, backout=backout)
        if m.state == BROWSE_GET_UNCONFIRMED:
            return self.leave(m, LOCKED_BROWSE, backout=backout)
        if m.state == LOCKED_BROWSE:
            return self.leave(m, AVAILABLE)
        return m

    def release(self, m: Message) -> Message | None:
        """Undo a message's whole in-flight state: a got message is undone and its browse lock
        released too (lapsed leases, operators' undo)."""
        kept = self.undo_one(m)
        if kept is not None and kept.state == LOCKED_BROWSE:
            kept = self.leave(kept, AVAILABLE)
        return kept

    def due(self, tag: bytes, but_held: bool = False, limit: int | None = MAINTENANCE_BATCH) -> list[tuple[int, bytes]]:
        """(seq, location) of messages whose lease (E) or expiry (X) deadline has passed, at
        most `limit`; with `but_held`, not those a process holds (held_seqs), nor, for expiry,
        those a transaction holds (tx-locked: SPEC section 5, expiry takes any state but that):
        stepped over, not counted, so that a stalled get or an open transaction holding many
        messages past their time holds up no other's expiry (the first batch's were stepped
        over by every pass, and nothing else in the store expired)."""
        due: list[tuple[int, bytes]] = []
        held: set[int] | None = None  # looked up once something is due
        cur = self.lt.cursor(db=self.idx_db)
        if cur.set_range(tag):
            for key, location in cur:
                if key[:1] != tag or keys.deadline_of(key) > self.now or (limit is not None and len(due) >= limit):
                    break
                seq = keys.seq_of(key)
                if but_held:
                    if held is None:
                        held = self.held_seqs() | (self.tx_locked_seqs() if tag == keys.EXPIRY else set())
                    if seq in held:
                        continue
                due.append((seq, location))
        return due

    def tx_locked_seqs(self) -> set[int]:
        """The seqs of every message a transaction holds (its T entries: index keys only)."""
        return {keys.seq_of(key) for key, _ in self.index_items(keys.TX)}

    def held_seqs(self) -> set[int]:
        """The seqs of the messages a process is writing out or sending right now (store/holders.py;
        a dead holder's went back before maintenance runs): index keys only, no record read.
        Neither a lapse nor expiry may take one meanwhile: it would be delivered and returned
        (or dead-lettered) both. Its lapse or expiry comes when its holder puts it back."""
        seqs: set[int] = set()
        for hold in holders.holds(self):
            seqs.update(seq for _, seq in hold.placed)
            for key, _ in self.index_items(keys.id_in_queue_prefix(keys.CONFIRM, hold.qid, hold.token)):
                seqs.add(keys.seq_of(key))
        return seqs

    def lapse_leases(self) -> int:
        done = 0
        for seq, location in self.due(keys.LEASE, but_held=True):
            m = self.load(seq, location)
            if m is None or m.state in (AVAILABLE, TX_LOCKED):
                continue
            self.take_from_holder(m, ids.LAPSED)  # a lapsed lease undoes the whole in-flight state, lock included
            done += 1
        return done

    def take_from_holder(self, m: Message, cause: str) -> Message | None:
        """`release` an in-flight message whose holder did not end it (`cause`: a lapsed lease,
        an operators' undo: ids.CAUSES), and remember its ids for a day (ids.record_lapse): its
        holder's late confirm or undo is told, and no new holder takes them meanwhile."""
        held = replace(m)
        kept = self.release(m)
        ids.record_lapse(self, held, kept, cause)
        return kept

    def expire_messages(self) -> int:
        done = 0
        for seq, location in self.due(keys.EXPIRY, but_held=True):
            m = self.load(seq, location)
            if m is None or m.state == TX_LOCKED:
                continue
            held = replace(m) if m.state != AVAILABLE else None
            if m.state == PUT_UNCONFIRMED:
                # never put (hidden from every action but confirm and undo: MQe): discarded as
                # its lapse would, not made a dead letter its producer never sent (its confirm
                # is told), and not counted as expired in a queue that never counted it put
                kept = self.leave(m, GONE)
            else:
                self.queue_counters(m.qid, change=True).expired += 1
                kept = self.dead_letter(m, "expired")
            if held is not None:  # taken from its holder: a late confirm or undo is told; the ids rest a day
                ids.record_lapse(self, held, kept, ids.EXPIRED)
            done += 1
        return done

    # ---- finding messages --------------------------------------------------------------

    def queue_messages(self, q: QueueInfo, after: tuple[int, int] | None = None) -> Iterator[Message]:
        """Every message of a queue, any state, in queue order; with `after` (7 - priority,
        seq), only those after that place, found by a cursor seek."""
        available = self.available(q, after=after)
        pending = next(available, None)
        for m in self.in_flight(q, after):
            while pending is not None and (7 - pending.priority, pending.seq) < (7 - m.priority, m.seq):
                yield pending
                pending = next(available, None)
            yield m
        while pending is not None:
            yield pending
            pending = next(available, None)

    def _held_seqs(self, qid: int) -> set[tuple[int, int]]:
        """(7-priority, seq) of every in-flight message of a queue: each has a confirm id, a
        lock id or a transaction."""
        held: set[tuple[int, int]] = set()
        for tag in (keys.CONFIRM, keys.LOCK, keys.TX):
            for key, _ in self.index_items(keys.id_in_queue_prefix(tag, qid)):
                held.add((7 - keys.priority_in_id_key(key), keys.seq_of(key)))
        return held

    def entries_before(self, db: lmdb._Database, tag: bytes, before: int, limit: int | None = None) -> list[bytes]:
        """Keys `tag time(8) …` of `db` with a time (µs) before `before`, the oldest first, at
        most `limit`: the time-ordered half of a table that forgets its entries after a
        retention period (`seen`, `ids`), found without a scan."""
        found: list[bytes] = []
        cur = self.lt.cursor(db=db)
        if cur.set_range(tag):
            for k in cur.iternext(values=False):
                if k[:1] != tag or U64.unpack(k[1:9])[0] >= before:
                    break
                if limit is not None and len(found) >= limit:
                    break
                found.append(bytes(k))
        return found

    def index_items(self, prefix: bytes, db: lmdb._Database | None = None,
                    start: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Entries of the index (or the position list) under a prefix, in key order, from
        `start` (a key under the prefix) if given."""
        cur = self.lt.cursor(db=self.idx_db if db is None else db)
        if cur.set_range(prefix if start is None else start):
            for key, value in cur:
                if not key.startswith(prefix):
                    return
                yield key, value

    def has_available(self, qid: int) -> bool:
        """Whether the queue has an available message: one cursor step (more past messages
        held in place)."""
        return next(self.positions(keys.queue_prefix(qid)), None) is not None

    def in_flight(self, q: QueueInfo, after: tuple[int, int] | None = None) -> list[Message]:
        """The queue's messages in any state but available (they have records in `msg`), in
        queue order; with `after`, only those after that place."""
        out = []
        held = self._held_seqs(q.qid)
        placed = self.placed(q.qid)
        held.update((p7, seq) for seq, (p7, _) in placed.items())
        for p7, seq in sorted(held if after is None else (h for h in held if h > after)):
            in_place = placed.get(seq)
            if in_place is None:
                raw = self.lt.get(keys.seq_key(seq), db=self.msg_db)
            else:
                raw = self.lt.get(_pack_pos(keys.POS, q.qid, p7, seq), db=self.pos_db)
            if raw is None:
                raise StoreCorrupt(f"in-flight message seq {seq} has no record")
            m = decode(raw, q.name)
            if in_place is not None:
                _as_held(m, in_place[1])
            out.append(m)
        return out

    def in_flight_places(self, q: QueueInfo) -> set[tuple[int, int]]:
        """(7-priority, seq) of every message of the queue that is not available (held by an
        id, a transaction, or in place by a process), from the indexes alone."""
        held = self._held_seqs(q.qid)
        held.update((p7, seq) for seq, (p7, _) in self.placed(q.qid).items())
        return held

    def available_at(self, q: QueueInfo, p7: int, seq: int) -> Message | None:
        """The message at a place of the position list if it is available there now."""
        if seq in self.placed(q.qid):
            return None
        raw = self.lt.get(_pack_pos(keys.POS, q.qid, p7, seq), db=self.pos_db)
        return None if raw is None else decode(raw, q.name)

    def count_available(self, qid: int) -> int:
        """Messages a get could take now: the depth less those in flight (the queue's counters,
        store/queue_counters.py) and those held in place; no walk over the queue."""
        count, _ = self.qstats(qid)
        return count - sum(self.queue_counters(qid).in_flight.values()) - len(self.placed(qid))

    def available(self, q: QueueInfo, priority: int | None = None,
                  after: tuple[int, int] | None = None) -> Iterator[Message]:
        """Available messages in queue order: a cursor walk of the position list, whose values
        are the records; with `after` (7 - priority, seq), from the next place on. Callers
        collect what they take before changing anything."""
        prefix = keys.queue_prefix(q.qid) if priority is None else keys.priority_prefix(q.qid, priority)
        start = None if after is None else keys.pos_key(q.qid, 7 - after[0], after[1] + 1)
        for _, record in self.positions(prefix, start):
            yield decode(record, q.name)

    def available_selected(self, q: QueueInfo, selector: Selector, priority: int | None = None,
                           after: tuple[int, int] | None = None) -> Iterator[Message]:
        """The available messages `selector` selects, in queue order: each record tested
        through a RecordView (the fields the expression uses, read from its bytes) and only
        the matches decoded (README.md#selectors); with `after` as `available` takes it."""
        prefix = keys.queue_prefix(q.qid) if priority is None else keys.priority_prefix(q.qid, priority)
        start = None if after is None else keys.pos_key(q.qid, 7 - after[0], after[1] + 1)
        matches, now, name = selector.matches, self.now, q.name
        for _, record in self.positions(prefix, start):
            if matches(RecordView(record, name), now):  # type: ignore[arg-type]
                yield decode(record, name)

    def by_index(self, prefix: bytes, in_flight: bool = False) -> Iterator[Message]:
        """The messages an index prefix points at, in index order (`in_flight`: see load)."""
        for seq, location in self._entries(prefix):
            m = self.load(seq, location, in_flight)
            if m is not None:
                yield m

    def _entries(self, prefix: bytes) -> list[tuple[int, bytes]]:
        """(seq, location) of the index entries under `prefix`, in key order, read to the end
        with this write's cursor before any is used."""
        found = []
        cur = self.cursor("idx")
        if cur.set_range(prefix):
            for key, location in cur:
                if not key.startswith(prefix):
                    break
                found.append((_seq_at(key, len(key) - 8)[0], location))
        return found

    def by_msg_id(self, origin: bytes, n: int) -> Iterator[Message]:
        """Every message with the msg_id `origin\\n` (a copy keeps its msg_id), in seq order."""
        return self._by_identity(keys.MSGID, "msg_n", origin, n)

    def stored_msg_ids(self, messages: list[Message]) -> set[tuple[bytes, int, int]]:
        """The (origin, msg_n, put_time) of `messages` that some message of the store has: one
        with the same msg_id and the same put time, so the same unique id (not counting one a get
        is delivering: it is leaving). A msg_id alone does not name a message: a store restored
        from a backup gives again the msg_ids it gave after the backup, to other messages, but
        never a put time it gave (allocate_ids). One probe of the msg_id index per origin rules
        out most batches, the rest are looked up one by one."""
        spans: dict[bytes, tuple[int, int]] = {}
        for m in messages:
            first, last = spans.get(m.origin, (m.msg_n, m.msg_n))
            spans[m.origin] = (min(first, m.msg_n), max(last, m.msg_n))
        cur = self.lt.cursor(db=self.idx_db)
        doubtful = {o for o, (first, last) in spans.items() if not identity.none_between(cur, o, first, last)}
        return {(m.origin, m.msg_n, m.put_time) for m in messages
                if m.origin in doubtful and any(s.put_time == m.put_time and not holders.leaving(self, s)
                                                for s in self.by_msg_id(m.origin, m.msg_n))}

    def keep_ids_ahead_of(self, messages: list[Message]) -> None:
        """Messages of this queue manager's own (an import of its own dump, perhaps into a
        store restored from an older backup) being stored with their ids: the msg_id and put
        time counters move past theirs, so that no message put later gets one of their ids.
        A msg_n counts as ahead if it is less than half the 32-bit space ahead (it wraps)."""
        c, origin = self.counters, self.origin
        for m in messages:
            if m.origin == origin:
                if 0 < (m.msg_n - c.msg_n) & 0xFFFFFFFF < 1 << 31:
                    c.msg_n = m.msg_n
                c.put_time = max(c.put_time, m.put_time)

    def by_unique_id(self, origin: bytes, put_time: int) -> Iterator[Message]:
        """Every message with the MQe unique id `origin:put_time` (copies keep it), in seq order."""
        return self._by_identity(keys.UNIQ, "put_time", origin, put_time)

    def _by_identity(self, kind: bytes, field: str, origin: bytes, ordinal: int) -> Iterator[Message]:
        """The messages the msg_id (M) or unique-id (U) index gives for an id, each checked to
        carry it still (a run outlives some of its messages)."""
        for seq, location in identity.members(self.lt.cursor(db=self.idx_db), kind, origin, ordinal):
            m = self.load(seq, location)
            if m is not None and m.origin == origin and getattr(m, field) == ordinal:
                yield m

    def by_lookup_id(self, q: QueueInfo, lookup_id: int) -> Iterator[Message]:
        """The lookup id's low seven bytes are the seq ([MS-MQDMPR] 3.1.7.1.9); the message is either held
        or at one of the queue's eight priorities."""
        seq = lookup_id & keys.LOOKUP_SEQ_MASK
        for priority in range(7, -1, -1):
            m = self.load(seq, keys.location(q.qid, priority))
            if m is not None:
                if m.lookup_id == lookup_id:
                    yield m
                return

    def with_confirm_id(self, q: QueueInfo, confirm_id: int) -> list[Message]:
        load = self.load
        found = [m for seq, location in self._entries(keys.id_in_queue_prefix(keys.CONFIRM, q.qid, confirm_id))
                 if (m := load(seq, location, True)) is not None]
        if not found:
            hold = holders.claimed(self, q.qid, confirm_id)
            if hold is not None:  # nothing unwritten is ever pending under the id
                raise AlreadyReceived(f"nothing is pending under confirm id {confirm_id} in queue {q.name!r} yet: "
                                      f"a {hold.what} is writing out the messages it will hold under it")
            raise ids.unknown(self, keys.CONFIRM, q, confirm_id)  # unknown, or its lease lapsed
        return found

    def with_token(self, q: QueueInfo, token: int) -> list[Message]:
        """The messages of a queue in flight under a confirm id or a holder's token; maybe none."""
        hold = holders.lookup(self, token)
        if hold is not None and hold.places:  # held in place: no confirm entries
            if hold.qid != q.qid:
                return []
            return [m for p7, seq in hold.placed
                    if (m := self.load(seq, U32.pack(q.qid) + bytes((p7,)))) is not None]
        return list(self.by_index(keys.id_in_queue_prefix(keys.CONFIRM, q.qid, token)))

    def with_lock_id(self, q: QueueInfo, lock_id: int) -> list[Message]:
        found = list(self.by_index(keys.id_in_queue_prefix(keys.LOCK, q.qid, lock_id)))
        if not found:
            raise ids.unknown(self, keys.LOCK, q, lock_id)  # unknown, or its lease lapsed
        return found

    def candidates(self, q: QueueInfo, f: Filter, lock_id: int | None = None,
                   after: tuple[int, int] | None = None) -> Iterator[Message]:
        """Messages a get or browse may take, in queue order, using the most selective index;
        with `after` (7 - priority, seq), only those after that place (not for a lock id or an
        exact id: those are few, and read whole).

        With an exact id (msg_id, unique_id, lookup_id) a message that exists but is held raises
        AlreadyReceived, and one that does not exist raises MessageNotFound ([MS-MQDMPR] 3.1.7.1.10).
        """
        if lock_id is not None:
            held = [m for m in self.with_lock_id(q, lock_id) if f.matches(m, self.now)]
            eligible = [m for m in held if m.state == LOCKED_BROWSE]
            if held and not eligible:
                raise AlreadyReceived(f"the messages under lock id {lock_id} are already got, pending confirm")
            yield from eligible
            return
        if f.exact:
            if f.msg_id_parts is not None:
                source = self.by_msg_id(*f.msg_id_parts)
            elif f.unique_id_parts is not None:
                source = self.by_unique_id(*f.unique_id_parts)
            else:
                source = self.by_lookup_id(q, f.lookup_id)  # type: ignore[arg-type]  # f.exact: it is set
            found = [m for m in source if m.qid == q.qid and f.matches(m, self.now) and not m.hidden]
            if not found:
                raise f.not_found(q.name)
            eligible = [m for m in found if m.state == AVAILABLE]
            if not eligible:
                raise AlreadyReceived(f"message {f.describe()} is held by a lock, confirm id or transaction")
            yield from eligible
            return
        if f.correl_id is not None:
            prefix = keys.correl_prefix(q.qid, f.correl_id.encode())
            if f.priority is not None:
                prefix += bytes((7 - f.priority,))
            for m in self.by_index(prefix):
                if m.state == AVAILABLE and f.matches(m, self.now) and (after is None or (7 - m.priority, m.seq) > after):
                    yield m
            return
        if f.selector is None:
            yield from self.available(q, f.priority, after)
            return
        yield from self.available_selected(q, f.selector, f.priority, after)

    def get_next(self, q: QueueInfo, priority: int | None, count: int) -> list[Message]:
        """Destructive get of the next `count` available messages: cursor steps on the position
        list, whose values are the records (the batched-get hot path)."""
        prefix = keys.queue_prefix(q.qid) if priority is None else keys.priority_prefix(q.qid, priority)
        lt, idx = self.lt, self.idx_db
        placed = self.placed(q.qid)
        cur = lt.cursor(db=self.pos_db)
        taken: list[Message] = []
        size = 0
        durable = False
        if not cur.set_range(prefix):
            return taken
        while len(taken) < count:
            pos, raw = cur.item()
            if not pos.startswith(prefix):
                break
            if placed and keys.seq_of(pos) in placed:  # another process is delivering it
                if not cur.next():
                    break
                continue
            m = decode(raw, q.name)
            for key in identity_entries(m):  # its only state entry is `pos`, deleted below
                lt.delete(key, db=idx)
            taken.append(m)
            size += len(m.body)
            durable = durable or not m.express
            if not cur.delete():  # deletes the position and steps to the next entry
                break
        if taken:
            identity.release(self, taken)
            self._count(q.qid, -len(taken), -size, durable)
            by_priority = self.queue_counters(q.qid, change=True).by_priority
            for m in taken:
                by_priority[m.priority] -= 1
            self.got(q, taken)
        return taken

    def take_two_phase(self, q: QueueInfo, lease_us: int | None,
                       draw: Callable[[Write, bytes, QueueInfo], int] = ids.draw) -> Message | None:
        """The next available message of the queue, got two-phase under a fresh confirm id
        (`draw`: a consumer's next id) with an optional lease: the get of a consumer's ack and
        next, as `get_many` with confirm_id AUTO takes one ([MS-MQDMPR] 3.1.7.1.10
        iTwoPhaseRead). None if none."""
        prefix, now = keys.queue_prefix(q.qid), self.now
        if self.placed(q.qid):
            item = next(self.positions(prefix), None)
            if item is None:
                return None
            m = decode(item[1], q.name)
            return self.transition(m, durable=False, state=GET_UNCONFIRMED, confirm_id=draw(self, keys.CONFIRM, q),
                                   since=now, lease_expires=now + lease_us if lease_us else m.lease_expires)
        # the usual case, nothing held in place: the queue's first position, and `transition`
        # with the cursor standing on it (an available message's one state entry is its position)
        cur = self.cursor("pos")
        if not cur.set_range(prefix) or not cur.key().startswith(prefix):
            return None
        m = decode(cur.value(), q.name)
        m.confirm_id = draw(self, keys.CONFIRM, q)  # looks in idx and ids only: the cursor stays
        cur.delete()
        m.state, m.since = GET_UNCONFIRMED, now
        if lease_us:
            m.lease_expires = now + lease_us
        self._place(m)
        return m

    def hold_next(self, q: QueueInfo, priority: int | None, count: int) -> list[tuple[bytes, bytes]]:
        """The next `count` available messages, to be held in place (store/holders.py): their
        position keys and records, nothing changed and nothing decoded, so the write
        transaction stays short. The caller registers the hold in the same transaction."""
        prefix = keys.queue_prefix(q.qid) if priority is None else keys.priority_prefix(q.qid, priority)
        placed = self.placed(q.qid)
        cur = self.lt.cursor(db=self.pos_db)
        if not cur.set_range(prefix):
            return []
        if not placed:  # the usual case: `count` entries in one C loop, those past the prefix cut off
            taken = list(itertools.islice(cur.iternext(), count))
            if taken and not taken[-1][0].startswith(prefix):  # the queue (or priority) ended
                taken = taken[:bisect.bisect_left(taken, prefix_end(prefix), key=_KEY)]
            return taken
        taken = []
        for item in cur:  # the cursor walk of positions()
            if not item[0].startswith(prefix):
                break
            if keys.seq_of(item[0]) in placed:
                continue
            taken.append(item)
            if len(taken) >= count:
                break
        return taken

    def end_hold(self, q: QueueInfo, placed: holders.Placed, delivered: set[int] | None) -> None:
        """End a hold in place: remove the messages whose seq is in `delivered` (None: all of
        them), as got (`got`); the others are in their places already, and are available again
        once the hold is forgotten. A message no longer in the hold (purged meanwhile) is left
        alone."""
        hold = holders.lookup(self, placed.token)
        if hold is None:
            return
        holders.forget(self, placed.token)
        if hold.places == placed.places and delivered is None:  # as it was made, all delivered: the usual case
            positions, messages = placed.positions, placed.messages
        else:
            still = {seq for _, seq in hold.placed}
            held = [(pos, m) for pos, m in zip(placed.positions, placed.messages) if m.seq in still]
            removed = [(pos, m) for pos, m in held if delivered is None or m.seq in delivered]
            positions, messages = [pos for pos, _ in removed], [m for _, m in removed]
            if len(removed) < len(held):  # the others are available again
                self.woke.add(q.qid)
        if not messages:
            return
        lt, idx = self.lt, self.idx_db
        cur = lt.cursor(db=self.pos_db)
        size = 0
        by_priority = self.queue_counters(q.qid, change=True).by_priority
        for pos, m in zip(positions, messages):  # usually one run of the position list: deleted walking it
            if cur.key() == pos or cur.set_key(pos):
                cur.delete()  # and steps to the next entry
            if m.correl_id is not None or m.expires is not None:
                for key in identity_entries(m):
                    lt.delete(key, db=idx)
            size += len(m.body)
            by_priority[m.priority] -= 1
        identity.release(self, messages)
        self._count(q.qid, -len(messages), -size, not all(m.express for m in messages))
        self.got(q, messages, size)

    def take(self, q: QueueInfo, f: Filter, count: int, lock_id: int | None = None) -> list[Message]:
        taken = []
        for m in self.candidates(q, f, lock_id):
            taken.append(m)
            if len(taken) >= count:
                break
        return taken


def _adding(messages: list[Message]) -> str:
    """What a batch refused at a quota would add, after the use before it in the error line."""
    if len(messages) == 1:
        return f"message {len(messages[0].body)}"
    return f"{len(messages)} messages adding {sum(len(m.body) for m in messages)}"


def _as_held(m: Message, hold: holders.Hold) -> None:
    """Show a message held in place (an available record) in the state its hold gives it."""
    m.state, m.confirm_id, m.since = GET_UNCONFIRMED, hold.token, hold.since


_NOTHING_PLACED: dict[int, tuple[int, holders.Hold]] = {}
_FIRST_CONSUMER = U64.pack(holders.CONSUMERS)  # the key of the first consumer's row in `holders`
_DEADLINE_TAGS = (keys.LEASE, keys.EXPIRY, keys.TX_TIMEOUT)
_NO_DEADLINE = 1 << 64  # later than every deadline a key holds
_KEY = itemgetter(0)


def _earliest_put_time(cur: lmdb.Cursor[bytes], prefix: bytes, earliest: int) -> int:
    """The earliest put time of the records from the cursor's on, while their keys start with
    `prefix`. A queue's oldest message at a priority out of put order: about 0.8 µs a message
    (100,000 in 80 ms), most of it LMDB's copy of each record; hence one unpack a record."""
    unpack = VERSION_AND_PUT_TIME.unpack_from
    for key, record in cur.iternext():
        if not key.startswith(prefix):
            break
        try:
            version, put = unpack(record)
        except struct.error:  # shorter than a header: no record, which put_time_of says
            version = None
        if version != FORMAT_V1:
            put = put_time_of(record)
        if put < earliest:
            earliest = put
    return earliest


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with `prefix` (a position prefix, `P`...)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes((stripped[-1] + 1,))


def index_entries(m: Message) -> list[bytes]:
    """Every index key of a message: the one place that decides them (check uses it too)."""
    return identity_entries(m) + state_entries(m)


# the key layouts of store/keys.py, packed here without a call per key (the put/get hot path)
_pack_pos, _pack_id_in_queue = keys.POS_KEY.pack, keys.ID_IN_QUEUE_KEY.pack
_seq_at = U64.unpack_from  # keys.seq_of: the seq is an index key's last eight bytes
_pack_seq = U64.pack  # keys.seq_key


def identity_entries(m: Message) -> list[bytes]:
    """The index keys a message has in every state, but its msg_id and unique-id entries
    (its own, or a run shared with the messages put with it: store/identity.py)."""
    seq = m.seq
    out = []
    if m.correl_id is not None:
        out.append(keys.correl_key(m.qid, m.correl_id.encode(), m.priority, seq))
    if m.expires is not None:
        out.append(keys.deadline_key(keys.EXPIRY, m.expires, seq))
    return out


def state_entries(m: Message) -> list[bytes]:
    """The index keys that depend on the message's state."""
    if m.state == AVAILABLE:  # an available message holds no in-flight ids (`Write.transition`)
        return [_pack_pos(keys.POS, m.qid, 7 - m.priority, m.seq)]
    out = []
    if m.confirm_id:
        out.append(_pack_id_in_queue(keys.CONFIRM, m.qid, m.confirm_id, 7 - m.priority, m.seq))
    if m.lock_id:
        out.append(_pack_id_in_queue(keys.LOCK, m.qid, m.lock_id, 7 - m.priority, m.seq))
    if m.lease_expires:
        out.append(keys.deadline_key(keys.LEASE, m.lease_expires, m.seq))
    if m.tx:
        out.append(_pack_id_in_queue(keys.TX, m.qid, m.tx, 7 - m.priority, m.seq))
    return out


def new_guid() -> bytes:
    import uuid  # here: uuid imports platform, which a put or get does not need at start-up

    return uuid.uuid4().bytes

