"""Store-and-forward in the store (docs/design.md#store-and-forward): links, outgoing queues, what is dispatched
and why not, the dispatcher's take / done / return, and arrivals (dedup, hops, forwarding,
dead-lettering, trace reports). The wire is tested in tests/test_channel_*.py."""

import os
import shutil
import stat
from dataclasses import replace

import pytest

from store import NewMessage, Store, keys, links, outgoing, trace
from store.errors import (
    AlreadyReceived,
    BadData,
    InvalidArgument,
    QueueNotAvailable,
    StorePermission,
    StoreQuotaExceeded,
)
from store.links import LinkExists, LinkNotFound

TO_B = "DIRECT=OS:qmB\\orders"


@pytest.fixture
def key(tmp_path):
    return str(links.generate_key_file(tmp_path / "ab.key"))


@pytest.fixture
def qms(tmp_path, clock, key):
    a = Store.open(tmp_path / "a", create=True, name="qmA", clock=clock)
    b = Store.open(tmp_path / "b", create=True, name="qmB", clock=clock)
    a.create_queue("reports")
    b.create_queue("orders")
    a.add_link("qmB", "127.0.0.1:7001", key)
    b.add_link("qmA", "127.0.0.1:7002", key)
    yield a, b
    assert a.check() == [] and b.check() == []
    a.close()
    b.close()


def send(a, b, queue=TO_B, count=1000):
    """What one dispatcher batch does: take, receive at the other end, done."""
    taken = a.outgoing_take(queue, count)
    result = b.receive(a.info().guid, taken.items, taken.incarnation, taken.sent_at)
    a.outgoing_done(queue, taken.token)
    return result


# ---- key files and links ----------------------------------------------------------------------

def test_a_key_file_is_0600_whatever_the_umask_and_never_overwritten(tmp_path):
    old = os.umask(0)
    try:
        path = links.generate_key_file(tmp_path / "k")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(links.load_key(path)) == links.KEY_BYTES
    with pytest.raises(InvalidArgument, match="never overwritten"):
        links.generate_key_file(path)


def test_a_key_file_others_can_read_or_a_malformed_one_is_refused(tmp_path):
    path = links.generate_key_file(tmp_path / "k")
    path.chmod(0o640)
    with pytest.raises(StorePermission, match="chmod 600"):
        links.load_key(path)
    bad = tmp_path / "bad"
    bad.write_text("abc\n")
    bad.chmod(0o600)
    with pytest.raises(BadData, match="64 hex digits"):
        links.load_key(bad)


def test_links_are_added_listed_and_removed(qms, key):
    a, _ = qms
    with pytest.raises(LinkExists):
        a.add_link("QMB", "127.0.0.1:9", key)
    a.add_link("qmC", "[::1]:7003", key)
    assert [(link.name, link.host, link.port) for link in a.links()] == [("qmB", "127.0.0.1", 7001), ("qmC", "::1", 7003)]
    a.remove_link("qmc")
    with pytest.raises(LinkNotFound):
        a.remove_link("qmC")
    for address in ("nohost", "h:0", "h:65536", ":7"):
        with pytest.raises(InvalidArgument):
            a.add_link("qmD", address, key)


# ---- outgoing queues ------------------------------------------------------------------------------

def test_a_put_to_another_queue_manager_waits_in_its_outgoing_queue(qms):
    a, _ = qms
    m = a.put(TO_B, b"hello")
    assert m.queue == TO_B
    assert [q.name for q in a.list_queues(outgoing=False)] == ["dead-letter", "dead-letter-tx", "reports"]
    assert a.browse("direct=os:QMB\\orders")[0].msg_id == m.msg_id  # format names fold case
    (o,) = a.outgoing_list()
    assert (o.name, o.destination_qm, o.state, o.link, o.messages, o.why) == (TO_B, "qmB", "active", "qmB", 1, None)


