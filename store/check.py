"""The consistency check behind `mqcli check`: records and indexes must agree (SPEC §2)."""

from __future__ import annotations

import json
from collections import defaultdict

from . import keys
from .errors import BadData, StoreCorrupt
from .queues import decode_queue
from .records import (
    AVAILABLE, BROWSE_GET_UNCONFIRMED, GET_UNCONFIRMED, LOCKED_BROWSE, PUT_UNCONFIRMED, TX_LOCKED,
    Message, decode,
)
from .txn import Txn, index_entries

_MAX_REPORTED = 50
_INDEX_NAMES = {keys.POS: "position", keys.MSGID: "msg_id", keys.UNIQ: "unique_id",
                keys.CORREL: "correl_id", keys.CONFIRM: "confirm id", keys.LOCK: "lock id",
                keys.LEASE: "lease", keys.EXPIRY: "expiry", keys.TX: "transaction",
                keys.TX_TIMEOUT: "transaction timeout"}


def _state_problem(m: Message) -> str | None:
    needs_confirm = m.state in (PUT_UNCONFIRMED, GET_UNCONFIRMED, BROWSE_GET_UNCONFIRMED)
    needs_lock = m.state in (LOCKED_BROWSE, BROWSE_GET_UNCONFIRMED)
    if m.state == AVAILABLE and (m.confirm_id or m.lock_id or m.tx or m.lease_expires):
        return "is available but carries in-flight ids"
    if needs_confirm != bool(m.confirm_id):
        return f"is {m.state} but its confirm id is {m.confirm_id}"
    if needs_lock != bool(m.lock_id):
        return f"is {m.state} but its lock id is {m.lock_id}"
    if (m.state == TX_LOCKED) != bool(m.tx):
        return f"is {m.state} but its transaction is {m.tx}"
    return None


def _index_name(key: bytes) -> str:
    return _INDEX_NAMES.get(key[:1], f"unknown ({key[:1]!r})")


def check_store(t: Txn) -> list[str]:
    problems: list[str] = []

    def report(text: str) -> None:
        if len(problems) < _MAX_REPORTED:
            problems.append(text)

    dbs = t.dbs
    queues = {}
    for key, raw in t.lt.cursor(db=dbs["queues"]):
        try:
            q = decode_queue(raw)
        except StoreCorrupt as exc:
            report(f"queue {bytes(key)!r}: {exc}")
            continue
        queues[q.qid] = q
        if t.lt.get(keys.U32.pack(q.qid), db=dbs["qids"]) != bytes(key):
            report(f"queue {q.name!r}: its number {q.qid} is not registered")

    transactions = {}
    for key, raw in t.lt.cursor(db=dbs["txs"]):
        tx_id = keys.U64.unpack(key)[0]
        try:
            transactions[tx_id] = json.loads(raw)
        except ValueError as exc:
            report(f"transaction {tx_id}: malformed record: {exc}")
    want: dict[bytes, bytes] = {
        keys.deadline_key(keys.TX_TIMEOUT, rec["deadline"], tx_id): b""
        for tx_id, rec in transactions.items() if rec.get("deadline")}  # index key -> its value (b"" for a position: it holds the record)
    counted: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    max_seq = 0
    seen: set[int] = set()

    def records():
        """Every record: the values of the position entries, then the held records."""
        for key, raw in t.lt.cursor(db=dbs["pos"]):
            yield "position", keys.seq_of(key), raw, True
        for key, raw in t.lt.cursor(db=dbs["msg"]):
            yield "held record", keys.U64.unpack(key)[0], raw, False

    for where, seq, raw, positioned in records():
        try:
            m = decode(raw)
        except BadData as exc:
            report(f"message seq {seq} ({where}): {exc}")
            continue
        max_seq = max(max_seq, seq)
        if seq in seen:
            report(f"message seq {seq} is stored twice")
        seen.add(seq)
        if m.seq != seq:
            report(f"message seq {seq}: record says seq {m.seq}")
        if m.qid not in queues:
            report(f"message seq {seq}: its queue number {m.qid} does not exist")
        if positioned != (m.state == AVAILABLE):
            report(f"message seq {seq} is {m.state} but stored as a {where}")
        problem = _state_problem(m)
        if problem:
            report(f"message seq {seq} {problem}")
        if m.tx and m.qid not in transactions.get(m.tx, {}).get("qids", ()):
            report(f"message seq {seq} is locked by transaction {m.tx}, which does not know it")
        counted[m.qid][0] += 1
        counted[m.qid][1] += len(m.body)
        location = keys.location(m.qid, m.priority)
        for entry in index_entries(m):
            want[entry] = b"" if entry[:1] == keys.POS else location

    have = {bytes(k): bytes(v) for k, v in t.lt.cursor(db=dbs["idx"])}
    have.update((bytes(k), b"") for k in t.lt.cursor(db=dbs["pos"]).iternext(values=False))
    for entry in sorted(set(want) - set(have))[:10]:
        report(f"{_index_name(entry)} index: the entry of message seq {keys.seq_of(entry)} is missing")
    for entry in sorted(set(have) - set(want))[:10]:
        report(f"{_index_name(entry)} index: entry {entry.hex()} points at no matching message")
    for entry in sorted(k for k, v in want.items() if v and k in have and have[k] != v)[:10]:
        report(f"{_index_name(entry)} index: entry {entry.hex()} gives a wrong location")

    total = [0, 0]
    for qid, q in queues.items():
        stored = t.qstats(qid)
        actual = counted.get(qid, [0, 0])
        if stored != actual:
            report(f"queue {q.name!r}: counters say {stored[0]} messages / {stored[1]} bytes, found {actual[0]} / {actual[1]}")
        total[0] += actual[0]
        total[1] += actual[1]
    store_counts = [t.counters.count, t.counters.bytes]
    if store_counts != total:
        report(f"store counters say {store_counts[0]} messages / {store_counts[1]} bytes, found {total[0]} / {total[1]}")
    if t.counters.seq < max_seq:
        report(f"SequentialID {t.counters.seq} is behind the newest message ({max_seq})")
    return problems
