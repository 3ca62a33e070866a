"""Instructions a message of workloads 1 and 4, counted by valgrind's callgrind: the measure
of the store's own CPU that a noisy, shared machine does not change (the timed suites vary
~2x between minutes on one). Each path runs twice in a child process under callgrind, with
`N` and `6 N` operations after the same set-up; the difference over `5 N` is what one
operation costs (start-up, imports and set-up cancel out). System calls are not counted:
the fsyncs are the disk's, not the store's.

    python -m bench.instructions [N]      # default N = 100; needs valgrind on PATH
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
}


def _child(kind: str, n: int, prefill: int) -> None:
    """What the child runs under callgrind: the set-up (for ack and next, `prefill` messages
    put whatever `n` is), 20 warm-up operations, then `n`."""
    from store import NewMessage, Store

    from .runner import BODY
    from .workloads import MAP_SIZE, QUEUE, WARM_SINGLE

    with tempfile.TemporaryDirectory(prefix="mqbench-instr-") as workdir:
        st = Store.open(os.path.join(workdir, "store"), create=True, name="bench", map_size=MAP_SIZE)
        st.create_queue(QUEUE)
        if kind == "put":
            for _ in range(WARM_SINGLE + n):
                st.put(QUEUE, BODY)
        else:
            for start in range(0, prefill, 1000):  # as the workload prefills: runs of msg_ids
                st.put_many(QUEUE, [NewMessage(BODY) for _ in range(min(1000, prefill - start))])
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
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--prefill", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.n, args.prefill)
        return
    if shutil.which("valgrind") is None:
        sys.exit("python -m bench.instructions needs valgrind (apt-get install valgrind)")
    for kind, title in PATHS.items():
        prefill = 20 + 6 * args.n
        low, high = _count(kind, args.n, prefill), _count(kind, 6 * args.n, prefill)
        print(f"{title}: {(high - low) / (5 * args.n) / 1000:.1f}k instructions a message")


if __name__ == "__main__":
    main()
