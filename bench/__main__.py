"""python -m bench [store|cli|analytics|channel|selectors|all] [--quick] [--messages N] [--out PATH] [--check] ...

`python -m bench` (or `--suite store`) runs the store suite, `python -m bench cli` (or
`--suite cli`) the command-line suite (bench/cli.py), `python -m bench analytics` the data
pipeline suite (bench/analytics.py, needs the spark extra), `python -m bench selectors`
`browse --where` against a plain browse (bench/selectors.py), `--suite all` every one."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

from . import report, runner

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join("bench", "results", "store.json")
SUITES = ("store", "cli", "analytics", "channel", "selectors", "all")


def parse_args(argv=None) -> argparse.Namespace:
    from . import cli

    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark the store engine against raw py-lmdb, persist-queue "
                    "(SQLiteAckQueue) and litequeue on one durable 256-byte-message workload "
                    "(suite 'store', the default), the mqcli command line as whole "
                    "processes: cold start, bulk put/get, wait latency (suite 'cli'), and "
                    "`analyze routes` on Spark against one Python process (suite 'analytics').")
    p.add_argument("suite_arg", nargs="?", choices=SUITES, metavar="SUITE",
                   help="store (default), cli, analytics, channel, selectors or all; same as --suite")
    p.add_argument("--suite", choices=SUITES, help="store (default), cli, analytics, channel, selectors or all")
    p.add_argument("--quick", action="store_true",
                   help="small sizes for CI (store: 10,000 batched / 300 single messages, "
                        "3 rounds; cli: 20,000 bulk messages in 1 round, 10 start-up runs, "
                        "10 latency samples; analytics: 20,000 trace reports)")
    p.add_argument("--messages", type=int, metavar="N",
                   help="messages per measurement in the batched workloads (whole batches of "
                        "min(1000, N)); the one-commit-per-message workloads use max(50, N/50) "
                        "unless --sync-messages is given. Default 100,000 (quick: 10,000)")
    p.add_argument("--sync-messages", type=int, metavar="N",
                   help="messages per measurement in the one-commit-per-message workloads "
                        "(default 3,000; quick: 300)")
    p.add_argument("--rounds", type=int, metavar="R",
                   help="interleaved rounds per workload; the median is reported "
                        "(default 7; quick: 3; analytics: 1)")
    p.add_argument("--out", metavar="PATH",
                   help=f"JSON results file of the one suite run (default {DEFAULT_OUT}, "
                        f"for cli {cli.DEFAULT_OUT}, for analytics bench/results/analytics.json); "
                        "not with --suite all")
    p.add_argument("--tmpdir", metavar="DIR",
                   help="where the per-measurement temp dirs go (default: the system temp "
                        "dir). Use a real disk: on tmpfs fsync is free and ratios mislead")
    p.add_argument("--only", action="append", metavar="WORKLOAD",
                   help="run only this workload or part (repeatable): put_single, put_batched, "
                        "get_batched, get_confirm (store); startup, bulk, wait, stalled, consume, batch, stats (cli)")
    g = p.add_argument_group("cli suite")
    g.add_argument("--bulk-messages", type=int, metavar="N",
                   help="messages in the bulk put --jsonl / get --all measurements "
                        "(default 200,000; quick: 20,000)")
    g.add_argument("--bulk-rounds", type=int, metavar="R",
                   help="bulk rounds, each in a fresh store (default 3; quick: 1)")
    g.add_argument("--startup-runs", type=int, metavar="N",
                   help="timed runs of each start-up command (default 30; quick: 10)")
    g.add_argument("--latency-samples", type=int, metavar="N",
                   help="wait-latency samples per getter (default 50; quick: 10)")
    g.add_argument("--importtime-runs", type=int, metavar="N",
                   help="runs of -X importtime and of the phase split (default 5; quick: 3)")
    g.add_argument("--settle-ms", type=int, metavar="MS",
                   help="how long a getter waits after its FIFO appears before the put "
                        "(default 100)")
    g.add_argument("--profile", action="store_true",
                   help="also run bulk put and get once under cProfile (untimed) and keep the "
                        "top functions in the JSON")
    from . import cli_stats
    cli_stats.add_arguments(g)  # part 'stats' of suite 'cli': bench/cli_stats.py
    g = p.add_argument_group("analytics suite")
    g.add_argument("--reports", type=int, metavar="N",
                   help="trace reports in the stores (default 2,000,000; quick: 20,000)")
    g.add_argument("--seed", type=int, default=7, help="seed of the generated routes (default 7)")
    g.add_argument("--master", metavar="URL",
                   help="Spark master (default: Spark's configuration, else local[*])")
    g.add_argument("--cluster", metavar="URL",
                   help="also run the Spark pass on this standalone master (spark://…) after local mode")
    g.add_argument("--no-pushdown", action="store_true",
                   help="skip the pushdown query (20 queues, with and without filters pushed down)")
    g.add_argument("--rebuild", action="store_true",
                   help="build the stores again instead of using the cached ones")
    from . import channel
    channel.add_arguments(p)  # suite 'channel': bench/channel.py
    from . import selectors
    selectors.add_arguments(p)  # suite 'selectors': bench/selectors.py
    p.add_argument("--check", action="store_true",
                   help="exit 1 if any target is missed")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-round progress lines")
    args = p.parse_args(argv)
    if args.suite_arg and args.suite and args.suite_arg != args.suite:
        p.error(f"suite given twice: {args.suite_arg} and --suite {args.suite}")
    args.suite = args.suite or args.suite_arg or "store"
    if args.suite == "all" and args.out:
        p.error("--out names one suite's file; with --suite all each suite writes its default")
    for name in ("messages", "sync_messages", "rounds", "bulk_messages", "bulk_rounds",
                 "startup_runs", "latency_samples", "importtime_runs", "reports", "stats_messages", "stats_runs"):
        v = getattr(args, name)
        if v is not None and v < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.settle_ms is not None and args.settle_ms < 0:
        p.error("--settle-ms must not be negative")
    if args.only:
        known = {w.key for w in runner.WORKLOADS} | set(cli.PARTS)
        bad = [k for k in args.only if k not in known]
        if bad:
            p.error(f"unknown workload(s) {bad}; choose from {sorted(known)}")
    return args


def _temp_root(args) -> str:
    base = args.tmpdir or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix="mqcli-bench-", dir=base)


def main(argv=None) -> int:
    from .cli import PARTS

    args = parse_args(argv)
    log = (lambda *a, **k: None) if args.quiet else (lambda *a, **k: print(*a, **k, flush=True))
    only = args.only or []
    cli_only = [k for k in only if k in PARTS]
    store_only = [k for k in only if k not in PARTS]
    run_store = args.suite in ("store", "all") and (not only or bool(store_only))
    run_cli = args.suite in ("cli", "all") and (not only or bool(cli_only))
    run_analytics = args.suite in ("analytics", "all") and not only
    run_channel = args.suite in ("channel", "all") and not only
    run_selectors = args.suite in ("selectors", "all") and not only
    if not (run_store or run_cli or run_analytics or run_channel or run_selectors):
        raise SystemExit(f"--only {only}: nothing of suite {args.suite!r} (store workloads: "
                         f"{', '.join(w.key for w in runner.WORKLOADS)}; cli parts: "
                         f"{', '.join(PARTS)})")
    status = 0
    if run_store:
        status |= main_store(args, store_only or None, log)
    if run_cli:
        if run_store:
            print()
        status |= main_cli(args, cli_only or None, log)
    if run_analytics:
        from . import analytics
        from store.analytics import missing

        if run_store or run_cli:
            print()
        if args.suite == "all" and missing():
            print("analytics suite skipped: the spark extra is not installed "
                  "(pip install -e '.[spark]')")
        else:
            status |= analytics.main(args, log)
    if run_channel:
        from . import channel

        status |= channel.main(args, log)
    if run_selectors:
        from . import selectors

        status |= selectors.main(args, log)
    return status


def main_cli(args, only, log) -> int:
    from . import cli

    parts = [p for p in cli.PARTS if not only or p in only]
    tmp_root = _temp_root(args)
    try:
        info = report.machine_info(tmp_root, REPO)
        doc = cli.run(args, tmp_root, info, log, parts)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    print()
    print(cli.render_table(doc))
    report.save(doc, args.out, cli.DEFAULT_OUT, doc["parameters"]["elapsed_s"])
    missed = cli.missed(doc)
    if missed:
        print("targets missed: " + "; ".join(missed))
    return 1 if (args.check and missed) else 0


def main_store(args, only, log) -> int:
    sizes = runner.sizes_for(args)
    workloads = runner.selected_workloads(only)
    tmp_root = _temp_root(args)
    t_start = time.perf_counter()
    try:
        info = report.machine_info(tmp_root, REPO)
        fs = info["tmp_filesystem"]
        notes = report.dirty_notes(info) + report.memory_fs_notes(
            info, "temp dirs", "; durable-workload ratios may not mean much (use --tmpdir)")
        if args.quick or args.messages is not None or args.sync_messages is not None:
            notes.append("non-default sizes: small runs are noisier than the default run")
        durability = report_durability(tmp_root)
        log(f"sizes: single={sizes.single} batched={sizes.batched} batch={sizes.batch} "
            f"rounds={sizes.rounds}; temp dirs under {tmp_root} ({fs['type']})")
        runner.warm_up(tmp_root, workloads, log=log)
        results = runner.run(workloads, sizes, tmp_root, log=log)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    elapsed = time.perf_counter() - t_start
    info = report.finished(info)
    notes += report.busy_notes(info, "each ratio's two sides waited for CPU in turn, and a round's "
                                     "spread is wide; rerun on a quiet machine before reading a ratio")

    notes.append("persist-queue acked rows and litequeue done rows stay in their tables; the "
                 "store deletes confirmed messages")
    if any(r.workload.key == "get_confirm" for r in results):
        notes.append("persist-queue's get selects the first row with status < unack in _id "
                     "order and acked rows are kept, so every get scans all rows acked so "
                     "far: its get+ack rate falls as a run goes on, and workload 4's ratio "
                     "grows with --sync-messages. litequeue's pop sorts every ready row by "
                     "message_id (temp b-tree), so its cost grows with queue depth")
    doc = report.build_json(results, info, sizes, args, durability, notes, elapsed)
    print()
    print(report.render_table(results, info, sizes, notes))
    report.save(doc, args.out, DEFAULT_OUT, elapsed)

    def why(k: str, t: dict) -> str:
        if "min_rate" in t:
            return f"{k}: {t['rate']:,.0f}/s < {t['min_rate']:,.0f}/s"
        return f"{k}: {t['ratio']:.2f}x < {t['min_ratio']:g}x vs {t['peer']}"

    missed = [why(k, w["target"]) for k, w in doc["workloads"].items()
              if w["target"] and not w["target"]["met"]]
    if missed:
        print("targets missed: " + "; ".join(missed))
    return 1 if (args.check and missed) else 0


def report_durability(tmp_root: str) -> dict:
    from .workloads import describe_durability

    probe = tempfile.mkdtemp(prefix="probe-", dir=tmp_root)
    try:
        return describe_durability(probe)
    finally:
        shutil.rmtree(probe, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
