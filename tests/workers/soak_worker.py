"""Worker of the concurrency soak (tests/reliability/test_soak.py).

usage: soak_worker.py STORE WORKER SEED SECONDS LOG

Runs `mqcli` commands against one store until SECONDS have passed, in a random mix: put (also
two-phase: put --confirm-id, then confirm or undo), get, two-phase get then confirm or undo
(sometimes with a lease left to lapse), browse --lock then get --lock-id or unlock, operators'
undo --older-than, sweep and move between the two queues. Each command runs in this process
through cli_helpers.invoke: the real CLI with its error mapping, without paying the interpreter's
start-up (nor Typer's building of the click command) for each of thousands of commands. The
8 workers are 8 real processes on one store.

Log (one line per write(2), after the command returned):

  put ID...          these messages were put
  got ID...          these messages were consumed (a get's output, or a confirm of every message
                     a two-phase get held)
  partial C N ID...  confirm C confirmed N of the messages its get held (someone undid the rest)
  ops N              the number of commands run (last line, on a clean exit)
  anomaly TEXT       an exit code or output the operation does not allow
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(TESTS), str(TESTS / "reliability")]

from cli_helpers import invoke  # noqa: E402
from harness import body_of, ident_of  # noqa: E402

# mqcli.app.run builds the command tree once per process (mqcli.app.click_command) and each
# command on first use: a worker runs hundreds of commands in one process

QUEUES = ("soak", "soak2")


class Worker:
    def __init__(self, store: str, wid: int, seed: int, log: str) -> None:
        self.store, self.wid = store, wid
        self.rng = random.Random(seed)
        self.fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.ops = 0
        self.made = 0
        self.next_id = (wid + 1) * 10**12  # confirm and lock ids: disjoint ranges per worker

    def log(self, *words: object) -> None:
        os.write(self.fd, (" ".join(map(str, words)) + "\n").encode())

    def mq(self, *args: object, allowed: tuple[int, ...] = (0,), input: bytes | None = None):
        self.ops += 1
        result = invoke(["--store", self.store, *map(str, args)], input=input)
        if result.code not in allowed:
            self.log("anomaly", json.dumps({"args": result.args, "code": result.code,
                                            "stderr": result.stderr[-300:]}))
        return result

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def queue(self) -> str:
        return QUEUES[self.rng.random() < 0.3]

    # ---- operations ------------------------------------------------------------------------

    def put(self) -> None:
        ids = [f"w{self.wid}-{self.made + i}" for i in range(self.rng.randint(1, 20))]
        self.made += len(ids)
        data = b"\n".join(body_of(i) for i in ids) + b"\n"
        r = self.mq("put", self.queue(), "--lines", "-", "-p", self.rng.randrange(8), "-o", "jsonl",
                    input=data)
        if r.code == 0:
            stored = [ident_of(m["body"].encode()) for m in r.jsonl()]
            if stored != ids:
                self.log("anomaly", f"put printed {stored[:3]}..., not {ids[:3]}...")
            self.log("put", *stored)

    def put_two_phase(self) -> None:
        ident = f"w{self.wid}-{self.made}"
        self.made += 1
        q, c = self.queue(), self.new_id()
        if self.mq("put", q, "-", "--confirm-id", c, "-o", "json", input=body_of(ident)).code:
            return
        if self.rng.random() < 0.8:  # an operator's undo may have deleted it meanwhile
            if self.mq("confirm", q, "--confirm-id", c, allowed=(0, 4)).code == 0:
                self.log("put", ident)
        else:
            self.mq("undo", q, "--confirm-id", c, allowed=(0, 4))

    def get(self) -> None:
        # half of them wait a little: getters register their FIFOs while others wake them
        wait = ["--wait", "200ms"] if self.rng.random() < 0.5 else []
        r = self.mq("get", self.queue(), "--count", self.rng.randint(1, 30), *wait, "-o", "jsonl",
                    allowed=(0, 3))
        if r.code == 0:
            self.log("got", *(ident_of(m["body"].encode()) for m in r.jsonl()))

    def two_phase_get(self) -> None:
        q, c = self.queue(), self.new_id()
        args = ["get", q, "--count", self.rng.randint(1, 10), "--confirm-id", c, "-o", "jsonl"]
        lapse = self.rng.random() < 0.1
        if lapse or self.rng.random() < 0.2:
            args += ["--lease", "300ms"]
        r = self.mq(*args, allowed=(0, 3))
        if r.code:
            return
        held = [ident_of(m["body"].encode()) for m in r.jsonl()]
        if lapse:
            time.sleep(0.4)  # the lease lapses: the next write (or a sweep) undoes the get
        if self.rng.random() < 0.25:
            self.mq("undo", q, "--confirm-id", c, allowed=(0, 4))
            return
        r = self.mq("confirm", q, "--confirm-id", c, "-o", "json", allowed=(0, 4))
        if r.code:
            return
        n = r.json()["confirmed"]
        if n == len(held):
            self.log("got", *held)
        elif 0 < n < len(held):
            self.log("partial", c, n, *held)
        else:
            self.log("anomaly", f"confirm {c} confirmed {n} of the {len(held)} held")

    def browse_lock(self) -> None:
        q, lock = self.queue(), self.new_id()
        r = self.mq("browse", q, "--lock", "--lock-id", lock, "--limit", self.rng.randint(1, 10),
                    "--lease", "2s", "-o", "jsonl", allowed=(0, 3))
        if r.code:
            return
        if self.rng.random() < 0.4:
            self.mq("unlock", q, "--lock-id", lock, allowed=(0, 4))
            return
        r = self.mq("get", q, "--lock-id", lock, "--all", "-o", "jsonl", allowed=(0, 4))
        got = [ident_of(m["body"].encode()) for m in r.jsonl()]
        if got:  # what a get printed, it took (no one is killed here)
            self.log("got", *got)

    def operator_undo(self) -> None:
        if self.rng.random() < 0.7:
            self.mq("undo", "--older-than", "200ms", "-o", "json")
        else:
            self.mq("undo", QUEUES[1], "--all", "-o", "json")

    def sweep(self) -> None:
        self.mq("sweep", "-o", "json")

    def move(self) -> None:
        src, dst = QUEUES if self.rng.random() < 0.5 else QUEUES[::-1]
        self.mq("move", src, dst, "--count", self.rng.randint(1, 50), "-o", "json")

    def look(self) -> None:
        if self.rng.random() < 0.5:
            self.mq("browse", self.queue(), "--limit", 5, "-o", "jsonl")
        else:
            self.mq("inflight", "-o", "json")

    def loop(self, seconds: float) -> None:
        ops = [(self.put, 20), (self.put_two_phase, 4), (self.get, 15), (self.two_phase_get, 15),
               (self.browse_lock, 12), (self.operator_undo, 3), (self.sweep, 4), (self.move, 8),
               (self.look, 3)]
        functions, weights = zip(*ops)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.rng.choices(functions, weights)[0]()
        self.log("ops", self.ops)


def main() -> int:
    store, wid, seed, seconds, log = sys.argv[1:6]
    Worker(store, int(wid), int(seed), log).loop(float(seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
