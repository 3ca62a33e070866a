"""SIGKILL at random points of real `mqcli` processes (docs/design.md#store: after a crash a message is
wholly there or wholly absent, never duplicated, and `mqcli check` passes).

Each scenario is one row of SCENARIOS: it prepares a round (through the store library, not
killed) and returns a `Plan`: the `mqcli` steps to run, and the *stages* — the ledger of the
store after 0, 1, 2, … of the plan's commits. The harness kills the step running at a random
point: after a random number of the plan's commits (watched in the store's meta pages), a
random time into the interval that follows, as long as that interval took in a clean first
round. Afterwards `mqcli check` must pass and the store must equal one stage exactly, between
the least stage the printed output proves (a put prints after its commit) and the greatest it
allows (a destructive get holds a batch, prints it, then commits its removal, so nothing
unprinted may be gone; a killed get's held batch is back by the next access). Then
the round is cleaned up (pending confirms undone, locks released, an open transaction
aborted) and the next round starts from what the store holds.

Adding a scenario (the store-and-forward `dispatch` and `listen` are next) is one more row:
a name and a `prepare` function returning its plan.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness import (
    Kill, Ledger, Placement, Run, Snapshot, Step, body_of, check_store, diff, jsonl_records,
    printed_ids, read_ledger, record, rounds, run_steps, seed,
)
from store import NewMessage, Store

Q, Q2, TQ = "work", "other", "txwork"
BATCH = 1000  # mqcli's commit batch (put --jsonl, get --count, move, import)
MAX_MESSAGES = 20_000  # above this the round's queue is purged first, to keep rounds short


# ---- stages ----------------------------------------------------------------------------------

def boundaries(total: int, batch: int = BATCH) -> list[int]:
    """How many items are done after each commit of a batched command."""
    return [min(k * batch, total) for k in range(1, -(-total // batch) + 1)]


@dataclass
class StepPlan:
    """What one step commits: `stages` ledgers (one per commit) and how its output relates
    to its commits: printed "before" each commit (destructive gets, as docs/design.md#dequeue says), "after"
    each commit (put), or a document at the "end"."""

    step: Step
    stages: list[Ledger]
    output: str  # "before" | "after" | "end"
    marks: list[int] = field(default_factory=list)  # printed lines at each commit (before/after)

    def bounds(self, result) -> tuple[int, int]:
        """Least and greatest number of this step's commits that its output allows."""
        n = len(self.stages)
        if result.code == 0:
            return n, n
        if self.output == "end":
            return (n if _document(result.stdout) else 0), n
        p = len(printed_ids(result.stdout))
        if self.output == "before":  # batch k printed whole before it commits, and batch k+1
            # is printed only after batch k committed
            return sum(b < p for b in self.marks), sum(b <= p for b in self.marks)
        # "after": a line of batch k printed means batch k committed
        return sum(b < p for b in [0, *self.marks[:-1]]), n


@dataclass
class Plan:
    before: Ledger
    steps: list[StepPlan]

    @property
    def stages(self) -> list[Ledger]:
        return [self.before] + [s for p in self.steps for s in p.stages]

    def allowed(self, run: Run) -> tuple[int, int]:
        done = sum(len(p.stages) for p in self.steps[:run.completed])
        if run.killed is None:
            return done, done
        lo, hi = self.steps[run.killed].bounds(run.results[run.killed])
        return done + lo, done + hi


def _document(stdout: bytes) -> bool:
    try:
        json.loads(stdout)
    except ValueError:
        return False
    return True


def moved(ledger: Ledger, ids: list[str], to: Placement | None) -> Ledger:
    out = dict(ledger)
    for i in ids:
        if to is None:
            del out[i]
        else:
            out[i] = to
    return out


def batched(before: Ledger, ids: list[str], to: Placement | None, marks: list[int]) -> list[Ledger]:
    return [moved(before, ids[:b], to) for b in marks]


def held_batches(before: Ledger, ids: list[str], marks: list[int],
                 to: Placement | None = None) -> tuple[list[Ledger], list[int]]:
    """A destructive get's commits: each batch is held (a light commit), written out with no
    transaction open, then removed (store/holders.py). A killed get's held batch goes back on
    the next access, so the store after a hold looks as before it. Returns the stages and
    the printed lines each commit needs: a hold may come once the batch before is printed."""
    stages, commit_marks = [], []
    for k, b in enumerate(marks):
        previous = marks[k - 1] if k else 0
        stages += [moved(before, ids[:previous], to), moved(before, ids[:b], to)]
        commit_marks += [previous, b]
    return stages, commit_marks


def chained_batches(before: Ledger, ids: list[str], marks: list[int]) -> tuple[list[Ledger], list[int]]:
    """A plain bulk get's commits (Store.get_batches): the first batch is held, and each
    batch's removal is committed with the hold of the next; the last removal comes alone (or
    with the look that finds the queue empty). A killed get's held batch goes back."""
    stages = [moved(before, ids[:b], None) for b in [0, *marks]]
    return stages, [0, *marks]


# ---- the world of one scenario ----------------------------------------------------------------

@dataclass
class World:
    path: Path
    rng: random.Random
    tag: str
    round: int = 0
    snap: Snapshot | None = None
    made: int = 0

    def new_ids(self, n: int) -> list[str]:
        ids = [f"{self.tag}{self.round}-{self.made + i}" for i in range(n)]
        self.made += n
        return ids

    def refill(self, queue: str, need: int, transactional: bool = False) -> None:
        """Make sure `queue` has `need` available messages (library puts, not killed)."""
        missing = need - len(self.snap.available(queue))
        if missing <= 0:
            return
        with Store.open(self.path) as st:
            tx = st.tx_begin() if transactional else None
            ids = self.new_ids(missing)
            for k in range(0, missing, BATCH):
                st.put_many(queue, [NewMessage(body_of(i), priority=self.rng.randrange(8))
                                    for i in ids[k:k + BATCH]], tx=tx)
            if tx is not None:
                st.tx_commit(tx)
        self.snap = read_ledger(self.path)

    def keep_small(self, queue: str) -> None:
        if self.snap.messages > MAX_MESSAGES:
            with Store.open(self.path) as st:
                st.purge_queue(queue)
            self.snap = read_ledger(self.path)

    def file(self, name: str, data: bytes) -> Path:
        path = self.path.parent / f"{name}-{self.round}"
        path.write_bytes(data)
        return path


# ---- scenarios ----------------------------------------------------------------------------------

def bulk_put(w: World) -> Plan:
    """`put --jsonl FILE` of many records: batches of 1,000, each all or nothing."""
    w.keep_small(Q)
    ids = w.new_ids(w.rng.randint(1500, 5000))
    data = jsonl_records(ids, str(uuid.uuid4()), 1, w.rng)
    marks = boundaries(len(ids))
    step = Step(["put", Q, "--jsonl", str(w.file("put", data)), "-o", "jsonl"])
    before = w.snap.ledger
    return Plan(before, [StepPlan(step, batched(before, ids, Placement(Q), marks), "after", marks)])


def batched_get(w: World) -> Plan:
    """`get --count N` (or `--all`): each batch is held, written out, then removed with the
    hold of the next."""
    w.refill(Q, 5000)
    ids = w.snap.available(Q)
    if w.rng.random() < 0.3:
        args = ["get", Q, "--all", "-o", "jsonl"]
    else:
        ids = ids[:w.rng.randint(1500, len(ids))]
        args = ["get", Q, "--count", str(len(ids)), "-o", "jsonl"]
    before = w.snap.ledger
    stages, marks = chained_batches(before, ids, boundaries(len(ids)))
    return Plan(before, [StepPlan(Step(args), stages, "before", marks)])


def two_phase_get(w: World) -> Plan:
    """`get --count N --confirm-id C` then `confirm --confirm-id C`."""
    w.refill(Q, 3000)
    ids = w.snap.available(Q)[:w.rng.randint(1, 2500)]
    c = w.rng.randrange(1, 1 << 62)
    marks = boundaries(len(ids))
    before = w.snap.ledger
    # each batch held while written, then pending under C in the write that ends the hold
    got, commit_marks = held_batches(before, ids, marks, Placement(Q, "get-unconfirmed", c))
    get = StepPlan(Step(["get", Q, "--count", str(len(ids)), "--confirm-id", str(c), "-o", "jsonl"]),
                   got, "before", commit_marks)
    confirm = StepPlan(Step(["confirm", Q, "--confirm-id", str(c), "-o", "json"]),
                       [moved(got[-1], ids, None)], "end")
    return Plan(before, [get, confirm])


def browse_lock_get(w: World) -> Plan:
    """`browse --lock --lock-id L --limit N`, then `get --lock-id L --count N`."""
    w.refill(Q, 1000)
    ids = w.snap.available(Q)[:w.rng.randint(1, 1000)]
    lock = w.rng.randrange(1, 1 << 62)
    before = w.snap.ledger
    # held while its lock id is written out, locked in the write after: killed first, they are back
    held, held_marks = held_batches(before, ids, [len(ids)], Placement(Q, "locked-browse", lock))
    locked = held[-1]
    browse = StepPlan(Step(["browse", Q, "--lock", "--lock-id", str(lock), "--limit", str(len(ids)),
                            "-o", "jsonl"]), held, "before", held_marks)
    stages, marks = held_batches(locked, ids, [len(ids)])  # held, it goes back to locked-browse
    get = StepPlan(Step(["get", Q, "--lock-id", str(lock), "--count", str(len(ids)), "-o", "jsonl"]),
                   stages, "before", marks)
    return Plan(before, [browse, get])


def tx_commit(w: World) -> Plan:
    """`tx commit T` of a transaction of thousands of puts and gets (prepared by the library)."""
    w.keep_small(TQ)
    w.refill(TQ, 3000, transactional=True)
    gets = w.snap.available(TQ)[:w.rng.randint(0, 3000)]
    puts = w.new_ids(w.rng.randint(1, 3000))
    with Store.open(w.path) as st:
        t = st.tx_begin()
        for k in range(0, len(puts), BATCH):
            st.put_many(TQ, [NewMessage(body_of(i), priority=w.rng.randrange(8))
                             for i in puts[k:k + BATCH]], tx=t)
        for k in range(0, len(gets), BATCH):
            got = st.get_many(TQ, min(BATCH, len(gets) - k), wait=0, tx=t)
            assert [m.body for m in got] == [body_of(i) for i in gets[k:k + BATCH]]
    w.snap = read_ledger(w.path)
    before = w.snap.ledger
    assert all(before[i] == Placement(TQ, "tx-locked", t) for i in puts + gets)
    committed = moved(moved(before, gets, None), puts, Placement(TQ))
    return Plan(before, [StepPlan(Step(["tx", "commit", str(t), "-o", "json"]), [committed], "end")])


def move(w: World) -> Plan:
    """`move SRC DST --count N`: batches of 1,000, each dequeued and enqueued at once."""
    w.refill(Q, 2000)
    src, dst = (Q, Q2) if len(w.snap.available(Q)) >= len(w.snap.available(Q2)) else (Q2, Q)
    ids = w.snap.available(src)[:w.rng.randint(1000, 4000)]
    marks = boundaries(len(ids))
    before = w.snap.ledger
    step = Step(["move", src, dst, "--count", str(len(ids)), "-o", "json"])
    return Plan(before, [StepPlan(step, batched(before, ids, Placement(dst), marks), "end")])


def import_file(w: World) -> Plan:
    """`import FILE --queue Q`: the file is validated whole, then stored 1,000 at a commit."""
    w.keep_small(Q)
    ids = w.new_ids(w.rng.randint(1500, 5000))
    path = w.file("import", jsonl_records(ids, str(uuid.uuid4()), 1, w.rng))
    marks = boundaries(len(ids))
    before = w.snap.ledger
    step = Step(["import", str(path), "--queue", Q, "-o", "json"])
    return Plan(before, [StepPlan(step, batched(before, ids, Placement(Q), marks), "end")])


@dataclass(frozen=True)
class Scenario:
    name: str
    prepare: Callable[[World], Plan]


SCENARIOS = [
    Scenario("bulk-put", bulk_put),
    Scenario("batched-get", batched_get),
    Scenario("two-phase-get-confirm", two_phase_get),
    Scenario("browse-lock-get", browse_lock_get),
    Scenario("tx-commit", tx_commit),
    Scenario("move", move),
    Scenario("import", import_file),
]


def choose_kill(rng: random.Random, plan: Plan, calibration: Run) -> Kill:
    """After a random number of the plan's commits (0 to all), a random time within the
    interval that follows: the startup and the work to the first commit, the work of the next
    batch, or the output and exit after the last commit — as long as a clean run took."""
    commits = len(plan.stages) - 1
    after = rng.randint(0, commits)
    gaps = calibration.gaps()
    if after == 0:
        span = gaps[0]
    elif after >= commits or len(gaps) <= 2:
        span = gaps[-1]
    else:
        span = sum(gaps[1:-1]) / len(gaps[1:-1])
    return Kill(after, rng.uniform(0.0, span))


def _clean_up(path: Path, ledger: Ledger) -> None:
    """Undo what a killed round left in flight, so the next round starts from rest."""
    with Store.open(path) as st:
        for queue, state, group in {(p.queue, p.state, p.group) for p in ledger.values()}:
            if state == "get-unconfirmed":
                st.undo(queue, confirm_id=group)
            elif state == "locked-browse":
                st.unlock(queue, group)
        for info in st.tx_list():
            st.tx_abort(info.tx)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_sigkill_leaves_exactly_the_committed_messages(tmp_path, scenario):
    target = rounds()
    run_seed = seed()
    rng = random.Random(f"{run_seed}-{scenario.name}")
    path = tmp_path / "store"
    with Store.open(path, create=True) as st:
        st.create_queue(Q)
        st.create_queue(Q2)
        st.create_queue(TQ, transactional=True)
    w = World(path, rng, tag=scenario.name[:2])
    w.snap = read_ledger(path)
    calibration = None  # the first round runs clean, to time the intervals between commits
    kills = checked = 0
    stages = Counter()
    for rnd in range(3 * target + 1):  # bounded: kills that land after the end do not count
        if kills >= target:
            break
        w.round = rnd
        ctx = f"{scenario.name} round {rnd} (RELIABILITY_SEED={run_seed})"
        plan = scenario.prepare(w)
        kill = None if calibration is None else choose_kill(rng, plan, calibration)
        run = run_steps(path, [p.step for p in plan.steps], tmp_path / f"r{rnd}", kill, ctx)
        if calibration is None:
            calibration = run
            assert len(run.commit_times) == len(plan.stages) - 1, (
                f"{ctx}: a clean run made {len(run.commit_times)} commits, the plan has "
                f"{len(plan.stages) - 1}")
        kills += run.killed is not None

        check_store(path, ctx)
        actual = read_ledger(path)
        least, most = plan.allowed(run)
        all_stages = plan.stages
        matches = [k for k, stage in enumerate(all_stages) if stage == actual.ledger]
        assert matches, (f"{ctx}: the store is no stage of the plan (killed in step {run.killed}); "
                         f"against the least allowed stage {least}: "
                         f"{diff(all_stages[least], actual.ledger)}")
        assert any(least <= k <= most for k in matches), (
            f"{ctx}: the store is at stage {matches}, but the output allows {least}..{most} "
            f"(killed in step {run.killed}, printed "
            f"{[len(printed_ids(r.stdout)) for r in run.results]})")
        reached = max(k for k in matches if least <= k <= most)
        if run.killed is not None:
            stages["none" if reached == 0 else "all" if reached == len(all_stages) - 1 else "partial"] += 1
        checked += len(actual.ledger)
        _clean_up(path, actual.ledger)
        w.snap = read_ledger(path)
    assert kills >= target, f"{scenario.name}: only {kills} of {w.round + 1} rounds were killed in time"
    check_store(path, scenario.name)
    # a lost or duplicated message fails the round above, so a recorded tally has none
    tally = {"kills": kills, "rounds": w.round + 1, "messages_checked": checked, "lost": 0,
             "duplicated": 0, "stages": {k: stages[k] for k in ("none", "partial", "all")},
             "seed": run_seed, "clean_run_s": round(calibration.seconds, 3)}
    record("kills", scenario.name, tally)
    print(f"{scenario.name}: {tally}")
