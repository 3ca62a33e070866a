"""CLI: `mqcli backup` builds the copy in a private sibling of the target and renames it into
place, so a backup killed at any moment leaves nothing a retry trips on (store/engine.py
`Store.backup`)."""

from __future__ import annotations

import fcntl
import json
import os
import random
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from cli_helpers import mqcli_command
from store import NewMessage, Store
from store.environment import store_exists


def _siblings(target) -> list[str]:
    return sorted(n for n in os.listdir(target.parent) if n.startswith(f".{target.name}.part-"))


def _private(target) -> None:
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    for name in os.listdir(target):
        mode = stat.S_IMODE((target / name).stat().st_mode)
        assert mode == (0o700 if (target / name).is_dir() else 0o600), (name, oct(mode))


def test_a_backup_is_private_and_leaves_no_sibling(cli, tmp_path):
    cli.put("q", "a", "--count", "3")
    target = tmp_path / "deep" / "bk"
    assert cli.json("backup", target)["messages"] == 3
    _private(target)
    assert _siblings(target) == []
    assert cli.ok("--store", target, "check").code == 0


def test_a_backup_is_the_store_as_it_was_expired_messages_not_swept_into_the_copy(cli, tmp_path):
    """`backup` reports the copy's counts without running maintenance on it: a message past its
    ttl is in the copy where it was in the store (a sweep would have dead-lettered it)."""
    with Store.open(cli.store, clock=lambda: time.time() - 3600) as st:  # put an hour ago, ttl 1 min
        st.put("q", b"old", ttl=60)
    target = tmp_path / "bk"
    assert cli.json("backup", target)["messages"] == 1
    copied = [json.loads(line) for line in cli.ok("--store", target, "export").stdout.splitlines()]
    assert [(r["queue"], r["body"], r["state"]) for r in copied if "msg_id" in r] == [("q", "old", "available")]


def test_a_backup_into_an_empty_directory_fills_it_and_into_a_used_one_is_refused(cli, tmp_path):
    cli.put("q", "a")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.json("backup", empty)["messages"] == 1
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    r = cli.fails(11, "backup", used)
    assert "is not empty (holds 'notes.txt')" in r.stderr
    assert os.listdir(used) == ["notes.txt"] and _siblings(used) == []


def test_a_retry_removes_what_a_dead_backup_left_and_spares_a_running_one(cli, tmp_path):
    cli.put("q", "a", "--count", "2")
    target = tmp_path / "bk"
    dead = tmp_path / ".bk.part-0123456789ab"  # as a SIGKILLed backup leaves it: half a copy
    dead.mkdir(mode=0o700)
    (dead / "data.mdb").write_bytes(b"\0" * 8192)
    (dead / "wait").mkdir()
    running = tmp_path / ".bk.part-ba9876543210"  # a backup still running holds its flock
    running.mkdir(mode=0o700)
    fd = os.open(running, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert cli.json("backup", target)["messages"] == 2
        assert not dead.exists() and running.exists()
    finally:
        os.close(fd)
    assert cli.ok("--store", target, "check").code == 0


@pytest.mark.slow
def test_a_backup_killed_at_random_moments_is_retried_into_a_whole_copy(cli, tmp_path):
    """Real `mqcli backup` processes SIGKILLed at random moments of their run; each target is
    then absent or a whole store, and the retry succeeds; every copy checks and holds every
    message."""
    seed = int(os.environ.get("RELIABILITY_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    with Store.open(cli.store) as st:  # 40 MB: a copy long enough for kills to land inside it
        for _ in range(20):
            st.put_many("q", [NewMessage(os.urandom(1000) + b"%d" % i) for i in range(2000)])
        expected = sorted(m.msg_id for m in st.browse("q", limit=None))
    assert len(expected) == 40_000

    def whole(target) -> None:
        assert store_exists(target) and _siblings(target) == [], seed
        _private(target)
        assert cli.ok("--store", target, "check").code == 0
        with Store.open(target) as copy:
            assert sorted(m.msg_id for m in copy.browse("q", limit=None)) == expected, seed

    started = time.monotonic()  # how long one backup takes here, to spread the kills over it
    assert cli.ok("backup", tmp_path / "timed", "-q").code == 0
    took = time.monotonic() - started
    landed = {"target absent": 0, "target whole": 0, "left a sibling": 0}
    for trial in range(6):
        target = tmp_path / f"bk{trial}"
        proc = subprocess.Popen([*mqcli_command(), "backup", target, "-q"], env={**os.environ, **cli.env},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if trial % 2:  # anywhere in the run, start-up included
            time.sleep(rng.uniform(0.2, 1.1) * took)
        else:  # once it is building its copy: mid-way, or just after
            for _ in range(20_000):  # bounded: at most ~20 s of polling
                if _siblings(target) or proc.poll() is not None:
                    break
                time.sleep(0.001)
            time.sleep(rng.uniform(0, 0.3) * took)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        landed["left a sibling"] += bool(_siblings(target))
        if store_exists(target):
            landed["target whole"] += 1
            whole(target)  # finished before the kill: a store, whole
            continue
        assert not target.exists(), (seed, os.listdir(target))  # nothing half-made in place
        landed["target absent"] += 1
        assert cli.ok("backup", target, "-q").code == 0, seed  # the retry goes on
        whole(target)
    print(f"kills: {landed}, seed {seed}")  # where they landed, shown with -s


@pytest.mark.slow
def test_a_snapshot_killed_mid_way_leaves_a_build_the_next_snapshot_removes(cli, tmp_path):
    """A snapshot is built as a backup is, flock held: SIGKILLed while it copies, it leaves
    its hidden build, which the next snapshot into the folder removes (a live one it spares)."""
    with Store.open(cli.store) as st:  # 40 MB: a copy long enough to be killed inside it
        for _ in range(20):
            st.put_many("q", [NewMessage(os.urandom(1000) + b"%d" % i) for i in range(2000)])
    snaps = tmp_path / "snaps"

    def hidden() -> list[str]:
        return sorted(n for n in os.listdir(snaps) if n.startswith(".")) if snaps.exists() else []

    def copying() -> bool:  # the build holds the copy's own sibling (or the copy) already
        try:
            return any(os.listdir(snaps / n) for n in hidden())
        except FileNotFoundError:
            return False

    proc = subprocess.Popen([*mqcli_command(), "snapshot", snaps, "-q"], env={**os.environ, **cli.env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(20_000):  # bounded: at most ~20 s of polling
        if proc.poll() is not None or copying():
            break
        time.sleep(0.001)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL, "the snapshot ended before it could be killed"
    (left,) = hidden()
    assert left.startswith(".snapshot.part-") and os.listdir(snaps) == [left]
    running = snaps / ".snapshot.part-ba9876543210"  # another snapshot still building: its flock held
    running.mkdir(mode=0o700)
    fd = os.open(running, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        made = cli.json("snapshot", snaps)
    finally:
        os.close(fd)
    assert hidden() == [running.name]  # the dead build is gone, the live one spared
    assert sorted(os.listdir(snaps)) == sorted([running.name, os.path.basename(made["snapshot"])])
    assert cli.ok("--store", Path(made["snapshot"]) / "store", "check").code == 0
