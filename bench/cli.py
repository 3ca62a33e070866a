"""python -m bench cli: the `mqcli` command line as a user runs it, one whole process at a time.

Three parts, each measured in one run on this machine with its baseline next to it:

1. cold start  -- wall time of whole subprocesses (`subprocess.Popen` + `os.wait4`), the commands
   interleaved round by round (order rotated): `python -c pass` (the same interpreter, the
   baseline), `mqcli put q hello` (a real, durable put into an existing store and queue),
   `mqcli --help`, and `python -c "import typer"` for context.  Ratio = median / median of
   `python -c pass`.  Plus `python -X importtime -m mqcli put q hello` (per-module medians over
   a few runs: the start-up budget) and an in-process phase split (import, build the click
   command, run it).
2. bulk        -- `mqcli put q --jsonl FILE` and `mqcli get q --all -o jsonl > /dev/null` of N
   messages (256-byte bodies), each round in a fresh store; the JSONL file is made untimed by
   putting N messages with the store library and `mqcli get src --all -o jsonl > FILE`.  Max
   RSS of the child from `os.wait4`; a sampler of /proc/<pid>/status splits it into anonymous
   memory and mapped file pages (LMDB's map).  A library-only child doing the same work
   (context) shows what the command line adds, with its own parse / store / encode split.
3. wait latency -- a `mqcli get q --wait forever -o json` process is started, the bench waits
   until its wake-up FIFO exists in the store's wait/ directory and then `--settle-ms` more, puts
   one message with the store library and reads the getter's stdout pipe: latency = time the
   output line arrives - time just before the put (both `time.perf_counter` in this process).
   A library-only getter (`Store.get(wait=None)`, context) is interleaved with it.
4. stalled reader -- durable puts (`Store.put`, timed one by one in this process) into another
   queue of the same store, first with nothing else running (context), then while a
   `mqcli get q --all -o body` writes 5,000 messages into a pipe nobody reads (it holds its
   batch and blocks in a write). The reader must have held the store's write lock across its
   output for the puts to wait; p99 is the target. Then the pipe is drained and every message
   counted.

Children run with MQCLI_STORE pointing at a store in a fresh temp directory, stdin from
/dev/null and stderr to a file (so never a terminal: no progress bars).
"""

from __future__ import annotations

import gc
import json
import math
import os
import re
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join("bench", "results", "cli.json")
PARTS = ("startup", "bulk", "wait", "stalled", "consume", "batch", "stats")
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
    "startup_put_ratio": Target("startup_put_ratio", "median wall(mqcli put q hello) / median wall(python -c pass)", "<=", 8, "x"),
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


# --------------------------------------------------------------------------------------
# 1. cold start
# --------------------------------------------------------------------------------------

PHASES_SCRIPT = r"""
import os, sys, time
t0 = time.perf_counter()
import mqcli.app
t1 = time.perf_counter()
import typer.main
cmd = typer.main.get_command(mqcli.app.app)
t2 = time.perf_counter()
cmd.main(args=sys.argv[1:], prog_name="mqcli", standalone_mode=False)
t3 = time.perf_counter()
sys.stderr.write("PHASES %r %r %r\n" % (t1 - t0, t2 - t1, t3 - t2))
if os.environ.get("BENCH_FAST_EXIT"):
    sys.stdout.flush(); sys.stderr.flush(); os._exit(0)  # skip interpreter teardown
"""


CALLER_ENV = "mqcli put q hello, caller's env"


def startup_commands(py: str, mq: str) -> dict[str, tuple[list[str], str]]:
    """name -> (argv, role); role 'baseline', 'target' or 'context'."""
    return {
        "python -c pass": ([py, "-c", "pass"], "baseline"),
        "mqcli put q hello": ([mq, "put", QUEUE, "hello"], "target"),
        "mqcli --help": ([mq, "--help"], "target"),
        # what a shell runs on a TAB after `mqcli get ` (mqcli/complete.py): the store's queue names
        "mqcli __complete queue": ([mq, "__complete", "queue"], "target"),
        "python -c 'import typer'": ([py, "-c", "import typer"], "context"),
        # the bench's own environment without the private bytecode cache: with
        # PYTHONDONTWRITEBYTECODE=1 and no __pycache__ next to mqcli/ and store/, every start
        # compiles them from source
        CALLER_ENV: ([mq, "put", QUEUE, "hello"], "context"),
    }


_IMPORT_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|( *)(\S.*)$")


def parse_importtime(text: str) -> list[tuple[str, int, int, int]]:
    """(module, depth, self µs, cumulative µs) for each `-X importtime` line."""
    rows = []
    for line in text.splitlines():
        m = _IMPORT_LINE.match(line)
        if m:
            rows.append((m.group(4).strip(), (len(m.group(3)) - 1) // 2, int(m.group(1)),
                         int(m.group(2))))
    return rows


