"""Smoke test for the channel benchmark: `python -m bench channel --quick` with tiny sizes runs
end to end (real `mqcli listen` and `mqcli dispatch --once` processes over loopback) and writes
the JSON with every measurement and the target. No timing thresholds: the target may be met or
missed."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MQCLI = os.path.join(os.path.dirname(sys.executable), "mqcli")

pytestmark = pytest.mark.skipif(not os.access(MQCLI, os.X_OK),
                                reason=f"no mqcli entry point next to {sys.executable}")


def test_bench_channel_quick_runs_and_writes_json(tmp_path):
    out = tmp_path / "channel.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "channel", "--quick", "--channel-messages", "1500",
         "--channel-batch", "400", "--out", str(out), "--tmpdir", str(tmp_path / "work")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "dispatch --once, start to exit" in proc.stdout and "target >= 50,000 msg/s" in proc.stdout

    doc = json.loads(out.read_text())
    assert doc["suite"] == "channel"
    for key in ("platform", "python", "cpu_count", "date", "tmp_filesystem"):
        assert doc["machine"].get(key), key
    p = doc["parameters"]
    assert (p["messages"], p["batch"], p["rounds"], p["body_bytes"]) == (1500, 400, 1, 256)
    assert p["delivery"] == "recoverable"
    [rnd] = doc["results"]["dispatch_once"]["rounds"]
    assert rnd["messages"] == 1500 and rnd["batches"] == 4  # checked complete by the bench itself
    assert rnd["seconds"] > 0 and rnd["msgs_per_s"] > 0 and rnd["dispatch_cpu_s"] > 0
    assert doc["results"]["dispatch_once"]["msgs_per_s"] == rnd["msgs_per_s"]
    [ctx] = doc["results"]["library_context"]["rounds"]
    assert all(ctx[k] > 0 for k in ("msgs_per_s", "take_per_s", "receive_per_s", "done_per_s"))
    t = doc["target"]
    assert t["min_rate"] == 50_000 and t["rate"] == rnd["msgs_per_s"]
    assert t["met"] == (t["rate"] >= t["min_rate"])
    assert any("not the target's 200,000" in n for n in doc["notes"])
    # the notes every suite decides in bench/report.py: the git_dirty one iff the tree changed
    assert (report_dirty_note() in doc["notes"]) == bool(doc["machine"]["git_dirty"])
    assert doc["machine"]["loadavg_end"] is not None


def report_dirty_note() -> str:
    sys.path.insert(0, REPO)
    from bench.report import DIRTY_NOTE

    return DIRTY_NOTE
