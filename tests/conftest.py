import os
import warnings

import pytest

from store import Store


# Every JVM the tests start (the session's, the standalone cluster's Master, Workers and
# executors, spark-submit's, the analytics bench's) inherits this: HotSpot compiles with C1
# only. The tests' Spark jobs are small and their JVMs short-lived, so C2's optimising
# compiles cost far more CPU than they save (the six tests of test_analytics_health.py: 190 s
# of CPU with C2, 117 s without); results do not depend on the compiler. Each JVM notes the
# option on its stderr ("Picked up JAVA_TOOL_OPTIONS"), which the analytics code sends to
# its log file. A JAVA_TOOL_OPTIONS already set is kept.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")

SHARED_SPARK = {"spark", "spark_cluster"}  # the session's one SparkSession and one standalone cluster


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the group markers
def pytest_collection_modifyitems(config, items):
    """With pytest-xdist (pyproject's addopts: a worker per core, `--dist loadgroup`):

    - every test that uses the session's SparkSession or standalone cluster runs in the same
      worker, so a run starts one of each, not one per core (each takes a JVM, seconds and a core
      or two). A `spark` test that uses neither starts its own application in a subprocess
      (spark-submit, the analytics bench) and may run in another worker meanwhile: the group is
      the run's longest stretch of work in one worker.
    - in a worker, the `slow` tests come first: the group goes out first (xdist hands out its
      largest unit first), then each worker takes the next test as it frees up, so the long
      tests start early and the short ones even out the end of the run instead of one long
      test running alone at the end."""
    for item in items:
        if SHARED_SPARK & set(item.fixturenames):
            item.add_marker(pytest.mark.xdist_group("spark"))
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_collection_finish(session):
    """xdist groups a test by a suffix it adds to the test's node id (`…@spark`); where that
    does not take (pytest 9.2's node ids with xdist 3.8), every worker starts its own
    SparkSession and may start its own cluster: say so in the run's warnings."""
    config = session.config
    if not (hasattr(config, "workerinput") and config.getvalue("loadgroup")):
        return
    lost = [item.nodeid for item in session.items
            if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid]
    if lost:
        warnings.warn(pytest.PytestConfigWarning(
            f"pytest-xdist did not put {len(lost)} Spark tests in their group (e.g. {lost[0]}) under pytest "
            f"{pytest.__version__}: each worker starts its own SparkSession; install the test extra's pytest"), stacklevel=2)


class FakeClock:
    """A clock tests move by hand, so leases and ttls lapse without sleeping."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def st(tmp_path, clock):
    store = Store.open(tmp_path / "qm", create=True, name="qm1", clock=clock)
    store.create_queue("q")
    yield store
    assert store.check() == []
    store.close()


# ---- CLI tests (tests/test_cli_*.py) -------------------------------------------------------

@pytest.fixture
def cli(tmp_path):
    """`mqcli` bound to a fresh store under tmp_path (via MQCLI_STORE), with a queue `q`."""
    from cli_helpers import Cli

    runner = Cli(tmp_path / "store", tmp_path / "xdg")
    runner.ok("init", "-q")  # only init makes a store
    runner.ok("queue", "create", "q", "-q")
    return runner


@pytest.fixture
def spawn():
    """Start `mqcli ARGS` with Popen; whatever is still running at teardown is killed."""
    import os
    import subprocess

    from cli_helpers import mqcli_command

    started = []

    def start(cli, *args, **kw):
        proc = subprocess.Popen([*mqcli_command(), *map(str, args)], env={**os.environ, **cli.env}, **kw)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- the data pipeline (tests/test_analytics_*.py) -----------------------------------------

@pytest.fixture(scope="session")
def spark():
    """The one local SparkSession of the test run (tests marked `spark`): two cores, no web UI,
    few shuffle partitions, bound to loopback, Python workers on this interpreter. `mqcli
    analyze` run in-process finds it active and uses it."""
    import os
    import sys

    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from store.analytics.session import new_session

    os.environ["PYSPARK_PYTHON"] = sys.executable
    setup = new_session("local[2]", "mqcli tests", conf={
        "spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2",
        "spark.ui.enabled": "false", "spark.driver.bindAddress": "127.0.0.1", "spark.driver.memory": "2g"})
    yield setup.spark
    setup.spark.stop()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """The one real standalone cluster of the test run (tests/cluster_helpers.py), shared by
    tests/test_analytics_cluster.py and tests/test_analytics_hosts.py: a Master and two Workers
    on 127.0.0.1, one core and 1 GiB each, stopped after the run.

    Where `unshare -m` is allowed, both Workers run in mount namespaces of their own with a
    tmpfs over `hidden` (a directory the tests' stores that executors must not see go into),
    holding only `planted`: a different store named qm2 at `hidden / "qm2"` (`planted_guid`).
    `hide_skip` is why not, else None. Other stores are seen by every Worker."""
    import os
    import shutil
    from types import SimpleNamespace

    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("a standalone cluster needs Java")
    from cluster_helpers import StandaloneCluster, unshare_allowed

    root = tmp_path_factory.mktemp("cluster")
    hidden = root / "hidden"
    hidden.mkdir()
    reason = unshare_allowed()
    planted_guid = None
    if reason is None:
        with Store.open(root / "planted", create=True, name="qm2") as planted:  # same name, another GUID
            planted.create_queue("orders")
            planted_guid = planted.info().guid
    cluster = StandaloneCluster(root / "spark", hide=hidden if reason is None else None,
                                plant={"qm2": root / "planted"} if reason is None else None)
    (root / "spark").mkdir()
    cluster.start()
    try:
        yield SimpleNamespace(url=cluster.url, hidden=hidden, planted_guid=planted_guid, hide_skip=reason)
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def cluster_app(spark_cluster, tmp_path_factory):
    """One Spark application on `spark_cluster` that runs `mqcli analyze ... --master URL`
    commands (tests/cluster_helpers.py `ClusterApp`): started at once (it comes up while the
    test makes its stores and runs local mode), stopped after the run or by a test that needs
    the Workers' cores for another application (started again by a later command)."""
    from cluster_helpers import ClusterApp

    app = ClusterApp(spark_cluster.url, tmp_path_factory.mktemp("cluster-app"), env={"SPARK_LOCAL_IP": "127.0.0.1"})
    app.start()
    try:
        yield app
    finally:
        app.stop()