def test_get_and_browse_of_a_remote_queue_without_an_outgoing_queue_fail(qms):
    a, _ = qms
    with pytest.raises(QueueNotAvailable, match="no outgoing queue"):
        a.browse(TO_B)
    with pytest.raises(QueueNotAvailable, match="no queue has the GUID"):
        a.put("PUBLIC=6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f", b"x")  # no directory service


def test_the_seed_003_rules_and_our_own_say_what_is_not_dispatched(qms, clock):
    a, _ = qms
    for name in (TO_B, "DIRECT=OS:qmC\\q", "DIRECT=HTTPS://web/msmq/q", "MULTICAST=224.1.2.3:80",
                 "DIRECT=TCP:127.0.0.1\\q", "DIRECT=TCP:10.0.0.9\\q"):
        a.put(name, b"x")
    why = {o.name: (o.state, o.why) for o in a.outgoing_list()}
    assert why[TO_B] == ("active", None)
    assert why["DIRECT=TCP:127.0.0.1\\q"] == ("active", None)  # the link whose host it is
    assert why["DIRECT=OS:qmC\\q"][0] == "waiting" and "no link to qmC" in why["DIRECT=OS:qmC\\q"][1]
    assert why["DIRECT=TCP:10.0.0.9\\q"][0] == "waiting"
    assert why["DIRECT=HTTPS://web/msmq/q"] == ("locked", "HTTP(S) direct format names are not dispatched ([MS-MQQB] 3.1.7.12)")
    assert why["MULTICAST=224.1.2.3:80"] == ("locked", "multicast destinations are not dispatched ([MS-MQQB] 3.1.7.12)")
    (route,) = a.dispatch_plan()
    assert route.link.name == "qmB" and sorted(route.queues) == ["DIRECT=OS:qmB\\orders", "DIRECT=TCP:127.0.0.1\\q"]

    a.outgoing_hold(TO_B)
    assert a.outgoing_show(TO_B).state == "on-hold"
    assert [r.queues for r in a.dispatch_plan()] == [["DIRECT=TCP:127.0.0.1\\q"]]
    a.outgoing_hold(TO_B, held=False)
    a.outgoing_event([TO_B], "error", "connection refused", retry_at=clock.now + 30)
    o = a.outgoing_show(TO_B)
    assert (o.state, o.last_error, o.why, o.attempts) == ("waiting", "connection refused", "waiting for the next retry", 1)
    assert TO_B not in a.dispatch_plan()[0].queues
    clock.advance(31)
    assert TO_B in a.dispatch_plan()[0].queues
    a.outgoing_event([TO_B], "locked", "the peer refused our key")
    assert a.outgoing_show(TO_B).state == "locked"
    assert TO_B not in a.dispatch_plan()[0].queues
    a.outgoing_hold(TO_B, held=False)  # resume clears the lock
    assert a.outgoing_show(TO_B).state == "waiting"  # the last attempt failed
    a.outgoing_event([TO_B], "connected")
    assert [h["event"] for h in a.outgoing_show(TO_B).history] == [
        "hold", "resume", "error", "locked", "resume", "connected"]
    assert a.outgoing_show(TO_B).state == "active"


def test_take_hides_a_batch_return_puts_it_back_in_order_without_a_backout(qms):
    a, _ = qms
    put = a.put_many(TO_B, [NewMessage(str(i).encode(), priority=i % 3) for i in range(6)])
    order = [m.msg_id for m in a.browse(TO_B)]
    taken = a.outgoing_take(TO_B, 4)
    assert len(taken.items) == 4 and len(a.browse(TO_B)) == 2
    assert a.outgoing_show(TO_B).in_flight == 4
    assert a.outgoing_return(TO_B, taken.token) == 4
    again = a.browse(TO_B)
    assert [m.msg_id for m in again] == order and {m.backouts for m in again} == {0}
    taken = a.outgoing_take(TO_B, 100, max_bytes=1)  # at least one, even over max_bytes
    assert len(taken.items) == 1
    assert a.outgoing_return(TO_B, taken.token) == 1
    taken = a.outgoing_take(TO_B, 100)
    assert a.outgoing_done(TO_B, taken.token) == 6 and a.browse(TO_B) == []
    assert a.outgoing_take(TO_B, 100) is None
    assert len(put) == 6


