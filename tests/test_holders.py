"""No write transaction is open while a process writes output or sends: a destructive get and a
dispatcher hold their messages under their process (store/holders.py). A reader that stalls
blocks nobody; a holder that is killed gives back its messages, and only its own. Real
processes, real pipes, SIGKILL."""

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from channel_helpers import ListenerProc, keygen, make_store, mqcli, wait_until
from store import NewMessage, Store

DEST = "DIRECT=OS:qmB\\q"


def fill(path, n, size=100, queue="q"):
    with Store.open(path) as st:
        for at in range(0, n, 1000):
            st.put_many(queue, [NewMessage(b"%0*d" % (size, i)) for i in range(at, min(n, at + 1000))])


def ids(path, queue="q", states=None):
    with Store.open(path) as st:
        return [m.msg_id for m in st.browse(queue, states=states)]


def held(path, queue="q"):
    with Store.open(path) as st:
        return [m for m in st.browse(queue, states="all") if m.state != "available"]


def child(path, code):
    """A Python process using the store library (the worktree's, via PYTHONPATH)."""
    script = f"import sys, time\nfrom store import Store\nst = Store.open({str(path)!r})\n" + textwrap.dedent(code)
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_get_killed_while_delivering_gives_its_messages_back_without_a_backout(cli):
    fill(cli.store, 20)
    before = ids(cli.store)
    proc = child(cli.store, """
        def stall(found):
            print("delivering", flush=True)
            time.sleep(600)
        st.get_many("q", 5, deliver=stall)
    """)
    try:
        assert proc.stdout.readline() == b"delivering\n"
        assert len(held(cli.store)) == 5 and all(m.state == "get-unconfirmed" for m in held(cli.store))
        assert len(ids(cli.store)) == 15  # held: nobody else gets them
    finally:
        proc.kill()
        proc.wait(timeout=30)
    with Store.open(cli.store) as st:
        st.sweep()  # any write returns a dead holder's messages
        back = st.browse("q")
    assert [m.msg_id for m in back] == before and {m.backouts for m in back} == {0}
    assert cli.ok("check").code == 0


def test_a_delivery_that_fails_part_way_removes_what_was_delivered_and_returns_the_rest(st):
    st.put_many("q", [NewMessage(b"%d" % i) for i in range(5)])

    def deliver(found):  # the reader went away after three of them
        assert [m.body for m in found] == [b"0", b"1", b"2", b"3", b"4"]
        exc = BrokenPipeError()
        exc.delivered = 3
        raise exc

    with pytest.raises(BrokenPipeError):
        st.get_many("q", 5, deliver=deliver)
    left = st.browse("q", states="all")
    assert [m.body for m in left] == [b"3", b"4"] and {(m.state, m.backouts) for m in left} == {("available", 0)}
    assert st.get_many("q", 5, deliver=lambda found: None)[0].state == "available"  # shown as it was got
    assert st.browse("q", states="all") == []


def test_a_two_phase_get_whose_output_fails_keeps_only_what_was_delivered(st):
    st.put_many("q", [NewMessage(b"%d" % i) for i in range(4)])

    def deliver(found):
        exc = KeyboardInterrupt()
        exc.delivered = 2
        raise exc

    with pytest.raises(KeyboardInterrupt):
        st.get_many("q", 4, confirm_id=42, deliver=deliver)
    assert {m.body for m in st.browse("q", states={"get-unconfirmed"})} == {b"0", b"1"}
    assert [(m.body, m.backouts) for m in st.browse("q")] == [(b"2", 0), (b"3", 0)]
    assert st.confirm("q", 42) == 2


