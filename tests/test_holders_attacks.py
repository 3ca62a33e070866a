"""Held delivery under attack: a destructive get whose reader stalls, while its messages' time
runs out, while it forks, while its environment is broken. Real processes, real pipes, SIGKILL
(store/holders.py). Each test names what a live holder's messages must never do: go twice,
or stay stuck after the holder is gone."""

import json
import os
import signal
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from channel_helpers import wait_until
from store import NewMessage, Store, errors, holders

# bodies far larger than a pipe holds: a get writing them blocks until its reader reads
BIG = 100_000


# the tests' own looks at the store: one test works, as root, in a store another user owns
OPEN = {"allow_foreign_owner": True}


def fill(path, n, ttl=None, queue="q"):
    with Store.open(path, **OPEN) as st:
        st.put_many(queue, [NewMessage(b"%06d" % i + b"x" * (BIG - 6), ttl=ttl) for i in range(n)])


def in_flight(path, queue="q"):
    with Store.open(path, **OPEN) as st:
        return [m for m in st.browse(queue, states="all") if m.state != "available"]


def everything(path, queue):
    with Store.open(path, **OPEN) as st:
        return st.browse(queue, states="all")


def past(deadline_us):
    return time.time() * 1_000_000 > deadline_us + 1000


def stalled_get(cli, spawn, *args, before=()):
    """`mqcli BEFORE get q ARGS -o body` writing into a pipe nobody reads yet; returns it once it holds."""
    reader = spawn(cli, *before, "get", "q", *args, "-o", "body", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(lambda: any(m.state.endswith("get-unconfirmed") for m in in_flight(cli.store)), 30,
               "the get to hold its messages")
    return reader


def waiting_get(cli, spawn, *args):
    """`mqcli get q --all --wait 60s ARGS -o body`, once it waits on the empty queue: messages
    put next are held at once, well within a short ttl however slow the machine."""
    reader = spawn(cli, "get", "q", "--all", "--wait", "60s", *args, "-o", "body",
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(lambda: os.listdir(cli.store / "wait"), 30, "the get to wait")
    return reader


def drained(reader):
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    return [line[:6] for line in out.split(b"\n")[:-1]]


def test_a_message_that_expires_while_a_live_get_writes_it_is_not_also_dead_lettered(cli, spawn):
    reader = waiting_get(cli, spawn)
    fill(cli.store, 5, ttl=2.0)
    wait_until(lambda: len(in_flight(cli.store)) == 5, 30, "the get to hold the messages")
    held = in_flight(cli.store)
    assert not past(min(m.expires for m in held)), "the machine is too slow for this test"
    wait_until(lambda: past(max(m.expires for m in held)), 30, "the ttls to pass")
    assert cli.subprocess("sweep", timeout=30).code == 0  # a write: expiry runs
    assert len(in_flight(cli.store)) == len(held), "a live get's messages were taken from it"
    assert everything(cli.store, "dead-letter") == []
    shown = drained(reader)
    # every message was shown, once; none is in the queue or the dead-letter queue as well
    assert sorted(shown) == [b"%06d" % i for i in range(5)]
    cli.ok("sweep", "-q")
    assert everything(cli.store, "q") == [] and everything(cli.store, "dead-letter") == []
    assert cli.ok("check").code == 0


def test_a_browse_lock_whose_lease_lapses_while_a_live_get_writes_its_messages_does_not_return_them(cli, spawn):
    fill(cli.store, 5)
    lock = cli.ok("browse", "q", "--lock", "--lease", "3s", "-o", "json").json()[0]["lock_id"]
    reader = stalled_get(cli, spawn, "--lock-id", lock, "--all")
    held = in_flight(cli.store)
    assert {m.state for m in held} == {"browse-get-unconfirmed"}
    wait_until(lambda: past(max(m.lease_expires for m in held)), 30, "the lease to lapse")
    assert cli.subprocess("sweep", timeout=30).code == 0  # a write: lapsed leases are undone
    assert len(in_flight(cli.store)) == len(held), "a live get's messages were taken from it"
    shown = drained(reader)
    assert sorted(shown) == [b"%06d" % i for i in range(5)]
    cli.ok("sweep", "-q")
    assert everything(cli.store, "q") == [], "messages shown by the get are in the queue again"
    assert cli.ok("check").code == 0


def test_an_undelivered_message_whose_lease_lapsed_while_held_goes_back_after_the_hold(cli, spawn):
    # the reader goes away: the held messages go back under their lock without a backout (a
    # failed delivery is not their fault), and the lock, whose lease has lapsed, then lets them go
    fill(cli.store, 5)
    lock = cli.ok("browse", "q", "--lock", "--lease", "3s", "-o", "json").json()[0]["lock_id"]
    reader = stalled_get(cli, spawn, "--lock-id", lock, "--all")
    held = in_flight(cli.store)
    wait_until(lambda: past(max(m.lease_expires for m in held)), 30, "the lease to lapse")
    reader.stdout.close()  # the reader goes away without reading: nothing was delivered whole
    assert reader.wait(timeout=60) == 141
    cli.ok("sweep", "-q")
    left = everything(cli.store, "q")
    assert [(m.state, m.backouts) for m in left] == [("available", 0)] * 5
    assert cli.ok("check").code == 0


def test_a_forked_child_does_not_keep_its_parents_messages_held_after_the_parent_dies(cli):
    fill(cli.store, 3)
    script = textwrap.dedent(f"""
        import os, time
        from store import Store
        st = Store.open({str(cli.store)!r})
        def deliver(found):
            child = os.fork()
            if child == 0:  # a worker that lives on; it never uses the store
                time.sleep(600)
                os._exit(0)
            print(child, flush=True)
            time.sleep(600)
        st.get_many("q", 3, deliver=deliver)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    child = None
    try:
        child = int(parent.stdout.readline())
        assert len(in_flight(cli.store)) == 3
        parent.kill()
        parent.wait(timeout=30)
        assert cli.subprocess("sweep", timeout=30).code == 0
        assert in_flight(cli.store) == [], "a dead holder's messages stay held while its fork lives"
        assert [m.backouts for m in everything(cli.store, "q")] == [0, 0, 0]
    finally:
        parent.kill()
        parent.wait(timeout=30)
        if child is not None:
            os.kill(child, signal.SIGKILL)


def test_a_holders_directory_that_cannot_be_made_is_a_store_error_not_a_crash(cli):
    cli.ok("put", "q", "kept")
    (cli.store / "holders").write_text("")  # in the way of the directory
    got = cli.subprocess("get", "q", "-o", "json", timeout=30)
    assert got.code == 11 and "holders" in got.stderr and "INTERNAL" not in got.stderr, got
    (cli.store / "holders").unlink()
    assert cli.ok("get", "q", "-o", "json").json()["body"] == "kept"


def test_a_stopped_get_keeps_its_messages_and_finishes_when_continued(cli, spawn):
    fill(cli.store, 10)
    reader = stalled_get(cli, spawn, "--all")
    reader.send_signal(signal.SIGSTOP)
    try:
        for command in (("sweep",), ("undo", "q", "--all"), ("get", "q", "--all")):
            cli.subprocess(*command, timeout=30)
            assert len(in_flight(cli.store)) == 10, command
        stats = {s["queue"]: s for s in cli.ok("-o", "json", "stats").json()}["q"]
        assert (stats["depth"], stats["get-unconfirmed"], stats["available"]) == (10, 10, 0)
        assert cli.ok("check").code == 0
    finally:
        reader.send_signal(signal.SIGCONT)
    assert sorted(drained(reader)) == [b"%06d" % i for i in range(10)]
    assert everything(cli.store, "q") == []


def test_a_queue_purged_or_deleted_under_a_held_get_loses_only_what_the_operator_removed(cli, spawn):
    fill(cli.store, 12)
    reader = stalled_get(cli, spawn, "--count", "10")
    # what the get is writing out is on its way: the purge leaves it and says so (it counted
    # those 10 as removed, and the get delivered them all the same)
    purged = cli.ok("-o", "json", "queue", "purge", "q", "--yes")
    assert json.loads(purged.stdout)["removed"] == 2, purged
    assert "10 left in flight: a get in process" in purged.stderr, purged
    fill(cli.store, 2)  # new messages after the purge: not the get's
    assert len(drained(reader)) == 10
    assert len(everything(cli.store, "q")) == 2
    reader = stalled_get(cli, spawn, "--count", "1")
    # a delete would remove what the get is delivering and count it as deleted: refused,
    # naming the get, and nothing changes
    refused = cli.fails(5, "queue", "delete", "q", "--yes")
    assert "1 by a get in process" in refused.stderr, refused
    assert len(drained(reader)) == 1
    deleted = cli.ok("-o", "json", "queue", "delete", "q", "--yes")  # the delivery ended
    assert json.loads(deleted.stdout)["removed"] == 1, deleted
    with Store.open(cli.store) as st:
        st.sweep()
        assert st._read(holders.holds) == []
        assert st.check() == []


def test_a_live_gets_expired_messages_do_not_hold_up_expiry_elsewhere(cli, spawn):
    # more held messages past their time than one maintenance step looks at (256)
    cli.ok("queue", "create", "other")
    reader = waiting_get(cli, spawn)
    with Store.open(cli.store) as st:
        st.put_many("q", [NewMessage(b"%06d" % i + b"x" * 994, ttl=2.0) for i in range(400)])
        late = st.put("other", b"expires after them", ttl=2.0)
    wait_until(lambda: len(in_flight(cli.store)) == 400, 30, "the get to hold the messages")
    assert not past(late.expires), "the machine is too slow for this test"
    wait_until(lambda: past(late.expires), 30, "the ttls to pass")
    assert cli.subprocess("sweep", timeout=30).code == 0
    assert len(in_flight(cli.store)) == 400
    assert [m.body for m in everything(cli.store, "dead-letter")] == [b"expires after them"]
    assert len(drained(reader)) == 400
    assert cli.ok("check").code == 0


def test_a_live_holder_whose_file_was_deleted_keeps_its_messages(cli, spawn):
    # the flock is on a file nobody can see any more; the row's pid, started before the hold,
    # still lives
    fill(cli.store, 10)
    reader = stalled_get(cli, spawn, "--all")
    for name in os.listdir(cli.store / "holders"):  # a clean-up script, a careless `rm`
        os.unlink(cli.store / "holders" / name)
    assert cli.subprocess("sweep", timeout=30).code == 0
    try:
        assert len(in_flight(cli.store)) == 10, "a live get's messages were taken from it"
    finally:
        shown = drained(reader)
    assert len(shown) == 10 and everything(cli.store, "q") == []


def killed_holder_without_its_file(cli, spawn):
    """A get that held 10 messages, SIGKILLed, its holder file deleted after."""
    fill(cli.store, 10)
    reader = stalled_get(cli, spawn, "--all")
    reader.kill()
    reader.wait(timeout=30)
    for name in os.listdir(cli.store / "holders"):
        os.unlink(cli.store / "holders" / name)


def test_a_dead_holder_whose_file_was_deleted_gives_its_messages_back(cli, spawn):
    killed_holder_without_its_file(cli, spawn)
    assert cli.subprocess("sweep", timeout=30).code == 0
    assert in_flight(cli.store) == [] and len(everything(cli.store, "q")) == 10


def test_a_holder_pid_reused_by_a_later_process_is_not_taken_for_the_holder(cli, spawn):
    killed_holder_without_its_file(cli, spawn)
    # a process started after the hold, given the dead holder's pid in its row: what a reused
    # pid looks like
    time.sleep(2.1)  # /proc/stat's boot time is in whole seconds: a start may look a second early
    later = subprocess.Popen(["sleep", "600"])
    try:
        with Store.open(cli.store) as st, st._env.begin(write=True) as lt:
            db = st._dbs["holders"]
            for key, value in list(lt.cursor(db=db)):
                hold = holders.decode(bytes(key), bytes(value))
                row = bytes(value)
                lt.put(key, row[:16] + later.pid.to_bytes(4, "big") + row[20:], db=db)
                assert holders.decode(bytes(key), lt.get(key, db=db)).pid == later.pid != hold.pid
        assert cli.subprocess("sweep", timeout=30).code == 0
        assert in_flight(cli.store) == [] and len(everything(cli.store, "q")) == 10
    finally:
        later.kill()
        later.wait(timeout=30)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root works in another user's store")
def test_root_holding_messages_in_a_users_store_leaves_its_holder_files_to_that_user(cli, spawn):
    owner = 54321  # any uid: the store directory's owner, not the user running mqcli
    os.chown(cli.store, owner, owner)
    fill(cli.store, 10)
    reader = stalled_get(cli, spawn, "--all", before=["--allow-foreign-owner"])
    [name] = os.listdir(cli.store / "holders")
    # the owner's processes can tell whether root's get lives (its file is theirs to open), and
    # make their own holder files in the directory
    assert (cli.store / "holders").stat().st_uid == owner
    assert (cli.store / "holders" / name).stat().st_uid == owner
    assert len(drained(reader)) == 10


def test_sweep_removes_the_files_of_holders_that_died_holding_nothing(cli, spawn):
    fill(cli.store, 1)
    script = textwrap.dedent(f"""
        import time
        from store import Store
        st = Store.open({str(cli.store)!r})
        st.get_many("q", 1, deliver=lambda found: None)  # held and done: its file stays while it lives
        print("idle", flush=True)
        time.sleep(600)
    """)
    idle = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert idle.stdout.readline() == b"idle\n"
        [name] = os.listdir(cli.store / "holders")
        fill(cli.store, 5)
        reader = stalled_get(cli, spawn, "--all")
        cli.ok("sweep", "-q")  # both live: their files stay
        assert len(os.listdir(cli.store / "holders")) == 2
    finally:
        idle.kill()
        idle.wait(timeout=30)
    cli.ok("sweep", "-q")  # a dispatcher killed while idle left no row for `recover` to find
    assert name not in os.listdir(cli.store / "holders")
    assert len(os.listdir(cli.store / "holders")) == 1 and len(in_flight(cli.store)) == 5
    assert len(drained(reader)) == 5
    assert os.listdir(cli.store / "holders") == []


def test_a_full_store_with_a_dead_holders_messages_can_still_be_read(tmp_path):
    # giving a dead holder's messages back needs room before its commit frees their held
    # places; on a full map every read ran that write first and failed: the store showed nothing
    path = tmp_path / "store"
    with Store.open(path, create=True, map_size=1 << 20) as st:
        st.create_queue("q")
        st.put_many("q", [NewMessage(b"h" * 1000) for _ in range(20)])
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from store import Store
        st = Store.open({str(path)!r})
        def deliver(found):
            print("held", flush=True)
            time.sleep(600)
        st.get_many("q", 20, deliver=deliver)
    """)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"held\n"
        with Store.open(path) as st:
            with pytest.raises(errors.StoreFull):
                for _ in range(2000):
                    st.put_many("q", [NewMessage(b"x" * 1000)] * 10)
            with pytest.raises(errors.StoreFull):
                for _ in range(2000):
                    st.put("q", b"x" * 100)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    with Store.open(path) as st:
        depth = {s.name: s for s in st.stats()}["q"].depth
        assert depth > 20 and len(st.browse("q", states="all")) == depth
        assert st.check() == []


def test_a_confirm_id_a_two_phase_get_is_writing_out_has_that_get_as_its_one_holder(cli, spawn):
    # the get holds its messages under its token while it writes them, and puts them under
    # the confirm id only once written: the id is taken from the take on, not from then
    fill(cli.store, 2)
    cli.ok("put", "q", "small", "-q")
    reader = stalled_get(cli, spawn, "--confirm-id", "42")
    for args in (["get", "q", "--confirm-id", "42"], ["put", "q", "y", "--confirm-id", "42"]):
        r = cli.fails(5, *args)
        assert "confirm id 42 is taken in queue 'q': a two-phase get in process" in cli.error_line(r)
    for args in (["confirm", "q", "--confirm-id", "42"], ["undo", "q", "--confirm-id", "42"]):
        r = cli.fails(5, *args)  # nothing unwritten is ever pending under it
        assert "nothing is pending under confirm id 42 in queue 'q' yet" in cli.error_line(r)
    assert len(in_flight(cli.store)) == 1  # the stalled get's first message, and nothing else taken
    assert len(drained(reader)) == 1
    held = in_flight(cli.store)
    assert [(m.state, m.confirm_id) for m in held] == [("get-unconfirmed", 42)]
    assert cli.json("confirm", "q", "--confirm-id", "42")["confirmed"] == 1
    assert [m.body[:6] for m in everything(cli.store, "q")] == [b"000001", b"small"]


def test_an_operators_undo_leaves_a_live_gets_delivery_and_says_why(cli, spawn):
    fill(cli.store, 3)
    reader = stalled_get(cli, spawn, "--all")
    r = cli.ok("undo", "--all")
    assert b"undone" in r.stdout
    assert "left in flight: a get in process" in r.stderr and "is delivering them" in r.stderr
    held = len(in_flight(cli.store))
    with Store.open(cli.store, **OPEN) as st:
        undone = st.undo_inflight()
    assert undone == 0 and sum(undone.delivering.values()) == held > 0
    assert len(drained(reader)) == 3  # nothing went twice
    assert everything(cli.store, "q") == []


def test_a_backup_taken_during_a_held_get_holds_nothing(cli, spawn, tmp_path):
    # the copy kept the get's hold row but not its holder file: where it was restored, the row's
    # pid (whatever process has it there: in a container the getter was pid 1, init on the
    # host) held the messages for ever; get exited 3, undo --all and sweep left them
    fill(cli.store, 8)
    reader = stalled_get(cli, spawn, "--count", "5")
    backup = tmp_path / "backup"
    cli.ok("backup", str(backup))
    restored = tmp_path / "restored"
    shutil.copytree(backup, restored)
    with Store.open(restored, **OPEN) as st:  # while the getter (a live pid here) still runs
        assert st._read(holders.holds) == []
        assert [(m.state, m.backouts) for m in st.browse("q", states="all")] == [("available", 0)] * 8
        assert len(st.get_many("q", 8)) == 8
        assert st.check() == []
    assert len(drained(reader)) == 5
    assert len(everything(cli.store, "q")) == 3  # the original: the get removed its five
