"""A SparkSession for the pipeline: embedded `local[*]` unless Spark is configured otherwise,
the `mqstore` source registered, and Spark's own output kept off the terminal.

- An active session (a `spark-submit` job, a notebook, a test's fixture) is used as it is and
  left running. Otherwise a new one is made, and `spark_session` stops it when done.
- The master: `master` if given; else what Spark is configured with (`spark.master` in
  `$SPARK_CONF_DIR/spark-defaults.conf` or `$SPARK_HOME/conf/spark-defaults.conf`, or
  `--master` in `PYSPARK_SUBMIT_ARGS`); else `local[*]`. An embedded session binds the driver
  to 127.0.0.1, runs without the web UI, gets a quarter of the machine's memory (1-8 GiB,
  unless `SPARK_DRIVER_MEMORY` says otherwise). A standalone master on loopback gets the
  driver bound to 127.0.0.1 too.
- A session made here is tuned (planning.tune): shuffle partitions from the cores, adaptive
  coalescing; any session gets filter pushdown into the `mqstore` source. What a session was
  started with is kept.
- The JVM's stderr (its log4j console output, warnings such as the native-hadoop one, and the
  Python workers' stderr) goes to a log file instead of the terminal: the descriptor is pointed
  at the file while the JVM starts, and the JVM keeps it. `SparkSetup.log_file` names it, and
  errors mention it; the last KEEP_LOGS logs are kept under `$TMPDIR/mqcli-spark-$UID/`.
- Python workers run this interpreter (`PYSPARK_PYTHON`, unless set), so they import the same
  `store` package. PySpark's own Python loggers of failed queries are silenced: the failure
  reaches the caller as an exception.
- The JVMs of a session made here compile large methods (`-XX:-DontCompileHugeMethods` in the
  driver's and executors' extraJavaOptions, before those of spark-defaults.conf and `conf`,
  which are kept): the code Spark generates to decode report labels is larger than HotSpot
  compiles by default.
- Under `spark-submit` (the JVM is already up) the master and configuration are spark-submit's;
  `spark-submit --driver-java-options -XX:-DontCompileHugeMethods --conf
  spark.executor.extraJavaOptions=-XX:-DontCompileHugeMethods` gives a job the same speed.
- A session made here gives a task no second try (`spark.task.maxFailures` 1): a store that is
  missing or another store on an executor fails the job at once (locate.py), and a task that
  fails once fails again. Such a failure reaches the caller as `StoreMismatch` (exit 11) with
  the worker's one-line message, also appended to the log.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..ownership import private_folder
from ..errors import StoreMismatch
from . import AnalyticsFailed, AnalyticsUnavailable
from .locate import unwire
from .planning import tune

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EMBEDDED = "local[*]"
# HotSpot leaves methods of more than 8,000 bytes of bytecode to its interpreter; the code
# Spark generates for the decoding of report labels (labels.py) is such a method, and runs
# two to three times slower interpreted (measured: routes over 200,000 reports, 10.5 against
# 4.5 CPU seconds in the tasks). Driver (local mode's executor) and executors compile them, in
# sessions for jobs that decode labels so (`sql_labels`: routes over Parquet exports or a
# reports file). Elsewhere compiling every huge method costs more than it saves: routes over
# 2,000,000 reports read by the mqstore source, which decodes labels itself, took 13.8 s in
# its second round with the option and 10.0 s without (first rounds 25.9 and 24.9 s).
JIT_HUGE_METHODS = "-XX:-DontCompileHugeMethods"
JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


@dataclass
class SparkSetup:
    spark: SparkSession
    owned: bool              # made here (and stopped here) rather than found active
    master: str
    log_file: str | None     # where the JVM's stderr went, when the JVM was started here
    start_seconds: float     # how long getting the session took (JVM start-up included)


def configured_master() -> str | None:
    """`spark.master` from Spark's own configuration, if any (see the module docstring)."""
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    for i, arg in enumerate(args):
        if arg == "--master" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--master="):
            return arg.split("=", 1)[1]
    return spark_default("spark.master")


def spark_default(key: str) -> str | None:
    """`key` from `$SPARK_CONF_DIR/spark-defaults.conf` or `$SPARK_HOME/conf/spark-defaults.conf`."""
    dirs = [os.environ.get("SPARK_CONF_DIR")]
    if os.environ.get("SPARK_HOME"):
        dirs.append(os.path.join(os.environ["SPARK_HOME"], "conf"))
    for d in filter(None, dirs):
        conf = Path(d) / "spark-defaults.conf"
        try:
            lines = conf.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            parts = line.split(None, 1)
            if len(parts) == 2 and parts[0] == key:
                return parts[1].strip()
    return None