def test_a_killed_dispatchers_batch_goes_back_and_nothing_else(tmp_path):
    a = tmp_path / "a"
    make_store(a, "qmA")
    key = keygen(tmp_path / "k.key")
    assert mqcli(a, "link", "add", "qmB", "127.0.0.1:9", "--key-file", key).code == 0
    with Store.open(a) as st:
        st.put(DEST, b"unconfirmed put", confirm_id=77)
        st.put_many(DEST, [NewMessage(b"%d" % i) for i in range(4)])
        outq = st.outgoing_list()[0].name
        [two_phase] = st.get_many(outq, 1, confirm_id=88)
    proc = child(a, f"""
        taken = st.outgoing_take({outq!r}, 2)
        print(len(taken.items), flush=True)
        time.sleep(600)
    """)
    try:
        assert proc.stdout.readline() == b"2\n"
    finally:
        proc.kill()
        proc.wait(timeout=30)
    with Store.open(a) as st:
        st.sweep()
        states = sorted((m.state, m.confirm_id, m.backouts) for m in st.browse(outq, states="all"))
        assert states == [("available", None, 0)] * 3 + [("get-unconfirmed", 88, 0), ("put-unconfirmed", 77, 0)]
        assert st.undo(outq, confirm_id=77) == 1 and st.confirm(outq, 88) == 1
        assert two_phase.body == b"0"
        assert st.check() == []


