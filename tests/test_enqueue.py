"""[MS-MQDMPR] 3.1.7.1.9 Enqueue Message: SequentialID, lookup ids, position order, status checks."""

import pytest

from store import NewMessage, Store, errors


def test_sequential_id_increments_once_per_enqueue(st):
    before = st.info().sequential_id
    st.put("q", b"a")
    st.put_many("q", [NewMessage(b"b"), NewMessage(b"c")])
    assert st.info().sequential_id == before + 3


def test_lookup_id_high_byte_is_zero_and_low_bytes_are_the_sequential_id(st):
    m = st.put("q", b"a", priority=6)
    assert m.lookup_id >> 56 == 0  # not transactional: high byte 0x00 ([MS-MQDMPR] 3.1.7.1.9)
    assert m.lookup_id & ((1 << 56) - 1) == st.info().sequential_id


def test_lookup_id_finds_the_message(st):
    st.put("q", b"a")
    m = st.put("q", b"b")
    assert st.browse("q", lookup_id=m.lookup_id)[0].body == b"b"
    assert st.get("q", wait=0, lookup_id=m.lookup_id).body == b"b"
    with pytest.raises(errors.MessageNotFound):
        st.get("q", wait=0, lookup_id=m.lookup_id)


def test_position_order_is_priority_high_to_low_then_arrival(st):
    for i, p in enumerate([3, 7, 0, 7, 3, 5]):
        st.put("q", f"{p}-{i}".encode(), priority=p)
    assert [m.body for m in st.browse("q")] == [b"7-1", b"7-3", b"5-5", b"3-0", b"3-4", b"0-2"]
    got = [st.get("q", wait=0).body for _ in range(6)]
    assert got == [b"7-1", b"7-3", b"5-5", b"3-0", b"3-4", b"0-2"]


def test_msg_ids_are_origin_guid_and_a_sequence(st):
    a = st.put("q", b"a")
    b = st.put("q", b"b")
    guid = st.info().guid
    assert a.msg_id == f"{guid}\\{int(a.msg_id.split(chr(92))[1])}"
    assert int(b.msg_id.split("\\")[1]) == int(a.msg_id.split("\\")[1]) + 1
    assert a.unique_id != b.unique_id and a.unique_id.startswith(guid)


def test_throttled_store_refuses_puts_with_status_2(st):
    st.set_qmgr(throttled=True)
    with pytest.raises(errors.Throttled) as info:
        st.put("q", b"a")
    assert info.value.exit_code == 8
    st.set_qmgr(throttled=False)
    st.put("q", b"a")


def test_store_quota_is_checked_before_queue_quota(st):
    st.set_qmgr(quota=10)
    st.create_queue("small", quota=5)
    with pytest.raises(errors.StoreQuotaExceeded) as info:
        st.put("small", b"x" * 11)  # exceeds both: status 2 wins ([MS-MQDMPR] 3.1.7.1.9 order)
    assert info.value.exit_code == 8
    with pytest.raises(errors.QueueQuotaExceeded) as info:
        st.put("small", b"x" * 6)
    assert info.value.exit_code == 7


def test_a_quota_error_says_the_use_before_the_batch_and_what_the_batch_adds(st):
    # the figures add up: what is used plus what the refused batch adds is over the quota
    st.create_queue("small", quota=25)
    st.put("small", b"x" * 5)
    with pytest.raises(errors.QueueQuotaExceeded) as info:
        st.put_many("small", [NewMessage(b"0123456789")] * 3)
    assert info.value.message == "the quota of queue 'small' (25 bytes) would be exceeded (5 used, 3 messages adding 30)"
    with pytest.raises(errors.QueueQuotaExceeded) as info:
        st.put("small", b"x" * 21)
    assert info.value.message == "the quota of queue 'small' (25 bytes) would be exceeded (5 used, message 21)"
    st.set_qmgr(quota=12)
    with pytest.raises(errors.StoreQuotaExceeded) as info:
        st.put_many("small", [NewMessage(b"0123")] * 2)
    assert info.value.message == "the store quota of 12 bytes would be exceeded (5 used, 2 messages adding 8)"
    assert st.queue_info("small").depth == 1


