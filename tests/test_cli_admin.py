"""CLI: the queue manager and queue administration (init, info, qmgr set, queue *, check, backup,
stats, sweep)."""

import os
import stat
import time

import pytest

from cli_helpers import Cli
from store import NewMessage, Store, keys, links, outgoing
from store.keys import U64

# ---- init and info ------------------------------------------------------------------------


def test_init_creates_a_store_with_dead_letter_queues(tmp_path):
    cli = Cli(tmp_path / "new", tmp_path / "xdg")
    doc = cli.json("init")
    assert doc["path"] == str(tmp_path / "new")
    assert doc["sequential_id"] == 0 and doc["messages"] == 0 and doc["throttled"] is False
    names = [q["name"] for q in cli.json("queue", "list")]
    assert names == ["dead-letter", "dead-letter-tx"]
    assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == 0o700
    for f in (tmp_path / "new").iterdir():
        if f.is_file():
            assert stat.S_IMODE(f.stat().st_mode) & 0o077 == 0, f


def test_init_names_the_queue_manager(tmp_path):
    cli = Cli(tmp_path / "named", tmp_path / "xdg")
    assert cli.json("init", "--name", "qm-test")["name"] == "qm-test"
    assert cli.json("info")["name"] == "qm-test"


def test_init_on_an_existing_store_leaves_it_and_says_so_on_stderr(cli):
    before = cli.json("info")
    again = cli("init")
    assert again.code == 0
    assert "already exists" in again.stderr
    assert cli.json("info")["guid"] == before["guid"]
    assert cli.ok("init", "-q").stderr == ""


def test_info_shows_identity_usage_quota_and_throttle(cli):
    cli.put("q", "hello")
    doc = cli.json("info")
    for key in ("guid", "name", "path", "created", "sequential_id", "messages", "bytes", "quota",
                "throttled", "queues", "map_size", "map_used"):
        assert key in doc, key
    assert doc["messages"] == 1 and doc["bytes"] == 5 and doc["sequential_id"] == 1
    assert doc["queues"] == 3
    text = cli.ok("info").out
    assert doc["guid"] in text and "throttled" in text


# ---- qmgr set -----------------------------------------------------------------------------


def test_qmgr_set_changes_name_and_quota(cli):
    doc = cli.json("qmgr", "set", "--name", "renamed", "--quota", "1KiB")
    assert doc["name"] == "renamed" and doc["quota"] == 1024
    assert cli.json("info")["quota"] == 1024
    assert cli.json("qmgr", "set", "--quota", "0")["quota"] == 0


def test_qmgr_set_throttle_refuses_puts_until_no_throttle(cli):
    assert cli.json("qmgr", "set", "--throttle")["throttled"] is True
    r = cli.fails(8, "put", "q", "x")
    assert r.stdout == b""
    assert "[MQ_ERROR_QUOTA_EXCEEDED]" in r.stderr and "--no-throttle" in r.stderr
    assert cli.json("qmgr", "set", "--no-throttle")["throttled"] is False
    cli.put("q", "x")


def test_qmgr_set_store_quota_refuses_a_put_that_would_exceed_it(cli):
    cli.ok("qmgr", "set", "--quota", "10", "-q")
    cli.put("q", "12345")
    r = cli.fails(8, "put", "q", "123456")
    assert "[MQ_ERROR_QUOTA_EXCEEDED]" in r.stderr
    assert cli.json("info")["messages"] == 1


def test_qmgr_set_with_nothing_to_set_is_a_usage_error(cli):
    r = cli.fails(2, "qmgr", "set")
    assert cli.error_line(r) == ("mqcli: error: nothing to set: give --quota, --throttle/--no-throttle, "
                                 "--name, --max-message-size or --report-queue [USAGE]")


def test_qmgr_set_bad_quota_is_a_usage_error(cli):
    r = cli.fails(2, "qmgr", "set", "--quota", "lots")
    assert "invalid quota 'lots'" in r.stderr


# ---- queue create/list/show/set/purge/delete ----------------------------------------------


