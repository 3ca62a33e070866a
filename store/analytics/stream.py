"""Reports as a stream: `spark.readStream.format("mqstore")` and `analyze routes --follow`
(docs/design.md#pipeline).

**The source.** A store gives every message it enqueues the next SequentialID ([MS-MQDMPR]
3.1.7.1.9 Enqueue Message): one writer at a time, so once a read transaction sees the
counter at N, every message numbered N or less that will ever exist is committed. An offset is
therefore, per store (by its GUID), the counter seen: a micro-batch reads the reports numbered
above the last offset up to the new one, from each queue read (option `queues`, default all)
and only those of class report. Both tables are read by seq: the in-flight table is keyed by
it, and a queue's positions are `priority` then seq, so each of the eight priorities is one
`set_range`. A report consumed (got and confirmed) before its micro-batch runs is not seen; a
report queue that nobody drains keeps them all. The options are the batch source's `stores`
/ `load(paths)`, `queues`, `columns` and `properties`; `startingOffsets` is `earliest`
(default: every report already there) or `latest`.

**The view.** `follow_routes` runs that stream with a `foreachBatch` that appends each
micro-batch's reports to `<checkpoint>/reports/batch=<id>` (Parquet, written in overwrite
mode), then computes the routes over everything there and hands the links and the summary to
a callback. Spark writes a micro-batch's offsets to the checkpoint before it runs and marks it
done after, and replays an unfinished one with the same id and offsets: the overwrite makes
the replay replace what the first attempt wrote, so a restart from the checkpoint neither
loses nor counts twice a report. The routes are recomputed over all reports seen (a route's
links need its hops' reports, which come in different batches).
"""

from __future__ import annotations

import os
import queue as queue_mod
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from .. import keys
from ..errors import InvalidArgument
from ..keys import queue_key
from ..queues import decode_queue
from ..write import Counters
from . import routes as routes_mod
from .columns import StoreIdentity, record_batch
from .outputs import to_records
from .locate import open_planned
from .scan import MSG_TABLE, POS_TABLE, distinct_stores, identity, open_readonly

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

PRIORITIES = range(8)
REPORTS_DIR = "reports"
STREAM_DIR = "stream"


@dataclass(frozen=True)
class SeqRange:
    """One store's reports numbered in (after, upto]: plain data, pickled to a worker."""

    store: StoreIdentity
    after: int
    upto: int
    queues: dict[int, str]


def _counter(lt: Any, dbs: dict[str, Any]) -> int:
    return int(Counters(lt.get(keys.META_COUNTERS, db=dbs["meta"])).seq)


def _chosen(lt: Any, dbs: dict[str, Any], queues: Sequence[str] | None) -> dict[int, str]:
    wanted = None if queues is None else {queue_key(q) for q in queues}
    out = {}
    for name, raw in lt.cursor(db=dbs["queues"]):
        if wanted is None or bytes(name) in wanted:
            q = decode_queue(bytes(raw))
            out[q.qid] = q.name
    return out


def offsets(paths: Sequence[str], *, allow_foreign: bool = False) -> dict[str, int]:
    """Per store GUID, the SequentialID counter now."""
    out = {}
    for path in distinct_stores(paths):
        with open_readonly(path, allow_foreign=allow_foreign) as (env, dbs), env.begin() as lt:
            out[identity(lt, dbs, path).guid] = _counter(lt, dbs)
    return out


