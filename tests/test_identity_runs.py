"""The msg_id and unique-id indexes kept as runs (store/identity.py): lookups find exactly the
messages that exist, runs go when their last message goes, and `check` holds them to the records."""

import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st_

from store import queue_counters
from store import NewMessage, Store, errors, identity, keys
from store.records import parse_msg_id


def run_entries(store: Store) -> dict[bytes, list[tuple]]:
    """The msg_id (M and N) and unique-id (U and V) entries of a store, parsed, by kind."""
    out: dict[bytes, list[tuple]] = {keys.MSGID: [], keys.UNIQ: []}
    with store._env.begin() as lt:
        for key, value in lt.cursor(db=store._dbs["idx"]):
            if key[:1] in identity.KIND:
                out[identity.KIND[key[:1]]].append(identity.parse_run(bytes(key), bytes(value)))
    return out


def find(store: Store, msg_id: str) -> list[bytes]:
    from store.write import Write
    origin, n = parse_msg_id(msg_id)
    with store._env.begin() as lt:
        t = Write(lt, store._dbs, store._now())
        return [m.body for m in t.by_msg_id(origin, n)]


def test_a_message_put_alone_has_entries_of_its_own_and_a_batch_a_run(st):
    st.put("q", b"alone")
    st.put_many("q", [NewMessage(b"a"), NewMessage(b"b"), NewMessage(b"c")])
    with st._env.begin() as lt:
        tags = sorted((bytes(k[:1]), len(v)) for k, v in lt.cursor(db=st._dbs["idx"]))
    assert tags == [(keys.MSGID, 5), (keys.MSGID_RUN, 7), (keys.UNIQ, 5), (keys.UNIQ_RUN, 7)]


def test_a_batch_is_one_run_per_max_run_messages(st):
    count = 2 * identity.MAX_RUN + 88
    put = st.put_many("q", [NewMessage(b"%d" % i) for i in range(count)])
    runs = run_entries(st)
    assert [r[5] for r in runs[keys.MSGID]] == [identity.MAX_RUN, identity.MAX_RUN, 88]
    assert [r[5] for r in runs[keys.UNIQ]] == [identity.MAX_RUN, identity.MAX_RUN, 88]
    for i in (0, 1, identity.MAX_RUN - 1, identity.MAX_RUN, identity.MAX_RUN + 1, count - 1):
        assert find(st, put[i].msg_id) == [b"%d" % i]
        assert [m.body for m in st.browse("q", msg_id=put[i].msg_id)] == [b"%d" % i]


def test_priorities_split_runs_and_each_message_is_found(st):
    put = st.put_many("q", [NewMessage(b"%d" % i, priority=i % 3) for i in range(30)])
    assert len(run_entries(st)[keys.MSGID]) == 30  # every neighbour has another priority
    for m in put:
        assert st.get("q", wait=0, msg_id=m.msg_id).body == m.body
    assert run_entries(st) == {keys.MSGID: [], keys.UNIQ: []}


def test_a_run_stays_while_one_of_its_messages_does(st):
    put = st.put_many("q", [NewMessage(b"%d" % i) for i in range(10)])
    for i in (3, 0, 9, 5):
        st.get("q", wait=0, msg_id=put[i].msg_id)
        with pytest.raises(errors.MessageNotFound):
            st.get("q", wait=0, msg_id=put[i].msg_id)
        assert st.check() == []
    assert len(run_entries(st)[keys.MSGID]) == 1
    assert [m.body for m in st.get_many("q", 100)] == [b"%d" % i for i in (1, 2, 4, 6, 7, 8)]
    assert run_entries(st) == {keys.MSGID: [], keys.UNIQ: []}


def test_in_flight_messages_keep_their_run(st):
    put = st.put_many("q", [NewMessage(b"a"), NewMessage(b"b")])
    st.get("q", wait=0, confirm_id=7)          # a: get-unconfirmed, in the held table
    st.get("q", wait=0, msg_id=put[1].msg_id)  # b: gone
    assert len(run_entries(st)[keys.MSGID]) == 1  # a still holds the run
    with pytest.raises(errors.AlreadyReceived):
        st.get("q", wait=0, msg_id=put[0].msg_id)
    st.confirm("q", 7)
    assert run_entries(st) == {keys.MSGID: [], keys.UNIQ: []}


