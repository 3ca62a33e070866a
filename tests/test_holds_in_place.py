"""A plain get holds its batch *in place* (store/holders.py): the positions and records stay,
one row lists them. Every reader must then see those messages exactly as it saw messages held
in `msg`: in flight under the get's token, never available, counted once. These tests look at
the store from inside `deliver` (no write transaction is open there, so the same handle may
read and write) and from a second process."""

import json
import subprocess
import sys
import textwrap

import pytest

from store import NewMessage, errors, holders


def fill(st, n, queue="q", **kw):
    return st.put_many(queue, [NewMessage(b"m%03d" % i, **kw) for i in range(n)])


def in_delivery(st, count, look, queue="q"):
    """Run `look(found)` while a get of `count` messages delivers them; returns what it got."""
    seen = {}

    def deliver(found):
        seen["result"] = look(found)

    st.get_many(queue, count, deliver=deliver)
    return seen["result"]


def test_held_messages_are_in_flight_to_every_reader_and_counted_once(st):
    fill(st, 10)

    def look(found):
        everything = st.browse("q", states="all")
        info = st.queue_info("q")
        stats = next(s for s in st.stats() if s.name == "q")
        return found, everything, st.browse("q"), info, stats, st.inflight("q"), st.check()

    found, everything, available, info, stats, inflight, problems = in_delivery(st, 4, look)
    held = [m for m in everything if m.state == "get-unconfirmed"]
    assert [m.msg_id for m in held] == [m.msg_id for m in found]
    assert len({m.confirm_id for m in held}) == 1 and held[0].confirm_id is not None
    assert all(m.since is not None for m in held)
    assert [m.body for m in available] == [b"m%03d" % i for i in range(4, 10)]
    assert (info.depth, info.available) == (10, 6)
    assert stats.depth == 10 and stats.by_state["get-unconfirmed"] == 4 and stats.by_state["available"] == 6
    assert [m.msg_id for m in inflight] == [m.msg_id for m in found]
    assert problems == []
    assert [m.body for m in st.browse("q")] == [b"m%03d" % i for i in range(4, 10)]
    assert st.queue_info("q").depth == 6


def test_a_second_get_during_a_delivery_takes_the_next_messages_not_the_held_ones(st):
    fill(st, 10)

    def look(found):
        inner = st.get_many("q", 3, deliver=lambda msgs: None)   # a held get, in place too
        plain = st.get_many("q", 2)                              # the library's one-commit get
        return found, inner, plain

    found, inner, plain = in_delivery(st, 4, look)
    bodies = [m.body for m in found + inner + plain]
    assert bodies == [b"m%03d" % i for i in range(9)]
    assert [m.body for m in st.browse("q", states="all")] == [b"m009"]


def test_an_exact_id_of_a_held_message_is_already_received_and_a_replay_is_not_a_copy(st):
    stored = fill(st, 3)

    def look(found):
        with pytest.raises(errors.AlreadyReceived):
            st.get("q", msg_id=stored[0].msg_id, wait=0)
        with pytest.raises(errors.AlreadyReceived):
            st.get("q", lookup_id=stored[1].lookup_id, wait=0)
        # what the get is delivering is leaving: a pipe into another queue stores it
        return st.import_messages("q2", found, create=True)

    imported = in_delivery(st, 2, look)
    assert len(imported) == 2 and not imported.skipped
    assert [m.body for m in st.browse("q2")] == [b"m000", b"m001"]


def test_a_purge_during_a_delivery_leaves_the_held_messages_to_the_delivery(st):
    # the four on their way out are the get's: it removes them once delivered (a purge that
    # counted them as removed had them delivered all the same)
    fill(st, 6)

    def look(found):
        return st.purge_queue("q"), st.check()

    purged, problems = in_delivery(st, 4, look)
    assert purged == 2 and list(purged.delivering.values()) == [4] and problems == []
    info = st.queue_info("q")
    assert (info.depth, info.bytes, info.available) == (0, 0, 0)
    assert st.browse("q", states="all") == []


def test_an_undelivered_part_goes_back_in_place_in_queue_order(st):
    fill(st, 5, priority=3)
    st.put("q", b"high", priority=6)

    def deliver(found):
        exc = BrokenPipeError()
        exc.delivered = 2
        raise exc

    with pytest.raises(BrokenPipeError):
        st.get_many("q", 4, deliver=deliver)
    assert [m.body for m in st.browse("q")] == [b"m001", b"m002", b"m003", b"m004"]
    assert {m.backouts for m in st.browse("q")} == {0}


def test_expiry_and_sweep_leave_held_messages_alone_until_the_hold_ends(st, clock):
    fill(st, 3, ttl=5)

    def look(found):
        clock.advance(10)
        return st.sweep().expired, [m.state for m in st.browse("q", states="all")]

    expired, states = in_delivery(st, 2, look)
    assert expired == 1 and states == ["get-unconfirmed", "get-unconfirmed"]
    assert st.browse("q", states="all") == []


