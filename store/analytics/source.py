"""The `mqstore` Spark data source (docs/design.md#pipeline): stores as DataFrames.

    spark.dataSource.register(MqStoreDataSource)
    df = spark.read.format("mqstore").load("/var/lib/mq/qm1")              # one store
    df = spark.read.format("mqstore").load(["/var/lib/mq/qm1", "/var/lib/mq/qm2"])
    df = (spark.read.format("mqstore").option("queues", "orders,reports")
          .option("columns", "queue,label,put_time").load(path))
    queues = spark.read.format("mqstore").option("table", "queues").load(path)

Options (names are case-insensitive, as Spark's are):

- `path` / `paths` (what `load()` sets) or `stores`: store directories; `stores` takes several
  separated by the OS path separator (`:`).
- `snapshots`: a directory of snapshots (`mqcli snapshot DIR`), read instead of stores: the
  newest snapshot of each store, each copied to the local disk of every executor that reads it
  (checksums verified) and opened there (snapshots.py, locate.py).
- `table`: `messages` (default: the columns of columns.MESSAGE_COLUMNS, one row per message in
  any state) or `queues` (one row per queue, empty ones too, with its counters).
- `queues`: comma-separated queue names to read (default all); queue names hold no comma.
- `columns`: comma-separated columns to build (default all). The reader cannot be told which
  columns a query uses, so a job that needs a few asks for them and saves building the rest.
- `class`: `report` reads only report messages (trace reports); default every message.
- `columns` may also name the decoded trace columns `trace_route`, `trace_hops`,
  `trace_computer`, `trace_computer_hi`, `trace_computer_lo`, `trace_computer_name`, `trace_event` and
  `trace_queue` (report_fields.py: each report's label
  and body decoded as it is read; null for a message that is not a valid report).
- `properties`: comma-separated property names, each added as a STRING column `prop_<name>`
  (see columns.py; much cheaper for Spark than looking into the `props` map).
- `rowsPerPartition` (default 250,000): a queue's positions and the in-flight table are cut
  into key ranges of about this many entries, one Spark partition each.
- `batchRows` (default 8192): rows per Arrow record batch.
- `partitions`: the cores the job has (what `analyze` passes: the session's default
  parallelism); the ranges are then sized so that there are about that many, each at most
  `rowsPerPartition` (planning.py).
- `pushdown` (default true): false reads without taking filters, for a session where
  `spark.sql.python.filterPushdown.enabled` is off (Spark refuses a source's filter pushdown
  then).
- `allowForeignOwner` (default false): as root, read stores (and snapshots) that other users
  own. Otherwise a store must belong to the user running the job, as for every mqcli command
  (store/ownership.py), and every task checks the store it opens belongs to whom the planning
  accepted: a store swapped in by another user is refused (exit 11), never read.
- `readLog`: a file to which every partition appends one JSON line per key range it read
  (store, table, bounds, queues, rows): what a query read (pushdown.py).

Filters on `queue`, `class`, `state`, `priority` and `put_time` are pushed into the reader
(pushdown.py; Spark 4.1+ with `spark.sql.python.filterPushdown.enabled`): fewer key ranges are
read and only the rows that pass reach Spark.

Partitions are plain data (scan.ScanRange); each one's `read()` opens the store's LMDB
environment read-only in the worker that runs it and closes it when done (scan.py says why
that is safe next to writers). Each checks first that the store it opened has the GUID the
driver planned (locate.open_planned): a missing store or another one at the same path fails
the task, with a one-line error the driver finds in Spark's exception (session.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

from ..errors import InvalidArgument
from . import planning, pushdown, scan, snapshots
from .stream import MqStoreStreamReader
from .columns import MESSAGE_COLUMNS, QUEUE_COLUMNS, StoreIdentity, property_column, select, spark_schema
from .locate import planned
from .report_fields import TRACE_COLUMN_NAMES, TRACE_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

NAME = "mqstore"
TABLES = {"messages": MESSAGE_COLUMNS, "queues": QUEUE_COLUMNS}


class ScanPartition(InputPartition):
    """A Spark partition: one scan.ScanRange (plain data), or for the queue table a store's
    planned identity."""

    def __init__(self, value: scan.ScanRange | StoreIdentity) -> None:
        super().__init__(value)


def _int_option(options: Any, name: str, default: int) -> int:
    text = options.get(name.lower())
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise InvalidArgument(f"option {name} must be a positive integer, got {text!r}")
    return value


def _list_option(options: Any, name: str) -> list[str] | None:
    text = options.get(name)
    if text is None or not str(text).strip():
        return None
    return [part.strip() for part in str(text).split(",") if part.strip()]


def _allow_foreign(options: Any) -> bool:
    """Option allowForeignOwner: root reads stores other users own (the CLI's
    --allow-foreign-owner); every other user may only read their own (store/ownership.py)."""
    text = str(options.get("allowForeignOwner", "false")).lower()
    if text not in ("true", "false"):
        raise InvalidArgument(f"option allowForeignOwner must be true or false, got {text!r}")
    return text == "true"


def store_paths(options: Any) -> list[str]:
    paths: list[str] = []
    if options.get("stores"):
        paths += [p for p in str(options["stores"]).split(os.pathsep) if p]
    if options.get("paths"):
        paths += list(json.loads(options["paths"]))
    if options.get("path"):
        paths.append(options["path"])
    if not paths:
        raise InvalidArgument("mqstore needs a store: load(path), load([paths]) or option('stores', …)")
    return paths


class MqStoreDataSource(DataSource):
    """`spark.read.format("mqstore")`: messages (or queues) of one or more stores."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def _table(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        table = str(self.options.get("table", "messages")).lower()
        if table not in TABLES:
            raise InvalidArgument(f"option table must be messages or queues, got {table!r}")
        asked = _list_option(self.options, "columns")
        if table != "messages":
            return table, select(asked, TABLES[table])
        # the decoded trace columns come after the message table's, only when asked for
        traced = () if asked is None else tuple(c for c in TRACE_COLUMNS if c[0] in asked)
        if asked is not None:
            asked = [c for c in asked if c not in TRACE_COLUMN_NAMES]
        columns = select(asked, TABLES[table])
        columns += tuple(property_column(p) for p in _list_option(self.options, "properties") or [])
        return table, columns + traced

    def schema(self) -> StructType:
        return spark_schema(self._table()[1])

    def reader(self, schema: StructType) -> DataSourceReader:
        table, columns = self._table()
        klass = self.options.get("class")
        if klass is not None and klass not in ("report", "all"):
            raise InvalidArgument(f"option class must be report or all, got {klass!r}")
        # Spark refuses a reader that implements pushFilters while its setting is off: the
        # option `pushdown` false reads without it (the setting's default is off; analyze
        # turns it on)
        pushes = str(self.options.get("pushdown", "true")).lower() != "false"
        shots = self.options.get("snapshots")
        return (MqStorePushdownReader if pushes and table == "messages" else MqStoreReader)(
            table=table, columns=columns, paths=[] if shots else store_paths(self.options), snapshots=shots,
            queues=_list_option(self.options, "queues"), report_only=klass == "report",
            rows_per_partition=_int_option(self.options, "rowsPerPartition", scan.DEFAULT_ROWS_PER_RANGE),
            batch_rows=_int_option(self.options, "batchRows", scan.DEFAULT_BATCH_ROWS),
            partitions=_int_option(self.options, "partitions", 0), read_log=self.options.get("readLog"),
            allow_foreign=_allow_foreign(self.options),
        )

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """`spark.readStream.format("mqstore")`: the reports of the stores' queues as they come
        (stream.py)."""
        table, columns = self._table()
        if table != "messages":
            raise InvalidArgument("a stream reads messages (reports), not the queue table")
        return MqStoreStreamReader(
            paths=store_paths(self.options), queues=_list_option(self.options, "queues"), columns=columns,
            batch_rows=_int_option(self.options, "batchRows", scan.DEFAULT_BATCH_ROWS),
            starting=str(self.options.get("startingOffsets", "earliest")).lower(),
            allow_foreign=_allow_foreign(self.options))


