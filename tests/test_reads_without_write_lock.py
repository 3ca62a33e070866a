"""Commands that only read take no LMDB write lock (Store.open(reading=True); docs/design.md#store,
"Reads take no write lock"): another process holding the write lock (a writer stopped inside
its commit: Ctrl-Z, SIGSTOP, a debugger) holds up none of them. Maintenance a read finds due is
done by a child process (store/maintenance_process.py), waited for a while: with the lock held,
the read shows the store as last committed and says so."""

import json
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from cli_helpers import mqcli_command
from store import Store
from store.errors import InvalidArgument, StoreUnavailable

# a process inside a write transaction, holding LMDB's write lock until it is killed
HOLDER = textwrap.dedent("""
    import sys, time
    from store import Store
    st = Store.open(sys.argv[1])
    txn = st._env.begin(write=True)
    print("locked", flush=True)
    time.sleep(120)
""")

READS = [
    ("stats",), ("stats", "-o", "json"), ("browse", "q"), ("browse", "q", "-o", "jsonl"), ("info",),
    ("inflight",), ("queue", "list"), ("queue", "show", "q"), ("export", "q"), ("tx", "list"),
    ("outgoing", "list"), ("link", "list"), ("health", "q", "--depth", "5:10"),
    ("browse", "q", "--label", "none"), ("check",), ("sweep", "--dry-run"),
]


@contextmanager
def holding_write_lock(store):
    """The write lock of `store`, held by another process inside the block (SIGKILLed after)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(store)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"locked\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def write_lock_held(cli):
    """The store's write lock, held by another process (SIGKILLed at teardown)."""
    with holding_write_lock(cli.store) as proc:
        yield proc


def test_read_commands_run_while_another_process_holds_the_write_lock(cli, write_lock_held):
    for args in READS:
        result = cli.subprocess(*args, timeout=30)
        assert result.code == 0, result


def test_a_backup_or_snapshot_is_taken_while_another_process_holds_the_write_lock(cli, write_lock_held, tmp_path):
    # it writes nothing to the store: it waited (check and sweep --dry-run too, in READS)
    result = cli.subprocess("backup", str(tmp_path / "copy"), timeout=30)
    assert result.code == 0, result
    assert cli.subprocess("--store", str(tmp_path / "copy"), "check", timeout=30).code == 0
    result = cli.subprocess("snapshot", str(tmp_path / "snapshots"), timeout=30)
    assert result.code == 0, result


@pytest.fixture
def two_messages(cli):
    cli.put("q", "one")
    cli.put("q", "two")
    return cli


