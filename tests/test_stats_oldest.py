"""A queue's oldest message, as `stats`, `stats --prometheus` and `health --age` give it: the
earliest put time among all its messages, in any state (as `depth` counts them, and as
`analyze health` takes the minimum over every message), wherever the message waits in
delivery order: behind a younger one of a higher priority, or imported, replayed or moved
behind younger ones of its own priority (store/queue_counters.py: the put order)."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as hs
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from store import Store
from store.records import Message, iso_time, parse_iso_time

HOUR = 3600.0


def put_at(cli, when: float, body: str, priority: int, queue: str = "q") -> None:
    with Store.open(cli.store, clock=lambda: when) as st:
        st.put(queue, body.encode(), priority=priority)


def stats_row(cli, queue: str = "q") -> dict:
    return next(r for r in cli.json("stats") if r["queue"] == queue)


def put_times(cli, queue: str = "q") -> dict[str, str]:
    """Body → put time of the queue's messages, in queue order (dicts keep it)."""
    return {r["body"]: r["put_time"] for r in cli.jsonl("browse", queue, "--state", "all")}


def iso_seconds(text: str) -> float:
    return parse_iso_time(text) / 1e6


def old_message_from_elsewhere(tmp_path: Path, when: float, priority: int) -> str:
    """A dump (`export`) of one message "old" put at `when` in another queue manager."""
    from cli_helpers import Cli

    other = Cli(tmp_path / "elsewhere", tmp_path / "xdg-elsewhere")
    other.ok("init", "-q")
    other.ok("queue", "create", "q", "-q")
    put_at(other, when, "old", priority)
    return other.ok("export", "q").out


def bring_in(cli, how: str, dump: str) -> None:
    if how == "import":
        cli.ok("import", "-", input=dump)
    else:  # a replay of the records, as `get -o jsonl | put --jsonl` does
        records = "".join(line + "\n" for line in dump.splitlines() if '"msg_id"' in line)
        cli.ok("put", "q", "--jsonl", "-", input=records)


def test_the_oldest_is_a_lower_priority_message_waiting_behind_the_head(cli):
    now = time.time()
    put_at(cli, now - HOUR, "a", priority=0)
    put_at(cli, now - 60, "b", priority=7)
    times = put_times(cli)
    assert list(times) == ["b", "a"]  # a waits behind b, the head
    assert stats_row(cli)["oldest"] == times["a"]


@pytest.mark.parametrize("how", ["import", "put --jsonl"])
def test_the_oldest_is_a_message_brought_in_with_its_put_time_behind_younger_ones(cli, tmp_path, how):
    now = time.time()
    dump = old_message_from_elsewhere(tmp_path, now - HOUR, priority=3)
    put_at(cli, now - 60, "new", priority=3)
    bring_in(cli, how, dump)
    times = put_times(cli)
    assert list(times) == ["new", "old"]  # same priority: it joined the end, keeping its put time
    assert times["old"] < times["new"]
    assert stats_row(cli)["oldest"] == times["old"]
    cli.ok("get", "q", "-q")  # "new" goes: the head is the oldest again
    assert stats_row(cli)["oldest"] == times["old"]


def test_prometheus_age_and_health_age_agree_with_stats(cli, tmp_path):
    now = time.time()
    dump = old_message_from_elsewhere(tmp_path, now - HOUR, priority=3)
    put_at(cli, now - 60, "new", priority=3)
    put_at(cli, now - 30, "urgent", priority=7)
    bring_in(cli, "import", dump)
    oldest = stats_row(cli)["oldest"]
    assert oldest == put_times(cli)["old"]
    put_s = iso_seconds(oldest)

    before = time.time()
    metrics = cli.ok("stats", "--prometheus").out
    after = time.time()
    (line,) = [x for x in metrics.splitlines() if x.startswith('mqcli_queue_oldest_message_age_seconds{queue="q"}')]
    gauge = float(line.split()[-1])
    assert before - put_s <= gauge <= after - put_s  # the same message's age, at the scrape

    before = time.time()
    health = cli("health", "q", "--age", "30m:2h", "-o", "json")
    after = time.time()
    assert health.code == 1, health  # WARNING: the imported message is an hour old
    doc = health.json()
    assert doc["state"] == "WARNING" and doc["summary"].startswith("q age ")
    (age,) = [c for c in doc["checks"] if c["label"] == "q age"]
    assert before - put_s - 0.0005 <= age["value"] <= after - put_s + 0.0005  # rounded to ms