def test_queue_quota_counts_bytes_of_messages_in_the_queue(st):
    st.create_queue("small", quota=10)
    st.put("small", b"x" * 6)
    with pytest.raises(errors.QueueQuotaExceeded):
        st.put("small", b"x" * 5)
    st.get("small", wait=0)
    st.put("small", b"x" * 10)


def test_throttle_is_checked_before_queue_quota_and_expiry(st, clock):
    st.create_queue("small", quota=1)
    st.set_qmgr(throttled=True)
    with pytest.raises(errors.Throttled):
        st.put_many("small", [NewMessage(b"xx")])


def test_queue_quota_is_checked_before_expiry(st):
    from store.write import Write  # noqa: F401  (documented order: quota, then expiry)
    st.create_queue("small", quota=1)
    m = NewMessage(b"xx", ttl=1)
    with pytest.raises(errors.QueueQuotaExceeded):
        st.put_many("small", [m])


def test_an_already_expired_message_is_refused_with_status_3(st):
    with pytest.raises(errors.MessageExpired) as info:
        st.put_many("q", [NewMessage(b"a", expires=1)])
    assert info.value.exit_code == 9


def test_an_imported_message_that_expired_meanwhile_is_dead_lettered_as_expiry_would(st):
    from store.records import Message, iso_time
    record = st.put("q", b"a").to_dict()
    st.get("q", wait=0)
    record["expires"] = iso_time(0)
    m = Message.from_dict(record)
    done = st.import_messages("q", [m])
    assert list(done) == [] and done.expired == [m]
    (dead,) = st.browse("dead-letter")
    assert (dead.msg_id, dead.dead_letter_reason, dead.original_queue) == (m.msg_id, "expired", "q")
    assert st.queue_info("q").depth == 0
    assert st.check() == []


def test_a_failing_batch_stores_nothing(st):
    st.create_queue("small", quota=10)
    batch = [NewMessage(b"x" * 4) for _ in range(3)]
    with pytest.raises(errors.QueueQuotaExceeded):
        st.put_many("small", batch)
    assert st.queue_info("small").depth == 0
    assert st.info().sequential_id == 0


def test_put_to_a_missing_queue_is_queue_not_available(st):
    with pytest.raises(errors.QueueNotAvailable) as info:
        st.put("nope", b"a")
    assert info.value.exit_code == 6


@pytest.mark.parametrize("fields", [
    {"priority": 8}, {"priority": -1}, {"label": "x" * 251}, {"correl_id": "c" * 256},
    {"ttl": 0}, {"app_specific": 1 << 40},
])
def test_invalid_fields_are_refused(st, fields):
    with pytest.raises(errors.InvalidArgument):
        st.put("q", b"a", **fields)
    assert st.queue_info("q").depth == 0


def test_filters_use_the_indexes(st):
    a = st.put("q", b"a", correl_id="order-1", priority=2)
    st.put("q", b"b", correl_id="order-2", priority=2)
    st.put("q", b"c", correl_id="order-1", priority=6)
    assert [m.body for m in st.browse("q", correl_id="order-1")] == [b"c", b"a"]
    assert [m.body for m in st.browse("q", correl_id="order-1", priority=2)] == [b"a"]
    assert [m.body for m in st.browse("q", priority=2)] == [b"a", b"b"]
    assert [m.body for m in st.browse("q", msg_id=a.msg_id)] == [b"a"]
    assert st.get("q", wait=0, correl_id="order-2").body == b"b"
    with pytest.raises(errors.Timeout):
        st.get("q", wait=0, correl_id="order-2")


def test_a_copy_of_a_message_is_a_new_message_naming_the_original(st):
    st.create_queue("other")
    m = st.put("q", b"a", correl_id="c", props={"k": "v"})
    list(st.move("q", "other", copy=True))
    (copy,) = st.browse("other")
    assert copy.msg_id != m.msg_id and copy.unique_id != m.unique_id and copy.put_time > m.put_time
    assert (copy.body, copy.correl_id, copy.props) == (b"a", "c", {"k": "v", "mqcli.copy_of": m.msg_id})
    assert st.get("other", wait=0, msg_id=copy.msg_id).body == b"a"
    assert st.get("q", wait=0, msg_id=m.msg_id).body == b"a"
    later = st.put("q", b"b")  # the store's msg_id counter went past the copy's
    assert len({later.msg_id, copy.msg_id, m.msg_id}) == 3