def test_a_hold_pauses_a_delivery_under_way(qms):
    # the dispatcher takes batch after batch until the queue is empty; a hold was looked at
    # only when its round began, and 4,000 messages went on under 'on-hold' (SPEC section 8)
    a, b = qms
    a.put_many(TO_B, [NewMessage(b"%d" % i) for i in range(6)])
    first = a.outgoing_take(TO_B, 2)
    a.outgoing_hold(TO_B)
    assert a.outgoing_take(TO_B, 2) is None  # nothing more leaves
    b.receive(a.info().guid, first.items, first.incarnation, first.sent_at)
    assert a.outgoing_done(TO_B, first.token) == 2  # what was in flight finishes
    assert a.outgoing_show(TO_B).messages == 4 and a.outgoing_show(TO_B).state == "on-hold"
    a.outgoing_hold(TO_B, held=False)
    assert send(a, b).stored == 4


def test_what_an_outgoing_queue_sends_counts_as_got_from_it(qms):
    # its counters showed 100 put, 0 got and depth 0 after 100 left: they did not add up,
    # and its outflow rate (Prometheus, stats --watch) was always 0
    a, b = qms
    a.put_many(TO_B, [NewMessage(b"x" * 10) for _ in range(100)])
    send(a, b, count=60)
    send(a, b)
    [s] = [s for s in a.stats() if s.name == a.outgoing_show(TO_B).name]
    assert (s.depth, s.totals["put_messages"], s.totals["got_messages"], s.totals["got_bytes"]) == (0, 100, 100, 1000)
    assert s.last_get is not None


# ---- arrivals -------------------------------------------------------------------------------------

def test_an_arrival_is_stored_once_with_one_more_hop(qms):
    a, b = qms
    put = a.put_many(TO_B, [NewMessage(b"one", priority=1), NewMessage(b"two", priority=5)])
    taken = a.outgoing_take(TO_B)
    assert b.receive(a.info().guid, taken.items, taken.incarnation)[:2] == (2, 0)
    assert b.receive(a.info().guid, taken.items, taken.incarnation)[:2] == (0, 2)  # the ack was lost: resent, dropped
    got = b.browse("orders")
    assert [m.body for m in got] == [b"two", b"one"]  # priority order at the destination
    assert {m.msg_id for m in got} == {m.msg_id for m in put}
    assert {m.hops for m in got} == {1}
    assert b.prune_seen(older_than=-1) == 2  # forgotten: the next resend would be stored again


def test_an_arrival_for_another_queue_manager_is_forwarded(qms):
    a, b = qms
    a.put("DIRECT=OS:qmC\\orders", b"via B")
    a.add_link("qmC", "127.0.0.1:7001", a.link("qmB").key_file)  # C is reached through B
    assert send(a, b, "DIRECT=OS:qmC\\orders")[:2] == (1, 0)
    (fwd,) = b.browse("DIRECT=OS:qmC\\orders")
    assert fwd.hops == 1 and b.outgoing_show("DIRECT=OS:qmC\\orders").destination_qm == "qmC"


def test_arrivals_that_expired_or_have_no_queue_are_dead_lettered(qms, clock):
    a, b = qms
    a.put(TO_B, b"late", ttl=5)
    a.put("DIRECT=OS:qmB\\nosuch", b"lost")
    a.put("DIRECT=OS:qmB\\nosuch", b"dropped", dead_letter=False)
    taken = a.outgoing_take(TO_B)
    clock.advance(10)
    b.receive(a.info().guid, taken.items, taken.incarnation)
    send(a, b, "DIRECT=OS:qmB\\nosuch")
    reasons = sorted((m.body, m.dead_letter_reason) for m in b.browse("dead-letter"))
    assert reasons[0] == (b"late", "expired in transit")
    assert reasons[1][0] == b"lost" and reasons[1][1].startswith("destination not available")
    assert len(reasons) == 2 and b.browse("orders") == []


