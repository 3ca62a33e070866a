"""Crash safety of transactions with real SIGKILLs: a commit applies all of T or none of it.

A child (tests/workers/tx_child.py) begins a transaction, adds 1,000 operations (puts to the
transactional queue ``txin`` and gets from the transactional queue ``txsrc``, in a random mix),
says "committing" on its stdout pipe and calls ``tx_commit``. The parent kills it with SIGKILL
after a random delay from that line, TX_CRASH_ROUNDS times (default 20; TX_CRASH_SEED fixes the
randomness), so the kill lands before, during or after the commit: the first round lets the
commit finish and times it, and the later delays are drawn mostly within that time (a commit of
1,000 operations takes a few milliseconds, its fsync included). After each kill the parent
reopens the store: ``check()`` is clean and either every operation of T was applied (its puts
available in put order, its gets gone) or none (its puts and gets still tx-locked by T, which
is still listed), never a mix; a "committed" line read from the pipe must mean all. In the
none case the parent aborts T and checks that the puts are gone and the gets are back where
they were, with one backout each.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store import NewMessage, Store, errors

WORKERS = Path(__file__).parent / "workers"
PUT_QUEUE = "txin"
GET_QUEUE = "txsrc"
OPS = 1000


def _create(path: Path) -> None:
    with Store.open(path, create=True) as st:
        st.create_queue(PUT_QUEUE, transactional=True)
        st.create_queue(GET_QUEUE, transactional=True)


def _refill(st: Store, at_least: int, tag: str) -> None:
    """Make sure the get queue holds `at_least` available messages (put by one committed T)."""
    missing = at_least - st.queue_info(GET_QUEUE).available
    if missing > 0:
        t = st.tx_begin()
        st.put_many(GET_QUEUE, [NewMessage(f"{tag}-{i}".encode()) for i in range(missing)], tx=t)
        assert st.tx_commit(t) == missing


def _spawn(path: Path, seed: int, rnd: int, mode: str, errlog: Path) -> subprocess.Popen:
    with open(errlog, "wb") as err:
        return subprocess.Popen(
            [sys.executable, str(WORKERS / "tx_child.py"), str(path), str(seed), str(rnd),
             str(OPS), mode],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True)


def _read_until(child: subprocess.Popen, word: str, errlog: Path) -> list[str]:
    lines = []
    while True:
        line = child.stdout.readline()
        if not line:
            child.wait(timeout=30)
            pytest.fail(f"child exited {child.returncode} before {word!r}: {errlog.read_text()}")
        lines.append(line.rstrip("\n"))
        if lines[-1].split(" ", 1)[0] == word:
            return lines


def _kill(child: subprocess.Popen) -> list[str]:
    """SIGKILL the child; return the lines it wrote that the parent has not read yet."""
    child.send_signal(signal.SIGKILL)
    rest = child.stdout.read()  # what was written before the kill is still in the pipe
    assert child.wait(timeout=30) == -signal.SIGKILL
    child.stdout.close()
    return rest.splitlines()


def _prepared(lines: list[str]) -> dict:
    (line,) = [x for x in lines if x.startswith("prepared ")]
    plan = json.loads(line.split(" ", 1)[1])
    assert len(plan["puts"]) + len(plan["gets"]) == OPS
    return plan


def _outcome(st: Store, plan: dict, src_before: list[tuple[str, int]], txin_before: list[str],
             ctx: str) -> str:
    """'all' or 'none', after checking that the store holds exactly one of the two."""
    t, puts, gets = plan["tx"], plan["puts"], set(plan["gets"])
    assert st.check() == [], ctx
    txin = st.browse(PUT_QUEUE, states="all")
    src = st.browse(GET_QUEUE, states="all")
    listed = {i.tx: i for i in st.tx_list()}

    old_bodies = [m.body.decode() for m in txin if m.tx is None]
    new = [m for m in txin if m.body.decode() in set(puts)]
    summary = {
        "T listed": t in listed,
        "puts available": sum(m.state == "available" for m in new),
        "puts tx-locked by T": sum(m.state == "tx-locked" and m.tx == t and m.tx_put for m in new),
        "gets still there": sum(m.msg_id in gets for m in src),
        "gets tx-locked by T": sum(m.msg_id in gets and m.state == "tx-locked" and m.tx == t
                                   for m in src),
    }
    all_applied = {"T listed": False, "puts available": len(puts), "puts tx-locked by T": 0,
                   "gets still there": 0, "gets tx-locked by T": 0}
    none_applied = {"T listed": True, "puts available": 0, "puts tx-locked by T": len(puts),
                    "gets still there": len(gets), "gets tx-locked by T": len(gets)}
    if summary == all_applied:
        outcome = "all"
        assert [m.body.decode() for m in txin] == txin_before + puts, f"{ctx}: put order"
        assert all(m.state == "available" and m.tx is None for m in txin), ctx
        assert [(m.msg_id, m.backouts) for m in src] == [x for x in src_before if x[0] not in gets], ctx
    elif summary == none_applied:
        outcome = "none"
        assert listed[t].operations == OPS, ctx
        assert old_bodies == txin_before and len(txin) == len(txin_before) + len(puts), ctx
        assert [(m.msg_id, m.backouts) for m in src] == src_before, ctx  # nothing moved
        _, ops = st.tx_show(t)
        assert len(ops) == OPS, ctx
    else:
        pytest.fail(f"{ctx}: a mix of applied and unapplied operations of T {t}: {summary}")
    assert set(listed) - {t} == set(), f"{ctx}: other transactions {sorted(listed)}"
    return outcome


def _abort_and_check(st: Store, plan: dict, src_before: list[tuple[str, int]],
                     txin_before: list[str], ctx: str) -> None:
    """Abort T of the none case: its puts vanish, its gets are back in place, one backout more."""
    t, gets = plan["tx"], set(plan["gets"])
    assert st.tx_abort(t) == OPS, ctx
    assert [m.body.decode() for m in st.browse(PUT_QUEUE, states="all")] == txin_before, ctx
    src = st.browse(GET_QUEUE, states="all")
    assert all(m.state == "available" and m.tx is None for m in src), ctx
    assert [(m.msg_id, m.backouts) for m in src] == [
        (i, b + 1 if i in gets else b) for i, b in src_before], ctx
    assert st.tx_list() == [], ctx
    with pytest.raises(errors.TransactionError):
        st.tx_commit(t)
    assert st.check() == [], ctx


def _snapshot(st: Store) -> tuple[list[tuple[str, int]], list[str]]:
    src = st.browse(GET_QUEUE, states="all")
    assert all(m.state == "available" for m in src)
    return [(m.msg_id, m.backouts) for m in src], [m.body.decode() for m in st.browse(PUT_QUEUE)]


@pytest.mark.slow
def test_sigkill_around_the_commit_of_1000_operations(tmp_path):
    rounds = int(os.environ.get("TX_CRASH_ROUNDS", "20"))
    seed = int(os.environ.get("TX_CRASH_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    path = tmp_path / "store"
    _create(path)
    outcomes: dict[str, int] = {}
    window = 0.0  # how long the first round's commit took, from the parent's side
    for rnd in range(rounds):
        ctx = f"round {rnd} (TX_CRASH_SEED={seed})"
        with Store.open(path) as st:
            _refill(st, OPS, f"src{rnd}")
            src_before, txin_before = _snapshot(st)
        errlog = tmp_path / f"child-{rnd}.err"
        child = _spawn(path, rng.randrange(1 << 30), rnd, "commit", errlog)
        try:
            lines = _read_until(child, "committing", errlog)
            if rnd == 0:  # calibration: the commit returns, then the kill
                t0 = time.perf_counter()
                lines += _read_until(child, "committed", errlog)
                window = time.perf_counter() - t0
            else:  # mostly in the later part of the commit's time (the LMDB commit comes at
                # about 90% of it), sometimes at once or after it
                pick = rng.random()
                delay = (0.0 if pick < 0.1 else rng.uniform(0.4 * window, 1.1 * window)
                         if pick < 0.85 else rng.uniform(1.1 * window, 2 * window))
                time.sleep(delay)
            lines += _kill(child)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=30)
        plan = _prepared(lines)
        committed = [x for x in lines if x.startswith("committed ")]
        with Store.open(path) as st:
            outcome = _outcome(st, plan, src_before, txin_before, ctx)
            if committed:
                assert committed == [f"committed {OPS}"], ctx
                assert outcome == "all", f"{ctx}: tx_commit returned, yet T was not applied"
            if outcome == "none":
                _abort_and_check(st, plan, src_before, txin_before, ctx)
        key = f"{outcome}{' (commit returned)' if committed else ''}"
        outcomes[key] = outcomes.get(key, 0) + 1
    print(f"tx crash rounds={rounds} seed={seed} commit {window * 1000:.1f} ms, "
          f"outcomes: {outcomes}")


@pytest.mark.slow
def test_abort_after_a_kill_restores_the_none_case(tmp_path):
    """The child is killed holding a prepared T; the reopened store shows T whole and locked
    (invisible to a plain get), and tx_abort puts everything back as it was."""
    path = tmp_path / "store"
    _create(path)
    with Store.open(path) as st:
        _refill(st, OPS + 5, "src")
        src_before, txin_before = _snapshot(st)
    errlog = tmp_path / "child.err"
    child = _spawn(path, 7, 0, "hold", errlog)
    try:
        lines = _read_until(child, "holding", errlog)
        lines += _kill(child)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
    plan = _prepared(lines)
    with Store.open(path) as st:
        assert _outcome(st, plan, src_before, txin_before, "held") == "none"
        assert st.browse(PUT_QUEUE) == []  # the puts are invisible
        gets = set(plan["gets"])
        free = [i for i, _ in src_before if i not in gets]
        assert [m.msg_id for m in st.browse(GET_QUEUE)] == free  # so are the gets
        assert {m.msg_id for m in st.inflight(GET_QUEUE)} == gets
        _abort_and_check(st, plan, src_before, txin_before, "held")
        with pytest.raises(errors.TransactionError):
            st.tx_abort(plan["tx"])
    with Store.open(path) as st:  # and that is what a later process sees
        assert st.check() == []
        assert st.browse(PUT_QUEUE, states="all") == []
        assert [(m.msg_id, m.backouts) for m in st.browse(GET_QUEUE)] == [
            (i, b + 1 if i in gets else b) for i, b in src_before]