def read_seq_range(r: SeqRange, columns: Sequence[tuple[str, str]], batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The reports of `r` as Arrow batches, each read in a read transaction of its own (as
    scan.read_range does): per queue and priority, then the in-flight table."""
    starts = [(POS_TABLE, keys.pos_key(qid, p, r.after + 1), keys.priority_prefix(qid, p))
              for qid in sorted(r.queues) for p in PRIORITIES]
    starts.append((MSG_TABLE, keys.seq_key(r.after + 1), b""))
    with open_planned(r.store) as (env, dbs):  # the planned store (GUID checked), or StoreMismatch
        for table, start, prefix in starts:
            at: bytes | None = start
            while at is not None:
                raws: list[bytes] = []
                with env.begin() as lt:
                    cur = lt.cursor(db=dbs[table])
                    found_any = cur.set_range(at)
                    at = None
                    while found_any:
                        key = cur.key()
                        if not key.startswith(prefix) or keys.seq_of(key) > r.upto:
                            break
                        if len(raws) == batch_rows:
                            at = bytes(key)
                            break
                        raws.append(bytes(cur.value()))
                        found_any = cur.next()
                batch = record_batch(raws, r.queues, r.store, columns, report_only=True)
                if batch is not None:
                    yield batch


class MqStoreStreamReader(DataSourceStreamReader):
    """`spark.readStream.format("mqstore")`: reports by SequentialID (see the module docstring)."""

    def __init__(self, *, paths: list[str], queues: list[str] | None, columns: tuple[tuple[str, str], ...],
                 batch_rows: int, starting: str, allow_foreign: bool = False) -> None:
        if starting not in ("earliest", "latest"):
            raise InvalidArgument(f"option startingOffsets must be earliest or latest, got {starting!r}")
        self.paths = distinct_stores(paths)
        self.queues = queues
        self.columns = columns
        self.batch_rows = batch_rows
        self.starting = starting
        self.allow_foreign = allow_foreign

    def initialOffset(self) -> dict[str, int]:
        now = offsets(self.paths, allow_foreign=self.allow_foreign)
        return now if self.starting == "latest" else {guid: 0 for guid in now}

    def latestOffset(self, start: dict[str, int] | None = None, limit: Any = None) -> dict[str, int]:
        return offsets(self.paths, allow_foreign=self.allow_foreign)

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        parts: list[InputPartition] = []
        for path in self.paths:
            with open_readonly(path, allow_foreign=self.allow_foreign) as (env, dbs), env.begin() as lt:
                where = identity(lt, dbs, str(Path(path).absolute()))
                chosen = _chosen(lt, dbs, self.queues)
            upto = int(end.get(where.guid, 0))
            after = int(start.get(where.guid, 0))
            if upto > after and chosen:
                parts.append(InputPartition(SeqRange(where, after, upto, chosen)))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_seq_range(partition.value, self.columns, self.batch_rows)

    def commit(self, end: dict[str, int]) -> None:
        pass


# ---- analyze routes --follow ----------------------------------------------------------------

@dataclass
class Update:
    """What one micro-batch changed: the batch, the reports it brought, and the routes over
    every report seen so far."""

    batch_id: int
    new_reports: int
    summary: dict[str, int]
    links: list[dict[str, Any]]


def routes_over(spark: SparkSession, reports_dir: Path) -> tuple[dict[str, int], list[dict[str, Any]]]:
    result = routes_mod.routes(spark.read.parquet(str(reports_dir)).drop("batch"))
    try:
        return result.summary(), to_records(result.links)
    finally:
        result.unpersist()


def follow_routes(spark: SparkSession, stores: list[str], queues: list[str] | None, *,
                  checkpoint: Path, interval_s: float, count: int | None, idle_s: float | None,
                  on_update: Callable[[Update], None], allow_foreign: bool = False) -> int:
    """Run the report stream into the checkpoint's report set and call `on_update` after each
    micro-batch with new reports (and once at the start when the checkpoint already holds
    some), until `count` updates were made or, for `idle_s`, no batch ran and nothing new was
    there (forever without either). Returns the updates made."""
    reports_dir = checkpoint / REPORTS_DIR
    updates: queue_mod.Queue[Update | BaseException] = queue_mod.Queue()
    made = 0
    if reports_dir.is_dir() and any(reports_dir.glob("batch=*/*.parquet")):
        summary, links = routes_over(spark, reports_dir)
        on_update(Update(-1, 0, summary, links))
        made += 1
        if count is not None and made >= count:
            return made

    def batch(df: DataFrame, batch_id: int) -> None:
        try:
            target = reports_dir / f"batch={batch_id}"
            # a batch whose commit a stop cut off runs again on restart with the same offsets:
            # written again (the same reports, replaced), but nothing new to tell
            replayed = any(target.glob("*.parquet"))
            df.write.mode("overwrite").parquet(str(target))
            new = spark.read.parquet(str(target)).count()
            if new and not replayed:
                summary, links = routes_over(spark, reports_dir)
                updates.put(Update(batch_id, new, summary, links))
        except BaseException as exc:  # the query thread's failure, shown by the caller
            updates.put(exc)
            raise

    columns = ",".join(routes_mod.MESSAGE_COLUMNS_USED)
    reader = (spark.readStream.format("mqstore").option("stores", os.pathsep.join(stores))
              .option("columns", columns)
              .option("properties", ",".join(routes_mod.PROPERTIES_USED)))
    if queues:
        reader = reader.option("queues", ",".join(queues))
    if allow_foreign:
        reader = reader.option("allowForeignOwner", "true")
    query = (reader.load().writeStream.foreachBatch(batch)
             .option("checkpointLocation", str(checkpoint / STREAM_DIR))
             .trigger(processingTime=f"{max(0.1, interval_s)} seconds").start())
    try:
        last = time.monotonic()
        while count is None or made < count:
            try:
                got = updates.get(timeout=0.2)
            except queue_mod.Empty:
                if not query.isActive:
                    query.awaitTermination()  # raises the query's failure
                    break
                status = query.status
                if status.get("isTriggerActive") or status.get("isDataAvailable"):
                    last = time.monotonic()  # a batch being read or computed is not idleness
                elif idle_s is not None and time.monotonic() - last >= idle_s:
                    break
                continue
            if isinstance(got, BaseException):
                raise got
            on_update(got)
            made += 1
            last = time.monotonic()
    finally:
        query.stop()
    return made
