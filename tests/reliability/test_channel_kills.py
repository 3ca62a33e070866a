"""Exactly once across real SIGKILLs (docs/design.md#store-and-forward): 20,000 messages cross from qmA to qmB while the
dispatcher, and separately the listener, is killed with SIGKILL at random moments, ten times
each (RELIABILITY_ROUNDS kills each when set), and restarted after each kill. At the end every message is in qmB exactly once (bodies
carry unique ids), nothing is left in qmA's outgoing queue, and both stores pass `mqcli check`.

A kill lands at a random point of the transfer: the test waits until qmB holds a random number
of messages past the previous kill, then a random 0-20 ms more. The last kill point leaves 5,000
messages to go: at ~75,000 msg/s that is ~65 ms, more than the wait's own latency, and the
test asserts that the last dispatcher was killed before the transfer ended. CHANNEL_FAULT_SEED fixes the
randomness (the seed is printed on failure)."""

import os
import random
import signal
import subprocess
import time
from collections import Counter

import pytest

from channel_helpers import ListenerProc, free_port, keygen, make_store, mqcli, wait_until
from cli_helpers import mqcli_command
from harness import record, rounds
from store import NewMessage, Store

pytestmark = pytest.mark.slow

N = 20_000
KILLS = rounds(10)
DEST = "DIRECT=OS:qmB\\q"


@pytest.fixture
def seed():
    value = int(os.environ.get("CHANNEL_FAULT_SEED") or random.randrange(1 << 30))
    print(f"CHANNEL_FAULT_SEED={value}")
    return value


@pytest.fixture
def rng(seed):
    return random.Random(seed)


def tally(scenario: str, seed: int) -> None:
    """Into $RELIABILITY_REPORT's SIGKILL table: every kill landed mid-transfer (asserted)."""
    record("kills", scenario, {"kills": KILLS, "rounds": KILLS, "messages_checked": N, "lost": 0,
                               "duplicated": 0, "stages": {"none": 0, "partial": KILLS, "all": 0},
                               "seed": seed})


def body(i: int) -> bytes:
    return (b"id-%05d:" % i).ljust(256, b".")


def depth(store) -> int:
    with Store.open(store) as st:
        return st.queue_info("q").depth


def setup(tmp_path, port=0):
    a, b = tmp_path / "a", tmp_path / "b"
    make_store(a, "qmA")
    make_store(b, "qmB", "q")
    key = keygen(tmp_path / "k.key")
    with Store.open(a) as st:
        for at in range(0, N, 1000):
            st.put_many(DEST, [NewMessage(body(i)) for i in range(at, at + 1000)])
    return a, b, key


def follower(store, *args):
    return subprocess.Popen([*mqcli_command(), "--store", str(store), "dispatch", "--follow", *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def kill_point(rng, previous: int, kill: int) -> int:
    """A random count of received messages to kill at: later than the previous kill, leaving
    room for the kills to come."""
    share = (N - 6000) // KILLS
    return min(N - 5000, max(previous + 1, kill * share + rng.randrange(share)))


def verify(a, b) -> None:
    with Store.open(b) as st:
        got = Counter(m.body for m in st.browse("q", states="all"))
    missing = [i for i in range(N) if got[body(i)] == 0]
    doubled = [i for i in range(N) if got[body(i)] > 1]
    assert not missing and not doubled, f"missing {len(missing)} {missing[:5]}, twice {len(doubled)} {doubled[:5]}"
    assert sum(got.values()) == N
    with Store.open(a) as st:
        out = st.outgoing_show(DEST)
        assert (out.messages, out.in_flight) == (0, 0)
    for store in (a, b):
        r = mqcli(store, "check")
        assert r.code == 0, r


def test_dispatcher_killed_at_random_moments_delivers_each_message_once(tmp_path, rng, seed):
    a, b, key = setup(tmp_path)
    with ListenerProc(b, key) as listener:
        assert mqcli(a, "link", "add", "qmB", f"127.0.0.1:{listener.port}", "--key-file", key).code == 0
        reached = 0
        for kill in range(KILLS):
            target = kill_point(rng, reached, kill)
            d = follower(a, "--batch", str(rng.choice((50, 100, 200))))
            try:
                reached = wait_until(lambda t=target: (n := depth(b)) >= t and n, 120, f"{target} messages at qmB")
                time.sleep(rng.uniform(0, 0.02))
                os.kill(d.pid, signal.SIGKILL)
                d.communicate(timeout=30)
                assert d.returncode == -signal.SIGKILL
            finally:
                if d.poll() is None:
                    d.kill()
                    d.communicate(timeout=30)
        with Store.open(a) as st:
            left = st.outgoing_show(DEST)
        assert left.messages > 0  # the last kill landed before the end of the transfer
        r = mqcli(a, "dispatch", "--once", timeout=300)  # returns what the last one left in flight
        assert r.code == 0, r
        if left.in_flight:  # none if the kill fell between a batch's ack and the next take
            assert "returned" in r.stderr and "left in flight by an earlier dispatcher" in r.stderr
        assert listener.stop() == 0
    verify(a, b)
    tally("dispatch (channel)", seed)


def test_listener_killed_at_random_moments_delivers_each_message_once(tmp_path, rng, seed):
    a, b, key = setup(tmp_path)
    port = free_port()
    listener = ListenerProc(b, key, port)
    assert mqcli(a, "link", "add", "qmB", f"127.0.0.1:{port}", "--key-file", key).code == 0
    d = follower(a, "--batch", "100", "--retry-max", "200ms")
    try:
        reached = 0
        for kill in range(KILLS):
            target = kill_point(rng, reached, kill)
            reached = wait_until(lambda t=target: (n := depth(b)) >= t and n, 120, f"{target} messages at qmB")
            time.sleep(rng.uniform(0, 0.02))
            listener.kill()
            assert listener.proc.returncode == -signal.SIGKILL
            listener = ListenerProc(b, key, port)
        assert reached < N
        wait_until(lambda: depth(b) >= N, 300, "all messages at qmB")
        d.send_signal(signal.SIGTERM)
        _, err = d.communicate(timeout=60)
        assert d.returncode == 0, err
        assert b"cannot connect" in err or b"broke" in err or b"closed the connection" in err  # it did see the kills
        assert listener.stop() == 0
    finally:
        if d.poll() is None:
            d.kill()
            d.communicate(timeout=30)
        listener.kill()
    verify(a, b)
    tally("listen (channel)", seed)


def test_sigterm_mid_transfer_returns_the_batches_in_flight(tmp_path, rng):
    a, b, key = setup(tmp_path)
    with ListenerProc(b, key) as listener:
        assert mqcli(a, "link", "add", "qmB", f"127.0.0.1:{listener.port}", "--key-file", key).code == 0
        d = follower(a, "--batch", "50")
        try:
            wait_until(lambda: depth(b) >= 2000, 120, "a transfer under way")
            d.send_signal(signal.SIGTERM)
            _, err = d.communicate(timeout=60)
            assert d.returncode == 0 and b"Traceback" not in err, err
        finally:
            if d.poll() is None:
                d.kill()
                d.communicate(timeout=30)
        with Store.open(a) as st:  # no new dispatcher has run: the stopped one returned them
            assert st.outgoing_show(DEST).in_flight == 0
        r = mqcli(a, "dispatch", "--once", timeout=300)
        assert r.code == 0 and "left in flight" not in r.stderr, r
        assert listener.stop() == 0
    verify(a, b)
