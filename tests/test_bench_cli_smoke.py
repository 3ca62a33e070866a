"""Smoke test for the CLI benchmark: `python -m bench cli --quick` with tiny sizes runs end to
end (the installed `mqcli` entry point, whole subprocesses) and writes the JSON with every
measurement and target. No timing thresholds: the targets may be met or missed."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MQCLI = os.path.join(os.path.dirname(sys.executable), "mqcli")

TARGETS = {"startup_put_ratio", "startup_get_ratio", "startup_browse_ratio", "startup_version_ratio",
           "startup_put_help_ratio", "startup_help_ratio", "startup_complete_ratio", "bulk_put_rate", "bulk_get_rate",
           "bulk_put_max_rss", "bulk_get_max_rss", "wait_latency_median", "wait_latency_p99",
           "stalled_put_p99", "consume_overhead", "batch_speedup", "stats_prometheus_ratio"}
STARTUP = {"python -c pass", "mqcli put q hello", "mqcli get q", "mqcli browse q", "mqcli --version",
           "mqcli put --help", "mqcli --help", "mqcli __complete queue", "python -c 'import typer'",
           "mqcli put q hello, caller's env"}

pytestmark = pytest.mark.skipif(not os.access(MQCLI, os.X_OK),
                                reason=f"no mqcli entry point next to {sys.executable}")


def test_bench_cli_quick_runs_and_writes_json(tmp_path):
    out = tmp_path / "cli.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "cli", "--quick", "--bulk-messages", "300",
         "--startup-runs", "2", "--latency-samples", "2", "--importtime-runs", "1",
         "--settle-ms", "20", "--stats-messages", "300", "--stats-runs", "1",
         "--out", str(out), "--tmpdir", str(tmp_path / "work")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cold start" in proc.stdout and "wait latency" in proc.stdout

    doc = json.loads(out.read_text())
    assert doc["suite"] == "cli"
    for key in ("platform", "python", "cpu_count", "date", "tmp_filesystem", "mqcli_entry_point",
                "cli_versions"):
        assert doc["machine"].get(key), key
    p = doc["parameters"]
    assert (p["bulk_messages"], p["startup_runs"], p["latency_samples"]) == (300, 2, 2)

    s = doc["startup"]
    assert set(s["commands"]) == STARTUP
    for name, c in s["commands"].items():
        assert c["runs"] == 2 and len(c["seconds"]) == 2, name
        assert c["median_s"] > 0 and c["ratio_to_python"] > 0, name
    imp = s["importtime"]
    assert 0 < len(imp["top_cumulative"]) <= 10
    assert any(m["module"].startswith("mqcli") for m in imp["top_cumulative"])
    assert all(m["cumulative_us"] >= m["self_us"] >= 0 for m in imp["top_cumulative"])
    assert set(s["phases"]["median_s"]) == {"import mqcli.fastpath", "parse, import store and mqcli.messaging",
                                            "run put q hello"}

    b = doc["bulk"]
    assert b["messages"] == 300 and b["jsonl_bytes"] > 300 * 256
    assert set(b["results"]) == {"mqcli", "library"}
    for who, ops in b["results"].items():
        assert set(ops) == {"put", "get"}, who
        for op, e in ops.items():
            assert e["msgs_per_s"] > 0 and e["max_rss_mb"] > 0, (who, op)
            assert len(e["msgs_per_s_rounds"]) == b["rounds"], (who, op)
    assert set(b["results"]["library"]["put"]["phases_median_s"]) >= {"parse_s", "store_s"}

    w = doc["wait_latency"]
    for who in ("mqcli", "library"):
        e = w["results"][who]
        assert len(e["latency_ms"]) == 2
        assert 0 < e["latency_ms_median"] <= e["latency_ms_p99"]

    stalled = doc["stalled_reader"]["results"]
    for who in ("alone", "stalled reader"):
        assert stalled[who]["puts"] >= 100
        assert 0 < stalled[who]["latency_ms_median"] <= stalled[who]["latency_ms_p99"] <= stalled[who]["latency_ms_max"]

    c = doc["consume"]
    assert c["messages"] == 200 and c["rounds"] == 1
    assert c["results"]["consume_s"] > 0 and c["results"]["spawns_s"] > 0

    b = doc["batch"]
    assert (b["lines"], b["processes"]) == (1000, 10) and b["results"]["speedup"] > 0

    s = doc["stats"]  # bench/cli_stats.py: a deep store of 300 messages against an empty one
    assert (s["queues"], s["messages"], s["held_in_flight"], s["runs"]) == (100, 300, 100, 1)
    for name in ("empty", "deep"):
        assert s["results"][name]["wall_s"]["median"] > 0 and s["results"][name]["in_process_read_s"]["median"] > 0
    assert "stats --prometheus, 100 queues" in proc.stdout

    assert set(doc["targets"]) == TARGETS
    for key, t in doc["targets"].items():
        assert t["op"] in ("<=", ">=") and t["limit"] > 0, key
        assert t["met"] == (t["value"] <= t["limit"] if t["op"] == "<=" else t["value"] >= t["limit"])
    assert doc["targets_met"] == all(t["met"] for t in doc["targets"].values())