def test_what_they_read_is_the_store_as_committed(two_messages, write_lock_held, spawn):
    cli = two_messages
    stats = {q["queue"]: q for q in cli.subprocess("stats", "-o", "json", timeout=30).json()}
    assert stats["q"]["depth"] == 2
    bodies = [m["body"] for m in cli.subprocess("browse", "q", "-o", "jsonl", timeout=30).jsonl()]
    assert bodies == ["one", "two"]
    # a writer waits for the lock meanwhile (LMDB has one writer): it is still running
    put = spawn(cli, "put", "q", "three", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    assert put.poll() is None
    write_lock_held.kill()  # the holder dies: its transaction is gone, the put goes through
    assert put.wait(timeout=30) == 0
    assert [m["body"] for m in cli.jsonl("browse", "q")] == ["one", "two", "three"]


def lapsed_lease(cli):
    """A message got under a lease that lapsed: the next access undoes it (maintenance, a write)."""
    cli.put("q", "one")
    cli.ok("get", "q", "--confirm-id", "7", "--lease", "1ms", "-q")
    time.sleep(0.05)


def states(cli, *args, **kw):
    stats = cli.subprocess("stats", "-o", "json", *args, timeout=30, **kw)
    assert stats.code == 0, stats
    return {k: v for k, v in next(q for q in stats.json() if q["queue"] == "q").items()
            if k in ("available", "get-unconfirmed")}, stats


def test_a_read_that_finds_maintenance_due_has_it_done_aside(cli):
    lapsed_lease(cli)
    # the lease is undone by a child process that writes: the reading command still wrote nothing
    shown, _ = states(cli)
    assert shown == {"available": 1, "get-unconfirmed": 0}
    assert [m["body"] for m in cli.jsonl("browse", "q")] == ["one"]
    assert cli.json("inflight") == []


def test_with_the_write_lock_held_a_due_read_shows_the_store_as_committed_and_says_so(cli):
    lapsed_lease(cli)
    with holding_write_lock(cli.store):
        shown, stats = states(cli)
        assert shown == {"available": 0, "get-unconfirmed": 1}  # as committed: the lapse not applied
        assert "showing the store as last committed" in stats.stderr
        assert "holds the store's write lock" in stats.stderr
        assert states(cli, "-q")[1].stderr == ""  # -q: no note
    shown, stats = states(cli)  # the lock free again: applied
    assert shown == {"available": 1, "get-unconfirmed": 0} and stats.stderr == ""


def children_of_command(marker):
    """Processes whose command line holds `marker` (the store path given with --store)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def started_maintenance(cli, holder, reader):
    """Wait until `reader` (a Popen started with --store) has started its maintenance process."""
    deadline = time.monotonic() + 20
    running: set[int] = set()
    while len(running) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
        running = set(children_of_command(str(cli.store))) - {holder.pid}
    assert len(running) == 2 and reader.pid in running, running  # the reader and its child


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_it_waits_ends_it_and_its_child(cli, spawn, sig):
    lapsed_lease(cli)
    with holding_write_lock(cli.store) as holder:
        browse = spawn(cli, "--store", cli.store, "browse", "q", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        started_maintenance(cli, holder, browse)
        time.sleep(0.2)
        assert browse.poll() is None  # in the wait for its child, which waits for the lock
        browse.send_signal(sig)
        code = browse.wait(timeout=30)
        assert code == 128 + sig, code
        assert b"mqcli: error:" in browse.stderr.read()
        assert set(children_of_command(str(cli.store))) == {holder.pid}  # killed with it
    assert [m["body"] for m in cli.jsonl("browse", "q")] == ["one"]


def test_a_reading_handle_reads_and_refuses_to_write(cli):
    lapsed_lease(cli)
    with Store.open(cli.store, reading=True) as st:
        assert st.queue_stats("q").by_state["available"] == 1  # the lapsed lease undone aside
        with pytest.raises(InvalidArgument, match="open for reading only"):
            st.put("q", b"two")
    assert cli.ok("check").code == 0


def test_a_batch_that_reads_then_writes_shares_one_handle(cli):
    result = cli.ok("batch", "-", input=b"stats\nput q one\nbrowse q -o body\nget q -o body\nstats -o json\n")
    assert "one" in result.out
    assert {q["queue"]: q["depth"] for q in cli.json("stats")}["q"] == 0


def test_a_store_replaced_at_its_path_is_not_maintained_for_the_reader_of_the_first(cli, tmp_path):
    lapsed_lease(cli)
    said = []
    with Store.open(cli.store, reading=True) as st:
        st.on_stale = said.append
        cli.store.rename(tmp_path / "moved")
        with Store.open(cli.store, create=True) as other:
            other.create_queue("q")
        time.sleep(0.2)  # the handle looks at its path again after 0.1 s unused (Store._env)
        # the reader no longer shows the store it opened as if it were the one at its path
        with pytest.raises(StoreUnavailable, match="was replaced or removed while this command had it open"):
            st.queue_stats("q")
        assert said == []  # nor did a maintenance child run on the other store for it
    with Store.open(tmp_path / "moved") as moved:  # its own maintenance, by its own next access
        assert moved.queue_stats("q").by_state["available"] == 1


def test_the_maintenance_process_runs_no_store_py_of_the_current_directory(cli, tmp_path, monkeypatch):
    trap = tmp_path / "trap"
    trap.mkdir()
    (trap / "store.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').write('ran')\n")
    lapsed_lease(cli)
    result = subprocess.run([*mqcli_command(), "--store", str(cli.store), "stats", "-o", "json"],
                            cwd=trap, capture_output=True, timeout=60)
    assert result.returncode == 0, result
    assert not (tmp_path / "ran").exists()
    q = next(q for q in json.loads(result.stdout) if q["queue"] == "q")
    assert (q["available"], q["get-unconfirmed"]) == (1, 0)  # done by the store package, not the trap


def test_the_maintenance_process_dies_with_its_reader(cli, spawn):
    lapsed_lease(cli)
    with holding_write_lock(cli.store) as holder:
        browse = spawn(cli, "--store", cli.store, "browse", "q", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started_maintenance(cli, holder, browse)
        browse.send_signal(signal.SIGHUP)  # no handler: the reader dies, and can kill nothing
        assert browse.wait(timeout=30) == -signal.SIGHUP
        deadline = time.monotonic() + 10
        while children_of_command(str(cli.store)) != [holder.pid] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert children_of_command(str(cli.store)) == [holder.pid]  # its maintenance process went too


def test_ages_are_taken_after_the_read_never_negative(cli, spawn):
    """A read that waits for its maintenance sees what was committed meanwhile: its ages are
    measured from after the read (before, a message put during the wait was -1.3 s old)."""
    cli.ok("queue", "create", "fresh", "-q")
    lapsed_lease(cli)
    with holding_write_lock(cli.store):
        stats = spawn(cli, "stats", "-o", "json", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        inflight = spawn(cli, "inflight", "-o", "json", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        put = spawn(cli, "put", "fresh", "x", "--confirm-id", "3", stdout=subprocess.DEVNULL)
        time.sleep(1.0)  # the readers wait for their maintenance, the put for the lock
    assert put.wait(timeout=30) == 0
    shown = {q["queue"]: q for q in json.loads(stats.communicate(timeout=30)[0])}
    assert shown["fresh"]["oldest_age_s"] is None or shown["fresh"]["oldest_age_s"] >= 0
    for row in json.loads(inflight.communicate(timeout=30)[0]):
        assert row["age_s"] >= 0, row
