"""Reading stores for the pipeline: plan key ranges, then read each range read-only as Arrow.

A store's messages live in two LMDB tables (keys.py): `pos`, the position list of available
messages (`P qid 7-priority seq` → record), and `msg`, in-flight messages (`seq` → record).
`plan` splits a store into `ScanRange`s: a queue's positions cut into key ranges of about
`rows_per_range` entries (neighbouring small queues share one range; a range never spans a
queue that is not read), and the `msg` table cut the same way, read for the selected queues.
`read_range` reads one of them. A `ScanRange` is plain data (strings, ints, bytes): it is what
Spark pickles and ships to a worker, which opens the environment itself.

Safe while other processes write: LMDB readers are MVCC snapshots and take no write lock. The
environment is opened read-only with the store's own settings (environment.open_environment:
the map size from the store's marker, never resized; the same table count), and each batch is
read in a read transaction of its own, closed before the batch is handed on, so a long scan
holds no snapshot that would keep writers from reusing pages (unlike `Store.view()`, which
`export` reads). Each batch is therefore consistent in itself; a message that changes state
while a live store is being read (leaving `pos` for `msg`, or back) can show up in two ranges
or in none, as with any scan split over transactions: an analysis that must count each message
once reads a snapshot (`mqcli snapshot`, `--snapshots`). A message a get holds in place (store/holders.py) stays in `pos`
and is read as `get-unconfirmed`, as the store shows it. Nothing is written: lapsed leases and expired messages are read
as they are (`analyze health` counts them; `mqcli sweep` acts on them).
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lmdb

from .. import holders, keys
from ..errors import QueueNotAvailable
from ..keys import queue_key
from ..queues import decode_queue
from ..records import GET_UNCONFIRMED, held_records
from .columns import MESSAGE_COLUMNS, QUEUE_COLUMNS, StoreIdentity, queue_batch, record_batch
from .locate import identity, open_planned, open_readonly

if TYPE_CHECKING:
    import pyarrow as pa

POS_TABLE, MSG_TABLE = "pos", "msg"
DEFAULT_ROWS_PER_RANGE = 250_000
DEFAULT_BATCH_ROWS = 8192


@dataclass(frozen=True)
class ScanRange:
    """One unit of reading: a key range [start, end) of one table of one store.

    `queues` maps the qids read to their names: a `pos` range is inside one queue, a `msg`
    range keeps only records of these queues. `end` None means to the end of the table.
    """

    store: StoreIdentity
    table: str
    start: bytes
    end: bytes | None
    queues: dict[int, str] = field(default_factory=dict)


def _queues(lt: lmdb.Transaction, dbs: dict[str, Any]) -> list[Any]:
    return [decode_queue(bytes(raw)) for _, raw in lt.cursor(db=dbs["queues"])]


def _split(lt: lmdb.Transaction, db: Any, prefix: bytes, rows: int) -> list[bytes]:
    """Keys under `prefix` at every `rows`-th entry after the first: the starts of the second
    and later ranges. A walk of keys only, paid once when a read is planned, before any task
    starts: the keys between two starts are skipped inside the cursor's iterator (islice), not
    looked at one by one (two million keys: 0.45 s, against 1.65 s)."""
    cur = lt.cursor(db=db)
    starts: list[bytes] = []
    if not cur.set_range(prefix):
        return starts
    keys_after = cur.iternext(values=False)
    if not bytes(next(keys_after)).startswith(prefix):  # the queue has no entry
        return starts
    while (key := next(islice(keys_after, rows - 1, None), None)) is not None and bytes(key).startswith(prefix):
        starts.append(bytes(key))
    return starts


def _queue_starts(lt: lmdb.Transaction, db: Any, qid: int, count: int, rows: int) -> list[bytes]:
    """The starts of the second and later ranges of a queue of about `count` positions, about
    `rows` each. Positions are keyed by priority band, then seq: when all of a queue's are in
    one band, the starts are cut evenly from the seqs between its first and last, found without
    a walk (the ranges are as even as the seqs are dense, as in a queue filled at a steady
    rate); else they are every `rows`-th key (_split)."""
    prefix = keys.queue_prefix(qid)
    cur = lt.cursor(db=db)
    if not cur.set_range(prefix) or not bytes(cur.key()).startswith(prefix):
        return []
    first = bytes(cur.key())
    if not cur.set_range(keys.queue_prefix(qid + 1)) or not cur.prev():
        cur.last()
    last = bytes(cur.key())
    if len(first) != keys.POS_KEY.size or len(last) != keys.POS_KEY.size or first[5] != last[5]:
        return _split(lt, db, prefix, rows)
    band, low, high = first[5], keys.seq_of(first), keys.seq_of(last)
    pieces = min(-(-count // rows), high - low + 1)
    return [keys.POS_KEY.pack(keys.POS, qid, band, low + (high - low + 1) * i // pieces) for i in range(1, pieces)]


def plan(paths: Sequence[str | Path], queues: Sequence[str] | None = None,
         rows_per_range: int = DEFAULT_ROWS_PER_RANGE, *, allow_foreign: bool = False) -> list[ScanRange]:
    """The ranges that together hold every message (any state) of the stores' queues (all, or
    those named; a name that no store has is an error). Each store must be the running user's
    (or, for root with `allow_foreign`, another's: locate.open_readonly)."""
    ranges: list[ScanRange] = []
    wanted = None if queues is None else {queue_key(q): q for q in queues}
    seen: set[bytes] = set()
    done: set[str] = set()
    for path in paths:
        text = str(Path(path).absolute())
        if os.path.realpath(text) in done:  # the same store named twice is read once
            continue
        done.add(os.path.realpath(text))
        with open_readonly(path, allow_foreign=allow_foreign) as (env, dbs), env.begin() as lt:
            where = identity(lt, dbs, text)
            chosen: dict[int, str] = {}
            group: dict[int, str] = {}  # neighbouring small queues, read as one range
            group_rows = 0

            def close_group(where: StoreIdentity = where) -> None:
                nonlocal group, group_rows
                if group:
                    first, last = min(group), max(group)
                    ranges.append(ScanRange(where, POS_TABLE, keys.queue_prefix(first),
                                            keys.queue_prefix(last + 1), group))
                group, group_rows = {}, 0

            for q in sorted(_queues(lt, dbs), key=lambda q: q.qid):
                key = queue_key(q.name)
                if wanted is not None and key not in wanted:
                    close_group()  # a range never spans a queue that is not read
                    continue
                chosen[q.qid] = q.name
                seen.add(key)
                counters = lt.get(keys.qstats_key(q.qid), db=dbs["meta"])
                count = keys.QSTATS.unpack(counters)[0] if counters else 0
                if count <= rows_per_range:
                    if group_rows + count > rows_per_range:
                        close_group()
                    group[q.qid] = q.name
                    group_rows += count
                    continue
                close_group()
                prefix = keys.queue_prefix(q.qid)
                bounds = [prefix, *_queue_starts(lt, dbs["pos"], q.qid, count, rows_per_range),
                          keys.queue_prefix(q.qid + 1)]
                for lo, hi in zip(bounds, bounds[1:]):
                    ranges.append(ScanRange(where, POS_TABLE, lo, hi, {q.qid: q.name}))
            close_group()
            if chosen:
                held = lt.stat(dbs["msg"])["entries"]
                starts = _split(lt, dbs["msg"], b"", rows_per_range) if held > rows_per_range else []
                msg_bounds: list[bytes | None] = [b"", *starts, None]
                for first, after in zip(msg_bounds, msg_bounds[1:]):
                    ranges.append(ScanRange(where, MSG_TABLE, first or b"", after, dict(chosen)))
    if wanted is not None:
        missing = [name for key, name in wanted.items() if key not in seen]
        if missing:
            raise QueueNotAvailable(f"queue {missing[0]!r} does not exist in "
                                    + ("the store" if len(paths) == 1 else "any of the stores"))
    return ranges


def read_range(r: ScanRange, columns: Sequence[tuple[str, str]] = MESSAGE_COLUMNS,
               batch_rows: int = DEFAULT_BATCH_ROWS, report_only: bool = False
               ) -> Iterator[pa.RecordBatch]:
    """The messages of one range as Arrow record batches of up to `batch_rows` rows; each
    batch read in its own read transaction (see the module docstring). The store opened must
    be the one planned (locate.open_planned: its GUID is checked, a snapshot copied here)."""
    with open_planned(r.store) as (env, dbs):
        db = dbs[r.table]
        start = r.start  # where the next batch starts: the first key not yet read
        while True:
            with env.begin() as lt:
                # messages a get holds in place are in `pos` as available records: shown in
                # flight under the hold, as the store itself shows them (Write.load)
                placed = _placed(lt, dbs) if r.table == POS_TABLE else {}
                cur = lt.cursor(db=db)
                if not cur.set_range(start):
                    return  # nothing at or past the start
                first = cur.key()
                # the records from there (iternext yields the current entry first), one past
                # the batch to tell whether more follow; the cursor then stands on that one
                raws = list(islice(cur.iternext(keys=False), batch_rows + 1))
                last = cur.key()  # b"" where the table ran out
                # keys sort as bytes do, as LMDB sorts them: the range ends in this batch if
                # its last key is at or past the end, or the table ran out past the end
                end = r.end
                if end is not None and (last < end if last else not cur.set_range(end)):
                    end = None  # not in this batch
                batch_keys: list[bytes] = []
                if end is not None or placed:
                    # the keys, read only where needed: to cut at the range's end, to find holds
                    cur.set_range(first)
                    batch_keys = list(islice(cur.iternext(values=False), len(raws)))
                    if end is not None:
                        del raws[bisect_left(batch_keys, end):]
            more = len(raws) > batch_rows
            del raws[batch_rows:]
            if not raws:
                break
            start = last
            if placed:
                for i, key in enumerate(batch_keys[:len(raws)]):
                    hold = placed.get(keys.seq_of(key))
                    if hold is not None:
                        raws[i] = held_records([raws[i]], GET_UNCONFIRMED, hold.token, hold.since)[0]
            batch = record_batch(raws, r.queues, r.store, columns, report_only)
            if batch is not None:
                yield batch
            if not more:
                return


def _placed(lt: lmdb.Transaction, dbs: dict[str, Any]) -> dict[int, holders.Hold]:
    """seq -> hold of every message held in place (store/holders.py); none in a store an older
    mqcli wrote without the table (environment._ADDED_LATER)."""
    placed: dict[int, holders.Hold] = {}
    if "holders" not in dbs:
        return placed
    for key, value in lt.cursor(db=dbs["holders"]):
        hold = holders.decode(bytes(key), bytes(value))
        placed.update((seq, hold) for _, seq in hold.placed)
    return placed


def read_queue_table(where: StoreIdentity, queues: Sequence[str] | None = None,
                     columns: Sequence[tuple[str, str]] = QUEUE_COLUMNS) -> Iterator[pa.RecordBatch]:
    """Every queue of the planned store (or those named) with its attributes and counters."""
    wanted = None if queues is None else {queue_key(q) for q in queues}
    with open_planned(where) as (env, dbs), env.begin() as lt:
        rows = []
        for q in _queues(lt, dbs):
            if wanted is None or queue_key(q.name) in wanted:
                counters = lt.get(keys.qstats_key(q.qid), db=dbs["meta"])
                depth, size = keys.QSTATS.unpack(counters) if counters else (0, 0)
                rows.append({"store": where.path, "store_name": where.name, "store_guid": where.guid,
                             "queue": q.name, "qid": q.qid, "queue_guid": q.guid, "label": q.label,
                             "quota": q.quota, "transactional": q.transactional, "journal": q.journal,
                             "max_backouts": q.max_backouts, "created": q.created, "system": q.system,
                             "depth": depth, "bytes": size})
    if rows:
        yield queue_batch(rows, columns)


def distinct_stores(paths: Sequence[str | Path]) -> list[str]:
    """The paths, each store once (by its real path), in the order given."""
    out, seen = [], set()
    for p in paths:
        real = os.path.realpath(p)
        if real not in seen:
            seen.add(real)
            out.append(str(p))
    return out