def test_queue_create_with_attributes(cli):
    doc = cli.json("queue", "create", "orders", "--label", "Orders", "--quota", "64KiB",
                   "--journal", "--max-backouts", "3")
    assert doc["name"] == "orders" and doc["label"] == "Orders" and doc["quota"] == 65536
    assert doc["journal"] is True and doc["max_backouts"] == 3 and doc["transactional"] is False
    assert doc["system"] is False and doc["depth"] == 0
    assert "qid" not in doc and doc["guid"] and doc["created"].endswith("Z")
    assert cli.json("queue", "create", "txq", "--transactional")["transactional"] is True


def test_queue_create_twice_is_refused(cli):
    r = cli.fails(2, "queue", "create", "Q")  # names are case-insensitive
    assert cli.error_line(r) == "mqcli: error: queue 'Q' already exists [MQ_ERROR_QUEUE_EXISTS]"


def test_queue_create_bad_name_is_refused(cli):
    r = cli.fails(2, "queue", "create", "bad name!")
    assert "letters, digits" in r.stderr
    assert [q["name"] for q in cli.json("queue", "list")] == ["dead-letter", "dead-letter-tx", "q"]


def test_queue_names_are_case_insensitive_and_shown_as_created(cli):
    cli.ok("queue", "create", "Orders.EU/1", "-q")
    cli.put("orders.eu/1", "a")
    doc = cli.json("queue", "show", "ORDERS.eu/1")
    assert doc["name"] == "Orders.EU/1" and doc["depth"] == 1


def test_queue_list_shows_depth_in_json_and_text(cli):
    cli.put("q", "abc", "--count", "2")
    rows = cli.json("queue", "list")
    assert isinstance(rows, list)
    q = next(r for r in rows if r["name"] == "q")
    assert q["depth"] == 2 and q["available"] == 2 and q["bytes"] == 6
    assert [r["name"] for r in cli.jsonl("queue", "list")] == [r["name"] for r in rows]
    text = cli.ok("queue", "list").out
    assert "dead-letter" in text and "depth" in text


def test_queue_show_unknown_queue_exits_6(cli):
    cli.fails(6, "queue", "show", "nope")


def test_queue_set_changes_attributes(cli):
    doc = cli.json("queue", "set", "q", "--label", "hi", "--quota", "1KiB", "--journal",
                   "--max-backouts", "2")
    assert (doc["label"], doc["quota"], doc["journal"], doc["max_backouts"]) == ("hi", 1024, True, 2)
    assert cli.json("queue", "show", "q")["label"] == "hi"
    cli.fails(2, "queue", "set", "q")
    cli.fails(6, "queue", "set", "nope", "--label", "x")


def test_queue_quota_refuses_a_put_that_would_exceed_it(cli):
    cli.ok("queue", "set", "q", "--quota", "8", "-q")
    cli.put("q", "12345678")
    r = cli.fails(7, "put", "q", "x")
    assert "[MQ_ERROR_QUEUE_QUOTA_EXCEEDED]" in r.stderr


def test_queue_purge_asks_unless_yes(cli):
    cli.put("q", "a", "--count", "3")
    r = cli.fails(2, "queue", "purge", "q")
    assert cli.error_line(r) == "mqcli: error: refusing to purge queue 'q' (3 messages) without --yes [USAGE]"
    assert cli.json("queue", "purge", "q", "--dry-run") == {"queue": "q", "would_remove": 3, "dry_run": True}
    assert cli.json("queue", "show", "q")["depth"] == 3
    assert cli.json("queue", "purge", "q", "--yes") == {"queue": "q", "removed": 3}
    assert cli.json("queue", "show", "q")["depth"] == 0


def test_queue_purge_removes_messages_in_flight_too(cli):
    cli.put("q", "a", "--count", "2")
    cli.ok("get", "q", "--confirm-id", "5")
    assert cli.json("queue", "purge", "q", "-y")["removed"] == 2
    cli.fails(4, "confirm", "q", "--confirm-id", "5")


