"""`analyze health`: per store and queue, what `mqcli stats` shows and what an operator looks
for next (docs/design.md#pipeline).

From the message table (the `mqstore` source or a Parquet export), one row per store and queue:

- `depth`, `bytes`, the count in each state (columns named like the states, as `stats -o json`
  names them), `by_priority` (priority → count, non-zero only), `oldest` (the oldest put time)
  and `oldest_age_s`: the same figures as `mqcli stats` for the same store;
- `in_flight`: messages in any state but available; `stuck`: those that entered that state
  more than `stuck_after` ago (their `since`);
- `expired`: messages past their time to be received but not yet moved to the dead-letter
  queue (the next write or `mqcli sweep` moves them; tx-locked messages do not expire, §5);
- `lapsed`: messages whose lease (a get's or a browse lock's) has run out but that are still
  in flight (the next write or `mqcli sweep` puts them back); reads never do it themselves;
- `backouts`: backouts summed over the queue's messages; `backed_out`: messages with at least
  one.

With the queue table (live stores, snapshots, and Parquet exports through their footer's queue
table) every queue has a row, empty ones too; without one (a Parquet file not written by
`mqcli export`) only queues with messages have one. `now` is fixed by the caller
so every figure is measured against one instant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..records import AVAILABLE, STATES, TX_LOCKED

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

MESSAGE_COLUMNS_USED = ("store", "store_name", "store_guid", "queue", "state", "priority", "size",
                        "put_time", "expires", "since", "backouts", "lease_expires")
COUNTS = ("depth", "bytes", *STATES, "in_flight", "stuck", "expired", "lapsed", "backouts", "backed_out")


def health(messages: DataFrame, queues: DataFrame | None = None, *, now_us: int,
           stuck_after_us: int) -> DataFrame:
    """One row per store and queue (see the module docstring), ordered by store and queue."""
    from pyspark.sql import functions as F

    now = F.timestamp_micros(F.lit(now_us))
    in_flight = F.col("state") != AVAILABLE

    def count_if(condition: Column) -> Column:
        return F.sum(F.when(condition, 1).otherwise(0)).cast("long")

    aggregates = [
        F.first("store").alias("m_store"), F.first("store_name").alias("m_store_name"),
        F.count(F.lit(1)).alias("depth"), F.coalesce(F.sum("size"), F.lit(0)).cast("long").alias("bytes"),
        *[count_if(F.col("state") == s).alias(s) for s in STATES],
        *[count_if(F.col("priority") == p).alias(f"p{p}") for p in range(8)],
        F.min("put_time").alias("oldest"),
        count_if(in_flight).alias("in_flight"),
        count_if(in_flight & (F.unix_micros(F.coalesce("since", "put_time")) <= now_us - stuck_after_us)).alias("stuck"),
        count_if((F.col("state") != TX_LOCKED) & F.col("expires").isNotNull() & (F.col("expires") <= now)).alias("expired"),
        count_if(in_flight & F.col("lease_expires").isNotNull() & (F.col("lease_expires") <= now)).alias("lapsed"),
        F.coalesce(F.sum("backouts"), F.lit(0)).cast("long").alias("backouts"),
        count_if(F.col("backouts") > 0).alias("backed_out"),
    ]
    grouped = (messages.select(*MESSAGE_COLUMNS_USED)
               .groupBy("store_guid", F.col("queue").alias("m_queue")).agg(*aggregates))
    counts = [c for c in grouped.columns if c not in ("store_guid", "m_queue", "m_store", "m_store_name")]
    if queues is not None:
        q = queues.select("store", "store_name", "store_guid", "queue")
        joined = q.join(grouped, (q.store_guid == grouped.store_guid) & (q.queue == grouped.m_queue), "left")
        base = joined.select(q.store, q.store_name, q.store_guid, q.queue, *[grouped[c] for c in counts])
    else:
        base = grouped.select(F.col("m_store").alias("store"), F.col("m_store_name").alias("store_name"),
                              "store_guid", F.col("m_queue").alias("queue"), *counts)
    zero = F.lit(0).cast("long")
    by_priority = F.map_from_entries(F.filter(
        F.array(*[F.struct(F.lit(str(p)).alias("priority"), F.coalesce(F.col(f"p{p}"), zero).alias("n"))
                  for p in range(8)]),
        lambda e: e["n"] > 0))
    return base.select(
        "store", "store_name", "store_guid", "queue",
        *[F.coalesce(F.col(f"`{c}`"), zero).alias(c) for c in ("depth", "bytes", *STATES)],
        by_priority.alias("by_priority"),
        "oldest",
        # never negative (a store written on a host whose clock was ahead), as mqcli's ages
        # (render.age_seconds); null where the queue is empty (greatest skips nulls)
        F.when(F.col("oldest").isNotNull(),
               F.round(F.greatest((F.lit(now_us) - F.unix_micros("oldest")) / 1e6, F.lit(0.0)), 3))
        .alias("oldest_age_s"),
        *[F.coalesce(F.col(c), zero).alias(c) for c in ("in_flight", "stuck", "expired", "lapsed", "backouts", "backed_out")],
    ).orderBy("store", F.lower("queue"))
