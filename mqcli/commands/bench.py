"""The built-in benchmark (like `nats bench`): producers and consumers on a scratch queue."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ..options import Session, shared_options
from ..session import unshare


def _as_child() -> None:
    """A forked producer or consumer ends at Ctrl-C (sent to the whole process group) or
    SIGTERM as the signal's default does: no traceback, nothing half-done in the store (each
    commit is whole); the parent reports the interruption. The parent blocks both signals
    across the fork (_started): one that came before this ran acts now, by default, rather
    than through the handler the child inherited (a Terminated traceback from an import)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM))


def _started(process: Any) -> None:
    """Start a producer or consumer with Ctrl-C and SIGTERM blocked until it set them up
    (_as_child); in this process, one that came meanwhile is handled once it is started."""
    import signal

    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT, signal.SIGTERM))
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _producer(path: str, queue: str, count: int, size: int, batch: int, express: bool, child: bool = False) -> None:
    if child:
        _as_child()
    from store import NewMessage, Store

    body = b"x" * size
    with Store.open(path) as st:
        left = count
        while left > 0:
            n = min(batch, left)
            now = f"{time.time():.6f}"
            st.put_many(queue, [NewMessage(body, express=express, props={"t": now}) for _ in range(n)])
            left -= n


if TYPE_CHECKING:
    import multiprocessing


def _consumer(path: str, queue: str, count: int, batch: int, two_phase: bool, results: "multiprocessing.Queue") -> None:
    _as_child()
    import os
    import secrets

    from store import Store, errors

    latencies: list[float] = []
    got = 0
    error = None
    try:
        with Store.open(path) as st:
            # confirm ids name a group in the queue: each consumer needs its own
            cid = secrets.randbits(40) << 20
            while got < count:
                try:
                    if two_phase:
                        cid += 1
                        msgs = st.get_many(queue, min(batch, count - got), wait=5, confirm_id=cid)
                        st.confirm(queue, cid)
                    else:
                        msgs = st.get_many(queue, min(batch, count - got), wait=5)
                except errors.Timeout:
                    break
                now = time.time()
                latencies.extend(now - float(m.props["t"]) for m in msgs)
                got += len(msgs)
    except Exception as exc:  # reported by the parent, which must not wait for a dead child
        error = f"consumer {os.getpid()}: {type(exc).__name__}: {exc}"
    results.put((got, latencies, error))


def _collect(results: "multiprocessing.Queue", procs: list, expected: int) -> list:
    """One result per consumer; fails instead of hanging if a child died without one."""
    import queue as queue_module

    outcomes: list = []
    while len(outcomes) < expected:
        try:
            outcomes.append(results.get(timeout=1))
        except queue_module.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"a benchmark process died with exit code {dead[0].exitcode}") from None
    return outcomes


def _delete_queue(path: str, queue: str) -> None:
    from store import Store

    from ..signals import deferred

    with deferred():  # a second Ctrl-C waits for it
        with Store.open(path) as st:
            st.delete_queue(queue)