def test_a_store_holding_copies_exports_and_imports_whole(st, tmp_path, clock):
    st.create_queue("other")
    st.put_many("q", [NewMessage(b"%d" % i) for i in range(3)])
    list(st.move("q", "other", copy=True))
    dump = [m for name in ("q", "other") for m in st.browse(name)]
    with Store.open(tmp_path / "new", create=True, clock=clock) as fresh:  # put times not ahead of its clock
        fresh.create_queue("q")
        fresh.create_queue("other")
        done = fresh.import_messages("q", dump[:3]), fresh.import_messages("other", dump[3:])
        assert [(len(d), len(d.skipped)) for d in done] == [(3, 0), (3, 0)]


def test_get_many_takes_up_to_count_in_one_commit(st):
    st.put_many("q", [NewMessage(str(i).encode()) for i in range(5)])
    assert [m.body for m in st.get_many("q", 3)] == [b"0", b"1", b"2"]
    assert [m.body for m in st.get_many("q", 10)] == [b"3", b"4"]
    with pytest.raises(errors.Timeout):
        st.get_many("q", 10)


def test_deliver_runs_before_the_removal_commits(st):
    st.put("q", b"a")

    def broken_output(messages):
        raise OSError("disk full")
    with pytest.raises(OSError):
        st.get("q", wait=0, deliver=broken_output)
    assert [m.body for m in st.browse("q")] == [b"a"]  # not lost


def test_queue_names_are_case_insensitive_and_shown_as_created(st):
    st.create_queue("Orders.EU")
    st.put("orders.eu", b"a")
    assert st.queue_info("ORDERS.EU").name == "Orders.EU"
    with pytest.raises(errors.QueueExists):
        st.create_queue("orders.eu")


@pytest.mark.parametrize("name", ["", "a b", "x" * 125, "semi;colon", "tab\t"])
def test_bad_queue_names_are_refused(st, name):
    with pytest.raises(errors.InvalidArgument):
        st.create_queue(name)


def test_queue_administration(st):
    q = st.create_queue("work", label="jobs", quota=100, journal=True, max_backouts=3)
    assert (q.label, q.quota, q.journal, q.max_backouts, q.transactional) == ("jobs", 100, True, 3, False)
    st.put("work", b"abc")
    st.put("work", b"d", confirm_id=4)
    info = st.set_queue("work", label="renamed", quota=0)
    assert (info.label, info.quota, info.depth, info.bytes, info.available) == ("renamed", 0, 2, 4, 1)
    assert {q.name for q in st.list_queues()} == {"q", "work", "dead-letter", "dead-letter-tx"}
    assert st.purge_queue("work") == 2
    assert st.queue_info("work").depth == 0
    st.put("work", b"x")
    assert st.delete_queue("work") == 1
    with pytest.raises(errors.QueueNotAvailable):
        st.queue_info("work")
    with pytest.raises(errors.InvalidArgument):
        st.delete_queue("dead-letter")
    assert st.info().messages == 0


def test_transactional_flag_is_stored(st):
    assert st.create_queue("tx", transactional=True).transactional is True
    assert st.queue_info("tx").transactional is True


def test_express_and_recoverable_delivery_are_recorded(st):
    assert st.put("q", b"a", express=True).delivery == "express"
    assert st.put("q", b"b").delivery == "recoverable"
    assert [m.delivery for m in st.browse("q")] == ["express", "recoverable"]


def test_store_identity_persists(tmp_path):
    with Store.open(tmp_path / "s", create=True, name="alpha") as a:
        guid = a.info().guid
    with Store.open(tmp_path / "s") as b:
        info = b.info()
    assert (info.guid, info.name) == (guid, "alpha")


