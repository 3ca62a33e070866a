"""Instructions a message of workloads 1 to 4, counted by valgrind's callgrind: the measure
of the store's own CPU that a noisy, shared machine does not change (the timed suites vary
~2x between minutes on one). Each path runs twice in a child process under callgrind, with
`N` and `6 N` operations after the same set-up; the difference over `5 N` is what one
operation costs (start-up, imports and set-up cancel out). System calls are not counted:
the fsyncs are the disk's, not the store's. The durable paths are counted with their
store-pattern rows too (raw py-lmdb writing the same keys, bench/workloads.py): how far the
store's Python is above the floor of its design. The batched paths are counted with their
py-lmdb rows too (the peer of their targets, workloads 2 and 3): the ratio of the counts is
the ratio a machine that runs every instruction at one speed would time.

    python -m bench.instructions [N] [--only put|ack|putmany|get]   # default N = 100; needs valgrind
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

PATHS = {
    "put": "one durable put a commit (st.put)",
    "ack": "ack and next (consumer.next + confirm), one durable commit a message",
    "putmany": "batched put (put_many, 1,000 a commit)",
    "get": "batched get (get_batches, 1,000 a commit, as `mqcli get --all`)",
}
PATTERNS = ("put", "ack", "putmany")  # the paths with a store-pattern row (bench/workloads.py), counted with them
GET_PER = 10  # the batched paths take this many messages for each of `n`: whole batches at N = 100
BATCHED = ("putmany", "get")  # whose targets' peer is raw py-lmdb: counted with it too


def _child(kind: str, n: int, prefill: int) -> None:
    """What the child runs under callgrind: the set-up (for ack and next and the batched get,
    `prefill` messages put whatever `n` is), warm-up operations, then `n` (the batched get:
    GET_PER * n messages, and the batched put). `KIND-pattern` runs the path's store-pattern row instead: raw
    py-lmdb writing what the store writes (bench/workloads.py), the floor of its design;
    `KIND-raw` its workload's py-lmdb row."""
    from store import NewMessage, Store

    from .runner import BODY
    from .workloads import (
        MAP_SIZE, QUEUE, WARM_SINGLE, _lmdb_open, _lmdb_prefill, _pattern_open, lmdb_get_batches, lmdb_put_batched,
        lmdb_store_pattern_put_batched, pattern_ack_and_next, pattern_commit, pattern_prefill, pattern_put,
        store_put_batched,
    )

    with tempfile.TemporaryDirectory(prefix="mqbench-instr-") as workdir:
        if kind == "putmany-raw":
            lmdb_put_batched(workdir, GET_PER * n, BODY, 1000)
            return
        if kind == "get-raw":  # the same prefill whatever `n` is, as the store's get below
            env = _lmdb_open(workdir)
            _lmdb_prefill(env, prefill, BODY, 1000)
            lmdb_get_batches(env, GET_PER * n, 1000)
            env.close()
            return
        if kind.startswith("putmany"):  # the workload's own functions, as the bench times them
            put_batched = lmdb_store_pattern_put_batched if kind.endswith("-pattern") else store_put_batched
            put_batched(workdir, GET_PER * n, BODY, 1000)
            return
        if kind.endswith("-pattern"):
            env, dbs = _pattern_open(workdir)
            if kind == "ack-pattern":
                pattern_prefill(env, dbs, prefill, BODY, 1000)
            commit = pattern_commit(env, pattern_put(dbs, BODY) if kind == "put-pattern" else pattern_ack_and_next(dbs))
            for i in range(WARM_SINGLE + n):
                commit(i)
            env.close()
            return
        st = Store.open(os.path.join(workdir, "store"), create=True, name="bench", map_size=MAP_SIZE)
        st.create_queue(QUEUE)
        if kind == "put":
            for _ in range(WARM_SINGLE + n):
                st.put(QUEUE, BODY)
        else:
            for start in range(0, prefill, 1000):  # as the workload prefills: runs of msg_ids
                st.put_many(QUEUE, [NewMessage(BODY) for _ in range(min(1000, prefill - start))])
            if kind == "get":
                st.get_batches(QUEUE, lambda found: None, limit=1000)  # warm-up: one batch
                st.get_batches(QUEUE, lambda found: None, limit=GET_PER * n, batch=1000)
            else:
                with st.consumer(QUEUE) as c:
                    for _ in range(WARM_SINGLE + n):
                        c.confirm(c.next(wait=0))
        st.close()


def _count(kind: str, n: int, prefill: int) -> int:
    with tempfile.TemporaryDirectory(prefix="mqbench-cg-") as out:
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/cg.out",
             sys.executable, "-m", "bench.instructions", "--child", kind, str(n), "--prefill", str(prefill)],
            capture_output=True, text=True, check=True)
    found = re.search(r"refs:\s*([\d,]+)", run.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{run.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__.split("\n\n")[0])
    parser.add_argument("n", nargs="?", type=int, default=100)
    parser.add_argument("--only", action="append", choices=list(PATHS), help="this path only (repeatable)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--prefill", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.n, args.prefill)
        return
    if args.n % 100 and (not args.only or "putmany" in args.only):
        parser.error("N must be a multiple of 100: the batched put counts whole batches of 1,000 (10 N messages)")
    if shutil.which("valgrind") is None:
        sys.exit("python -m bench.instructions needs valgrind (apt-get install valgrind)")
    for kind, title in PATHS.items():
        if args.only and kind not in args.only:
            continue
        per = GET_PER if kind in BATCHED else 1
        prefill = (1000 if kind == "get" else 20) + 6 * args.n * per  # the warm-up's and every run's
        store = _per_message(kind, args.n, prefill) / per
        line = f"{title}: {store / 1000:.1f}k instructions a message"
        if kind in PATTERNS:
            pattern = _per_message(f"{kind}-pattern", args.n, prefill) / per
            line += f"; its store-pattern row {pattern / 1000:.1f}k (the store runs {store / pattern:.1f}x its floor)"
        if kind in BATCHED:
            raw = _per_message(f"{kind}-raw", args.n, prefill) / per
            line += f"; raw py-lmdb {raw / 1000:.1f}k (by instructions the store runs at {raw / store:.2f}x of it)"
        print(line, flush=True)


def _per_message(kind: str, n: int, prefill: int) -> float:
    """Instructions an operation of `kind`: the runs of `n` and `6 n` told apart."""
    return (_count(kind, 6 * n, prefill) - _count(kind, n, prefill)) / (5 * n)


if __name__ == "__main__":
    main()