def replayed(store: Store, queue: str, messages: list) -> None:
    """Store `messages` again in `queue` with their msg_ids and later put times: what a store
    restored from a backup holds beside a replay of the messages put after the backup."""
    later = [replace(m, put_time=m.put_time + 10_000_000, props=dict(m.props)) for m in messages]
    assert len(store.import_messages(queue, later)) == len(messages)


def test_messages_that_repeat_a_msg_id_have_runs_of_their_own(st):
    st.create_queue("other")
    put = st.put_many("q", [NewMessage(b"%d" % i) for i in range(5)])
    replayed(st, "other", put)
    assert find(st, put[2].msg_id) == [b"2", b"2"]
    assert st.get("other", wait=0, msg_id=put[2].msg_id).body == b"2"
    assert st.get("q", wait=0, msg_id=put[2].msg_id).body == b"2"
    assert find(st, put[2].msg_id) == []
    assert find(st, put[3].msg_id) == [b"3", b"3"]


def test_a_lookup_walks_back_past_a_later_run_of_one(st):
    st.create_queue("other")
    put = st.put_many("q", [NewMessage(b"%d" % i) for i in range(20)])
    replayed(st, "other", [put[5]])  # a run of one at n+5, later seq
    assert len(run_entries(st)[keys.MSGID]) == 2
    assert find(st, put[15].msg_id) == [b"15"]
    assert find(st, put[5].msg_id) == [b"5", b"5"]
    assert st.get("q", wait=0, msg_id=put[19].msg_id).body == b"19"


def test_gets_by_unique_id_use_the_runs(st):
    st.create_queue("other")
    put = st.put_many("q", [NewMessage(b"%d" % i) for i in range(300)])
    (copy,) = [m for batch in st.move("q", "other", unique_id=put[7].unique_id, copy=True) for m in batch]
    assert copy.unique_id != put[7].unique_id  # a copy is a new message: a run of one, later seq
    assert [m.body for m in st.browse("q", unique_id=put[299].unique_id)] == [b"299"]
    assert [m.body for m in st.browse("other", unique_id=put[7].unique_id)] == []
    assert st.get("other", wait=0, unique_id=copy.unique_id).body == b"7"
    assert st.get("q", wait=0, unique_id=put[7].unique_id).body == b"7"
    with pytest.raises(errors.MessageNotFound):
        st.get("q", wait=5, unique_id=put[7].unique_id)  # an exact id does not wait
    lock, locked = st.browse_lock("q", unique_id=put[8].unique_id)
    assert [m.body for m in locked] == [b"8"]
    with pytest.raises(errors.AlreadyReceived):
        st.get("q", wait=0, unique_id=put[8].unique_id)
    st.unlock("q", lock)


def test_entries_of_a_store_from_before_runs_still_work(st):
    """Older stores gave every message its own M and U entries, batches included."""
    put = st.put_many("q", [NewMessage(b"%d" % i) for i in range(4)])
    with st._env.begin(write=True) as lt:
        idx = st._dbs["idx"]
        for kind in (keys.MSGID, keys.UNIQ):
            layout = keys.ORIGIN_N_SEQ_KEY if kind == keys.MSGID else keys.ORIGIN_TIME_SEQ_KEY
            for (tag, origin, first, seq, location, count) in run_entries(st)[kind]:
                lt.delete(layout.pack(tag, origin, first, seq), db=idx)
                for k in range(count):
                    lt.put(layout.pack(kind, origin, first + k, seq + k), location, db=idx)
    assert st.check() == []
    assert len(run_entries(st)[keys.MSGID]) == 4
    assert st.get("q", wait=0, msg_id=put[2].msg_id).body == b"2"
    assert [m.body for m in st.get_many("q", 10)] == [b"0", b"1", b"3"]
    assert run_entries(st) == {keys.MSGID: [], keys.UNIQ: []}


