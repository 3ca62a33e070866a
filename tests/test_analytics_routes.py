"""`mqcli analyze routes` rebuilds traced messages' routes from trace reports spread over several
stores: paths in hop order, hop counts, completion, loops, per-link latency percentiles (each
link's latencies are known from how the reports were made), undecodable reports counted; the
same from Parquet exports; --out and --plot; and the reports the store itself makes."""

from __future__ import annotations

import math
import re

import pytest

from analytics_helpers import put_reports, report, route_events
from cli_helpers import invoke
from store import Store

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark")]  # analyze run in-process uses it

TARGET = "DIRECT=OS:qmC\\orders"
START = 1_700_000_000_000_000
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def nearest_rank(values, p):
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


@pytest.fixture(scope="module")
def topology(tmp_path_factory):
    """Stores qmA, qmB, qmC; traced messages from qmA: 40 delivered A→B→C, 8 stuck at B, 6 that
    loop A→B→A→C, 4 local to A; each report kept by the store where its event happened; one
    report with a label that does not decode. Returns paths, GUIDs, expected routes and links."""
    root = tmp_path_factory.mktemp("routes")
    paths = {qm: root / f"qm{qm}" for qm in "ABC"}
    guids = {}
    for qm, path in paths.items():
        with Store.open(path, create=True, name=f"qm{qm}") as st:
            guids[qm] = st.info().guid
    A = guids["A"]
    kinds = [("ABC", True)] * 40 + [("AB", False)] * 8 + [("ABAC", True)] * 6 + [("A", True)] * 4
    per_store = {qm: [] for qm in "ABC"}
    expected, links = {}, {}
    for n, (path, delivered) in enumerate(kinds, 1):
        hops = [guids[q] for q in path]
        link_us = [1000 + 37 * n + 500 * k for k in range(len(path) - 1)]
        for k, us in enumerate(link_us):
            links.setdefault((hops[k], hops[k + 1]), []).append(us)
        for i, ev in enumerate(route_events(hops, START + n * 10_000, link_us, delivered=delivered)):
            qm = next(q for q in "ABC" if guids[q] == ev.computer)
            per_store[qm].append(report(A, n, TARGET, ev, 1000 * n + i))
        expected[f"{A}\\{n}"] = {"hops": len(path) - 1, "path": hops, "complete": delivered,
                                 "loop": len(set(path)) < len(path)}
    from store.records import Message

    per_store["A"].append(Message(b"not a body", label="not a label", report=True, express=True,
                                  correl_id=f"{A}\\999", props={"mqcli.event": "sent"}))
    for qm, messages in per_store.items():
        with Store.open(paths[qm]) as st:
            put_reports(st, messages)
    return {"paths": [str(paths[q]) for q in "ABC"], "guids": guids, "routes": expected, "links": links,
            "reports": sum(len(m) for m in per_store.values())}


def _routes_json(*args):
    result = invoke(["analyze", "routes", *map(str, args), "-o", "json"])
    assert result.code == 0, result
    return {r["msg_id"]: r for r in result.json()}


def test_routes_are_rebuilt_from_reports_in_hop_order(topology):
    got = _routes_json(*topology["paths"])
    assert set(got) == set(topology["routes"])
    for msg_id, want in topology["routes"].items():
        r = got[msg_id]
        assert {k: r[k] for k in ("hops", "path", "complete", "loop")} == want, msg_id
        assert r["target_queue"] == TARGET
        assert r["qm_id"] == topology["guids"]["A"][:4].upper()
        assert (r["delivered"] is not None) == want["complete"]
    loop = next(r for r in got.values() if r["loop"])
    assert loop["repeated"] == [topology["guids"]["A"]]
    assert loop["path"][0] == loop["path"][2] == topology["guids"]["A"]


