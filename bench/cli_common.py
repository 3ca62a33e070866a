"""The CLI suite's common parts (bench/cli.py): sizes and targets, running one child process
(wall time, exit status, max RSS), the children's environment and the stores they use."""

from __future__ import annotations

import gc
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUEUE = "q"
BODY = (b"mqcli-bench-256-byte-body/" * 10)[:256]  # the store suite's body
assert len(BODY) == 256
MB = 1_000_000  # targets are in decimal megabytes; ru_maxrss is in KiB


def mqcli_path() -> str:
    """The installed entry point next to the interpreter running the bench."""
    return os.path.join(os.path.dirname(sys.executable), "mqcli")


# --------------------------------------------------------------------------------------
# sizes and targets
# --------------------------------------------------------------------------------------

@dataclass
class CliSizes:
    bulk: int
    bulk_rounds: int
    startup_runs: int
    latency_samples: int
    importtime_runs: int
    settle_ms: int
    warm_runs: int = 2  # untimed runs of each start-up command, latency samples thrown away


def sizes_for(args) -> CliSizes:
    if args.quick:
        s = CliSizes(bulk=20_000, bulk_rounds=1, startup_runs=10, latency_samples=10,
                     importtime_runs=3, settle_ms=100)
    else:
        s = CliSizes(bulk=200_000, bulk_rounds=3, startup_runs=30, latency_samples=50,
                     importtime_runs=5, settle_ms=100)
    for name in ("bulk", "bulk_rounds", "startup_runs", "latency_samples", "importtime_runs",
                 "settle_ms"):
        v = getattr(args, "bulk_messages" if name == "bulk" else name, None)
        if v is not None:
            setattr(s, name, v)
    return s


@dataclass(frozen=True)
class Target:
    key: str
    what: str
    op: str  # "<=" or ">="
    limit: float
    unit: str


TARGETS = {
    "startup_put_ratio": Target("startup_put_ratio", "median wall(mqcli put q hello) / median wall(python -c pass)", "<=", 4, "x"),
    "startup_get_ratio": Target("startup_get_ratio", "median wall(mqcli get q) / median wall(python -c pass)", "<=", 4, "x"),
    "startup_browse_ratio": Target("startup_browse_ratio", "median wall(mqcli browse q) / median wall(python -c pass)", "<=", 4, "x"),
    "startup_version_ratio": Target("startup_version_ratio", "median wall(mqcli --version) / median wall(python -c pass)", "<=", 2, "x"),
    "startup_put_help_ratio": Target("startup_put_help_ratio", "median wall(mqcli put --help) / median wall(python -c pass)", "<=", 4, "x"),
    "startup_help_ratio": Target("startup_help_ratio", "median wall(mqcli --help) / median wall(python -c pass)", "<=", 10, "x"),
    "startup_complete_ratio": Target("startup_complete_ratio", "median wall(mqcli __complete queue) / median wall(python -c pass)", "<=", 3, "x"),
    "bulk_put_rate": Target("bulk_put_rate", "mqcli put q --jsonl FILE, median msgs/s over rounds", ">=", 100_000, "msg/s"),
    "bulk_get_rate": Target("bulk_get_rate", "mqcli get q --all -o jsonl > /dev/null, median msgs/s over rounds", ">=", 100_000, "msg/s"),
    "bulk_put_max_rss": Target("bulk_put_max_rss", "max RSS of mqcli put --jsonl, worst round", "<=", 150, "MB"),
    "bulk_get_max_rss": Target("bulk_get_max_rss", "max RSS of mqcli get --all -o jsonl, worst round", "<=", 150, "MB"),
    "wait_latency_median": Target("wait_latency_median", "put start -> getter's output line, median", "<=", 10, "ms"),
    "wait_latency_p99": Target("wait_latency_p99", "put start -> getter's output line, p99 (nearest rank)", "<=", 50, "ms"),
    "stalled_put_p99": Target("stalled_put_p99", "durable put while a get blocks writing to a full pipe, p99 (nearest rank)", "<=", 50, "ms"),
    "batch_speedup": Target("batch_speedup", "time per command of mqcli put processes / time per line of mqcli batch of 1,000 put lines", ">=", 50, "x"),
    "consume_overhead": Target("consume_overhead", "(wall(mqcli consume q --exec true --count N) - wall(N x subprocess.run(['/bin/sh', '-c', 'true']))) / N", "<=", 2, "ms"),
}


