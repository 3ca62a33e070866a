"""Transactions that span invocations ([MS-MQDMPR] 3.1.7.1.9 and 3.1.7.1.10, docs/design.md#transactions)."""

import pytest

from store import NewMessage, errors


@pytest.fixture
def txq(st):
    for name in ("a", "b", "c"):
        st.create_queue(name, transactional=True)
    return st


def states(st, queue):
    return [(m.body, m.state) for m in st.browse(queue, states="all")]


def test_a_put_inside_a_transaction_is_invisible_until_commit(txq):
    t = txq.tx_begin()
    m = txq.put("a", b"x", tx=t)
    assert m.state == "tx-locked" and m.tx == t
    assert txq.browse("a") == []
    with pytest.raises(errors.Timeout):
        txq.get("a", wait=0)
    assert txq.tx_commit(t) == 1
    assert [x.body for x in txq.browse("a")] == [b"x"]


def test_lookup_id_high_byte_of_a_transactional_message_is_7_minus_priority(txq):
    t = txq.tx_begin()
    m = txq.put("a", b"x", tx=t, priority=5)
    assert m.lookup_id >> 56 == 2  # [MS-MQDMPR] 3.1.7.1.9: 0x07 - priority


def test_commit_and_abort_of_mixed_puts_and_gets_across_three_queues(txq):
    for q in ("a", "b", "c"):
        txq.put_many(q, [NewMessage(f"{q}1".encode())], tx=(t0 := txq.tx_begin()))
        txq.tx_commit(t0)
    t = txq.tx_begin()
    txq.put("a", b"a2", tx=t)
    got = txq.get("b", wait=0, tx=t)
    assert got.body == b"b1" and got.state == "tx-locked"
    txq.put("c", b"c2", tx=t)
    txq.get("c", wait=0, tx=t)
    assert txq.tx_abort(t) == 4
    assert states(txq, "a") == [(b"a1", "available")]
    assert states(txq, "b") == [(b"b1", "available")]
    assert states(txq, "c") == [(b"c1", "available")]
    assert txq.browse("b")[0].backouts == 1  # an aborted dequeue counts a backout

    t = txq.tx_begin()
    txq.put("a", b"a2", tx=t)
    txq.get("b", wait=0, tx=t)
    txq.get("c", wait=0, tx=t)
    assert txq.tx_commit(t) == 3
    assert [m.body for m in txq.browse("a")] == [b"a1", b"a2"]
    assert txq.browse("b") == [] and txq.browse("c") == []


def test_a_message_another_transaction_holds_is_already_received(txq):
    t1, t2 = txq.tx_begin(), txq.tx_begin()
    t0 = txq.tx_begin()
    m = txq.put("a", b"x", tx=t0)
    txq.tx_commit(t0)
    txq.get("a", wait=0, tx=t1)
    with pytest.raises(errors.AlreadyReceived) as info:
        txq.get("a", wait=0, tx=t2, msg_id=m.msg_id)
    assert info.value.exit_code == 5


@pytest.mark.parametrize("finish", ["tx_commit", "tx_abort"])
def test_finishing_an_unknown_or_finished_transaction_is_exit_10(txq, finish):
    with pytest.raises(errors.TransactionError) as info:
        getattr(txq, finish)(999)
    assert info.value.exit_code == 10
    t = txq.tx_begin()
    txq.tx_commit(t)
    with pytest.raises(errors.TransactionError):
        getattr(txq, finish)(t)
    with pytest.raises(errors.TransactionError):
        txq.put("a", b"x", tx=t)


def test_a_transactional_queue_refuses_puts_outside_a_transaction(txq):
    with pytest.raises(errors.TransactionError) as info:
        txq.put("a", b"x")
    assert info.value.exit_code == 10
    assert "transactional" in str(info.value)


def test_a_transaction_puts_only_to_transactional_queues(txq):
    t = txq.tx_begin()
    with pytest.raises(errors.TransactionError):
        txq.put("q", b"x", tx=t)


def test_a_timed_out_transaction_is_aborted_on_next_access(txq, clock):
    t0 = txq.tx_begin()
    txq.put("b", b"keep", tx=t0)
    txq.tx_commit(t0)
    t = txq.tx_begin(timeout=10)
    txq.put("a", b"x", tx=t)
    txq.get("b", wait=0, tx=t)
    clock.advance(11)
    assert txq.browse("a") == []            # the write of this read aborts it
    assert [m.body for m in txq.browse("b")] == [b"keep"]
    with pytest.raises(errors.TransactionError):
        txq.tx_commit(t)


