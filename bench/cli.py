"""python -m bench cli: the `mqcli` command line as a user runs it, one whole process at a time.

The parts, each measured in one run on this machine with its baseline next to it:

1. cold start  -- wall time of whole subprocesses (`subprocess.Popen` + `os.wait4`), the commands
   interleaved round by round (order rotated): `python -c pass` (the same interpreter, the
   baseline), `mqcli put q hello`, `mqcli get q`, `mqcli browse q` (real, durable, in an
   existing store and queue), `mqcli --version`, `mqcli put --help`, `mqcli --help`, and
   `python -c "import typer"` for context.  Ratio = median / median of `python -c pass`.
   Plus `python -X importtime -m mqcli put q hello` (per-module medians over a few runs: the
   start-up budget, split by module) and an in-process phase split of the path put takes
   without Typer (import mqcli.fastpath, parse and import what put needs, run the put).
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

5. consume   -- `mqcli consume q --exec true` over N messages against N spawns of `sh -c true`;
   context: the library's consumer doing the same durable commits alone (the floor of the overhead).
6. batch     -- `mqcli batch` of 1,000 put lines against `mqcli put` processes, per command.

One module per job: cli_common.py (sizes, targets, running a child), cli_startup.py (1),
cli_bulk.py (2, and the library children), cli_latency.py (3, 4), cli_workers.py (5, 6); this
module runs the selected parts and renders the table and the JSON document.

Children run with MQCLI_STORE pointing at a store in a fresh temp directory, stdin from
/dev/null and stderr to a file (so never a terminal: no progress bars).
"""

from __future__ import annotations

import os
import sys
import time

from .cli_bulk import run_bulk
from .cli_common import BODY, PYCACHE, REPO, mqcli_path, sizes_for
from .cli_latency import run_stalled, run_wait
from .cli_startup import CALLER_ENV, run_startup
from .cli_workers import run_consume, run_batch
from .report import busy_notes, dirty_notes, finished

DEFAULT_OUT = os.path.join("bench", "results", "cli.json")
PARTS = ("startup", "bulk", "wait", "stalled", "consume", "batch", "stats")


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
                key = c.get("target")
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
        if "commit_ms_per_message" in res:
            row("", "floor: confirm + next, library", str(c["messages"]), "", "",
                f"{res['commit_ms_per_message']:.2f} ms/msg", "context", "")
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
    notes += dirty_notes(info)
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
    info = finished(info)
    targets = {}
    for part in ("startup", "bulk", "wait_latency", "stalled_reader", "consume", "batch", "stats"):
        targets.update(doc.get(part, {}).get("targets", {}))
    notes += busy_notes(info, "whole-process times and latencies are inflated and noisy, rerun on a "
                              "quiet machine")
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


if __name__ == "__main__":
    sys.exit("run the CLI suite with `python -m bench cli`")
