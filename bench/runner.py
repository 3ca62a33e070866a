"""Interleaved rounds: every contender of a workload once per round, order rotated each round,
each measurement in its own fresh temporary directory; the median over rounds is reported."""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass, field

from .workloads import STORE, WORKLOADS, Workload

BODY = (b"mqcli-bench-256-byte-body/" * 10)[:256]
assert len(BODY) == 256


@dataclass
class Sizes:
    single: int  # messages per measurement, one commit per message
    batched: int  # messages per measurement, `batch` per commit
    batch: int  # messages per commit in the batched workloads
    rounds: int
    tx: int = 10_000  # operations in the committed transaction
    labels: int = 1_000_000  # trace report labels decoded


@dataclass
class ContenderResult:
    name: str
    op: str
    messages: int
    rounds: list[float] = field(default_factory=list)  # msgs/s, one per round

    @property
    def median(self) -> float:
        return statistics.median(self.rounds)


@dataclass
class WorkloadResult:
    workload: Workload
    messages: int
    batch: int
    contenders: dict[str, ContenderResult]

    def ratio(self, peer: str) -> float:
        return self.contenders[STORE].median / self.contenders[peer].median

    def bound(self, floor: str | None = None) -> float | None:
        """The best ratio against the target peer that the workload's floor row (or the row
        `floor`) allows."""
        wl = self.workload
        floor = floor or wl.floor
        if floor is None or wl.target is None or wl.target.min_rate is not None:
            return None
        return self.contenders[floor].median / self.contenders[wl.target.peer].median


def sizes_for(args) -> Sizes:
    if args.quick:
        batched, single, rounds = 10_000, 300, 3
    else:
        batched, single, rounds = 100_000, 3_000, 7
    if args.messages is not None:
        batched = args.messages
        single = max(50, args.messages // 50)
    if args.sync_messages is not None:
        single = args.sync_messages
    if args.rounds is not None:
        rounds = args.rounds
    batch = min(1000, batched)
    batched = max(batch, batched // batch * batch)  # whole batches only
    return Sizes(single=single, batched=batched, batch=batch, rounds=rounds,
                 tx=2_000 if args.quick else 10_000, labels=50_000 if args.quick else 1_000_000)


def _measure(fn, tmp_root: str, tag: str, n: int, batch: int) -> float:
    workdir = tempfile.mkdtemp(prefix=f"mqbench-{tag}-", dir=tmp_root)
    try:
        gc.collect()
        if hasattr(os, "sync"):
            os.sync()  # don't let earlier measurements' dirty pages land in this one's fsyncs
        seconds = fn(workdir, n, BODY, batch)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if seconds <= 0:
        raise RuntimeError(f"{tag}: non-positive elapsed time {seconds}")
    return n / seconds


def warm_up(tmp_root: str, workloads: list[Workload], log=print) -> None:
    """One tiny untimed pass over every contender: imports, first-open costs, page cache."""
    log("warm-up ...")
    for wl in workloads:
        for name, (_op, fn) in wl.contenders.items():
            _measure(fn, tmp_root, f"warm-{wl.key}-{name}".replace("/", "_"), 50, 50)


def run(workloads: list[Workload], sizes: Sizes, tmp_root: str, log=print) -> list[WorkloadResult]:
    results = []
    for wl in workloads:
        n = {"single": sizes.single, "batched": sizes.batched, "tx": sizes.tx,
             "labels": sizes.labels}[wl.size]
        batch = sizes.batch
        names = list(wl.contenders)
        res = {name: ContenderResult(name, wl.contenders[name][0], n) for name in names}
        for r in range(sizes.rounds):
            k = r % len(names)
            for name in names[k:] + names[:k]:  # rotate the order every round
                fn = wl.contenders[name][1]
                rate = _measure(fn, tmp_root, f"{wl.key}-{name}".replace("/", "_"), n, batch)
                res[name].rounds.append(rate)
                log(f"  {wl.key:<12} round {r + 1}/{sizes.rounds}  {name:<15} {rate:>12,.0f} msg/s")
            sys.stdout.flush()
        results.append(WorkloadResult(wl, n, batch, res))
    return results


def selected_workloads(only: list[str] | None) -> list[Workload]:
    if not only:
        return list(WORKLOADS)
    keys = {w.key for w in WORKLOADS}
    bad = [k for k in only if k not in keys]
    if bad:
        raise SystemExit(f"unknown workload(s) {bad}; choose from {sorted(keys)}")
    return [w for w in WORKLOADS if w.key in only]