def test_the_oldest_counts_a_message_in_flight(cli, tmp_path):
    now = time.time()
    dump = old_message_from_elsewhere(tmp_path, now - HOUR, priority=3)
    put_at(cli, now - 60, "new", priority=3)
    bring_in(cli, "import", dump)
    old = put_times(cli)["old"]
    cli.ok("get", "q", "--all", "--confirm-id", "5", "-q")  # both held, unconfirmed
    row = stats_row(cli)
    assert (row["available"], row["get-unconfirmed"], row["oldest"]) == (0, 2, old)
    cli.ok("undo", "q", "--confirm-id", "5", "-q")
    assert stats_row(cli)["oldest"] == old


def test_times_ahead_of_this_clock_are_0_old_in_every_output(cli, tmp_path):
    # a store written on a host whose clock was a day ahead, read with the right clock: every
    # output gives the same age, 0, as text, Prometheus and health do (render.age_seconds)
    ahead = time.time() + 86400
    key = tmp_path / "qm2.key"
    cli.ok("link", "keygen", str(key))
    cli.ok("link", "add", "qm2", "127.0.0.1:7000", "--key-file", str(key))
    with Store.open(cli.store, clock=lambda: ahead) as st:
        st.put("q", b"held")
        st.get("q", confirm_id=7)  # in flight since a time ahead
        st.create_queue("t", transactional=True)
        tx = st.tx_begin()
        st.put("t", b"in a tx", tx=tx)
        st.put("DIRECT=OS:qm2\\orders", b"out")
    row = stats_row(cli)
    assert (row["oldest_age_s"], row["age"]) == (0.0, "0s")
    held = [m for m in cli.json("inflight") if m["state"] == "get-unconfirmed"]
    assert [(m["age_s"], m["age"]) for m in held] == [(0.0, "0s")]
    (listed,) = cli.json("tx", "list")
    assert (listed["age_s"], listed["age"]) == (0.0, "0s")
    assert cli.json("tx", "show", str(tx))["age_s"] == 0.0
    (out,) = cli.json("outgoing", "list")
    assert (out["oldest_age_s"], out["oldest_age"]) == (0.0, "0s")
    metrics = cli.ok("stats", "--prometheus").out
    (line,) = [x for x in metrics.splitlines() if x.startswith('mqcli_queue_oldest_message_age_seconds{queue="q"}')]
    assert float(line.split()[-1]) == 0
    (check,) = [c for c in cli.json("health", "q")["checks"] if c["label"] == "q age"]
    assert check["value"] == 0


def foreign(put_time: int, n: int, priority: int = 3) -> Message:
    """A message of another queue manager, as an import brings it."""
    return Message(b"imported", priority=priority, origin=b"\x42" * 16, msg_n=n, put_time=put_time)


# ---- against a model ---------------------------------------------------------------------------

START = 1_700_000_000.0
US = 1_000_000
QUEUES = ("q", "r")


