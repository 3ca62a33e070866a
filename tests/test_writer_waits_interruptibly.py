"""A writer waiting behind another that is stopped inside its write transaction (Ctrl-Z,
SIGSTOP, a debugger) still ends on SIGTERM (exit 143) and Ctrl-C (exit 130), with its one-line
message and nothing begun: it waits in the writers' waiting room, a flock that a signal
interrupts, not in LMDB's mutex, which no signal does (store/writer_lock.py,
docs/design.md#store, "Reads take no write lock")."""

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from store import Store
from store.errors import QueueNotAvailable
from store.writer_lock import WRITER_LOCK

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux's /proc/locks")

INTERRUPTED = "mqcli: error: interrupted [INTERRUPTED]\n"
TERMINATED = "mqcli: error: terminated (SIGTERM) [INTERRUPTED]\n"
CODE = {signal.SIGINT: 130, signal.SIGTERM: 143}
MESSAGE = {signal.SIGINT: INTERRUPTED, signal.SIGTERM: TERMINATED}
WRITERS = {"put": ("put", "q", "x"), "get": ("get", "q", "--wait", "0")}

# a writer as mqcli writes (Store._write), stopped inside its write transaction; continued,
# it commits and puts one message more
HOLDER = textwrap.dedent("""
    import os, signal, sys
    from store import Store
    st = Store.open(sys.argv[1])
    def stop(t):
        print("locked", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
    st._write(stop)
    st.put("q", b"after")
    print("done", flush=True)
""")


