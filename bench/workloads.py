"""One function per (workload, contender).

Every function has the signature ``fn(workdir, n, body, batch) -> seconds``: it opens its own
database in ``workdir`` (a fresh, empty temporary directory), does its untimed set-up (prefill,
a short warm-up), then times exactly ``n`` messages with ``time.perf_counter`` and returns the
elapsed seconds.  After the timed part it checks, untimed, that the operation really happened
(counts in the database), so a silently broken contender cannot post a fast number.

Imports of the contenders happen inside the functions so that ``python -m bench --help`` works
without them, and a missing peer gives a clear error.
"""

from __future__ import annotations

import itertools
import os
import struct
from dataclasses import dataclass, field
from time import perf_counter
from typing import Callable

QUEUE = "bench"
MAP_SIZE = 1 << 30  # same map size for the store and raw py-lmdb
WARM_SINGLE = 20  # untimed single operations done before the timed part of each measurement

_pack = struct.Struct(">Q").pack  # 8-byte big-endian keys for raw py-lmdb


class BenchError(RuntimeError):
    """A contender did not do what was asked (wrong count, leftovers, ...)."""


def _expect(what: str, got, want) -> None:
    if got != want:
        raise BenchError(f"{what}: expected {want}, got {got}")


# --------------------------------------------------------------------------------------
# store (the engine under test)
# --------------------------------------------------------------------------------------

def _store_open(workdir: str):
    from store import Store

    st = Store.open(os.path.join(workdir, "store"), create=True, name="bench",
                    map_size=MAP_SIZE)
    st.create_queue(QUEUE)
    return st


def _store_prefill(st, count: int, body: bytes, batch: int) -> None:
    from store import NewMessage

    left = count
    while left:
        k = min(batch, left)
        st.put_many(QUEUE, [NewMessage(body) for _ in range(k)])
        left -= k


def _store_depth(st) -> int:
    return st.queue_info(QUEUE).depth


def store_put_single(workdir: str, n: int, body: bytes, batch: int) -> float:
    st = _store_open(workdir)
    try:
        put = st.put
        for _ in range(WARM_SINGLE):
            put(QUEUE, body)
        t0 = perf_counter()
        for _ in range(n):
            put(QUEUE, body)
        dt = perf_counter() - t0
        _expect("store depth after put", _store_depth(st), n + WARM_SINGLE)
    finally:
        st.close()
    return dt


