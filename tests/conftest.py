import pytest

from store import Store


def pytest_collection_modifyitems(config, items):
    """With pytest-xdist (pyproject's addopts: a worker per core), every Spark test runs in the
    same worker, so a run starts one SparkSession and one standalone cluster, not one per core
    (each takes a JVM, seconds and a core or two)."""
    for item in items:
        if item.get_closest_marker("spark") is not None or {"spark", "spark_cluster"} & set(item.fixturenames):
            item.add_marker(pytest.mark.xdist_group("spark"))


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
    """A real standalone cluster (tests/cluster_helpers.py): a Master and two Workers on
    127.0.0.1, one core and 1 GiB each, stopped after the run. Yields its master URL."""
    import shutil

    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not __import__("os").environ.get("JAVA_HOME"):
        pytest.skip("a standalone cluster needs Java")
    from cluster_helpers import StandaloneCluster

    cluster = StandaloneCluster(tmp_path_factory.mktemp("cluster")).start()
    try:
        yield cluster.url
    finally:
        cluster.stop()
