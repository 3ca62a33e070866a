"""Smoke test for the stats part of the CLI benchmark (bench/cli_stats.py): `python -m bench cli
--only stats` at a tiny size runs end to end (the installed `mqcli` entry point against a deep
and an empty store) and writes both timings, the in-process reads and the ratio target. No
timing thresholds: the target may be met or missed."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MQCLI = os.path.join(os.path.dirname(sys.executable), "mqcli")

pytestmark = pytest.mark.skipif(not os.access(MQCLI, os.X_OK),
                                reason=f"no mqcli entry point next to {sys.executable}")


def test_bench_cli_stats_quick_runs_and_writes_json(tmp_path):
    out = tmp_path / "cli.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "cli", "--only", "stats", "--stats-messages", "2000",
         "--stats-runs", "2", "--out", str(out), "--tmpdir", str(tmp_path / "work")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "stats --prometheus, 100 queues" in proc.stdout
    doc = json.loads(out.read_text())
    s = doc["stats"]
    assert (s["queues"], s["messages"], s["held_in_flight"], s["runs"]) == (100, 2000, 100, 2)
    for name in ("empty", "deep"):
        r = s["results"][name]
        assert r["wall_s"]["median"] > 0 and r["in_process_read_s"]["median"] > 0, name
    t = doc["targets"]["stats_prometheus_ratio"]
    assert t["op"] == "<=" and t["limit"] == 1.2 and t["value"] > 0
    assert t["met"] == (t["value"] <= 1.2)
    assert list(doc["targets"]) == ["stats_prometheus_ratio"]