def test_arrivals_over_the_queue_quota_are_dead_lettered_in_turn_over_the_store_quota_refused(qms):
    a, b = qms
    b.set_queue("orders", quota=10)
    a.put_many(TO_B, [NewMessage(b"123456"), NewMessage(b"789012"), NewMessage(b"3456"),
                      NewMessage(b"no-dlq", dead_letter=False)])
    assert send(a, b)[:2] == (2, 0)  # [MS-MQDMPR] 3.1.7.1.9 checks each message in turn: the 4-byte one still fits
    assert [m.body for m in b.browse("orders")] == [b"123456", b"3456"]
    (dead,) = b.browse("dead-letter")
    assert (dead.body, dead.original_queue, dead.dead_letter_reason) == (
        b"789012", "orders", "queue quota exceeded (10 bytes)")
    assert b.info().bytes == 16 and a.outgoing_show(TO_B).messages == 0
    b.set_qmgr(quota=20)  # the store quota (status 2) is checked first and refuses the batch
    a.put(TO_B, b"12345")
    taken = a.outgoing_take(TO_B)
    with pytest.raises(StoreQuotaExceeded):
        b.receive(a.info().guid, taken.items, taken.incarnation)
    assert b.info().bytes == 16 and len(b.browse("dead-letter")) == 1


def test_a_malformed_batch_stores_nothing(qms):
    a, b = qms
    a.put(TO_B, b"x")
    taken = a.outgoing_take(TO_B)
    good, incarnation = taken.items, taken.incarnation
    for items in ([*good, (TO_B, b"garbage")], [(TO_B, good[0][1][:-3])], [("not=a name", good[0][1])]):
        with pytest.raises(BadData):
            b.receive(a.info().guid, items, incarnation)
    assert b.browse("orders") == [] and b.receive(a.info().guid, good, incarnation)[:2] == (1, 0)


def test_trace_reports_of_every_hop_travel_back_to_the_report_queue(qms):
    a, b = qms
    m = a.put(TO_B, b"traced", trace=True, report_queue="reports")
    send(a, b)
    # B's "received" report waits in B's outgoing queue for the report queue's public name
    (back,) = b.outgoing_list()
    assert back.name == f"PUBLIC={a.queue_info('reports').guid}" and back.destination_qm == "qmA"
    send(b, a, back.name)
    rows = [(trace.decode_label(r.label), r.props["mqcli.event"]) for r in a.browse("reports", correl_id=m.msg_id)]
    assert [(label.hops, label.computer, event) for label, event in rows] == [
        (0, a.info().guid, "enqueued"), (0, a.info().guid, "sent"), (1, b.info().guid, "received")]
    assert all(label.message_id == m.msg_n for label, _ in rows)
    (received,) = [r for r in a.browse("reports") if r.props["mqcli.event"] == "received"]
    assert received.props["mqcli.delivered"] == "true"
    assert trace.decode_body(received.body.decode()).queue == TO_B


def test_arrivals_are_forgotten_after_the_retention_a_few_at_each_receive(qms, clock):
    a, b = qms
    a.put_many(TO_B, [NewMessage(b"old") for _ in range(3)])
    send(a, b)
    clock.advance(8 * 86400)  # past the 7 days
    a.put(TO_B, b"new")
    send(a, b)  # this receive forgets the three old ones (up to 2 x batch + 16 a time)
    assert b.prune_seen(older_than=86400) == 0
    assert b.prune_seen(older_than=-1) == 1


def test_dispatch_plan_may_ignore_the_retry_timer(qms, clock):
    a, _ = qms
    a.put_many(TO_B, [NewMessage(b"x") for _ in range(3)])
    a.outgoing_event([TO_B], "error", "refused", retry_at=clock.now + 60)
    assert a.dispatch_plan() == []
    assert [r.queues for r in a.dispatch_plan(ignore_retry=True)] == [[TO_B]]


