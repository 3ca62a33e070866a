"""Issue 22: `analyze routes --reports FILE` and `trace route --reports FILE MSG` on reports no
mqcli store wrote, e.g. an export of a Windows report queue. The vector file
tests/vectors/msmq_report_queue.jsonl is written by hand from the documented label and body
forms: a route through a routing server (SRC01 > RS01 > TGT01), a message lost after the
routing server, a loop (RS01 > RS02 > RS01) that is then delivered, and one conflict report."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from cli_helpers import invoke

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark")]  # analyze run in-process uses it

VECTORS = Path(__file__).parent / "vectors" / "msmq_report_queue.jsonl"


def as_csv(tmp_path: Path) -> Path:
    path = tmp_path / "reports.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["Label", "Body", "Arrived"])  # names are case-insensitive, as PowerShell writes them
        for line in VECTORS.read_text().splitlines():
            row = json.loads(line)
            w.writerow([row["label"], row["body"], row["arrived"]])
    return path


@pytest.mark.parametrize("form", ["jsonl", "csv"])
def test_routes_from_a_report_file_find_the_routing_server_route_the_lost_message_and_the_loop(form, spark, tmp_path):
    from store.analytics.pipeline import Source, run_routes

    path = VECTORS if form == "jsonl" else as_csv(tmp_path)
    source = Source(reports=str(path))
    source.check()
    report = run_routes(spark, source)
    try:
        assert report.summary == {"reports": 16, "invalid_reports": 0, "conflict_reports": 1, "routes": 3,
                                  "complete": 2, "incomplete": 1, "loops": 1}
        from store.analytics.outputs import to_records

        routes = {r["msg_id"]: r for r in to_records(report.result.routes)}
        links = {(r["from_qm"], r["to_qm"]): r for r in report.links}
    finally:
        report.close()
    assert {k: (r["path"], r["hops"], r["complete"], r["loop"]) for k, r in routes.items()} == {
        "SRC01\\1": (["SRC01", "RS01", "TGT01"], 2, True, False),
        "SRC01\\2": (["SRC01", "RS01"], 1, False, False),
        "SRC01\\3": (["SRC01", "RS01", "RS02", "RS01", "TGT01"], 4, True, True)}
    assert routes["SRC01\\3"]["repeated"] == ["RS01"]
    # the labels' times (whole seconds), not the arrivals: sent 15:15:42, received 15:15 (no
    # seconds: read as the 15:15:43 of the step before it, which that minute holds)
    assert routes["SRC01\\1"]["latency_ms"] == 1000.0
    # per link: the next hop's first report minus this hop's `sent from`
    assert {k: (r["count"], r["max_ms"]) for k, r in links.items()} == {
        ("SRC01", "RS01"): (3, 0.0), ("RS01", "TGT01"): (2, 0.0),
        ("RS01", "RS02"): (1, 0.0), ("RS02", "RS01"): (1, 1000.0)}
    assert all(r["p50_ms"] >= 0 for r in links.values())


def test_analyze_routes_reports_json_output(tmp_path):
    result = invoke(["analyze", "routes", "--reports", VECTORS, "-o", "json"])
    assert result.code == 0, result
    assert sorted(r["msg_id"] for r in result.json()) == ["SRC01\\1", "SRC01\\2", "SRC01\\3"]


@pytest.mark.parametrize(("content", "name", "where"), [
    ('{"label": "x", "body": "y"}\n', "r.jsonl", "row 1, column 'arrived': missing"),
    ('{"label": "x", "body": "y", "arrived": "2026-11-22T15:15:42Z"}\n[1]\n', "r.jsonl", "row 2: not a JSON object"),
    ('{"label": 5, "body": "y", "arrived": "2026-11-22T15:15:42Z"}\n', "r.jsonl", "row 1, column 'label': not a string"),
    ("label,body,arrived\nx,y,2026-11-22T15:15:42Z\nx,y,2026-11-22 15:15\n", "r.csv", "row 2, column 'arrived'"),
    ("label,body\nx,y\n", "r.csv", "no column 'arrived'"),
    ("label,body,arrived\nx,y\n", "r.csv", "row 1: 2 columns"),
])
def test_malformed_report_rows_exit_12_naming_row_and_column(content, name, where, tmp_path):
    path = tmp_path / name
    path.write_text(content)
    for args in (["analyze", "routes", "--reports", path], ["trace", "route", "1A2B:00000001", "--reports", path]):
        result = invoke(args)
        assert result.code == 12 and where in result.stderr and "Traceback" not in result.stderr, (args, result)


def test_report_file_is_bounded_in_rows_and_bytes(tmp_path):
    from store.errors import BadData
    from store.reportfile import read

    path = tmp_path / "r.jsonl"
    path.write_text('{"label": "x", "body": "y", "arrived": "2026-11-22T15:15:42Z"}\n' * 3)
    assert len(read(path, max_rows=3)) == 3
    with pytest.raises(BadData, match="more than 2 rows"):
        read(path, max_rows=2)
    with pytest.raises(BadData, match="larger than 100 bytes"):
        read(path, max_bytes=100)


def test_trace_route_reports_follows_one_message_and_counts_its_conflicts(tmp_path):
    result = invoke(["trace", "route", "1A2B:00000001", "--reports", VECTORS, "-o", "json"])
    assert result.code == 0, result
    steps = result.json()
    assert [(s["hops"], s["event"], s["computer"], s["next_hop"]) for s in steps] == [
        (0, "sent", "SRC01", "10.0.0.2"), (1, "received", "RS01", None),
        (1, "sent", "RS01", "10.0.0.3:1801"), (2, "received", "TGT01", None)]
    assert [s["since_previous_us"] for s in steps] == [None, 0, 1_000_000, 0]
    assert "1 conflict report(s)" in result.stderr
    missing = invoke(["trace", "route", "1A2B:00000009", "--reports", VECTORS])
    assert missing.code == 4, missing


def test_routes_and_trace_route_take_the_events_times_not_the_arrivals(spark, tmp_path):
    """A hop's `sent` report that reached the report queue late, the next hop's `received`
    early: the labels say 1 s a link, and analyze routes and trace route agree on it."""
    from store.analytics.pipeline import Source, run_routes
    from test_trace_report_file import LATE_REPORT, jsonl

    path = jsonl(tmp_path, LATE_REPORT)
    source = Source(reports=str(path))
    source.check()
    report = run_routes(spark, source)
    try:
        links = {(r["from_qm"], r["to_qm"]): (r["count"], r["p50_ms"], r["max_ms"]) for r in report.links}
    finally:
        report.close()
    assert links == {("SRC01", "RS01"): (1, 1000.0, 1000.0), ("RS01", "TGT01"): (1, 1000.0, 1000.0)}
    steps = invoke(["trace", "route", "1A2B:00000001", "--reports", path, "-o", "json"]).json()
    assert [s["since_previous_us"] / 1000 for s in steps if s["event"] == "received"] == [
        links[("SRC01", "RS01")][2], links[("RS01", "TGT01")][2]]