def test_a_transaction_begun_without_a_timeout_is_aborted_after_ten_minutes(txq, clock):
    t = txq.tx_begin()
    txq.put("a", b"x", tx=t)
    (info,) = txq.tx_list()
    assert info.deadline - info.created == 600_000_000
    clock.advance(599)
    assert txq.tx_show(t)[0].operations == 1
    clock.advance(1)  # a deadline is reached when now equals it
    assert txq.sweep().transactions_aborted == 1
    assert txq.tx_list() == [] and txq.browse("a", states="all") == []
    with pytest.raises(errors.TransactionError):
        txq.tx_commit(t)


def test_a_transaction_begun_with_timeout_none_never_times_out(txq, clock):
    t = txq.tx_begin(timeout=None)
    txq.put("a", b"x", tx=t)
    clock.advance(10 * 365 * 86400)
    assert txq.sweep().transactions_aborted == 0
    assert txq.tx_list()[0].deadline is None
    assert txq.tx_commit(t) == 1
    assert [m.body for m in txq.browse("a")] == [b"x"]


def test_a_two_phase_get_cannot_be_in_a_transaction(txq):
    t = txq.tx_begin()
    with pytest.raises(errors.InvalidArgument):
        txq.get("a", wait=0, tx=t, confirm_id=3)


def test_tx_list_and_show(txq, clock):
    t = txq.tx_begin(timeout=60)
    txq.put("a", b"x", tx=t)
    txq.put("b", b"y", tx=t)
    (info,) = [i for i in txq.tx_list() if i.tx == t]
    assert (info.operations, sorted(info.queues), info.deadline - info.created) == (2, ["a", "b"], 60_000_000)
    shown, ops = txq.tx_show(t)
    assert sorted(m.body for m in ops) == [b"x", b"y"]
    assert all(m.state == "tx-locked" for m in ops)


def test_tx_locked_messages_are_in_flight_and_do_not_expire(txq, clock):
    t = txq.tx_begin()
    txq.put("a", b"x", tx=t, ttl=5)
    assert [m.state for m in txq.inflight("a")] == ["tx-locked"]
    clock.advance(10)
    txq.sweep()
    assert states(txq, "a") == [(b"x", "tx-locked")]
    txq.tx_commit(t)
    txq.sweep()
    # committed, then expired: a transactional queue's dead letters go to dead-letter-tx
    assert [m.body for m in txq.browse("dead-letter-tx")] == [b"x"]


def test_a_transaction_holding_more_expired_messages_than_a_batch_holds_up_no_other_expiry(txq, clock):
    # maintenance takes 256 due entries a pass: it took the transaction's 300 first every time,
    # stepped over them all, and nothing else in the store expired (a get handed out a message
    # past its ttl; sweep said 0 and sweep --dry-run 256)
    t = txq.tx_begin(timeout=None)
    txq.put_many("a", [NewMessage(b"x", ttl=1) for _ in range(300)], tx=t)
    txq.put("q", b"late", ttl=2)
    txq.put_many("q", [NewMessage(b"more", ttl=3) for _ in range(299)])
    clock.advance(5)
    assert txq.sweep(dry_run=True).expired == 300  # q's, not the 300 the transaction holds
    with pytest.raises(errors.Timeout):
        txq.get("q", wait=0)
    assert txq.sweep().expired == 0  # the get's writes expired them all, a batch a write
    assert len(txq.browse("dead-letter")) == 300
    assert [m.state for m in txq.inflight("a")] == ["tx-locked"] * 300
    txq.tx_abort(t)


def test_commit_of_10000_operations_is_one_lmdb_write_transaction(txq, monkeypatch):
    t = txq.tx_begin()
    for _ in range(10):
        txq.put_many("a", [NewMessage(b"m") for _ in range(1000)], tx=t)
    writes = []
    real_begin = txq._env.begin

    real_env = txq._env

    class Env:  # the real environment, counting the write transactions begun
        def __getattr__(self, name):
            return getattr(real_env, name)

        def begin(self, *args, **kwargs):
            if kwargs.get("write"):
                writes.append(1)
            return real_begin(*args, **kwargs)
    monkeypatch.setattr(txq, "_lmdb", Env())  # what Store._env hands out
    assert txq.tx_commit(t) == 10_000
    monkeypatch.undo()
    assert writes == [1]
    assert txq.queue_info("a").available == 10_000


