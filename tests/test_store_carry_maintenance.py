"""What a write carries to this process's next one besides the meta records (store/write.py
`Carry`): whether any process holds messages, the soonest lease, expiry or transaction
deadline (so a write with nothing due reads no deadline index), and the msg_id run found last
(identity.release). None of them may hide work that is due or leave an index wrong: a deadline
this process wrote in a carried write is met on time, and another process's write in between
is seen."""

import subprocess
import sys
import time

import pytest

from store import NewMessage, Store, errors


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _open(tmp_path, clock: Clock) -> Store:
    st = Store.open(tmp_path / "s", create=True, clock=clock)
    st.create_queue("q")
    return st


def _in_another_process(tmp_path, code: str) -> str:
    """Run `code` with `st` open on the store, in a process of its own; what it printed."""
    program = f"from store import Store\nst = Store.open({str(tmp_path / 's')!r})\n{code}\nst.close()\n"
    return subprocess.run([sys.executable, "-c", program], check=True, capture_output=True, text=True,
                          timeout=60).stdout


def _depth_as_is(st: Store) -> int:
    """The queue's depth as the last write left it: no maintenance runs for the read."""
    with st.as_is():
        return st.queue_info("q").depth


def test_a_lease_written_in_a_carried_write_lapses_on_time(tmp_path):
    clock = Clock()
    st = _open(tmp_path, clock)
    for body in (b"a", b"b"):
        st.put("q", body)
    c = st.consumer("q", lease=10)
    got = c.next(wait=0)  # its lease deadline is written by this process, in a carried write
    st.put("q", b"c")
    with st.as_is():
        assert [m.body for m in st.inflight("q")] == [b"a"]
    clock.now += 11
    st.put("q", b"d")  # this write's maintenance must lapse the lease
    with st.as_is():
        assert st.inflight("q") == []
        assert [(m.body, m.backouts) for m in st.browse("q")][:1] == [(b"a", 1)]
    assert got.body == b"a"
    assert st.check() == []
    st.close()


@pytest.mark.parametrize("writer", ["this process, in a carried write", "another process, between"])
def test_an_expiry_is_met_whoever_wrote_it(tmp_path, writer):
    clock = Clock()
    st = _open(tmp_path, clock)
    st.put("q", b"first")  # carries: nothing due, no deadline at all
    if writer.startswith("this"):
        st.put("q", b"short", ttl=5)
    else:  # the next write of this process reads the deadline index
        _in_another_process(tmp_path, "st.put('q', b'short', ttl=5)")
    st.put("q", b"more")
    clock.now += 60
    st.put("q", b"last")  # the short one expires in this write
    assert _depth_as_is(st) == 3
    assert st.queue_stats("q").totals["expired"] == 1
    st.close()


def test_a_transaction_timeout_written_in_a_carried_write_is_met(tmp_path):
    clock = Clock()
    st = _open(tmp_path, clock)
    st.create_queue("tq", transactional=True)
    st.put("q", b"x")
    tx = st.tx_begin(timeout=5)
    st.put("tq", b"in the transaction", tx=tx)
    st.put("q", b"y")
    clock.now += 6
    st.put("q", b"z")  # the transaction times out (aborted) in this write
    with st.as_is():
        assert st.tx_list() == []
        assert st.queue_info("tq").depth == 0
    st.close()


def test_runs_released_through_a_consumer_with_another_process_between(tmp_path):
    clock = Clock()
    st = _open(tmp_path, clock)
    st.put_many("q", [NewMessage(b"%d" % i) for i in range(6)])  # one msg_id run
    st.put_many("q", [NewMessage(b"%d" % i) for i in range(6, 9)])  # another
    ids = {}
    with st.consumer("q") as c:
        for _ in range(4):
            m = c.next(wait=0)
            ids[m.body] = m.msg_id
            c.confirm(m)
        out = _in_another_process(tmp_path, "print(st.get('q', wait=0).body.decode())")
        assert out.strip() == "4"  # the other process got the run's fifth message
        while (m := c.next(wait=0)) is not None:
            ids[m.body] = m.msg_id
            c.confirm(m)
    assert sorted(ids) == [b"0", b"1", b"2", b"3", b"5", b"6", b"7", b"8"]
    assert st.queue_info("q").depth == 0
    assert st.check() == []  # every run went with its last message: no index entry is left
    st.put("q", b"again")
    assert st.browse("q", msg_id=ids[b"5"]) == []
    assert st.check() == []
    st.close()


def test_queue_changes_made_by_this_process_are_seen_by_its_next_write(tmp_path):
    st = _open(tmp_path, Clock())
    st.put("q", b"x" * 10)  # the queue's record is carried to the next write
    st.set_queue("q", quota=15)
    with pytest.raises(errors.QueueQuotaExceeded):
        st.put("q", b"y" * 10)
    st.delete_queue("q")
    with pytest.raises(errors.QueueNotAvailable):
        st.put("q", b"gone")
    st.create_queue("q")
    st.put("q", b"new")
    assert st.queue_info("q").depth == 1
    assert st.queue_info("q").quota == 0
    assert st.check() == []
    st.close()


def test_a_queue_another_process_changed_in_between_is_read_again(tmp_path):
    st = _open(tmp_path, Clock())
    st.put("q", b"x" * 10)
    _in_another_process(tmp_path, "st.set_queue('q', quota=15)")
    with pytest.raises(errors.QueueQuotaExceeded):
        st.put("q", b"y" * 10)
    st.close()
