"""Damaged data files and hot backups.

`mqcli check` on a store whose data.mdb was cut short or had bytes changed exits 11 saying
what is wrong, and never crashes: LMDB keeps no checksums and trusts its pages, so a damaged
page can fail one of its assertions (SIGABRT) or send a read past the end of the file (SIGBUS);
the check therefore walks the store in a child process (store/check_process.py `check_isolated`) and
turns such a death into exit 11. Every check here runs as a real process, so a crash would
show as a signal, not pass unnoticed.

The damaged stores start from a compacted backup, where every page is in use, so that damage
to any page of the B-tree is damage to the store. Targeted damage must be detected; random
damage must be detected or leave a store that reads back whole (structure intact: what changed,
if anything, is payload — message bodies, which LMDB keeps no checksum of).

`mqcli backup` while a writer runs: each copy passes check and equals the store as it was
between two of the writer's commits, within the backup's own time window.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from cli_helpers import ERROR_PREFIX, run_mqcli
from harness import body_of, record, seed
from store import NewMessage, Store
from store.records import _FIXED

WORKERS = Path(__file__).resolve().parent.parent / "workers"
PAGE = 4096
MARKER = "marker-0"


def _build(path: Path) -> None:
    """Messages in every state, in several queues, then a compacted copy at `path`."""
    source = path.parent / "source"
    with Store.open(source, create=True) as st:
        st.create_queue("work")
        st.create_queue("held", journal=True)
        st.create_queue("tq", transactional=True)
        st.put("work", body_of(MARKER))  # no optional field: its record is header + body
        for k in range(0, 3000, 500):
            st.put_many("work", [NewMessage(body_of(f"w-{i}"), priority=i % 8, label=f"l{i}",
                                            correl_id=f"c{i % 7}") for i in range(k, k + 500)])
        st.put_many("held", [NewMessage(body_of(f"h-{i}")) for i in range(300)])
        st.get_many("held", 50, confirm_id=11)
        st.browse_lock("held", limit=20, lock_id=12)
        st.get_many("held", 30)  # journaled
        t = st.tx_begin()
        st.put_many("tq", [NewMessage(body_of(f"t-{i}")) for i in range(100)], tx=t)
        st.backup(path)
        assert st.check() == []


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pristine") / "store"
    _build(path)
    return path


def _copy(pristine: Path, tmp_path: Path, name: str = "damaged") -> Path:
    target = tmp_path / name
    shutil.copytree(pristine, target)
    return target


def _check(path: Path) -> tuple[int, str]:
    """`mqcli check` in a real process: its exit code and stderr; never a crash or traceback."""
    result = run_mqcli(["--store", path, "check"])  # asserts: no traceback
    assert result.code >= 0, f"mqcli check died of signal {-result.code}: {result.stderr}"
    assert result.code in (0, 11), result
    if result.code == 11:
        errors = [line for line in result.err_lines if line.startswith(ERROR_PREFIX)]
        assert len(errors) == 1 and errors[0].endswith("[MQ_ERROR_STORE_CORRUPT]"), result
    return result.code, result.stderr


def _patch(path: Path, at: int, data: bytes) -> None:
    with open(path / "data.mdb", "r+b") as f:
        f.seek(at)
        f.write(data)


def _truncate(path: Path, size: int) -> None:
    os.truncate(path / "data.mdb", size)


def _marker_at(path: Path) -> int:
    data = (path / "data.mdb").read_bytes()
    at = data.find(body_of(MARKER))
    assert at > 0 and data.find(body_of(MARKER), at + 1) == -1  # one copy: a compacted store
    return at


def test_the_pristine_store_checks(pristine):
    assert _check(pristine) == (0, f"store {pristine}: consistent\n")


DAMAGE = {
    "emptied": (lambda p: _truncate(p, 0), "ends inside meta page 0"),
    "cut inside the second meta page": (lambda p: _truncate(p, PAGE + 100), "ends inside meta page 1"),
    "cut in half": (lambda p: _truncate(p, (p / "data.mdb").stat().st_size // 2 // PAGE * PAGE),
                    "truncated"),
    "last page cut off": (lambda p: _truncate(p, (p / "data.mdb").stat().st_size - PAGE), "truncated"),
    "last 100 bytes cut off": (lambda p: _truncate(p, (p / "data.mdb").stat().st_size - 100),
                               "truncated"),
    "first meta page overwritten": (lambda p: _patch(p, 16, b"\0" * 8), "meta page 0 is not"),
    "second meta page overwritten": (lambda p: _patch(p, PAGE + 16, b"\xff" * 8), "meta page 1 is not"),
    "a record's format byte changed": (lambda p: _patch(p, _marker_at(p) - _FIXED, b"\x07"),
                                       "record format 7 is not known"),
    "a record's body length changed": (lambda p: _patch(p, _marker_at(p) - 4, b"\x00\x01\x00\x00"),
                                       "record length does not match"),
    "a leaf page's type changed": (lambda p: _patch(p, _marker_at(p) // PAGE * PAGE + 10, b"\x01"),
                                   "B-tree|damaged"),
    "a leaf page zeroed": (lambda p: _patch(p, _marker_at(p) // PAGE * PAGE, bytes(PAGE)),
                           "B-tree|damaged"),
}


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_check_detects_damage_and_says_what_is_wrong(pristine, tmp_path, damage):
    path = _copy(pristine, tmp_path)
    harm, said = DAMAGE[damage]
    harm(path)
    code, stderr = _check(path)
    assert code == 11, f"{damage} went unnoticed: {stderr}"
    assert re.search(said, stderr), stderr


def test_a_store_cut_before_its_roots_is_refused_by_every_command(pristine, tmp_path):
    """Cheap enough for every open: the meta page's B-tree roots must be in the file (else LMDB
    would read past its end: SIGBUS). Damage deeper in the tree is check's to find."""
    path = _copy(pristine, tmp_path)
    _truncate(path, 3 * PAGE)
    for args in (["info"], ["browse", "work"], ["get", "work"], ["put", "work", "x"]):
        result = run_mqcli(["--store", path, *args])
        assert result.code == 11 and "truncated" in result.stderr, result


