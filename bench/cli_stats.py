"""python -m bench cli --only stats: `mqcli stats --prometheus` over deep queues costs what it
costs over empty ones.

Two stores with the same 100 queues: one holding N messages in all (default 1,000,000, 16-byte
bodies, spread over the queues and the eight priorities, one two-phase get held in each queue
so that the oldest in-flight age is computed too), one empty. `mqcli stats --prometheus` runs as
a whole process against each, the two interleaved round by round (the order alternating), and
the ratio of the medians must stay at or below 1.2: the metrics come from the per-queue
counters and the ends of the position lists (store/queue_counters.py), never a walk over the
messages, which over a million would take seconds. The same reading done in this process
(`Store.stats` and the exposition text, no start-up) is reported beside it as context: it is
the part that could grow with the depth.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time

QUEUES = 100
MESSAGES = 1_000_000
BODY = b"mqcli-stats-16-b"
RUNS = 15
RUNS_QUICK = 7
TARGET = ("stats_prometheus_ratio",
          "median wall(mqcli stats --prometheus), 100 queues holding N messages / the same queues empty",
          "<=", 1.2, "x")


def add_arguments(group) -> None:
    group.add_argument("--stats-messages", type=int, metavar="N",
                       help="messages in all in the deep store of the stats part (default 1,000,000)")
    group.add_argument("--stats-runs", type=int, metavar="N",
                       help="timed runs of stats --prometheus on each store (default 15; quick: 7)")


def _queue(i: int) -> str:
    return f"queue-{i:03d}"


def _build(path: str, messages: int, log) -> int:
    """The store with its queues and, if `messages`, that many spread over them, one held in
    flight per queue (a two-phase get). Returns the number held."""
    from store import NewMessage, Store

    held = 0
    with Store.open(path, create=True, name="bench") as st:
        for i in range(QUEUES):
            st.create_queue(_queue(i))
        if not messages:
            return 0
        t0 = time.perf_counter()
        per_queue, extra = divmod(messages, QUEUES)
        for i in range(QUEUES):
            n = per_queue + (i < extra)
            for at in range(0, n, 10_000):
                st.put_many(_queue(i), [NewMessage(BODY, priority=(at + k) % 8, express=True)
                                        for k in range(min(10_000, n - at))])
            if n:
                st.get(_queue(i), confirm_id=1000 + i, wait=0)  # in flight: the oldest in-flight age
                held += 1
        log(f"stats: built {messages:,} messages in {QUEUES} queues in {time.perf_counter() - t0:.1f} s")
    return held


def _read_in_process(path: str) -> float:
    from mqcli.prometheus import store_metrics
    from store import Store

    with Store.open(path) as st:
        t0 = time.perf_counter()
        store_metrics(st.stats(), st.info(), len(st.tx_list()), st.outgoing_list())
        return time.perf_counter() - t0


def _check(text: str, messages: int, held: int) -> None:
    from .cli import BenchError

    depth = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                if line.startswith("mqcli_queue_depth{"))
    inflight = [line for line in text.splitlines() if line.startswith("mqcli_queue_oldest_in_flight_age_seconds{")]
    if depth != messages or len(inflight) < held:
        raise BenchError(f"stats --prometheus shows a depth of {depth:g} (expected {messages}) and "
                         f"{len(inflight)} oldest in-flight ages (expected {held})")


def run_stats(args, tmp_root: str, log) -> dict:
    from .cli import _child_env, _stats, _sync, mqcli_path, run_child

    messages = getattr(args, "stats_messages", None) or MESSAGES
    runs = getattr(args, "stats_runs", None) or (RUNS_QUICK if args.quick else RUNS)
    work = tempfile.mkdtemp(prefix="stats-", dir=tmp_root)
    try:
        stores = {"empty": os.path.join(work, "empty"), "deep": os.path.join(work, "deep")}
        _build(stores["empty"], 0, log)
        held = _build(stores["deep"], messages, log)
        _sync()
        mq = mqcli_path()
        walls: dict[str, list[float]] = {k: [] for k in stores}
        reads: dict[str, list[float]] = {k: [] for k in stores}
        for path in stores.values():  # warm: bytecode written, pages cached
            run_child([mq, "stats", "--prometheus"], _child_env(path), work, capture=True)
        log(f"stats: {runs} runs of mqcli stats --prometheus on each store, interleaved")
        for r in range(runs):
            for name in (("empty", "deep") if r % 2 == 0 else ("deep", "empty")):
                child = run_child([mq, "stats", "--prometheus"], _child_env(stores[name]), work, capture=True)
                _check(child.stdout.decode(), messages if name == "deep" else 0, held if name == "deep" else 0)
                walls[name].append(child.seconds)
                reads[name].append(_read_in_process(stores[name]))
        size = os.path.getsize(os.path.join(stores["deep"], "data.mdb"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratio = statistics.median(walls["deep"]) / statistics.median(walls["empty"])
    key, what, op, limit, unit = TARGET
    return {
        "queues": QUEUES, "messages": messages, "held_in_flight": held, "runs": runs,
        "deep_store_bytes": size,
        "command": "mqcli stats --prometheus",
        "results": {name: {"wall_s": _stats(walls[name]), "in_process_read_s": _stats(reads[name])}
                    for name in stores},
        "in_process_ratio": statistics.median(reads["deep"]) / statistics.median(reads["empty"]),
        "targets": {key: {"what": what, "value": ratio, "op": op, "limit": limit, "unit": unit,
                          "met": ratio <= limit}},
    }


def render_rows(doc: dict, row, target) -> None:
    """The part's rows in the suite's table (bench/cli.py `render_table`)."""
    s = doc.get("stats")
    if not s:
        return
    title = f"7. stats --prometheus, {s['queues']} queues"
    empty, deep = s["results"]["empty"], s["results"]["deep"]
    row(title, "queues empty", str(s["runs"]), f"{empty['wall_s']['median'] * 1000:.1f} ms",
        "", f"read {empty['in_process_read_s']['median'] * 1000:.2f} ms", "context", "")
    t, m = target(s["targets"][TARGET[0]])
    row("", f"{s['messages']:,} messages", str(s["runs"]), f"{deep['wall_s']['median'] * 1000:.1f} ms", "",
        f"{s['targets'][TARGET[0]]['value']:.2f}x", t, m)
    row("", "  in-process read (context)", "", f"{deep['in_process_read_s']['median'] * 1000:.2f} ms", "",
        f"{s['in_process_ratio']:.2f}x", "context", "")
