"""python -m bench cli, parts 3 and 4: how soon a waiting `mqcli get` sees a put (against a
library getter), and durable puts next to a `get` blocked writing into a full pipe."""

from __future__ import annotations

import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from .cli_common import (
    QUEUE, BODY, BenchError, CliSizes, _child_env, _target_result, empty_cwd, mqcli_path, percentile, work_store,
)

# --------------------------------------------------------------------------------------
# 3. wait latency
# --------------------------------------------------------------------------------------

LIB_GETTER = r"""
import json, sys
from store import Store
def deliver(got):  # like the CLI: write with no write transaction open, then the get commits
    sys.stdout.buffer.write(json.dumps(got[0].to_dict(), ensure_ascii=False).encode("utf-8") + b"\n")
    sys.stdout.buffer.flush()
with Store.open(sys.argv[1]) as st:
    st.get(sys.argv[2], wait=None, deliver=deliver)
"""


def _wait_for_fifo(wait_dir: str, pid: int, proc: subprocess.Popen, timeout: float) -> float:
    """Seconds until the getter's FIFO `<qid>.<pid>.<token>` exists (store/notify.py)."""
    t0 = time.perf_counter()
    mark = f".{pid}."
    while True:
        try:
            if any(mark in name for name in os.listdir(wait_dir)):
                return time.perf_counter() - t0
        except FileNotFoundError:
            pass
        if proc.poll() is not None:
            raise BenchError(f"getter exited {proc.returncode} before waiting")
        if time.perf_counter() - t0 > timeout:
            raise BenchError(f"getter {pid} made no FIFO in {wait_dir} within {timeout:g} s")
        time.sleep(0.002)


def _read_line(proc: subprocess.Popen, timeout: float) -> tuple[bytes, float]:
    fd = proc.stdout.fileno()  # type: ignore[union-attr]
    buf = b""
    deadline = time.perf_counter() + timeout
    while b"\n" not in buf:
        left = deadline - time.perf_counter()
        ready, _, _ = select.select([fd], [], [], max(0.0, left))
        if not ready:
            raise BenchError(f"no output line within {timeout:g} s")
        chunk = os.read(fd, 65536)
        if not chunk:
            raise BenchError(f"getter closed stdout without a line (got {buf[:200]!r})")
        buf += chunk
    return buf, time.perf_counter()


