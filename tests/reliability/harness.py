"""The reliability harness: real `mqcli` processes, real SIGKILLs, real LMDB, and a ledger.

A *ledger* says where every message of a store is: body id → `Placement(queue, state, group)`
(group: the confirm id, lock id or transaction holding it). Every message body is
`<id>|<filler>`, the filler a function of the id, so a half-written body cannot pass for a whole
one. `read_ledger` reads a store back through the store library and fails on a duplicated id or
a damaged body.

`run_steps` runs `mqcli` invocations one after another (each a real process, cwd a scratch
directory so that no `store/` directory there can shadow the package) and SIGKILLs whichever
runs when the kill time comes.

Knobs (environment):

- `RELIABILITY_ROUNDS`: SIGKILLs per kill scenario (default 15: 105 kills over 7 scenarios);
- `RELIABILITY_SOAK_SECONDS`: how long the concurrency soak runs (default 20);
- `RELIABILITY_SEED`: fixes the randomness of a run (default: a fresh seed, printed);
- `RELIABILITY_REPORT=FILE`: merge each suite's tallies into this JSON file;
  `python tests/reliability/harness.py FILE` prints them as the tables of RELIABILITY.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
if str(TESTS) not in sys.path:  # cli_helpers, when run as a script
    sys.path.insert(0, str(TESTS))

from cli_helpers import invoke, mqcli_command  # noqa: E402
from store.environment import committed_txnid  # noqa: E402

STEP_TIMEOUT = 120.0  # seconds one mqcli step may take before it counts as a hang


def rounds(default: int = 15) -> int:
    return int(os.environ.get("RELIABILITY_ROUNDS", str(default)))


def soak_seconds(default: float = 20.0) -> float:
    return float(os.environ.get("RELIABILITY_SOAK_SECONDS", str(default)))


def seed() -> int:
    return int(os.environ.get("RELIABILITY_SEED", str(random.randrange(1 << 30))))


# ---- bodies ------------------------------------------------------------------------------

def body_of(ident: str) -> bytes:
    """The one body message `ident` may have: the id, `|`, 16–300 bytes derived from the id."""
    digest = hashlib.blake2b(ident.encode(), digest_size=32).hexdigest()
    size = 16 + int(digest[:4], 16) % 285
    return f"{ident}|".encode() + (digest * (size // 64 + 1)).encode()[:size]


def ident_of(body: bytes) -> str:
    """The id of a whole body; AssertionError for a body that is not one of `body_of`."""
    ident = body.split(b"|", 1)[0].decode("ascii", "replace")
    assert body == body_of(ident), f"damaged or foreign body {body[:60]!r}"
    return ident


# ---- ledgers ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Placement:
    queue: str
    state: str = "available"
    group: int | None = None  # confirm id, lock id or transaction


Ledger = dict[str, Placement]


@dataclass
class Snapshot:
    """A store read back: where each message is, and the queue order of each queue."""

    ledger: Ledger
    order: dict[str, tuple[int, int]]  # id -> (7 - priority, seq): queue order within a queue
    messages: int = 0

    def available(self, queue: str) -> list[str]:
        """Available messages of a queue in queue order (what a get or move takes first)."""
        ids = [i for i, p in self.ledger.items() if p.queue == queue and p.state == "available"]
        return sorted(ids, key=self.order.__getitem__)


def _group(m: Any) -> int | None:
    return m.tx or m.confirm_id or m.lock_id


def read_ledger(path: Path, queues: Iterable[str] | None = None) -> Snapshot:
    """Every message of the store (all states, every queue unless named): a duplicated id or a
    damaged body fails here."""
    from store import Store

    ledger: Ledger = {}
    order: dict[str, tuple[int, int]] = {}
    with Store.open(path) as st:
        names = list(queues) if queues is not None else [q.name for q in st.list_queues()]
        for name in names:
            for m in st.browse(name, states="all"):
                ident = ident_of(m.body)
                assert ident not in ledger, (
                    f"message {ident} is stored twice: {ledger[ident]} and {m.queue}/{m.state}")
                ledger[ident] = Placement(m.queue, m.state, _group(m))
                order[ident] = (7 - m.priority, m.seq)
    return Snapshot(ledger, order, len(ledger))


def diff(expected: Ledger, actual: Ledger) -> str:
    """What differs, briefly: lost, extra and moved ids."""
    lost = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected))
    moved = sorted(i for i in set(expected) & set(actual) if expected[i] != actual[i])
    parts = [f"lost {len(lost)} {lost[:5]}", f"extra {len(extra)} {extra[:5]}",
             f"changed {len(moved)} " + str([(i, expected[i], actual[i]) for i in moved[:3]])]
    return "; ".join(parts)


def check_store(path: Path, ctx: str) -> None:
    """`mqcli check` exits 0 (it runs its walk in a child process of this one)."""
    result = invoke(["--store", str(path), "check", "-o", "json"])
    assert result.code == 0, f"{ctx}: mqcli check failed: {result}"
    assert result.json() == {"ok": True, "problems": []}, ctx


# ---- running mqcli and killing it --------------------------------------------------------------

@dataclass
class Step:
    """One `mqcli` invocation: its arguments (after --store) and the file it reads as stdin."""

    args: list[str]
    stdin: Path | None = None


@dataclass
class StepResult:
    code: int | None  # exit code; None if the step was killed
    stdout: bytes
    stderr: str


@dataclass(frozen=True)
class Kill:
    """When to SIGKILL: `delay` seconds after the store's `after_commits`-th commit since the
    run started (0: after the start)."""

    after_commits: int
    delay: float


@dataclass
class Run:
    results: list[StepResult] = field(default_factory=list)
    killed: int | None = None  # index of the step the SIGKILL hit
    seconds: float = 0.0
    commit_times: list[float] = field(default_factory=list)  # when each commit was seen

    def gaps(self) -> list[float]:
        """Time to the first commit, between commits, and from the last one to the end."""
        marks = [0.0, *self.commit_times, self.seconds]
        return [b - a for a, b in zip(marks, marks[1:])]

    @property
    def completed(self) -> int:
        """How many steps ran to their end."""
        return len(self.results) if self.killed is None else self.killed


class _Clock:
    """Watches the store's commits (its LMDB transaction id) while steps run, and says when
    the kill is due."""

    def __init__(self, store: Path, run: Run, kill: Kill | None) -> None:
        self.store, self.run, self.kill = store, run, kill
        self.t0 = time.monotonic()
        self.base = self.last = committed_txnid(store)
        self.deadline = None if kill is None or kill.after_commits else self.t0 + kill.delay

    def tick(self) -> float | None:
        """Note new commits; the kill deadline, once known."""
        txnid = committed_txnid(self.store)
        if txnid != self.last:
            now = time.monotonic() - self.t0
            self.run.commit_times += [now] * (txnid - self.last)
            self.last = txnid
            if self.deadline is None and self.kill and txnid - self.base >= self.kill.after_commits:
                self.deadline = time.monotonic() + self.kill.delay
        return self.deadline


def run_steps(store: Path, steps: Sequence[Step], workdir: Path, kill: Kill | None,
              ctx: str) -> Run:
    """Run the steps in order, each a real `mqcli` process; SIGKILL the one running when
    `kill` says (None: run them all). A step that is not killed must exit 0. Output goes to
    files, so that what was written before the kill stays readable."""
    workdir.mkdir(parents=True, exist_ok=True)
    run = Run()
    clock = _Clock(store, run, kill)
    for n, step in enumerate(steps):
        out, err = workdir / f"step{n}.out", workdir / f"step{n}.err"
        with open(out, "wb") as o, open(err, "wb") as e, \
                open(step.stdin, "rb") if step.stdin else open(os.devnull, "rb") as i:
            proc = subprocess.Popen([*mqcli_command(), "--store", str(store), *step.args],
                                    stdin=i, stdout=o, stderr=e, cwd=workdir)
        try:
            code = _wait_or_kill(proc, clock, ctx)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        result = StepResult(code, out.read_bytes(), err.read_text("utf-8", "backslashreplace"))
        run.results.append(result)
        assert "Traceback" not in result.stderr, f"{ctx}: step {step.args}: {result.stderr}"
        if code is None:
            run.killed = n
            break
        assert code == 0, f"{ctx}: step {step.args} exited {code}: {result.stderr}"
    clock.tick()
    run.seconds = time.monotonic() - clock.t0
    return run


def _wait_or_kill(proc: subprocess.Popen, clock: _Clock, ctx: str) -> int | None:
    """The exit code, or None once the process was SIGKILLed at the clock's deadline (polled
    every millisecond: Popen.wait(timeout) may oversleep by 50 ms)."""
    hang = time.monotonic() + STEP_TIMEOUT
    while True:
        deadline = clock.tick()
        code = proc.poll()
        if code is not None:
            return code
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            proc.send_signal(signal.SIGKILL)
            code = proc.wait(timeout=STEP_TIMEOUT)
            if code == -signal.SIGKILL:
                return None
            return code  # it ended on its own just before the signal
        assert now < hang, f"{ctx}: {proc.args} still running after {STEP_TIMEOUT}s (hang?)"
        time.sleep(0.001 if deadline is None else min(0.001, max(0.0, deadline - now)))


def printed_ids(stdout: bytes) -> list[str]:
    """Body ids of the whole JSON lines a step printed (-o jsonl); a line torn by the kill
    does not count."""
    ids = []
    for line in stdout.split(b"\n")[:-1]:
        try:
            record = json.loads(line)
        except ValueError:
            break
        ids.append(ident_of(record["body"].encode()))
    return ids


def jsonl_records(idents: Iterable[str], origin: str, first_n: int, rng: random.Random) -> bytes:
    """Records as `get -o jsonl` prints them (what `put --jsonl` and `import` read), msg ids
    `<origin>\\<first_n + k>`, random priorities."""
    lines = []
    for k, ident in enumerate(idents):
        lines.append(json.dumps({
            "msg_id": f"{origin}\\{first_n + k}", "put_time": "2026-01-01T00:00:00.000000Z",
            "priority": rng.randrange(8), "body": body_of(ident).decode(),
        }))
    return ("\n".join(lines) + "\n").encode()


# ---- tallies ---------------------------------------------------------------------------------

def record(section: str, key: str, tally: dict[str, Any]) -> None:
    """Merge one tally into $RELIABILITY_REPORT (a JSON file), if it is set."""
    target = os.environ.get("RELIABILITY_REPORT")
    if not target:
        return
    path = Path(target)
    data = json.loads(path.read_text()) if path.exists() and path.stat().st_size else {}
    data.setdefault(section, {})[key] = tally
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def render(data: dict[str, Any]) -> str:
    """The tables of RELIABILITY.md from a report file."""
    out = []

    def table(title: str, headers: list[str], rows: list[list[Any]]) -> None:
        out.append(f"### {title}\n")
        out.append("| " + " | ".join(headers) + " |")
        out.append("| " + " | ".join("---" for _ in headers) + " |")
        out.extend("| " + " | ".join(str(c) for c in row) + " |" for row in rows)
        out.append("")

    kills = data.get("kills", {})
    if kills:
        rows = [[k, v["kills"], v["rounds"], v["messages_checked"], v["lost"], v["duplicated"],
                 v["stages"]["none"], v["stages"]["partial"], v["stages"]["all"], v["seed"]]
                for k, v in sorted(kills.items())]
        total = Counter()
        for v in kills.values():
            total.update({k: v[k] for k in ("kills", "rounds", "messages_checked", "lost", "duplicated")})
            total.update({f"s_{k}": n for k, n in v["stages"].items()})
        rows.append(["**all**", total["kills"], total["rounds"], total["messages_checked"],
                     total["lost"], total["duplicated"], total["s_none"], total["s_partial"],
                     total["s_all"], ""])
        table("SIGKILL trials", ["scenario", "kills survived", "rounds", "messages checked", "lost",
                                 "duplicated", "killed before 1st commit", "between commits",
                                 "after last commit", "seed"], rows)
    fuzz = data.get("fuzz", {})
    if fuzz:
        rows = [[k, v["examples"], v["accepted"], v["refused"], v["unexpected"]]
                for k, v in sorted(fuzz.items())]
        table("Fuzzing (Hypothesis)", ["target", "inputs run", "accepted", "refused with the "
                                       "documented error", "unexpected errors"], rows)
    soak = data.get("soak", {})
    if soak:
        rows = [[k, v["processes"], v["seconds"], v["operations"], v["puts"], v["consumed"],
                 v["left"], v["anomalies"], v["seed"]] for k, v in sorted(soak.items())]
        table("Concurrency soak", ["run", "processes", "seconds", "operations", "messages put",
                                   "consumed once", "left once", "anomalies", "seed"], rows)
    corruption = data.get("corruption", {})
    if corruption:
        rows = [[k, v["trials"], v["detected"], v["passed"], v["payload_changed"], v["crashed"]]
                for k, v in sorted(corruption.items())]
        table("Damaged data files", ["damage", "trials", "detected (exit 11)",
                                     "check passed (store reads back whole)",
                                     "of which messages with changed fields", "tool crashed"], rows)
    backup = data.get("backup", {})
    if backup:
        rows = [[k, v["backups"], v["writer_operations"], v["consistent"]] for k, v in sorted(backup.items())]
        table("Hot backups", ["run", "backups", "writer operations meanwhile", "consistent copies"], rows)
    return "\n".join(out)


if __name__ == "__main__":
    print(render(json.loads(Path(sys.argv[1]).read_text())))