def test_a_held_batch_is_nobody_elses_to_confirm_or_undo(qms):
    a, _ = qms
    a.put_many(TO_B, [NewMessage(b"x") for _ in range(3)])
    taken = a.outgoing_take(TO_B, 2)
    with pytest.raises(AlreadyReceived, match="dispatch in process"):
        a.confirm(TO_B, taken.token)
    with pytest.raises(AlreadyReceived, match="dispatch in process"):
        a.undo(TO_B, confirm_id=taken.token)
    assert a.undo_inflight(TO_B) == 0  # an operator's undo --all leaves a live holder's batch
    assert a.outgoing_done(TO_B, taken.token) == 2 and len(a.browse(TO_B)) == 1


def test_arrivals_for_a_transactional_queue_are_dead_lettered_to_dead_letter_tx(qms, clock):
    a, b = qms
    b.create_queue("ledger", transactional=True, quota=10)
    to_ledger = "DIRECT=OS:qmB\\ledger"
    a.put_many(to_ledger, [NewMessage(b"123456"), NewMessage(b"789012")])
    a.put(to_ledger, b"late", ttl=5)
    taken = a.outgoing_take(to_ledger)
    clock.advance(10)
    assert b.receive(a.info().guid, taken.items, taken.incarnation)[:2] == (1, 0)
    assert [m.body for m in b.browse("ledger")] == [b"123456"]
    # MSMQ's DEADXACT: a message of a transactional queue, like Write.dead_letter sends them
    dead = {m.body: m.dead_letter_reason for m in b.browse("dead-letter-tx")}
    assert dead == {b"789012": "queue quota exceeded (10 bytes)", b"late": "expired in transit"}
    assert b.browse("dead-letter") == []


# ---- transfers: (sending incarnation, seq), not msg_ids -----------------------------------------

def test_a_transfer_is_its_incarnation_and_seq_so_a_repeated_msg_id_still_crosses(qms):
    a, b = qms
    (m,) = a.put_many("reports", [NewMessage(b"copied")])
    a.put(TO_B, b"makes the outgoing queue")
    assert send(a, b)[:2] == (1, 0)
    later = replace(m, put_time=m.put_time + 1_000_000, props=dict(m.props))
    a.import_messages(TO_B, [later])  # a new transfer of the same msg_id (as a restored store gives it)
    list(a.move("reports", TO_B))     # and another
    taken = a.outgoing_take(TO_B)
    assert b.receive(a.info().guid, taken.items, taken.incarnation)[:2] == (2, 0)
    assert b.receive(a.info().guid, taken.items, taken.incarnation)[:2] == (0, 2)  # a resend
    other = bytes(16) if taken.incarnation != bytes(16) else b"\x01" * 16
    assert b.receive(a.info().guid, taken.items, other)[:2] == (2, 0)  # another incarnation's
    assert [x.msg_id for x in b.browse("orders")][1:] == [m.msg_id] * 4
    with pytest.raises(BadData):
        b.receive(a.info().guid, taken.items, b"short")


def test_the_sending_incarnation_is_renewed_for_a_backup_or_another_data_file(qms, tmp_path):
    a, _ = qms
    a.put_many(TO_B, [NewMessage(b"%d" % i) for i in range(4)])

    def incarnation(st):
        taken = st.outgoing_take(TO_B, 1)
        st.outgoing_return(TO_B, taken.token)
        return taken.incarnation

    first = incarnation(a)
    assert len(first) == 16 and incarnation(a) == first  # kept while the data file is the same
    a.backup(tmp_path / "bk")
    shutil.copytree(a.path, tmp_path / "copied", ignore=shutil.ignore_patterns("lock.mdb", "dispatch.lock"))
    assert incarnation(a) == first  # the backup changes nothing in the store itself
    with Store.open(tmp_path / "bk") as restored:  # the backup's marker
        renewed = incarnation(restored)
        assert renewed != first and incarnation(restored) == renewed  # once, at its first send
        assert restored.check() == []
    with Store.open(tmp_path / "copied") as copied:  # another file, no marker
        other = incarnation(copied)
        assert other not in (first, renewed) and incarnation(copied) == other


