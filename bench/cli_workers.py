"""python -m bench cli, parts 5 and 6: `mqcli consume --exec` against bare spawns of the same
command, and `mqcli batch` of put lines against `mqcli put` processes."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import time

from .cli_common import (
    QUEUE, BODY, BenchError, CliSizes, _child_env, _depth, _sync, _target_result, mqcli_path, run_child, work_store,
)

CONSUME_MESSAGES = 2000
BATCH_LINES = 1000


def run_consume(sizes: CliSizes, tmp_root: str, log) -> dict:
    """`mqcli consume q --exec true` over N messages against N spawns of the same command by a
    bare Python loop: what consume adds per message (a durable commit: the confirm of one
    message and the get of the next; the spawn's bookkeeping), rounds interleaved."""
    from store import NewMessage, Store

    mq = mqcli_path()
    n = CONSUME_MESSAGES if sizes.bulk >= 100_000 else CONSUME_MESSAGES // 10
    rounds = max(1, min(3, sizes.bulk_rounds))
    spawns, consumes, commits = [], [], []
    log(f"consume: {rounds} rounds of {n} messages, consume --exec true against {n} bare spawns")
    for _ in range(rounds):
        work, store_path = work_store(tmp_root, "consume-")
        with Store.open(store_path) as st:
            for at in range(0, n, 1000):
                st.put_many(QUEUE, [NewMessage(BODY) for _ in range(min(1000, n - at))])
        _sync()
        # the floor (context): the same durable commits, confirm and next get, by the library alone
        floor_store = os.path.join(work, "floor")
        with Store.open(floor_store, create=True, name="floor") as st:
            st.create_queue(QUEUE)
            for at in range(0, n, 1000):
                st.put_many(QUEUE, [NewMessage(BODY) for _ in range(min(1000, n - at))])
            _sync()
            t0 = time.perf_counter()
            with st.consumer(QUEUE, lease=60) as c:
                for _ in range(n):
                    c.confirm(c.next(wait=0))  # n messages are there
            commits.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _ in range(n):
            subprocess.run(["/bin/sh", "-c", "true"], stdin=subprocess.DEVNULL, check=True)
        spawns.append(time.perf_counter() - t0)
        child = run_child([mq, "consume", QUEUE, "--exec", "true", "--count", str(n)],
                          _child_env(store_path), work, capture=True)
        if child.returncode != 0 or _depth(store_path, QUEUE) != 0:
            raise BenchError(f"consume exited {child.returncode} leaving {_depth(store_path, QUEUE)} "
                             f"messages: {child.stderr[-500:]}")
        consumes.append(child.seconds)
        shutil.rmtree(work, ignore_errors=True)
    spawn_s, consume_s = statistics.median(spawns), statistics.median(consumes)
    overhead_ms = (consume_s - spawn_s) / n * 1000
    return {"messages": n, "rounds": rounds,
            "consume": f"mqcli consume {QUEUE} --exec true --count {n} (one process; sh -c per message)",
            "baseline": f"{n} x subprocess.run(['/bin/sh', '-c', 'true']) in the bench process",
            "floor": f"Store.consumer: {n} x next(wait=0) + confirm in the bench process, one durable commit "
                     "a message (context: what the overhead cannot go below)",
            "results": {"consume_s": consume_s, "spawns_s": spawn_s,
                        "consume_s_rounds": consumes, "spawns_s_rounds": spawns,
                        "overhead_ms_per_message": overhead_ms,
                        "commit_ms_per_message": statistics.median(commits) / n * 1000,
                        "commit_s_rounds": commits},
            "targets": {"consume_overhead": _target_result("consume_overhead", overhead_ms)}}


def run_batch(sizes: CliSizes, tmp_root: str, log) -> dict:
    """`mqcli batch` of 1,000 `put` lines against `mqcli put` processes, per command: a sample
    of processes (a thousand would take minutes), rounds interleaved."""
    mq = mqcli_path()
    lines = BATCH_LINES
    processes = 50 if sizes.bulk >= 100_000 else 10
    rounds = max(1, min(3, sizes.bulk_rounds))
    per_process, per_line = [], []
    log(f"batch: {rounds} rounds of mqcli batch ({lines} put lines) against {processes} mqcli put processes")
    for _ in range(rounds):
        work, store_path = work_store(tmp_root, "batch-")
        env = _child_env(store_path)
        script = os.path.join(work, "puts.mqcli")
        with open(script, "w", encoding="utf-8") as f:
            f.writelines(f"put {QUEUE} 'message {i}'\n" for i in range(lines))
        _sync()
        total = 0.0
        for i in range(processes):
            child = run_child([mq, "put", QUEUE, f"process {i}"], env, work, capture=True)
            if child.returncode != 0:
                raise BenchError(f"mqcli put exited {child.returncode}: {child.stderr[-300:]}")
            total += child.seconds
        per_process.append(total / processes)
        child = run_child([mq, "batch", script], env, work, capture=True)
        if child.returncode != 0 or _depth(store_path, QUEUE) != lines + processes:
            raise BenchError(f"mqcli batch exited {child.returncode} with {_depth(store_path, QUEUE)} messages "
                             f"stored: {child.stderr[-300:]}")
        per_line.append(child.seconds / lines)
        shutil.rmtree(work, ignore_errors=True)
    process_s, line_s = statistics.median(per_process), statistics.median(per_line)
    return {"lines": lines, "processes": processes, "rounds": rounds,
            "batch": f"mqcli batch FILE, {lines} lines `put {QUEUE} 'message N'` (one process, one open store)",
            "baseline": f"mqcli put {QUEUE} 'process N', {processes} processes one after another",
            "results": {"per_process_ms": process_s * 1000, "per_line_ms": line_s * 1000,
                        "speedup": process_s / line_s},
            "targets": {"batch_speedup": _target_result("batch_speedup", process_s / line_s)}}