def wait_until(predicate, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def stopped(pid):
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


@contextmanager
def stopped_writer(store):
    """Another process inside its write transaction, stopped (SIGKILLed after the block)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(store)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"locked\n"
        wait_until(lambda: stopped(proc.pid), "the holder to stop")
        yield proc
    finally:
        proc.kill()
        proc.wait()


def waits_for_its_turn(store, pid):
    """Whether process `pid` waits for the flock on the store's writer.lock (/proc/locks: a
    blocked request is shown with `->`)."""
    inode = os.stat(store / WRITER_LOCK).st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and "FLOCK" in fields:
            at = fields.index("FLOCK")
            if int(fields[at + 3]) == pid and int(fields[at + 4].rsplit(":", 1)[1]) == inode:
                return True
    return False


def waiting(cli, spawn, *args):
    proc = spawn(cli, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(lambda: waits_for_its_turn(cli.store, proc.pid) or proc.poll() is not None,
               f"`mqcli {' '.join(args)}` to wait for its turn to write")
    assert proc.poll() is None, proc.communicate()
    return proc


def queue_q(store):
    """Depth and messages in flight of queue q, read without the write lock."""
    with Store.open(store, reading=True) as st:
        stats = st.queue_stats("q")
        return stats.depth, {s: n for s, n in stats.by_state.items() if n}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("command", list(WRITERS))
def test_a_writer_behind_a_stopped_writer_ends_on_a_signal_with_nothing_done(cli, spawn, command, signum):
    cli.put("q", "before")
    with stopped_writer(cli.store) as holder:
        proc = waiting(cli, spawn, *WRITERS[command])
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)  # before: blocked for as long as the holder stays stopped
        assert (proc.returncode, out, err.decode()) == (CODE[signum], b"", MESSAGE[signum])
        assert queue_q(cli.store) == (1, {"available": 1})  # nothing put, nothing taken
        holder.send_signal(signal.SIGCONT)
        assert holder.stdout.readline() == b"done\n"
        assert holder.wait(timeout=30) == 0
    assert [m["body"] for m in cli.jsonl("browse", "q")] == ["before", "after"]
    cli.put("q", "next")  # the room is free again
    assert cli.ok("get", "q", "-o", "body").out == "before\n"
    assert cli.ok("check").code == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_get_waiting_for_a_message_ends_on_a_signal_while_a_writer_is_stopped(cli, spawn, signum):
    """The store open already: the get's next look, a write, waits for its turn (Store._write)."""
    get = spawn(cli, "get", "q", "--wait", "forever", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(lambda: any((cli.store / "wait").iterdir()) or get.poll() is not None, "the get to wait")
    with stopped_writer(cli.store):
        wait_until(lambda: waits_for_its_turn(cli.store, get.pid) or get.poll() is not None,
                   "the get to wait for its turn to write")
        get.send_signal(signum)
        out, err = get.communicate(timeout=30)
        assert (get.returncode, out, err.decode()) == (CODE[signum], b"", MESSAGE[signum])


def test_writers_behind_a_stopped_writer_that_is_killed_go_on(cli, spawn):
    with stopped_writer(cli.store) as holder:
        put = waiting(cli, spawn, "put", "q", "one")
        get = waiting(cli, spawn, "get", "q", "--wait", "30s", "-o", "body")
        other = waiting(cli, spawn, "put", "q", "two")
        holder.kill()  # its transaction is gone, and with the process its flock
        assert put.wait(timeout=30) == 0 and other.wait(timeout=30) == 0
        out, err = get.communicate(timeout=30)
        assert get.returncode == 0, err
    assert out in (b"one\n", b"two\n")
    assert sorted([m["body"] for m in cli.jsonl("browse", "q")] + [out.decode().strip()]) == ["one", "two"]
    assert cli.ok("check").code == 0


def test_a_writer_behind_the_flock_waits_and_reads_do_not(cli, spawn):
    """The flock alone holds writers back (LMDB's lock is free here); readers never take it."""
    fd = os.open(cli.store / WRITER_LOCK, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        put = waiting(cli, spawn, "put", "q", "one")
        for args in (("stats",), ("browse", "q")):
            assert cli.subprocess(*args, timeout=30).code == 0, args
        assert put.poll() is None
    finally:
        os.close(fd)
    assert put.wait(timeout=30) == 0
    assert [m["body"] for m in cli.jsonl("browse", "q")] == ["one"]


def test_the_flock_is_held_only_inside_a_write(tmp_path):
    with Store.open(tmp_path / "s", create=True) as st:
        st.create_queue("q")
        fd = os.open(tmp_path / "s" / WRITER_LOCK, os.O_RDONLY | os.O_CLOEXEC)
        try:
            def free():
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return False
                fcntl.flock(fd, fcntl.LOCK_UN)
                return True

            seen = []
            st._write(lambda t: seen.append(free()))
            assert seen == [False]  # held by the handle's write
            st.put("q", b"x")
            assert free()
            with pytest.raises(QueueNotAvailable):
                st.put("missing", b"x")  # a write that fails lets go of it too
            assert free()
        finally:
            os.close(fd)


def test_init_makes_the_lock_file_and_a_store_without_one_gets_it_at_its_first_write(cli):
    lock = cli.store / WRITER_LOCK
    assert lock.stat().st_mode & 0o777 == 0o600 and lock.stat().st_size == 0
    lock.unlink()  # as a store made by an older mqcli
    assert cli.subprocess("stats", timeout=30).code == 0
    assert not lock.exists()  # reads neither take nor make it
    cli.put("q", "one")
    assert lock.stat().st_mode & 0o777 == 0o600
    assert [m["body"] for m in cli.jsonl("browse", "q")] == ["one"]


def test_a_lock_file_that_is_a_symbolic_link_is_refused(cli, tmp_path):
    lock = cli.store / WRITER_LOCK
    lock.unlink()
    lock.symlink_to(tmp_path / "elsewhere")
    result = cli.subprocess("put", "q", "x", timeout=30)
    assert result.code != 0 and "symbolic link" in result.stderr
    assert not (tmp_path / "elsewhere").exists()


def test_a_put_that_waits_for_its_turn_between_batches_ends_on_sigterm(cli, spawn):
    batch = spawn(cli, "batch", "-", stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    batch.stdin.write(b"put q one\n")
    batch.stdin.flush()
    assert batch.stdout.readline().endswith(b"\\1\n")  # its msg_id: the store open, one put committed
    with stopped_writer(cli.store):
        batch.stdin.write(b"put q two\n")
        batch.stdin.flush()
        wait_until(lambda: waits_for_its_turn(cli.store, batch.pid), "the batch's put to wait for its turn")
        batch.send_signal(signal.SIGTERM)
        try:
            code = batch.wait(timeout=5)
        finally:
            batch.kill()
        assert code == 143
    assert [m["body"] for m in cli.jsonl("browse", "q")] == ["one"]  # "two" was not put