def test_queue_delete_asks_unless_yes_and_then_the_queue_is_gone(cli):
    cli.put("q", "a")
    cli.fails(2, "queue", "delete", "q")
    assert cli.json("queue", "delete", "q", "--dry-run")["would_remove"] == 1
    assert cli.json("queue", "show", "q")["depth"] == 1
    assert cli.json("queue", "delete", "q", "-y") == {"queue": "q", "deleted": True, "removed": 1}
    cli.fails(6, "get", "q")
    cli.fails(6, "queue", "delete", "q", "-y")


def test_queue_delete_refuses_a_system_queue(cli):
    r = cli.fails(2, "queue", "delete", "dead-letter", "--yes")
    assert "system queue" in r.stderr


# ---- check and backup ---------------------------------------------------------------------


def test_check_a_consistent_store(cli):
    cli.put("q", "a", "--count", "3")
    r = cli.ok("check")
    assert r.stdout == b"" and "consistent" in r.stderr
    assert cli.ok("check", "-q").stderr == ""
    assert cli.json("check") == {"ok": True, "problems": []}


def test_check_a_missing_store_exits_11(tmp_path):
    cli = Cli(tmp_path / "missing", tmp_path / "xdg")
    r = cli.fails(11, "check")
    assert cli.error_line(r) == (f"mqcli: error: no store at {tmp_path / 'missing'}; create it with "
                                 f"`mqcli init --store {tmp_path / 'missing'}` [MQ_ERROR_STORE_UNAVAILABLE]")
    assert not (tmp_path / "missing").exists()  # check never creates a store


def test_a_store_writable_by_others_is_refused_with_exit_11(cli):
    os.chmod(cli.store, 0o777)
    for args in (("check",), ("info",), ("get", "q")):
        r = cli.fails(11, *args)
        assert "[MQ_ERROR_ACCESS_DENIED]" in r.stderr and "chmod 700" in r.stderr
    assert cli("--allow-unsafe-permissions", "info").code == 0


# the store-and-forward tables (docs/design.md#store-and-forward): links, outq (dispatch state), seen (arrivals)

TO_QM2 = "DIRECT=OS:qm2\\orders"
DAY_US = 86400 * 1_000_000


@pytest.fixture
def forwarding(cli, tmp_path):
    """The cli's store with a link to qm2, an outgoing queue to it with a dispatch state, and
    two messages that arrived from qm2 (their entries in `seen`)."""
    key = str(links.generate_key_file(tmp_path / "qm2.key"))
    with Store.open(cli.store) as st, Store.open(tmp_path / "qm2", create=True, name="qm2") as qm2:
        here = st.info().name
        st.add_link("qm2", "127.0.0.1:7001", key)
        st.put(TO_QM2, b"to qm2")
        st.outgoing_hold(TO_QM2)  # writes its state in outq
        qm2.add_link(here, "127.0.0.1:7002", key)
        to_here = f"DIRECT=OS:{here}\\q"
        qm2.put_many(to_here, [NewMessage(b"from qm2 1"), NewMessage(b"from qm2 2")])
        taken = qm2.outgoing_take(to_here)
        assert st.receive(qm2.info().guid, taken.items, taken.incarnation)[:2] == (2, 0)
        assert st.check() == []
    return cli


def _arrival(st: Store) -> tuple[bytes, int]:
    """The `seen` key of the first transfer that arrived from qm2, and its arrival time."""
    with st._env.begin() as lt:
        cur = lt.cursor(db=st._dbs["seen"])
        assert cur.set_range(b"I")
        key = bytes(cur.key())
        assert key[:1] == b"I"
        return key, U64.unpack(cur.value())[0]


def _put(st: Store, table: str, key: bytes, value: bytes) -> None:
    """Write an entry straight into a table, past every rule of the store."""
    with st._env.begin(write=True) as lt:
        lt.put(key, value, db=st._dbs[table])


def _delete(st: Store, table: str, key: bytes) -> None:
    with st._env.begin(write=True) as lt:
        assert lt.delete(key, db=st._dbs[table])


