"""The data pipeline on PySpark (docs/design.md#pipeline): stores and trace reports analysed at scale.

- `columns`  the message table's schema (Arrow and Spark) and its Arrow batch builders
- `scan`     plans key ranges of stores and reads them read-only, as Arrow record batches
- `source`   the `mqstore` Spark data source over `scan`
- `planning` read partitions from the cluster's cores, shuffle partitions and settings of a session
- `pushdown` a query's filters on queue, class, state, priority and put_time, taken by the source
- `stream`   reports as a stream (`readStream`, by SequentialID) and `analyze routes --follow`
- `parquet`  `mqcli export --format parquet`: the same schema, written by pyarrow
- `session`  a quiet SparkSession (embedded `local[*]` unless configured otherwise)
- `labels`   trace report labels and bodies decoded by Spark SQL expressions
- `health`   per store and queue: depth by state and priority, bytes, ages, in flight, expired
- `routes`   traced messages' routes rebuilt from their reports; per-link latency, loops
- `outputs`  rows as plain data, `--out` datasets and `--plot` charts
- `pipeline` where the messages come from (stores or Parquet), checked before Spark starts
- `job`      the same analyses as a `spark-submit` job

PySpark and pyarrow are the optional extra `spark` (`pip install 'mqcli[spark]'`): nothing here
is imported by `import store` or by `mqcli`'s other commands. `missing()` tells which of the
extra's modules cannot be imported (it imports them: only the commands that need them call it).
"""

from __future__ import annotations

import importlib

from ..errors import AnalyticsFailed, AnalyticsUnavailable

__all__ = ["AnalyticsFailed", "AnalyticsUnavailable", "INSTALL_HINT", "missing", "require"]

INSTALL_HINT = "pip install 'mqcli[spark]'"


def missing(modules: tuple[str, ...] = ("pyspark", "pyarrow")) -> list[str]:
    """The modules of the `spark` extra that cannot be imported here (absent or broken)."""
    absent = []
    for m in modules:
        try:
            importlib.import_module(m)
        except ImportError:
            absent.append(m)
    return absent


def require(modules: tuple[str, ...] = ("pyspark", "pyarrow"), what: str = "the data pipeline") -> None:
    """Raise AnalyticsUnavailable naming the install command unless `modules` are installed."""
    absent = missing(modules)
    if absent:
        raise AnalyticsUnavailable(f"{what} needs {' and '.join(absent)}: {INSTALL_HINT}")