class MqStoreReader(DataSourceReader):
    """Plans key ranges (scan.plan) and reads one per partition. Holds plain data only: Spark
    pickles it to every worker."""

    def __init__(self, *, table: str, columns: tuple[tuple[str, str], ...], paths: list[str],
                 queues: list[str] | None, report_only: bool, rows_per_partition: int,
                 batch_rows: int, partitions: int = 0, read_log: str | None = None,
                 snapshots: str | None = None, allow_foreign: bool = False) -> None:
        self.table = table
        self.columns = columns
        self.paths = paths
        self.snapshots = snapshots
        self.queues = queues
        self.report_only = report_only
        self.rows_per_partition = rows_per_partition
        self.batch_rows = batch_rows
        self.cores = partitions
        self.read_log = read_log
        self.allow_foreign = allow_foreign  # root reads another user's store (option allowForeignOwner)
        self.pushed = pushdown.Pushed()

    def partitions(self) -> list[InputPartition]:
        paths, by_copy = self.paths, None
        if self.snapshots:  # planned on this host's local copies, named as the stores they copy
            by_copy = snapshots.local_copies(self.snapshots, allow_foreign=self.allow_foreign)
            paths = list(by_copy)
        if self.table == "queues":
            if by_copy is not None:
                return [ScanPartition(w) for w in by_copy.values()]
            return [ScanPartition(planned(p, allow_foreign=self.allow_foreign)) for p in scan.distinct_stores(paths)]
        if self.pushed.empty():
            return []
        queues = self.queues
        chosen = pushdown.queue_names(self.pushed, planning.queue_names(paths, allow_foreign=self.allow_foreign))
        if chosen is not None:
            asked = None if queues is None else {q.casefold() for q in queues}
            queues = [q for q in chosen if asked is None or q.casefold() in asked]
            if not queues:
                return []
        rows = self.rows_per_partition
        if self.cores:
            rows = planning.rows_per_range(
                planning.rows_in(paths, queues, allow_foreign=self.allow_foreign), self.cores, rows)
        ranges = pushdown.narrow(scan.plan(paths, queues, rows, allow_foreign=self.allow_foreign), self.pushed)
        if by_copy is not None:
            ranges = snapshots.renamed(ranges, by_copy)
        return [ScanPartition(r) for r in ranges]

    def read(self, partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
        value = None if partition is None else partition.value
        if value is None:  # partitions() planned nothing: Spark still reads one, empty
            return
        if self.table == "queues":
            yield from scan.read_queue_table(value, self.queues, self.columns)
            return
        report_only = self.report_only or pushdown.reads_reports_only(self.pushed)
        rows = 0
        for batch in scan.read_range(value, self.columns, self.batch_rows, report_only):
            batch = pushdown.keep(batch, self.pushed)
            rows += batch.num_rows
            if batch.num_rows:
                yield batch
        if self.read_log:
            pushdown.log_read(self.read_log, value, rows)


class MqStorePushdownReader(MqStoreReader):
    """MqStoreReader that takes the filters pushdown.py handles (`pushFilters`)."""

    def pushFilters(self, filters: list[Any]) -> list[Any]:
        return pushdown.push(filters, self.pushed, [name for name, _ in self.columns])
