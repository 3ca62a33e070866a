"""Workloads 1 and 4 measured *paired*, for a machine too busy for `python -m bench`: every
contender is open at once, in one directory, and each iteration times one operation of each
in turn (order alternating), so all of them meet the disk as it is at that moment. The
estimate is the median over iterations of each contender's time against the store's, the same
operations as bench/workloads.py (`Store.put`; a consumer's `next` + `confirm`, ack and next;
raw py-lmdb one put a commit; the store-pattern rows; persist-queue get + ack).

    python -m bench.paired [N] [--tmpdir DIR]     # N operations of each (default 1,000)
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
from time import perf_counter

from .runner import BODY
from .workloads import (
    MAP_SIZE, QUEUE, WARM_SINGLE, _expect, _pack, _pattern_open, _pq_open, pattern_ack_and_next, pattern_commit,
    pattern_prefill, pattern_put,
)


def _paired(steps: dict[str, object], n: int) -> dict[str, float]:
    """Per contender, the median over `n` iterations of its step's time over the store's: the
    store's rate over its rate, as the ratio of `python -m bench` (above 1: the store is faster)."""
    names = list(steps)
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(n):
        for name in (names if i % 2 else names[::-1]):
            t0 = perf_counter()
            steps[name]()  # type: ignore[operator]
            times[name].append(perf_counter() - t0)
    store = times["store"]
    return {name: statistics.median(t / s for s, t in zip(store, times[name])) for name in names if name != "store"}


def put_single(workdir: str, n: int) -> dict[str, float]:
    import lmdb

    from store import Store

    st = Store.open(os.path.join(workdir, "store"), create=True, name="bench", map_size=MAP_SIZE)
    st.create_queue(QUEUE)
    raw = lmdb.open(os.path.join(workdir, "lmdb"), map_size=MAP_SIZE)
    env, dbs = _pattern_open(workdir)
    pattern, raw_ids, pattern_ids = pattern_commit(env, pattern_put(dbs, BODY)), itertools.count(), itertools.count()

    def raw_put() -> None:
        with raw.begin(write=True) as txn:
            txn.put(_pack(next(raw_ids)), BODY)

    steps = {"store": lambda: st.put(QUEUE, BODY), "py-lmdb": raw_put,
             "py-lmdb/store-pattern": lambda: pattern(next(pattern_ids))}
    try:
        _paired(steps, WARM_SINGLE)
        ratios = _paired(steps, n)
        _expect("store depth after the paired puts", st.queue_info(QUEUE).depth, n + WARM_SINGLE)
        _expect("py-lmdb entries after the paired puts", raw.stat()["entries"], n + WARM_SINGLE)
        with env.begin() as txn:
            _expect("pattern positions after the paired puts", txn.stat(dbs[0])["entries"], n + WARM_SINGLE)
        return ratios
    finally:
        st.close(), raw.close(), env.close()


def get_confirm(workdir: str, n: int) -> dict[str, float]:
    from store import NewMessage, Store

    total = n + WARM_SINGLE
    st = Store.open(os.path.join(workdir, "store"), create=True, name="bench", map_size=MAP_SIZE)
    st.create_queue(QUEUE)
    for start in range(0, total, 1000):
        st.put_many(QUEUE, [NewMessage(BODY) for _ in range(min(1000, total - start))])
    pq = _pq_open(workdir)
    for _ in range(total):
        pq.put(BODY)
    env, dbs = _pattern_open(workdir)
    pattern_prefill(env, dbs, total, BODY, 1000)
    pattern, pattern_ids = pattern_commit(env, pattern_ack_and_next(dbs)), itertools.count()

    with st, st.consumer(QUEUE) as c:  # the consumer closes first, then the store
        steps = {"store": lambda: c.confirm(c.next(wait=0)), "persist-queue": lambda: pq.ack(pq.get(block=False)),
                 "py-lmdb/store-pattern": lambda: pattern(next(pattern_ids))}  # the last ack, the next get
        try:
            _paired(steps, WARM_SINGLE)
            ratios = _paired(steps, n)
            c.flush()
            _expect("store depth after the paired gets", st.queue_info(QUEUE).depth, 0)
            _expect("persist-queue acked", pq.acked_count(), total)
            with env.begin() as txn:
                _expect("pattern positions left", txn.stat(dbs[0])["entries"], 0)
            return ratios
        finally:
            pq.close(), env.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.paired", description=__doc__.split("\n\n")[0])
    parser.add_argument("n", nargs="?", type=int, default=1000)
    parser.add_argument("--tmpdir", default=None)
    args = parser.parse_args()
    for title, fn in (("1. durable put, one per commit", put_single), ("4. get + confirm (ack and next)", get_confirm)):
        with tempfile.TemporaryDirectory(prefix="mqbench-paired-", dir=args.tmpdir) as workdir:
            ratios = fn(workdir, args.n)
        print(f"{title}: " + ", ".join(f"store / {name} {r:.2f}x" for name, r in ratios.items()))
        peer = "py-lmdb" if "py-lmdb" in ratios else "persist-queue"
        print(f"   ceiling: a store costing exactly the store-pattern row would be "
              f"{ratios[peer] / ratios['py-lmdb/store-pattern']:.2f}x {peer}")


if __name__ == "__main__":
    main()
