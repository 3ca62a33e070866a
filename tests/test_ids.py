"""A confirm id or lock id has one holder; a lapsed one is remembered a day (store/ids.py)."""

import pytest

from store import DEAD_LETTER, NewMessage, Store, errors, ids
from store.records import iso_time

DAY = 24 * 3600


def snapshot(st, queue="q"):
    return [(m.msg_id, m.state, m.confirm_id, m.lock_id, m.backouts, m.lease_expires)
            for m in st.browse(queue, states="all")]


def when(seconds):
    return iso_time(int(seconds * 1_000_000))[:19] + "Z"


def ids_entries(st):
    return st._read(lambda t: t.lt.stat(t.dbs["ids"])["entries"])


# ---- a pending id is refused ---------------------------------------------------------------

@pytest.mark.parametrize("hold", ["get", "put"])
@pytest.mark.parametrize("call", [
    lambda st: st.get("q", wait=0, confirm_id=501),
    lambda st: st.get_many("q", 2, confirm_id=501, lease=30),
    lambda st: st.put("q", b"new", confirm_id=501),
    lambda st: st.put_many("q", [NewMessage(b"n1"), NewMessage(b"n2")], confirm_id=501),
])
def test_naming_a_pending_confirm_id_is_refused_and_changes_nothing(st, hold, call):
    for body in (b"a", b"b", b"c", b"d"):
        st.put("q", body)
    if hold == "get":
        st.get_many("q", 2, confirm_id=501)
    else:
        st.put("q", b"p", confirm_id=501)
    before = snapshot(st)
    with pytest.raises(errors.IdInUse) as info:
        call(st)
    assert isinstance(info.value, errors.AlreadyReceived)
    assert (info.value.exit_code, info.value.status) == (5, "MQ_ERROR_MESSAGE_ALREADY_RECEIVED")
    assert info.value.message == (
        "confirm id 501 is pending in queue 'q': messages are held under it, and an id has one "
        "holder; confirm or undo them first, or use another id or auto")
    assert snapshot(st) == before


def test_one_get_takes_several_messages_under_one_id(st):
    for body in (b"a", b"b", b"c", b"d"):
        st.put("q", body)
    assert [m.confirm_id for m in st.get_many("q", 3, confirm_id=501)] == [501] * 3
    with pytest.raises(errors.IdInUse):
        st.get_many("q", 3, confirm_id=501)
    assert st.confirm("q", 501) == 3
    assert [m.body for m in st.browse("q")] == [b"d"]


def test_extend_adds_to_the_callers_own_id(st):
    for body in (b"a", b"b", b"c"):
        st.put("q", body)
    st.get_many("q", 2, confirm_id=9)
    assert [m.body for m in st.get_many("q", 2, confirm_id=9, extend=True)] == [b"c"]
    st.put_many("q", [NewMessage(b"x")], confirm_id=8)
    st.put_many("q", [NewMessage(b"y")], confirm_id=8, extend=True)
    assert (st.confirm("q", 9), st.confirm("q", 8)) == (3, 2)


def test_a_bulk_get_goes_on_under_its_id_after_an_operator_took_its_earlier_batch(st):
    # between two batches of one `get --count N --confirm-id C` an operators' undo released the
    # first: the second batch (extend) is still the same holder's, and was refused with exit 5
    st.put_many("q", [NewMessage(b"a"), NewMessage(b"b")])
    st.get_many("q", 1, confirm_id=9)
    assert st.undo_inflight("q") == 1
    assert [m.body for m in st.get_many("q", 1, confirm_id=9, extend=True)] == [b"a"]  # back at the head
    assert st.confirm("q", 9) == 1
    with pytest.raises(errors.IdInUse):  # a new holder still may not take it
        st.get("q", wait=0, confirm_id=9)


def test_a_confirmed_or_undone_id_may_be_named_again(st):
    st.put("q", b"a")
    st.get("q", wait=0, confirm_id=7)
    st.undo("q", confirm_id=7)
    st.get("q", wait=0, confirm_id=7)
    st.confirm("q", 7)
    st.put("q", b"b", confirm_id=7)  # a worker loop reuses its fixed id
    assert st.confirm("q", 7) == 1


def test_ids_are_per_queue_and_confirm_and_lock_ids_apart(st):
    st.create_queue("r")
    st.put("q", b"a")
    st.put("r", b"b")
    st.get("q", wait=0, confirm_id=5)
    assert st.get("r", wait=0, confirm_id=5).body == b"b"
    st.put("q", b"c")
    assert st.browse_lock("q", lock_id=5)[0] == 5