def _export(path: Path) -> dict[str, dict]:
    """Every message of the store by msg_id, read by `mqcli export` in a real process (a crash
    reading the store fails the test, not the test process)."""
    result = run_mqcli(["--store", path, "export", "-q"])
    assert result.code == 0, result
    return {m["msg_id"]: m for m in result.jsonl() if "msg_id" in m}  # not the queue definitions


@pytest.mark.slow
def test_random_damage_is_detected_or_leaves_a_readable_store(pristine, tmp_path):
    trials = int(os.environ.get("RELIABILITY_DAMAGE_TRIALS", "40"))
    run_seed = seed()
    rng = random.Random(run_seed)
    size = (pristine / "data.mdb").stat().st_size
    expected = _export(pristine)
    outcomes: dict[str, Counter] = {}
    for n in range(trials):
        path = _copy(pristine, tmp_path, f"t{n}")
        kind = rng.choice(["bit flipped", "8 bits flipped", "64 bytes overwritten", "page zeroed",
                           "cut at a page", "cut anywhere"])
        if kind == "bit flipped" or kind == "8 bits flipped":
            for _ in range(1 if kind == "bit flipped" else 8):
                at = rng.randrange(size)
                _patch(path, at, bytes([(path / "data.mdb").read_bytes()[at] ^ 1 << rng.randrange(8)]))
        elif kind == "64 bytes overwritten":
            _patch(path, rng.randrange(size - 64), rng.randbytes(64))
        elif kind == "page zeroed":
            _patch(path, rng.randrange(2, size // PAGE) * PAGE, bytes(PAGE))
        elif kind == "cut at a page":
            _truncate(path, rng.randrange(2, size // PAGE) * PAGE)
        else:
            _truncate(path, rng.randrange(size))
        code, stderr = _check(path)
        tally = outcomes.setdefault(kind, Counter())
        tally["trials"] += 1
        if code == 11:
            tally["detected"] += 1
        else:  # the damage hit no structure: the store reads back, every message there
            back = _export(path)
            assert back.keys() == expected.keys(), (kind, n, run_seed)
            tally["passed"] += 1
            tally["payload changed"] += sum(back[i] != expected[i] for i in expected)
        shutil.rmtree(path)
    for kind, tally in outcomes.items():
        record("corruption", kind, {"trials": tally["trials"], "detected": tally["detected"],
                                    "passed": tally["passed"], "crashed": 0,
                                    "payload_changed": tally["payload changed"], "seed": run_seed})
    print({k: dict(v) for k, v in outcomes.items()})


# ---- hot backups -----------------------------------------------------------------------------

def _states(progress: Path) -> tuple[list[int], dict[int, tuple[int, int]], list[str]]:
    """Replay tests/workers/crash_child.py's log: the store's content after each completed
    operation, as a running hash of (body, state, confirm id) items and their count; and for
    each log line, how many operations had completed (to bound a backup's snapshot in time)."""
    lines = progress.read_text().split("\n")[:-1]
    items: dict[str, tuple] = {}
    total, count = 0, 0
    states: dict[int, tuple[int, int]] = {0: (0, 0)}
    done_after_line: list[int] = []
    done = 0

    def put(body: str, item: tuple | None) -> None:
        nonlocal total, count
        old = items.pop(body, None)
        if old is not None:
            total, count = total - hash(old), count - 1
        if item is not None:
            items[body] = item
            total, count = total + hash(item), count + 1

    unconfirmed: dict[int, list[str]] = {}
    for line in lines:
        kind, *rest = line.split(" ", 2)
        if kind == "put":
            b, k = int(rest[0]), int(rest[1])
            for i in range(k):
                body = f"r0-b{b}-{i}"
                put(body, (body, "available", None))
        elif kind == "got":
            c = int(rest[0])
            unconfirmed[c] = rest[1].split(",")
            for body in unconfirmed[c]:
                put(body, (body, "get-unconfirmed", c))
        elif kind == "confirmed":
            for body in unconfirmed.pop(int(rest[0])):
                put(body, None)
        if kind in ("put", "got", "confirmed", "empty"):
            done += 1
            states[done] = (total, count)
        done_after_line.append(done)
    return done_after_line, states, lines


def _snapshot_hash(path: Path) -> tuple[int, int]:
    with Store.open(path) as st:
        assert st.check() == []
        items = [(m.body.decode(), m.state, m.confirm_id) for m in st.browse("crashq", states="all")]
    return sum(hash(i) for i in items), len(items)


@pytest.mark.slow
def test_backup_while_a_writer_runs_is_a_consistent_snapshot(tmp_path):
    path = tmp_path / "store"
    with Store.open(path, create=True) as st:
        st.create_queue("crashq")
    progress = tmp_path / "progress"
    writer = subprocess.Popen(
        [sys.executable, str(WORKERS / "crash_child.py"), str(path), "crashq", str(progress),
         str(seed()), "0"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd=tmp_path)
    windows = []
    try:
        deadline = time.monotonic() + 30
        while not (progress.exists() and progress.read_text().count("\n") > 50):
            assert writer.poll() is None and time.monotonic() < deadline, "the writer did not start"
            time.sleep(0.01)
        for k in range(5):
            lines_before = progress.read_text().count("\n")
            result = run_mqcli(["--store", path, "backup", tmp_path / f"copy{k}", "-q"])
            lines_after = progress.read_text().count("\n")
            assert result.code == 0, result
            windows.append((lines_before, lines_after))
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    done_after_line, states, lines = _states(progress)
    by_hash: dict[tuple[int, int], list[int]] = {}
    for n, h in states.items():  # a state repeats while gets find nothing
        by_hash.setdefault(h, []).append(n)
    consistent = 0
    for k, (before, after) in enumerate(windows):
        copy = tmp_path / f"copy{k}"
        assert run_mqcli(["--store", copy, "check"]).code == 0
        snapshot = _snapshot_hash(copy)
        assert snapshot in by_hash, f"backup {k} is no state the writer's commits went through"
        # committed no earlier than what was logged before the backup started, and no later
        # than what had begun when it ended (a commit is logged just after it happens)
        low = done_after_line[before - 1] if before else 0
        high = done_after_line[after - 1] + 1
        assert any(low <= n <= high for n in by_hash[snapshot]), (
            f"backup {k} shows the store after operation(s) {by_hash[snapshot]}, outside its "
            f"window {low}..{high}")
        consistent += 1
    record("backup", "5 copies", {"backups": len(windows), "writer_operations": len(states) - 1,
                                  "consistent": consistent})