def test_move_inside_a_transaction_moves_nothing_until_commit(txq):
    t0 = txq.tx_begin()
    txq.put_many("a", [NewMessage(b"1"), NewMessage(b"2")], tx=t0)
    txq.tx_commit(t0)
    t = txq.tx_begin()
    moved = [m for batch in txq.move("a", "b", tx=t) for m in batch]
    assert [m.body for m in moved] == [b"1", b"2"]
    assert txq.browse("a") == [] and txq.browse("b") == []
    txq.tx_abort(t)
    assert [m.body for m in txq.browse("a")] == [b"1", b"2"] and txq.browse("b") == []
    t = txq.tx_begin()
    list(txq.move("a", "b", tx=t))
    txq.tx_commit(t)
    assert txq.browse("a") == [] and [m.body for m in txq.browse("b")] == [b"1", b"2"]


def test_a_move_inside_a_transaction_is_no_get_when_committed_and_no_backout_when_aborted(txq):
    # it was: the commit counted the source's messages as got (got_messages_total, last_get)
    # and journaled them, the abort counted a backout each, where a plain move does neither
    txq.create_queue("j", transactional=True, journal=True, max_backouts=1)
    t0 = txq.tx_begin()
    txq.put_many("j", [NewMessage(b"1"), NewMessage(b"2")], tx=t0)
    txq.tx_commit(t0)
    t = txq.tx_begin()
    list(txq.move("j", "b", tx=t))
    txq.tx_abort(t)
    assert [(m.body, m.backouts) for m in txq.browse("j")] == [(b"1", 0), (b"2", 0)]
    assert txq.browse("dead-letter-tx") == []
    t = txq.tx_begin()
    list(txq.move("j", "b", tx=t))
    assert txq.tx_commit(t) == 4  # two dequeues and two enqueues
    stats = {s.name: s for s in txq.stats()}
    assert (stats["j"].last_get, stats["j"].totals["got_messages"], stats["j"].totals["backed_out"]) == (None, 0, 0)
    assert "j;journal" not in stats and [m.body for m in txq.browse("b")] == [b"1", b"2"]  # made at a first get


def test_a_journaled_queue_keeps_a_copy_of_every_got_message(st, clock):
    st.create_queue("j", journal=True)
    st.put_many("j", [NewMessage(b"plain"), NewMessage(b"two-phase"), NewMessage(b"kept")])
    st.get("j", wait=0)
    st.get("j", wait=0, confirm_id=7)
    assert [m.body for m in st.browse("j;journal")] == [b"plain"]  # not yet confirmed
    st.confirm("j", 7)
    journal = st.browse("j;journal")
    assert [m.body for m in journal] == [b"plain", b"two-phase"]
    assert journal[0].original_queue == "j" and "mqcli.journal_time" in journal[0].props
    assert st.purge_queue("j;journal") == 2


def test_a_committed_transactional_get_is_journaled(txq):
    txq.create_queue("tj", transactional=True, journal=True)
    t = txq.tx_begin()
    txq.put("tj", b"x", tx=t)
    txq.tx_commit(t)
    t = txq.tx_begin()
    txq.get("tj", wait=0, tx=t)
    txq.tx_abort(t)
    with pytest.raises(errors.QueueNotAvailable):
        txq.browse("tj;journal")  # an aborted get is not a get
    t = txq.tx_begin()
    txq.get("tj", wait=0, tx=t)
    txq.tx_commit(t)
    assert [m.body for m in txq.browse("tj;journal")] == [b"x"]


def test_sweep_aborts_timed_out_transactions(txq, clock):
    t = txq.tx_begin(timeout=1)
    txq.put("a", b"x", tx=t)
    clock.advance(2)
    assert txq.sweep(dry_run=True).transactions_aborted == 1
    assert txq.sweep().transactions_aborted == 1
    assert txq.tx_list() == []


@pytest.mark.parametrize("finish", ["commit", "abort"])
def test_a_move_in_a_transaction_out_of_dead_letter_tx_starts_fresh_on_commit(txq, finish):
    txq.create_queue("poisoned", transactional=True, max_backouts=1)
    t = txq.tx_begin()
    m = txq.put("poisoned", b"p", tx=t)
    txq.tx_commit(t)
    t = txq.tx_begin()
    txq.get("poisoned", wait=0, tx=t)
    txq.tx_abort(t)  # one backout: max-backouts, so to dead-letter-tx
    (dead,) = txq.browse("dead-letter-tx")
    assert (dead.msg_id, dead.backouts, dead.dead_letter_reason) == (m.msg_id, 1, "max-backouts")
    t = txq.tx_begin()
    (moved,) = [x for chunk in txq.move("dead-letter-tx", "a", tx=t) for x in chunk]
    assert (moved.state, moved.backouts, moved.dead_letter_reason, moved.original_queue) == ("tx-locked", 0, None, None)
    getattr(txq, f"tx_{finish}")(t)
    if finish == "commit":
        (back,) = txq.browse("a")
        assert (back.msg_id, back.backouts, back.dead_letter_reason, back.original_queue) == (m.msg_id, 0, None, None)
        assert txq.browse("dead-letter-tx") == []
    else:  # the dead letter is where it was, still one (an aborted move counts no backout)
        assert txq.browse("a") == []
        (dead,) = txq.browse("dead-letter-tx")
        assert (dead.msg_id, dead.dead_letter_reason, dead.original_queue) == (m.msg_id, "max-backouts", "poisoned")


