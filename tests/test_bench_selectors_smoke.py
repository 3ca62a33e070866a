"""Smoke test for the selectors benchmark: `python -m bench selectors` with tiny sizes runs end
to end (real `mqcli put --jsonl` and `mqcli browse` processes; the bench itself checks every
selection's count) and writes the JSON with both targets. No timing thresholds: a target may
be met or missed."""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_selectors_quick_runs_and_writes_json(tmp_path):
    out = tmp_path / "selectors.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "selectors", "--quick", "--selector-messages", "600",
         "--out", str(out), "--tmpdir", str(tmp_path / "work")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "property selector / plain browse" in proc.stdout

    doc = json.loads(out.read_text())
    assert doc["suite"] == "selectors"
    p = doc["parameters"]
    assert (p["messages"], p["rounds"], p["body_bytes"]) == (600, 1, 256)
    res = doc["results"]
    assert {k: r["messages"] for k, r in res.items()} == {
        "browse": 600, "where_property": 6, "where_correl_id": 6, "correl_id_option": 6}
    assert all(r["seconds"] > 0 and len(r["seconds_rounds"]) == 1 for r in res.values())
    t = doc["targets"]
    ratio = res["where_property"]["seconds"] / res["browse"]["seconds"]
    assert t["where_property"]["ratio"] == ratio and t["where_property"]["met"] == (ratio <= 0.5)
    ratio = res["where_correl_id"]["seconds"] / res["correl_id_option"]["seconds"]
    assert t["where_correl_id"]["ratio"] == ratio and t["where_correl_id"]["met"] == (abs(ratio - 1) <= 0.15)
    assert any("not the target's 200,000" in n for n in doc["notes"])
