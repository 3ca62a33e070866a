"""Store.import_messages: a msg_id is stored once; `new_ids` makes copies (docs/store-api.md)."""

import threading

import pytest

from store import DEAD_LETTER, Imported, Message, NewMessage, Store, errors
from store.records import MAX_US as MAX_TIME


def dump(st, queues=None):
    """The store's messages as export writes them, read back as new Message objects."""
    return [Message.from_dict(m.to_dict()) for m in st.export_messages(queues)]


def identities(st):
    """(queue, msg_id, state) of every message in the store, hidden ones too."""
    return sorted((m.queue, m.msg_id, m.state) for m in st.export_messages(hidden=True))


@pytest.fixture
def other(tmp_path):
    store = Store.open(tmp_path / "other", create=True, name="other")
    yield store
    assert store.check() == []
    store.close()


def test_import_skips_a_message_whose_msg_id_is_stored_already(st):
    st.create_queue("elsewhere")
    st.put_many("q", [NewMessage(b"a"), NewMessage(b"b")])
    before, seq = identities(st), st.info().sequential_id
    records = dump(st)
    done = st.import_messages("elsewhere", records)
    assert isinstance(done, Imported) and list(done) == [] and done.skipped == records
    assert identities(st) == before and st.info().sequential_id == seq  # not even an id used


def test_import_stores_the_new_records_of_a_batch_and_skips_the_rest_in_input_order(st, other):
    other.create_queue("q")
    for body in (b"a", b"b", b"c"):
        other.put("q", body)
    records = dump(other)
    st.import_messages("q", [Message.from_dict(records[1].to_dict())])
    done = st.import_messages("q", records)
    assert [m.body for m in done] == [b"a", b"c"] and [m.body for m in done.skipped] == [b"b"]
    assert [m.msg_id for m in st.browse("q")] == [records[1].msg_id, records[0].msg_id, records[2].msg_id]


def test_a_msg_id_repeated_within_one_batch_is_stored_once(st, other):
    other.create_queue("q")
    other.put("q", b"a")
    (record,) = dump(other)
    twice = [record, Message.from_dict(record.to_dict())]
    done = st.import_messages("q", twice)
    assert [m.msg_id for m in done] == [record.msg_id] and done.skipped == [twice[1]]
    assert st.queue_info("q").depth == 1


@pytest.mark.parametrize("state", ["put-unconfirmed", "get-unconfirmed", "locked-browse", "tx-locked",
                                   "dead-lettered", "journal copy"])
def test_a_msg_id_held_in_any_queue_or_state_counts_as_stored(st, clock, state):
    st.create_queue("t", transactional=True)
    st.create_queue("j", journal=True)
    if state == "put-unconfirmed":
        m = st.put("q", b"x", confirm_id=5)
    elif state == "get-unconfirmed":
        m = st.put("q", b"x")
        st.get("q", wait=0, confirm_id=5)
    elif state == "locked-browse":
        m = st.put("q", b"x")
        st.browse_lock("q", lock_id=6)
    elif state == "tx-locked":
        m = st.put("t", b"x", tx=st.tx_begin())
    elif state == "dead-lettered":
        m = st.put("q", b"x", ttl=1)
        clock.advance(2)
        st.sweep()
        assert [d.msg_id for d in st.browse(DEAD_LETTER)] == [m.msg_id]
    else:
        m = st.put("j", b"x")
        st.get("j", wait=0)
        assert [d.msg_id for d in st.browse("j;journal")] == [m.msg_id]
    before = identities(st)
    record = Message(b"again", origin=m.origin, msg_n=m.msg_n, put_time=m.put_time)
    assert list(st.import_messages("q", [record])) == []
    assert identities(st) == before


def test_a_message_removed_from_the_store_can_be_imported_again(st):
    st.put("q", b"x")
    records = dump(st)
    st.get("q", wait=0)
    assert [m.body for m in st.import_messages("q", records)] == [b"x"]


def test_re_running_an_import_changes_nothing(st, other):
    other.create_queue("orders")
    other.put_many("orders", [NewMessage(str(i).encode(), priority=i % 8) for i in range(2500)])
    records = [m.to_dict() for m in other.export_messages()]
    for i in range(0, len(records), 1000):  # as `mqcli import` does, 1,000 a commit
        st.import_messages("orders", [Message.from_dict(r) for r in records[i:i + 1000]], create=True)
    first = [m.to_dict() for m in st.export_messages()]
    info = st.info()
    for i in range(0, len(records), 1000):
        again = st.import_messages("orders", [Message.from_dict(r) for r in records[i:i + 1000]], create=True)
        assert len(again) == 0 and len(again.skipped) == min(1000, len(records) - i)
    assert [m.to_dict() for m in st.export_messages()] == first  # lookup ids and all
    assert (st.info().sequential_id, st.info().messages) == (info.sequential_id, 2500)
    assert st.check() == []


