"""The consistency check behind `mqcli check`: records and indexes must agree (docs/design.md#store), and
the store-and-forward tables (links, outq, seen) must hold what their modules read
(docs/design.md#store-and-forward); LMDB's own B-trees must read whole, its free list too
(docs/design.md#store, "A damaged data file")."""

from __future__ import annotations

import json
import struct
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import lmdb

from . import holders, identity, ids, keys, links, outgoing, queue_counters
from .environment import free_list_problems
from .errors import BadData, InvalidArgument, StoreCorrupt, StoreError
from .queue_counters import QueueCounters
from .keys import queue_key
from .queues import SYSTEM_QUEUES, QueueInfo, decode_queue, validate_attrs
from .records import (
    AVAILABLE,
    BROWSE_GET_UNCONFIRMED,
    GET_UNCONFIRMED,
    LOCKED_BROWSE,
    PUT_UNCONFIRMED,
    TX_LOCKED,
    Message,
    decode,
    iso_time,
    validate_fields,
)
from .write import Write, index_entries

_MAX_REPORTED = 50
_POS_KEY_SIZE = len(keys.pos_key(0, 0, 0))
_INDEX_NAMES = {keys.POS: "position", keys.MSGID: "msg_id", keys.UNIQ: "unique_id",
                keys.CORREL: "correl_id", keys.CONFIRM: "confirm id", keys.LOCK: "lock id",
                keys.LEASE: "lease", keys.EXPIRY: "expiry", keys.TX: "transaction",
                keys.TX_TIMEOUT: "transaction timeout", keys.MSGID_RUN: "msg_id", keys.UNIQ_RUN: "unique_id"}

# arrival times come from the clock of whichever process received; clocks of the processes
# sharing a store differ by seconds, so a time a day ahead is a clock set wrong or damage
_SEEN_FUTURE_US = 86400 * 1_000_000


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


def check_store(t: Write, path: Path | None = None) -> list[str]:
    """The problems of the store read in `t`; with `path`, the store's directory, also of
    LMDB's free list, read from its data file (environment.free_list_problems): no table
    walk reads it, and a damaged one fails every write."""
    problems: list[str] = []

    def report(text: str) -> None:
        if len(problems) < _MAX_REPORTED:
            problems.append(text)

    if path is not None:
        for problem in free_list_problems(path, t.lt.id()):
            report(problem)
    try:
        _check_tree(t, report)
        _check(t, report)
    except lmdb.Error as exc:  # a damaged B-tree: LMDB keeps no checksums, it finds what it can
        report(f"LMDB cannot read the store's B-tree: {exc}")
    except (StoreError, struct.error, ValueError, TypeError, KeyError, IndexError) as exc:
        report(f"the store holds data that cannot be decoded: {getattr(exc, 'message', exc)}")
    return problems


def _check_tree(t: Write, report: Callable[[str], None]) -> None:
    """Each table's B-tree as a lookup walks it: LMDB keeps no checksums, and a walk in key
    order goes leaf to leaf by the parents' child pointers without reading the keys that
    route a lookup, so a damaged routing key is seen by nothing else here. Then a get or a
    browse that seeks a place lands in the wrong leaf (a browse page showed messages twice).
    So every key must come after the one before it, and a lookup of it must find it. Per
    table, the first problem is said (one damaged page spoils many keys)."""
    for name, db in t.dbs.items():
        finder = t.lt.cursor(db=db)
        previous = None
        for key in t.lt.cursor(db=db).iternext(values=False):
            if previous is not None and key <= previous:
                report(f"table {name}: key {bytes(key).hex()} comes after {previous.hex()} in its walk: "
                       f"a damaged B-tree page")
                break
            if not finder.set_key(key):
                report(f"table {name}: a lookup of key {bytes(key).hex()} does not find it: a damaged "
                       f"B-tree page routes it elsewhere")
                break
            previous = bytes(key)


def _key_problem(where: str, key: bytes, size: int) -> str | None:
    if len(key) != size:
        return f"{where} key {bytes(key).hex()} is malformed ({len(key)} bytes, not {size})"
    return None