def test_link_latency_percentiles_and_summary(spark, topology):
    from store.analytics.pipeline import Source, run_routes

    source = Source(stores=list(topology["paths"]))
    source.check()
    report_ = run_routes(spark, source)
    try:
        assert report_.summary == {
            "reports": topology["reports"], "invalid_reports": 1, "conflict_reports": 0, "routes": 58, "complete": 50,
            "incomplete": 8, "loops": 6}
        got = {(r["from_qm"], r["to_qm"]): r for r in report_.links}
        assert set(got) == set(topology["links"])
        for link, values in topology["links"].items():
            r = got[link]
            assert r["count"] == len(values)
            for p in (0.5, 0.95, 0.99):
                assert r[f"p{round(p * 100)}_ms"] == nearest_rank(values, p) / 1000, (link, p)
            assert r["max_ms"] == max(values) / 1000
            assert r["mean_ms"] == pytest.approx(sum(values) / len(values) / 1000)
        # the links as a DataFrame (`-o parquet`, --output-dir) are the links totals() gives
        assert [row.asDict() for row in report_.result.links.collect()] == report_.links
    finally:
        report_.close()


def test_routes_text_output_names_queue_managers_and_lists_what_is_wrong(topology):
    result = invoke(["analyze", "routes", *topology["paths"], "--limit", "3"])
    assert result.code == 0, result
    out = result.out
    assert "qmA > qmB" in out and "qmB > qmC" in out and "qmB > qmA" in out
    assert "incomplete routes (never reached their target queue) (first 3 of 8)" in out
    assert "loops (first 3 of 6)" in out
    assert re.search(r"^invalid_reports +1$", out, re.M) and re.search(r"^conflict_reports +0$", out, re.M)


def test_routes_plot_is_a_png(topology, tmp_path):
    plot = tmp_path / "links.png"
    result = invoke(["analyze", "routes", *topology["paths"], "--plot", plot, "-q"])
    assert result.code == 0, result
    data = plot.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 5000
    assert int.from_bytes(data[16:20], "big") >= 600


def test_routes_out_datasets_read_back_in_spark_and_pandas(spark, topology, tmp_path):
    pd = pytest.importorskip("pandas")
    for fmt in ("parquet", "csv", "json"):
        out = tmp_path / fmt
        result = invoke(["analyze", "routes", *topology["paths"], "--out", out, "--format", fmt, "-q"])
        assert result.code == 0, result
        part = next(f for f in (out / "routes").iterdir() if f.name.startswith("part-"))
        reader = {"parquet": lambda d: spark.read.parquet(d),
                  "csv": lambda d: spark.read.option("header", True).option("escape", '"').csv(d),
                  "json": lambda d: spark.read.json(d)}[fmt]
        frame = {"parquet": pd.read_parquet, "csv": pd.read_csv,
                 "json": lambda f: pd.read_json(f, lines=True)}[fmt](part)
        assert sorted(frame["msg_id"]) == sorted(topology["routes"]), fmt
        back = {r["msg_id"]: r for r in reader(str(out / "routes")).collect()}
        assert set(back) == set(topology["routes"])
        complete = {m for m, r in back.items() if str(r["complete"]).lower() == "true"}
        assert complete == {m for m, r in topology["routes"].items() if r["complete"]}, fmt
        links = reader(str(out / "links")).collect()
        assert sorted(int(r["count"]) for r in links) == sorted(len(v) for v in topology["links"].values())


def test_routes_of_parquet_exports_equal_the_stores(topology, tmp_path):
    exports = tmp_path / "exports"
    exports.mkdir()
    for path in topology["paths"]:
        result = invoke(["--store", path, "export", "--format", "parquet", "--to", exports / (path[-3:] + ".parquet")])
        assert result.code == 0, result
    assert _routes_json("--parquet", exports) == _routes_json(*topology["paths"])