def test_two_threads_importing_one_dump_at_once_store_each_message_once(st, other):
    other.create_queue("q")
    other.put_many("q", [NewMessage(b"%d" % i) for i in range(3000)])
    records = [m.to_dict() for m in other.export_messages()]
    stored: list[int] = []

    def load() -> None:
        n = 0
        for i in range(0, len(records), 100):
            n += len(st.import_messages("q", [Message.from_dict(r) for r in records[i:i + 100]]))
        stored.append(n)

    threads = [threading.Thread(target=load) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sum(stored) == 3000
    ids = [m.msg_id for m in st.browse("q")]
    assert len(ids) == len(set(ids)) == 3000


def test_new_ids_stores_copies_with_this_queue_managers_ids(st, other):
    other.create_queue("q")
    original = other.put("q", b"a", correl_id="c-1", props={"k": "v"}, label="L", priority=6)
    st.put("q", b"local")
    records = dump(other) + dump(other)  # the same record twice: two copies
    done = st.import_messages("q", records, new_ids=True)
    assert done.skipped == [] and len(done) == 2
    info = st.info()
    for copy in done:
        assert copy.msg_id.startswith(info.guid + "\\") and copy.msg_id != original.msg_id
        assert copy.put_time > original.put_time and copy.unique_id.startswith(info.guid + ":")
        assert (copy.body, copy.correl_id, copy.props, copy.label, copy.priority) == (b"a", "c-1", {"k": "v"}, "L", 6)
    assert len({m.msg_id for m in st.browse("q")}) == 3
    assert len({m.unique_id for m in st.browse("q")}) == 3
    (found,) = st.browse("q", msg_id=done[1].msg_id)  # the index knows the new ids
    assert found.body == b"a"


def test_new_ids_copies_a_message_of_the_same_store(st):
    m = st.put("q", b"a")
    (copy,) = st.import_messages("q", dump(st), new_ids=True)
    assert copy.msg_id != m.msg_id and copy.unique_id != m.unique_id
    assert [x.body for x in st.browse("q")] == [b"a", b"a"]


def test_a_skipped_record_is_not_checked_against_the_quota(st):
    st.create_queue("small", quota=1)
    m = st.put("small", b"x")
    record = Message(b"x", origin=m.origin, msg_n=m.msg_n, put_time=m.put_time)
    assert list(st.import_messages("small", [record])) == []
    with pytest.raises(errors.QueueQuotaExceeded):
        st.import_messages("small", [record], new_ids=True)
    assert st.queue_info("small").depth == 1


def test_the_skip_finds_every_id_a_run_covers_and_none_past_its_end(st, other):
    other.create_queue("q")
    other.put_many("q", [NewMessage(b"%d" % i) for i in range(300)])  # ids 1..300: runs of 256 and 44
    records = dump(other)
    origin = records[0].origin
    assert [m.msg_n for m in records] == list(range(1, 301))
    st.import_messages("q", records)
    st.get("q", wait=0, msg_id=records[99].msg_id)  # n 100 leaves, its run stays for the others
    put_time = {m.msg_n: m.put_time for m in records}  # the same message: its msg_id and its put time
    for n, stored_already in [(1, True), (100, False), (255, True), (256, True), (257, True),
                              (300, True), (301, False), (557, False)]:
        probe = [Message(b"probe", origin=origin, msg_n=n, put_time=put_time.get(n, 1))]
        done = st.import_messages("q", probe)
        assert (len(done.skipped), len(done)) == ((1, 0) if stored_already else (0, 1)), n
    probe = [Message(b"probe", origin=origin, msg_n=n, put_time=put_time.get(n, 1)) for n in (299, 302, 300, 303)]
    assert [m.msg_n for m in st.import_messages("q", probe)] == [302, 303]
    # a msg_id given again to another message (a store restored from a backup): stored
    assert [m.msg_n for m in st.import_messages("q", [Message(b"other", origin=origin, msg_n=2, put_time=1)])] == [2]


def test_a_store_restored_from_a_backup_imports_the_messages_put_after_the_backup(tmp_path):
    # the restored store gives the msg_ids it gave after the backup again, to other messages;
    # importing a dump taken after the backup must store those, not take them for the new ones
    path = tmp_path / "store"
    with Store.open(path, create=True, name="qm") as st:
        st.create_queue("q")
        st.put_many("q", [NewMessage(b"a1"), NewMessage(b"a2")])
        st.backup(tmp_path / "backup")
        st.put_many("q", [NewMessage(b"a3"), NewMessage(b"a4")])
        later = dump(st)
    with Store.open(tmp_path / "backup") as restored:
        again = restored.put_many("q", [NewMessage(b"new3"), NewMessage(b"new4")])
        assert {m.msg_id for m in again} == {m.msg_id for m in later[2:]}  # the ids repeat
        done = restored.import_messages("q", later)
        assert [m.body for m in done] == [b"a3", b"a4"] and [m.body for m in done.skipped] == [b"a1", b"a2"]
        assert sorted(m.body for m in restored.browse("q")) == [b"a1", b"a2", b"a3", b"a4", b"new3", b"new4"]
        assert len({m.unique_id for m in restored.browse("q")}) == 6
        assert restored.import_messages("q", dump(restored)).skipped != []  # again: nothing new
        assert len(restored.browse("q")) == 6
        assert restored.check() == []


def test_importing_this_queue_managers_own_later_ids_moves_its_counters_past_them(tmp_path):
    path = tmp_path / "store"
    with Store.open(path, create=True, name="qm") as st:
        st.create_queue("q")
        st.put_many("q", [NewMessage(b"a1")])
        st.backup(tmp_path / "backup")
        st.put_many("q", [NewMessage(b"a2"), NewMessage(b"a3")])
        later = dump(st)
    with Store.open(tmp_path / "backup") as restored:
        assert [m.body for m in restored.import_messages("q", later)] == [b"a2", b"a3"]
        new = restored.put("q", b"new")
        assert new.msg_id not in {m.msg_id for m in later}
        assert new.unique_id not in {m.unique_id for m in later}
        assert len({m.msg_id for m in restored.browse("q")}) == 4


DAY_US = 86_400 * 1_000_000


def test_an_own_put_time_more_than_a_day_ahead_is_refused_and_moves_no_counter(st, clock):
    # an own message's put time moves the put-time counter (Write.keep_ids_ahead_of): one far
    # ahead would stamp every later put there, up to year 9999 where no put time can be written
    m = st.put("q", b"before")
    origin = m.origin
    now = int(clock() * 1_000_000)
    far = Message(b"far", origin=origin, msg_n=m.msg_n + 1, put_time=now + DAY_US + 1)
    ok = Message(b"ok", origin=origin, msg_n=m.msg_n + 2, put_time=now + 1)
    with pytest.raises(errors.BadData, match=r"message .*\\\d+: put_time \d{4}-.* is more than 24h ahead"):
        st.import_messages("q", [ok, far])
    assert [x.body for x in st.browse("q")] == [b"before"]  # the batch stored nothing
    assert st.put("q", b"after").put_time == now + 1  # stamped at the clock
    # with new ids the record's put time is not kept, so it is not refused
    (copy,) = st.import_messages("q", [Message(b"far", origin=origin, msg_n=9, put_time=MAX_TIME)], new_ids=True)
    assert copy.put_time == now + 2


def test_another_queue_managers_put_time_ahead_moves_no_counter_and_is_kept_by_the_library(st, clock):
    # (the command line refuses it as input: test_cli_transfer) the library stores it as it
    # came: its put time moves none of this store's counters
    now = int(clock() * 1_000_000)
    (kept,) = st.import_messages("q", [Message(b"far", origin=b"\x42" * 16, msg_n=7, put_time=now + 2 * DAY_US)])
    assert kept.put_time == now + 2 * DAY_US
    assert st.put("q", b"after").put_time == now  # the clock's, not after the far one's


def test_a_put_time_up_to_a_day_ahead_is_kept(st, clock):
    m = st.put("q", b"before")
    now = int(clock() * 1_000_000)
    (kept,) = st.import_messages("q", [Message(b"ahead", origin=m.origin, msg_n=m.msg_n + 1, put_time=now + DAY_US)])
    assert kept.put_time == now + DAY_US
    assert st.put("q", b"after").put_time == now + DAY_US + 1  # put times never repeat


def test_a_time_outside_what_iso_8601_writes_is_shown_as_the_nearest_end():
    from store.records import MIN_US, iso_time

    assert iso_time(MAX_TIME) == iso_time(MAX_TIME + 10**12) == "9999-12-31T23:59:59.999999Z"
    assert iso_time(MIN_US) == iso_time(MIN_US - 1) == "0001-01-01T00:00:00.000000Z"


def test_a_store_whose_put_time_counter_passed_year_9999_still_puts_and_shows(tmp_path):
    # a store an older version let an import move there: puts are stamped past what ISO-8601
    # writes, and each output shows them at its end instead of failing after the commit
    with Store.open(tmp_path / "qm", create=True, name="qm") as st:
        st.create_queue("q")
        st._write(lambda t: setattr(t.counters, "put_time", MAX_TIME + 10))
        m = st.put("q", b"late")
        assert m.to_dict()["put_time"] == "9999-12-31T23:59:59.999999Z"
        assert [x.to_dict()["put_time"] for x in st.export_messages()] == ["9999-12-31T23:59:59.999999Z"]
        assert st.check() == []