def test_move_takes_messages_in_queue_order_keeping_their_ids(st):
    st.create_queue("dst")
    ids = [st.put("q", str(i).encode(), priority=p).msg_id for i, p in enumerate([1, 5, 1, 5])]
    moved = [m for chunk in st.move("q", "dst", batch=3) for m in chunk]
    assert [m.body for m in moved] == [b"1", b"3", b"0", b"2"]
    assert [m.msg_id for m in st.browse("dst")] == [ids[1], ids[3], ids[0], ids[2]]
    assert st.queue_info("q").depth == 0


def test_move_with_count_and_filter(st):
    st.create_queue("dst")
    for i in range(5):
        st.put("q", str(i).encode(), correl_id="x" if i % 2 else "y")
    moved = [m.body for chunk in st.move("q", "dst", count=1, correl_id="x") for m in chunk]
    assert moved == [b"1"]
    assert [m.body for m in st.browse("q")] == [b"0", b"2", b"3", b"4"]


def test_copy_leaves_the_source_and_gives_new_ids(st):
    st.create_queue("dst")
    a = st.put("q", b"a")
    st.put("q", b"b")
    copied = [m for chunk in st.move("q", "dst", copy=True, batch=1) for m in chunk]
    assert [m.body for m in copied] == [b"a", b"b"]
    assert [m.body for m in st.browse("q")] == [b"a", b"b"]
    assert [m.msg_id for m in st.browse("dst")] == [m.msg_id for m in copied]
    assert copied[0].msg_id != a.msg_id and copied[0].props["mqcli.copy_of"] == a.msg_id


def test_move_into_a_full_queue_moves_nothing_of_that_batch(st):
    st.create_queue("small", quota=3)
    for body in (b"aa", b"bb"):
        st.put("q", body)
    with pytest.raises(errors.QueueQuotaExceeded):
        list(st.move("q", "small"))
    assert st.queue_info("q").depth == 2 and st.queue_info("small").depth == 0


def test_operator_undo_of_old_in_flight_messages(st, clock):
    st.put("q", b"a")
    st.put("q", b"b")
    st.get("q", wait=0, confirm_id=1)
    clock.advance(60)
    st.browse_lock("q")
    assert st.undo_inflight("q", older_than=30) == 1
    assert [m.state for m in st.browse("q", states="all")] == ["available", "locked-browse"]
    assert st.undo_inflight() == 1
    assert st.inflight() == []


def test_stats_count_states_priorities_and_bytes(st, clock):
    st.put("q", b"aaa", priority=7)
    clock.advance(1)
    st.put("q", b"bb", priority=1)
    st.get("q", wait=0, confirm_id=3)
    (q,) = [s for s in st.stats() if s.name == "q"]
    assert (q.depth, q.bytes) == (2, 5)
    assert q.by_state["get-unconfirmed"] == 1 and q.by_state["available"] == 1
    assert q.by_priority[7] == 1 and q.by_priority[1] == 1
    assert q.oldest_put_time == int(1_800_000_000 * 1_000_000)


def test_export_streams_every_message_in_queue_order(st):
    st.create_queue("other")
    for i in range(7):
        st.put("q", str(i).encode(), priority=i % 2)
    st.get("q", wait=0, confirm_id=9)
    st.put("other", b"o")
    out = list(st.export_messages(["q", "other"]))
    assert [m.body for m in out] == [b"1", b"3", b"5", b"0", b"2", b"4", b"6", b"o"]
    assert out[0].state == "get-unconfirmed"


def test_export_reads_every_state_in_queue_order(st):
    # every state and priority interleaved: held and available messages merge in queue order
    st.create_queue("t", transactional=True)
    for i in range(12):
        st.put("q", b"%d" % i, priority=(0, 3, 7)[i % 3])
    held = [st.get("q", wait=0, priority=p, confirm_id=20 + p).body for p in (0, 3, 7)]
    lock, _ = st.browse_lock("q", priority=3)
    want = [m.body for m in st.browse("q", states="all")]
    assert len(want) == 12 and set(held) <= set(want)
    assert [m.body for m in st.export_messages("q")] == want


