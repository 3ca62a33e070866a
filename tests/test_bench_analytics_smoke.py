"""Smoke test for the pipeline benchmark: `python -m bench analytics --quick` with a few thousand
reports runs end to end (its own Spark session in a subprocess), both passes agree, and the JSON
has every figure. No timing thresholds: the target may be met or missed."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_bench_analytics_quick_runs_and_writes_json(tmp_path):
    pytest.importorskip("pyspark")
    out = tmp_path / "analytics.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "analytics", "--quick", "--reports", "3000", "--out", str(out),
         "--tmpdir", str(tmp_path / "work")],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "passes agree: yes" in proc.stdout and "Spark session start-up" in proc.stdout

    doc = json.loads(out.read_text())
    assert doc["suite"] == "analytics"
    for key in ("platform", "python", "cpu_count", "spark", "pyarrow", "java", "master"):
        assert doc["machine"].get(key), key
    assert "version" in doc["machine"]["java"], doc["machine"]["java"]  # not a note the JVM printed first
    p = doc["parameters"]
    assert p["reports"] == 3000 and p["stores"] == 3 and sum(p["per_store"].values()) == 3000
    assert p["routes"] > 500
    assert doc["session_start_s"] > 0
    for name in ("spark", "python"):
        assert doc[name]["median_s"] > 0 and doc[name]["reports_per_s"] > 0
    assert doc["ratio"] == pytest.approx(doc["spark"]["reports_per_s"] / doc["python"]["reports_per_s"], rel=0.05, abs=0.002)
    assert doc["target"]["met"] == (doc["ratio"] >= doc["target"]["min_ratio"] == 2.0)
    # one untimed warm-up round of each pass; the timed rounds after it make the median
    assert len(doc["spark"]["seconds"]) == len(doc["python"]["seconds"]) == p["rounds"] == 1
    assert doc["warmup"]["spark_s"] == doc["spark"]["first_round_s"] > 0 and doc["warmup"]["python_s"] > 0
    assert doc["ratio_one_off"] == pytest.approx(
        doc["python"]["median_s"] / (doc["session_start_s"] + doc["spark"]["first_round_s"]), rel=0.02, abs=0.002)
    assert doc["agreement"] == {"agree": True, "problems": []}
    # the read alone, the floor of any Spark plan over it
    assert doc["read_floor"]["seconds"] > 0 and doc["read_floor"]["ratio_bound"] > 0
    # a sample moved through real stores by the transfer's own calls fits the synthetic model
    sample = doc["real_sample"]
    assert sample["routes_in_model_order"] == sample["messages"] > 0
    assert sample["least_step_us"] >= 0 and set(sample["least_link_latency_us"]) == {"qmA>qmB", "qmB>qmC"}
    assert min(sample["least_link_latency_us"].values()) >= 0
    result = doc["result"]
    assert set(result["links"]) == {"qmA>qmB", "qmB>qmC", "qmB>qmA", "qmA>qmC"}
    assert result["loops"] > 0 and result["complete"] < result["routes"]
    # the pushdown query: the same rows with the filters taken by the source and without
    pushdown = doc["pushdown"]
    assert pushdown["with_pushdown_rows"] == pushdown["without_pushdown_rows"] > 0
    assert pushdown["with_pushdown_s"] > 0 and pushdown["without_pushdown_s"] > 0
    # the stores are kept for the next run
    assert any(name.startswith("v1-3000-") for name in os.listdir(tmp_path / "work" / "mqcli-bench-analytics"))