def test_a_dispatcher_start_leaves_an_unconfirmed_put_and_a_two_phase_get_alone(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    make_store(a, "qmA")
    make_store(b, "qmB", "q")
    key = keygen(tmp_path / "k.key")
    with ListenerProc(b, key) as listener:
        assert mqcli(a, "link", "add", "qmB", f"127.0.0.1:{listener.port}", "--key-file", key).code == 0
        assert mqcli(a, "put", DEST, "awaiting its confirm", "--confirm-id", "77").code == 0
        assert mqcli(a, "put", DEST, "taken two-phase").code == 0
        assert mqcli(a, "put", DEST, "to send").code == 0
        outq = json.loads(mqcli(a, "-o", "json", "outgoing", "list").stdout)[0]["name"]
        got = mqcli(a, "-o", "json", "get", outq, "--confirm-id", "88")
        assert got.code == 0 and json.loads(got.stdout)["body"] == "taken two-phase"
        for _ in range(2):  # a dispatcher start, and another: nothing of theirs moves
            assert mqcli(a, "dispatch", "--once").code == 0
        assert [m.body for m in Store.open(b).browse("q")] == [b"to send"]
        assert mqcli(a, "confirm", outq, "--confirm-id", "77").code == 0
        assert mqcli(a, "confirm", outq, "--confirm-id", "88").code == 0
        assert mqcli(a, "dispatch", "--once").code == 0
        assert sorted(m.body for m in Store.open(b).browse("q")) == [b"awaiting its confirm", b"to send"]
        assert listener.stop() == 0
    for store in (a, b):
        assert mqcli(store, "check").code == 0


@pytest.mark.slow
def test_a_stalled_reader_blocks_no_other_process(cli, spawn):
    # 5,000 bodies of 100 bytes: far more than a pipe holds, so the get blocks in a write
    fill(cli.store, 5000)
    cli.ok("queue", "create", "work", "-q")
    fill(cli.store, 20, queue="work")
    reader = spawn(cli, "get", "q", "--all", "-o", "body", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(lambda: held(cli.store), 30, "the get to hold its first messages")
    started = time.monotonic()
    # each finishes while nobody reads the get's pipe: other processes, each taking the write
    # lock once per command (`mqcli batch` runs its lines in one process: the test is about the
    # lock, not about 140 process start-ups); a batch stops at the first command that fails
    puts = "".join(f'put q "new {i}"\n' for i in range(100))
    assert cli.subprocess("batch", "-", input=puts.encode(), timeout=60).code == 0
    pairs = "".join(f"get work --confirm-id {1000 + i}\nconfirm work --confirm-id {1000 + i}\n" for i in range(20))
    assert cli.subprocess("batch", "-", input=pairs.encode(), timeout=60).code == 0
    assert reader.poll() is None, "the reader was supposed to be stalled all along"
    elapsed = time.monotonic() - started
    time.sleep(max(0.0, 10 - elapsed))  # stalled 10 s in all
    assert reader.poll() is None
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    bodies = out.split(b"\n")[:-1]
    assert len(bodies) == 5100 and len(set(bodies)) == 5100
    assert ids(cli.store, "work") == [] and ids(cli.store) == []
    assert cli.ok("check").code == 0


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(25))
def test_a_get_killed_at_a_random_moment_loses_nothing(cli, spawn, trial):
    rng = random.Random(trial)
    fill(cli.store, 20000)  # about a second of output: the kill lands while it runs
    everything = set(ids(cli.store))
    reader = spawn(cli, "get", "q", "--all", "-o", "jsonl", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines: list[bytes] = []

    def read_slowly():  # a consumer that sometimes lags, so the get blocks in its writes
        for line in reader.stdout:
            lines.append(line)
            if rng.random() < 0.01:
                time.sleep(0.02)

    t = threading.Thread(target=read_slowly, daemon=True)
    t.start()
    wait_until(lambda: lines, 30, "the get's first output")
    time.sleep(rng.uniform(0.0, 0.5))
    reader.send_signal(signal.SIGKILL)
    assert reader.wait(timeout=30) == -signal.SIGKILL, "the get finished before it was killed"
    t.join(timeout=30)
    shown = {json.loads(line)["msg_id"] for line in lines if line.endswith(b"\n")}
    with Store.open(cli.store) as st:
        st.sweep()  # a write: the killed get's held messages come back
        left = [m for m in st.browse("q", states="all")]
        assert st.check() == []
    assert {m.state for m in left} <= {"available"}, "a dead holder's messages stayed held"
    assert {m.backouts for m in left} <= {0}
    assert shown | {m.msg_id for m in left} == everything  # nothing lost
    assert left, "the get was killed after it took everything"
    # shown again: at most the batch in hand (SIGKILL leaves no time to remove what was written)
    assert len(left) + len(shown) - len(everything) <= 1000


def test_messages_a_get_is_delivering_are_leaving_so_a_replay_of_them_is_stored(st):
    # `get a --all -o jsonl | put b --jsonl -` on one store: the put meets msg_ids the get
    # still holds; they are on their way out, not copies already stored
    from dataclasses import replace

    st.create_queue("b")
    st.put_many("q", [NewMessage(b"%d" % i) for i in range(3)])
    stored = []

    def deliver(found):  # no write transaction is open here: the same process may write
        stored.extend(st.import_messages("b", [replace(m, props=dict(m.props)) for m in found]))

    st.get_many("q", 3, deliver=deliver)
    assert len(stored) == 3 and [m.body for m in st.browse("b")] == [b"0", b"1", b"2"]
    assert st.browse("q", states="all") == []
    again = st.import_messages("b", [replace(m, props=dict(m.props)) for m in stored])
    assert list(again) == [] and len(again.skipped) == 3  # now they are stored: a re-run is a no-op


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_get_stalled_on_a_full_pipe_stops_on_a_signal_and_loses_nothing(cli, spawn, signum):
    fill(cli.store, 5000)  # far more than a pipe holds: the get blocks in a write
    everything = set(ids(cli.store))
    reader = spawn(cli, "get", "q", "--all", "-o", "jsonl", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(lambda: held(cli.store), 30, "the get to hold its first batch")
    time.sleep(0.5)  # its write has filled the pipe by now
    reader.send_signal(signum)
    assert reader.wait(timeout=30) == 128 + signum  # it did not wait for a reader that never comes
    out = reader.stdout.read()
    shown = {json.loads(line)["msg_id"] for line in out.split(b"\n") if line.endswith(b"}")}
    with Store.open(cli.store) as st:
        left = st.browse("q", states="all")
        assert st.check() == []
    assert {(m.state, m.backouts) for m in left} == {("available", 0)}  # nothing left held
    assert shown | {m.msg_id for m in left} == everything
    assert len(shown & {m.msg_id for m in left}) <= 1  # shown again: at most the one cut part way


def test_a_live_consumers_message_is_left_by_an_operators_undo_and_a_purge_but_its_lease_lapses(st, clock):
    # a consumer's messages are being handled: an operators' undo or a purge that took one
    # handed it to another worker while the first one's handler still ran (store/consumer.py)
    st.put_many("q", [NewMessage(b"a"), NewMessage(b"b")])
    me = f"consumer in process {os.getpid()}"
    with st.consumer("q", lease=30) as c:
        m = c.next(0)
        undone = st.undo_inflight("q")
        assert (undone, undone.delivering) == (0, {me: 1})
        purged = st.purge_queue("q")
        assert (purged, purged.delivering) == (1, {me: 1})  # b, available, is purged
        assert [(x.body, x.state) for x in st.browse("q", states="all")] == [(b"a", "get-unconfirmed")]
        clock.advance(31)  # a stopped consumer keeps nothing: its lease lapses as any
        again = st.get("q", wait=0, confirm_id=7)
        assert (again.body, again.backouts) == (b"a", 1)
        c.confirm(m)
    assert [type(exc).__name__ for _, exc in c.failed] == ["ConfirmIdLapsed"]
    assert st.confirm("q", 7) == 1
    assert st._read(lambda t: t.lt.stat(t.dbs["holders"])["entries"]) == 0  # closed: its row is gone


def test_a_dead_consumers_row_is_forgotten_by_sweep_and_its_message_waits_for_its_lease(tmp_path):
    path = tmp_path / "qm"
    with Store.open(path, create=True) as st:
        st.create_queue("q")
        st.put("q", b"x")
    dies = (f"import os, sys; sys.path[:0] = {sys.path!r}; from store import Store; "
            f"c = Store.open({str(path)!r}).consumer('q', lease=600); c.next(0); os._exit(0)")
    subprocess.run([sys.executable, "-c", dies], check=True, timeout=60)
    with Store.open(path) as st:
        rows = lambda: st._read(lambda t: t.lt.stat(t.dbs["holders"])["entries"])  # noqa: E731
        assert rows() == 1
        st.sweep()
        assert rows() == 0 and not list((path / "holders").iterdir())
        assert [m.state for m in st.browse("q", states="all")] == ["get-unconfirmed"]  # until its lease lapses
        assert st.undo_inflight("q") == 1  # no one's now: an operator may release it


def test_a_consumers_confirm_ids_are_its_own(st, monkeypatch):
    # they run base+1, base+2, ...: a user's get naming the next one while it wrote its message
    # out took it too, and one confirm or undo then ended both holders' messages
    from store import errors, holders

    st.put_many("q", [NewMessage(b"a"), NewMessage(b"b"), NewMessage(b"c")])
    st.get("q", wait=0, confirm_id=1_000_005)  # pending before the consumer comes
    bases = iter([1_000_000, 7_000_000])  # the first range would hold it: the consumer draws again
    monkeypatch.setattr(holders, "new_token", lambda: next(bases))
    with st.consumer("q") as c:
        m = c.next(0)
        assert m.confirm_id == 7_000_001
        with pytest.raises(errors.IdInUse, match="one of the ids of a consumer in process"):
            st.get("q", wait=0, confirm_id=7_000_002)
        assert c.next(0).confirm_id == 7_000_002
        undone = st.undo_inflight("q")  # the user's, not the consumer's two
        assert (undone, undone.delivering) == (1, {f"consumer in process {os.getpid()}": 2})
    assert sorted(m.body for m in st.browse("q")) == [b"a", b"b", b"c"]  # and the consumer undid its two at close


@pytest.mark.parametrize("left", ["dropped", "store closed"])
def test_a_consumer_left_unclosed_keeps_nothing_from_an_operators_undo(tmp_path, left):
    # its row said "a consumer in process P" for as long as the process lived: undo --all and
    # purge left its messages (no lease by default: for good)
    import gc

    path = tmp_path / "qm"
    with Store.open(path, create=True) as st:
        st.create_queue("q")
        st.put("q", b"job")
    st = Store.open(path)
    c = st.consumer("q")
    c.next(0)
    if left == "dropped":
        del c
        gc.collect()
    else:
        st.close()
    with Store.open(path) if left == "store closed" else st as other:
        assert other.undo_inflight("q") == 1
        assert other.get("q", wait=0).body == b"job"
        assert other._read(lambda t: t.lt.stat(t.dbs["holders"])["entries"]) == 0
    assert not list((path / "holders").iterdir())
