"""The analyses end to end, shared by `mqcli analyze` and the spark-submit job (job.py): where
the messages come from (live stores or snapshots through `mqstore`, or Parquet exports),
checked before Spark starts, then health or routes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadData, InvalidArgument, QueueNotAvailable
from ..ownership import check_store
from ..keys import queue_key
from .columns import MESSAGE_COLUMN_NAMES
from .locate import identity, local_copy, open_readonly
from .scan import distinct_stores
from . import snapshots as snapshots_mod
from . import health as health_mod
from . import routes as routes_mod
from .parquet import QUEUE_TABLE_FIELDS, queue_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession


@dataclass
class Source:
    """Stores (directories), snapshots (a directory of them) or Parquet exports (a file or
    directory), and the queues to read."""

    stores: list[str] = field(default_factory=list)
    parquet: str | None = None
    snapshots: str | None = None
    queues: list[str] | None = None
    names: dict[str, str] = field(default_factory=dict)  # queue manager GUID → name
    reports: str | None = None  # a reports file (store/reportfile.py): routes only
    report_rows: list[Any] = field(default_factory=list)
    allow_foreign_owner: bool = False  # root reads other users' stores (store/ownership.py)
    foreign_owners: dict[str, str] = field(default_factory=dict)  # store path → its other owner
    notes: list[str] = field(default_factory=list)  # what check() found worth saying (snapshots.find)

    @property
    def sql_labels(self) -> bool:
        """Whether routes over this source decode report labels in Spark SQL (labels.py): a
        Parquet export or a reports file; the mqstore source decodes them as it reads."""
        return self.parquet is not None or self.reports is not None

    def check(self) -> None:
        """Fail before Spark starts: each store opens (read-only) and has the queues named;
        the Parquet path exists; a reports file is read (and its rows checked). Learns the
        queue managers' names."""
        if self.reports is not None:
            if self.stores or self.parquet is not None or self.queues:
                raise InvalidArgument("a reports file is read alone: no stores, --parquet or --queue with it")
            from ..reportfile import read

            self.report_rows = read(self.reports)
            return
        if sum((bool(self.stores), self.parquet is not None, self.snapshots is not None)) != 1:
            raise InvalidArgument("give store directories, --snapshots DIR or --parquet DIR: one of them")
        if self.snapshots is not None:
            found: set[bytes] = set()
            for where in snapshots_mod.identities(self.snapshots, allow_foreign=self.allow_foreign_owner,
                                                  notes=self.notes):
                # this host's copy, checked, as the planning will read it (and the tasks here)
                with open_readonly(local_copy(where)) as (env, dbs), env.begin() as lt:
                    self.names[where.guid] = where.name
                    found.update(bytes(k) for k, _ in lt.cursor(db=dbs["queues"]))
            self._check_queues(found, "snapshots")
            return
        if self.parquet is not None:
            if not Path(self.parquet).exists():
                raise InvalidArgument(f"no Parquet export at {self.parquet} (make one with "
                                      f"`mqcli export --format parquet --to FILE`)")
            return
        self.stores = distinct_stores(self.stores)
        found = set()
        paths: dict[str, str] = {}  # guid -> the path it was read at
        for path in self.stores:
            # whose store it is, before Spark reads a page of it
            checked = check_store(Path(path), allow_foreign=self.allow_foreign_owner)
            if checked is not None and checked.foreign_owner is not None:
                self.foreign_owners[path] = checked.foreign_owner
            with open_readonly(path, allow_foreign=self.allow_foreign_owner) as (env, dbs), env.begin() as lt:
                where = identity(lt, dbs, str(Path(path).absolute()))
                if where.guid in paths:  # a copy (cp -a, a backup restored): its figures would be counted twice
                    raise InvalidArgument(f"the stores at {paths[where.guid]} and {path} are one queue manager "
                                          f"({where.guid}): one is a copy of the other; give one of them")
                paths[where.guid] = path
                self.names[where.guid] = where.name
                found.update(bytes(k) for k, _ in lt.cursor(db=dbs["queues"]))
        self._check_queues(found, "the store" if len(self.stores) == 1 else "any of the stores")

    def _check_queues(self, found: set[bytes], where: str) -> None:
        for q in self.queues or []:
            if queue_key(q) not in found:
                raise QueueNotAvailable(f"queue {q!r} does not exist in {where}")

    def messages(self, spark: SparkSession, columns: list[str] | None = None,
                 reports_only: bool = False, properties: list[str] | None = None) -> DataFrame:
        """The message table: `columns` (default all); with `reports_only` only reports (and
        from stores without the class column, unless asked for); `properties` as columns of
        their own from stores (a Parquet export has them in its props map)."""
        from pyspark.sql import functions as F

        if self.parquet is not None:
            df = spark.read.parquet(self.parquet)
            wanted = columns or list(MESSAGE_COLUMN_NAMES)
            missing = [c for c in wanted if c not in df.columns]
            if missing:
                raise BadData(f"{self.parquet} is not an mqcli Parquet export: it has no column "
                              f"{missing[0]!r} (make one with `mqcli export --format parquet`)")
            where = df
            if self.queues:
                where = where.where(F.lower("queue").isin([q.casefold() for q in self.queues]))
            if reports_only:
                where = where.where(F.col("class") == "report")
            return where.select(*wanted)
        # the key ranges are sized for the cores the job has (planning.py)
        reader = self._reader(spark).option("partitions", str(spark.sparkContext.defaultParallelism))
        if columns:
            reader = reader.option("columns", ",".join(columns))
        if reports_only:
            reader = reader.option("class", "report")
        if properties:
            reader = reader.option("properties", ",".join(properties))
        return reader.load() if self.snapshots is not None else reader.load(self.stores)

    def _reader(self, spark: SparkSession) -> DataFrameReader:
        reader = spark.read.format("mqstore")
        if self.allow_foreign_owner:
            reader = reader.option("allowForeignOwner", "true")
        if self.snapshots is not None:
            reader = reader.option("snapshots", self.snapshots)
        if self.queues:
            reader = reader.option("queues", ",".join(self.queues))
        return reader

    def queue_table(self, spark: SparkSession) -> DataFrame | None:
        """Every queue of the stores, empty ones too; for Parquet exports the queue table in
        their footers (parquet.py), None when they have none."""
        if self.parquet is not None:
            rows = queue_table(self.parquet)
            if rows is None:
                return None
            wanted = None if self.queues is None else {q.casefold() for q in self.queues}
            rows = [r for r in rows if wanted is None or r["queue"].casefold() in wanted]
            schema = ", ".join(f"{name} string" for name in QUEUE_TABLE_FIELDS)
            return spark.createDataFrame([tuple(r[k] for k in QUEUE_TABLE_FIELDS) for r in rows], schema)
        reader = self._reader(spark).option("table", "queues")
        return reader.load() if self.snapshots is not None else reader.load(self.stores)

    def learn_names(self, df: DataFrame) -> None:
        """The queue managers' names from a Parquet export's rows."""
        if self.parquet is not None:
            for row in df.select("store_guid", "store_name").distinct().collect():
                self.names[row["store_guid"]] = row["store_name"]


