"""The put order of a queue's priorities (store/queue_counters.py) that lets `stats` find a
queue's oldest message from the first of each priority: kept by every enqueue, reset when a
priority empties, verified by `check`, found once for counters written before it was kept; and
the record header read that walks a priority out of put order (records.put_time_of)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from store import Store
from store.errors import BadData
from store.queue_counters import SIZE, QueueCounters, counters_key
from store.records import Message, decode, encode, iso_time, put_time_of

HOUR = 3600.0


def foreign(put_time: int, n: int, priority: int = 3) -> Message:
    """A message of another queue manager, as an import brings it."""
    return Message(b"imported", priority=priority, origin=b"\x42" * 16, msg_n=n, put_time=put_time)


def stored_counters(st: Store, queue: str = "q") -> QueueCounters:
    qid = st.queue_info(queue).qid
    with st._env.begin() as lt:
        raw = lt.get(counters_key(qid), db=st._dbs["meta"])
        assert raw is not None and len(raw) == SIZE
        return QueueCounters.decode(bytes(raw))


def store_counters(st: Store, c: QueueCounters, queue: str = "q") -> None:
    qid = st.queue_info(queue).qid
    with st._env.begin(write=True) as lt:
        lt.put(counters_key(qid), c.encode(), db=st._dbs["meta"])


def test_a_priority_is_in_put_order_again_once_it_is_empty(st, clock):
    st.put("q", b"a")
    clock.advance(60)
    st.put("q", b"b")
    assert stored_counters(st).in_put_order(3)
    (old,) = st.import_messages("q", [foreign(int((clock.now - HOUR) * 1e6), 1)])
    c = stored_counters(st)
    assert not c.in_put_order(3) and c.in_put_order(0)
    assert st.queue_stats("q").oldest_put_time == old.put_time
    st.get_many("q", 3)
    clock.advance(1)
    st.put("q", b"c")  # the first of an empty priority: in put order again, no walk for it
    assert stored_counters(st).in_put_order(3)
    assert st.queue_stats("q").oldest_put_time == int(clock.now * 1e6)


def test_check_finds_a_priority_called_in_put_order_that_is_not(st, clock):
    st.put("q", b"a")
    st.import_messages("q", [foreign(int((clock.now - HOUR) * 1e6), 1)])
    c = stored_counters(st)
    store_counters(st, replace(c, out_of_order=0))  # as a flipped bit may leave them
    assert st.check() == [
        "queue 'q': counters say priority 3 is in put order, but message seq 2 was put before a message ahead of it"]
    store_counters(st, replace(c, out_of_order=0, latest_put=[0] * 8))
    st.get("q", wait=0)  # "a": the priority is in put order, but its latest put time is wrong
    assert st.check() == [
        f"queue 'q': counters say the latest put time at priority 3 is {iso_time(0)}, "
        f"found {iso_time(int((clock.now - HOUR) * 1e6))}"]
    store_counters(st, replace(stored_counters(st), out_of_order=1 << 3))  # repaired, for the fixture's check


def test_counters_written_before_the_put_order_was_kept_find_it_once(st, clock):
    st.put("q", b"new")
    (old,) = st.import_messages("q", [foreign(int((clock.now - HOUR) * 1e6), 1)])
    qid = st.queue_info("q").qid
    with st._env.begin(write=True) as lt:  # the 20 counts alone, as an older mqcli wrote them
        raw = bytes(lt.get(counters_key(qid), db=st._dbs["meta"]))
        lt.put(counters_key(qid), raw[:20 * 8], db=st._dbs["meta"])
    assert st.check() == []  # a layout of its own, not damage
    assert st.queue_stats("q").oldest_put_time == old.put_time  # found by a walk
    clock.advance(1)
    st.put("q", b"newer")  # the first write rewrites the entry, with the order found
    c = stored_counters(st)
    assert not c.in_put_order(3) and c.latest_put[3] == int(clock.now * 1e6)
    assert c.by_priority[3] == c.put_messages == 3  # the cumulative counts are kept


def test_a_records_put_time_is_read_from_its_header(st):
    m = st.put("q", b"x" * 10, label="l", correl_id="c", props={"k": "v"})
    (found,) = st.browse("q")
    record = encode(found)
    assert put_time_of(record) == decode(record).put_time == m.put_time
    with pytest.raises(BadData, match="record format 9 is not known"):
        put_time_of(bytes([9]) + record[1:])
