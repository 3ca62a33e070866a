"""`mqcli listen` under a crowd that never authenticates, all real processes and sockets on
loopback (127.0.0.2 and up play other hosts): connections that have not proved the key have a
pool of their own, limited per address, and a deadline, so that however many sockets a peer
with no key holds open, an authenticated `dispatch` still goes through (docs/protocol.md §5).
Every loop is bounded in count and time."""

from __future__ import annotations

import json
import os
import selectors
import socket
import threading
import time
import uuid

import pytest

from channel_helpers import (
    ListenerProc, RawPeer, bodies, keygen, linked_pair, make_store, message_count, mqcli, records_for,
    sealed_batch, wait_until,
)
from store import NewMessage, Store
from store.channel.frames import ErrorCode, FrameType, decode_error, encode_frame
from store.channel.handshake import encode_hello
from store.links import load_key

DEST = "DIRECT=OS:qmB\\q"
HELLO = encode_frame(FrameType.HELLO, encode_hello(str(uuid.uuid4()), "crowd", b"\0" * 32))
HALF_HELLO = HELLO[:len(HELLO) // 2]


class Crowd:
    """`size` sockets to a listener from `source` that never authenticate: in turn one sends
    nothing, one half a HELLO, one a whole HELLO and never answers the CHALLENGE (`roles=2`: only
    the first two kinds). One the listener closes is opened again at once, so `size` are always
    connected from this side. Runs on a thread until `stop()` or `limit` seconds, whichever
    comes first."""

    def __init__(self, port: int, size: int, source: str, roles: int = 3, limit: float = 120) -> None:
        self.port, self.size, self.source, self.roles = port, size, source, roles
        self.deadline = time.monotonic() + limit
        self.opened = 0     # connections made, first ones included
        self.reopened = 0   # of them, in place of one the listener closed
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._sel = selectors.DefaultSelector()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _open(self, role: int) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10, source_address=(self.source, 0))
        sock.sendall((b"", HALF_HELLO, HELLO)[role])
        sock.setblocking(False)
        self._sel.register(sock, selectors.EVENT_READ, role)
        self.opened += 1

    def _run(self) -> None:
        try:
            for i in range(self.size):
                self._open(i % self.roles)
            while not self._stop.is_set() and time.monotonic() < self.deadline:
                for key, _ in self._sel.select(0.05):
                    sock = key.fileobj
                    try:
                        data = sock.recv(65536)  # a CHALLENGE or an ERROR, then the end
                    except ConnectionError:
                        data = b""
                    if not data:
                        self._sel.unregister(sock)
                        sock.close()
                        self._open(key.data)
                        self.reopened += 1
        except OSError as exc:
            self.failed.append(repr(exc))
        finally:
            for key in list(self._sel.get_map().values()):
                key.fileobj.close()
            self._sel.close()

    def running(self) -> bool:
        """Still holding its sockets: neither failed nor past its time limit."""
        return self._thread.is_alive() and not self.failed

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive()
        assert not self.failed, self.failed

    def __enter__(self) -> Crowd:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def resources(pid: int) -> tuple[int, int]:
    """(open file descriptors, threads) of a process."""
    with open(f"/proc/{pid}/status") as status:
        threads = next(int(line.split()[1]) for line in status if line.startswith("Threads:"))
    return len(os.listdir(f"/proc/{pid}/fd")), threads


def put(store, n: int) -> list[bytes]:
    sent = [b"m-%04d" % i for i in range(n)]
    with Store.open(store) as st:
        st.put_many(DEST, [NewMessage(b) for b in sent])
    return sent


@pytest.mark.slow
@pytest.mark.parametrize("source, roles", [("127.0.0.2", 3), ("127.0.0.1", 2)],
                         ids=["from-another-host", "idle-from-the-dispatchers-address"])
def test_an_authenticated_dispatch_goes_through_while_200_unauthenticated_connections_are_held(
        tmp_path, source, roles):
    """From another address the crowd may even send HELLOs: it only ever displaces its own. From
    the dispatcher's own address it is idle or half-open (a crowd that sends whole HELLOs from
    there is a limit: docs/protocol.md §5)."""
    with linked_pair(tmp_path, (), ("q",)) as net:
        sent = put(net.a, 1000)
        fds, threads = resources(net.listener.proc.pid)
        with Crowd(net.listener.port, 200, source, roles) as crowd:
            # all 200 in, and the listener (32 places, 8 per address) has closed some to make room
            wait_until(lambda: crowd.opened >= 200 and crowd.reopened >= 200, 60, "the crowd to churn")
            before = crowd.reopened
            r = mqcli(net.a, "-o", "json", "dispatch", "--once", timeout=10)
            assert crowd.running()  # its 200 still held (reopened as closed) when the dispatch ended
            during = crowd.reopened - before
            held_fds, held_threads = resources(net.listener.proc.pid)
        # the crowd cost the listener at most its pool's sockets (32), no thread per connection
        # (the one more is the store's worker, started by the first batch)
        assert held_fds - fds <= 32 + 8 and held_threads <= threads + 1, (fds, held_fds, threads, held_threads)
        assert net.listener.alive(), net.listener.stderr
        assert r.code == 0, r
        [result] = json.loads(r.stdout)
        assert (result["messages"], result["stored"], result["duplicates"], result["error"]) == (1000, 1000, 0, None)
        assert during > 0  # the crowd was being turned away while the dispatch went through
        assert sorted(bodies(net.b, "q")) == sent  # each once
        with Store.open(net.a) as st:
            assert st.outgoing_show(DEST).messages == 0
        assert "Traceback" not in net.listener.stderr, net.listener.stderr