def test_old_seen_entries_by_msg_id_pass_check_and_are_forgotten_by_time(qms, clock):
    a, b = qms
    now = int(clock() * 1_000_000)
    old_key = b"M" + bytes(range(16)) + keys.U32.pack(7)  # the layout stores wrote before
    with b._env.begin(write=True) as lt:
        lt.put(old_key, keys.U64.pack(now), db=b._dbs["seen"])
        lt.put(b"T" + keys.U64.pack(now) + old_key[1:], b"", db=b._dbs["seen"])
    assert b.check() == []
    assert outgoing.decode_seen(old_key, keys.U64.pack(now)) == (old_key, now)
    a.put(TO_B, b"new")
    send(a, b)
    assert b.prune_seen(older_than=-1) == 2  # the old arrival and the new one


def test_sent_is_stamped_at_the_take_and_received_after_it_on_one_clock(qms, clock):
    a, b = qms
    m = a.put(TO_B, b"traced", trace=True, report_queue="reports")
    taken = a.outgoing_take(TO_B)
    clock.advance(5)  # the batch is on the wire: its ack comes 5 s later
    b.receive(a.info().guid, taken.items, taken.incarnation, taken.sent_at)
    a.outgoing_done(TO_B, taken.token)
    (back,) = b.outgoing_list()
    send(b, a, back.name)
    rows = {r.props["mqcli.event"]: r for r in a.browse("reports", correl_id=m.msg_id)}
    assert rows["enqueued"].put_time < rows["sent"].put_time == taken.sent_at < rows["received"].put_time
    assert rows["sent"].put_time < rows["received"].put_time - 4_000_000  # not the ack's time
    assert trace.decode_label(rows["sent"].label).time.timestamp() == taken.sent_at // 1_000_000


def test_a_sender_a_little_ahead_is_followed_a_clock_far_ahead_is_not(qms):
    a, b = qms
    a.put(TO_B, b"x", trace=True, report_queue="reports")
    taken = a.outgoing_take(TO_B)
    b.receive(a.info().guid, taken.items, taken.incarnation, taken.sent_at + 500_000)  # 0.5 s ahead
    (report,) = [r for q in b.outgoing_list() for r in b.browse(q.name)]
    assert report.put_time > taken.sent_at + 500_000
    a.put(TO_B, b"y", trace=True, report_queue="reports")
    taken = a.outgoing_take(TO_B)
    far = taken.sent_at + 3600 * 1_000_000  # another machine's clock, an hour ahead: not followed
    b.receive(a.info().guid, taken.items, taken.incarnation, far)
    newest = max(r.put_time for q in b.outgoing_list() for r in b.browse(q.name))
    assert newest < far - 3500 * 1_000_000


def test_an_arrival_put_far_ahead_moves_no_put_time_counter_and_is_shown(qms, clock):
    # a peer holding the key sends one of the receiver's own ids with a put time in year 9999
    # (an import of such a record is refused, exit 12): the receiver's later puts stay on its clock
    from store.records import MAX_US, decode, encode

    a, b = qms
    a.put(TO_B, b"x")
    taken = a.outgoing_take(TO_B)
    own = b.put("orders", b"mine")
    ((text, raw),) = taken.items
    crafted = decode(raw)
    crafted.origin, crafted.msg_n, crafted.put_time = own.origin, own.msg_n + 1, MAX_US + 1
    assert b.receive(a.info().guid, [(text, encode(crafted))], taken.incarnation, MAX_US + 1).stored == 1
    assert b.put("orders", b"after").put_time <= int(clock() * 1_000_000) + 1_000_000
    years = [m.to_dict()["put_time"][:4] for m in b.browse("orders")]  # mine, the arrival, after
    assert years[1] == "9999" and years[0] == years[2] != "9999"


