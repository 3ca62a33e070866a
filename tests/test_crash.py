"""Crash safety with real SIGKILLs (docs/design.md#store: a message is wholly there or wholly absent).

A child process does batched puts and two-phase gets and is killed with SIGKILL at a random
moment, CRASH_ROUNDS times (default 25; CRASH_SEED fixes the randomness). The child reports
each operation before it starts and again after its commit returns, so the parent knows
exactly what committed, except the single operation in progress, which must have happened
wholly or not at all. After each kill the parent reopens the store and checks it.

Also: stale readers left by killed processes are harmless and cleared on open.
"""

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from store import NewMessage, Store

WORKERS = Path(__file__).parent / "workers"
QUEUE = "crashq"


def _wait_for_line(path: Path, line: str, proc: subprocess.Popen, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and f"{line}\n" in path.read_text():
            return
        if proc.poll() is not None:
            pytest.fail(f"child exited {proc.returncode} before {line!r}")
        time.sleep(0.002)
    pytest.fail(f"child did not report {line!r} within {timeout}s")


def _parse(progress: Path):
    """Complete lines of the progress file (a torn last line cannot happen with one
    write(2) per line, but would be ignored)."""
    text = progress.read_text() if progress.exists() else ""
    lines = text.split("\n")
    return lines[:-1]


def _batch(rnd: int, b: int, k: int) -> list[str]:
    return [f"r{rnd}-b{b}-{i}" for i in range(k)]


def _check_round(st: Store, rnd: int, lines: list[str], before: set[str], ctx: str):
    """Verify the store against the child's report; return (set of bodies now present,
    confirm ids to undo, what was in progress)."""
    expected = Counter(before)
    unconfirmed: dict[int, list[str]] = {}
    pending = None
    for line in lines:
        kind, *rest = line.split(" ", 2)
        if kind == "ready":
            continue
        if kind == "begin-put":
            pending = ("put", int(rest[0]), int(rest[1]))
        elif kind == "put":
            assert pending == ("put", int(rest[0]), int(rest[1])), (ctx, line)
            expected.update(_batch(rnd, pending[1], pending[2]))
            pending = None
        elif kind == "begin-get":
            pending = ("get", int(rest[0]), int(rest[1]))
        elif kind == "empty":
            assert pending and pending[:2] == ("get", int(rest[0])), (ctx, line)
            assert +expected - Counter(b for g in unconfirmed.values() for b in g) == Counter(), (
                f"{ctx}: get {rest[0]} found nothing, but available messages should exist")
            pending = None
        elif kind == "got":
            c = int(rest[0])
            assert pending and pending[:2] == ("get", c), (ctx, line)
            bodies = rest[1].split(",")
            assert 1 <= len(bodies) <= pending[2], (ctx, line)
            held = {b for g in unconfirmed.values() for b in g}
            for b in bodies:
                assert expected[b] == 1, f"{ctx}: get {c} returned {b!r}, which is not stored"
                assert b not in held, f"{ctx}: get {c} returned {b!r}, already held unconfirmed"
            assert len(set(bodies)) == len(bodies), f"{ctx}: get {c} returned duplicates"
            unconfirmed[c] = bodies
            pending = None
        elif kind == "begin-confirm":
            pending = ("confirm", int(rest[0]))
        elif kind == "confirmed":
            c, count = int(rest[0]), int(rest[1])
            assert pending == ("confirm", c), (ctx, line)
            assert count == len(unconfirmed[c]), f"{ctx}: confirm {c} removed {count}"
            expected.subtract(unconfirmed.pop(c))
            pending = None
        else:
            pytest.fail(f"{ctx}: unknown progress line {line!r}")
    expected = +expected

    msgs = st.browse(QUEUE, states="all")
    actual = Counter(m.body.decode() for m in msgs)
    dups = [b for b, n in actual.items() if n > 1]
    assert not dups, f"{ctx}: duplicated messages {dups[:5]}"

    # The one operation in progress happened wholly or not at all.
    alternatives = [expected]
    if pending and pending[0] == "put":
        alternatives.append(expected + Counter(_batch(rnd, pending[1], pending[2])))
    elif pending and pending[0] == "confirm":
        alternatives.append(expected - Counter(unconfirmed[pending[1]]))
    if actual not in alternatives:
        lost = sorted(set(expected) - set(actual))
        extra = sorted(set(actual) - set(expected))
        pytest.fail(f"{ctx}: stored bodies differ from what committed (in progress: {pending}); "
                    f"lost {len(lost)} {lost[:8]}, extra {len(extra)} {extra[:8]}")
    if pending and pending[0] == "confirm" and actual == alternatives[1] != alternatives[0]:
        unconfirmed.pop(pending[1])  # the confirm in progress committed

    groups: dict[int, set[str]] = {}
    for m in msgs:
        body = m.body.decode()
        if m.state == "available":
            assert m.confirm_id is None, f"{ctx}: available {body} has confirm id {m.confirm_id}"
        else:
            assert m.state == "get-unconfirmed", f"{ctx}: {body} in state {m.state}"
            groups.setdefault(m.confirm_id, set()).add(body)
    for c, bodies in unconfirmed.items():
        assert groups.get(c) == set(bodies), (
            f"{ctx}: confirm id {c} should hold {sorted(bodies)}, holds {groups.get(c)}")
    extra_groups = set(groups) - set(unconfirmed)
    if pending and pending[0] == "get":
        extra_groups.discard(pending[1])  # a get in progress may have committed
        if pending[1] in groups:
            assert 1 <= len(groups[pending[1]]) <= pending[2], (ctx, groups[pending[1]])
    assert not extra_groups, f"{ctx}: unexpected get-unconfirmed groups {extra_groups}"
    return set(actual), groups, pending


@pytest.mark.slow
def test_sigkill_during_batched_puts_and_two_phase_gets(tmp_path):
    rounds = int(os.environ.get("CRASH_ROUNDS", "25"))
    seed = int(os.environ.get("CRASH_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    path = tmp_path / "store"
    with Store.open(path, create=True) as st:
        st.create_queue(QUEUE)
    present: set[str] = set()
    in_progress = Counter()
    for rnd in range(rounds):
        ctx = f"round {rnd} (CRASH_SEED={seed})"
        progress = tmp_path / f"progress-{rnd}"
        errlog = tmp_path / f"child-{rnd}.err"
        with open(errlog, "wb") as err:
            child = subprocess.Popen(
                [sys.executable, str(WORKERS / "crash_child.py"), str(path), QUEUE,
                 str(progress), str(rng.randrange(1 << 30)), str(rnd)],
                stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT)
        try:
            if rng.random() < 0.1:
                time.sleep(rng.uniform(0.0, 0.2))  # may land while the child opens the store
            else:
                _wait_for_line(progress, "ready", child)
                time.sleep(rng.uniform(0.0, 0.3))
            child.send_signal(signal.SIGKILL)
            rc = child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=30)
        assert rc == -signal.SIGKILL, f"{ctx}: child exited {rc}: {errlog.read_bytes()!r}"

        with Store.open(path) as st:
            assert st.check() == [], ctx
            present, groups, pending = _check_round(st, rnd, _parse(progress), present, ctx)
            in_progress[pending[0] if pending else "none"] += 1
            for c, bodies in groups.items():
                assert st.undo(QUEUE, confirm_id=c) == len(bodies), ctx
            after = st.browse(QUEUE, states="all")
            assert all(m.state == "available" for m in after), ctx
            assert {m.body.decode() for m in after} == present, ctx
            assert st.queue_info(QUEUE).depth == len(present), ctx
            assert st.browse("dead-letter", states="all") == [], ctx
            assert st.check() == [], ctx
    print(f"crash rounds={rounds} seed={seed} killed during: {dict(in_progress)}, "
          f"{len(present)} messages left")


def _readers(path: Path) -> str:
    """The LMDB reader table, read by a fresh process that opens the env read-only."""
    code = ("import lmdb, sys; e = lmdb.open(sys.argv[1], readonly=True, max_dbs=0); "
            "print(e.readers()); e.close()")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _pids_in(readers: str) -> set[int]:
    pids = set()
    for line in readers.splitlines():
        parts = line.split()
        if parts and parts[0].isdigit():
            pids.add(int(parts[0]))
    return pids


@pytest.mark.slow
def test_stale_readers_from_killed_processes_are_harmless(tmp_path):
    path = tmp_path / "store"
    with Store.open(path, create=True) as st:
        st.create_queue(QUEUE)
        st.create_queue("churn")
        st.put_many(QUEUE, [NewMessage(b"x" * 100, priority=i % 8) for i in range(500)])

    # A live process keeps the environment open, so that the parent's open below is not the
    # first one (LMDB would then reset the whole reader table by itself).
    bystander_code = ("import sys; from store import Store; st = Store.open(sys.argv[1]); "
                      "print('ready', flush=True); sys.stdin.read()")
    # Holds a real LMDB read transaction open, as any reader would mid-browse.
    holder_code = ("import sys, time, lmdb; e = lmdb.open(sys.argv[1], readonly=True, "
                   "max_dbs=0); t = e.begin(); t.get(b'x'); print('ready', flush=True); "
                   "time.sleep(120)")
    procs = []
    try:
        bystander = subprocess.Popen([sys.executable, "-c", bystander_code, str(path)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(bystander)
        assert bystander.stdout.readline().strip() == "ready"
        holder = subprocess.Popen([sys.executable, "-c", holder_code, str(path)],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        procs.append(holder)
        assert holder.stdout.readline().strip() == "ready"
        browser = subprocess.Popen(
            [sys.executable, str(WORKERS / "browse_loop.py"), str(path), QUEUE],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        procs.append(browser)
        assert browser.stdout.readline().strip() == "ready"

        assert holder.pid in _pids_in(_readers(path)), "the holder should own a reader slot"
        for p in (holder, browser):
            p.send_signal(signal.SIGKILL)
            assert p.wait(timeout=30) == -signal.SIGKILL
        assert holder.pid in _pids_in(_readers(path)), "killed holder left no stale slot"

        with Store.open(path) as st:
            assert st.check() == []
            used0 = st.info().map_used
            for i in range(100):
                st.put_many("churn", [NewMessage(b"%03d" % i * 167) for _ in range(200)])
                got = st.get_many("churn", 200, wait=0)
                assert len(got) == 200
            used1 = st.info().map_used
            m = st.put("churn", b"after the crash", priority=7)
            assert st.get("churn", wait=0).msg_id == m.msg_id
            assert len(st.browse(QUEUE)) == 500
            assert st.check() == []
        stale = _pids_in(_readers(path)) & {holder.pid, browser.pid}
        assert not stale, f"stale reader slots of killed processes {stale} not cleared on open"
        # With the stale snapshot cleared, LMDB reuses freed pages: 100 * 200 * 501 B went
        # through the store; a pinned snapshot would make the map grow by all of it, page
        # reuse keeps the growth near zero.
        assert used1 - used0 < 100 * 200 * 501 // 4, (used0, used1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