def test_reports_made_by_the_store_give_a_route(tmp_path):
    """A traced put makes its report through the store's own generation (store/reports.py)."""
    path = tmp_path / "qm"
    with Store.open(path, create=True, name="qm") as st:
        st.create_queue("orders")
        st.create_queue("reports")
        traced = st.put("orders", b"traced", trace=True, report_queue="reports")
        guid = st.info().guid
        made = len(st.browse("reports", limit=100))
    assert made >= 1
    routes = _routes_json(path)
    assert traced.msg_id in routes
    r = routes[traced.msg_id]
    assert r["path"][0] == guid and r["hops"] == 0 and r["complete"] is True and r["loop"] is False


def test_machine_names_and_guids_come_back_as_the_reports_wrote_them(spark, tmp_path):
    """Steps are keyed by numbers (store/analytics/computers.py); paths, loops, msg_ids and
    links give back every computer as written, machine names and GUIDs alike, from stores and
    from Parquet exports."""
    from analytics_helpers import new_guid

    path = tmp_path / "qm"
    with Store.open(path, create=True, name="qm") as st:
        origin = st.info().guid
    b, d = new_guid(), "00000000-0000-0000-0000-000000000000"
    kinds = {1: ["HOSTA", b, "host-c.example"], 2: ["HOSTA", b, "HOSTA", d], 3: [b, "0", d]}
    messages, expected, links = [], {}, {}
    for n, hops in kinds.items():
        link_us = [700 + 100 * n + k for k in range(len(hops) - 1)]
        for k, us in enumerate(link_us):
            links.setdefault((hops[k], hops[k + 1]), []).append(us)
        messages += [report(origin, n, TARGET, ev, 100 * n + i)
                     for i, ev in enumerate(route_events(hops, START + n * 10_000, link_us))]
        expected[f"{hops[0]}\\{n}"] = {"path": hops, "loop": n == 2, "repeated": ["HOSTA"] if n == 2 else []}
    with Store.open(path) as st:
        put_reports(st, messages)
    got = _routes_json(path)
    assert {m: {k: r[k] for k in ("path", "loop", "repeated")} for m, r in got.items()} == expected
    from store.analytics.pipeline import Source, run_routes

    report_ = run_routes(spark, Source(stores=[str(path)]))
    try:
        assert {(r["from_qm"], r["to_qm"]): r["count"] for r in report_.links} == {
            link: len(values) for link, values in links.items()}
    finally:
        report_.close()
    exported = tmp_path / "qm.parquet"
    assert invoke(["--store", path, "export", "--format", "parquet", "--to", exported]).code == 0
    assert _routes_json("--parquet", exported) == got


def test_a_hop_whose_clock_is_behind_keeps_the_routes_start_and_shows_in_its_link(tmp_path):
    # C's clock 3 s behind: the route "started" at C's report (the earliest of all clocks), its
    # latency came out 0.0 ms, and the link's text showed only positive percentiles
    paths = {qm: tmp_path / f"qm{qm}" for qm in "ABC"}
    guids = {}
    for qm, path in paths.items():
        with Store.open(path, create=True, name=f"qm{qm}") as st:
            guids[qm] = st.info().guid
    A, hops = guids["A"], [guids[q] for q in "ABC"]
    per_store = {qm: [] for qm in "ABC"}
    for i, ev in enumerate(route_events(hops, START, [20_000, 15_000 - 3_000_000])):
        per_store[next(q for q in "ABC" if guids[q] == ev.computer)].append(report(A, 1, TARGET, ev, i))
    for qm, messages in per_store.items():
        with Store.open(paths[qm]) as st:
            put_reports(st, messages)
    (route,) = _routes_json(*paths.values()).values()
    assert route["started"].startswith("2023-11-14T22:13:20.000000")  # START: A's enqueued report
    assert route["latency_ms"] == pytest.approx((100 + 20_000 + 100 + 15_000 - 3_000_000) / 1000)
    result = invoke(["analyze", "routes", *map(str, paths.values())])
    assert result.code == 0, result
    assert "1 link(s) go back in time, by up to 2985.000 ms: the queue managers' clocks differ" in result.stderr
    assert "-2985" in result.stdout.decode()