def _link_record(name: object) -> bytes:
    return links.encode(links.LinkInfo(name, "127.0.0.1", 7003, "/k", 1))  # type: ignore[arg-type]


HELD = b'{"held":true}'  # an outgoing state


def _bad_link_json(st):
    _put(st, "links", b"qm2", b"{oops")
    return ["links entry b'qm2': malformed link record: "]


def _link_without_fields(st):
    _put(st, "links", b"qm2", b'{"name":"qm2"}')
    return ["links entry b'qm2': malformed link record: "]


def _link_whose_name_is_not_a_name(st):
    _put(st, "links", b"qm2", _link_record(7))
    return ["links entry b'qm2': link name 7 must be "]


def _link_under_another_key(st):
    _put(st, "links", b"qm3", _link_record("qm2"))
    return ["links entry b'qm3': holds link 'qm2', whose key is b'qm2'"]


def _link_key_not_casefolded(st):
    _put(st, "links", b"Qm3", _link_record("Qm3"))
    return ["links entry b'Qm3': holds link 'Qm3', whose key is b'qm3'"]


def _bad_state_json(st):
    _put(st, "outq", TO_QM2.casefold().encode(), b"[1")
    return ["outq entry b'direct=os:qm2\\\\orders': malformed outgoing state: "]


def _state_with_unknown_field(st):
    _put(st, "outq", TO_QM2.casefold().encode(), b'{"held":true,"colour":"red"}')
    return ["outq entry b'direct=os:qm2\\\\orders': malformed outgoing state: "]


def _state_of_no_queue(st):
    _put(st, "outq", b"direct=os:qm9\\orders", HELD)
    return ["outq entry b'direct=os:qm9\\\\orders': its queue does not exist"]


def _state_of_a_local_queue(st):
    _put(st, "outq", b"q", HELD)
    return ["outq entry b'q': queue 'q' is not an outgoing queue"]


def _seen_key_short(st):
    key, arrived = _arrival(st)
    _put(st, "seen", key[:-1], U64.pack(arrived))
    return [f"seen entry {key[:-1].hex()}: key is 24 bytes, not 25"]


def _seen_key_of_unknown_kind(st):
    _put(st, "seen", b"Z" + bytes(20), U64.pack(1))
    return [f"seen entry 5a{'00' * 20}: key starts with b'Z', none of IJMT"]


def _seen_time_short(st):
    key, arrived = _arrival(st)
    _put(st, "seen", key, U64.pack(arrived)[:4])
    return [f"seen entry {key.hex()}: value is 4 bytes, not an 8-byte time"]


def _seen_time_entry_with_a_value(st):
    key, arrived = _arrival(st)
    time_key = outgoing.seen_time_key(key, arrived)
    _put(st, "seen", time_key, b"x")
    return [f"seen entry {time_key.hex()}: value is 1 bytes, not empty"]


def _seen_in_the_future(st):
    key, arrived = _arrival(st)
    key = key[:-8] + U64.pack(999)  # an arrival recorded by a clock two days ahead
    later = arrived + 2 * DAY_US
    _put(st, "seen", key, U64.pack(later))
    _put(st, "seen", outgoing.seen_time_key(key, later), b"")
    return [f"seen entry {key.hex()}: its arrival time is 17"]  # 172800 s, less the test's run time


def _seen_without_its_time_entry(st):
    key, arrived = _arrival(st)
    _delete(st, "seen", outgoing.seen_time_key(key, arrived))
    return [f"seen entry {key.hex()}: its time-ordered entry is missing, so it is never forgotten"]


def _times_of_no_queue(st):
    _put(st, "meta", keys.qtimes_key(999), keys.QTIMES.pack(1, 2))
    return ["meta entry b't\\x00\\x00\\x03\\xe7': put and get times of queue number 999, which does not exist"]


def _counters_cut_short(st):
    qid = st.queue_info("q").qid
    _put(st, "meta", keys.qstats_key(qid), b"\0" * 8)
    return [f"meta entry {keys.qstats_key(qid)!r}: not the counters of a queue"]