def test_a_browse_lock_naming_a_pending_lock_id_is_refused(st):
    for body in (b"a", b"b"):
        st.put("q", body)
    st.browse_lock("q", lock_id=77, limit=1)
    before = snapshot(st)
    with pytest.raises(errors.IdInUse) as info:
        st.browse_lock("q", lock_id=77)
    assert info.value.message.startswith("lock id 77 is pending in queue 'q': messages are locked under it")
    assert snapshot(st) == before


def test_a_get_under_a_lock_names_the_lock_as_its_holder(st):
    for body in (b"a", b"b", b"c"):
        st.put("q", body)
    st.get("q", wait=0, confirm_id=3)
    lock, _ = st.browse_lock("q", lock_id=77)
    got = st.get("q", wait=0, lock_id=lock, confirm_id=4)
    assert (got.state, got.lock_id, got.confirm_id) == ("browse-get-unconfirmed", 77, 4)
    before = snapshot(st)
    with pytest.raises(errors.IdInUse):  # the lock's holder, but a confirm id someone else holds
        st.get("q", wait=0, lock_id=lock, confirm_id=3)
    assert snapshot(st) == before
    assert st.get("q", wait=0, lock_id=lock).body == b"c"


# ---- a lapsed id ---------------------------------------------------------------------------

def test_a_late_confirm_after_a_lapse_says_so_and_leaves_the_new_holder_alone(st, clock):
    st.put("q", b"a")
    st.get("q", wait=0, confirm_id=42, lease=30)  # worker A
    clock.advance(31)
    b = st.get("q", wait=0, confirm_id=43)  # worker B gets it again, its lease having lapsed
    lapsed_at = clock.now
    assert (b.body, b.backouts) == (b"a", 1)
    with pytest.raises(errors.ConfirmIdLapsed) as info:
        st.confirm("q", 42)  # A, late
    assert isinstance(info.value, errors.LeaseLapsed) and isinstance(info.value, errors.UnknownConfirmId)
    assert info.value.exit_code == 4
    assert info.value.message == (f"the lease of confirm id 42 lapsed at {when(lapsed_at)}; its message "
                                  f"went back to queue 'q' (backouts 1)")
    with pytest.raises(errors.ConfirmIdLapsed):
        st.undo("q", confirm_id=42)
    assert snapshot(st) == [(b.msg_id, "get-unconfirmed", 43, None, 1, None)]
    assert st.confirm("q", 43) == 1


def test_a_late_unlock_or_get_after_a_lock_lapsed_says_so(st, clock):
    st.put("q", b"a")
    st.put("q", b"b")
    st.browse_lock("q", lock_id=9, lease=10)
    clock.advance(11)
    st.sweep()
    for call in (lambda: st.unlock("q", 9), lambda: st.get("q", wait=0, lock_id=9),
                 lambda: st.delete("q", st.browse("q")[0].msg_id, lock_id=9)):
        with pytest.raises(errors.LockIdLapsed) as info:
            call()
        assert info.value.message == (f"the lease of lock id 9 lapsed at {when(clock.now)}; its 2 "
                                      f"messages went back to queue 'q'")
    assert [m.state for m in st.browse("q", states="all")] == ["available", "available"]


def test_a_lapse_to_the_dead_letter_queue_says_so(st, clock):
    st.create_queue("p", max_backouts=1)
    st.put("p", b"poison")
    st.get("p", wait=0, confirm_id=42, lease=5)
    clock.advance(6)
    st.sweep()
    with pytest.raises(errors.ConfirmIdLapsed) as info:
        st.confirm("p", 42)
    assert info.value.message == (f"the lease of confirm id 42 lapsed at {when(clock.now)}; its message "
                                  f"went to the dead-letter queue 'dead-letter' (max-backouts reached)")
    assert [m.body for m in st.browse(DEAD_LETTER)] == [b"poison"]


def test_a_lapsed_put_says_its_messages_were_discarded(st, clock):
    st.put_many("q", [NewMessage(b"a"), NewMessage(b"b")], confirm_id=6, lease=5)
    clock.advance(6)
    with pytest.raises(errors.ConfirmIdLapsed) as info:
        st.confirm("q", 6)
    assert info.value.message.endswith("; its 2 messages were discarded (an unconfirmed put is undone)")
    assert st.browse("q", states="all") == []