def _check(t: Write, report: Callable[[str], None]) -> None:
    dbs = t.dbs
    queues = {}
    queues_by_key = {}
    for key, raw in t.lt.cursor(db=dbs["queues"]):
        try:
            q = decode_queue(raw)
        except StoreCorrupt as exc:
            report(f"queue {bytes(key)!r}: {exc}")
            continue
        try:
            validate_attrs(quota=q.quota, max_backouts=q.max_backouts, label=q.label, journal=q.journal,
                           transactional=q.transactional)
        except InvalidArgument as exc:
            report(f"queue {q.name!r}: its record holds a bad attribute: {exc}")
        queues[q.qid] = q
        queues_by_key[bytes(key)] = q
        if t.lt.get(keys.U32.pack(q.qid), db=dbs["qids"]) != bytes(key):
            report(f"queue {q.name!r}: its number {q.qid} is not registered")
    for name in SYSTEM_QUEUES:  # docs/design.md#queues: created with the store; expiry and backouts need them
        if queue_key(name) not in queues_by_key:
            report(f"the system queue {name!r} is missing")

    transactions = {}
    for key, raw in t.lt.cursor(db=dbs["txs"]):
        problem = _key_problem("transaction", key, keys.U64.size)
        if problem:
            report(problem)
            continue
        tx_id = keys.U64.unpack(key)[0]
        try:
            transactions[tx_id] = json.loads(raw)
        except ValueError as exc:
            report(f"transaction {tx_id}: malformed record: {exc}")
    want: dict[bytes, bytes] = {
        keys.deadline_key(keys.TX_TIMEOUT, rec["deadline"], tx_id): b""
        for tx_id, rec in transactions.items() if rec.get("deadline")}  # index key -> its value (b"" for a position: it holds the record)
    counted: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    shapes: dict[int, QueueCounters] = defaultdict(QueueCounters)  # in flight by state, by priority
    max_seq = 0
    seen: set[int] = set()
    identities: dict[int, tuple[bytes, int, int, bytes]] = {}  # seq -> origin, msg_n, put time, location

    def records() -> Iterator[tuple[str, int, bytes, bool]]:
        """Every record: the values of the position entries, then the held records."""
        for key, raw in t.lt.cursor(db=dbs["pos"]):
            problem = _key_problem("position", key, _POS_KEY_SIZE)
            if problem:
                report(problem)
                continue
            yield "position", keys.seq_of(key), raw, True
        for key, raw in t.lt.cursor(db=dbs["msg"]):
            problem = _key_problem("held record", key, keys.U64.size)
            if problem:
                report(problem)
                continue
            yield "held record", keys.seq_of(key), raw, False

    for where, seq, raw, positioned in records():
        try:
            m = decode(raw)
            validate_fields(m)  # decode takes any byte for a priority, any length for a label
        except (BadData, InvalidArgument) as exc:
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
        shape = shapes[m.qid]
        shape.by_priority[m.priority] += 1
        if m.state != AVAILABLE:
            shape.in_flight[m.state] += 1
        location = keys.location(m.qid, m.priority)
        for entry in index_entries(m):
            want[entry] = b"" if entry[:1] == keys.POS else location
        identities[seq] = (m.origin, m.msg_n, m.put_time, location)

    _check_holds(t, queues, report)
    put_orders = _put_orders(identities)

    have: dict[bytes, bytes] = {}
    runs = []
    for k, v in t.lt.cursor(db=dbs["idx"]):
        if k[:1] in identity.KIND:
            runs.append((bytes(k), bytes(v)))
        else:
            have[bytes(k)] = bytes(v)
    _check_runs(runs, identities, report)
    have.update((bytes(k), b"") for k in t.lt.cursor(db=dbs["pos"]).iternext(values=False))
    for entry in sorted(set(want) - set(have))[:10]:
        report(f"{_index_name(entry)} index: the entry of message seq {keys.seq_of(entry)} is missing")
    for entry in sorted(set(have) - set(want))[:10]:
        report(f"{_index_name(entry)} index: entry {entry.hex()} points at no matching message")
    for entry in sorted(k for k, v in want.items() if v and k in have and have[k] != v)[:10]:
        report(f"{_index_name(entry)} index: entry {entry.hex()} gives a wrong location")

    total = [0, 0]
    for qid, q in queues.items():
        actual = counted.get(qid, [0, 0])
        stats_raw = t.lt.get(keys.qstats_key(qid), db=t.dbs["meta"])
        malformed = stats_raw is not None and len(stats_raw) != keys.QSTATS.size  # _check_queue_meta says so
        if not malformed and (stored := t.qstats(qid)) != actual:
            report(f"queue {q.name!r}: counters say {stored[0]} messages / {stored[1]} bytes, found {actual[0]} / {actual[1]}")
        total[0] += actual[0]
        total[1] += actual[1]
        counters_raw = t.lt.get(queue_counters.counters_key(qid), db=t.dbs["meta"])
        if counters_raw is not None and len(counters_raw) in queue_counters.SIZES:  # absent: computed when first used
            stored_c, found = QueueCounters.decode(counters_raw), shapes[qid]
            if (stored_c.in_flight, stored_c.by_priority) != (found.in_flight, found.by_priority):
                report(f"queue {q.name!r}: counters say {_shape(stored_c)}, found {_shape(found)}")
            _check_put_order(q, stored_c, put_orders, report)
    store_counts = [t.counters.count, t.counters.bytes]
    if store_counts != total:
        report(f"store counters say {store_counts[0]} messages / {store_counts[1]} bytes, found {total[0]} / {total[1]}")
    if t.counters.seq < max_seq:
        report(f"SequentialID {t.counters.seq} is behind the newest message ({max_seq})")

    _check_queue_meta(t, queues, report)
    _check_links(t, report)
    _check_outq(t, queues_by_key, report)
    _check_seen(t, report)
    if "ids" in t.dbs:  # a store opened read-only before its ``ids`` table was made has none
        for problem in ids.check(t):
            report(problem)