def importtime_summary(runs: list[list[tuple[str, int, int, int]]],
                       interpreter_modules: set[str], top: int = 10) -> dict:
    """Per-module medians over runs; top by cumulative and by self; self time per package."""
    per: dict[str, dict] = {}
    totals = []
    for rows in runs:
        totals.append(sum(cum for _, depth, _, cum in rows if depth == 0))
        for name, depth, self_us, cum in rows:
            e = per.setdefault(name, {"depth": depth, "self": [], "cum": []})
            e["self"].append(self_us)
            e["cum"].append(cum)
    mods = [{"module": name, "depth": e["depth"], "self_us": statistics.median(e["self"]),
             "cumulative_us": statistics.median(e["cum"])} for name, e in per.items()]
    stdlib = set(getattr(sys, "stdlib_module_names", ()))
    groups: dict[str, float] = {}
    for m in mods:
        name = m["module"]
        head = name.split(".")[0]
        if name in interpreter_modules:
            g = "(python start-up: site, encodings, ...)"
        elif head in ("mqcli", "store"):
            g = head
        elif head in stdlib or head.lstrip("_") in stdlib or head.startswith("_"):
            g = "(stdlib)"
        else:
            g = head
        groups[g] = groups.get(g, 0) + m["self_us"]
    by_cum = sorted(mods, key=lambda m: -m["cumulative_us"])
    by_self = sorted(mods, key=lambda m: -m["self_us"])
    return {
        "runs": len(runs),
        "total_us_median": statistics.median(totals),
        "modules": len(mods),
        "top_cumulative": by_cum[:top],
        "top_self": by_self[:top],
        "self_us_by_package": dict(sorted(groups.items(), key=lambda kv: -kv[1])),
    }


def run_startup(sizes: CliSizes, tmp_root: str, log) -> dict:
    py, mq = sys.executable, mqcli_path()
    work = tempfile.mkdtemp(prefix="startup-", dir=tmp_root)
    store_path = os.path.join(work, "store")
    _new_store(store_path)
    env = _child_env(store_path)
    envs = {CALLER_ENV: _child_env(store_path, bytecode=False)}
    cmds = startup_commands(py, mq)
    names = list(cmds)
    log(f"cold start: {len(names)} commands x ({sizes.warm_runs} warm-up + "
        f"{sizes.startup_runs} timed), interleaved")
    for _ in range(sizes.warm_runs):  # .pyc files, page cache
        for name in names:
            run_child(cmds[name][0], envs.get(name, env), work)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(sizes.startup_runs):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            run = run_child(cmds[name][0], envs.get(name, env), work)
            times[name].append(run.seconds)
        log(f"  round {r + 1}/{sizes.startup_runs}  " + "  ".join(
            f"{n}={times[n][-1] * 1000:.0f}ms" for n in names[:3]))
    puts = _depth(store_path, QUEUE)
    want = 2 * (sizes.warm_runs + sizes.startup_runs)
    if puts != want:
        raise BenchError(f"mqcli put q hello: queue depth {puts}, expected {want}")

    base = statistics.median(times["python -c pass"])
    commands = {}
    for name in names:
        argv, role = cmds[name]
        st = _stats(times[name])
        commands[name] = {
            "argv": [os.path.basename(argv[0])] + argv[1:], "role": role,
            "bytecode_cache": name != CALLER_ENV,
            "runs": len(times[name]), "seconds": times[name],
            "median_s": st["median"], "min_s": st["min"], "max_s": st["max"],
            "spread": st["spread"], "ratio_to_python": st["median"] / base,
        }

    # where the time goes: -X importtime (per-module medians) and an in-process phase split
    log(f"  python -X importtime -m mqcli put q hello  x{sizes.importtime_runs}")
    base_rows = parse_importtime(run_child([py, "-X", "importtime", "-c", "pass"], env,
                                           work).stderr)
    runs = [parse_importtime(run_child([py, "-X", "importtime", "-m", "mqcli", "put", QUEUE,
                                        "hello"], env, work).stderr)
            for _ in range(sizes.importtime_runs)]
    if not all(runs):
        raise BenchError("python -X importtime printed nothing")
    imports = importtime_summary(runs, {name for name, *_ in base_rows})
    imports["command"] = "python -X importtime -m mqcli put q hello"
    imports["note"] = ("-X importtime inflates every import (its own bookkeeping) and nests "
                       "cumulative times: a parent's cumulative includes its children's")

    phases = {"import mqcli.app": [], "typer get_command(app)": [], "run put q hello": []}
    walls: dict[str, list[float]] = {"normal": [], "fast_exit": []}
    fast_env = dict(env, BENCH_FAST_EXIT="1")
    for _ in range(sizes.importtime_runs):
        for variant, e in (("normal", env), ("fast_exit", fast_env)):
            run = run_child([py, "-c", PHASES_SCRIPT, "put", QUEUE, "hello"], e, work)
            walls[variant].append(run.seconds)
            if variant == "fast_exit":
                continue
            m = re.search(r"PHASES (\S+) (\S+) (\S+)", run.stderr)
            if not m:
                raise BenchError(f"phase script printed no PHASES line: {run.stderr[-500:]}")
            for key, v in zip(phases, m.groups()):
                phases[key].append(float(v))
    phase_med = {k: statistics.median(v) for k, v in phases.items()}
    wall = statistics.median(walls["normal"])
    teardown = wall - statistics.median(walls["fast_exit"])
    phase_doc = {
        "script": "python -c '<import mqcli.app; typer.main.get_command(app); cmd.main([...])>'"
                  " put q hello, perf_counter stamps; run again ending in os._exit(0) to "
                  "measure interpreter teardown",
        "runs": sizes.importtime_runs,
        "median_s": phase_med,
        "python_c_pass_s": base,
        "script_wall_s": wall,
        "teardown_s": teardown,
        "unaccounted_s": wall - base - sum(phase_med.values()) - teardown,
        "note": "teardown = median wall of the script - median wall of the same script ending "
                "in os._exit(0) (module and object clean-up at exit); unaccounted = script wall "
                "- python -c pass - the three phases - teardown (noise, mostly)",
    }
    shutil.rmtree(work, ignore_errors=True)
    return {
        "commands": commands,
        "baseline": "python -c pass",
        "store": "existing store and queue (created untimed); every put is a real durable put",
        "importtime": imports,
        "phases": phase_doc,
        "targets": {
            "startup_put_ratio": _target_result(
                "startup_put_ratio", commands["mqcli put q hello"]["ratio_to_python"]),
            "startup_help_ratio": _target_result(
                "startup_help_ratio", commands["mqcli --help"]["ratio_to_python"]),
            "startup_complete_ratio": _target_result(
                "startup_complete_ratio", commands["mqcli __complete queue"]["ratio_to_python"]),
        },
    }