def error_of(peer: RawPeer) -> tuple[int, str]:
    frame = peer.read_frame()
    if frame is not None and frame.type == FrameType.CHALLENGE:
        frame = peer.read_frame()
    assert frame is not None and frame.type == FrameType.ERROR, frame
    got = decode_error(frame.payload)
    assert peer.closed_by_peer()
    return got


def still_open(peer: RawPeer) -> bool:
    """Nothing to read and not closed: the listener still holds it."""
    peer.sock.setblocking(False)
    try:
        peer.sock.recv(65536)
    except BlockingIOError:
        return True
    finally:
        peer.sock.setblocking(True)
    return False


@pytest.fixture
def qmb(tmp_path):
    b = tmp_path / "b"
    make_store(b, "qmB", "q")
    key_file = keygen(tmp_path / "k.key")
    origin, items = records_for(tmp_path, "qmB", "q", [b"x", b"y"])
    return b, key_file, origin, items


def test_connections_that_do_not_authenticate_are_closed_at_the_handshake_deadline(qmb):
    b, key_file, origin, items = qmb
    with ListenerProc(b, key_file, 0, "--handshake-timeout", "1s") as listener:
        with RawPeer(listener.port, timeout=30) as authenticated:
            session = authenticated.handshake(load_key(key_file), origin)
            silent, half, hello_only = (RawPeer(listener.port, timeout=30) for _ in range(3))
            half.send(HALF_HELLO)
            hello_only.send(HELLO)
            assert hello_only.read_frame().type == FrameType.CHALLENGE
            for peer in (silent, half, hello_only):
                assert error_of(peer) == (ErrorCode.PROTOCOL, "handshake timed out")
                peer.close()
            # opened before them, so past its deadline too: an authenticated peer is not bound by it
            authenticated.send(sealed_batch(session, items))
            assert authenticated.read_frame().type == FrameType.ACK
        assert listener.stop() == 0, listener.stderr
    assert bodies(b, "q") == [b"x", b"y"]


def test_an_address_over_its_limit_loses_its_idle_connections_oldest_first_and_no_one_else(qmb):
    b, key_file, origin, items = qmb
    with ListenerProc(b, key_file, 0, "--handshake-timeout", "120s") as listener:
        port = listener.port
        elsewhere = RawPeer(port, timeout=30, source="127.0.0.3")
        greeted = RawPeer(port, timeout=30, source="127.0.0.2")  # sent its HELLO: kept over idle ones
        greeted.send(HELLO)
        assert greeted.read_frame().type == FrameType.CHALLENGE
        idle = [RawPeer(port, timeout=30, source="127.0.0.2") for _ in range(12)]
        # 8 places for 127.0.0.2: the greeted one and the 7 newest idle ones keep theirs
        for peer in idle[:5]:
            assert error_of(peer) == (ErrorCode.BUSY, "too many connections from 127.0.0.2 waiting to "
                                                       "authenticate (at most 8); retry later")
        assert all(still_open(p) for p in [elsewhere, greeted, *idle[5:]])
        # a real peer from the crowded address: let in (the oldest idle one makes room), served
        with RawPeer(port, timeout=30, source="127.0.0.2") as real:
            session = real.handshake(load_key(key_file), origin)
            real.send(sealed_batch(session, items))
            assert real.read_frame().type == FrameType.ACK
        assert error_of(idle[5])[0] == ErrorCode.BUSY
        assert all(still_open(p) for p in [elsewhere, greeted, *idle[6:]])
        for p in [elsewhere, greeted, *idle]:
            p.close()
        assert listener.stop() == 0, listener.stderr
    assert message_count(b) == 2


def test_a_full_pool_makes_room_from_the_address_holding_most(qmb):
    b, key_file, origin, items = qmb
    with ListenerProc(b, key_file, 0, "--handshake-timeout", "120s") as listener:
        port = listener.port
        # 32 places in all: 8 each from four addresses fill them
        crowds = {n: [RawPeer(port, timeout=30, source=f"127.0.0.{n}") for _ in range(8)] for n in (2, 3, 4, 5)}
        crowds[3].append(RawPeer(port, timeout=30, source="127.0.0.3"))  # its own oldest makes room
        assert error_of(crowds[3][0])[0] == ErrorCode.BUSY
        # the pool is full: the first address holding 8 gives one to a newcomer from elsewhere
        lone = RawPeer(port, timeout=30, source="127.0.0.6")
        assert error_of(crowds[2][0]) == (ErrorCode.BUSY, "too many connections waiting to authenticate "
                                                          "(at most 32); retry later")
        assert still_open(lone)
        assert all(still_open(p) for n in (2, 3, 4, 5) for p in crowds[n][1:])
        for p in [lone, *(p for n in crowds for p in crowds[n])]:
            p.close()
        assert listener.stop() == 0, listener.stderr


def test_binding_a_non_loopback_address_warns_once_that_the_channel_is_not_encrypted(qmb):
    b, key_file, _, _ = qmb
    warning = ("mqcli: warning: listening on 0.0.0.0, which is not a loopback address: peers must prove "
               "they hold the key, but messages cross unencrypted")
    with ListenerProc(b, key_file, 0, host="0.0.0.0") as wide:
        assert wide.stop() == 0
    warned = [i for i, line in enumerate(wide.lines) if line.startswith(warning)]
    ready = [i for i, line in enumerate(wide.lines) if line.startswith("listening on 0.0.0.0:")]
    assert len(warned) == 1 and len(ready) == 1 and warned[0] < ready[0], wide.lines
    with ListenerProc(b, key_file, 0) as loopback:
        assert loopback.stop() == 0
    assert not any("warning" in line for line in loopback.lines), loopback.lines
