"""MSMQ transactions: the ones that span invocations (`tx begin`, `--tx`; the
TransactionalOperation of [MS-MQDMPR] 3.1.7.1.9 and 3.1.7.1.10; docs/design.md#transactions).
Each of their steps runs in one LMDB write (store/write.py).

A transaction is a record in the `txs` table; its operations are its tx-locked messages, found
per queue under the `T` index. An enqueue in T stores the message tx-locked with `tx_put`
(invisible); a dequeue in T locks an available message (reason AckReceive, [MS-MQDMPR] 3.1.7.1.10). Commit
applies every operation in one LMDB write transaction; abort restores each message to its
state before T and counts a backout for dequeued ones. A timed-out transaction is aborted on
the next write to the store.

A transaction times out after `DEFAULT_TIMEOUT` unless its beginner says otherwise: its
messages are invisible to everyone else until it ends, so a script that dies between
`tx begin` and `tx commit` would otherwise hold them until an operator found it. Never timing
out is a choice to make explicitly (`timeout=None`, `--timeout forever`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from . import keys
from .arguments import is_int
from .errors import TransactionError
from .records import AVAILABLE, TX_LOCKED, Message
from .write import GONE, Write

MAX_TX_ID = (1 << 63) - 1
DEFAULT_TIMEOUT = 600.0
"""Seconds a transaction may stay open when `Store.tx_begin` is not told (docs/store-api.md)."""


class TxRecord(TypedDict):
    """A transaction's record in the `txs` table (JSON)."""
    created: int  # µs since the epoch
    deadline: int | None  # when it times out, µs since the epoch; None: never
    qids: list[int]  # the queues it has operations in
    moved: NotRequired[list[int]]  # the seqs of the messages a move dequeued in it (note_moved)


@dataclass(slots=True)
class TxInfo:
    """An MSMQ transaction as `mqcli tx list` and `show` report it."""

    tx: int
    created: int
    deadline: int | None
    queues: list[str] = field(default_factory=list)
    operations: int = 0


def _key(tx_id: int) -> bytes:
    return keys.U64.pack(tx_id)


def load(t: Write, tx_id: int) -> TxRecord:
    """The record of an active transaction; TransactionError for unknown or finished ones."""
    if not is_int(tx_id) or not 0 < tx_id <= MAX_TX_ID:
        raise TransactionError(f"a transaction id is a positive 63-bit integer, got {tx_id!r}")
    record = find(t, tx_id)
    if record is None:
        raise TransactionError(f"transaction {tx_id} is unknown, finished or timed out (start one with `mqcli tx begin`)")
    return record


def find(t: Write, tx_id: int) -> TxRecord | None:
    """The record of T if it is open (not committed, aborted or timed out and forgotten)."""
    raw = t.lt.get(_key(tx_id), db=t.dbs["txs"])
    if raw is None:
        return None
    record: TxRecord = json.loads(raw)
    return record


def begin(t: Write, timeout_us: int | None) -> int:
    tx_id = t.meta_int(keys.META_TX_ID) + 1
    t.set_meta_int(keys.META_TX_ID, tx_id)
    deadline = t.now + timeout_us if timeout_us else None
    record: TxRecord = {"created": t.now, "deadline": deadline, "qids": []}
    t.lt.put(_key(tx_id), json.dumps(record).encode(), db=t.dbs["txs"])
    if deadline:
        t.lt.put(keys.deadline_key(keys.TX_TIMEOUT, deadline, tx_id), b"", db=t.idx_db)
        t.deadline_added(deadline)
    t.durable = True
    return tx_id


def touch(t: Write, tx_id: int, record: TxRecord, qid: int) -> None:
    """Remember that T has operations in queue `qid` (commit and abort visit those queues)."""
    if qid not in record["qids"]:
        record["qids"].append(qid)
        t.lt.put(_key(tx_id), json.dumps(record).encode(), db=t.dbs["txs"])


def operations(t: Write, tx_id: int, record: TxRecord) -> list[Message]:
    found: list[Message] = []
    for qid in record["qids"]:
        found += t.by_index(keys.id_in_queue_prefix(keys.TX, qid, tx_id))
    return found


def finish(t: Write, tx_id: int, *, commit: bool) -> int:
    """Commit or abort T: every operation in this one LMDB transaction."""
    record = load(t, tx_id)
    done = sum(t.commit_tx_puts(tx_id, qid) for qid in record["qids"]) if commit else 0
    ops = operations(t, tx_id, record)  # the rest: its gets (and to abort, its puts too)
    moved = set(record.get("moved", ()))
    for m in ops:
        if m.tx_put:
            t.leave(m, AVAILABLE if commit else GONE)
        elif m.seq in moved:  # as a move outside a transaction: not a get, not the message's fault
            t.leave(m, GONE if commit else AVAILABLE)
        elif commit:
            t.leave(m, GONE)
            t.got(t.queue(m.queue), [m])  # journaled: committed transactional gets too
        else:
            t.leave(m, AVAILABLE, backout=True)  # the dequeue is undone, one more backout
    _forget(t, tx_id, record)
    t.durable = True
    return done + len(ops)


def _forget(t: Write, tx_id: int, record: TxRecord) -> None:
    t.lt.delete(_key(tx_id), db=t.dbs["txs"])
    deadline = record.get("deadline")
    if deadline:
        t.lt.delete(keys.deadline_key(keys.TX_TIMEOUT, deadline, tx_id), db=t.idx_db)


def lock_for_dequeue(t: Write, tx_id: int, record: TxRecord, m: Message) -> None:
    """Dequeue inside T ([MS-MQDMPR] 3.1.7.1.10): the message is locked with reason AckReceive."""
    touch(t, tx_id, record, m.qid)
    # a message got in T under a browse lock leaves the lock (and its lease); abort makes it
    # available, not locked again
    t.transition(m, durable=False, state=TX_LOCKED, tx=tx_id, tx_put=False, since=t.now,
                 lock_id=None, lease_expires=None, confirm_id=None)  # a held get's token goes too


def note_moved(t: Write, tx_id: int, record: TxRecord, messages: list[Message]) -> None:
    """The messages dequeued in T (lock_for_dequeue) were moved, not got: its commit removes them
    without counting a get or journaling them, and its abort gives them back without a backout,
    as a move outside a transaction does. One write of the record for the batch."""
    record.setdefault("moved", []).extend(m.seq for m in messages)
    t.lt.put(_key(tx_id), json.dumps(record).encode(), db=t.dbs["txs"])


def prepare_enqueue(t: Write, tx_id: int, record: TxRecord, qid: int, messages: list[Message]) -> None:
    """Enqueue inside T ([MS-MQDMPR] 3.1.7.1.9): the new positions are locked until commit."""
    touch(t, tx_id, record, qid)
    for m in messages:
        m.state, m.tx, m.tx_put, m.since = TX_LOCKED, tx_id, True, t.now


def info(t: Write, tx_id: int, record: TxRecord) -> TxInfo:
    ops = operations(t, tx_id, record)
    # a queue T touched may have been purged of T's messages and then deleted
    queues = [t.queue_name(q) for q in record["qids"] if t.queue_exists(q)]
    return TxInfo(tx=tx_id, created=record["created"], deadline=record.get("deadline"),
                  queues=queues, operations=len(ops))


def all_ids(t: Write) -> list[int]:
    return [keys.U64.unpack(k)[0] for k in t.lt.cursor(db=t.dbs["txs"]).iternext(values=False)]
