"""python -m bench cli, part 1: cold start. Whole `mqcli` processes against `python -c pass` in
the same run (interleaved, order rotated), the import-time split by module (`-X importtime`),
and an in-process phase split of `put` (import, parse and import what it needs, run)."""

from __future__ import annotations

import os
import re
import shutil
import statistics
import sys

from .cli_common import (
    QUEUE, BenchError, CliSizes, _child_env, _depth, _new_store, _stats, _target_result, mqcli_path, run_child,
    work_store,
)

# --------------------------------------------------------------------------------------
# 1. cold start
# --------------------------------------------------------------------------------------

PHASES_SCRIPT = r"""
import os, sys, time
t0 = time.perf_counter()
from mqcli import signals
signals.install()
from mqcli.fastpath import prepared
t1 = time.perf_counter()
command = prepared(sys.argv[1:])  # parsed, and what put needs imported (store, mqcli.messaging)
assert command is not None, "the fast path did not take the command line"
t2 = time.perf_counter()
command()
t3 = time.perf_counter()
sys.stderr.write("PHASES %r %r %r\n" % (t1 - t0, t2 - t1, t3 - t2))
if os.environ.get("BENCH_FAST_EXIT"):
    sys.stdout.flush(); sys.stderr.flush(); os._exit(0)  # skip interpreter teardown
"""


CALLER_ENV = "mqcli put q hello, caller's env"


BROWSE = "mqcli browse q"  # run against a store of its own, one message in q


def startup_commands(py: str, mq: str) -> dict[str, tuple[list[str], str, str | None]]:
    """name -> (argv, role, target key); role 'baseline', 'target' or 'context'."""
    return {
        "python -c pass": ([py, "-c", "pass"], "baseline", None),
        "mqcli put q hello": ([mq, "put", QUEUE, "hello"], "target", "startup_put_ratio"),
        "mqcli get q": ([mq, "get", QUEUE], "target", "startup_get_ratio"),
        BROWSE: ([mq, "browse", QUEUE], "target", "startup_browse_ratio"),
        "mqcli --version": ([mq, "--version"], "target", "startup_version_ratio"),
        "mqcli put --help": ([mq, "put", "--help"], "target", "startup_put_help_ratio"),
        "mqcli --help": ([mq, "--help"], "target", "startup_help_ratio"),
        # what a shell runs on a TAB after `mqcli get ` (mqcli/complete.py): the store's queue names
        "mqcli __complete queue": ([mq, "__complete", "queue"], "target", "startup_complete_ratio"),
        "python -c 'import typer'": ([py, "-c", "import typer"], "context", None),
        # the bench's own environment without the private bytecode cache: with
        # PYTHONDONTWRITEBYTECODE=1 and no __pycache__ next to mqcli/ and store/, every start
        # compiles them from source
        CALLER_ENV: ([mq, "put", QUEUE, "hello"], "context", None),
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
    work, store_path = work_store(tmp_root, "startup-")
    browse_store = os.path.join(work, "browse-store")
    _new_store(browse_store)
    # `get q` takes one message a round: there is always one (put runs as often, maybe later)
    rounds = sizes.warm_runs + sizes.startup_runs
    _fill(store_path, rounds)
    _fill(browse_store, 1)
    env = _child_env(store_path)
    envs = {CALLER_ENV: _child_env(store_path, bytecode=False), BROWSE: _child_env(browse_store)}
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
    want = 2 * rounds  # filled with one a round; each round two puts (put, caller's env) and a get
    if puts != want:
        raise BenchError(f"mqcli put q hello: queue depth {puts}, expected {want}")

    base = statistics.median(times["python -c pass"])
    commands = {}
    for name in names:
        argv, role, target = cmds[name]
        st = _stats(times[name])
        commands[name] = {
            "argv": [os.path.basename(argv[0])] + argv[1:], "role": role, "target": target,
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

    phases = {"import mqcli.fastpath": [], "parse, import store and mqcli.messaging": [], "run put q hello": []}
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
        "script": "python -c '<from mqcli.fastpath import prepared; command = prepared([...]); command()>'"
                  " put q hello (the path `mqcli put` takes, without Typer), perf_counter stamps; run again "
                  "ending in os._exit(0) to measure interpreter teardown",
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
        "store": "existing store and queue (created and filled untimed); every put and get is a real "
                 "durable one; browse runs against a store of its own holding one message",
        "importtime": imports,
        "phases": phase_doc,
        "targets": {key: _target_result(key, commands[name]["ratio_to_python"])
                    for name, (_, _, key) in cmds.items() if key},
    }


def _fill(path: str, n: int) -> None:
    from store import NewMessage, Store

    with Store.open(path) as st:
        st.put_many(QUEUE, [NewMessage(b"hello") for _ in range(n)])
