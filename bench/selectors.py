"""python -m bench selectors: `browse --where` against a plain `browse`, as whole processes.

One store per run, filled untimed through the path a user takes (`mqcli put --jsonl` of your
own records): N 256-byte messages, each with a property `region` (`eu` for 1 in 100, else
`us`) and `n` (its number), and a correl_id (`x` for 1 in 100, else its own).

Timed, each command a whole `mqcli` process from start to exit, output `-o jsonl` to a file
(its lines are counted after, untimed, and checked against what the selection must hold),
the four interleaved in each round, their order rotated round by round:

- `browse q` (every message of the queue),
- `browse q --where "props.region = 'eu'"` (a property has no index: the queue is scanned
  inside the store's read transaction, each record tested through a lazy view that reads only
  the property, and only the 1% that match decoded and written),
- `browse q --where "correl_id = 'x'"` and `browse q --correl-id x` (the selector's equality
  on correl_id reads the correl_id index, as the option does).

Targets (median seconds over rounds): the property selector takes <= 0.5x the plain browse;
the indexed selector costs the same as `--correl-id` (within 15%: both are mostly process
start-up, and the machine is shared).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join("bench", "results", "selectors.json")
BODY = ("mqcli-bench-256-byte-body/" * 10)[:256]  # the store suite's body
MAX_WHERE_RATIO = 0.5
INDEXED_TOLERANCE = 0.15
COMMANDS = {
    "browse": [],
    "where_property": ["--where", "props.region = 'eu'"],
    "where_correl_id": ["--where", "correl_id = 'x'"],
    "correl_id_option": ["--correl-id", "x"],
}


def add_arguments(p) -> None:
    from .channel import _positive

    g = p.add_argument_group("selectors suite")
    g.add_argument("--selector-messages", type=_positive, metavar="N",
                   help="messages in the queue (default 200,000; quick: 20,000)")
    g.add_argument("--selector-rounds", type=_positive, metavar="R",
                   help="interleaved rounds; the median is reported (default 5; quick: 1)")


def _env() -> dict:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("MQCLI_STORE", None)
    env["PYTHONPATH"] = os.pathsep.join([REPO, *filter(None, [env.get("PYTHONPATH")])])
    return env


def mqcli(store: str, *args: str, env: dict, stdout=subprocess.DEVNULL, stdin=None) -> float:
    """Run `mqcli --store STORE ARGS` to its end; the wall seconds it took."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mqcli", "--store", store, *args], env=env,
                          stdout=stdout, stdin=stdin, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"mqcli {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return seconds


def records(n: int, path: str) -> None:
    """The JSONL a user would feed `put --jsonl`: one record a message, every field chosen."""
    import json

    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"body": BODY, "props": {"region": "eu" if i % 100 == 0 else "us", "n": str(i)},
                                "correl_id": "x" if i % 100 == 7 else f"c{i}"}) + "\n")


def expected(n: int) -> dict[str, int]:
    every = range(n)
    return {"browse": n, "where_property": sum(1 for i in every if i % 100 == 0),
            "where_correl_id": sum(1 for i in every if i % 100 == 7),
            "correl_id_option": sum(1 for i in every if i % 100 == 7)}


def run(args, tmp_root: str, info: dict, log) -> dict:
    n = args.selector_messages or (20_000 if args.quick else 200_000)
    rounds = args.selector_rounds or (1 if args.quick else 5)
    env = _env()
    t_start = time.perf_counter()
    store = os.path.join(tmp_root, "store")
    fill = os.path.join(tmp_root, "fill.jsonl")
    records(n, fill)
    mqcli(store, "init", env=env)
    mqcli(store, "queue", "create", "q", env=env)
    with open(fill, "rb") as f:
        put_s = mqcli(store, "put", "q", "--jsonl", "-", "-q", env=env, stdin=f)
    log(f"filled: {n:,} messages by `put --jsonl` in {put_s:.2f} s (untimed set-up)")
    want = expected(n)
    names = list(COMMANDS)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    out = os.path.join(tmp_root, "out.jsonl")
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            with open(out, "wb") as f:
                s = mqcli(store, "browse", "q", *COMMANDS[name], "-o", "jsonl", env=env, stdout=f)
            with open(out, "rb") as f:
                got = sum(1 for _ in f)
            if got != want[name]:
                raise RuntimeError(f"{name}: {got} messages, {want[name]} expected")
            seconds[name].append(s)
            log(f"  round {r + 1}/{rounds}  {name:<18} {s:8.3f} s  ({got:,} messages)")
    median = {name: statistics.median(v) for name, v in seconds.items()}
    where_ratio = median["where_property"] / median["browse"]
    indexed_ratio = median["where_correl_id"] / median["correl_id_option"]
    notes = []
    if n != 200_000:
        notes.append(f"{n:,} messages, not the target's 200,000")
    fs = info["tmp_filesystem"]
    if fs["type"] in ("tmpfs", "ramfs", "overlay", "unknown"):
        notes.append(f"the store is on {fs['type']}")
    return {
        "suite": "selectors",
        "machine": info,
        "parameters": {"messages": n, "rounds": rounds, "body_bytes": len(BODY), "output": "jsonl to a file",
                       "fill_put_jsonl_s": put_s, "elapsed_s": time.perf_counter() - t_start},
        "results": {name: {"seconds": median[name], "seconds_rounds": seconds[name], "messages": want[name],
                           "command": ["browse", "q", *COMMANDS[name], "-o", "jsonl"]} for name in names},
        "targets": {
            "where_property": {"what": "browse --where on a property (1% match) / plain browse, median seconds",
                               "ratio": where_ratio, "max_ratio": MAX_WHERE_RATIO,
                               "met": where_ratio <= MAX_WHERE_RATIO},
            "where_correl_id": {"what": "browse --where \"correl_id = 'x'\" / browse --correl-id x, median seconds",
                                "ratio": indexed_ratio, "tolerance": INDEXED_TOLERANCE,
                                "met": abs(indexed_ratio - 1) <= INDEXED_TOLERANCE},
        },
        "notes": notes,
    }


def render(doc: dict) -> str:
    p, res, t = doc["parameters"], doc["results"], doc["targets"]
    lines = [f"selectors: browse of a queue of {p['messages']:,} {p['body_bytes']}-byte messages, whole "
             f"processes, -o jsonl to a file, {p['rounds']} round(s)", "",
             f"{'command':<52} {'messages':>9} {'seconds':>9}"]
    for r in res.values():
        lines.append(f"{' '.join(r['command'][2:-2]) or '(plain)':<52} {r['messages']:>9,} {r['seconds']:>9.3f}")
    w, i = t["where_property"], t["where_correl_id"]
    lines += ["",
              f"property selector / plain browse: {w['ratio']:.2f}x (target <= {w['max_ratio']}x): "
              f"{'met' if w['met'] else 'MISSED'}",
              f"indexed selector / --correl-id:   {i['ratio']:.2f}x (target 1 +- {i['tolerance']}): "
              f"{'met' if i['met'] else 'MISSED'}"]
    lines += [f"note: {n}" for n in doc["notes"]]
    return "\n".join(lines)


def main(args, log) -> int:
    from . import report

    doc = report.run_suite(args, "selectors", run, render, DEFAULT_OUT, REPO, log)
    missed = [k for k, v in doc["targets"].items() if not v["met"]]
    return 1 if (args.check and missed) else 0
