"""How big a Spark job over stores is cut: read partitions from the cluster's cores, shuffle
partitions from the data (docs/design.md#pipeline).

- **Read partitions**: a store is read in key ranges (scan.plan); their size follows the
  cores the job gets. `rows_per_range` makes about `partitions` ranges of the rows the read
  will meet, so that every executor core has a range to read, but never more than the
  source's `rowsPerPartition` ceiling (a range is one task's memory). The driver passes its
  `defaultParallelism` (local: the cores of `local[N]`; a cluster: the executors' cores) to
  the source as the option `partitions`: the source's planning runs in a Python worker that
  has no SparkSession to ask.
- **Shuffle partitions**: Spark's 200 are far too many for a few million reports and too few
  for nothing; `tune` sets twice the cores (at least 4) and turns on adaptive query
  execution's coalescing, which merges the small shuffle partitions of a small input after
  the shuffle has measured them. An explicit setting (spark-defaults.conf, `--conf`, the
  caller's) is kept.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .. import keys
from ..keys import queue_key
from ..queues import decode_queue
from .scan import MSG_TABLE, distinct_stores, open_readonly

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MIN_SHUFFLE_PARTITIONS = 4
EXECUTOR_WAIT_SECONDS = 15.0   # how long a cluster session waits for its first executors
SETTLE_SECONDS = 1.0           # ... and then for more to register


def rows_in(paths: Sequence[str | Path], queues: Sequence[str] | None = None, *,
            allow_foreign: bool = False) -> int:
    """The entries a read of these stores' queues (all, or those named) meets: the queues'
    counters plus the in-flight table (read whole, kept by queue)."""
    wanted = None if queues is None else {queue_key(q) for q in queues}
    total = 0
    for path in distinct_stores([str(p) for p in paths]):
        with open_readonly(path, allow_foreign=allow_foreign) as (env, dbs), env.begin() as lt:
            for name, raw in lt.cursor(db=dbs["queues"]):
                if wanted is not None and bytes(name) not in wanted:
                    continue
                qid = decode_queue(bytes(raw)).qid
                counters = lt.get(keys.qstats_key(qid), db=dbs["meta"])
                total += keys.QSTATS.unpack(counters)[0] if counters else 0
            total += lt.stat(dbs[MSG_TABLE])["entries"]
    return total


def queue_names(paths: Sequence[str | Path], *, allow_foreign: bool = False) -> list[str]:
    """The names of every queue of the stores, as the queues record them."""
    names: set[str] = set()
    for path in distinct_stores([str(p) for p in paths]):
        with open_readonly(path, allow_foreign=allow_foreign) as (env, dbs), env.begin() as lt:
            names.update(decode_queue(bytes(raw)).name for _, raw in lt.cursor(db=dbs["queues"]))
    return sorted(names)


def rows_per_range(total_rows: int, partitions: int, ceiling: int) -> int:
    """Rows per key range so that `total_rows` make about `partitions` ranges, at most `ceiling`."""
    if partitions < 1 or total_rows < 1:
        return ceiling
    return max(1, min(ceiling, math.ceil(total_rows / partitions)))


def shuffle_partitions(parallelism: int) -> int:
    return max(MIN_SHUFFLE_PARTITIONS, 2 * parallelism)


def wait_for_executors(spark: SparkSession, timeout: float = EXECUTOR_WAIT_SECONDS) -> int:
    """On a cluster, wait until executors have registered (and no more come for a moment), so
    that `defaultParallelism` counts their cores; local mode has them at once. Returns it."""
    sc = spark.sparkContext
    if (sc.master or "local").startswith("local"):
        return sc.defaultParallelism
    deadline = time.monotonic() + timeout
    seen, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        # the driver counts as one entry of the memory status
        executors = sc._jsc.sc().getExecutorMemoryStatus().size() - 1
        if executors != seen:
            seen, since = executors, time.monotonic()
        elif executors > 0 and time.monotonic() - since >= SETTLE_SECONDS:
            break
        time.sleep(0.1)
    return sc.defaultParallelism


def tune(spark: SparkSession, owned: bool = True) -> int:
    """Shuffle partitions and adaptive coalescing for a session made here (see the module
    docstring), filter pushdown for any; what the session was started with (spark-defaults.conf,
    `--conf`, a builder's `config`) is left as it is. A session found running (a notebook's,
    spark-submit's) keeps its shuffle settings. Returns the default parallelism."""
    parallelism = wait_for_executors(spark)
    conf = spark.sparkContext.getConf()
    settings = {} if not owned else {
        "spark.sql.shuffle.partitions": str(shuffle_partitions(parallelism)),
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
    }
    settings |= {
        # the source turns `.where(...)` on queue, class, state, priority and put_time into
        # the key ranges it reads (pushdown.py); off by default in Spark 4.1+
        "spark.sql.python.filterPushdown.enabled": "true",
    }
    for key, value in settings.items():
        if not conf.contains(key):
            spark.conf.set(key, value)
    return parallelism