class OldestMachine(RuleBasedStateMachine):
    """Puts, imports with put times before and after the newest, gets, two-phase gets undone or
    confirmed, and moves between two queues, against a model of each queue's messages: after
    every step each queue's oldest put time is the model's minimum over all its messages."""

    @initialize()
    def open_store(self) -> None:
        self.dir = Path(tempfile.mkdtemp())
        self.now = START
        self.st = Store.open(self.dir / "qm", create=True, name="qm1", clock=lambda: self.now)
        for q in QUEUES:
            self.st.create_queue(q)
        self.model: dict[str, dict[str, tuple[int, int, int]]] = {q: {} for q in QUEUES}  # msg_id -> (priority, order, put time)
        self.held: dict[int, tuple[str, str]] = {}  # confirm id -> (queue, msg_id)
        self.order = 0
        self.n = 0
        self.steps = 0

    def teardown(self) -> None:
        if hasattr(self, "st"):
            try:
                assert self.st.check() == []
            finally:
                self.st.close()
                shutil.rmtree(self.dir, ignore_errors=True)

    def arrive(self, q: str, m: Message) -> None:
        self.order += 1
        self.model[q][m.msg_id] = (m.priority, self.order, m.put_time)

    def next_of(self, q: str) -> str:
        held = {msg_id for queue, msg_id in self.held.values() if queue == q}
        waiting = [(-p, order, msg_id) for msg_id, (p, order, _) in self.model[q].items() if msg_id not in held]
        return min(waiting)[2]

    def available(self, q: str) -> int:
        return len(self.model[q]) - sum(1 for queue, _ in self.held.values() if queue == q)

    @rule(q=hs.sampled_from(QUEUES), priority=hs.integers(0, 7), step=hs.sampled_from([0.0, 0.5, 60.0]))
    def put(self, q: str, priority: int, step: float) -> None:
        self.now += step
        self.arrive(q, self.st.put(q, b"p", priority=priority))

    @rule(q=hs.sampled_from(QUEUES), priority=hs.integers(0, 7), age=hs.sampled_from([-30.0, 0.0, 1.0, HOUR]))
    def import_one(self, q: str, priority: int, age: float) -> None:
        self.n += 1
        (m,) = self.st.import_messages(q, [foreign(int((self.now - age) * US), self.n, priority)])
        self.arrive(q, m)

    @precondition(lambda self: any(self.available(q) for q in QUEUES))
    @rule(data=hs.data())
    def get(self, data: hs.DataObject) -> None:
        q = data.draw(hs.sampled_from([q for q in QUEUES if self.available(q)]))
        expected = self.next_of(q)
        assert self.st.get(q, wait=0).msg_id == expected
        del self.model[q][expected]

    @precondition(lambda self: any(self.available(q) for q in QUEUES))
    @rule(data=hs.data())
    def get_unconfirmed(self, data: hs.DataObject) -> None:
        q = data.draw(hs.sampled_from([q for q in QUEUES if self.available(q)]))
        cid = 1 + max(self.held, default=0)
        expected = self.next_of(q)
        assert self.st.get(q, wait=0, confirm_id=cid).msg_id == expected
        self.held[cid] = (q, expected)

    @precondition(lambda self: self.held)
    @rule(data=hs.data(), confirm=hs.booleans())
    def finish(self, data: hs.DataObject, confirm: bool) -> None:
        cid = data.draw(hs.sampled_from(sorted(self.held)))
        q, msg_id = self.held.pop(cid)
        if confirm:
            self.st.confirm(q, cid)
            del self.model[q][msg_id]
        else:
            self.st.undo(q, confirm_id=cid)

    @precondition(lambda self: any(self.available(q) for q in QUEUES))
    @rule(data=hs.data())
    def move(self, data: hs.DataObject) -> None:
        src = data.draw(hs.sampled_from([q for q in QUEUES if self.available(q)]))
        dst = next(q for q in QUEUES if q != src)
        expected = self.next_of(src)
        (moved,) = [m for batch in self.st.move(src, dst, count=1) for m in batch]
        assert moved.msg_id == expected
        del self.model[src][expected]
        self.arrive(dst, replace(moved, queue=dst))

    @invariant()
    def oldest_is_the_earliest_put_time(self) -> None:
        if not hasattr(self, "st"):
            return
        for s in self.st.stats():
            if s.name in QUEUES:
                expected = min((put for _, _, put in self.model[s.name].values()), default=None)
                assert s.oldest_put_time == expected, (s.name, iso_time(expected) if expected else None)
        self.steps += 1
        if self.steps % 10 == 0:
            assert self.st.check() == []


OldestMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_the_oldest_against_a_model = OldestMachine.TestCase