def store_put_batched(workdir: str, n: int, body: bytes, batch: int) -> float:
    from store import NewMessage

    st = _store_open(workdir)
    try:
        put_many = st.put_many
        put_many(QUEUE, [NewMessage(body) for _ in range(batch)])  # warm-up
        t0 = perf_counter()
        for _ in range(n // batch):
            put_many(QUEUE, [NewMessage(body) for _ in range(batch)])
        dt = perf_counter() - t0
        _expect("store depth after put_many", _store_depth(st), n + batch)
    finally:
        st.close()
    return dt


def store_get_batched(workdir: str, n: int, body: bytes, batch: int) -> float:
    from store import errors

    st = _store_open(workdir)
    try:
        _store_prefill(st, n + batch, body, batch)
        # as `mqcli get --all` gets: each batch delivered with no write transaction open (held
        # by this process meanwhile), its removal committed with the next batch's hold
        got = 0

        def deliver(found) -> None:
            nonlocal got
            got += len(found)

        _expect("warm-up get_many", len(st.get_many(QUEUE, batch, wait=0, deliver=deliver)), batch)
        got = 0
        t0 = perf_counter()
        delivered = st.get_batches(QUEUE, deliver, batch=batch)  # until the queue is empty
        dt = perf_counter() - t0
        _expect("store messages read by get_batches", (got, delivered), (n, n))
        try:
            extra = st.get_many(QUEUE, batch, wait=0)
        except errors.Timeout:
            pass
        else:
            raise BenchError(f"store queue not empty after get_many: {len(extra)} more")
    finally:
        st.close()
    return dt


def store_get_confirm(workdir: str, n: int, body: bytes, batch: int) -> float:
    st = _store_open(workdir)
    try:
        _store_prefill(st, n + WARM_SINGLE, body, batch)
        with st.consumer(QUEUE) as c:  # as `mqcli consume`: each confirm rides on the next get
            for _ in range(WARM_SINGLE):
                c.confirm(c.next(wait=0))
            t0 = perf_counter()
            for _ in range(n):
                c.confirm(c.next(wait=0))
            c.flush()  # the last confirm, alone
            dt = perf_counter() - t0
        _expect("store depth after get+confirm", _store_depth(st), 0)
    finally:
        st.close()
    return dt


# --------------------------------------------------------------------------------------
# raw py-lmdb (the floor: what LMDB itself costs from Python)
# --------------------------------------------------------------------------------------

def _lmdb_open(workdir: str):
    import lmdb

    # lmdb.open defaults: sync=True, metasync=True -> fsync/fdatasync at every commit.
    return lmdb.open(os.path.join(workdir, "lmdb"), map_size=MAP_SIZE)


def _lmdb_prefill(env, count: int, body: bytes, batch: int, start: int = 0) -> int:
    key = start
    while key < start + count:
        with env.begin(write=True) as txn:
            put = txn.put
            for _ in range(min(batch, start + count - key)):
                put(_pack(key), body)
                key += 1
    return key


def lmdb_put_single(workdir: str, n: int, body: bytes, batch: int) -> float:
    env = _lmdb_open(workdir)
    try:
        begin = env.begin
        key = 0
        for _ in range(WARM_SINGLE):
            with begin(write=True) as txn:
                txn.put(_pack(key), body)
            key += 1
        t0 = perf_counter()
        for _ in range(n):
            with begin(write=True) as txn:
                txn.put(_pack(key), body)
            key += 1
        dt = perf_counter() - t0
        _expect("lmdb entries after put", env.stat()["entries"], n + WARM_SINGLE)
    finally:
        env.close()
    return dt


# What the store's hot path writes (the keys of store/keys.py, their sizes as a store writes
# them): the position entry holding the record, the msg_id and unique-id entries (M, U), and
# four meta records (the store's counters, the queue's count and bytes, its last put and get
# times, its counters of store/queue_counters.py). An in-flight record lives in `msg` under its
# seq with a confirm-id entry (K). The store opens LMDB with metasync=False and syncs after a
# durable commit (store/environment.py): the same here.
_PATTERN_RECORD = 375 - 256  # a record's header and lengths, before the body
_PATTERN_META = ((b"c", 40), (b"q\0\0\0\1", 16), (b"t\0\0\0\1", 16), (b"k\0\0\0\1", 160))


def _pattern_open(workdir: str):
    import lmdb

    env = lmdb.open(os.path.join(workdir, "lmdb-pattern"), map_size=MAP_SIZE, max_dbs=8, metasync=False)
    return env, [env.open_db(name) for name in (b"pos", b"msg", b"idx", b"meta")]


def _pattern_meta(txn, meta, i: int) -> None:
    for key, size in _PATTERN_META:
        txn.put(key, _pack(i) * (size // 8), db=meta)


def _pattern_pos(i: int) -> bytes:
    return b"P\0\0\0\1\4" + _pack(i)


def lmdb_store_pattern_put_single(workdir: str, n: int, body: bytes, batch: int) -> float:
    """Raw py-lmdb writing what one store put writes, one durable commit each with the
    store's sync settings: the position entry holding the record, its msg_id and unique-id
    entries and the four meta records. Context: the floor of the store's design for workload
    1, without any of its Python."""
    env, dbs = _pattern_open(workdir)
    return _pattern_commits(env, dbs[0], WARM_SINGLE, n, pattern_put(dbs, body), "pattern records after put",
                            n + WARM_SINGLE)


def pattern_put(dbs, body: bytes):
    """`write(txn, i)`: what the store's put of message i (from 0) writes (workload 1's pattern)."""
    pos, _msg, idx, meta = dbs
    origin = bytes(range(16))
    header = bytes(_PATTERN_RECORD)

    def put(txn, i: int) -> None:
        key = _pack(i + 1)
        txn.put(_pattern_pos(i + 1), header + body, db=pos)
        txn.put(b"M" + origin + key[4:] + key, b"\0\0\0\1\4", db=idx)
        txn.put(b"U" + origin + key + key, b"\0\0\0\1\4", db=idx)
        _pattern_meta(txn, meta, i)
    return put


def pattern_commit(env, write):
    """`commit(i)`: one durable commit filled by `write(txn, i)`, synced as the store syncs a
    durable commit (metasync off, then env.sync: store/environment.py)."""
    begin, sync = env.begin, env.sync

    def commit(i: int) -> None:
        with begin(write=True) as txn:
            write(txn, i)
        sync(True)
    return commit


def _pattern_commits(env, pos, warm: int, timed: int, write, what: str, records: int) -> float:
    """Seconds that `timed` durable commits take, each a write transaction filled by
    `write(txn, i)` and synced as the store syncs, after `warm` untimed ones; then the
    position entries are checked to be `records` (closes `env`)."""
    try:
        commit = pattern_commit(env, write)
        t0 = 0.0
        for i in range(warm + timed):
            if i == warm:
                t0 = perf_counter()
            commit(i)
        dt = perf_counter() - t0
        with env.begin() as txn:
            _expect(what, txn.stat(pos)["entries"], records)
    finally:
        env.close()
    return dt


_PATTERN_RUN = 256  # the store's msg_id and unique-id entries cover runs of up to 256 messages


def _pattern_run_entries(origin: bytes, first: int, count: int) -> list[tuple[bytes, bytes]]:
    """The msg_id and unique-id run entries (key, value) of messages first..first+count-1 (one
    pair a run)."""
    entries = []
    for start in range(first, first + count, _PATTERN_RUN):
        key = _pack(start)
        value = b"\0\0\0\1\4" + struct.pack(">H", min(_PATTERN_RUN, first + count - start))
        entries += [(b"N" + origin + key[4:] + key, value), (b"V" + origin + key + key, value)]
    return entries


def _pattern_runs(txn, idx, origin: bytes, first: int, count: int) -> None:
    for key, value in _pattern_run_entries(origin, first, count):
        txn.put(key, value, db=idx)


def lmdb_store_pattern_put_batched(workdir: str, n: int, body: bytes, batch: int) -> float:
    """Raw py-lmdb writing what one store put_many of `batch` messages writes, one durable
    commit a batch with the store's sync settings: a position entry holding each record, a
    msg_id and a unique-id run entry for each run of 256, the four meta records. Context: the
    floor of the store's design for workload 2, without any of its Python."""
    env, (pos, _msg, idx, meta) = _pattern_open(workdir)
    origin = bytes(range(16))
    record = bytes(_PATTERN_RECORD) + body

    def put_batch(txn, b: int) -> None:
        first = b * batch + 1
        put = txn.put
        for i in range(first, first + batch):
            put(_pattern_pos(i), record, db=pos)
        _pattern_runs(txn, idx, origin, first, batch)
        _pattern_meta(txn, meta, b)

    # the first batch is the warm-up
    return _pattern_commits(env, pos, 1, n // batch, put_batch, "pattern records after batched put", n + batch)


def lmdb_store_pattern_get_batched(workdir: str, n: int, body: bytes, batch: int) -> float:
    """Raw py-lmdb writing what the store's get_batches writes, one durable commit a batch with
    the store's sync settings: the previous batch's positions, run entries and hold row
    deleted, the next batch's positions and records read and its hold row put (a row naming
    each held place), the four meta records. Context: the floor of the store's design for
    workload 3, without any of its Python (the records are not decoded)."""
    env, (pos, _msg, idx, meta) = _pattern_open(workdir)
    holds = env.open_db(b"holders")
    try:
        origin = bytes(range(16))
        record = bytes(_PATTERN_RECORD) + body
        total = n + batch
        for first in range(1, total + 1, batch):
            with env.begin(write=True) as txn:
                for i in range(first, min(first + batch, total + 1)):
                    txn.put(_pattern_pos(i), record, db=pos)
                _pattern_runs(txn, idx, origin, first, min(batch, total + 1 - first))
        env.sync(True)
        begin, sync = env.begin, env.sync
        row = bytes(40)
        held: list[tuple[bytes, bytes]] = []
        got, token, t0 = 0, 0, 0.0
        while True:
            with begin(write=True) as txn:
                if held:  # the end of the last batch's hold: its messages removed
                    cur = txn.cursor(db=pos)
                    cur.set_key(held[0][0])
                    for _ in held:
                        cur.delete()
                    first = int.from_bytes(held[0][0][-8:], "big")
                    for key, _ in _pattern_run_entries(origin, first, len(held)):
                        txn.delete(key, db=idx)
                    txn.delete(_pack(token), db=holds)
                    token += 1
                cur = txn.cursor(db=pos)
                held = list(itertools.islice(cur.iternext(), batch)) if cur.first() else []
                if held:  # the next batch held in place
                    txn.put(_pack(token), row + b"".join([k[5:] for k, _ in held]), db=holds)
                _pattern_meta(txn, meta, token)
            sync(True)
            if not held:
                break
            got += len(held)
            if got == batch:  # the first batch was the warm-up
                t0 = perf_counter()
        dt = perf_counter() - t0
        _expect("pattern messages read", got, total)
        with env.begin() as txn:
            _expect("pattern positions left", txn.stat(pos)["entries"], 0)
    finally:
        env.close()
    return dt


def lmdb_store_pattern_get_confirm(workdir: str, n: int, body: bytes, batch: int) -> float:
    """Raw py-lmdb writing what the store's ack and next writes, one durable commit a message
    with the store's sync settings (as the consumer does): the confirmed message's record and
    confirm-id entry deleted, the next message's position deleted and its record put in
    flight with its confirm-id entry, the four meta records. The queue is prefilled untimed as
    the store's is (positions, one msg_id and one unique-id entry per run of 256). Context: the
    floor of the store's design for workload 4, without any of its Python."""
    env, dbs = _pattern_open(workdir)
    try:
        total = n + WARM_SINGLE
        pattern_prefill(env, dbs, total, body, batch)
        commit = pattern_commit(env, pattern_ack_and_next(dbs, total))
        t0 = 0.0
        for i in range(total + 1):  # the last pass confirms the last message alone (flush)
            if i == WARM_SINGLE:
                t0 = perf_counter()
            commit(i)
        dt = perf_counter() - t0
        with env.begin() as txn:
            _expect("pattern positions left", txn.stat(dbs[0])["entries"], 0)
            _expect("pattern records in flight left", txn.stat(dbs[1])["entries"], 0)
    finally:
        env.close()
    return dt


def pattern_prefill(env, dbs, total: int, body: bytes, batch: int) -> None:
    """Put `total` messages' positions as the store's put_many does (with one msg_id and one
    unique-id entry per run of 256 of each batch), `batch` a commit, then sync."""
    pos, _msg, idx, _meta = dbs
    origin = bytes(range(16))
    record = bytes(_PATTERN_RECORD) + body
    for start in range(0, total, batch):
        end = min(start + batch, total)
        with env.begin(write=True) as txn:
            for i in range(start, end):
                txn.put(_pattern_pos(i + 1), record, db=pos)
            _pattern_runs(txn, idx, origin, start + 1, end - start)
    env.sync(True)


def pattern_ack_and_next(dbs, total: int | None = None):
    """`write(txn, i)`: what the store's ack and next writes (workload 4's pattern): the last
    message got is confirmed (its record and confirm-id entry deleted) and, while i < `total`
    (None: always), the queue's first message is got two-phase (its position deleted, its
    record put in flight under a confirm-id entry)."""
    pos, msg, idx, meta = dbs
    held: list[tuple[bytes, bytes]] = []  # (seq key, confirm-id key) of the message got last

    def ack_and_next(txn, i: int) -> None:
        if held:  # the ack
            txn.delete(held[0][0], db=msg)
            txn.delete(held[0][1], db=idx)
            held.clear()
        if total is None or i < total:  # and the next
            cur = txn.cursor(db=pos)
            cur.first()
            record = cur.value()
            seq = cur.key()[-8:]
            cur.delete()
            held.append((seq, b"K\0\0\0\1" + _pack(i + 1) + b"\4" + seq))
            txn.put(seq, record, db=msg)
            txn.put(held[0][1], b"\0\0\0\1\4", db=idx)
        _pattern_meta(txn, meta, i)
    return ack_and_next


def _fsync_floor(workdir: str, n: int, body: bytes) -> float:
    """`n` times: one 4 KiB `pwrite` (the body and a counter) + `fdatasync`, overwriting a
    preallocated 1 MiB file in turn, so no write allocates blocks or grows the file. One
    durable commit cannot cost less on this disk, whoever makes it."""
    page = 4096
    slots = 256
    path = os.path.join(workdir, "fsync-floor")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.pwrite(fd, bytes(page * slots), 0)
        os.fsync(fd)
        pad = bytes(page - len(body) - 8)
        t0 = 0.0
        for i in range(WARM_SINGLE + n):
            if i == WARM_SINGLE:
                t0 = perf_counter()
            os.pwrite(fd, _pack(i) + body + pad, (i % slots) * page)
            os.fdatasync(fd)
        dt = perf_counter() - t0
        last = WARM_SINGLE + n - 1
        _expect("fsync floor: last page", os.pread(fd, 8, (last % slots) * page), _pack(last))
    finally:
        os.close(fd)
    return dt


def fsync_floor_single(workdir: str, n: int, body: bytes, batch: int) -> float:
    """Context for workload 1: one durable commit per put."""
    return _fsync_floor(workdir, n, body)


def fsync_floor_pair(workdir: str, n: int, body: bytes, batch: int) -> float:
    """Context for workload 4: one durable commit per get+confirm pair (the confirm must be
    durable, docs/design.md#store; the get before it could in principle need no sync at all)."""
    return _fsync_floor(workdir, n, body)


def lmdb_put_batched(workdir: str, n: int, body: bytes, batch: int) -> float:
    env = _lmdb_open(workdir)
    try:
        begin = env.begin
        key = _lmdb_prefill(env, batch, body, batch)  # warm-up: one batch
        t0 = perf_counter()
        for _ in range(n // batch):
            with begin(write=True) as txn:
                put = txn.put
                for _ in range(batch):
                    put(_pack(key), body)
                    key += 1
        dt = perf_counter() - t0
        _expect("lmdb entries after batched put", env.stat()["entries"], n + batch)
    finally:
        env.close()
    return dt


def lmdb_get_batched(workdir: str, n: int, body: bytes, batch: int) -> float:
    env = _lmdb_open(workdir)
    try:
        _lmdb_prefill(env, n + batch, body, batch)
        dt = lmdb_get_batches(env, n, batch)
        _expect("lmdb entries left", env.stat()["entries"], 0)
    finally:
        env.close()
    return dt


def lmdb_get_batches(env, n: int, batch: int) -> float:
    """Workload 3's raw py-lmdb side on a filled database: one warm-up batch, then `n`
    entries got and deleted, `batch` a write transaction; the seconds the `n` took
    (bench/instructions.py counts it too)."""
    begin = env.begin

    def one_batch(size: int) -> int:
        got = 0
        with begin(write=True) as txn:
            cur = txn.cursor()
            for _ in range(size):
                if not cur.first():
                    break
                cur.value()
                cur.delete()
                got += 1
        return got

    _expect("lmdb warm-up batch", one_batch(batch), batch)
    got = 0
    t0 = perf_counter()
    while got < n:
        took = one_batch(min(batch, n - got))
        if not took:
            break  # fewer than n were there: the check below says so
        got += took
    dt = perf_counter() - t0
    _expect("lmdb messages read", got, n)
    return dt


# --------------------------------------------------------------------------------------
# persist-queue SQLiteAckQueue
# --------------------------------------------------------------------------------------

PERSIST_QUEUE_KW = dict(multithreading=False, auto_commit=True)


def _pq_open(workdir: str):
    from persistqueue import SQLiteAckQueue

    # auto_commit=True (the default, and the only mode SQLiteAckQueue supports): every put,
    # get and ack is its own committed SQLite transaction.  persist-queue sets
    # journal_mode=WAL and leaves synchronous at SQLite's default (FULL here), so each commit
    # fsyncs the WAL.  Recorded from the live connection in the JSON ("durability").
    return SQLiteAckQueue(os.path.join(workdir, "pq"), **PERSIST_QUEUE_KW)


def pq_put_single(workdir: str, n: int, body: bytes, batch: int) -> float:
    q = _pq_open(workdir)
    try:
        put = q.put
        for _ in range(WARM_SINGLE):
            put(body)
        t0 = perf_counter()
        for _ in range(n):
            put(body)
        dt = perf_counter() - t0
        _expect("persist-queue size after put", q.qsize(), n + WARM_SINGLE)
    finally:
        q.close()
    return dt


def pq_get_ack(workdir: str, n: int, body: bytes, batch: int) -> float:
    q = _pq_open(workdir)
    try:
        for _ in range(n + WARM_SINGLE):
            q.put(body)
        get, ack = q.get, q.ack
        for _ in range(WARM_SINGLE):
            ack(get(block=False))
        t0 = perf_counter()
        for _ in range(n):
            item = get(block=False)
            ack(item)
        dt = perf_counter() - t0
        _expect("persist-queue acked", q.acked_count(), n + WARM_SINGLE)
        _expect("persist-queue left", q.qsize(), 0)
    finally:
        q.close()
    return dt


# --------------------------------------------------------------------------------------
# litequeue LiteQueue
# --------------------------------------------------------------------------------------

def _lq_open(workdir: str, synchronous: str | None = None):
    from litequeue import LiteQueue

    # litequeue's own defaults: autocommit connection, journal_mode=WAL, synchronous=NORMAL.
    # In WAL mode NORMAL does not fsync at commit (only at checkpoints): a committed message
    # survives a process crash but not necessarily a power loss / OS crash.
    lq = LiteQueue(os.path.join(workdir, "lq.sqlite3"))
    if synchronous is not None:
        lq.conn.execute(f"PRAGMA synchronous = {synchronous}")
    return lq


def _lq_put_single(workdir, n, body, batch, synchronous=None) -> float:
    lq = _lq_open(workdir, synchronous)
    try:
        put = lq.put
        for _ in range(WARM_SINGLE):
            put(body)
        t0 = perf_counter()
        for _ in range(n):
            put(body)
        dt = perf_counter() - t0
        _expect("litequeue size after put", lq.qsize(), n + WARM_SINGLE)
    finally:
        lq.close()
    return dt


def _lq_get_done(workdir, n, body, batch, synchronous=None) -> float:
    lq = _lq_open(workdir, synchronous)
    try:
        with lq.transaction():  # untimed prefill in one transaction
            for _ in range(n + WARM_SINGLE):
                lq.put(body)
        pop, done = lq.pop, lq.done
        for _ in range(WARM_SINGLE):
            done(pop().message_id)
        t0 = perf_counter()
        for _ in range(n):
            m = pop()
            done(m.message_id)
        dt = perf_counter() - t0
        _expect("litequeue left", lq.qsize(), 0)
    finally:
        lq.close()
    return dt


def lq_put_single(workdir, n, body, batch) -> float:
    return _lq_put_single(workdir, n, body, batch)


def lq_full_put_single(workdir, n, body, batch) -> float:
    return _lq_put_single(workdir, n, body, batch, synchronous="FULL")


def lq_get_done(workdir, n, body, batch) -> float:
    return _lq_get_done(workdir, n, body, batch)


def lq_full_get_done(workdir, n, body, batch) -> float:
    return _lq_get_done(workdir, n, body, batch, synchronous="FULL")


# --------------------------------------------------------------------------------------
# the workload table
# --------------------------------------------------------------------------------------

Fn = Callable[[str, int, bytes, int], float]


# --------------------------------------------------------------------------------------
# transaction commit: the "commit of 10,000 operations at >= 50,000 operations/s"
# --------------------------------------------------------------------------------------

def store_tx_commit(workdir: str, n: int, body: bytes, batch: int) -> float:
    """Untimed: a transaction of n puts to a transactional queue; timed: tx_commit alone."""
    from store import NewMessage, Store

    st = Store.open(os.path.join(workdir, "store"), create=True, map_size=MAP_SIZE)
    try:
        st.create_queue("q", transactional=True)
        t = st.tx_begin()
        left = n
        while left:
            k = min(batch, left)
            st.put_many("q", [NewMessage(body) for _ in range(k)], tx=t)
            left -= k
        t0 = perf_counter()
        done = st.tx_commit(t)
        dt = perf_counter() - t0
        _expect("operations committed", done, n)
        _expect("available after commit", st.queue_info("q").available, n)
    finally:
        st.close()
    return dt


def lmdb_tx_rewrite(workdir: str, n: int, body: bytes, batch: int) -> float:
    """Context: raw py-lmdb rewriting n existing records in one write transaction."""
    env = _lmdb_open(workdir)
    try:
        _lmdb_prefill(env, n, body, max(batch, 1))
        t0 = perf_counter()
        with env.begin(write=True) as txn:
            for key in range(n):
                txn.put(_pack(key), body[::-1])
        dt = perf_counter() - t0
    finally:
        env.close()
    return dt


# --------------------------------------------------------------------------------------
# trace labels: the "decoding 1,000,000 labels at >= 300,000 labels/s"
# --------------------------------------------------------------------------------------

def _labels(n: int, per_second: int) -> list[str]:
    """n report labels of distinct messages and hops, the clock moving one second every
    `per_second` labels (reports come in bursts: every hop of every traced message)."""
    from datetime import datetime, timedelta, timezone

    from store.trace import encode_label

    start = datetime(2026, 11, 22, 3, 15, 0, tzinfo=timezone.utc)
    computer = "6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
    return [encode_label("1A2B", i, i % 4, computer, start + timedelta(seconds=i // per_second))
            for i in range(n)]


def _decode_all(labels: list[str], decode) -> float:
    t0 = perf_counter()
    for text in labels:
        decode(text)
    dt = perf_counter() - t0
    _expect("last label's message id", decode(labels[-1]).message_id, len(labels) - 1)
    return dt


def store_decode_labels(workdir: str, n: int, body: bytes, batch: int) -> float:
    """Timed: store.trace.decode_label on n labels, 20 to a second."""
    from store.trace import decode_label
    return _decode_all(_labels(n, 20), decode_label)


def store_decode_labels_distinct_seconds(workdir: str, n: int, body: bytes, batch: int) -> float:
    """Context: the same, every label a different second (its time-date cache never hits)."""
    from store.trace import decode_label
    return _decode_all(_labels(n, 1), decode_label)


def parser_decode_labels(workdir: str, n: int, body: bytes, batch: int) -> float:
    """Context: the column-precise parser alone (what decode_label falls back to)."""
    from store.trace import _Parser
    return _decode_all(_labels(n, 20), lambda text: _Parser(text, "label").label())


@dataclass(frozen=True)
class Target:
    peer: str
    min_ratio: float = 0.0
    min_rate: float | None = None  # an absolute floor for the store, in msgs (operations)/s


@dataclass(frozen=True)
class Workload:
    key: str
    title: str
    size: str  # "single": one commit per message; "batched": `batch` a commit; "tx": ops of one
    # tx; "labels": trace labels decoded
    store_op: str
    contenders: dict[str, tuple[str, Fn]] = field(default_factory=dict)  # name -> (op, fn)
    target: Target | None = None
    floor: str | None = None  # a contender no implementation can beat: bounds the target's ratio
    # when `floor` bounds any store of LMDB's kind: the contender that writes exactly what this
    # store's design writes (its tables, its pages), which bounds this design's ratio
    design_floor: str | None = None


STORE = "store"
LMDB = "py-lmdb"
LMDB_PATTERN = "py-lmdb/store-pattern"
PQ = "persist-queue"
LQ = "litequeue"
LQ_FULL = "litequeue/FULL"
FSYNC_FLOOR = "fsync floor"
LMDB_ONE_COMMIT = "py-lmdb/one commit"  # workload 4's floor for an LMDB store: the confirm's commit alone

WORKLOADS: list[Workload] = [
    Workload(
        key="put_single",
        title="1. durable put, one per commit",
        size="single",
        store_op="st.put(q, body)",
        contenders={
            STORE: ("st.put(q, body)", store_put_single),
            LMDB: ("one txn.put per write txn", lmdb_put_single),
            LMDB_PATTERN: ("position + msg_id and unique-id entries + 4 meta records, durable commit",
                           lmdb_store_pattern_put_single),
            PQ: ("SQLiteAckQueue.put(body)", pq_put_single),
            LQ: ("LiteQueue.put(body)", lq_put_single),
            LQ_FULL: ("LiteQueue.put(body), synchronous=FULL", lq_full_put_single),
            FSYNC_FLOOR: ("one 4 KiB pwrite + fdatasync per message", fsync_floor_single),
        },
        target=Target(LMDB, 0.8),  # restated (issue 18): the store-pattern floor is 0.82-0.91x
        floor=LMDB_PATTERN,
    ),
    Workload(
        key="put_batched",
        title="2. batched put, {batch:,} per commit",
        size="batched",
        store_op="st.put_many(q, [NewMessage(body) ...])",
        contenders={
            STORE: ("st.put_many(q, [NewMessage(body)]*batch)", store_put_batched),
            LMDB: ("batch txn.put per write txn, 8-byte BE keys", lmdb_put_batched),
            LMDB_PATTERN: ("positions + msg_id and unique-id runs + 4 meta records a batch, durable commit",
                           lmdb_store_pattern_put_batched),
        },
        target=Target(LMDB, 0.3),
        design_floor=LMDB_PATTERN,
    ),
    Workload(
        key="get_batched",
        title="3. batched get, {batch:,} per commit",
        size="batched",
        store_op="st.get_batches(q, deliver, batch=batch)",
        contenders={
            STORE: ("st.get_batches(q, deliver, batch=batch) until empty, as `mqcli get --all`", store_get_batched),
            LMDB: ("per write txn: batch x (cursor.first, value, delete)", lmdb_get_batched),
            LMDB_PATTERN: ("a batch's removal + the next one's hold row + 4 meta records, durable commit",
                           lmdb_store_pattern_get_batched),
        },
        target=Target(LMDB, 0.25),
        design_floor=LMDB_PATTERN,
    ),
    Workload(
        key="get_confirm",
        title="4. two-phase get + confirm, one at a time",
        size="single",
        store_op="m = consumer.next(0); consumer.confirm(m)",
        contenders={
            STORE: ("c = st.consumer(q); m = c.next(wait=0); c.confirm(m): the confirm rides on the next "
                    "get (ack and next), one durable commit a message", store_get_confirm),
            LMDB_PATTERN: ("ack and next: one durable commit deleting one record, moving the next",
                           lmdb_store_pattern_get_confirm),
            PQ: ("SQLiteAckQueue: item = get(block=False); ack(item)", pq_get_ack),
            LQ: ("LiteQueue: m = pop(); done(m.message_id)", lq_get_done),
            LQ_FULL: ("LiteQueue pop+done, synchronous=FULL", lq_full_get_done),
            FSYNC_FLOOR: ("one 4 KiB pwrite + fdatasync per pair", fsync_floor_pair),
            LMDB_ONE_COMMIT: ("one txn.put per write txn: one durable LMDB commit per pair", lmdb_put_single),
        },
        target=Target(PQ, 1.2),  # restated (issue 18): one durable LMDB commit a message allows ~1.36x
        floor=LMDB_ONE_COMMIT,
        design_floor=LMDB_PATTERN,  # its one commit writes ~7 pages (pos leaf and branch, msg, idx, meta, main, free)
    ),
    Workload(
        key="tx_commit",
        title="5. commit of one transaction",
        size="tx",
        store_op="st.tx_commit(t) of n puts made inside t",
        contenders={
            STORE: ("st.tx_commit(t), n operations", store_tx_commit),
            LMDB: ("rewrite n records in one write txn", lmdb_tx_rewrite),
        },
        target=Target(STORE, min_rate=50_000),
    ),
    Workload(
        key="label_decode",
        title="6. trace report labels decoded",
        size="labels",
        store_op="store.trace.decode_label(label)",
        contenders={
            STORE: ("decode_label, 20 labels a second", store_decode_labels),
            "store/distinct-seconds": ("decode_label, every label a new second", store_decode_labels_distinct_seconds),
            "store/parser-only": ("the column-precise parser alone", parser_decode_labels),
        },
        target=Target(STORE, min_rate=300_000),
    ),
]


# --------------------------------------------------------------------------------------
# what "durable" means for each contender, read from live handles
# --------------------------------------------------------------------------------------

_SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def _sqlite_settings(conn) -> dict:
    sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    return {"journal_mode": journal, "synchronous": _SYNC_NAMES.get(sync, sync)}


def _probe_dir(workdir: str, name: str) -> str:
    path = os.path.join(workdir, name)
    os.makedirs(path, exist_ok=True)
    return path


def describe_durability(workdir: str) -> dict:
    """Open each contender once in ``workdir`` and record its durability settings."""
    out: dict = {}
    st = _store_open(_probe_dir(workdir, "store-probe"))
    try:
        env = getattr(st, "_env", None)  # private; only to record the LMDB flags in use
        flags = env.flags() if env is not None else {}
    finally:
        st.close()
    out[STORE] = {
        "settings": {"open": "Store.open(path, create=True, map_size=1 GiB)",
                     "put": "default delivery='recoverable' (express=False)",
                     **{k: flags.get(k) for k in ("sync", "metasync", "writemap", "map_async")
                        if k in flags}},
        "meaning": "every operation is one LMDB write transaction; a commit that makes "
                   "recoverable changes is followed by env.sync(True) (store/environment.py), "
                   "so a put is on disk when it returns. A get with confirm_id is a 'light' "
                   "commit (no env.sync) and the confirm a durable one",
    }
    env = _lmdb_open(_probe_dir(workdir, "lmdb-probe"))
    try:
        flags = env.flags()
        out[LMDB] = {
            "settings": {k: flags.get(k) for k in ("sync", "metasync", "writemap", "map_async")},
            "meaning": "lmdb.open defaults: sync=True, metasync=True -> data and meta page "
                       "flushed (fdatasync) at every commit",
        }
    finally:
        env.close()
    q = _pq_open(_probe_dir(workdir, "pq-probe"))
    try:
        out[PQ] = {
            "settings": dict(PERSIST_QUEUE_KW, **_sqlite_settings(q._putter)),
            "meaning": "SQLiteAckQueue with auto_commit=True (its default and only supported "
                       "mode): each put, get and ack is a separate committed transaction; "
                       "WAL journal with synchronous=FULL fsyncs the WAL at every commit. "
                       "get marks the row 'unack' (one commit), ack marks it 'acked' (a second "
                       "commit); acked rows stay in the table until clear_acked_data()",
        }
    finally:
        q.close()
    lq = _lq_open(_probe_dir(workdir, "lq-probe"))
    try:
        out[LQ] = {
            "settings": _sqlite_settings(lq.conn),
            "meaning": "litequeue defaults (autocommit, WAL, synchronous=NORMAL): commits are "
                       "NOT fsynced, the WAL is synced only at checkpoints. Survives a process "
                       "crash, may lose the last commits on power loss/OS crash. Reported for "
                       "context only; not an fsync-per-commit peer",
        }
    finally:
        lq.close()
    lq = _lq_open(_probe_dir(workdir, "lq-full-probe"), synchronous="FULL")
    try:
        out[LQ_FULL] = {
            "settings": _sqlite_settings(lq.conn),
            "meaning": "litequeue with PRAGMA synchronous=FULL set after opening: WAL fsynced "
                       "at every commit (the durable configuration). pop and done are one "
                       "commit each; done rows stay in the table until prune()",
        }
    finally:
        lq.close()
    return out