def _queue_flag_stored_as_text(st):
    import json

    with st._env.begin() as lt:
        record = json.loads(lt.get(b"q", db=st._dbs["queues"]))
    _put(st, "queues", b"q", json.dumps({**record, "transactional": "no"}).encode())
    return ["queue 'q': its record holds a bad attribute: transactional must be True or False, got 'no'"]


DAMAGE = [_bad_link_json, _link_without_fields, _link_whose_name_is_not_a_name, _link_under_another_key,
          _link_key_not_casefolded, _bad_state_json, _state_with_unknown_field, _state_of_no_queue,
          _state_of_a_local_queue, _seen_key_short, _seen_key_of_unknown_kind, _seen_time_short,
          _seen_time_entry_with_a_value, _seen_in_the_future, _seen_without_its_time_entry,
          _times_of_no_queue, _counters_cut_short, _queue_flag_stored_as_text]


def test_check_a_store_with_links_outgoing_state_and_arrivals(forwarding):
    assert forwarding.json("check") == {"ok": True, "problems": []}
    assert forwarding.json("outgoing", "show", TO_QM2)["state"] == "on-hold"
    assert len(forwarding.json("browse", "q")) == 2


@pytest.mark.parametrize("harm", DAMAGE, ids=[f.__name__.lstrip("_") for f in DAMAGE])
def test_check_reports_damage_to_the_forwarding_tables_and_exits_11(forwarding, harm):
    with Store.open(forwarding.store) as st:
        said = harm(st)
        problems = st.check()
    assert len(problems) == len(said) and all(p.startswith(s) for p, s in zip(problems, said)), problems
    r = forwarding.fails(11, "check")
    assert [line for line in r.err_lines if line.startswith("mqcli: check: ")] == \
        [f"mqcli: check: {p}" for p in problems]
    assert forwarding.error_line(r) == (f"mqcli: error: the store at {forwarding.store} is inconsistent: "
                                        f"{len(problems)} problem(s) found [MQ_ERROR_STORE_CORRUPT]")


def test_deleting_an_outgoing_queue_leaves_a_store_that_checks(forwarding):
    forwarding.ok("queue", "delete", TO_QM2, "--yes")
    assert forwarding.json("check") == {"ok": True, "problems": []}
    with Store.open(forwarding.store) as st:  # a new outgoing queue of that name starts afresh
        st.put(TO_QM2, b"again")
        assert st._read(lambda t: outgoing.load_state(t, t.queue(TO_QM2))) == outgoing.OutState()


def test_backup_copies_the_store_and_the_copy_checks(cli, tmp_path):
    cli.put("q", "a", "--count", "3")
    cli.ok("get", "q")
    target = tmp_path / "backup"
    doc = cli.json("backup", target)
    assert doc["backup"] == str(target) and doc["messages"] == 2
    assert doc["guid"] == cli.guid()
    assert cli.ok("--store", target, "check").code == 0
    copied = cli.json("--store", target, "browse", "q")
    assert [m["msg_id"] for m in copied] == [m["msg_id"] for m in cli.json("browse", "q")]


def test_backup_into_an_existing_store_is_refused(cli):
    r = cli.fails(11, "backup", cli.store)
    assert "new directory" in r.stderr


# ---- stats and sweep ----------------------------------------------------------------------


def test_stats_counts_depth_by_state_and_priority(cli):
    cli.put("q", "a", "--priority", "5")
    cli.put("q", "bb", "--count", "2")
    cli.ok("browse", "q", "--lock", "--limit", "1", "-q")
    rows = {r["queue"]: r for r in cli.json("stats")}
    q = rows["q"]
    assert q["depth"] == 3 and q["bytes"] == 5
    assert q["available"] == 2 and q["locked-browse"] == 1 and q["get-unconfirmed"] == 0
    assert q["by_priority"] == {"5": 1, "3": 2}
    assert q["oldest"].endswith("Z")
    assert rows["dead-letter"]["depth"] == 0
    text = cli.ok("stats").out
    assert "p5:1" in text and "p3:2" in text


