"""Every row of the docs/design.md#states table (transactions excepted) on the real store."""

import pytest

from store import DEAD_LETTER, NewMessage, errors


def bodies(st, queue="q", states=None):
    return [m.body for m in st.browse(queue, states=states)]


def states(st, queue="q"):
    return {m.body: m.state for m in st.browse(queue, states="all")}


def test_put_makes_a_message_available(st):
    m = st.put("q", b"a")
    assert m.state == "available"
    assert bodies(st) == [b"a"]


def test_put_with_confirm_id_is_hidden_until_confirmed(st):
    st.put("q", b"a", confirm_id=7)
    assert bodies(st) == []
    with pytest.raises(errors.Timeout):
        st.get("q", wait=0)
    assert states(st) == {b"a": "put-unconfirmed"}
    assert st.confirm("q", 7) == 1
    assert bodies(st) == [b"a"]


def test_undo_of_put_deletes_the_message(st):
    st.put("q", b"a", confirm_id=7)
    assert st.undo("q", confirm_id=7) == 1
    assert states(st) == {}
    assert st.queue_info("q").depth == 0


def test_get_removes_the_head_message(st):
    st.put("q", b"a")
    st.put("q", b"b")
    assert st.get("q", wait=0).body == b"a"
    assert bodies(st) == [b"b"]


def test_get_with_confirm_id_is_a_two_phase_read(st):
    st.put("q", b"a")
    m = st.get("q", wait=0, confirm_id=5)
    assert (m.body, m.state, m.confirm_id) == (b"a", "get-unconfirmed", 5)
    assert bodies(st) == []
    assert st.confirm("q", 5) == 1
    assert states(st) == {}


def test_undo_of_get_makes_it_available_with_a_backout(st):
    st.put("q", b"a")
    st.put("q", b"b")
    st.get("q", wait=0, confirm_id=5)
    assert st.undo("q", confirm_id=5) == 1
    again = st.browse("q")
    assert [m.body for m in again] == [b"a", b"b"]  # back in its place, not at the tail
    assert again[0].backouts == 1


def test_browse_with_lock_locks_each_match(st):
    for body in (b"a", b"b", b"c"):
        st.put("q", body)
    lock, locked = st.browse_lock("q", limit=2)
    assert [m.body for m in locked] == [b"a", b"b"]
    assert all(m.state == "locked-browse" and m.lock_id == lock for m in locked)
    assert bodies(st) == [b"c"]
    assert st.get("q", wait=0).body == b"c"


@pytest.mark.parametrize("release", ["unlock", "undo"])
def test_unlock_and_undo_of_a_lock_make_messages_available(st, release):
    st.put("q", b"a")
    lock, _ = st.browse_lock("q")
    if release == "unlock":
        assert st.unlock("q", lock) == 1
    else:
        assert st.undo("q", lock_id=lock) == 1
    m = st.browse("q")[0]
    assert (m.state, m.backouts) == ("available", 0)


def test_get_with_lock_id_deletes_the_locked_message(st):
    st.put("q", b"a")
    st.put("q", b"b")
    lock, _ = st.browse_lock("q", limit=1)
    assert st.get("q", wait=0, lock_id=lock).body == b"a"
    assert states(st) == {b"b": "available"}


def test_get_with_lock_id_and_confirm_id_is_browse_get_unconfirmed(st):
    st.put("q", b"a")
    lock, _ = st.browse_lock("q")
    m = st.get("q", wait=0, lock_id=lock, confirm_id=9)
    assert (m.state, m.lock_id, m.confirm_id) == ("browse-get-unconfirmed", lock, 9)
    assert st.confirm("q", 9) == 1
    assert states(st) == {}


def test_undo_of_browse_get_returns_to_locked_browse(st):
    st.put("q", b"a")
    lock, _ = st.browse_lock("q")
    st.get("q", wait=0, lock_id=lock, confirm_id=9)
    assert st.undo("q", confirm_id=9) == 1
    m = st.browse("q", states="all")[0]
    assert (m.state, m.lock_id, m.confirm_id, m.backouts) == ("locked-browse", lock, None, 1)
    assert st.unlock("q", lock) == 1


