"""`analyze routes`: traced messages' routes rebuilt from their trace reports (docs/design.md#trace-reports).

Every report message (class `report`) is decoded, in any form Windows documents: by the
`mqstore` source as it reads stores (its `trace_*` columns, report_fields.py), else by Spark SQL
expressions (labels.py; no Python UDF): its label gives the event (`received by`, `sent
from … to …`, `Report Message Conflict`), the route's identity (qm_id, message_id), the hop
count and the queue manager where the event happened (`computer`); its body the target queue;
its put time, in µs, when the event happened (the label's time has whole seconds only). A
route is complete when a report says the message was delivered: mqcli's `mqcli.delivered`
property when the reports have it, else the route's last step is a `received by` with no `sent
from` after it (a message received where it was not sent on). Conflict reports (a hop's copy
for its own report queue) are counted (`conflict_reports`) and belong to no route.

A route is keyed by its label's identity, (qm_id, message_id), together with a hash of the
report's `correl_id` (the traced message's msg_id), which tells apart two origins whose GUIDs
share their first four digits. Per route:

- `msg_id`: the traced message's, from its origin (the queue manager at hop 0) and its
  message_id (else `QMID:MESSAGEID` in hex, when no hop-0 report was read);
- `path`: the queue managers (GUIDs) in hop order, one per hop; a queue manager that appears
  at two different hop counts makes `loop` true (`repeated` names them);
- `hops`: the highest hop count reported; `complete`: some report says delivered — a route
  that is not complete never reached its target queue (yet);
- `started` (the first report of its lowest hop: its origin's, by the origin's clock; the
  earliest report of any hop was a later hop's whose clock was behind, and the route's latency
  came out 0), `delivered` (the delivered report's time) and `latency_ms`.

A step's computer is keyed by two numbers (computers.py), its name given back in the
results: at one hop count and µs, steps are walked in that key's order (machine names first,
then GUIDs as their text sorts).

Per link (queue manager → queue manager, from hop k to hop k+1 of a route): latency = the
first report at hop k+1 minus the `sent` report at hop k (or, without one, the last report at
hop k); `links` gives count, p50/p95/p99 (Spark's percentile_approx, accuracy 10,000: within
0.01% of the rank), mean, min and max, in ms. Queue managers' clocks are used as they are: a
link between two machines carries their clock offset (a negative min says so: `analyze routes`
notes it, as `trace route` notes a step back in time).

Reports whose label does not decode are not part of any route; `summary` counts them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from . import computers
from .labels import with_body_fields, with_label_fields
from .report_fields import COMPUTER_KEY_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from ..reportfile import ReportRow

EVENT_PROP = "mqcli.event"
DELIVERED_PROP = "mqcli.delivered"
# what decode_reports reads: the event and delivered properties either as columns of their own
# (the mqstore option `properties`, cheaper) or from the props map (Parquet exports)
MESSAGE_COLUMNS_USED = ("correl_id", "label", "body", "put_time")
# what routes reads from the mqstore source: the labels and bodies decoded as they are read
# (report_fields.py), the same fields labels.py gives a Parquet export's rows
SOURCE_COLUMNS_USED = ("correl_id", "put_time", "trace_route", "trace_hops", *COMPUTER_KEY_COLUMNS,
                       "trace_event", "trace_queue")
PROPERTIES_USED = (DELIVERED_PROP,)
PERCENTILE_ACCURACY = 10_000


TOTALS = ("reports", "invalid", "conflicts", "route_rows", "complete", "loop")
# a link's latency percentiles: each figure's name and the fraction percentile_approx is asked for
PERCENTILES_MS = {"p50_ms": 0.5, "p95_ms": 0.95, "p99_ms": 0.99}
LINK_FIELDS = ("from_qm", "to_qm", "count", *PERCENTILES_MS, "mean_ms", "min_ms", "max_ms")


@dataclass
class Routes:
    """The results as DataFrames. `steps` (one row per route and hop step; the steps of
    undecodable and conflict reports in rows of the null route) is kept in memory after its
    first use when `cache` is asked for, so the routes, the links and the summary read the
    stores once; `unpersist()` lets it go. `walked` is the steps of each route in hop order
    (one window), `per_link` the links and every count of the summary in one small aggregate:
    `totals()` gets both from one Spark job."""

    steps: DataFrame     # route, hops, computer: first/last/sent/delivered times, reports
    walked: DataFrame    # the steps in hop order, with the next step's and the route's figures
    per_link: DataFrame  # one row per link, and one (from_qm and to_qm null) for the rest

    # `routes` and `links` are built on first use: each DataFrame step is a round trip to the
    # JVM (about 2,600 of them for all three), and totals() needs neither

    @cached_property
    def routes(self) -> DataFrame:
        """One row per traced message."""
        return _routes_of(self.walked)

    @cached_property
    def links(self) -> DataFrame:
        """One row per queue manager → queue manager link."""
        from pyspark.sql import functions as F

        return _in_ms(self.per_link).where(F.col("to_qm").isNotNull()).select(*LINK_FIELDS).orderBy("from_qm", "to_qm")

    def summary(self) -> dict[str, int]:
        """Counts of reports, undecodable reports, routes, complete and incomplete routes, loops.

        A loop is a queue manager with two steps in one route, since a route's steps are
        distinct (hops, computer) pairs."""
        return self.totals()[1]

    def totals(self) -> tuple[list[dict[str, Any]], dict[str, int]]:
        """The links (as outputs.to_records gives `links`) and the summary, from one job."""
        rows = _in_ms(self.per_link).collect()
        sums = {name: sum(int(r[name] or 0) for r in rows) for name in TOTALS}
        links = [{name: r[name] for name in LINK_FIELDS}
                 for r in sorted((r for r in rows if r["to_qm"] is not None), key=lambda r: (r["from_qm"], r["to_qm"]))]
        routes = sums["route_rows"]
        return links, {"reports": sums["reports"], "invalid_reports": sums["invalid"],
                       "conflict_reports": sums["conflicts"], "routes": routes, "complete": sums["complete"],
                       "incomplete": routes - sums["complete"], "loops": sums["loop"]}

    def unpersist(self) -> None:
        self.steps.unpersist()


def _in_ms(per_link: DataFrame) -> DataFrame:
    """Routes.per_link with each link's latency figures in ms (LINK_FIELDS), from its µs."""
    from pyspark.sql import functions as F

    return per_link.select("*", *[(F.col("p")[i] / 1000.0).alias(name) for i, name in enumerate(PERCENTILES_MS)],
                           *[(F.col(f"{name}_us") / 1000.0).alias(f"{name}_ms") for name in ("mean", "min", "max")])


