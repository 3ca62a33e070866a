"""python -m bench channel: store-and-forward over loopback, end to end.

One measurement (a round), each in fresh stores:

- untimed set-up: stores qmA and qmB (queue q), a key file, a real `mqcli listen` on qmB
  (127.0.0.1, a free port, waited for until it prints its ready line), `mqcli link add qmB`
  on qmA, and N recoverable 256-byte messages put on qmA to `DIRECT=OS:qmB\\q` with the store
  library (1,000 a commit), so they wait in qmA's outgoing queue;
- timed: `mqcli dispatch --once` as a whole process, from just before it is started until it
  exits (`os.wait4`). It exits after the listener acknowledged the last batch, and the listener
  acknowledges a batch only after its durable commit: at exit every message is committed in
  qmB. Rate = N / that time (start-up of the dispatch process included);
- untimed check: qmB's queue holds N messages and qmA's outgoing queue none; the dispatcher
  reported N messages, 0 duplicates. The CPU seconds of both processes (os.wait4 for the
  dispatcher, /proc/<pid>/stat for the listener) show which side is the bottleneck.

Context, same stores' code without the network: the library alone doing take → receive →
done in one process, one batch at a time (the store work the channel cannot avoid, serialised).

Target: >= 50,000 messages/s (median over rounds) for 200,000 messages.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join("bench", "results", "channel.json")
BODY = (b"mqcli-bench-256-byte-body/" * 10)[:256]  # the store suite's body
DEST = "DIRECT=OS:qmB\\q"
TARGET_RATE = 50_000
assert len(BODY) == 256


def add_arguments(p) -> None:
    g = p.add_argument_group("channel suite")
    g.add_argument("--channel-messages", type=_positive, metavar="N",
                   help="messages sent per round (default 200,000; quick: 20,000)")
    g.add_argument("--channel-batch", type=_positive, metavar="N",
                   help="messages per batch, `dispatch --batch` (default 1,000)")
    g.add_argument("--channel-rounds", type=_positive, metavar="R",
                   help="rounds, each in fresh stores; the median is reported (default 3; quick: 1)")


def _positive(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def mqcli_path() -> str:
    return os.path.join(os.path.dirname(sys.executable), "mqcli")


def _cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class _Listener:
    def __init__(self, store: str, key: str, env: dict) -> None:
        self.proc = subprocess.Popen([mqcli_path(), "--store", store, "listen", "--bind", "127.0.0.1:0",
                                      "--key-file", key, "-q"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=env)
        self.port = 0
        self.lines: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert self.proc.stderr is not None
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip()
                self.lines.append(line)
                m = re.match(r"listening on \S+:(\d+)$", line)
                if m:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(60) or not self.port:
            self.stop()
            raise RuntimeError(f"the listener did not start: {self.lines}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


def _fill(path: str, n: int) -> None:
    from store import NewMessage, Store

    with Store.open(path) as st:
        left = n
        while left:
            k = min(1000, left)
            st.put_many(DEST, [NewMessage(BODY) for _ in range(k)])
            left -= k


def one_round(tmp: str, n: int, batch: int, env: dict) -> dict:
    from store import Store
    from store.links import generate_key_file

    a, b, key = os.path.join(tmp, "a"), os.path.join(tmp, "b"), os.path.join(tmp, "k.key")
    Store.create(a, name="qmA").close()
    with Store.create(b, name="qmB") as st:
        st.create_queue("q")
    generate_key_file(key)
    listener = _Listener(b, key, env)
    try:
        with Store.open(a) as st:
            st.add_link("qmB", f"127.0.0.1:{listener.port}", key)
        _fill(a, n)
        listener_cpu0 = _cpu_seconds(listener.proc.pid)
        out = tempfile.TemporaryFile(dir=tmp)
        err = tempfile.TemporaryFile(dir=tmp)
        t0 = time.perf_counter()
        proc = subprocess.Popen([mqcli_path(), "--store", a, "-o", "json", "dispatch", "--once",
                                 "--batch", str(batch)], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        listener_cpu1 = _cpu_seconds(listener.proc.pid)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"dispatch --once exited {proc.returncode}: {err.read().decode()[-2000:]}")
        [result] = json.loads(out.read())
        with Store.open(b) as st:
            arrived = st.queue_info("q").depth
        with Store.open(a) as st:
            left = st.outgoing_show(DEST).messages
        if arrived != n or left or result["messages"] != n or result["duplicates"]:
            raise RuntimeError(f"transfer incomplete: {arrived} of {n} arrived, {left} left, {result}")
        return {
            "messages": n, "seconds": seconds, "msgs_per_s": n / seconds,
            "batches": result["batches"], "dispatcher_seconds": result["seconds"],
            "dispatch_cpu_s": usage.ru_utime + usage.ru_stime,
            "listen_cpu_s": None if listener_cpu0 is None or listener_cpu1 is None else listener_cpu1 - listener_cpu0,
        }
    finally:
        listener.stop()


def library_round(tmp: str, n: int, batch: int) -> dict:
    """Context: the store work of the same transfer in one process, no network, serialised."""
    from store import Store
    from store.links import generate_key_file

    a, b, key = os.path.join(tmp, "la"), os.path.join(tmp, "lb"), os.path.join(tmp, "lk.key")
    generate_key_file(key)
    with Store.create(a, name="qmA") as sa, Store.create(b, name="qmB") as sb:
        sb.create_queue("q")
        sa.add_link("qmB", "127.0.0.1:9", key)
        origin = sa.info().guid
    _fill(a, n)
    take = receive = done = 0.0
    with Store.open(a) as sa, Store.open(b) as sb:
        while True:
            t0 = time.perf_counter()
            taken = sa.outgoing_take(DEST, batch, 4 << 20)
            t1 = time.perf_counter()
            take += t1 - t0
            if taken is None:
                break
            sb.receive(origin, taken.items, taken.incarnation, taken.sent_at)
            t2 = time.perf_counter()
            sa.outgoing_done(DEST, taken.token)
            t3 = time.perf_counter()
            receive += t2 - t1
            done += t3 - t2
        assert sb.queue_info("q").depth == n
    total = take + receive + done
    return {"messages": n, "msgs_per_s": n / total, "take_per_s": n / take,
            "receive_per_s": n / receive, "done_per_s": n / done}


def run(args, tmp_root: str, info: dict, log) -> dict:
    from . import report

    n = args.channel_messages or (20_000 if args.quick else 200_000)
    batch = args.channel_batch or 1000
    rounds = args.channel_rounds or (1 if args.quick else 3)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("MQCLI_STORE", None)
    t_start = time.perf_counter()
    results, context = [], []
    for r in range(rounds):
        tmp = tempfile.mkdtemp(prefix=f"round{r}-", dir=tmp_root)
        try:
            res = one_round(tmp, n, batch, env)
            results.append(res)
            log(f"round {r + 1}/{rounds}: {n:,} messages in {res['seconds']:.2f} s = "
                f"{res['msgs_per_s']:,.0f} msg/s (CPU: dispatch {res['dispatch_cpu_s']:.1f} s, "
                f"listen {res['listen_cpu_s'] or 0:.1f} s)")
            ctx = library_round(tmp, n, batch)
            context.append(ctx)
            log(f"  context, library alone: {ctx['msgs_per_s']:,.0f} msg/s (take {ctx['take_per_s']:,.0f}, "
                f"receive {ctx['receive_per_s']:,.0f}, done {ctx['done_per_s']:,.0f})")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    rate = statistics.median(r["msgs_per_s"] for r in results)
    info = report.finished(info)
    notes = report.dirty_notes(info) + report.memory_fs_notes(info, "stores", "")
    if n != 200_000:
        notes.append(f"{n:,} messages per round, not the target's 200,000")
    notes += report.busy_notes(info, "the two processes waited for CPU, and rates are lower than on an "
                                     "idle machine; compare each round's wall time with its processes' CPU seconds")
    return {
        "suite": "channel",
        "machine": info,
        "parameters": {"messages": n, "batch": batch, "rounds": rounds, "body_bytes": len(BODY),
                       "delivery": "recoverable", "window": 2, "transport": "TCP 127.0.0.1",
                       "elapsed_s": time.perf_counter() - t_start},
        "results": {"dispatch_once": {"msgs_per_s": rate, "msgs_per_s_rounds": [r["msgs_per_s"] for r in results],
                                      "rounds": results},
                    "library_context": {"msgs_per_s": statistics.median(c["msgs_per_s"] for c in context),
                                        "rounds": context}},
        "target": {"what": "dispatch --once of 200,000 recoverable 256-byte messages over loopback, "
                           "start to exit (= all committed at the receiver), median msgs/s",
                   "min_rate": TARGET_RATE, "rate": rate, "met": rate >= TARGET_RATE},
        "notes": notes,
    }


def render(doc: dict) -> str:
    p, res, t = doc["parameters"], doc["results"], doc["target"]
    lines = [f"channel: {p['messages']:,} recoverable {p['body_bytes']}-byte messages qmA -> qmB over "
             f"{p['transport']}, batches of {p['batch']}, {p['rounds']} round(s)",
             "",
             f"{'measurement':<44} {'msg/s':>10}",
             f"{'dispatch --once, start to exit (median)':<44} {res['dispatch_once']['msgs_per_s']:>10,.0f}",
             f"{'  context: library take/receive/done, 1 proc':<44} {res['library_context']['msgs_per_s']:>10,.0f}",
             "",
             f"target >= {t['min_rate']:,} msg/s: {'met' if t['met'] else 'MISSED'}"]
    lines += [f"note: {n}" for n in doc["notes"]]
    return "\n".join(lines)


def main(args, log) -> int:
    from . import report

    doc = report.run_suite(args, "channel", run, render, DEFAULT_OUT, REPO, log)
    return 1 if (args.check and not doc["target"]["met"]) else 0