def test_delete_removes_an_available_message(st):
    m = st.put("q", b"a")
    st.delete("q", m.msg_id)
    assert states(st) == {}


def test_delete_of_a_locked_message_needs_its_lock_id(st):
    m = st.put("q", b"a")
    lock, _ = st.browse_lock("q")
    with pytest.raises(errors.AlreadyReceived):
        st.delete("q", m.msg_id)
    with pytest.raises(errors.UnknownLockId):
        st.delete("q", m.msg_id, lock_id=lock + 1)
    st.delete("q", m.msg_id, lock_id=lock)
    assert states(st) == {}


def test_delete_with_a_wrong_lock_id_changes_nothing_even_for_an_available_message(st):
    m = st.put("q", b"a")
    other = st.put("q", b"b")
    with pytest.raises(errors.UnknownLockId):  # nobody holds lock 999
        st.delete("q", m.msg_id, lock_id=999)
    lock, _ = st.browse_lock("q", msg_id=other.msg_id)
    with pytest.raises(errors.UnknownLockId):  # a real lock, but not on this message
        st.delete("q", m.msg_id, lock_id=lock)
    assert states(st) == {b"a": "available", b"b": "locked-browse"}
    st.delete("q", other.msg_id, lock_id=lock)
    assert states(st) == {b"a": "available"}


def test_delete_of_an_unknown_msg_id_is_not_found(st):
    m = st.put("q", b"a")
    st.delete("q", m.msg_id)
    with pytest.raises(errors.MessageNotFound):
        st.delete("q", m.msg_id)


@pytest.mark.parametrize("setup, after", [
    ("put", {}),
    ("get", {b"a": "available"}),
    ("lock", {b"a": "available"}),
    ("lock-get", {b"a": "available"}),
])
def test_a_lapsed_lease_is_undone_on_next_access(st, clock, setup, after):
    if setup == "put":
        st.put("q", b"a", confirm_id=3, lease=30)
    else:
        st.put("q", b"a")
    if setup == "get":
        st.get("q", wait=0, confirm_id=3, lease=30)
    if setup.startswith("lock"):
        lock, _ = st.browse_lock("q", lease=30)
    if setup == "lock-get":
        st.get("q", wait=0, lock_id=lock, confirm_id=3, lease=30)
    clock.advance(29)
    assert bodies(st) == []
    clock.advance(2)
    assert states(st) == after


def test_lease_expiry_of_a_get_counts_a_backout(st, clock):
    st.put("q", b"a")
    st.get("q", wait=0, confirm_id=3, lease=1)
    clock.advance(2)
    assert st.sweep().leases_undone == 1
    assert st.browse("q")[0].backouts == 1


def test_confirm_after_the_lease_lapsed_is_unknown(st, clock):
    st.put("q", b"a")
    st.get("q", wait=0, confirm_id=3, lease=1)
    clock.advance(2)
    with pytest.raises(errors.UnknownConfirmId):
        st.confirm("q", 3)


def test_max_backouts_moves_a_poison_message_to_the_dead_letter_queue(st):
    st.create_queue("p", max_backouts=2)
    m = st.put("p", b"poison")
    st.put("p", b"fine")
    for attempt in range(2):
        got = st.get("p", wait=0, confirm_id=10 + attempt)
        assert got.body == b"poison"
        st.undo("p", confirm_id=10 + attempt)
    assert bodies(st, "p") == [b"fine"]
    dead = st.browse(DEAD_LETTER)
    assert [(d.msg_id, d.dead_letter_reason, d.original_queue, d.backouts) for d in dead] == [
        (m.msg_id, "max-backouts", "p", 2)]


def test_a_poison_message_sent_without_dead_lettering_is_still_dead_lettered(st):
    # --no-dead-letter is the sender's choice for expiry; at max-backouts the
    # message moves to the dead-letter queue rather than vanishing (docs/design.md#leases)
    st.create_queue("p", max_backouts=2)
    m = st.put("p", b"poison", dead_letter=False)
    for attempt in range(2):
        st.get("p", wait=0, confirm_id=10 + attempt)
        st.undo("p", confirm_id=10 + attempt)
    assert bodies(st, "p") == []
    (dead,) = st.browse(DEAD_LETTER)
    assert (dead.msg_id, dead.dead_letter_reason, dead.backouts) == (m.msg_id, "max-backouts", 2)
    assert st.info().messages == 1