def _delivered_text(messages: DataFrame) -> Column:
    """mqcli's `mqcli.delivered` property: its own column (the mqstore option `properties`,
    cheaper) or from the props map (Parquet exports), else null."""
    from pyspark.sql import functions as F

    from .columns import property_column

    delivered_col = property_column(DELIVERED_PROP)[0]
    if delivered_col in messages.columns:
        return F.col(delivered_col)
    if "props" in messages.columns:
        return F.col("props").getItem(DELIVERED_PROP)
    return F.lit(None).cast("string")


def decode_reports(messages: DataFrame) -> DataFrame:
    """The report messages with their label and body decoded, and their event. A `class`
    column, when there is one, selects the reports (the mqstore source reads only reports when
    told so, and then the column need not be read)."""
    from pyspark.sql import functions as F

    if "class" in messages.columns:
        messages = messages.where(F.col("class") == "report")
    reports = messages.select(*MESSAGE_COLUMNS_USED, _delivered_text(messages).alias("delivered_text"))
    return decode_rows(reports)


def decode_rows(reports: DataFrame) -> DataFrame:
    """Rows of correl_id, label, body, put_time (TIMESTAMP) and delivered_text (mqcli's
    `mqcli.delivered`, or null) decoded: the event is the label's (received, sent, conflict)."""
    from pyspark.sql import functions as F

    reports = with_body_fields(with_label_fields(reports, "label", "label_fields"), "body", "body_fields")
    return reports.select(
        "correl_id", "label_fields", "body_fields",
        F.unix_micros("put_time").alias("t"),
        F.col("label_fields.event").alias("event"),
        (F.col("delivered_text") == "true").alias("delivered"),
    )


