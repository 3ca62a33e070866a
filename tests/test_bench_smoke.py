"""Smoke test for the benchmark suite: `python -m bench` runs end to end and writes every
workload with positive numbers. No timing thresholds."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytest.importorskip("persistqueue")
pytest.importorskip("litequeue")

WORKLOADS = {
    "put_single": {"store", "py-lmdb", "py-lmdb/store-pattern", "persist-queue", "litequeue", "litequeue/FULL",
                   "fsync floor"},
    "put_batched": {"store", "py-lmdb", "py-lmdb/store-pattern"},
    "get_batched": {"store", "py-lmdb", "py-lmdb/store-pattern"},
    "get_confirm": {"store", "py-lmdb/store-pattern", "persist-queue", "litequeue", "litequeue/FULL",
                    "fsync floor", "py-lmdb/one commit"},
    "tx_commit": {"store", "py-lmdb"},
    "label_decode": {"store", "store/distinct-seconds", "store/parser-only"},
}


def test_bench_quick_runs_and_writes_json(tmp_path):
    out = tmp_path / "store.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--messages", "500", "--sync-messages", "50",
         "--rounds", "1", "--out", str(out), "--tmpdir", str(tmp_path / "work")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ratio" in proc.stdout

    doc = json.loads(out.read_text())
    assert doc["parameters"]["body_bytes"] == 256
    for key in ("platform", "python", "cpu_count", "lmdb", "py_lmdb", "date", "tmp_filesystem"):
        assert doc["machine"].get(key), key
    assert doc["machine"]["loadavg_end"] is not None  # what busy_notes reads at the end of the run
    assert set(doc["durability"]) >= {"store", "py-lmdb", "persist-queue", "litequeue"}
    assert isinstance(doc["targets_met"], bool)

    assert set(doc["workloads"]) == set(WORKLOADS)
    for key, contenders in WORKLOADS.items():
        wl = doc["workloads"][key]
        assert set(wl["results"]) == contenders, key
        for name, res in wl["results"].items():
            assert res["msgs_per_s"] > 0, (key, name)
            assert res["messages"] > 0, (key, name)
            assert all(v > 0 for v in res["msgs_per_s_rounds"]), (key, name)
        assert set(wl["ratios"]) == contenders - {"store"}, key
        assert all(r > 0 for r in wl["ratios"].values()), key
        target = wl["target"]
        if "min_rate" in target:  # an absolute floor (tx_commit)
            assert target["rate"] == wl["results"]["store"]["msgs_per_s"]
            assert target["met"] == (target["rate"] >= target["min_rate"])
            continue
        assert target["peer"] in wl["ratios"]
        assert target["ratio"] == wl["ratios"][target["peer"]]
        assert target["min_ratio"] > 0
        assert target["met"] == (target["ratio"] >= target["min_ratio"])
        if "bound" in target:  # the best ratio the floor row allows: floor / peer, same run
            floor = target["bound"]["floor"]
            want = wl["results"][floor]["msgs_per_s"] / wl["results"][target["peer"]]["msgs_per_s"]
            assert target["bound"]["ratio"] == pytest.approx(want)
        if "design_bound" in target:  # what the store's own write pattern allows, same run
            floor = target["design_bound"]["floor"]
            assert floor == "py-lmdb/store-pattern"
            want = wl["results"][floor]["msgs_per_s"] / wl["results"][target["peer"]]["msgs_per_s"]
            assert target["design_bound"]["ratio"] == pytest.approx(want)
    assert {key for key, wl in doc["workloads"].items() if "design_bound" in wl.get("target", {})} == {
        "put_batched", "get_batched", "get_confirm"}


def test_bench_states_the_ceiling_of_the_one_at_a_time_targets(tmp_path):
    out = tmp_path / "store.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--sync-messages", "50", "--rounds", "1",
         "--only", "put_single", "--only", "get_confirm", "--out", str(out),
         "--tmpdir", str(tmp_path / "work")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    bounds = {key: wl["target"]["bound"]["floor"] for key, wl in doc["workloads"].items()}
    assert bounds == {"put_single": "py-lmdb/store-pattern", "get_confirm": "py-lmdb/one commit"}
    # workload 4 also states what the store's own write pattern allows
    design = doc["workloads"]["get_confirm"]["target"]["design_bound"]
    results = doc["workloads"]["get_confirm"]["results"]
    assert design["floor"] == "py-lmdb/store-pattern"
    assert design["ratio"] == pytest.approx(results[design["floor"]]["msgs_per_s"] / results["persist-queue"]["msgs_per_s"])
    assert proc.stdout.count("ceiling: a store costing exactly the") == 3


def test_bench_paired_runs_and_checks_its_contenders(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bench.paired", "30", "--tmpdir", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("1. durable put, one per commit: store / py-lmdb ")
    assert lines[2].startswith("4. get + confirm (ack and next): store / persist-queue ")
    assert sum("ceiling: a store costing exactly the store-pattern row" in line for line in lines) == 2


def test_every_suite_records_whether_the_code_measured_is_the_commit(tmp_path):
    # bench/report.py's machine_info, which every suite's JSON starts from: git_commit alone
    # named a commit whose code was not the code measured when the tree had changes
    sys.path.insert(0, REPO)
    from bench.report import git_dirty, machine_info

    repo = tmp_path / "repo"
    (repo / "store").mkdir(parents=True)
    (repo / "store" / "x.py").write_text("a = 1\n")
    (repo / "notes.txt").write_text("not code\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    assert git_dirty(str(repo)) == []
    (repo / "notes.txt").write_text("changed, but not code the bench measures\n")
    assert git_dirty(str(repo)) == []
    (repo / "store" / "x.py").write_text("a = 2\n")
    assert git_dirty(str(repo)) == [" M store/x.py"]
    info = machine_info(str(tmp_path), str(repo))
    assert info["git_dirty"] == [" M store/x.py"] and len(info["git_commit"]) == 40


def test_the_busy_and_memory_filesystem_notes_are_decided_in_one_place():
    # bench/report.py's busy_notes and memory_fs_notes, which the store, cli, channel and
    # analytics suites word their notes with
    sys.path.insert(0, REPO)
    from bench.report import busy_notes, memory_fs_notes

    quiet = {"cpus_usable": 2, "loadavg_start": [0.4, 0, 0], "loadavg_end": [1.0, 0, 0]}
    assert busy_notes(quiet, "x") == []
    assert busy_notes({**quiet, "loadavg_end": None}, "x") == []
    assert busy_notes({"cpus_usable": 2}, "x") == []  # no load average on this platform
    [note] = busy_notes({**quiet, "loadavg_end": [3.5, 0, 0]}, "rerun")
    assert note == ("the machine was busy (1-minute load average 0.4 at the start, 3.5 at the end, "
                    "on 2 CPUs): rerun")
    [note] = busy_notes({"cpu_count": 4, "loadavg_start": [2.5, 0, 0], "loadavg_end": None}, "y")
    assert "(1-minute load average 2.5 at the start, on 4 CPUs): y" in note
    for fs, noted in (("ext4", False), ("xfs", False), ("tmpfs", True), ("overlay", True), ("unknown", True)):
        notes = memory_fs_notes({"tmp_filesystem": {"type": fs}}, "stores", "; so")
        assert notes == ([f"stores are on {fs}: fsync there is not a real disk's; so"] if noted else [])


@pytest.mark.parametrize("kind", ["put", "put-pattern", "ack", "ack-pattern", "putmany", "putmany-pattern",
                                  "putmany-raw", "get", "get-raw"])
def test_every_path_bench_instructions_counts_runs(kind):
    """What `python -m bench.instructions` runs under callgrind (valgrind is not needed for
    this): each path, each store-pattern row and each py-lmdb row runs its operations to the
    end (the batched workloads check their counts: whole batches of 1,000, every message got)."""
    n = 100 if kind.startswith("putmany") else 3
    got = kind.startswith("get")
    prefill = (1000 if got else 20) + 6 * n * (10 if got else 1)
    proc = subprocess.run([sys.executable, "-m", "bench.instructions", str(n), "--child", kind, "--prefill", str(prefill)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