def _poison(st, queue="p", max_backouts=2):
    """A message undone `max_backouts` times, now in the dead-letter queue."""
    st.create_queue(queue, max_backouts=max_backouts)
    m = st.put(queue, b"poison", props={"k": "v"})
    for attempt in range(max_backouts):
        st.get(queue, wait=0, confirm_id=10 + attempt)
        st.undo(queue, confirm_id=10 + attempt)
    (dead,) = st.browse(DEAD_LETTER)
    assert (dead.msg_id, dead.backouts, dead.dead_letter_reason) == (m.msg_id, max_backouts, "max-backouts")
    return m


@pytest.mark.parametrize("copy", [False, True])
def test_a_message_moved_out_of_the_dead_letter_queue_starts_fresh(st, copy):
    m = _poison(st)
    (moved,) = [x for chunk in st.move(DEAD_LETTER, "p", copy=copy) for x in chunk]
    assert (moved.backouts, moved.dead_letter_reason, moved.original_queue) == (0, None, None)
    (back,) = st.browse("p")  # as the store keeps it, not only as move returned it
    if copy:  # a new message naming the dead letter it copied
        assert (back.msg_id, back.body, back.props) == (moved.msg_id, b"poison", {"k": "v", "mqcli.copy_of": m.msg_id})
    else:
        assert (back.msg_id, back.body, back.props, back.put_time) == (m.msg_id, b"poison", {"k": "v"}, m.put_time)
    assert (back.backouts, back.dead_letter_reason, back.original_queue) == (0, None, None)
    assert len(st.browse(DEAD_LETTER)) == (1 if copy else 0)
    if copy:  # the dead letter left behind is still one
        (dead,) = st.browse(DEAD_LETTER)
        assert (dead.backouts, dead.dead_letter_reason, dead.original_queue) == (2, "max-backouts", "p")
    # one more undo is one backout, not a return to the dead-letter queue
    st.get("p", wait=0, confirm_id=20)
    st.undo("p", confirm_id=20)
    assert [(x.body, x.backouts) for x in st.browse("p")] == [(b"poison", 1)]


def test_a_message_moved_between_the_dead_letter_queues_stays_a_dead_letter(st):
    _poison(st)
    (moved,) = [x for chunk in st.move(DEAD_LETTER, "dead-letter-tx") for x in chunk]
    assert (moved.backouts, moved.dead_letter_reason, moved.original_queue) == (2, "max-backouts", "p")


def test_a_message_moved_between_ordinary_queues_keeps_its_backouts(st):
    st.create_queue("other")
    st.put("q", b"x")
    st.get("q", wait=0, confirm_id=1)
    st.undo("q", confirm_id=1)
    (moved,) = [x for chunk in st.move("q", "other") for x in chunk]
    assert moved.backouts == 1 and st.browse("other")[0].backouts == 1


def test_expired_message_moves_to_the_dead_letter_queue(st, clock):
    m = st.put("q", b"old", ttl=10)
    st.put("q", b"new")
    clock.advance(11)
    assert bodies(st) == [b"new"]
    dead = st.browse(DEAD_LETTER)
    assert [(d.msg_id, d.dead_letter_reason, d.original_queue, d.expires) for d in dead] == [
        (m.msg_id, "expired", "q", None)]


@pytest.mark.parametrize("then", ["get", "browse", "stats"])
def test_more_messages_expiring_at_once_than_a_write_expires_are_never_handed_out(st, clock, then):
    # a write expires a batch of 256: the get took the 257th, past its ttl, and a read showed 44
    st.put_many("q", [NewMessage(b"%d" % i, ttl=1) for i in range(300)])
    st.put("q", b"fresh")
    clock.advance(5)
    if then == "get":
        assert st.get("q", wait=0).body == b"fresh"
    elif then == "browse":
        assert [m.body for m in st.browse("q")] == [b"fresh"]
    else:
        assert {s.name: s.depth for s in st.stats()}["q"] == 1
    assert len(st.browse("dead-letter")) == 300