# --------------------------------------------------------------------------------------
# 2. bulk put --jsonl / get --all -o jsonl
# --------------------------------------------------------------------------------------

def _child_lib_put(store_path: str, queue: str, path: str) -> dict:
    """The same work as `mqcli put q --jsonl FILE`, without the command line."""
    t0 = time.perf_counter()
    from store import Message, Store

    t_import = time.perf_counter() - t0
    parse = store_s = 0.0
    n = 0
    loads, from_dict = json.loads, Message.from_dict
    with Store.open(store_path) as st, open(path, "rb") as f:
        batch: list = []
        a = time.perf_counter()
        for line in f:
            if not line.strip():
                continue
            batch.append(from_dict(loads(line)))
            if len(batch) == 1000:
                b = time.perf_counter()
                parse += b - a
                n += len(st.import_messages(queue, batch))
                batch = []
                a = time.perf_counter()
                store_s += a - b
        b = time.perf_counter()
        parse += b - a
        if batch:
            n += len(st.import_messages(queue, batch))
        store_s += time.perf_counter() - b
    return {"messages": n, "import_s": t_import, "parse_s": parse, "store_s": store_s,
            "in_process_s": time.perf_counter() - t0}


def _child_lib_get(store_path: str, queue: str) -> dict:
    """The same work as `mqcli get q --all -o jsonl > /dev/null`, without the command line."""
    t0 = time.perf_counter()
    from store import Store, errors

    t_import = time.perf_counter() - t0
    encode = 0.0
    n = 0
    dumps = json.dumps
    with Store.open(store_path) as st, open(os.devnull, "wb") as out:
        def deliver(msgs) -> None:
            nonlocal encode
            a = time.perf_counter()
            out.write(b"".join(dumps(m.to_dict(), ensure_ascii=False, separators=(", ", ": "))
                               .encode("utf-8") + b"\n" for m in msgs))
            out.flush()
            encode += time.perf_counter() - a

        a = time.perf_counter()
        try:
            n = st.get_batches(queue, deliver, batch=1000)  # as `mqcli get --all`
        except errors.Timeout:
            pass
        loop = time.perf_counter() - a
    return {"messages": n, "import_s": t_import, "encode_s": encode, "store_s": loop - encode,
            "in_process_s": time.perf_counter() - t0}


def bulk_commands(py: str, mq: str, store_path: str, jsonl: str) -> dict:
    lib = [py, "-m", "bench.cli", "_child"]
    return {
        "mqcli": {
            "put": ([mq, "put", QUEUE, "--jsonl", jsonl], "mqcli put q --jsonl FILE > /dev/null"),
            "get": ([mq, "get", QUEUE, "--all", "-o", "jsonl"], "mqcli get q --all -o jsonl > /dev/null"),
        },
        "library": {
            "put": (lib + ["lib-put", store_path, QUEUE, jsonl],
                    "json.loads + Message.from_dict + st.import_messages per 1,000"),
            "get": (lib + ["lib-get", store_path, QUEUE],
                    "st.get_batches(q, deliver, batch=1000) + to_dict + json.dumps > /dev/null"),
        },
    }