def _check_runs(runs: list[tuple[bytes, bytes]], identities: dict[int, tuple[bytes, int, int, bytes]],
                report: Callable[[str], None]) -> None:
    """Every message is in one msg_id run and one unique-id run that give its ids and its
    location, and every run holds at least one message (store/identity.py)."""
    covered: dict[bytes, dict[int, tuple[bytes, int, bytes]]] = {keys.MSGID: {}, keys.UNIQ: {}}
    for key, value in runs:
        name = _index_name(key)
        try:
            tag, origin, first, seq, location, count = identity.parse_run(key, value)
        except struct.error:
            report(f"{name} index: entry {key.hex()} is malformed")
            continue
        kind = identity.KIND[tag]
        least, most = (1, 1) if kind == tag else (2, identity.MAX_RUN)  # a message's own, or a run
        if not least <= count <= most:
            report(f"{name} index: entry {key.hex()} claims {count} messages ({least}..{most})")
            continue
        held = 0
        for k in range(count):
            if seq + k in covered[kind]:
                report(f"{name} index: message seq {seq + k} is in two runs")
            covered[kind][seq + k] = (origin, first + k, location)
            held += seq + k in identities
        if not held:
            report(f"{name} index: entry {key.hex()} points at no matching message")
    for seq, (origin, n, put_time, location) in identities.items():
        for tag, ordinal in ((keys.MSGID, n), (keys.UNIQ, put_time)):
            run = covered[tag].get(seq)
            if run is None:
                report(f"{_index_name(tag)} index: the entry of message seq {seq} is missing")
            elif run != (origin, ordinal, location):
                report(f"{_index_name(tag)} index: the run holding message seq {seq} gives other ids or a wrong location")


def _check_links(t: Write, report: Callable[[str], None]) -> None:
    for key, raw in t.lt.cursor(db=t.dbs["links"]):
        key = bytes(key)
        try:
            link = links.decode(bytes(raw))
            links.validate_name(link.name)  # decode takes any JSON value for a name
        except (BadData, InvalidArgument) as exc:
            report(f"links entry {key!r}: {exc}")
            continue
        if key != links.key(link.name):
            report(f"links entry {key!r}: holds link {link.name!r}, whose key is {links.key(link.name)!r}")


def _check_queue_meta(t: Write, queues: dict[int, QueueInfo], report: Callable[[str], None]) -> None:
    """The per-queue meta entries (counters ``q``, put and get times ``t``) name live queues."""
    cur = t.lt.cursor(db=t.dbs["meta"])
    for tag, sizes, what in ((b"q", (keys.QSTATS.size,), "counters"), (b"t", (keys.QTIMES.size,), "put and get times"),
                             (b"k", queue_counters.SIZES, "state and priority counters"),
                             (b"r", None, "dead-letter reasons")):
        if not cur.set_range(tag):
            continue
        for key, raw in cur:
            if key[:1] != tag:
                break
            if bytes(key) in keys.META_NAMES:  # "quota", "qidn", "txid", "throttled"
                continue
            if len(key) != 5 or (sizes is not None and len(raw) not in sizes) or (sizes is None and not _reasons_ok(raw)):
                report(f"meta entry {bytes(key)!r}: not the {what} of a queue")
            elif (qid := keys.U32.unpack(key[1:])[0]) not in queues:
                report(f"meta entry {bytes(key)!r}: {what} of queue number {qid}, which does not exist")