@shared_options
def bench(
    s: Session,
    messages: Annotated[int, typer.Option("--messages", "-m", min=1, help="Messages in all.")] = 10_000,
    size: Annotated[int, typer.Option("--size", min=0, help="Body size in bytes.")] = 128,
    producers: Annotated[int, typer.Option("--producers", "--pub", min=0, help="Producer processes.")] = 1,
    consumers: Annotated[int, typer.Option("--consumers", "--sub", min=0, help="Consumer processes.")] = 1,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Messages per commit.")] = 100,
    two_phase: Annotated[bool, typer.Option("--two-phase", help="Consumers get with a confirm id, then confirm.")] = False,
    express: Annotated[bool, typer.Option("--express", help="Express messages (one flush fewer).")] = False,
    scratch: Annotated[bool, typer.Option("--scratch/--in-store", help="Run in a temporary store, or (default) on a temporary queue of --store.")] = False,
) -> None:
    """Measure throughput and latency with real producer and consumer processes.

    \b
    Example:
      mqcli bench --messages 100000 --producers 2 --consumers 2 --batch 500
    """
    import multiprocessing  # imported here: mqcli's start-up should not pay for them
    import statistics
    import tempfile

    from store import Store

    if producers == 0 and consumers == 0:
        from ..exits import UsageError
        raise UsageError("need at least one producer or consumer")
    tmp = tempfile.TemporaryDirectory(prefix="mqcli-bench-") if scratch else None
    if tmp is None:  # its producers and consumers open the store in forked children, where LMDB
        unshare(s.store_path)  # refuses an environment this process (a batch) has open
    path = str(Path(tmp.name) / "store") if tmp else str(s.store_path)
    queue = f"bench.{int(time.time() * 1000)}"
    made = False
    try:
        # only the scratch store is made here: on --store, as for every command but init, none is
        with Store.open(path, create=tmp is not None, allow_unsafe_permissions=s.allow_unsafe) as st:
            st.create_queue(queue)
            made = True
        if producers == 0:  # consumers only: fill the queue first (one Store per process at a time)
            _producer(path, queue, messages, size, max(batch, 1000), express)
        ctx_mp = multiprocessing.get_context("fork")
        results = ctx_mp.Queue()
        share = [messages // max(producers, 1) + (1 if i < messages % max(producers, 1) else 0) for i in range(producers)]
        take = [messages // max(consumers, 1) + (1 if i < messages % max(consumers, 1) else 0) for i in range(consumers)]
        t0 = time.perf_counter()
        procs = [ctx_mp.Process(target=_producer, args=(path, queue, n, size, batch, express, True)) for n in share]
        procs += [ctx_mp.Process(target=_consumer, args=(path, queue, n, batch, two_phase, results)) for n in take]
        try:
            for p in procs:
                _started(p)
            outcomes = _collect(results, procs, len(take))
        except BaseException:  # Ctrl-C, SIGTERM or a child that died: none is left running
            for p in procs:
                if p.pid is not None and p.exitcode is None:
                    p.terminate()
            raise
        finally:
            for p in procs:
                if p.pid is not None:
                    p.join()
        errors_seen = [e for _, _, e in outcomes if e]
        if errors_seen:
            raise RuntimeError(errors_seen[0])
        elapsed = time.perf_counter() - t0
    finally:
        if tmp:
            tmp.cleanup()
        elif made:  # the scratch queue goes, also when the run was interrupted or failed
            _delete_queue(path, queue)
    got = sum(n for n, _, _ in outcomes)
    lat = sorted(x for _, xs, _ in outcomes for x in xs)

    def pct(p: float) -> Optional[float]:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 3) if lat else None

    doc = {
        "messages": messages, "size": size, "producers": producers, "consumers": consumers,
        "batch": batch, "two_phase": two_phase, "express": express, "seconds": round(elapsed, 3),
        "received": got, "msgs_per_s": round((got or messages) / elapsed),
        "mb_per_s": round((got or messages) * size / elapsed / 1e6, 2),
        "latency_ms": {"p50": pct(0.50), "p90": pct(0.90), "p99": pct(0.99), "max": pct(1.0),
                       "mean": round(statistics.fmean(lat) * 1000, 3) if lat else None},
        "store": "scratch" if scratch else path,
    }
    s.out.document(doc, [
        ("run", f"{producers} producer(s), {consumers} consumer(s), {messages:,} × {size} B, batch {batch}"
                + (", two-phase" if two_phase else "") + (", express" if express else "")),
        ("throughput", f"{doc['msgs_per_s']:,} msg/s  {doc['mb_per_s']} MB/s  in {doc['seconds']} s"),
        ("latency ms", "  ".join(f"{k} {v}" for k, v in doc["latency_ms"].items())),
    ])


def register(app: typer.Typer) -> None:
    app.command()(bench)