def _one_latency(argv: list[str], st, store_path: str, env: dict, work: str, i: int,
                 settle: float, cwd: str | None) -> dict:
    wait_dir = os.path.join(store_path, "wait")
    err = tempfile.TemporaryFile(dir=work)
    p = subprocess.Popen(argv, env=env, cwd=cwd or empty_cwd(work), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=err)
    try:
        ready = _wait_for_fifo(wait_dir, p.pid, p, 30)
        time.sleep(settle)
        if p.poll() is not None:
            raise BenchError(f"getter exited {p.returncode} while settling")
        body = b"latency-%06d-" % i + BODY[:240]
        t_put = time.perf_counter()
        st.put(QUEUE, body)
        t_put_done = time.perf_counter()
        line, t_line = _read_line(p, 30)
        rc = p.wait(30)
        if rc != 0:
            err.seek(0)
            raise BenchError(f"getter exited {rc}: {err.read().decode(errors='replace')[-500:]}")
        got = json.loads(line)
        if got.get("body") != body.decode():
            raise BenchError(f"getter printed the wrong message: {line[:200]!r}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()  # type: ignore[union-attr]
        err.close()
    return {"latency_s": t_line - t_put, "put_call_s": t_put_done - t_put,
            "after_put_s": t_line - t_put_done, "ready_after_start_s": ready}


def run_wait(sizes: CliSizes, tmp_root: str, log) -> dict:
    from store import Store

    py, mq = sys.executable, mqcli_path()
    work, store_path = work_store(tmp_root, "wait-")
    env = _child_env(store_path)
    contenders = {
        "mqcli": ([mq, "get", QUEUE, "--wait", "forever", "-o", "json"], None, "target",
                  "mqcli get q --wait forever -o json"),
        "library": ([py, "-c", LIB_GETTER, store_path, QUEUE], None, "context",
                    "python -c 'st.get(q, wait=None, deliver=<write json line>)'"),
    }
    names = list(contenders)
    settle = sizes.settle_ms / 1000
    samples: dict[str, list[dict]] = {c: [] for c in names}
    log(f"wait latency: {sizes.latency_samples} samples per getter (+{sizes.warm_runs} warm-up), "
        f"settle {sizes.settle_ms} ms after the getter's FIFO appears")
    with Store.open(store_path) as st:
        for i in range(sizes.warm_runs + sizes.latency_samples):
            k = i % len(names)
            for c in names[k:] + names[:k]:
                argv, cwd, _role, _desc = contenders[c]
                s = _one_latency(argv, st, store_path, env, work, i, settle, cwd)
                if i >= sizes.warm_runs:
                    samples[c].append(s)
            if i >= sizes.warm_runs:
                log(f"  sample {i - sizes.warm_runs + 1}/{sizes.latency_samples}  " + "  ".join(
                    f"{c}={samples[c][-1]['latency_s'] * 1000:.2f}ms" for c in names))
        if st.queue_info(QUEUE).depth != 0:
            raise BenchError("messages left in the wait-latency queue")
    shutil.rmtree(work, ignore_errors=True)

    out: dict = {"samples_per_getter": sizes.latency_samples, "settle_ms": sizes.settle_ms,
                 "clock": "time.perf_counter in the bench process for both ends",
                 "put": "st.put(q, body) in the bench process (default recoverable delivery: "
                        "commit + fsync + wake, all inside the latency)",
                 "results": {}}
    for c in names:
        lat = [s["latency_s"] * 1000 for s in samples[c]]
        put_ms = [s["put_call_s"] * 1000 for s in samples[c]]
        after = [s["after_put_s"] * 1000 for s in samples[c]]
        ready = [s["ready_after_start_s"] * 1000 for s in samples[c]]
        out["results"][c] = {
            "role": contenders[c][2], "command": contenders[c][3],
            "latency_ms_median": statistics.median(lat),
            "latency_ms_p90": percentile(lat, 90),
            "latency_ms_p99": percentile(lat, 99),
            "latency_ms_min": min(lat), "latency_ms_max": max(lat),
            "latency_ms": lat,
            "put_call_ms_median": statistics.median(put_ms),
            "after_put_ms_median": statistics.median(after),
            "waiting_after_start_ms_median": statistics.median(ready),
        }
    m = out["results"]["mqcli"]
    out["targets"] = {
        "wait_latency_median": _target_result("wait_latency_median", m["latency_ms_median"]),
        "wait_latency_p99": _target_result("wait_latency_p99", m["latency_ms_p99"]),
    }
    if sizes.latency_samples < 100:
        out["p99_note"] = (f"with {sizes.latency_samples} samples the nearest-rank p99 is the "
                           "largest sample")
    return out


# --------------------------------------------------------------------------------------
# 4. put latency next to a stalled reader
# --------------------------------------------------------------------------------------

STALLED_MESSAGES = 5000  # 1.3 MB of bodies: far more than a pipe holds (64 KiB)


def run_stalled(sizes: CliSizes, tmp_root: str, log) -> dict:
    from store import NewMessage, Store

    mq = mqcli_path()
    work, store_path = work_store(tmp_root, "stalled-", (QUEUE, "other"))
    n = max(100, 4 * sizes.latency_samples)
    with Store.open(store_path) as st:
        for _ in range(STALLED_MESSAGES // 1000):
            st.put_many(QUEUE, [NewMessage(BODY) for _ in range(1000)])

        def puts() -> list[float]:
            out = []
            for _ in range(n):
                t0 = time.perf_counter()
                st.put("other", BODY)
                out.append((time.perf_counter() - t0) * 1000)
            return out

        log(f"stalled reader: {n} durable puts alone, then {n} while a get blocks on a full pipe")
        quiet = puts()
        reader = subprocess.Popen([mq, "get", QUEUE, "--all", "-o", "body"], env=_child_env(store_path),
                                  cwd=empty_cwd(work), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        try:
            deadline = time.perf_counter() + 30
            while not st.browse(QUEUE, states={"get-unconfirmed"}):  # it holds its first batch
                if reader.poll() is not None or time.perf_counter() > deadline:
                    raise BenchError(f"the reader never held a batch (exit {reader.poll()})")
                time.sleep(0.005)
            time.sleep(0.2)  # by now its write has filled the pipe
            stalled = puts()
            if reader.poll() is not None:
                raise BenchError("the reader ended while it should have been stalled")
            data = reader.stdout.read()  # type: ignore[union-attr]
            rc = reader.wait(60)
        finally:
            if reader.poll() is None:
                reader.kill()
                reader.wait()
        got = data.count(b"\n")
        if rc != 0 or got != STALLED_MESSAGES or st.queue_info(QUEUE).depth != 0:
            raise BenchError(f"the reader exited {rc} with {got} of {STALLED_MESSAGES} messages, "
                             f"{st.queue_info(QUEUE).depth} left in the queue")
    shutil.rmtree(work, ignore_errors=True)
    results = {}
    for name, lat in (("alone", quiet), ("stalled reader", stalled)):
        results[name] = {"puts": len(lat), "latency_ms_median": statistics.median(lat),
                         "latency_ms_p99": percentile(lat, 99), "latency_ms_max": max(lat)}
    return {"reader": f"mqcli get {QUEUE} --all -o body, {STALLED_MESSAGES} messages of {len(BODY)} "
                      "bytes, its stdout a pipe read only after the puts",
            "put": "st.put(other, body) in the bench process (recoverable: commit + fsync)",
            "results": results,
            "targets": {"stalled_put_p99": _target_result(
                "stalled_put_p99", results["stalled reader"]["latency_ms_p99"])}}
