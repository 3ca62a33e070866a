"""When a message was last put on each queue and last got from it (IBM MQ's LPUTTIME and
LGETTIME), kept in the store by the commits that put or get: what counts as a put and as a get,
and that deleting a queue leaves nothing behind."""

from store import NewMessage

US = 1_000_000


def times(st, queue="q"):
    q = st.queue_info(queue)
    return q.last_put, q.last_get


def us(clock):
    return int(clock.now * US)


def test_a_new_queue_has_neither(st):
    assert times(st) == (None, None)
    assert {s.name: (s.last_put, s.last_get) for s in st.stats()}["q"] == (None, None)


def test_puts_and_gets_stamp_their_commit_time(st, clock):
    st.put_many("q", [NewMessage(b"a"), NewMessage(b"b"), NewMessage(b"c")])
    put_at = us(clock)
    assert times(st) == (put_at, None)
    clock.advance(5)
    st.get("q", wait=0)
    assert times(st) == (put_at, us(clock))
    clock.advance(5)
    st.put("q", b"d")
    assert times(st)[0] == us(clock)
    assert {s.name: (s.last_put, s.last_get) for s in st.stats()}["q"] == times(st)


def test_an_empty_put_is_not_a_put(st, clock):
    assert st.put_many("q", []) == []
    assert times(st) == (None, None)


def test_browse_locks_and_undone_gets_are_not_gets_a_confirmed_one_is(st, clock):
    st.put_many("q", [NewMessage(b"a"), NewMessage(b"b")])
    clock.advance(1)
    st.browse("q")
    lock, _ = st.browse_lock("q", limit=1)
    st.unlock("q", lock)
    st.get("q", wait=0, confirm_id=7)
    st.undo("q", confirm_id=7)
    assert times(st)[1] is None
    st.get("q", wait=0, confirm_id=8)
    clock.advance(2)
    assert times(st)[1] is None  # pending until confirmed (MQe two-phase get)
    st.confirm("q", 8)
    assert times(st)[1] == us(clock)


def test_a_two_phase_put_is_a_put_when_confirmed(st, clock):
    st.put("q", b"undone", confirm_id=5)
    st.undo("q", confirm_id=5)
    assert times(st) == (None, None)
    st.put("q", b"kept", confirm_id=6)
    clock.advance(2)
    assert times(st) == (None, None)  # pending until confirmed (MQe two-phase put)
    st.confirm("q", 6)
    assert times(st) == (us(clock), None)


def test_a_transactional_put_or_get_counts_when_it_commits(tmp_path, clock):
    from store import Store

    with Store.open(tmp_path / "s", create=True, clock=clock) as st:
        st.create_queue("tq", transactional=True)
        tx = st.tx_begin()
        st.put("tq", b"aborted", tx=tx)
        st.tx_abort(tx)
        assert times(st, "tq") == (None, None)  # an aborted put never was put
        tx = st.tx_begin()
        st.put("tq", b"x", tx=tx)
        clock.advance(2)
        assert times(st, "tq") == (None, None)  # nor is a put before its commit
        st.tx_commit(tx)
        assert times(st, "tq") == (us(clock), None)
        clock.advance(3)
        tx = st.tx_begin()
        st.get("tq", wait=0, tx=tx)
        assert times(st, "tq")[1] is None
        clock.advance(1)
        st.tx_commit(tx)
        assert times(st, "tq")[1] == us(clock)
        assert st.check() == []


def test_expiry_purge_and_delete_are_not_gets(st, clock):
    st.put("q", b"short", ttl=1)
    st.put("q", b"kept")
    put_at = us(clock)
    clock.advance(2)
    st.sweep()
    st.purge_queue("q")
    assert times(st) == (put_at, None)
    assert times(st, "dead-letter")[0] == us(clock)  # the expired one was put there


def test_a_journal_queue_is_put_to_when_its_queue_is_got_from(st, clock):
    st.set_queue("q", journal=True)
    st.put("q", b"x")
    clock.advance(1)
    st.get("q", wait=0)
    assert times(st, "q;journal") == (us(clock), None)


def test_deleting_a_queue_deletes_its_times_and_a_new_one_starts_afresh(st, clock):
    st.create_queue("gone")
    st.put("gone", b"x")
    st.get("gone", wait=0)
    st.delete_queue("gone")
    assert st.check() == []
    st.create_queue("gone")
    assert times(st, "gone") == (None, None)
