"""Filters pushed into the `mqstore` source (store/analytics/pushdown.py): a `.where` on queue,
priority, state, class and put_time reads only the key ranges it needs (counted by the source's
`readLog`) and gives the same rows as the same query with pushdown off."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from store import Message, Store

pytestmark = pytest.mark.spark

START_US = 1_800_000_000_000_000
PER_QUEUE = 60
QUEUES = [f"q{i:02d}" for i in range(19)] + ["orders"]


def _store(path):
    with Store.open(path, create=True, name="qm1") as st:
        for qi, name in enumerate(QUEUES):
            st.create_queue(name)
            st.import_messages(name, [
                Message(body=b"%s-%d" % (name.encode(), i), origin=b"\x01" * 16, msg_n=qi * 1000 + i + 1,
                        put_time=START_US + i * 1_000_000, priority=i % 8, report=i % 3 == 0)
                for i in range(PER_QUEUE)])
        st.get_many("orders", 5, confirm_id=9)  # in flight: the msg table


def _read(spark, path, log, where, pushdown=True):
    df = (spark.read.format("mqstore").option("readLog", str(log)).option("partitions", "8")
          .option("pushdown", str(pushdown).lower()).load(str(path)).where(where))
    return sorted((r["queue"], r["seq"], r["state"], r["priority"]) for r in df.collect())


def _log(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_where_queue_and_put_time_reads_only_that_queues_ranges(spark, tmp_path):
    _store(tmp_path / "qm")
    after = datetime.fromtimestamp((START_US + 40 * 1_000_000) / 1e6, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    where = f"queue = 'orders' AND put_time > TIMESTAMP '{after}'"
    plain = _read(spark, tmp_path / "qm", tmp_path / "plain.log", where, pushdown=False)
    pushed = _read(spark, tmp_path / "qm", tmp_path / "pushed.log", where)
    assert pushed == plain
    assert len(plain) == PER_QUEUE - 41 and {q for q, *_ in plain} == {"orders"}
    everything = _log(tmp_path / "plain.log")
    assert {q for r in everything for q in r["queues"]} >= set(QUEUES)
    assert sum(r["rows"] for r in everything) == len(QUEUES) * PER_QUEUE
    read = _log(tmp_path / "pushed.log")
    assert read and all(r["queues"] == ["orders"] for r in read)
    assert sum(r["rows"] for r in read) == len(pushed)  # only passing rows reach Spark


def test_priority_state_and_class_narrow_the_read_to_the_same_rows(spark, tmp_path):
    _store(tmp_path / "qm")
    for i, where in enumerate([
        "priority >= 6 AND queue IN ('orders', 'q03')",
        "state = 'available' AND priority = 2",
        "class = 'report' AND state = 'get-unconfirmed'",
        "queue = 'nowhere'",
        "priority > 7",
    ]):
        plain = _read(spark, tmp_path / "qm", tmp_path / f"plain{i}.log", where, pushdown=False)
        pushed = _read(spark, tmp_path / "qm", tmp_path / f"pushed{i}.log", where)
        assert pushed == plain, where
        log = tmp_path / f"pushed{i}.log"
        read = _log(log) if log.exists() else []
        assert sum(r["rows"] for r in read) == len(pushed), where
    # a priority window is a key range of each queue: nothing below it is read
    read = _log(tmp_path / "pushed0.log")
    assert {q for r in read for q in r["queues"]} == {"orders", "q03"}
    # available only: the in-flight table is not read
    assert all(r["table"] == "pos" for r in _log(tmp_path / "pushed1.log"))
    assert not (tmp_path / "pushed3.log").exists() and not (tmp_path / "pushed4.log").exists()
