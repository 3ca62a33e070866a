"""SIGKILL during `tx commit` of 1,000 operations: all of them or none (SPEC §2, §5).

A child builds a transaction of 500 puts (to `dst`) and 500 gets (from `src`) and commits it;
the parent kills it with SIGKILL at a random moment around the commit, TX_CRASH_ROUNDS times
(default 20; TX_CRASH_SEED fixes the randomness). Afterwards the store must pass check() and
hold either every operation applied or none, and an abort of the survivor restores `src`.
"""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store import NewMessage, Store, errors

CHILD = Path(__file__).parent / "workers" / "tx_commit_child.py"
HALF = 500


def _fill_src(st, tag):
    t = st.tx_begin()
    st.put_many("src", [NewMessage(f"{tag}-src-{i}".encode()) for i in range(HALF)], tx=t)
    st.tx_commit(t)


@pytest.mark.slow
def test_sigkill_during_tx_commit_applies_all_or_nothing(tmp_path):
    rounds = int(os.environ.get("TX_CRASH_ROUNDS", "20"))
    seed = int(os.environ.get("TX_CRASH_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    path = tmp_path / "qm"
    with Store.open(path, create=True) as st:
        st.create_queue("src", transactional=True)
        st.create_queue("dst", transactional=True)
    outcomes = {"applied": 0, "none": 0}
    for rnd in range(rounds):
        tag = f"r{rnd}"
        with Store.open(path) as st:
            _fill_src(st, tag)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent.parent),
                                                            os.environ.get("PYTHONPATH", "")]))
        child = subprocess.Popen([sys.executable, str(CHILD), str(path), tag, str(HALF)],
                                 stdout=subprocess.PIPE, text=True, env=env)
        try:
            first = child.stdout.readline().split()
            assert first[0] == "tx", (seed, first)
            tx = int(first[1])
            assert child.stdout.readline().strip() == "committing", seed
            time.sleep(rng.uniform(0, 0.02))  # somewhere inside (or just after) the commit
            child.send_signal(signal.SIGKILL)
        finally:
            child.wait(timeout=30)
        with Store.open(path) as st:
            assert st.check() == [], (seed, rnd)
            src = st.browse("src", states="all")
            dst = st.browse("dst", states="all")
            if not src and len(dst) == HALF and all(m.state == "available" for m in dst):
                outcomes["applied"] += 1
                with pytest.raises(errors.TransactionError):
                    st.tx_commit(tx)  # a finished transaction
            else:
                # none applied: every operation still tx-locked by tx, nothing else changed
                assert len(src) == HALF and len(dst) == HALF, (seed, rnd, len(src), len(dst))
                assert {m.state for m in src + dst} == {"tx-locked"}, (seed, rnd)
                assert {m.tx for m in src + dst} == {tx}, (seed, rnd)
                outcomes["none"] += 1
                assert st.tx_abort(tx) == 2 * HALF
                assert [m.state for m in st.browse("src", states="all")] == ["available"] * HALF
                assert st.browse("dst", states="all") == []
                assert st.check() == []
            st.purge_queue("src")
            st.purge_queue("dst")
    print("outcomes", outcomes, "seed", seed)
    assert sum(outcomes.values()) == rounds
