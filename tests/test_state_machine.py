"""The message-state machine (docs/design.md#states; the WebSphere MQ Everyplace message states) against a small model.

A Hypothesis ``RuleBasedStateMachine`` drives a real store (fresh per example, fake clock) with
puts, two-phase puts and gets, browse locks, unlocks, undos, deletes, wrong ids and lapsing
leases, confirm ids and lock ids named again (refused while pending or for a day after their
lease lapsed, when a late confirm or undo is told of the lapse), and transactions (begin, put and get inside T, commit, abort, timeout, wrong or finished
ids, the transactional-queue refusals), and after every step compares what the store shows
with an in-memory model: the available messages in queue order, every message's state and ids
(tx-locked ones included), the depths, the active transactions, and (every few steps and at the
end) ``Store.check()``.

Transactions as the store does them (store/msmq_transactions.py ``finish``): commit makes T's puts
available at the positions they were put at and removes T's gets; abort removes T's puts and
makes T's gets available again with one more backout, dead-lettered (to ``dead-letter-tx``, the
transactional queues' dead-letter queue) at the queue's max-backouts. Abort visits T's queues in
the order T first touched them and each queue's messages in queue order, which decides the order
of several messages dead-lettered by one abort. A timed-out T is aborted on the next access or
sweep (after the lapsed leases of that access). Not driven here: a get inside T under a browse
lock (the store keeps the lock id and lease on the tx-locked message, which ``check()`` reports)
and ``move`` inside T (its copies share the msg_id the model keys messages by).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as hs
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from store import NewMessage, Store, errors, ids

PLAIN = "plain"  # max_backouts 0: never dead-lettered
POISON = "poison"  # max_backouts 2: the second backout moves the message to dead-letter
TX_PLAIN = "txplain"  # transactional, max_backouts 0
TX_POISON = "txpoison"  # transactional, max_backouts 2: dead-lettered to dead-letter-tx
MAX_BACKOUTS = {PLAIN: 0, POISON: 2, TX_PLAIN: 0, TX_POISON: 2}
PUT_QUEUES = (PLAIN, POISON)  # take plain and two-phase puts
TX_QUEUES = (TX_PLAIN, TX_POISON)  # take puts only inside a transaction
QUEUES = (*PUT_QUEUES, *TX_QUEUES)  # every queue gets, browse locks, deletes... work on
DEAD_LETTER = "dead-letter"
DEAD_LETTER_TX = "dead-letter-tx"
SHOWN = (*QUEUES, DEAD_LETTER, DEAD_LETTER_TX)

START = 1_700_000_000.0  # seconds; every clock step and lease is a multiple of 1/2 s, so
US = 1_000_000  # seconds * US is exact in a float and deadlines are exact integers of µs
CHECK_EVERY = 5  # steps between Store.check() calls (it reads every record)
DAY = 24 * 3600.0  # a lapsed id is reserved this long (store/ids.py RETENTION_US)
CONFIRM, LOCK = "confirm", "lock"  # the two kinds of id, each its own namespace per queue

# ids the model has never handed out: far above the counters used for real ids
NEVER_USED = hs.integers(min_value=1 << 40, max_value=(1 << 62))

queues = hs.sampled_from(QUEUES)
put_queues = hs.sampled_from(PUT_QUEUES)
tx_queues = hs.sampled_from(TX_QUEUES)
tx_timeouts = hs.none() | hs.none() | hs.sampled_from([1.0, 2.5, 5.0, 10.0])
MAX_ACTIVE_TX = 3  # keeps operations concentrated on a few transactions
# transaction ids that name no transaction: never handed out, or not a valid id at all
NO_TX = NEVER_USED | hs.sampled_from([0, -1])
priorities = hs.just(3) | hs.integers(min_value=0, max_value=7)  # ties test FIFO order
correl_ids = hs.none() | hs.sampled_from(["c1", "c2"])
leases = hs.none() | hs.sampled_from([1.0, 2.5, 5.0, 10.0])


class FakeClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now

    def now_us(self) -> int:
        return round(self.now * US)


@dataclass
class Msg:
    """The model of one stored message."""

    msg_id: str
    queue: str
    priority: int
    correl_id: str | None
    arrival: int  # order of enqueue (a dead-letter move enqueues again)
    state: str = "available"
    confirm_id: int | None = None
    lock_id: int | None = None
    lease: int | None = None  # deadline in µs
    backouts: int = 0
    original_queue: str | None = None
    tx: int | None = None  # the transaction holding it (state tx-locked)
    tx_put: bool = False  # tx-locked by a put inside that transaction (else by a get)

    def position(self) -> tuple[int, int]:
        return (-self.priority, self.arrival)


@dataclass
class Tx:
    """The model of one active transaction."""

    deadline: int | None  # µs, or None: no timeout
    queues: list[str] = field(default_factory=list)  # in the order T first touched them


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir: str | None = None
        self.store: Store | None = None
        self.msgs: dict[str, Msg] = {}  # live messages by msg_id
        self.gone: list[str] = []  # msg_ids of deleted messages
        self.arrivals = 0
        self.next_id = 0  # confirm and lock ids the model chooses
        self.used_confirm: dict[str, set[int]] = {q: set() for q in QUEUES}
        # lock ids in the order they were handed out: the store picks random ones, and
        # Hypothesis must draw the same lock when it replays an example
        self.used_lock: dict[str, list[int]] = {q: [] for q in QUEUES}
        # (queue, kind, id) -> µs of the id's latest lease lapse (the store's ``ids`` table)
        self.lapsed: dict[tuple[str, str, int], int] = {}
        self.txs: dict[int, Tx] = {}  # active transactions by id
        self.tx_done: list[int] = []  # committed, aborted or timed-out ids
        self.steps = 0

    # -- set-up and tear-down ------------------------------------------------------------

    @initialize(seed=hs.lists(hs.tuples(put_queues, priorities, correl_ids), max_size=8),
                tx_seed=hs.lists(hs.tuples(tx_queues, priorities, correl_ids, hs.booleans()),
                                 max_size=8),
                open_txs=hs.lists(hs.lists(hs.tuples(tx_queues, priorities, correl_ids),
                                           max_size=2), max_size=2))
    def open_store(self, seed: list[tuple[str, int, str | None]],
                   tx_seed: list[tuple[str, int, str | None, bool]],
                   open_txs: list[list[tuple[str, int, str | None]]]) -> None:
        """A fresh store (fake clock) with every queue and a few available messages to start,
        and up to two active transactions with a few puts each, so that the rules inside
        transactions run from the first step.

        The transactional queues' first messages are put by two transactions in turn, and the
        later one commits first: every message must still be where it was put, not where its
        transaction committed."""
        base = "/dev/shm" if Path("/dev/shm").is_dir() else None
        self.dir = tempfile.mkdtemp(prefix="mqcli-sm-", dir=base)
        self.clock = FakeClock()
        self.store = Store.open(
            Path(self.dir) / "qm", create=True, name="qm", map_size=64 << 20, clock=self.clock
        )
        for q in QUEUES:
            self.store.create_queue(q, max_backouts=MAX_BACKOUTS[q], transactional=q in TX_QUEUES)
        for q, priority, correl_id in seed:
            self.put_one(q, priority, correl_id, confirm_id=None, lease=None)
        if tx_seed:
            first, second = self.store.tx_begin(timeout=None), self.store.tx_begin(timeout=None)
            for t in (first, second):
                self.txs[t] = Tx(deadline=None)
            for q, priority, correl_id, in_second in tx_seed:
                self.tx_put_batch(second if in_second else first, q, [(priority, correl_id)])
            for t in (second, first):
                assert self.store.tx_commit(t) == len(self.tx_ops(t))
                self.finish_model(t, commit=True)
        for puts in open_txs:
            t = self.store.tx_begin(timeout=None)
            self.txs[t] = Tx(deadline=None)
            for q, priority, correl_id in puts:
                self.tx_put_batch(t, q, [(priority, correl_id)])

    def teardown(self) -> None:
        try:
            if self.store is not None:
                try:
                    problems = self.store.check()
                finally:
                    self.store.close()
                assert problems == []
        finally:
            if self.dir is not None:
                shutil.rmtree(self.dir, ignore_errors=True)

    # -- model helpers -------------------------------------------------------------------

    def fresh_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def arrive(self) -> int:
        self.arrivals += 1
        return self.arrivals

    def in_queue(self, q: str, state: str | None = None) -> list[Msg]:
        found = [m for m in self.msgs.values() if m.queue == q]
        if state is not None:
            found = [m for m in found if m.state == state]
        return sorted(found, key=Msg.position)

    def with_confirm(self, q: str, c: int) -> list[Msg]:
        return [m for m in self.in_queue(q) if m.confirm_id == c]

    def with_lock(self, q: str, lock: int, state: str | None = "locked-browse") -> list[Msg]:
        return [
            m for m in self.in_queue(q) if m.lock_id == lock and (state is None or m.state == state)
        ]

    def confirm_ids(self, q: str, *states: str) -> list[int]:
        return sorted({m.confirm_id for m in self.in_queue(q) if m.confirm_id is not None
                       and (not states or m.state in states)})

    def lock_ids(self, q: str, state: str | None = "locked-browse") -> list[int]:
        held = {m.lock_id for m in self.in_queue(q) if state is None or m.state == state}
        return [lock for lock in self.used_lock[q] if lock in held]

    def reserved(self, q: str, kind: str, ident: int) -> bool:
        """Whether the id's lease lapsed in the queue less than a day ago."""
        at = self.lapsed.get((q, kind, ident))
        return at is not None and at + round(DAY * US) > self.clock.now_us()

    def taken(self, q: str, kind: str, ident: int) -> bool:
        """Whether a new holder naming the id is refused: pending in the queue, or reserved."""
        held = self.confirm_ids(q) if kind == CONFIRM else self.lock_ids(q, state=None)
        return ident in held or self.reserved(q, kind, ident)

    def new_confirm_id(self, data: hs.DataObject, q: str) -> int:
        """A confirm id for a new holder: mostly fresh, else one used in the queue before
        (pending, lapsed, or finished)."""
        used = sorted(self.used_confirm[q])
        if used and data.draw(hs.integers(0, 2), label="reuse confirm id") == 0:
            return data.draw(hs.sampled_from(used), label="used confirm id")
        return self.fresh_id()

    def refused(self, call) -> None:  # type: ignore[no-untyped-def]
        """The call names an id another holder has: IdInUse (exit 5), and nothing changes."""
        before = self.snapshot()
        with pytest.raises(errors.IdInUse):
            call()
        assert self.snapshot() == before

    def deadline(self, lease: float | None) -> int | None:
        return None if lease is None else self.clock.now_us() + round(lease * US)

    def remove(self, m: Msg) -> None:
        del self.msgs[m.msg_id]
        self.gone.append(m.msg_id)

    def make_available(self, m: Msg) -> None:
        m.state = "available"
        m.confirm_id = m.lock_id = m.lease = m.tx = None
        m.tx_put = False

    def back_out(self, m: Msg) -> None:
        """An undone, aborted or lease-lapsed get: one more backout, dead-letter at
        max_backouts (a transactional queue's messages to dead-letter-tx)."""
        m.backouts += 1
        limit = MAX_BACKOUTS[m.queue]
        if limit and m.backouts >= limit:
            self.make_available(m)
            m.original_queue = m.queue
            m.queue = DEAD_LETTER_TX if m.queue in TX_QUEUES else DEAD_LETTER
            m.arrival = self.arrive()

    def undo_confirm_model(self, m: Msg) -> None:
        if m.state == "put-unconfirmed":
            self.remove(m)
        elif m.state == "get-unconfirmed":
            self.make_available(m)
            self.back_out(m)
        elif m.state == "browse-get-unconfirmed":
            # back under its browse lock, keeping the lease it has (the get's, or the lock's)
            m.state = "locked-browse"
            m.confirm_id = None
            self.back_out(m)
        else:  # pragma: no cover - the model never asks
            raise AssertionError(m)

    def lapse(self, m: Msg) -> None:
        """A lapsed lease acts as undo (docs/design.md#leases), the browse lock included (Write.lapse_leases);
        its ids are remembered, and reserved, for a day."""
        for kind, ident in ((CONFIRM, m.confirm_id), (LOCK, m.lock_id)):
            if ident is not None:
                self.lapsed[(m.queue, kind, ident)] = self.clock.now_us()
        if m.state == "put-unconfirmed":
            self.remove(m)
        elif m.state == "locked-browse":
            self.make_available(m)
        elif m.state in ("get-unconfirmed", "browse-get-unconfirmed"):
            self.make_available(m)
            self.back_out(m)
        else:  # pragma: no cover
            raise AssertionError(m)

    def lapse_due(self) -> int:
        now = self.clock.now_us()
        due = sorted(  # due at the deadline itself; lapsed in (deadline, arrival) order
            (m for m in self.msgs.values() if m.lease is not None and m.lease <= now),
            key=lambda m: (m.lease, m.arrival),
        )
        for m in due:
            self.lapse(m)
        return len(due)

    def snapshot(self) -> dict[str, tuple]:
        return {
            i: (m.queue, m.state, m.confirm_id, m.lock_id, m.lease, m.backouts, m.tx)
            for i, m in self.msgs.items()
        }

    # -- transactions in the model -------------------------------------------------------

    def touch(self, t: int, q: str) -> None:
        if q not in self.txs[t].queues:
            self.txs[t].queues.append(q)

    def tx_ops(self, t: int) -> list[Msg]:
        """T's messages in the order commit and abort visit them: T's queues in the order T
        first touched them, each in queue order (the transaction index)."""
        return [m for q in self.txs[t].queues for m in self.in_queue(q) if m.tx == t]

    def finish_model(self, t: int, *, commit: bool) -> None:
        for m in self.tx_ops(t):
            if m.tx_put:
                if commit:
                    self.make_available(m)  # at the position it was put at
                else:
                    self.remove(m)
            elif commit:
                self.remove(m)
            else:
                self.make_available(m)
                self.back_out(m)
        del self.txs[t]
        self.tx_done.append(t)

    def abort_timed_out(self) -> list[int]:
        """Transactions past their deadline, aborted in (deadline, id) order."""
        now = self.clock.now_us()
        due = sorted((tx.deadline, t) for t, tx in self.txs.items()
                     if tx.deadline is not None and tx.deadline <= now)
        for _, t in due:
            self.finish_model(t, commit=False)
        return [t for _, t in due]

    def tx_put_batch(self, t: int, q: str, batch: list[tuple[int, str | None]]) -> None:
        news = [NewMessage(b"t%d" % i, priority=p, correl_id=cid) for i, (p, cid) in enumerate(batch)]
        got = self.store.put_many(q, news, tx=t)
        self.touch(t, q)
        for g, (p, cid) in zip(got, batch, strict=True):
            assert g.msg_id not in self.msgs and g.msg_id not in self.gone
            assert (g.state, g.tx, g.tx_put, g.queue, g.priority) == ("tx-locked", t, True, q, p)
            assert g.lookup_id >> 56 == 7 - p  # [MS-MQDMPR] 3.1.7.1.9: a transactional message's high byte
            self.msgs[g.msg_id] = Msg(g.msg_id, q, p, cid, self.arrive(), state="tx-locked",
                                      tx=t, tx_put=True)

    def matches(self, m: Msg, flt: dict) -> bool:
        return all(getattr(m, k) == v for k, v in flt.items())

    def draw_filter(self, data: hs.DataObject, q: str) -> dict:
        kind = data.draw(hs.sampled_from(["none", "none", "priority", "correl_id", "msg_id"]))
        here = self.in_queue(q)
        if kind == "priority":
            present = sorted({m.priority for m in here})
            return {"priority": data.draw(hs.sampled_from(present) | priorities if present else priorities)}
        if kind == "correl_id":
            return {"correl_id": data.draw(hs.sampled_from(["c1", "c2"]))}
        if kind == "msg_id":
            # any message: available here, in flight, in another queue, or deleted; backed-out
            # ones first, so that a poison message is fetched again and reaches max_backouts
            live = sorted(self.msgs, key=lambda i: (-self.msgs[i].backouts, self.msgs[i].arrival))
            known = hs.sampled_from(live) | hs.sampled_from(self.gone) if self.gone else hs.sampled_from(live)
            return {"msg_id": data.draw(known)} if live else {}
        return {}

    # -- puts ----------------------------------------------------------------------------

    @rule(q=put_queues, priority=priorities, correl_id=correl_ids, lease=leases,
          confirm=hs.sampled_from(["no", "no", "yes"]), data=hs.data())
    def put(self, q: str, priority: int, correl_id: str | None, lease: float | None,
            confirm: str, data: hs.DataObject) -> None:
        """Put; with a confirm id put-unconfirmed. An id pending in the queue (a put's or a
        get's) or reserved after a lapse is refused; a finished one may be named again."""
        if confirm == "no":
            self.put_one(q, priority, correl_id, confirm_id=None, lease=None)
            return
        c = self.new_confirm_id(data, q)
        if self.taken(q, CONFIRM, c):
            self.refused(lambda: self.store.put(q, b"x", priority=priority, confirm_id=c, lease=lease))
            return
        self.put_one(q, priority, correl_id, confirm_id=c, lease=lease)

    @rule(q=put_queues, batch=hs.lists(hs.tuples(priorities, correl_ids), min_size=1, max_size=6),
          confirm=hs.sampled_from([False, False, True]), lease=leases)
    def put_many(self, q: str, batch: list[tuple[int, str | None]], confirm: bool,
                 lease: float | None) -> None:
        """One commit; with a confirm id the whole batch is pending under it."""
        c = self.fresh_id() if confirm else None
        news = [NewMessage(b"b%d" % i, priority=p, correl_id=cid) for i, (p, cid) in enumerate(batch)]
        got = self.store.put_many(q, news, confirm_id=c, lease=lease if confirm else None)
        assert [g.priority for g in got] == [p for p, _ in batch]
        for g, (p, cid) in zip(got, batch):
            assert g.msg_id not in self.msgs and g.msg_id not in self.gone
            m = self.msgs[g.msg_id] = Msg(g.msg_id, q, p, cid, self.arrive())
            if c is not None:
                m.state, m.confirm_id, m.lease = "put-unconfirmed", c, self.deadline(lease)
        if c is not None:
            self.used_confirm[q].add(c)

    def put_one(self, q: str, priority: int, correl_id: str | None, *,
                confirm_id: int | None, lease: float | None) -> None:
        body = b"m%d" % (self.arrivals + 1)
        got = self.store.put(q, body, priority=priority, correl_id=correl_id,
                             confirm_id=confirm_id, lease=lease)
        assert got.msg_id not in self.msgs and got.msg_id not in self.gone
        m = Msg(got.msg_id, q, priority, correl_id, self.arrive())
        if confirm_id is not None:
            m.state, m.confirm_id, m.lease = "put-unconfirmed", confirm_id, self.deadline(lease)
            self.used_confirm[q].add(confirm_id)
        self.msgs[m.msg_id] = m
        assert (got.state, got.body, got.priority, got.queue) == (m.state, body, priority, q)

    # -- confirm and undo ----------------------------------------------------------------

    @precondition(lambda self: any(self.confirm_ids(q) for q in QUEUES))
    @rule(data=hs.data())
    def confirm(self, data: hs.DataObject) -> None:
        q = data.draw(hs.sampled_from([q for q in QUEUES if self.confirm_ids(q)]))
        c = data.draw(hs.sampled_from(self.confirm_ids(q)))
        pending = self.with_confirm(q, c)
        assert self.store.confirm(q, c) == len(pending)
        for m in pending:
            if m.state == "put-unconfirmed":
                self.make_available(m)
            else:  # get-unconfirmed, browse-get-unconfirmed
                self.remove(m)

    @precondition(lambda self: any(self.confirm_ids(q) for q in QUEUES))
    @rule(data=hs.data())
    def undo_confirm(self, data: hs.DataObject) -> None:
        q = data.draw(hs.sampled_from([q for q in QUEUES if self.confirm_ids(q)]))
        c = data.draw(hs.sampled_from(self.confirm_ids(q)))
        pending = self.with_confirm(q, c)
        assert self.store.undo(q, confirm_id=c) == len(pending)
        for m in pending:
            self.undo_confirm_model(m)

    @precondition(lambda self: any(self.lock_ids(q) for q in QUEUES))
    @rule(data=hs.data(), how=hs.sampled_from(["unlock", "undo"]))
    def unlock(self, data: hs.DataObject, how: str) -> None:
        q = data.draw(hs.sampled_from([q for q in QUEUES if self.lock_ids(q)]))
        lock = data.draw(hs.sampled_from(self.lock_ids(q)))
        locked = self.with_lock(q, lock)
        if how == "unlock":
            n = self.store.unlock(q, lock)
        else:
            n = self.store.undo(q, lock_id=lock)
        assert n == len(locked)
        for m in locked:
            self.make_available(m)

    # -- gets ----------------------------------------------------------------------------

    def expect_get(self, q: str, flt: dict) -> Msg | None:
        return next((m for m in self.in_queue(q, "available") if self.matches(m, flt)), None)

    def refusal(self, q: str, flt: dict) -> type[errors.StoreError]:
        """What a get or browse-with-lock that finds nothing raises (txn.Write.candidates).

        An exact msg_id names a message now or not at all ([MS-MQDMPR] 3.1.7.1.10): absent from the queue
        (or not yet put: put-unconfirmed, or put inside an open transaction) is MessageNotFound,
        held in flight is AlreadyReceived.
        """
        if "msg_id" not in flt:
            return errors.Timeout
        m = self.msgs.get(flt["msg_id"])
        if m is None or m.queue != q or m.state == "put-unconfirmed" or (m.state == "tx-locked" and m.tx_put):
            return errors.MessageNotFound
        return errors.AlreadyReceived

    @rule(q=queues, data=hs.data())
    def get(self, q: str, data: hs.DataObject) -> None:
        flt = self.draw_filter(data, q)
        want = self.expect_get(q, flt)
        if want is None:
            with pytest.raises(self.refusal(q, flt)):
                self.store.get(q, wait=0, **flt)
            return
        got = self.store.get(q, wait=0, **flt)
        assert got.msg_id == want.msg_id
        self.remove(want)

    @rule(q=queues, lease=leases, data=hs.data())
    def get_unconfirmed(self, q: str, lease: float | None, data: hs.DataObject) -> None:
        flt = self.draw_filter(data, q)
        c = self.new_confirm_id(data, q)
        if self.taken(q, CONFIRM, c):  # refused before any message is looked for
            self.refused(lambda: self.store.get(q, wait=0, confirm_id=c, lease=lease, **flt))
            return
        want = self.expect_get(q, flt)
        if want is None:
            with pytest.raises(self.refusal(q, flt)):
                self.store.get(q, wait=0, confirm_id=c, lease=lease, **flt)
            return
        got = self.store.get(q, wait=0, confirm_id=c, lease=lease, **flt)
        assert got.msg_id == want.msg_id
        want.state, want.confirm_id, want.lease = "get-unconfirmed", c, self.deadline(lease)
        self.used_confirm[q].add(c)

    # -- browse with lock ----------------------------------------------------------------

    @rule(q=queues, lease=leases, limit=hs.none() | hs.integers(1, 3),
          choose=hs.sampled_from(["store", "fresh", "reuse"]), data=hs.data())
    def browse_lock(self, q: str, lease: float | None, limit: int | None, choose: str,
                    data: hs.DataObject) -> None:
        """Browse with lock; the lock id is ours or, when none is given, the store's. One used
        in the queue before is refused while pending or reserved after a lapse."""
        flt = self.draw_filter(data, q)
        chosen = self.fresh_id() if choose == "fresh" or (choose == "reuse" and not self.used_lock[q]) else None
        if choose == "reuse" and self.used_lock[q]:
            chosen = data.draw(hs.sampled_from(self.used_lock[q]), label="used lock id")
            if self.taken(q, LOCK, chosen):
                self.refused(lambda: self.store.browse_lock(q, limit=limit, lease=lease, lock_id=chosen, **flt))
                return
        want = [m for m in self.in_queue(q, "available") if self.matches(m, flt)][:limit]
        if not want:
            with pytest.raises(self.refusal(q, flt)):
                self.store.browse_lock(q, limit=limit, lease=lease, lock_id=chosen, **flt)
            return
        lock, got = self.store.browse_lock(q, limit=limit, lease=lease, lock_id=chosen, **flt)
        assert [g.msg_id for g in got] == [m.msg_id for m in want]
        assert all(g.state == "locked-browse" and g.lock_id == lock for g in got)
        assert lock == (chosen or lock)
        if lock not in self.used_lock[q]:
            self.used_lock[q].append(lock)
        for m in want:
            m.state, m.lock_id = "locked-browse", lock
            m.lease = self.deadline(lease)

    @precondition(lambda self: any(self.lock_ids(q) for q in QUEUES))
    @rule(data=hs.data(), confirm=hs.sampled_from([False, True, True]), lease=leases)
    def get_locked(self, data: hs.DataObject, confirm: bool, lease: float | None) -> None:
        q = data.draw(hs.sampled_from([q for q in QUEUES if self.lock_ids(q)]))
        lock = data.draw(hs.sampled_from(self.lock_ids(q)))
        want = self.with_lock(q, lock)[0]
        if not confirm:
            got = self.store.get(q, wait=0, lock_id=lock)
            assert got.msg_id == want.msg_id
            self.remove(want)
            return
        c = self.fresh_id()
        got = self.store.get(q, wait=0, lock_id=lock, confirm_id=c, lease=lease)
        assert got.msg_id == want.msg_id
        want.state, want.confirm_id = "browse-get-unconfirmed", c
        if lease is not None:
            want.lease = self.deadline(lease)
        self.used_confirm[q].add(c)

    # -- delete --------------------------------------------------------------------------

    @precondition(lambda self: any(m.queue in QUEUES for m in self.msgs.values()))
    @rule(data=hs.data())
    def delete(self, data: hs.DataObject) -> None:
        """MQe deleteMessage: available, or locked-browse named with its own lock id.

        Anything else is refused and changes nothing: a put-unconfirmed message is hidden
        (MessageNotFound), a lock nobody holds is UnknownLockId, a held message AlreadyReceived.
        """
        m = data.draw(hs.sampled_from(sorted(
            (m for m in self.msgs.values() if m.queue in QUEUES), key=lambda m: m.arrival)))
        q = m.queue
        lock = None
        if m.state != "available":
            others = [other for other in self.used_lock[q] if other != m.lock_id]
            lock = data.draw(hs.sampled_from([m.lock_id, None, *others]) | NEVER_USED)
        if m.state == "available" or (m.state == "locked-browse" and lock == m.lock_id):
            self.store.delete(q, m.msg_id, lock_id=lock)
            self.remove(m)
            return
        if m.state == "put-unconfirmed" or (m.state == "tx-locked" and m.tx_put):
            refusal: type[errors.StoreError] = errors.MessageNotFound
        elif lock is not None and lock not in self.lock_ids(q, state=None):
            refusal = errors.LockIdLapsed if self.reserved(q, LOCK, lock) else errors.UnknownLockId
        else:
            refusal = errors.AlreadyReceived
        before = self.snapshot()
        with pytest.raises(refusal) as caught:
            self.store.delete(q, m.msg_id, lock_id=lock)
        assert type(caught.value) is refusal
        assert self.snapshot() == before

    # -- wrong ids -----------------------------------------------------------------------

    def unknown_confirm(self, data: hs.DataObject, q: str) -> int:
        """Never used, finished, or pending only in the other queue."""
        live = set(self.confirm_ids(q))
        stale = sorted(set().union(*self.used_confirm.values()) - live)
        return data.draw(NEVER_USED | hs.sampled_from(stale) if stale else NEVER_USED)

    def unknown_lock(self, data: hs.DataObject, q: str) -> int:
        live = set(self.lock_ids(q, state=None))
        stale = [lock for used in self.used_lock.values() for lock in used if lock not in live]
        return data.draw(NEVER_USED | hs.sampled_from(stale) if stale else NEVER_USED)

    @rule(q=queues, data=hs.data(),
          op=hs.sampled_from(["confirm", "undo-confirm", "unlock", "undo-lock", "get-lock"]))
    def wrong_id(self, q: str, data: hs.DataObject, op: str) -> None:
        """An unknown confirm or lock id raises its own error and changes nothing; one whose
        lease lapsed less than a day ago says so (a late confirm or undo)."""
        before = self.snapshot()
        if op in ("confirm", "undo-confirm"):
            c = self.unknown_confirm(data, q)
            key = (q, CONFIRM, c)
            lapsed = self.reserved(*key)
            with pytest.raises(errors.UnknownConfirmId) as caught:
                if op == "confirm":
                    self.store.confirm(q, c)
                else:
                    self.store.undo(q, confirm_id=c)
            assert type(caught.value) is (errors.ConfirmIdLapsed if lapsed else errors.UnknownConfirmId)
        else:
            lock = self.unknown_lock(data, q)
            key = (q, LOCK, lock)
            lapsed = self.reserved(*key)
            with pytest.raises(errors.UnknownLockId) as caught:
                if op == "unlock":
                    self.store.unlock(q, lock)
                elif op == "undo-lock":
                    self.store.undo(q, lock_id=lock)
                else:
                    self.store.get(q, wait=0, lock_id=lock)
            assert type(caught.value) is (errors.LockIdLapsed if lapsed else errors.UnknownLockId)
        if lapsed:
            assert caught.value.message.startswith(
                f"the lease of {key[1]} id {key[2]} lapsed at {ids.when(self.lapsed[key])}; ")
        assert self.snapshot() == before

    def lapsed_ids(self) -> list[tuple[str, str, int]]:
        """Ids whose lease lapsed less than a day ago and that nothing holds now."""
        return [(q, kind, i) for (q, kind, i) in self.lapsed
                if self.reserved(q, kind, i) and i not in (
                    self.confirm_ids(q) if kind == CONFIRM else self.lock_ids(q, state=None))]

    @precondition(lambda self: self.lapsed_ids())
    @rule(data=hs.data(), undo=hs.booleans())
    def late_confirm(self, data: hs.DataObject, undo: bool) -> None:
        """The holder whose lease lapsed comes back: its confirm (or undo, unlock) is told of
        the lapse and touches nothing, whoever holds the messages now."""
        q, kind, ident = data.draw(hs.sampled_from(self.lapsed_ids()))
        before = self.snapshot()
        if kind == CONFIRM:
            with pytest.raises(errors.ConfirmIdLapsed):
                if undo:
                    self.store.undo(q, confirm_id=ident)
                else:
                    self.store.confirm(q, ident)
        else:
            with pytest.raises(errors.LockIdLapsed):
                if undo:
                    self.store.undo(q, lock_id=ident)
                else:
                    self.store.unlock(q, ident)
        assert self.snapshot() == before

    def got_locks(self) -> list[tuple[str, int]]:
        """Browse locks whose messages are all got, pending confirm."""
        return [(q, lock) for q in QUEUES for lock in self.lock_ids(q, state=None)
                if lock not in self.lock_ids(q)]

    @precondition(lambda self: self.got_locks())
    @rule(data=hs.data(), op=hs.sampled_from(["unlock", "undo", "get"]))
    def lock_of_got_messages_refused(self, data: hs.DataObject, op: str) -> None:
        """Unlock, undo or get under a lock whose messages are all got: AlreadyReceived."""
        q, lock = data.draw(hs.sampled_from(self.got_locks()))
        before = self.snapshot()
        with pytest.raises(errors.AlreadyReceived):
            if op == "unlock":
                self.store.unlock(q, lock)
            elif op == "undo":
                self.store.undo(q, lock_id=lock)
            else:
                self.store.get(q, wait=0, lock_id=lock)
        assert self.snapshot() == before

    # -- time ----------------------------------------------------------------------------

    @rule(dt=hs.sampled_from([0.5, 1.0, 2.0, 3.0, 6.0, 12.0, DAY]),
          then=hs.sampled_from(["sweep", "put"]), priority=priorities)
    def advance_clock(self, dt: float, then: str, priority: int) -> None:
        """Time passes; the next write (a sweep, or any put) undoes every lapsed lease, then
        aborts every timed-out transaction (Write.maintain; sweep does both in that order)."""
        self.clock.now += dt
        undone = self.lapse_due()
        aborted = self.abort_timed_out()
        if then == "sweep":
            result = self.store.sweep()
            assert (result.leases_undone, result.transactions_aborted) == (undone, len(aborted))
        else:
            self.put_one(PLAIN, priority, None, confirm_id=None, lease=None)

    # -- transactions --------------------------------------------------------------------

    def draw_tx(self, data: hs.DataObject) -> int:
        return data.draw(hs.sampled_from(sorted(self.txs)), label="tx")

    @precondition(lambda self: len(self.txs) < MAX_ACTIVE_TX)
    @rule(timeout=tx_timeouts)
    def tx_begin(self, timeout: float | None) -> None:
        t = self.store.tx_begin(timeout=timeout)
        assert t not in self.txs and t not in self.tx_done
        self.txs[t] = Tx(deadline=self.deadline(timeout))

    @precondition(lambda self: self.txs)
    @rule(q=tx_queues, batch=hs.lists(hs.tuples(priorities, correl_ids), min_size=1, max_size=4),
          data=hs.data())
    def tx_put(self, q: str, batch: list[tuple[int, str | None]], data: hs.DataObject) -> None:
        """Put inside T: tx-locked at its position, invisible until T commits."""
        self.tx_put_batch(self.draw_tx(data), q, batch)

    @precondition(lambda self: self.txs)
    @rule(q=tx_queues, count=hs.integers(1, 3), data=hs.data())
    def tx_get(self, q: str, count: int, data: hs.DataObject) -> None:
        """Get inside T ([MS-MQDMPR] 3.1.7.1.10): the next available matches become tx-locked by T."""
        t = self.draw_tx(data)
        # mostly the head of the queue (so one message is got and aborted again and again,
        # up to max-backouts), sometimes with a filter
        flt = self.draw_filter(data, q) if data.draw(hs.integers(0, 3), label="filter") == 0 else {}
        want = [m for m in self.in_queue(q, "available") if self.matches(m, flt)][:count]
        if "msg_id" in flt:
            want = want[:1]
        if not want:
            before = self.snapshot()
            with pytest.raises(self.refusal(q, flt)):
                self.store.get_many(q, count, wait=0, tx=t, **flt)
            assert self.snapshot() == before
            return
        got = self.store.get_many(q, count, wait=0, tx=t, **flt)
        assert [g.msg_id for g in got] == [m.msg_id for m in want]
        assert all((g.state, g.tx, g.tx_put) == ("tx-locked", t, False) for g in got)
        self.touch(t, q)
        for m in want:
            m.state, m.tx = "tx-locked", t

    @precondition(lambda self: self.txs)
    @rule(data=hs.data(), commit=hs.booleans())
    def tx_finish(self, data: hs.DataObject, commit: bool) -> None:
        t = self.draw_tx(data)
        ops = self.tx_ops(t)
        n = self.store.tx_commit(t) if commit else self.store.tx_abort(t)
        assert n == len(ops)
        self.finish_model(t, commit=commit)

    @rule(q=tx_queues, count=hs.integers(1, 2), rounds=hs.integers(1, 2))
    def tx_receive_and_abort(self, q: str, count: int, rounds: int) -> None:
        """The poison-message loop, once or twice: begin, get the first messages inside T,
        abort. Each abort counts a backout; at max-backouts the messages go to dead-letter-tx,
        in queue order."""
        for _ in range(rounds):
            heads = self.in_queue(q, "available")[:count]
            t = self.store.tx_begin(timeout=None)
            self.txs[t] = Tx(deadline=None)
            if not heads:
                with pytest.raises(errors.Timeout):
                    self.store.get_many(q, count, wait=0, tx=t)
            else:
                got = self.store.get_many(q, count, wait=0, tx=t)
                assert [g.msg_id for g in got] == [m.msg_id for m in heads]
                self.touch(t, q)
                for m in heads:
                    m.state, m.tx = "tx-locked", t
            assert self.store.tx_abort(t) == len(heads)
            self.finish_model(t, commit=False)

    @rule(data=hs.data(), op=hs.sampled_from(["commit", "abort", "put", "get"]), q=tx_queues)
    def tx_wrong_id(self, data: hs.DataObject, op: str, q: str) -> None:
        """A transaction id never handed out, invalid, or finished (committed, aborted, timed
        out): TransactionError, and nothing changes."""
        t = data.draw(NO_TX | hs.sampled_from(self.tx_done) if self.tx_done else NO_TX)
        before = self.snapshot()
        with pytest.raises(errors.TransactionError):
            if op == "commit":
                self.store.tx_commit(t)
            elif op == "abort":
                self.store.tx_abort(t)
            elif op == "put":
                self.store.put(q, b"x", tx=t)
            else:
                self.store.get(q, wait=0, tx=t)
        assert self.snapshot() == before

    @rule(q=tx_queues, confirm=hs.booleans(), many=hs.booleans(), priority=priorities)
    def put_to_transactional_queue_refused(self, q: str, confirm: bool, many: bool,
                                           priority: int) -> None:
        """A transactional queue takes puts only inside a transaction (MSMQ)."""
        c = self.fresh_id() if confirm else None
        before = self.snapshot()
        with pytest.raises(errors.TransactionError):
            if many:
                self.store.put_many(q, [NewMessage(b"x", priority=priority)] * 2, confirm_id=c)
            else:
                self.store.put(q, b"x", priority=priority, confirm_id=c)
        assert self.snapshot() == before

    @precondition(lambda self: self.txs)
    @rule(q=put_queues, op=hs.sampled_from(["put", "get"]), data=hs.data())
    def tx_on_plain_queue_refused(self, q: str, op: str, data: hs.DataObject) -> None:
        """A transaction touches only transactional queues, even when messages are there."""
        t = self.draw_tx(data)
        before = self.snapshot()
        with pytest.raises(errors.TransactionError):
            if op == "put":
                self.store.put(q, b"x", tx=t)
            else:
                self.store.get(q, wait=0, tx=t)
        assert self.snapshot() == before

    # -- what the store shows ------------------------------------------------------------

    @invariant()
    def store_agrees_with_model(self) -> None:
        st = self.store
        total = 0
        for q in SHOWN:
            want_all = self.in_queue(q)
            want_avail = [m.msg_id for m in want_all if m.state == "available"]
            total += len(want_all)
            # plain browse: exactly the available messages, in queue order
            assert [g.msg_id for g in st.browse(q)] == want_avail, q
            seen = st.browse(q, states="all")  # every state, still in queue order
            assert [g.msg_id for g in seen] == [m.msg_id for m in want_all], q
            for g in seen:
                m = self.msgs[g.msg_id]
                assert g.queue == q
                assert (g.state, g.confirm_id, g.lock_id, g.backouts, g.priority) == (
                    m.state, m.confirm_id, m.lock_id, m.backouts, m.priority), g.msg_id
                assert (g.tx, g.tx_put) == (m.tx, m.tx_put), g.msg_id
                assert g.lease_expires == m.lease, g.msg_id
                if q in (DEAD_LETTER, DEAD_LETTER_TX):
                    assert g.original_queue == m.original_queue
            inflight = sorted(g.msg_id for g in st.inflight(q))
            assert inflight == sorted(m.msg_id for m in want_all if m.state != "available"), q
            info = st.queue_info(q)
            assert (info.depth, info.available) == (len(want_all), len(want_avail)), q
        assert st.info().messages == total
        # the active transactions: ids, deadlines, queues in touch order, operations
        listed = {i.tx: (i.deadline, i.queues, i.operations) for i in st.tx_list()}
        assert listed == {t: (tx.deadline, tx.queues, len(self.tx_ops(t)))
                          for t, tx in self.txs.items()}
        for t in self.txs:
            _, ops = st.tx_show(t)
            assert sorted(m.msg_id for m in ops) == sorted(m.msg_id for m in self.tx_ops(t))
        self.steps += 1
        if self.steps % CHECK_EVERY == 0:
            assert st.check() == []


StoreMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    # one bug shrunk to its few steps beats several half-shrunk views of the same bug
    report_multiple_bugs=False,
)
TestMessageStates = StoreMachine.TestCase