def _check_outq(t: Write, queues_by_key: dict[bytes, QueueInfo], report: Callable[[str], None]) -> None:
    for key, raw in t.lt.cursor(db=t.dbs["outq"]):
        key = bytes(key)
        try:
            outgoing.decode_state(bytes(raw))
        except BadData as exc:
            report(f"outq entry {key!r}: {exc}")
            continue
        q = queues_by_key.get(key)
        if q is None:
            report(f"outq entry {key!r}: its queue does not exist")
        elif q.outgoing is None:  # what makes a queue outgoing (store/queues.py)
            report(f"outq entry {key!r}: queue {q.name!r} is not an outgoing queue")


def _check_seen(t: Write, report: Callable[[str], None]) -> None:
    raw = t.lt.get(keys.META_INCARNATION, db=t.dbs["meta"])
    if raw is not None:  # the sender's side of the same promise: a malformed one is replaced at the next send
        try:
            outgoing.decode_incarnation(bytes(raw))
        except BadData as exc:
            report(f"meta entry {keys.META_INCARNATION!r}: {exc}")
    db = t.dbs["seen"]
    for key, raw in t.lt.cursor(db=db):
        key = bytes(key)
        try:
            arrival, arrived = outgoing.decode_seen(key, bytes(raw))
        except BadData as exc:
            report(f"seen entry {key.hex()}: {exc}")
            continue
        if key != arrival:  # a time-ordered entry: checked with its arrival's entry, one line each
            continue
        if arrived > t.now + _SEEN_FUTURE_US:
            report(f"seen entry {key.hex()}: its arrival time is {(arrived - t.now) // 1_000_000} s in the future")
        # prune_seen walks the time-ordered entries only: an arrival without one is never forgotten
        elif t.lt.get(outgoing.seen_time_key(arrival, arrived), db=db) is None:
            report(f"seen entry {key.hex()}: its time-ordered entry is missing, so it is never forgotten")


def _check_holds(t: Write, queues: dict[int, QueueInfo], report: Callable[[str], None]) -> None:
    """Each message a hold holds in place is an available message of the hold's queue, held
    once."""
    held_by: dict[int, int] = {}
    for key, value in t.lt.cursor(db=t.dbs["holders"]):
        try:
            hold = holders.decode(bytes(key), bytes(value))
        except (StoreCorrupt, struct.error) as exc:
            report(f"holder row {bytes(key).hex()}: {getattr(exc, 'message', exc)}")
            continue
        if hold.qid not in queues:
            if hold.places:
                report(f"hold {hold.token}: its queue number {hold.qid} does not exist")
            continue
        for p7, seq in hold.placed:
            if seq in held_by:
                report(f"message seq {seq} is held in place by two holds ({held_by[seq]} and {hold.token})")
            held_by[seq] = hold.token
            if t.lt.get(keys.POS_KEY.pack(keys.POS, hold.qid, p7, seq), db=t.dbs["pos"]) is None:
                report(f"hold {hold.token} holds message seq {seq} in place, but queue "
                       f"{queues[hold.qid].name!r} has no such position")


def _put_orders(identities: dict[int, tuple[bytes, int, int, bytes]]) -> dict[bytes, tuple[int, int | None]]:
    """By location (queue and priority): the latest put time of its messages, and the first
    message by seq that was put before one ahead of it (None: the location is in put order)."""
    found: dict[bytes, tuple[int, int | None]] = {}
    for seq in sorted(identities):
        put, location = identities[seq][2], identities[seq][3]
        latest, behind = found.get(location, (put, None))
        if put < latest and behind is None:
            behind = seq
        found[location] = (max(latest, put), behind)
    return found


def _check_put_order(q: QueueInfo, c: QueueCounters, put_orders: dict[bytes, tuple[int, int | None]],
                     report: Callable[[str], None]) -> None:
    """A priority the counters call in put order is (store/queue_counters.py): `stats` takes its
    first message for its oldest."""
    for priority in range(8):
        if not c.in_put_order(priority) or (found := put_orders.get(keys.location(q.qid, priority))) is None:
            continue
        latest, behind = found
        if behind is not None:
            report(f"queue {q.name!r}: counters say priority {priority} is in put order, but message seq {behind} "
                   "was put before a message ahead of it")
        elif c.latest_put[priority] < latest:
            report(f"queue {q.name!r}: counters say the latest put time at priority {priority} is "
                   f"{iso_time(c.latest_put[priority])}, found {iso_time(latest)}")


def _shape(c: QueueCounters) -> str:
    states = ", ".join(f"{n} {state}" for state, n in c.in_flight.items() if n) or "none in flight"
    return f"{states}; by priority {c.by_priority}"


def _reasons_ok(raw: bytes) -> bool:
    try:
        queue_counters.decode_reasons(bytes(raw))
    except ValueError:
        return False
    return True