@pytest.mark.parametrize("harm", ["drop", "shorten", "orphan", "relocate"])
def test_check_reports_a_damaged_run(st, harm):
    put = st.put_many("q", [NewMessage(b"%d" % i) for i in range(6)])
    (tag, origin, first, seq, location, count), = run_entries(st)[keys.MSGID]
    key = keys.ORIGIN_N_SEQ_KEY.pack(tag, origin, first, seq)
    with st._env.begin(write=True) as lt:
        idx = st._dbs["idx"]
        if harm == "drop":
            lt.delete(key, db=idx)
        elif harm == "shorten":
            lt.put(key, location + (count - 2).to_bytes(2, "big"), db=idx)
        elif harm == "orphan":
            lt.put(keys.ORIGIN_N_SEQ_KEY.pack(keys.MSGID, origin, first + 100, seq + 100), location, db=idx)
        else:
            lt.put(key, keys.location(put[0].qid, 0) + count.to_bytes(2, "big"), db=idx)
    problems = st.check()
    expected = {"drop": "msg_id index: the entry of message seq",
                "shorten": "msg_id index: the entry of message seq",
                "orphan": "points at no matching message",
                "relocate": "gives other ids or a wrong location"}[harm]
    assert problems and all(expected in p for p in problems), problems
    with st._env.begin(write=True) as lt:  # leave the fixture a store that checks
        lt.drop(st._dbs["idx"], delete=False)
        lt.drop(st._dbs["pos"], delete=False)
        lt.drop(st._dbs["msg"], delete=False)
        lt.put(keys.qstats_key(put[0].qid), keys.QSTATS.pack(0, 0), db=st._dbs["meta"])
        lt.delete(queue_counters.counters_key(put[0].qid), db=st._dbs["meta"])  # counted again when used
        counters = st._read(lambda t: t.counters)
        counters.count = counters.bytes = 0
        lt.put(keys.META_COUNTERS, counters.encode(), db=st._dbs["meta"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st_.lists(st_.tuples(st_.sampled_from(["put", "get", "by_id", "delete", "two_phase"]),
                                st_.integers(1, 40), st_.integers(0, 7)), min_size=1, max_size=25),
       seed=st_.integers(0, 2**16))
def test_runs_agree_with_the_messages_under_any_mix_of_puts_and_removals(tmp_path_factory, ops, seed):
    rnd = random.Random(seed)
    with Store.open(tmp_path_factory.mktemp("runs") / "qm", create=True) as st:
        st.create_queue("q")
        alive: dict[str, bytes] = {}
        gone: list[str] = []
        confirm = 0
        for op, size, priority in ops:
            if op == "put":
                batch = [NewMessage(b"%d" % rnd.randrange(10**9), priority=rnd.choice((priority, 3)))
                         for _ in range(size)]
                for m in st.put_many("q", batch):
                    alive[m.msg_id] = m.body
            elif not alive:
                continue
            elif op == "get":
                for m in st.get_many("q", size):
                    gone.append(m.msg_id)
                    del alive[m.msg_id]
            elif op == "two_phase":
                confirm += 1
                got = st.get_many("q", size, confirm_id=confirm)
                st.confirm("q", confirm)
                for m in got:
                    gone.append(m.msg_id)
                    del alive[m.msg_id]
            else:
                msg_id = rnd.choice(sorted(alive))
                if op == "by_id":
                    st.get("q", wait=0, msg_id=msg_id)
                else:
                    st.delete("q", msg_id)
                gone.append(msg_id)
                del alive[msg_id]
            assert st.check() == []
        for msg_id, body in alive.items():
            assert find(st, msg_id) == [body]
        for msg_id in gone[-20:]:
            assert find(st, msg_id) == []
        st.get_many("q", 10**6) if alive else None
        assert run_entries(st) == {keys.MSGID: [], keys.UNIQ: []}