def test_stats_and_queue_show_say_when_a_queue_was_last_put_to_and_got_from(cli):
    _put_in_the_past(cli.store, 7200)
    cli.put("q", "new")
    before = cli.json("queue", "show", "q")
    assert before["last_put"].endswith("Z") and before["last_get"] is None
    cli.ok("get", "q")
    rows = {r["queue"]: r for r in cli.json("stats")}
    q = rows["q"]
    assert (q["last_put"], q["put_age"]) == (before["last_put"], "0s")
    assert q["last_get"].endswith("Z") and q["get_age"] == "0s"  # the get took the 2h-old message
    assert (rows["dead-letter"]["last_put"], rows["dead-letter"]["get_age"]) == (None, "-")
    assert cli.json("queue", "show", "q")["last_get"] == q["last_get"]
    header = cli.ok("stats").out.splitlines()[0]
    assert "last put" in header and "last get" in header


def _put_in_the_past(path, seconds_ago, **put):
    """Put through the library with a clock `seconds_ago` behind, so ttls and leases have lapsed."""
    with Store.open(path, clock=lambda: time.time() - seconds_ago) as st:
        return st.put("q", b"old", **put)


def test_sweep_dry_run_counts_then_sweep_expires_to_dead_letter(cli):
    old = _put_in_the_past(cli.store, 3600, ttl=60)
    assert cli.json("sweep", "--dry-run") == {"expired": 1, "leases_undone": 0, "transactions_aborted": 0, "dry_run": True}
    # a dry run changes nothing: the message is still due (any other read would expire it)
    assert cli.json("sweep", "--dry-run")["expired"] == 1
    assert cli.json("sweep") == {"expired": 1, "leases_undone": 0, "transactions_aborted": 0, "dry_run": False}
    assert cli.json("browse", "q") == []
    dead = cli.json("browse", "dead-letter")
    assert [m["msg_id"] for m in dead] == [old.msg_id]
    assert dead[0]["dead_letter_reason"] == "expired" and dead[0]["original_queue"] == "q"


def test_sweep_undoes_lapsed_leases(cli):
    m = cli.put("q", "a")
    with Store.open(cli.store, clock=lambda: time.time() - 3600) as st:
        st.get("q", wait=0, confirm_id=77, lease=60)
    assert cli.json("sweep", "--dry-run")["leases_undone"] == 1
    assert cli.json("sweep")["leases_undone"] == 1
    back = cli.json("browse", "q")
    assert [b["msg_id"] for b in back] == [m["msg_id"]] and back[0]["backouts"] == 1
    cli.fails(4, "confirm", "q", "--confirm-id", "77")


def test_queue_show_gives_both_format_names_and_they_address_the_queue(cli):
    doc = cli.json("queue", "show", "q")
    assert doc["format_name"] == f"PUBLIC={doc['guid']}"
    assert doc["private_format_name"].startswith("PRIVATE=")
    cli.ok("put", doc["private_format_name"], "by private name", "-q")
    cli.ok("put", doc["format_name"], "by public name", "-q")
    assert [m["body"] for m in cli.json("browse", "q")] == ["by private name", "by public name"]


def test_qmgr_set_report_queue_names_a_queue_of_this_store_and_info_shows_it(cli):
    cli.ok("queue", "create", "rq")
    assert cli.json("qmgr", "set", "--report-queue", "rq")["report_queue"] == "rq"
    assert cli.json("info")["report_queue"] == "rq"
    cli.fails(6, "qmgr", "set", "--report-queue", "nosuch")
    assert cli.json("info")["report_queue"] == "rq"
    assert cli.json("qmgr", "set", "--report-queue", "")["report_queue"] is None


@pytest.mark.parametrize("command", [["queue", "create", "q2"], ["queue", "set", "q"], ["qmgr", "set"]])
def test_an_empty_quota_is_a_usage_error_not_no_limit(cli, command):
    # a script's unset $QUOTA must not make an unlimited queue without a word
    r = cli.fails(2, *command, "--quota", "")
    assert "invalid quota ''" in cli.error_line(r)
    assert "q2" not in [q["name"] for q in cli.json("queue", "list")]