def _profile(py: str, argv_tail: list[str], env: dict, work: str, top: int = 15) -> dict:
    import pstats

    prof = os.path.join(work, "profile.out")
    run_child([py, "-m", "cProfile", "-o", prof, "-m", "mqcli"] + argv_tail, env, work)
    st = pstats.Stats(prof)
    rows = []
    for (fname, line, func), (cc, nc, tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        short = fname.replace(REPO + os.sep, "").replace(sys.prefix, "<venv>")
        rows.append({"function": f"{short}:{line}({func})", "ncalls": nc, "tottime_s": tt,
                     "cumtime_s": ct})
    total = st.total_tt  # type: ignore[attr-defined]
    os.unlink(prof)
    return {"command": "python -m cProfile -m mqcli " + " ".join(argv_tail),
            "total_s": total,
            "top_tottime": sorted(rows, key=lambda r: -r["tottime_s"])[:top],
            "top_cumtime": sorted(rows, key=lambda r: -r["cumtime_s"])[:top],
            "note": "cProfile slows pure-Python code several-fold; read shares, not seconds"}


def run_bulk(sizes: CliSizes, tmp_root: str, log, profile: bool = False) -> dict:
    from store import NewMessage, Store

    py, mq = sys.executable, mqcli_path()
    n = sizes.bulk
    work = tempfile.mkdtemp(prefix="bulk-", dir=tmp_root)
    src = os.path.join(work, "src-store")
    jsonl = os.path.join(work, "messages.jsonl")
    log(f"bulk: preparing {n:,} messages (store library put_many, then mqcli get src --all "
        "-o jsonl > FILE; untimed)")
    with Store.open(src, create=True, name="bench") as st:
        st.create_queue("src")
        left = n
        while left:
            k = min(1000, left)
            st.put_many("src", [NewMessage(BODY) for _ in range(k)])
            left -= k
    with open(jsonl, "wb") as f:
        prep = run_child([mq, "get", "src", "--all", "-o", "jsonl"], _child_env(src), work,
                         stdout=f)
    with open(jsonl, "rb") as f:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    if lines != n:
        raise BenchError(f"JSONL file has {lines} lines, expected {n}")
    shutil.rmtree(src, ignore_errors=True)
    file_bytes = os.path.getsize(jsonl)

    contenders = ["mqcli", "library"]
    res: dict = {c: {op: {"seconds": [], "max_rss_kb": [], "rss_anon_peak_kb": [],
                          "rss_file_peak_kb": [], "phases": []} for op in ("put", "get")}
                 for c in contenders}
    for r in range(sizes.bulk_rounds):
        k = r % len(contenders)
        for c in contenders[k:] + contenders[:k]:
            store_path = os.path.join(work, f"store-{r}-{c}")
            _new_store(store_path)
            env = _child_env(store_path)
            cmds = bulk_commands(py, mq, store_path, jsonl)[c]
            for op, want_after in (("put", n), ("get", 0)):
                _sync()
                run = run_child(cmds[op][0], env, work, capture=(c == "library"),
                                cwd=REPO if c == "library" else None, rss=True)
                got = _depth(store_path, QUEUE)
                if got != want_after:
                    raise BenchError(f"{c} {op}: queue depth {got} after, expected {want_after}")
                rec = res[c][op]
                rec["seconds"].append(run.seconds)
                rec["max_rss_kb"].append(run.max_rss_kb)
                rec["rss_anon_peak_kb"].append(run.rss_anon_peak_kb)
                rec["rss_file_peak_kb"].append(run.rss_file_peak_kb)
                if c == "library":
                    phases = json.loads(run.stdout)
                    if phases["messages"] != n:
                        raise BenchError(f"library {op}: {phases['messages']} messages, expected {n}")
                    rec["phases"].append(phases)
                log(f"  round {r + 1}/{sizes.bulk_rounds}  {c:<8} {op}  {n / run.seconds:>10,.0f} msg/s"
                    f"  max RSS {run.max_rss_kb * 1024 / MB:6.1f} MB")
            shutil.rmtree(store_path, ignore_errors=True)

    out: dict = {"messages": n, "rounds": sizes.bulk_rounds, "body_bytes": len(BODY),
                 "jsonl_bytes": file_bytes,
                 "prepare": {"how": "store library put_many x1000 into queue src, then mqcli get "
                                    "src --all -o jsonl > FILE (untimed)",
                             "get_seconds": prep.seconds},
                 "results": {}}
    for c in contenders:
        cmds = bulk_commands(py, mq, "STORE", "FILE")[c]
        out["results"][c] = {}
        for op in ("put", "get"):
            rec = res[c][op]
            rates = [n / s for s in rec["seconds"]]
            st = _stats(rates)
            entry = {
                "role": "target" if c == "mqcli" else "context",
                "operation": cmds[op][1],
                "msgs_per_s": st["median"], "msgs_per_s_rounds": rates,
                "msgs_per_s_min": st["min"], "msgs_per_s_max": st["max"], "spread": st["spread"],
                "seconds_rounds": rec["seconds"],
                "max_rss_mb": max(rec["max_rss_kb"]) * 1024 / MB,
                "max_rss_kb_rounds": rec["max_rss_kb"],
                "rss_anon_peak_mb": _mb_max(rec["rss_anon_peak_kb"]),
                "rss_file_peak_mb": _mb_max(rec["rss_file_peak_kb"]),
            }
            if rec["phases"]:
                entry["phases_median_s"] = {
                    key: statistics.median(p[key] for p in rec["phases"])
                    for key in rec["phases"][0] if key.endswith("_s")}
            out["results"][c][op] = entry
    out["targets"] = {
        "bulk_put_rate": _target_result("bulk_put_rate", out["results"]["mqcli"]["put"]["msgs_per_s"]),
        "bulk_get_rate": _target_result("bulk_get_rate", out["results"]["mqcli"]["get"]["msgs_per_s"]),
        "bulk_put_max_rss": _target_result("bulk_put_max_rss", out["results"]["mqcli"]["put"]["max_rss_mb"]),
        "bulk_get_max_rss": _target_result("bulk_get_max_rss", out["results"]["mqcli"]["get"]["max_rss_mb"]),
    }
    out["memory_note"] = ("max RSS counts LMDB's file-backed map pages the process touched "
                          "(rss_file_peak_mb, shared with the page cache) besides its own heap "
                          "(rss_anon_peak_mb); both peaks are sampled every 20 ms, so they are "
                          "approximate and need not add up to max RSS")
    if profile:
        log("  profiling mqcli put --jsonl and get --all under cProfile (untimed)")
        store_path = os.path.join(work, "store-profile")
        _new_store(store_path)
        env = _child_env(store_path)
        out["profile"] = {
            "put": _profile(py, ["put", QUEUE, "--jsonl", jsonl], env, work),
            "get": _profile(py, ["get", QUEUE, "--all", "-o", "jsonl"], env, work),
        }
    shutil.rmtree(work, ignore_errors=True)
    return out


def _mb_max(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    return max(vals) * 1024 / MB if vals else None


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
    work = tempfile.mkdtemp(prefix="wait-", dir=tmp_root)
    store_path = os.path.join(work, "store")
    _new_store(store_path)
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
CONSUME_MESSAGES = 2000
BATCH_LINES = 1000


def run_stalled(sizes: CliSizes, tmp_root: str, log) -> dict:
    from store import NewMessage, Store

    mq = mqcli_path()
    work = tempfile.mkdtemp(prefix="stalled-", dir=tmp_root)
    store_path = os.path.join(work, "store")
    _new_store(store_path, queues=(QUEUE, "other"))
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


def run_consume(sizes: CliSizes, tmp_root: str, log) -> dict:
    """`mqcli consume q --exec true` over N messages against N spawns of the same command by a
    bare Python loop: what consume adds per message (a durable commit: the confirm of one
    message and the get of the next; the spawn's bookkeeping), rounds interleaved."""
    from store import NewMessage, Store

    mq = mqcli_path()
    n = CONSUME_MESSAGES if sizes.bulk >= 100_000 else CONSUME_MESSAGES // 10
    rounds = max(1, min(3, sizes.bulk_rounds))
    spawns, consumes = [], []
    log(f"consume: {rounds} rounds of {n} messages, consume --exec true against {n} bare spawns")
    for r in range(rounds):
        work = tempfile.mkdtemp(prefix="consume-", dir=tmp_root)
        store_path = os.path.join(work, "store")
        _new_store(store_path)
        with Store.open(store_path) as st:
            for at in range(0, n, 1000):
                st.put_many(QUEUE, [NewMessage(BODY) for _ in range(min(1000, n - at))])
        _sync()
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
            "results": {"consume_s": consume_s, "spawns_s": spawn_s,
                        "consume_s_rounds": consumes, "spawns_s_rounds": spawns,
                        "overhead_ms_per_message": overhead_ms},
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
        work = tempfile.mkdtemp(prefix="batch-", dir=tmp_root)
        store_path = os.path.join(work, "store")
        _new_store(store_path)
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


# --------------------------------------------------------------------------------------
# the suite: table and JSON
# --------------------------------------------------------------------------------------

def _versions() -> dict:
    from importlib import metadata

    out = {}
    for dist in ("typer", "click", "rich", "lmdb"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def _dirty(repo: str) -> list[str] | None:
    try:  # read-only: --no-optional-locks keeps git status from refreshing the index
        p = subprocess.run(["git", "--no-optional-locks", "-C", repo, "status", "--porcelain",
                            "--", "mqcli", "store", "bench"], capture_output=True, text=True,
                           timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.splitlines() if p.returncode == 0 else None


def _ms(s: float) -> str:
    return f"{s * 1000:.1f} ms"


def render_table(doc: dict) -> str:
    info = doc["machine"]
    fs = info["tmp_filesystem"]
    v = info["cli_versions"]
    lines = [
        "mqcli CLI benchmark  (python -m bench cli)",
        f"{info['date']}  {info['platform']}  {info['python']}",
        f"{info['cpu_model']}, {info['cpu_count']} CPUs; mqcli {info['mqcli']}, typer {v['typer']}, "
        f"click {v['click']}, rich {v['rich']}, py-lmdb {info['py_lmdb']} (LMDB {info['lmdb']})",
        f"entry point {info['mqcli_entry_point']}; temp dirs on {fs['path']} ({fs['type']} "
        f"{fs['device']})",
        "",
    ]
    W = (30, 40, 7, 14, 7, 12, 12)
    header = (f"{'measurement':<{W[0]}} {'command':<{W[1]}} {'n':>{W[2]}} {'median':>{W[3]}} "
              f"{'spread':>{W[4]}} {'value':>{W[5]}} {'target':>{W[6]}}  met")
    lines += [header, "-" * len(header)]

    def row(title, cmd, n, med, spread, value="", target="", met=""):
        lines.append(f"{title:<{W[0]}} {cmd:<{W[1]}} {n:>{W[2]}} {med:>{W[3]}} {spread:>{W[4]}} "
                     f"{value:>{W[5]}} {target:>{W[6]}}  {met}")

    def tgt(t):
        lim = f"{t['limit']:,.0f}" if t["limit"] >= 1000 else f"{t['limit']:g}"
        unit = "x" if t["unit"] == "x" else f" {t['unit']}" if t["unit"] != "msg/s" else "/s"
        return f"{t['op']}{lim}{unit}", "yes" if t["met"] else "NO"

    def pct(x):
        return "-" if x is None else f"{x * 100:.0f}%"

    s = doc.get("startup")
    if s:
        first = True
        for name, c in s["commands"].items():
            title = "1. cold start (whole process)" if first else ""
            first = False
            value = target = met = ""
            if c["role"] != "baseline":
                value = f"{c['ratio_to_python']:.2f}x"
                key = {"mqcli put q hello": "startup_put_ratio", "mqcli --help": "startup_help_ratio",
                       "mqcli __complete queue": "startup_complete_ratio"}.get(name)
                if key:
                    target, met = tgt(s["targets"][key])
                else:
                    target = "context"
            row(title, name, str(c["runs"]), _ms(c["median_s"]), pct(c["spread"]), value, target, met)
        lines.append("")
    b = doc.get("bulk")
    if b:
        title = f"2. bulk, {b['messages']:,} messages"
        for c, res in b["results"].items():
            for op, e in res.items():
                rounds = f"{b['rounds']}r"
                if c == "mqcli":
                    t, m = tgt(b["targets"][f"bulk_{op}_rate"])
                    row(title, e["operation"].replace(" > /dev/null", ""), rounds,
                        f"{e['msgs_per_s']:,.0f}/s", pct(e["spread"]), f"{e['msgs_per_s']:,.0f}/s", t, m)
                    t, m = tgt(b["targets"][f"bulk_{op}_max_rss"])
                    row("", "  max RSS (worst round)", "", "", "", f"{e['max_rss_mb']:.0f} MB", t, m)
                else:
                    row(title, f"library {op} (no CLI)", rounds, f"{e['msgs_per_s']:,.0f}/s",
                        pct(e["spread"]), f"RSS {e['max_rss_mb']:.0f} MB", "context", "")
                title = ""
        lines.append("")
    w = doc.get("wait_latency")
    if w:
        title = "3. wait latency (put->line)"
        for c, e in w["results"].items():
            n = str(w["samples_per_getter"])
            if c == "mqcli":
                t, m = tgt(w["targets"]["wait_latency_median"])
                row(title, e["command"], n, f"{e['latency_ms_median']:.2f} ms", "",
                    f"{e['latency_ms_median']:.2f} ms", t, m)
                t, m = tgt(w["targets"]["wait_latency_p99"])
                row("", "  p99", "", "", "", f"{e['latency_ms_p99']:.2f} ms", t, m)
            else:
                row(title, "library getter (no CLI)", n, f"{e['latency_ms_median']:.2f} ms", "",
                    f"p99 {e['latency_ms_p99']:.2f} ms", "context", "")
            title = ""
        lines.append("")
    st = doc.get("stalled_reader")
    if st:
        title = "4. put next to a stalled get"
        for name, e in st["results"].items():
            n = str(e["puts"])
            if name == "stalled reader":
                t, m = tgt(st["targets"]["stalled_put_p99"])
                row(title, "st.put while get blocks on a pipe", n, f"{e['latency_ms_median']:.2f} ms", "",
                    f"p99 {e['latency_ms_p99']:.2f} ms", t, m)
            else:
                row(title, "st.put alone", n, f"{e['latency_ms_median']:.2f} ms", "",
                    f"p99 {e['latency_ms_p99']:.2f} ms", "context", "")
            title = ""
        lines.append("")
    c = doc.get("consume")
    if c:
        res = c["results"]
        t, m = tgt(c["targets"]["consume_overhead"])
        row("5. consume --exec true", "bare spawns (sh -c true)", str(c["messages"]), f"{res['spawns_s']:.2f} s",
            "", "", "context", "")
        row("", "mqcli consume", str(c["messages"]), f"{res['consume_s']:.2f} s", "",
            f"+{res['overhead_ms_per_message']:.2f} ms/msg", t, m)
        lines.append("")
    b = doc.get("batch")
    if b:
        res = b["results"]
        t, m = tgt(b["targets"]["batch_speedup"])
        row("6. batch of put lines", "mqcli put processes", str(b["processes"]), f"{res['per_process_ms']:.1f} ms",
            "", "", "context", "")
        row("", "mqcli batch", str(b["lines"]), f"{res['per_line_ms']:.2f} ms", "", f"{res['speedup']:.0f}x", t, m)
        lines.append("")
    if doc.get("stats"):
        from .cli_stats import render_rows
        render_rows(doc, row, tgt)
        lines.append("")
    lines.append("spread = (max - min) / median over runs/rounds; value = ratio to python -c pass, "
                 "rate, max RSS or latency; MB = 10^6 bytes.")

    if s:
        imp = s["importtime"]
        lines += ["", f"start-up budget: {imp['command']} (median of {imp['runs']} runs, "
                      f"{imp['total_us_median'] / 1000:.1f} ms of imports in all)",
                  f"  {'top cumulative':<44} {'cum ms':>8} {'self ms':>8}"]
        for m in imp["top_cumulative"]:
            lines.append(f"  {m['module']:<44} {m['cumulative_us'] / 1000:>8.1f} "
                         f"{m['self_us'] / 1000:>8.1f}")
        lines.append("  self time by package: " + ", ".join(
            f"{k} {v / 1000:.1f} ms" for k, v in list(imp["self_us_by_package"].items())[:8]))
        ph = s["phases"]
        lines.append("  in-process phases (medians): " + ", ".join(
            f"{k} {_ms(v)}" for k, v in ph["median_s"].items())
            + f"; teardown {_ms(ph['teardown_s'])}; python -c pass {_ms(ph['python_c_pass_s'])}; "
            f"unaccounted {_ms(ph['unaccounted_s'])}")
    if b and "library" in b["results"]:
        lib = b["results"]["library"]
        lines.append("")
        for op in ("put", "get"):
            ph = lib[op].get("phases_median_s", {})
            lines.append(f"bulk {op}, library child split (medians): " + ", ".join(
                f"{k[:-2]} {v:.2f} s" for k, v in ph.items()))
    if w:
        e = w["results"]["mqcli"]
        lines.append(f"wait latency split (mqcli, medians): put call {e['put_call_ms_median']:.2f} ms "
                     f"(commit + fsync + wake), put return -> line {e['after_put_ms_median']:.2f} ms; "
                     f"getter waiting {e['waiting_after_start_ms_median']:.0f} ms after its start")
    for n in doc["notes"]:
        lines.append(f"note: {n}")
    return "\n".join(lines)


def run(args, tmp_root: str, info: dict, log, parts: list[str]) -> dict:
    """Run the selected parts; return the JSON document (not yet written)."""
    sizes = sizes_for(args)
    mq = mqcli_path()
    if not os.access(mq, os.X_OK):
        raise SystemExit(f"no mqcli entry point at {mq}: install the project in this "
                         "interpreter's environment (pip install -e .)")
    info = dict(info)
    info["cli_versions"] = _versions()
    info["mqcli_entry_point"] = mq
    info["git_dirty"] = _dirty(REPO)
    PYCACHE["prefix"] = os.path.join(tmp_root, "pycache")
    info["bytecode"] = {
        "children": "PYTHONPYCACHEPREFIX=<temp dir>/pycache, PYTHONDONTWRITEBYTECODE unset; "
                    "the warm-up runs write the .pyc files",
        "caller_PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
        "caller_PYTHONPYCACHEPREFIX": os.environ.get("PYTHONPYCACHEPREFIX"),
        "mqcli_pycache_in_repo": os.path.isdir(os.path.join(REPO, "mqcli", "__pycache__")),
    }
    notes = []
    fs = info["tmp_filesystem"]
    if fs["type"] in ("tmpfs", "ramfs", "overlay", "unknown"):
        notes.append(f"temp dirs are on {fs['type']}: fsync costs nothing there; put and "
                     "latency numbers are optimistic (use --tmpdir)")
    if args.quick or any(getattr(args, k, None) is not None for k in (
            "bulk_messages", "bulk_rounds", "startup_runs", "latency_samples")):
        notes.append("non-default sizes: small runs are noisier than the default run")
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not info["bytecode"]["mqcli_pycache_in_repo"]:
        notes.append("this environment sets PYTHONDONTWRITEBYTECODE and mqcli/, store/ have no "
                     "__pycache__: run as is, every mqcli start compiles them from source. The "
                     "children use a private bytecode cache instead (as after pip install); "
                     f"the row '{CALLER_ENV}' shows the environment as it is")
    if info.get("git_dirty"):
        notes.append("the working tree differs from git_commit in mqcli/, store/ or bench/ "
                     "(machine.git_dirty)")
    log(f"cli suite: {', '.join(parts)}; entry point {mq}; temp dirs under {tmp_root} ({fs['type']})")
    t0 = time.perf_counter()
    doc: dict = {"schema": 1, "suite": "cli"}
    if "startup" in parts:
        doc["startup"] = run_startup(sizes, tmp_root, log)
    if "bulk" in parts:
        doc["bulk"] = run_bulk(sizes, tmp_root, log, profile=getattr(args, "profile", False))
    if "wait" in parts:
        doc["wait_latency"] = run_wait(sizes, tmp_root, log)
    if "stalled" in parts:
        doc["stalled_reader"] = run_stalled(sizes, tmp_root, log)
    if "consume" in parts:
        doc["consume"] = run_consume(sizes, tmp_root, log)
    if "batch" in parts:
        doc["batch"] = run_batch(sizes, tmp_root, log)
    if "stats" in parts:  # bench/cli_stats.py
        from .cli_stats import run_stats
        doc["stats"] = run_stats(args, tmp_root, log)
    elapsed = time.perf_counter() - t0
    info["loadavg_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    targets = {}
    for part in ("startup", "bulk", "wait_latency", "stalled_reader", "consume", "batch", "stats"):
        targets.update(doc.get(part, {}).get("targets", {}))
    la0, la1 = info.get("loadavg_start"), info.get("loadavg_end")
    cpus = info.get("cpus_usable") or info.get("cpu_count") or 1
    if la0 and la1 and max(la0[0], la1[0]) > 0.5 * cpus:
        notes.append(f"the machine was busy: 1-minute load average {la0[0]:.1f} at the start, "
                     f"{la1[0]:.1f} at the end, on {cpus} CPUs; whole-process times and "
                     "latencies are inflated and noisy, rerun on a quiet machine")
    notes.append("each part has its baseline or context in the same run: python -c pass for "
                 "start-up, a library-only child doing the same work for bulk and wait latency")
    doc = {
        "schema": 1,
        "suite": "cli",
        "command": "python -m bench " + " ".join(sys.argv[1:]),
        "machine": info,
        "parameters": {
            "quick": bool(args.quick), "parts": parts, "body_bytes": len(BODY),
            "bulk_messages": sizes.bulk, "bulk_rounds": sizes.bulk_rounds,
            "startup_runs": sizes.startup_runs, "latency_samples": sizes.latency_samples,
            "importtime_runs": sizes.importtime_runs, "settle_ms": sizes.settle_ms,
            "warm_runs": sizes.warm_runs,
            "statistic": "wall time of whole subprocesses (Popen to os.wait4, perf_counter); "
                         "start-up commands interleaved with the order rotated each round, "
                         "median reported; bulk: median msgs/s over rounds, each round in a "
                         "fresh store after os.sync(), mqcli and library children alternating; "
                         "max RSS from os.wait4 (ru_maxrss); latency median and nearest-rank p99",
            "elapsed_s": round(elapsed, 1),
        },
        **{k: v for k, v in doc.items() if k in ("startup", "bulk", "wait_latency", "stalled_reader", "consume", "batch",
                                                 "stats")},
        "targets": targets,
        "targets_met": all(t["met"] for t in targets.values()),
        "notes": notes,
    }
    return doc


def missed(doc: dict) -> list[str]:
    out = []
    for key, t in doc["targets"].items():
        if not t["met"]:
            val = f"{t['value']:,.0f}" if t["value"] >= 1000 else f"{t['value']:.2f}"
            out.append(f"{key}: {val} {t['unit']}, target {t['op']} {t['limit']:,g} {t['unit']}")
    return out


# --------------------------------------------------------------------------------------
# children: python -m bench.cli _child lib-put STORE QUEUE FILE | lib-get STORE QUEUE
# --------------------------------------------------------------------------------------

def _child_main(argv: list[str]) -> int:
    if argv[:1] == ["lib-put"] and len(argv) == 4:
        doc = _child_lib_put(*argv[1:])
    elif argv[:1] == ["lib-get"] and len(argv) == 3:
        doc = _child_lib_get(*argv[1:])
    else:
        sys.stderr.write(f"usage: python -m bench.cli _child lib-put STORE QUEUE FILE | "
                         f"lib-get STORE QUEUE (got {argv})\n")
        return 2
    sys.stdout.write(json.dumps(doc) + "\n")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["_child"]:
        sys.exit(_child_main(sys.argv[2:]))
    sys.exit("run the CLI suite with `python -m bench cli`")