def test_a_lapsed_id_is_reserved_until_its_record_expires(st, clock):
    st.put("q", b"a")
    st.put("q", b"b")
    st.get("q", wait=0, confirm_id=42, lease=30)
    clock.advance(31)
    st.sweep()
    lapsed_at = clock.now
    before = snapshot(st)
    for call in (lambda: st.get("q", wait=0, confirm_id=42), lambda: st.put("q", b"c", confirm_id=42)):
        with pytest.raises(errors.IdInUse) as info:
            call()
        assert info.value.message == (
            f"the lease of confirm id 42 lapsed at {when(lapsed_at)} in queue 'q', so the id is "
            f"reserved until {when(lapsed_at + DAY)} (a late confirm or undo must not reach a new "
            f"holder); use another id or auto")
    assert snapshot(st) == before
    clock.advance(DAY - 1)
    with pytest.raises(errors.IdInUse):
        st.get("q", wait=0, confirm_id=42)
    clock.advance(1)
    assert st.get("q", wait=0, confirm_id=42).confirm_id == 42
    assert st.confirm("q", 42) == 1


def test_a_lapsed_lock_id_is_reserved_too(st, clock):
    st.put("q", b"a")
    st.browse_lock("q", lock_id=9, lease=10)
    clock.advance(11)
    with pytest.raises(errors.IdInUse) as info:
        st.browse_lock("q", lock_id=9)
    assert info.value.message.startswith("the lease of lock id 9 lapsed at")
    assert st.browse_lock("q", lock_id=10)[0] == 10


def _expire(st, clock):
    clock.advance(3)  # past m1's ttl of 2 s: expiry takes a message in flight too
    st.sweep()


@pytest.mark.parametrize("take, event, went", [
    (lambda st, clock: st.undo_inflight("q"), "confirm id 42 was undone by an operator (undo --all/--older-than)",
     "its message went back to queue 'q' (backouts 1)"),
    (_expire, "the messages under confirm id 42 expired",
     "its message went to the dead-letter queue 'dead-letter' (expired)"),
    (lambda st, clock: st.purge_queue("q", where="priority = 3"), "the messages under confirm id 42 were purged",
     "its message was removed by the purge"),
])
def test_an_id_taken_from_its_holder_without_a_lapse_is_remembered_too(st, clock, take, event, went):
    # expiry, an operators' undo and a purge free the id as a lapse does: a second holder
    # taking it would have its message confirmed, so deleted, by the first one's late confirm
    st.put("q", b"m1", ttl=2)
    st.get("q", wait=0, confirm_id=42, lease=600)
    st.put("q", b"m2", priority=5)
    clock.advance(1)
    take(st, clock)
    taken_at = clock.now
    before = snapshot(st)
    with pytest.raises(errors.IdInUse) as refused:
        st.get("q", wait=0, confirm_id=42)
    assert refused.value.message == (
        f"{event} at {when(taken_at)} in queue 'q', so the id is reserved until {when(taken_at + DAY)} "
        f"(a late confirm or undo must not reach a new holder); use another id or auto")
    for late in (lambda: st.confirm("q", 42), lambda: st.undo("q", confirm_id=42)):
        with pytest.raises(errors.ConfirmIdLapsed) as told:
            late()
        assert told.value.message == f"{event} at {when(taken_at)}; {went}"
    assert snapshot(st) == before  # m2 untouched, waiting for its holder
    got = st.get("q", wait=0, confirm_id=43)
    assert (got.body, st.confirm("q", 43)) == (b"m2", 1)


def test_an_available_message_expired_or_purged_leaves_no_id_record(st, clock):
    st.put("q", b"a", ttl=1)
    st.put("q", b"b")
    clock.advance(2)
    st.sweep()
    st.purge_queue("q")
    assert ids_entries(st) == 0


def test_a_holders_own_undo_frees_the_id(st, clock):
    st.put("q", b"a")
    st.get("q", wait=0, confirm_id=42, lease=30)
    st.undo("q", confirm_id=42)
    assert st.get("q", wait=0, confirm_id=42).backouts == 1
    assert ids_entries(st) == 0