def _embedded_memory() -> str:
    """A quarter of this machine's memory, between 1 and 8 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 4 << 30
    return f"{max(1, min(8, total // 4 >> 30))}g"


KEEP_LOGS = 20


def _log_path() -> str:
    """A new log file; the oldest go once there are more than KEEP_LOGS."""
    folder = Path(tempfile.gettempdir()) / f"mqcli-spark-{os.getuid()}"
    # $TMPDIR is shared: a folder of that name another user made (or opened to others) could
    # be read or fed links into; it is refused (exit 11), never written into
    private_folder(folder, "the Spark log folder")
    old = sorted(folder.glob("spark-*.log"), key=lambda p: p.stat().st_mtime)
    for stale in old[:max(0, len(old) - KEEP_LOGS + 1)]:
        stale.unlink(missing_ok=True)
    return str(folder / f"spark-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{secrets.token_hex(3)}.log")


@contextmanager
def _stderr_to(path: str) -> Iterator[None]:
    """Point file descriptor 2 at `path` while the block runs (processes started meanwhile,
    the JVM, keep it)."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def new_session(master: str | None = None, app_name: str = "mqcli analyze",
                conf: dict[str, str] | None = None, *, sql_labels: bool = False) -> SparkSetup:
    """The active SparkSession, or a new one (see the module docstring)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise AnalyticsUnavailable("Spark needs Java 17 or later and none was found: install a Java "
                                   "runtime (e.g. `apt-get install default-jre-headless`) or set JAVA_HOME")
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from pyspark.logger import PySparkLogger
    from pyspark.sql import SparkSession

    # PySpark logs each failed query's context to stderr as JSON; the failure itself reaches
    # the caller as an exception (and mqcli's one-line error)
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).disabled = True

    from .source import MqStoreDataSource

    started = time.perf_counter()
    active = SparkSession.getActiveSession()
    if active is not None:
        active.dataSource.register(MqStoreDataSource)
        tune(active, owned=False)
        return SparkSetup(active, False, str(active.sparkContext.master), None, time.perf_counter() - started)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name).config("spark.ui.showConsoleProgress", "false")
    builder = builder.config("spark.sql.session.timeZone", "UTC").config("spark.task.maxFailures", "1")
    # a Python worker that imports pyspark and the store on a busy machine can take longer
    # than Spark's 15 s to connect back; the job then fails ("failed to connect back")
    builder = builder.config("spark.python.authenticate.socketTimeout", "120s")
    # under spark-submit the JVM is already up with spark-submit's master and configuration
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    chosen = master or configured_master() or ("" if submitted else EMBEDDED)
    if master is not None or not (submitted or configured_master()):
        builder = builder.master(chosen)
    if chosen.startswith("local") and not submitted:
        if not os.environ.get("SPARK_DRIVER_MEMORY"):
            # the driver is the whole cluster here: Spark's 1 GiB default spends its time in
            # garbage collection once a few million reports are shuffled
            builder = builder.config("spark.driver.memory", _embedded_memory())
        builder = builder.config("spark.ui.enabled", "false")
    if (chosen.startswith("local") or _loopback_master(chosen)) and not submitted:
        # a cluster on this host's loopback (tests, a one-host trial) reaches the driver there
        builder = (builder.config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.driver.host", "127.0.0.1"))
    extra = dict(conf or {}) if submitted else with_java_options(conf or {}, sql_labels=sql_labels)
    for key, value in extra.items():
        builder = builder.config(key, value)
    log_file = None if submitted else _log_path()
    try:
        if log_file is None:
            spark = builder.getOrCreate()
        else:
            with _stderr_to(log_file):
                spark = builder.getOrCreate()
    except Exception as exc:
        where = f"; see {log_file}" if log_file else ""
        raise AnalyticsFailed(f"Spark could not start ({_first_line(exc)}){where}") from None
    spark.dataSource.register(MqStoreDataSource)
    try:
        tune(spark)
    except Exception:
        spark.stop()
        raise
    return SparkSetup(spark, True, str(spark.sparkContext.master), log_file, time.perf_counter() - started)


def with_java_options(conf: dict[str, str], *, sql_labels: bool) -> dict[str, str]:
    """`conf` with the JVM options of the sessions mqcli makes (JIT_HUGE_METHODS when
    `sql_labels`) added to spark-defaults.conf's and the caller's own, which a setting would
    otherwise replace."""
    extra = dict(conf)
    for key in JAVA_OPTION_KEYS:
        extra[key] = " ".join(filter(None, [JIT_HUGE_METHODS if sql_labels else None, spark_default(key),
                                            extra.get(key)]))
    return extra


@contextmanager
def spark_session(master: str | None = None, app_name: str = "mqcli analyze",
                  conf: dict[str, str] | None = None, *, sql_labels: bool = False) -> Iterator[SparkSetup]:
    """`new_session` for the length of a block; a session made here is stopped after it, and
    a Spark failure inside becomes AnalyticsFailed naming the log."""
    setup = new_session(master, app_name, conf, sql_labels=sql_labels)
    try:
        yield setup
    except Exception as exc:
        if _is_spark_error(exc):
            mismatch = unwire(str(exc))
            if mismatch is not None:
                _log(setup.log_file, f"mqcli: error: {mismatch} [{StoreMismatch.status}]")
                raise StoreMismatch(mismatch) from None
            where = f"; see {setup.log_file}" if setup.log_file else ""
            raise AnalyticsFailed(f"the Spark job failed: {_first_line(exc)}{where}") from exc
        raise
    finally:
        if setup.owned:
            setup.spark.stop()


def _log(log_file: str | None, line: str) -> None:
    if log_file is None:
        return
    try:
        with open(log_file, "a") as log:
            log.write(line + "\n")
    except OSError:
        pass  # the error still reaches the command line


def _loopback_master(url: str) -> bool:
    """A standalone master on this host's loopback (`spark://127.0.0.1:7077`, `localhost`)."""
    if not url.startswith("spark://"):
        return False
    host = url[len("spark://"):].split(",")[0].rsplit(":", 1)[0]
    return host in ("localhost", "[::1]") or host.startswith("127.")


def _is_spark_error(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return module.startswith(("pyspark", "py4j"))


def _first_line(exc: BaseException) -> str:
    """The error's first line; Py4J's ("An error occurred while calling o794.parquet.") with the
    next, which names the Java exception and its message (the cause)."""
    lines = [line.strip() for line in (str(exc).strip() or type(exc).__name__).splitlines() if line.strip()]
    line = lines[0]
    if line.startswith("An error occurred while calling") and len(lines) > 1:
        line = f"{line.rstrip('.')}: {lines[1].lstrip(': ')}"
    return line[:300]
