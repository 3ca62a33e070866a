"""Many real processes on one store: 4 producers and 4 consumers, 20,000 messages.

Checks exactly-once delivery and FIFO within a priority. With several consumers there is no
global order, but every get takes the head of the queue and no message ever returns to the
queue (two-phase gets are always confirmed, never undone), so each consumer must see the
messages of one producer at one priority in increasing sequence order.
"""

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from store import Store

WORKERS = Path(__file__).parent / "workers"
PRODUCERS = 4
CONSUMERS = 4
PER_PRODUCER = 5_000
QUEUE = "conc"
PRODUCER_TIMEOUT = 240.0  # seconds for all producers to finish (a hang guard, not a threshold)
CONSUMER_TIMEOUT = 120.0  # seconds for consumers to drain after the producers are done


def _spawn(args, log: Path) -> subprocess.Popen:
    err = open(log, "wb")
    try:
        return subprocess.Popen([sys.executable, *map(str, args)], stdin=subprocess.DEVNULL,
                                stdout=err, stderr=subprocess.STDOUT)
    finally:
        err.close()


def _wait_all(procs, names, deadline, logs):
    for p, name, log in zip(procs, names, logs):
        left = max(0.1, deadline - time.monotonic())
        try:
            rc = p.wait(timeout=left)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name} still running at its deadline (hang?); log: {log.read_text()!r}")
        assert rc == 0, f"{name} exited {rc}: {log.read_text()!r}"


@pytest.mark.slow
def test_four_producers_four_consumers_exactly_once_fifo(tmp_path):
    path = tmp_path / "store"
    with Store.open(path, create=True) as st:
        st.create_queue(QUEUE)
    done_flag = tmp_path / "producers-done"
    modes = ["destructive", "twophase", "destructive", "twophase"]
    outs = [tmp_path / f"consumer-{i}.out" for i in range(CONSUMERS)]
    clogs = [tmp_path / f"consumer-{i}.log" for i in range(CONSUMERS)]
    plogs = [tmp_path / f"producer-{i}.log" for i in range(PRODUCERS)]
    procs = []
    try:
        consumers = [
            _spawn([WORKERS / "consumer.py", path, QUEUE, i, modes[i], done_flag, outs[i],
                    1000 + i, PRODUCER_TIMEOUT + CONSUMER_TIMEOUT + 30], clogs[i])
            for i in range(CONSUMERS)
        ]
        procs += consumers
        producers = [
            _spawn([WORKERS / "producer.py", path, QUEUE, i, PER_PRODUCER, 2000 + i], plogs[i])
            for i in range(PRODUCERS)
        ]
        procs += producers
        _wait_all(producers, [f"producer {i}" for i in range(PRODUCERS)],
                  time.monotonic() + PRODUCER_TIMEOUT, plogs)
        done_flag.touch()
        _wait_all(consumers, [f"consumer {i} ({modes[i]})" for i in range(CONSUMERS)],
                  time.monotonic() + CONSUMER_TIMEOUT, clogs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)

    seen = Counter()
    per_consumer = []
    for i, out in enumerate(outs):
        lines = out.read_text().splitlines()
        per_consumer.append(len(lines))
        last = {}  # (producer, priority) -> last sequence number this consumer received
        for n, line in enumerate(lines):
            body, got_prio = line.split(" ")
            producer, seq, prio = map(int, body.split(":"))
            assert int(got_prio) == prio, f"consumer {i} line {n}: {line!r} priority mismatch"
            key = (producer, prio)
            assert seq > last.get(key, -1), (
                f"consumer {i} ({modes[i]}) got producer {producer} priority {prio} seq {seq} "
                f"after seq {last[key]} (line {n}): FIFO within priority broken")
            last[key] = seq
            seen[(producer, seq)] += 1

    dups = {k: v for k, v in seen.items() if v > 1}
    assert not dups, f"{len(dups)} messages delivered more than once, e.g. {list(dups)[:5]}"
    expected = {(p, s) for p in range(PRODUCERS) for s in range(PER_PRODUCER)}
    missing = expected - set(seen)
    assert not missing, f"{len(missing)} messages lost, e.g. {sorted(missing)[:5]}"
    assert set(seen) == expected
    assert sum(per_consumer) == PRODUCERS * PER_PRODUCER
    print(f"messages per consumer ({', '.join(modes)}): {per_consumer}")

    with Store.open(path) as st:
        assert st.browse(QUEUE, states="all") == []
        assert st.queue_info(QUEUE).depth == 0
        assert st.check() == []