def test_a_move_in_a_transaction_out_of_dead_letter_is_refused(txq):
    txq.create_queue("plain", max_backouts=1)
    txq.put("plain", b"x")
    txq.get("plain", wait=0, confirm_id=1)
    txq.undo("plain", confirm_id=1)
    t = txq.tx_begin()
    with pytest.raises(errors.TransactionError, match="queue 'dead-letter' is not transactional"):
        list(txq.move("dead-letter", "a", tx=t))
    assert len(txq.browse("dead-letter")) == 1


def test_move_in_an_unknown_transaction_fails_even_with_nothing_to_move(txq):
    with pytest.raises(errors.TransactionError):
        list(txq.move("a", "b", tx=999))


def test_a_get_in_a_transaction_under_a_browse_lock_leaves_the_lock(txq):
    t0 = txq.tx_begin()
    txq.put("a", b"x", tx=t0)
    txq.tx_commit(t0)
    lock, _ = txq.browse_lock("a", lease=5)
    t = txq.tx_begin()
    m = txq.get("a", wait=0, lock_id=lock, tx=t)
    assert (m.state, m.lock_id, m.lease_expires) == ("tx-locked", None, None)
    assert txq.check() == []
    txq.tx_abort(t)
    assert [x.state for x in txq.browse("a", states="all")] == ["available"]


def test_a_message_put_in_an_open_transaction_is_not_found_by_its_id(txq):
    t = txq.tx_begin()
    m = txq.put("a", b"x", tx=t)
    with pytest.raises(errors.MessageNotFound):
        txq.get("a", wait=0, msg_id=m.msg_id)
    with pytest.raises(errors.MessageNotFound):
        txq.delete("a", m.msg_id)


def test_a_queue_with_messages_of_an_open_transaction_cannot_be_deleted(txq):
    # IBM MQ's DELETE QLOCAL refuses a queue with uncommitted messages
    t = txq.tx_begin()
    txq.put("a", b"x", tx=t)
    with pytest.raises(errors.TransactionError, match=f"open transaction {t}"):
        txq.delete_queue("a")
    assert states(txq, "a") == [(b"x", "tx-locked")]
    txq.tx_abort(t)
    assert txq.delete_queue("a") == 0


def test_a_purge_removes_no_message_an_open_transaction_holds(txq):
    # the purge removed a message a transaction had got, and the abort gave back nothing
    t0 = txq.tx_begin()
    txq.put_many("a", [NewMessage(b"x", props={"k": "1"}), NewMessage(b"y", props={"k": "2"})], tx=t0)
    txq.tx_commit(t0)
    t = txq.tx_begin()
    assert txq.get("a", wait=0, tx=t).body == b"x"
    for dry_run in (True, False):
        with pytest.raises(errors.TransactionError, match=f"open transaction {t}"):
            txq.purge_queue("a", dry_run=dry_run)
    assert txq.purge_queue("a", where="props.k = '2'") == 1  # what the selector takes holds none of them
    txq.tx_abort(t)
    assert [(m.body, m.state, m.backouts) for m in txq.browse("a", states="all")] == [(b"x", "available", 1)]


def test_tx_list_and_show_leave_out_a_queue_deleted_after_the_transaction_touched_it(txq):
    t = txq.tx_begin()
    txq.put("a", b"x", tx=t)
    txq.put("b", b"y", tx=t)
    # a purge of an earlier version took T's message with it (now refused); then nothing held the queue
    txq._write(lambda w: [w.remove(m) for m in list(w.queue_messages(w.queue("a")))])
    txq.delete_queue("a")
    (info,) = txq.tx_list()
    assert (info.queues, info.operations) == (["b"], 1)
    assert txq.tx_show(t)[0].queues == ["b"]
    assert txq.tx_commit(t) == 1 and txq.check() == []