def test_expired_message_sent_without_dead_lettering_is_dropped(st, clock):
    st.put("q", b"old", ttl=10, dead_letter=False)
    clock.advance(11)
    assert st.sweep().expired == 1
    assert bodies(st) == [] and bodies(st, DEAD_LETTER) == []


def test_expiry_applies_to_in_flight_messages(st, clock):
    st.put("q", b"a", ttl=10)
    st.get("q", wait=0, confirm_id=4)
    clock.advance(11)
    st.sweep()
    assert bodies(st, DEAD_LETTER) == [b"a"]
    with pytest.raises(errors.UnknownConfirmId):
        st.confirm("q", 4)


def test_sweep_dry_run_changes_nothing(st, clock):
    st.put("q", b"a", ttl=1)
    clock.advance(2)
    result = st.sweep(dry_run=True)
    assert result.expired == 1
    assert st.sweep(dry_run=True).expired == 1  # the first changed nothing
    assert st.sweep().expired == 1
    assert st.sweep(dry_run=True).expired == 0


@pytest.mark.parametrize("call, error", [
    (lambda st: st.confirm("q", 99), errors.UnknownConfirmId),
    (lambda st: st.undo("q", confirm_id=99), errors.UnknownConfirmId),
    (lambda st: st.undo("q", lock_id=99), errors.UnknownLockId),
    (lambda st: st.unlock("q", 99), errors.UnknownLockId),
    (lambda st: st.get("q", wait=0, lock_id=99), errors.UnknownLockId),
])
def test_wrong_ids_change_nothing_and_raise_distinct_errors(st, call, error):
    st.put("q", b"a")
    st.get("q", wait=0, confirm_id=1)
    st.put("q", b"b")
    st.browse_lock("q", lock_id=2)
    before = [(m.body, m.state, m.confirm_id, m.lock_id, m.backouts) for m in st.browse("q", states="all")]
    with pytest.raises(error) as info:
        call(st)
    assert info.value.exit_code == 4
    after = [(m.body, m.state, m.confirm_id, m.lock_id, m.backouts) for m in st.browse("q", states="all")]
    assert after == before


def test_unknown_confirm_and_lock_ids_are_different_errors():
    assert not issubclass(errors.UnknownConfirmId, errors.UnknownLockId)
    assert not issubclass(errors.UnknownLockId, errors.UnknownConfirmId)


def test_in_flight_messages_are_invisible_to_get_and_browse(st):
    st.put("q", b"a")
    st.put("q", b"b")
    st.put("q", b"c", confirm_id=1)
    st.get("q", wait=0, confirm_id=2)
    st.browse_lock("q")
    assert bodies(st) == []
    with pytest.raises(errors.Timeout):
        st.get("q", wait=0)
    assert len(st.inflight("q")) == 3


def test_get_by_msg_id_of_a_held_message_is_already_received(st):
    m = st.put("q", b"a")
    st.get("q", wait=0, confirm_id=2)
    with pytest.raises(errors.AlreadyReceived):
        st.get("q", wait=0, msg_id=m.msg_id)


def test_get_by_msg_id_of_a_put_unconfirmed_message_is_not_found(st):
    m = st.put("q", b"a", confirm_id=2)
    with pytest.raises(errors.MessageNotFound):
        st.get("q", wait=0, msg_id=m.msg_id)


def test_locked_message_cannot_be_got_with_another_lock(st):
    st.put("q", b"a")
    lock, _ = st.browse_lock("q")
    st.get("q", wait=0, lock_id=lock, confirm_id=3)
    with pytest.raises(errors.AlreadyReceived):
        st.get("q", wait=0, lock_id=lock)


def test_confirm_of_a_group_applies_to_every_message_under_it(st):
    st.put_many("q", [NewMessage(b"a"), NewMessage(b"b")], confirm_id=8)
    assert st.confirm("q", 8) == 2
    got = st.get_many("q", 5, confirm_id=9)
    assert [m.body for m in got] == [b"a", b"b"]
    assert st.confirm("q", 9) == 2
    assert states(st) == {}