def _target_result(key: str, value: float) -> dict:
    t = TARGETS[key]
    met = value <= t.limit if t.op == "<=" else value >= t.limit
    return {"what": t.what, "value": value, "op": t.op, "limit": t.limit, "unit": t.unit, "met": met}


class BenchError(RuntimeError):
    """A command did not do what was asked (exit status, counts, output)."""


# --------------------------------------------------------------------------------------
# running one child: wall time, exit status, max RSS
# --------------------------------------------------------------------------------------

@dataclass
class ChildRun:
    seconds: float
    returncode: int
    max_rss_kb: int  # ru_maxrss of this child (KiB on Linux), from os.wait4
    stderr: str
    stdout: bytes = b""
    rss_anon_peak_kb: int | None = None  # sampled from /proc/<pid>/status (see _RssSampler)
    rss_file_peak_kb: int | None = None


class _RssSampler(threading.Thread):
    """Polls /proc/<pid>/status every 20 ms: the peaks of RssAnon (heap) and RssFile (mapped
    files, i.e. LMDB's pages and shared libraries). ru_maxrss is their sum at the peak."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.path = f"/proc/{pid}/status"
        self.stop = threading.Event()
        self.anon = self.file = None

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with open(self.path, encoding="ascii", errors="replace") as f:
                    text = f.read()
            except OSError:
                return
            for line in text.splitlines():
                if line.startswith("RssAnon:"):
                    v = int(line.split()[1])
                    self.anon = v if self.anon is None else max(self.anon, v)
                elif line.startswith("RssFile:"):
                    v = int(line.split()[1])
                    self.file = v if self.file is None else max(self.file, v)
            self.stop.wait(0.02)


# Max RSS needs a small parent. Python's subprocess starts children with vfork, and at exec
# Linux folds the *parent's* peak RSS into the child's ru_maxrss (exec_mmap ->
# setmax_mm_hiwater_rss on the old, shared mm): every child of a bench process that once held
# 190 MB reports at least 190 MB. So the measured commands are started by this tiny launcher
# (python -I -S, a few MB), which forks, execs, times fork..wait4 and reports the child's pid,
# ru_maxrss, wall time and exit status on a pipe.
LAUNCHER = r"""
import os, sys, time
fd = int(sys.argv[1])
argv = sys.argv[2:]
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.close(fd)
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
os.write(fd, b"%d\n" % pid)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - t0
os.write(fd, b"%d %r %d\n" % (usage.ru_maxrss, seconds, os.waitstatus_to_exitcode(status)))
"""


def run_child(argv: list[str], env: dict, tmp: str, *, stdout=None, capture: bool = False,
              timeout: float = 900, rss: bool = False, cwd: str | None = None,
              check: bool = True) -> ChildRun:
    """Run argv to completion. Without `rss`: wall time from just before Popen to os.wait4's
    return, ru_maxrss from os.wait4 (inflated by this process's peak, see LAUNCHER). With
    `rss`: through LAUNCHER, which times fork..wait4 itself; /proc of the child is sampled."""
    err = tempfile.TemporaryFile(dir=tmp)
    out = tempfile.TemporaryFile(dir=tmp) if capture else (stdout or subprocess.DEVNULL)
    rfd = wfd = -1
    sampler = None
    try:
        if rss:
            rfd, wfd = os.pipe()
            full = [sys.executable, "-I", "-S", "-c", LAUNCHER, str(wfd)] + argv
            pass_fds: tuple = (wfd,)
        else:
            full, pass_fds = argv, ()
        t0 = time.perf_counter()
        p = subprocess.Popen(full, env=env, cwd=cwd or empty_cwd(tmp), stdin=subprocess.DEVNULL,
                             stdout=out, stderr=err, pass_fds=pass_fds)
        victims = [p.pid]
        timer = threading.Timer(timeout, lambda: [_kill(v) for v in victims])
        timer.start()
        try:
            report = b""
            if rss:
                os.close(wfd)
                wfd = -1
                with os.fdopen(rfd, "rb") as pipe:
                    rfd = -1
                    first = pipe.readline()
                    if first.strip():
                        victims.append(int(first))
                        sampler = _RssSampler(int(first))
                        sampler.start()
                    report = pipe.read()
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        seconds = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        max_rss = usage.ru_maxrss
        if sampler:
            sampler.stop.set()
            sampler.join()
        if rss:
            fields = report.split()
            if p.returncode != 0 or len(fields) != 3:
                raise BenchError(f"launcher for {' '.join(argv)} failed ({p.returncode}, "
                                 f"{report!r})")
            max_rss, seconds, p.returncode = int(fields[0]), float(fields[1]), int(fields[2])
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
        data = b""
        if capture:
            out.seek(0)
            data = out.read()
    finally:
        for fd in (rfd, wfd):
            if fd >= 0:
                os.close(fd)
        err.close()
        if capture:
            out.close()
    run = ChildRun(seconds, p.returncode, max_rss, stderr, data,
                   sampler.anon if sampler else None, sampler.file if sampler else None)
    if check and run.returncode != 0:
        raise BenchError(f"{' '.join(argv)} exited {run.returncode}: {stderr.strip()[-2000:]}")
    return run


def empty_cwd(tmp: str) -> str:
    """An empty working directory for children. `python -m` and `-c` put the working directory
    first on sys.path, and a store directory named `store` there shadows the `store` package."""
    path = os.path.join(tmp, "cwd")
    os.makedirs(path, exist_ok=True)
    return path


def _kill(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass


def _sync() -> None:
    gc.collect()
    if hasattr(os, "sync"):
        os.sync()


PYCACHE: dict[str, str] = {}  # "prefix": the bytecode cache of the children (set by run)


def _child_env(store_path: str, bytecode: bool = True) -> dict:
    """The children's environment. With `bytecode`, .pyc files are written to and read from a
    private prefix in the temp dir (PYTHONPYCACHEPREFIX, PYTHONDONTWRITEBYTECODE removed), as
    after a normal install where pip compiles them; the repository is not touched. Without,
    the caller's environment as it is."""
    env = dict(os.environ)
    env["MQCLI_STORE"] = store_path
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    env.pop("PYTHONTRACEMALLOC", None)
    if bytecode and PYCACHE.get("prefix"):
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = PYCACHE["prefix"]
    return env


def _new_store(path: str, queues=(QUEUE,)) -> None:
    from store import Store

    with Store.open(path, create=True, name="bench") as st:
        for q in queues:
            st.create_queue(q)


def work_store(tmp_root: str, prefix: str, queues=(QUEUE,)) -> tuple[str, str]:
    """A fresh temp directory under tmp_root and a new store in it: (directory, store path)."""
    work = tempfile.mkdtemp(prefix=prefix, dir=tmp_root)
    store_path = os.path.join(work, "store")
    _new_store(store_path, queues)
    return work, store_path


def _depth(path: str, queue: str) -> int:
    from store import Store

    with Store.open(path) as st:
        return st.queue_info(queue).depth


def _stats(values: list[float]) -> dict:
    med = statistics.median(values)
    return {"median": med, "min": min(values), "max": max(values),
            "spread": (max(values) - min(values)) / med if med else None}


def percentile(values: list[float], p: float) -> float:
    """Nearest rank: the smallest value with at least p% of the samples at or below it."""
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))]