def report_rows(spark: SparkSession, rows: list[ReportRow]) -> DataFrame:
    """Rows read from a reports file (store/reportfile.py) as decode_rows takes them: no
    correl_id (every route is keyed by its label's identity alone), the event's time as the
    report's time (reportfile.event_times, as `trace route --reports` takes it: the label's,
    not the arrival at the report queue), and no `mqcli.delivered` (delivery is read from the
    labels)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("label", StringType()), StructField("body", StringType()),
                         StructField("time", LongType())])
    df = spark.createDataFrame([(r.label, r.body, r.time) for r in rows], schema)
    return df.select(F.lit(None).cast("string").alias("correl_id"), "label", "body",
                     F.timestamp_micros("time").alias("put_time"),
                     F.lit(None).cast("string").alias("delivered_text"))


def _events(messages: DataFrame, decoded_rows: bool) -> DataFrame:
    """One row per report: its route key (null for a conflict or an undecodable label), hop,
    computer, target queue, time (µs) and event flags; from the source's decoded columns when
    `messages` has them, else decoded here (labels.py)."""
    from pyspark.sql import functions as F

    if "trace_route" in messages.columns:
        if "class" in messages.columns:
            messages = messages.where(F.col("class") == "report")
        event = F.col("trace_event")
        return messages.select(
            "trace_route", F.when(event.isNotNull(), F.xxhash64("correl_id")),
            "trace_hops", computers.key(*map(F.col, COMPUTER_KEY_COLUMNS)), "trace_queue", F.unix_micros("put_time"),
            event == "sent", event == "received", _delivered_text(messages) == "true",
            F.coalesce(event == "conflict", F.lit(False)),
        ).toDF(*EVENT_COLUMNS)
    label = F.col("label_fields")
    valid = label["valid"]
    decoded = decode_rows(messages) if decoded_rows else decode_reports(messages)
    return decoded.select(
        F.when(valid, F.conv(label["qm_id"], 16, 10).cast("long") * (1 << 32) + label["message_id"]),
        F.when(valid, F.xxhash64("correl_id")),
        label["hops"], computers.key(*computers.key_columns(label["computer"])),
        F.col("body_fields.queue"),
        "t", F.col("event") == "sent", F.col("event") == "received",
        "delivered", F.coalesce(F.col("event") == "conflict", F.lit(False)),
    ).toDF(*EVENT_COLUMNS)


# `computer` is the computer's key (computers.py), its name only in the results
EVENT_COLUMNS = ("route", "correl_hash", "hops", "computer", "target_queue", "t", "sent", "received",
                 "delivered", "conflict")


def routes(messages: DataFrame, *, cache: bool = True, decoded_rows: bool = False) -> Routes:
    """Rebuild routes and links from the reports among `messages` (see the module docstring).

    Built for millions of reports: the route key is two integers (the label's identity, qm-id
    and message-id packed in one, and a 64-bit hash of the correl_id, which tells apart two
    origins whose GUIDs share their first four digits); the reports are shuffled once, by that
    key, and everything after stays inside those partitions: the hop steps are aggregated with
    fixed-width buffers (a hash aggregate, no per-row objects) and each route walked in hop
    order by one window. With `decoded_rows`, `messages` are rows as decode_rows takes them
    (report_rows: a reports file) rather than messages.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    events = _events(messages, decoded_rows).repartition("route", "correl_hash")
    # a step is a (hops, computer) pair of a route; its target queue (every report of a route
    # names the same) is carried, not grouped by: the links and the summary never read it, and
    # Spark then drops it right after the scan
    steps = events.groupBy("route", "correl_hash", "hops", "computer").agg(
        F.min("t").alias("first_t"), F.max("t").alias("last_t"),
        F.max("target_queue").alias("target_queue"),
        F.max(F.when(F.col("sent"), F.col("t"))).alias("sent_t"),
        F.min(F.when(F.col("received"), F.col("t"))).alias("received_t"),
        # mqcli's `mqcli.delivered` when the reports have it: false rules a step out
        F.min(F.when(F.col("delivered"), F.col("t"))).alias("said_delivered_t"),
        F.max(F.col("delivered").isNotNull().cast("int")).alias("says_delivered"),
        F.count(F.lit(1)).alias("reports"),
        F.sum(F.col("conflict").cast("int")).alias("conflicts"))
    # Each route walked in hop order by one window (one sort); every window below has this
    # order, so Spark sorts the steps once.
    in_order = Window.partitionBy("route", "correl_hash").orderBy("hops", "first_t", "computer")
    whole = in_order.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    # Without that property (reports no mqcli wrote) a message was delivered where it was
    # received and not sent on: the route's last step, a `received by` with no `sent from`
    steps = steps.withColumn("delivered_t", F.when(
        F.col("says_delivered") == 1, F.col("said_delivered_t")).otherwise(F.when(
            F.col("route").isNotNull() & F.col("sent_t").isNull()
            & (F.col("hops") == F.max("hops").over(whole)), F.col("received_t"))))
    steps = steps.drop("said_delivered_t", "says_delivered", "received_t")
    if cache:
        # the steps, not the walk: a walked row carries its route's path (an array), which
        # costs the cache more than sorting the steps again costs each query
        steps = steps.persist()
    # the steps of every route in order, each with the next step's and its route's figures
    # (the steps of undecodable and conflict reports, route null, are walked too: only their
    # counts are used)
    walked = steps.select(
        "*",
        F.row_number().over(in_order).alias("step"),
        (F.lead("hops").over(in_order) - F.col("hops")).alias("gap"),
        F.lead("computer").over(in_order).alias("next_computer"),
        F.lead("first_t").over(in_order).alias("next_first_t"),
        F.collect_list("computer").over(whole).alias("path_keys"),
        F.max("hops").over(whole).alias("max_hops"),
        F.first("first_t").over(whole).alias("started_t"),  # its lowest hop's first report
        F.min("delivered_t").over(whole).alias("route_delivered_t"),
        F.sum("reports").over(whole).alias("route_reports"),
        F.max("target_queue").over(whole).alias("route_target"),
        F.min(F.when(F.col("hops") == 0, F.col("computer"))).over(whole).alias("origin"),
    )
    path = F.col("path_keys")
    # a link: from hop k to hop k+1 of a route; its latency the first report at hop k+1 minus
    # the `sent` report at hop k (else its last report)
    link = F.col("route").isNotNull() & (F.col("gap") == 1)
    route_row = F.col("route").isNotNull() & (F.col("step") == 1)
    per_link = walked.select(
        F.when(link, F.col("computer")).alias("from_qm"), F.when(link, F.col("next_computer")).alias("to_qm"),
        F.when(link, F.col("next_first_t") - F.coalesce("sent_t", "last_t")).alias("latency_us"),
        link.cast("int").alias("is_link"), "reports", "conflicts",
        F.when(F.col("route").isNull(), F.col("reports") - F.col("conflicts")).otherwise(0).alias("invalid"),
        route_row.cast("int").alias("route_rows"),
        (route_row & F.col("route_delivered_t").isNotNull()).cast("int").alias("complete"),
        (route_row & (F.size(F.array_distinct(path)) < F.size(path))).cast("int").alias("loop"),
    ).groupBy("from_qm", "to_qm").agg(
        F.sum("is_link").alias("count"),
        F.percentile_approx("latency_us", list(PERCENTILES_MS.values()), PERCENTILE_ACCURACY).alias("p"),
        F.avg("latency_us").alias("mean_us"), F.min("latency_us").alias("min_us"), F.max("latency_us").alias("max_us"),
        *[F.sum(c).alias(c) for c in TOTALS])
    per_link = per_link.withColumns({q: computers.name_of(F.col(q)) for q in ("from_qm", "to_qm")})
    return Routes(steps=steps, walked=walked, per_link=per_link)


