"""`analyze health` and `analyze routes` on a real standalone cluster (a Master and two Workers,
the session's one, tests/conftest.py `spark_cluster`) give local mode's results; the reads are cut so that both executor
cores have work. Both commands run in the session's one application on the cluster
(tests/conftest.py `cluster_app`): each application start costs tens of seconds."""

from __future__ import annotations

import pytest

from analytics_helpers import new_guid, put_reports, report, route_events
from cli_helpers import invoke
from store import NewMessage, Store

pytestmark = [pytest.mark.spark, pytest.mark.slow]

START = 1_700_000_000_000_000
TARGET = "DIRECT=OS:qmB\\orders"
# what does not depend on when the command ran
HEALTH_FIELDS = ("store_guid", "queue", "depth", "bytes", "available", "in_flight", "expired", "backouts",
                 "by_priority")


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster-stores")
    a, b = new_guid(), new_guid()
    paths = []
    for name, events_at in (("qmA", a), ("qmB", b)):
        path = root / name
        with Store.open(path, create=True, name=name) as st:
            st.create_queue("orders")
            st.put_many("orders", [NewMessage(b"o" * (i + 1), priority=i % 8) for i in range(300)])
            st.get_many("orders", 4, confirm_id=3)
            reports = []
            for m in range(60):
                for i, ev in enumerate(route_events([a, b], START + m * 10_000, [1_000 + 17 * m])):
                    if ev.computer == events_at:
                        reports.append(report(a, m, TARGET, ev, m * 10 + i))
            put_reports(st, reports)
        paths.append(str(path))
    return paths


def _cluster(app, command, paths):
    result = app.run(["analyze", command, *paths, "-o", "json"])
    assert result.code == 0, result
    return result.json()


def test_health_and_routes_on_a_standalone_cluster_equal_local_mode(spark, cluster_app, stores):
    local = invoke(["analyze", "health", *stores, "-o", "json"])
    assert local.code == 0, local
    on_cluster = _cluster(cluster_app, "health", stores)
    pick = [{k: r[k] for k in HEALTH_FIELDS} for r in local.json()]
    assert [{k: r[k] for k in HEALTH_FIELDS} for r in on_cluster] == pick
    assert {r["queue"]: r["depth"] for r in pick if r["queue"] == "orders"} == {"orders": 300}

    local = invoke(["analyze", "routes", *stores, "-o", "json"])
    assert local.code == 0, local
    routes = sorted(local.json(), key=lambda r: r["msg_id"])
    assert len(routes) == 60 and all(r["complete"] for r in routes)
    assert sorted(_cluster(cluster_app, "routes", stores), key=lambda r: r["msg_id"]) == routes
