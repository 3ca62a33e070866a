"""CLI: the queue manager and queue administration (init, info, qmgr set, queue *, check, backup,
stats, sweep)."""

import os
import stat
import time

from cli_helpers import Cli
from store import Store

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
                                 "--name or --max-message-size [USAGE]")


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
    assert cli.error_line(r) == (f"mqcli: error: no store at {tmp_path / 'missing'} (create one with "
                                 "`mqcli init`) [MQ_ERROR_STORE_UNAVAILABLE]")
    assert not (tmp_path / "missing").exists()  # check never creates a store


def test_a_store_writable_by_others_is_refused_with_exit_11(cli):
    os.chmod(cli.store, 0o777)
    for args in (("check",), ("info",), ("get", "q")):
        r = cli.fails(11, *args)
        assert "[MQ_ERROR_ACCESS_DENIED]" in r.stderr and "chmod 700" in r.stderr
    assert cli("--allow-unsafe-permissions", "info").code == 0


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
