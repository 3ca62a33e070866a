"""The consistency check behind `mqcli check`: records and indexes must agree (SPEC §2)."""

from __future__ import annotations

from collections import defaultdict

from . import keys
from .errors import BadData, StoreCorrupt
from .queues import decode_queue
from .records import (
    AVAILABLE, BROWSE_GET_UNCONFIRMED, GET_UNCONFIRMED, LOCKED_BROWSE, PUT_UNCONFIRMED, Message,
    decode,
)
from .txn import Txn

_INDEXES = ("pos", "msgid", "uniq", "correl", "confirm", "lock", "lease", "expiry")
_MAX_REPORTED = 50


def expected_entries(m: Message) -> dict[str, bytes]:
    """Every index key a message must have, by table — the mirror of Txn.insert/_index_state."""
    want = {
        "msgid": keys.msgid_key(m.origin, m.msg_n, m.seq),
        "uniq": keys.uniq_key(m.origin, m.put_time, m.seq),
    }
    if m.correl_id is not None:
        want["correl"] = keys.correl_key(m.qid, m.correl_id.encode(), m.priority, m.seq)
    if m.expires is not None:
        want["expiry"] = keys.deadline_key(m.expires, m.seq)
    if m.state == AVAILABLE:
        want["pos"] = keys.pos_key(m.qid, m.priority, m.seq)
    if m.confirm_id:
        want["confirm"] = keys.id_in_queue_key(m.qid, m.confirm_id, m.priority, m.seq)
    if m.lock_id:
        want["lock"] = keys.id_in_queue_key(m.qid, m.lock_id, m.priority, m.seq)
    if m.lease_expires:
        want["lease"] = keys.deadline_key(m.lease_expires, m.seq)
    return want


def _state_problem(m: Message) -> str | None:
    needs_confirm = m.state in (PUT_UNCONFIRMED, GET_UNCONFIRMED, BROWSE_GET_UNCONFIRMED)
    needs_lock = m.state in (LOCKED_BROWSE, BROWSE_GET_UNCONFIRMED)
    if m.state == AVAILABLE and (m.confirm_id or m.lock_id or m.tx or m.lease_expires):
        return "is available but carries in-flight ids"
    if needs_confirm != bool(m.confirm_id):
        return f"is {m.state} but its confirm id is {m.confirm_id}"
    if needs_lock != bool(m.lock_id):
        return f"is {m.state} but its lock id is {m.lock_id}"
    return None


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

    want: dict[str, set[bytes]] = defaultdict(set)
    counted: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    max_seq = 0
    for key, raw in t.lt.cursor(db=dbs["msg"]):
        seq = keys.U64.unpack(key)[0]
        try:
            m = decode(raw)
        except BadData as exc:
            report(f"message seq {seq}: {exc}")
            continue
        max_seq = max(max_seq, seq)
        if m.seq != seq:
            report(f"message seq {seq}: record says seq {m.seq}")
        if m.qid not in queues:
            report(f"message seq {seq}: its queue number {m.qid} does not exist")
        problem = _state_problem(m)
        if problem:
            report(f"message seq {seq} {problem}")
        counted[m.qid][0] += 1
        counted[m.qid][1] += len(m.body)
        for table, entry in expected_entries(m).items():
            want[table].add(entry)

    for table in _INDEXES:
        have = set(t.lt.cursor(db=dbs[table]).iternext(values=False))
        for entry in sorted(want[table] - have)[:5]:
            report(f"index {table}: entry for message seq {keys.seq_of(entry)} is missing")
        for entry in sorted(have - want[table])[:5]:
            report(f"index {table}: entry {entry.hex()} points at no matching message")

    total = [0, 0]
    for qid, q in queues.items():
        stored = t.qstats(qid)
        actual = counted.get(qid, [0, 0])
        if stored != actual:
            report(f"queue {q.name!r}: counters say {stored[0]} messages / {stored[1]} bytes, found {actual[0]} / {actual[1]}")
        total[0] += actual[0]
        total[1] += actual[1]
    store_counts = [t.meta_int(keys.META_COUNT), t.meta_int(keys.META_BYTES)]
    if store_counts != total:
        report(f"store counters say {store_counts[0]} messages / {store_counts[1]} bytes, found {total[0]} / {total[1]}")
    if t.meta_int(keys.META_SEQUENTIAL_ID) < max_seq:
        report(f"SequentialID {t.meta_int(keys.META_SEQUENTIAL_ID)} is behind the newest message ({max_seq})")
    return problems