def test_export_is_one_moment_while_messages_move_between_queues(st):
    # read in pages, a message moved from a queue not read yet into one read already was in no
    # page, and one moved the other way was in two; one view shows each where it was, once
    st.create_queue("a")
    st.create_queue("b")
    for i in range(3):
        st.put("a", b"a%d" % i)
        st.put("b", b"b%d" % i)
    dump = st.export_messages(["a", "b"])
    first = next(dump)  # the view is taken: from here on, moves do not show
    assert first.body == b"a0"
    assert sum(1 for _ in st.move("b", "a", count=3)) >= 1  # b's messages go to a, which is read already
    assert sum(1 for _ in st.move("a", "b", count=1)) >= 1  # and a's first one to b, not read yet
    rest = list(dump)
    assert [(m.queue, m.body) for m in [first, *rest]] == [
        ("a", b"a0"), ("a", b"a1"), ("a", b"a2"), ("b", b"b0"), ("b", b"b1"), ("b", b"b2")]
    assert sorted(m.body for m in st.export_messages()) == [b"a0", b"a1", b"a2", b"b0", b"b1", b"b2"]


def test_export_leaves_out_puts_that_are_not_messages_yet(st):
    # docs/design.md#states: a put awaiting its confirm, or inside an open transaction, is hidden from every
    # query; an import would make it a deliverable message
    st.create_queue("t", transactional=True)
    st.put("q", b"kept")
    st.put("q", b"unconfirmed", confirm_id=5)
    tx = st.tx_begin()
    st.put("t", b"uncommitted", tx=tx)
    got = st.get("q", wait=0, confirm_id=6)  # a got message awaiting confirm is still one
    assert got.body == b"kept"
    assert [(m.body, m.state) for m in st.export_messages(["q", "t"])] == [
        (b"kept", "get-unconfirmed")]
    st.confirm("q", 5)
    st.tx_commit(tx)
    assert sorted(m.body for m in st.export_messages(["q", "t"])) == [b"kept", b"uncommitted", b"unconfirmed"]


def test_backup_is_a_consistent_openable_copy(st, tmp_path):
    st.put("q", b"keep")
    st.backup(tmp_path / "copy")
    with Store.open(tmp_path / "copy") as copy:
        assert [m.body for m in copy.browse("q")] == [b"keep"]
        assert copy.info().guid == st.info().guid
        assert copy.check() == []


def test_format_names_address_local_queues(st):
    from store.formatnames import parse  # noqa: F401  (the parser has its own tests)
    q = st.create_queue("orders", journal=True)
    info = st.info()
    st.put(f"PUBLIC={q.guid}", b"by guid")
    st.put(f"PRIVATE={info.guid}\\{q.qid:08x}", b"by number")
    st.put("DIRECT=OS:.\\orders", b"direct")
    st.put(f"DIRECT=OS:{info.name}\\PRIVATE$\\orders", b"direct private")
    assert [m.body for m in st.browse("orders")] == [b"by guid", b"by number", b"direct", b"direct private"]
    st.get("orders", wait=0)
    assert [m.body for m in st.browse(f"PUBLIC={q.guid};JOURNAL")] == [b"by guid"]
    assert st.queue_info(f"MACHINE={info.guid};DEADLETTER").name == "dead-letter"
    assert st.queue_info("DIRECT=OS:.\\SYSTEM$;DEADXACT").name == "dead-letter-tx"


@pytest.mark.parametrize("name, error", [
    ("PUBLIC=00000000-0000-0000-0000-000000000000", errors.QueueNotAvailable),
    ("PUBLIC=xyz", errors.BadData),
    ("DIRECT=IPX:abc\\orders", errors.BadData),
])
def test_format_names_of_missing_queues_are_refused(st, name, error):
    with pytest.raises(error):
        st.put(name, b"x")


@pytest.mark.parametrize("name", ["DIRECT=OS:elsewhere\\orders", "DIRECT=TCP:10.0.0.1\\orders"])
def test_a_queue_of_another_queue_manager_is_put_to_its_outgoing_queue(st, name):
    st.put(name, b"x")  # docs/design.md#store-and-forward; tests/test_outgoing.py has the rest
    assert [o.name for o in st.outgoing_list()] == [name]