def run_health(spark: SparkSession, source: Source, *, now_us: int, stuck_after_us: int) -> DataFrame:
    messages = source.messages(spark, list(health_mod.MESSAGE_COLUMNS_USED))
    return health_mod.health(messages, source.queue_table(spark), now_us=now_us,
                             stuck_after_us=stuck_after_us)


@dataclass
class RoutesReport:
    """Everything `analyze routes` shows: the summary counts, the links (rows), and the
    routes as a DataFrame (kept in memory until `close()`)."""

    summary: dict[str, int]
    links: list[dict[str, Any]]
    result: routes_mod.Routes

    def close(self) -> None:
        self.result.unpersist()


def run_routes(spark: SparkSession, source: Source) -> RoutesReport:
    if source.reports is not None:
        result = routes_mod.routes(routes_mod.report_rows(spark, source.report_rows), decoded_rows=True)
        links, summary = result.totals()
        return RoutesReport(summary=summary, links=links, result=result)
    # from stores and snapshots the source decodes the labels and bodies as it reads them
    columns = list(routes_mod.SOURCE_COLUMNS_USED)
    if source.parquet is not None:
        columns = [*routes_mod.MESSAGE_COLUMNS_USED, "props"]
    messages = source.messages(spark, columns, reports_only=True, properties=list(routes_mod.PROPERTIES_USED))
    result = routes_mod.routes(messages)
    links, summary = result.totals()
    if source.parquet is not None:
        source.learn_names(source.messages(spark, ["store_guid", "store_name"]))
    return RoutesReport(summary=summary, links=links, result=result)
