"""CLI: a confirm id or lock id has one holder; lapsed ids; `--confirm-id auto` / `--lock-id auto`."""

import time

import pytest

from store import Store
from store.records import iso_time


def when(seconds):
    return iso_time(int(seconds * 1_000_000))[:19] + "Z"


def states(cli):
    return [(m["msg_id"], m["state"], m.get("confirm_id")) for m in cli.json("browse", "q", "--state", "all")]


def test_get_naming_a_pending_confirm_id_exits_5_and_changes_nothing(cli):
    cli.ok("put", "q", "x", "-n", "4", "-q")
    got = cli.jsonl("get", "q", "--count", "3", "--confirm-id", "501")
    assert [m["confirm_id"] for m in got] == [501] * 3
    before = states(cli)
    for args in (["get", "q", "--confirm-id", "501"], ["get", "q", "-n", "3", "--confirm-id", "501"],
                 ["put", "q", "y", "--confirm-id", "501"]):
        r = cli.fails(5, *args)
        assert cli.error_line(r) == (
            "mqcli: error: confirm id 501 is pending in queue 'q': messages are held under it, and an id "
            "has one holder; confirm or undo them first, or use another id or auto "
            "[MQ_ERROR_MESSAGE_ALREADY_RECEIVED]")
    assert states(cli) == before
    assert cli.json("confirm", "q", "--confirm-id", "501")["confirmed"] == 3


def test_browse_lock_naming_a_pending_lock_id_exits_5(cli):
    cli.ok("put", "q", "x", "-n", "2", "-q")
    cli.ok("browse", "q", "--lock", "--lock-id", "77", "-n", "1", "-q")
    r = cli.fails(5, "browse", "q", "--lock", "--lock-id", "77")
    assert "lock id 77 is pending in queue 'q'" in cli.error_line(r)
    assert [m["state"] for m in cli.json("browse", "q", "--state", "all")] == ["locked-browse", "available"]


def test_bulk_get_and_put_keep_one_id_across_batches(cli):
    # more than one batch of 1,000: the later batches add to the id the first one took
    assert len(cli.jsonl("put", "q", "x", "-n", "1001", "--confirm-id", "8")) == 1001
    assert cli.json("confirm", "q", "--confirm-id", "8")["confirmed"] == 1001
    cli.ok("get", "q", "--all", "--confirm-id", "9", "-o", "body")
    assert cli.json("confirm", "q", "--confirm-id", "9")["confirmed"] == 1001


def test_a_late_confirm_after_a_lapse_exits_4_naming_it(cli):
    cli.put("q", "a")
    lapsed_at = time.time() - 50
    with Store.open(cli.store, clock=lambda: lapsed_at - 50) as st:
        st.get("q", wait=0, confirm_id=42, lease=30)  # worker A
    with Store.open(cli.store, clock=lambda: lapsed_at) as st:
        st.sweep()  # A's lease lapses
    b = cli.json("get", "q", "--confirm-id", "43")  # worker B
    r = cli.fails(4, "confirm", "q", "--confirm-id", "42")  # A, late
    assert cli.error_line(r) == (
        f"mqcli: error: the lease of confirm id 42 lapsed at {when(lapsed_at)}; its message went back "
        f"to queue 'q' (backouts 1) [MQ_ERROR_MESSAGE_NOT_FOUND]")
    cli.fails(4, "undo", "q", "--confirm-id", "42")
    assert states(cli) == [(b["msg_id"], "get-unconfirmed", 43)]
    assert cli.json("confirm", "q", "--confirm-id", "43")["confirmed"] == 1


def test_a_lapsed_id_exits_5_until_it_is_forgotten(cli):
    cli.put("q", "a")
    lapsed_at = time.time() - 50
    with Store.open(cli.store, clock=lambda: lapsed_at - 50) as st:
        st.get("q", wait=0, confirm_id=42, lease=30)
    with Store.open(cli.store, clock=lambda: lapsed_at) as st:
        st.sweep()
    r = cli.fails(5, "get", "q", "--confirm-id", "42")
    assert cli.error_line(r) == (
        f"mqcli: error: the lease of confirm id 42 lapsed at {when(lapsed_at)} in queue 'q', so the id "
        f"is reserved until {when(lapsed_at + 86400)} (a late confirm or undo must not reach a new "
        f"holder); use another id or auto [MQ_ERROR_MESSAGE_ALREADY_RECEIVED]")
    with Store.open(cli.store, clock=lambda: lapsed_at + 86400) as st:
        st.sweep()  # a day later the record is forgotten
    assert cli.json("get", "q", "--confirm-id", "42")["confirm_id"] == 42


def test_confirm_id_auto_prints_a_fresh_id_that_confirms(cli):
    cli.ok("put", "q", "x", "-n", "3", "-q")
    r = cli.ok("get", "q", "--confirm-id", "auto")
    [note] = [line for line in r.err_lines if line.startswith("confirm id: ")]
    cid = int(note.removeprefix("confirm id: "))
    assert 0 < cid < 1 << 63 and f"confirm_id={cid}" in r.out
    got = cli.json("get", "q", "--confirm-id", "auto")
    assert got["confirm_id"] not in (None, cid)
    r = cli.ok("get", "q", "--confirm-id", "auto", "-q", "-o", "body")
    assert (r.stdout, r.stderr) == (b"x\n", "")
    assert cli.json("confirm", "q", "--confirm-id", str(cid))["confirmed"] == 1
    assert cli.json("confirm", "q", "--confirm-id", str(got["confirm_id"]))["confirmed"] == 1


def test_put_confirm_id_auto_prints_msg_ids_and_the_id_apart(cli):
    r = cli.ok("put", "q", "x", "-n", "2", "--confirm-id", "auto")
    assert len(r.out.splitlines()) == 2 and all("\\" in line for line in r.out.splitlines())
    [note] = [line for line in r.err_lines if line.startswith("confirm id: ")]
    assert cli.json("confirm", "q", "--confirm-id", note.removeprefix("confirm id: "))["confirmed"] == 2


def test_browse_lock_id_auto_prints_the_lock_id(cli):
    cli.put("q", "a")
    lock = cli.ok("browse", "q", "--lock", "--lock-id", "auto", "-q").out.strip()
    assert cli.json("unlock", "q", "--lock-id", lock)["unlocked"] == 1


@pytest.mark.parametrize("value", ["abc", "0", "-5", str(1 << 63), "Auto", "1e3"])
def test_a_bad_new_id_is_a_usage_error(cli, value):
    for args in (["get", "q", "--confirm-id", value], ["put", "q", "x", "--confirm-id", value],
                 ["browse", "q", "--lock", "--lock-id", value]):
        r = cli.fails(2, *args)
        assert "is not a positive 63-bit integer or auto" in cli.error_line(r)


def test_undo_and_confirm_do_not_take_auto(cli):
    cli.fails(2, "undo", "q", "--confirm-id", "auto")
    cli.fails(2, "confirm", "q", "--confirm-id", "auto")
