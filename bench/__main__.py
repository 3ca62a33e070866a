"""python -m bench [--quick] [--messages N] [--out PATH] [--check] ..."""

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


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark the store engine against raw py-lmdb, persist-queue "
                    "(SQLiteAckQueue) and litequeue on one durable 256-byte-message workload.")
    p.add_argument("--quick", action="store_true",
                   help="small sizes for CI (10,000 batched / 300 single messages, 3 rounds)")
    p.add_argument("--messages", type=int, metavar="N",
                   help="messages per measurement in the batched workloads (whole batches of "
                        "min(1000, N)); the one-commit-per-message workloads use max(50, N/50) "
                        "unless --sync-messages is given. Default 100,000 (quick: 10,000)")
    p.add_argument("--sync-messages", type=int, metavar="N",
                   help="messages per measurement in the one-commit-per-message workloads "
                        "(default 3,000; quick: 300)")
    p.add_argument("--rounds", type=int, metavar="R",
                   help="interleaved rounds per workload; the median is reported "
                        "(default 7; quick: 3)")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="PATH",
                   help=f"JSON results file (default {DEFAULT_OUT})")
    p.add_argument("--tmpdir", metavar="DIR",
                   help="where the per-measurement temp dirs go (default: the system temp "
                        "dir). Use a real disk: on tmpfs fsync is free and ratios mislead")
    p.add_argument("--only", action="append", metavar="WORKLOAD",
                   help="run only this workload (repeatable): put_single, put_batched, "
                        "get_batched, get_confirm")
    p.add_argument("--check", action="store_true",
                   help="exit 1 if any target ratio is missed")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-round progress lines")
    args = p.parse_args(argv)
    for name in ("messages", "sync_messages", "rounds"):
        v = getattr(args, name)
        if v is not None and v < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    sizes = runner.sizes_for(args)
    workloads = runner.selected_workloads(args.only)
    log = (lambda *a, **k: None) if args.quiet else (lambda *a, **k: print(*a, **k, flush=True))

    base = args.tmpdir or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    tmp_root = tempfile.mkdtemp(prefix="mqcli-bench-", dir=base)
    t_start = time.perf_counter()
    try:
        info = report.machine_info(tmp_root, REPO)
        notes = []
        fs = info["tmp_filesystem"]
        if fs["type"] in ("tmpfs", "ramfs", "overlay", "unknown"):
            notes.append(f"temp dirs are on {fs['type']}: fsync cost there is not a real "
                         "disk's; durable-workload ratios may not mean much (use --tmpdir)")
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
    out = args.out if os.path.isabs(args.out) else os.path.abspath(args.out)
    report.write_json(doc, out)
    print(f"\nwrote {out}  ({elapsed:.0f} s)")

    missed = [f"{k}: {w['target']['ratio']:.2f}x < {w['target']['min_ratio']:g}x vs "
              f"{w['target']['peer']}"
              for k, w in doc["workloads"].items() if w["target"] and not w["target"]["met"]]
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