def test_a_store_scan_shows_held_messages_in_flight(st, tmp_path):
    pytest.importorskip("pyarrow")
    fill(st, 5)
    # the pipeline reads a store from other processes (Spark's workers): so does this test
    script = textwrap.dedent(f"""
        import json
        from store.analytics import scan
        from store.analytics.columns import MESSAGE_COLUMNS
        wanted = [c for c in MESSAGE_COLUMNS if c[0] in ("msg_id", "state")]
        seen = []
        # in ranges and batches of any size: a batch's holds are found by its records' keys
        for per_range, batch_rows in ((250_000, 8192), (2, 1), (2, 2), (3, 2), (1, 3)):
            rows = [d for r in scan.plan([{str(tmp_path / "qm")!r}], ["q"], per_range)
                    for b in scan.read_range(r, wanted, batch_rows) for d in b.to_pylist()]
            seen.append(sorted((d["msg_id"], d["state"]) for d in rows))
        print(json.dumps(seen))
    """)

    def look(found):
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return found, [[tuple(row) for row in rows] for rows in json.loads(out.stdout)]

    found, seen = in_delivery(st, 2, look)
    held = {m.msg_id for m in found}
    want = sorted((m.msg_id, "get-unconfirmed" if m.msg_id in held else "available")
                  for m in st.browse("q", states="all") + found)
    assert seen == [want] * 5


def test_check_finds_a_hold_naming_a_message_that_is_not_there(st):
    fill(st, 3)

    def look(found):
        from store import holders
        with st._env.begin(write=True) as lt:
            key, value = next(iter(lt.cursor(db=st._dbs["holders"])))
            missing = holders.PLACE.pack(7 - 4, found[-1].seq + 1000)
            lt.put(key, bytes(value) + missing, db=st._dbs["holders"])
        problems = st.check()
        with st._env.begin(write=True) as lt:  # put it right, so the fixture's check passes
            lt.put(key, bytes(value), db=st._dbs["holders"])
        return problems

    problems = in_delivery(st, 2, look)
    assert any("no such position" in p for p in problems), problems


# ---- get_batches: a batch's removal shares the next batch's hold commit ----------------------

def test_get_batches_delivers_every_message_once_in_order(st):
    fill(st, 2500)
    batches = []
    assert st.get_batches("q", batches.append, batch=1000) == 2500
    assert [len(b) for b in batches] == [1000, 1000, 500]
    assert [m.body for b in batches for m in b] == [b"m%03d" % i for i in range(2500)]
    assert st.queue_info("q").depth == 0 and st.browse("q", states="all") == []
    with pytest.raises(errors.Timeout):
        st.get_batches("q", batches.append)


def test_get_batches_stops_at_its_limit(st):
    fill(st, 30)
    batches = []
    assert st.get_batches("q", batches.append, limit=25, batch=10) == 25
    assert [len(b) for b in batches] == [10, 10, 5]
    assert [m.body for m in st.browse("q")] == [b"m%03d" % i for i in range(25, 30)]


def test_get_batches_whose_delivery_fails_keeps_what_was_not_delivered(st):
    fill(st, 25)
    seen = []

    def deliver(found):
        seen.append(len(found))
        if len(seen) == 2:  # the reader went away three messages into the second batch
            exc = BrokenPipeError()
            exc.delivered = 3
            raise exc

    with pytest.raises(BrokenPipeError):
        st.get_batches("q", deliver, batch=10)
    assert seen == [10, 10]
    assert [m.body for m in st.browse("q")] == [b"m%03d" % i for i in range(13, 25)]
    assert {m.backouts for m in st.browse("q")} == {0}


def test_a_queue_is_not_deleted_under_get_batches_delivering_it(st):
    # each batch's removal is committed with the next one's hold: while the get runs, some of
    # the queue's messages are always on their way out, and a delete would count them deleted
    fill(st, 25)
    seen, refused = [], []

    def deliver(found):
        seen.append(len(found))
        with pytest.raises(errors.AlreadyReceived) as exc:
            st.delete_queue("q")
        refused.append(str(exc.value))

    assert st.get_batches("q", deliver, batch=10) == 25
    assert seen == [10, 10, 5] and all("being delivered" in text for text in refused)
    assert st.delete_queue("q") == 0
    assert st._read(holders.holds) == []
    assert st.check() == []


def test_get_batches_killed_while_delivering_a_batch_has_removed_the_ones_before(tmp_path):
    from store import Store
    path = tmp_path / "qm"
    with Store.open(path, create=True) as st:
        st.create_queue("q")
        fill(st, 30)
    script = textwrap.dedent(f"""
        import sys, time
        from store import Store
        st = Store.open({str(path)!r})
        def deliver(found):
            print(",".join(m.body.decode() for m in found), flush=True)
            if found[0].body == b"m020":
                time.sleep(600)
        st.get_batches("q", deliver, batch=10)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        printed = [proc.stdout.readline().decode().strip() for _ in range(3)]
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert printed[-1].startswith("m020")
    with Store.open(path) as st:
        st.sweep()  # the dead holder's batch goes back
        left = [m.body.decode() for m in st.browse("q", states="all")]
        assert st.check() == []
    # the first two batches were printed whole and removed; the third, held, is back in order
    assert left == [f"m{i:03d}" for i in range(20, 30)]