def _routes_of(walked: DataFrame) -> DataFrame:
    """Routes.routes: the first step of each route carries its route's figures."""
    from pyspark.sql import functions as F

    keys = F.col("path_keys")
    path = F.transform(keys, computers.name_of)
    qm_id = F.lpad(F.hex(F.shiftright("route", 32)), 4, "0")
    message_id = F.col("route").bitwiseAND(F.lit(0xFFFFFFFF))
    return walked.where(F.col("route").isNotNull() & (F.col("step") == 1)).select(
        # the traced message's msg_id: its origin (the queue manager at hop 0) and number
        F.coalesce(F.concat(computers.name_of(F.col("origin")), F.lit("\\"), message_id.cast("string")),
                   F.concat(qm_id, F.lit(":"), F.lpad(F.hex(message_id), 8, "0"))).alias("msg_id"),
        qm_id.alias("qm_id"), message_id.alias("message_id"),
        F.col("max_hops").alias("hops"), path.alias("path"),
        F.col("route_delivered_t").isNotNull().alias("complete"),
        (F.size(F.array_distinct(keys)) < F.size(keys)).alias("loop"),
        F.transform(F.array_distinct(F.filter(keys, lambda c: F.size(F.filter(keys, lambda d: d == c)) > 1)),
                    computers.name_of).alias("repeated"),
        F.col("route_target").alias("target_queue"),
        F.timestamp_micros("started_t").alias("started"),
        F.timestamp_micros("route_delivered_t").alias("delivered"),
        ((F.col("route_delivered_t") - F.col("started_t")) / 1000.0).alias("latency_ms"),
        F.col("route_reports").alias("reports"),
    )
