"""Stores on many hosts (README.md "Stores on many hosts"), on the session's real standalone cluster
(tests/conftest.py `spark_cluster`), whose Workers run in mount namespaces of their own with a
tmpfs over the stores' directory, as executors on other hosts would see it:

- `analyze --snapshots DIR` (DIR visible to it) gives the figures of a direct local scan;
- reading the stores directly fails at once, exit 11, with a one-line error naming the store,
  the GUIDs and the executor host: a hidden store is missing, and a different store planted at
  the same path is refused by its GUID, never read.

The commands run in the session's one application on the cluster (tests/conftest.py
`cluster_app`), except the last: the installed `mqcli` in a process of its own, so that the
whole command line (`--master` parsed, a session made, the job's failure, its exit code and
one-line error) runs end to end on the cluster at least once.
"""

from __future__ import annotations

import socket

import pytest

from analytics_helpers import put_reports, report, route_events
from cli_helpers import invoke, run_mqcli
from cluster_helpers import REPO
from store import Store

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.usefixtures("spark")]

T0 = 1_790_000_000_000_000


@pytest.fixture(scope="module")
def hosts(spark_cluster, cluster_app, tmp_path_factory):
    if spark_cluster.hide_skip is not None:
        pytest.skip(spark_cluster.hide_skip)
    work = tmp_path_factory.mktemp("hosts")
    stores, snaps = spark_cluster.hidden, work / "snaps"
    guids = {}
    for n, name in enumerate(("qm1", "qm2")):
        with Store.open(stores / name, create=True, name=name) as st:
            st.create_queue("orders")
            st.create_queue("idle")
            st.put("orders", b"x" * (n + 1))
            guids[name] = st.info().guid
    with Store.open(stores / "qm1") as st:
        path = [guids["qm1"], guids["qm2"]]
        put_reports(st, [report(guids["qm1"], i, "DIRECT=OS:qm2\\orders", ev, 1000 + 10 * i + k)
                         for i in range(1, 6)
                         for k, ev in enumerate(route_events(path, T0 + i * 1000, [500 * i]))])
    for name in guids:
        assert invoke(["--store", stores / name, "snapshot", snaps, "-q"]).code == 0
    guids["planted"] = spark_cluster.planted_guid  # the Workers' qm2: same name, another GUID
    return cluster_app, stores, snaps, guids


def _without_ages(rows):
    return sorted(({k: v for k, v in r.items() if k != "oldest_age_s"} for r in rows),
                  key=lambda r: (r.get("store", ""), r.get("queue", "")))


def test_snapshots_on_a_worker_that_cannot_see_the_stores_give_a_local_scans_figures(hosts):
    app, stores, snaps, _ = hosts
    local = invoke(["analyze", "health", stores / "qm1", stores / "qm2", "-o", "json"])
    remote = app.run(["analyze", "health", "--snapshots", snaps, "-o", "json"])
    assert local.code == 0 and remote.code == 0, (local, remote)
    assert _without_ages(remote.json()) == _without_ages(local.json())
    local = invoke(["analyze", "routes", stores / "qm1", "-o", "json"])
    remote = app.run(["analyze", "routes", "--snapshots", snaps, "--queue", "reports", "-o", "json"])
    assert local.code == 0 and remote.code == 0, (local, remote)
    assert remote.json() == local.json() and len(local.json()) == 5


def test_reading_hidden_or_planted_stores_directly_fails_at_once_naming_store_guid_and_host(hosts):
    app, stores, _, guids = hosts
    host = socket.gethostname()
    missing = app.run(["analyze", "health", stores / "qm1", "-o", "json"])
    assert missing.code == 11, missing
    assert missing.error_json()["error"]["message"] == (
        f"the store {stores / 'qm1'} is missing on executor host {host} (expected store GUID "
        f"{guids['qm1']}, found none); the job reads nothing of it")
    app.stop()  # it holds every Worker core: the next application would wait for executors
    planted = run_mqcli(["analyze", "health", stores / "qm2", "--master", app.url], timeout=600,
                        env={"SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(REPO)})
    assert planted.code == 11, planted
    assert planted.err_lines == [
        f"mqcli: error: the store {stores / 'qm2'} on executor host {host} is another store (expected GUID "
        f"{guids['qm2']}, found {guids['planted']}); the job reads nothing of it [MQ_ERROR_STORE_MISMATCH]"]