def test_a_batch_given_back_after_a_lost_ack_keeps_the_time_of_its_first_take(qms, clock):
    a, b = qms
    m = a.put(TO_B, b"traced", trace=True, report_queue="reports")
    first = a.outgoing_take(TO_B)
    clock.advance(1)
    assert b.receive(a.info().guid, first.items, first.incarnation, first.sent_at)[:2] == (1, 0)
    assert a.outgoing_return(TO_B, first.token) == 1  # the ack was lost after B's commit
    clock.advance(5)
    again = a.outgoing_take(TO_B)  # taken again after B's `received`
    assert again.sent_at > first.sent_at + 5_000_000
    assert b.receive(a.info().guid, again.items, again.incarnation, again.sent_at)[:2] == (0, 1)
    assert a.outgoing_done(TO_B, again.token) == 1
    (back,) = b.outgoing_list()
    send(b, a, back.name)
    rows = {r.props["mqcli.event"]: r for r in a.browse("reports", correl_id=m.msg_id)}
    assert rows["sent"].put_time == first.sent_at < rows["received"].put_time < again.sent_at
    assert a._read(lambda t: outgoing.load_state(t, t.queue(TO_B))).first_taken == {}  # forgotten when sent


def test_the_first_take_time_outlives_a_dispatcher_killed_with_the_batch_in_flight(tmp_path, key):
    import signal
    import subprocess
    import sys

    path = tmp_path / "a"
    with Store.open(path, create=True, name="qmA") as a:
        a.create_queue("reports")
        a.add_link("qmB", "127.0.0.1:7001", key)
        a.put(TO_B, b"traced", trace=True, report_queue="reports")
    taker = ("import os, signal, sys\nfrom store import Store\nst = Store.open(sys.argv[1])\n"
             f"assert st.outgoing_take({TO_B!r}) is not None\nos.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", taker, str(path)], capture_output=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    with Store.open(path) as a:
        (first,) = a._read(lambda t: outgoing.load_state(t, t.queue(TO_B))).first_taken.values()
        again = a.outgoing_take(TO_B)  # the dead dispatcher's batch came back: taken again
        assert again is not None and again.sent_at > first
        assert a.outgoing_done(TO_B, again.token) == 1
        (sent,) = [r for r in a.browse("reports") if r.props["mqcli.event"] == "sent"]
        assert sent.put_time == first
        assert a.check() == []


def test_links_in_a_circle_dead_letter_a_message_at_the_hop_limit(qms):
    a, b = qms
    to_c = "DIRECT=OS:qmC\\q"
    a.add_link("qmC", "127.0.0.1:7001", a.link("qmB").key_file)  # A sends C's messages to B...
    b.add_link("qmC", "127.0.0.1:7002", b.link("qmA").key_file)  # ...and B sends them back to A
    m = a.put(to_c, b"looping")
    results = []
    sender, receiver = a, b
    while sender.browse(to_c):
        assert len(results) < outgoing.HOP_LIMIT, "still looping"
        results.append(send(sender, receiver, to_c))
        sender, receiver = receiver, sender
    assert len(results) == outgoing.HOP_LIMIT  # 14 forwarded, the arrival of hop 15 goes no further
    assert [r.stored for r in results] == [1] * (outgoing.HOP_LIMIT - 1) + [0]
    assert results[-1].dead_lettered == {outgoing.HOP_LIMIT_REASON: 1}
    (dead,) = b.browse("dead-letter")  # hop 15 is odd: at B
    assert (dead.msg_id, dead.hops, dead.original_queue) == (m.msg_id, outgoing.HOP_LIMIT, to_c)
    assert dead.dead_letter_reason == outgoing.HOP_LIMIT_REASON
    assert a.browse(to_c) == b.browse(to_c) == [] and a.browse("dead-letter") == []