def test_lapsed_ids_are_forgotten_a_few_at_a_time_after_a_day(st, clock):
    for n in range(1, 21):
        st.put("q", b"m")
        st.get("q", wait=0, confirm_id=n, lease=1)
    clock.advance(2)
    st.sweep()
    assert ids_entries(st) == 2 * 20  # a record and its time entry per id
    clock.advance(DAY)
    st.get("q", wait=0, confirm_id=100, lease=1)
    clock.advance(2)
    st.put("q", b"n")  # any write undoes the lapsed lease; recording it forgets 16 old ones
    assert ids_entries(st) == 2 * (20 - ids.PRUNE_BATCH + 1)
    clock.advance(DAY)
    assert st.sweep().leases_undone == 0
    assert ids_entries(st) == 0


# ---- auto ------------------------------------------------------------------------------------

def test_auto_draws_a_fresh_id_the_messages_carry(st):
    for body in (b"a", b"b", b"c"):
        st.put("q", body)
    got = st.get_many("q", 2, confirm_id="auto")
    cid = got[0].confirm_id
    assert 0 < cid < 1 << 63 and [m.confirm_id for m in got] == [cid, cid]
    put = st.put("q", b"d", confirm_id=ids.AUTO)
    assert put.confirm_id not in (None, cid)
    lock, locked = st.browse_lock("q", lock_id="auto")
    assert 0 < lock < 1 << 63 and [m.lock_id for m in locked] == [lock]
    assert (st.confirm("q", cid), st.confirm("q", put.confirm_id), st.unlock("q", lock)) == (2, 1, 1)


def test_auto_never_draws_an_id_that_is_pending_or_reserved(st, clock, monkeypatch):
    st.put("q", b"a")
    st.put("q", b"b")
    st.get("q", wait=0, confirm_id=11)
    st.get("q", wait=0, confirm_id=12, lease=1)
    clock.advance(2)
    st.sweep()  # 12 lapsed: reserved
    draws = iter([11, 12, 0, 13])
    monkeypatch.setattr(ids, "random_id", lambda: next(draws))
    assert st.get("q", wait=0, confirm_id="auto").confirm_id == 13


@pytest.mark.parametrize("bad", [0, -1, 1 << 63, "AUTO", "7", 1.5, True])
def test_a_bad_id_is_an_invalid_argument(st, bad):
    st.put("q", b"a")
    for call in (lambda: st.get("q", wait=0, confirm_id=bad), lambda: st.put("q", b"x", confirm_id=bad),
                 lambda: st.browse_lock("q", lock_id=bad)):
        with pytest.raises(errors.InvalidArgument):
            call()


def test_check_reports_a_lapse_record_that_would_never_be_forgotten(tmp_path, clock):
    with Store.open(tmp_path / "qm", create=True, clock=clock) as st:
        st.create_queue("q")
        st.put("q", b"a")
        st.get("q", wait=0, confirm_id=3, lease=1)
        clock.advance(2)
        st.sweep()
        assert st.check() == []

        def drop_time_entries(t):
            cur = t.lt.cursor(db=t.dbs["ids"])
            doomed = [bytes(k) for k in cur.iternext(values=False) if k[:1] == b"T"]
            for k in doomed:
                t.lt.delete(k, db=t.dbs["ids"])
        st._write(drop_time_entries, maintain=False)
        assert [p.split(":", 1)[1] for p in st.check()] == [
            " its time-ordered entry is missing, so it is never forgotten"]


def test_an_unconfirmed_put_that_expires_is_dropped_not_dead_lettered(st, clock):
    # it was never put (MQe: hidden from every action but confirm and undo): it became an
    # ordinary dead letter that redrive delivered, while its producer's confirm exited 4, and
    # was counted expired and dead-lettered by a queue that never counted it put
    st.put("q", b"never confirmed", confirm_id=5, ttl=1)
    clock.advance(2)
    st.sweep()
    with pytest.raises(errors.ConfirmIdLapsed) as told:
        st.confirm("q", 5)
    assert told.value.message == (f"the messages under confirm id 5 expired at {when(clock.now)}; its message was "
                                  "dropped (an unconfirmed put, or a message sent without dead-lettering, is not "
                                  "dead-lettered)")
    assert st.browse("q", states="all") == [] and st.browse(DEAD_LETTER, states="all") == []
    totals = {s.name: s.totals for s in st.stats()}
    assert totals["q"]["put_messages"] == totals["q"]["expired"] == totals["q"]["dead_lettered"] == 0
    assert st.check() == []
