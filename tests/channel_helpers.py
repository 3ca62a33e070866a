"""Helpers for the channel tests (tests/test_channel_*.py): stores, key files, real `mqcli listen`
subprocesses, and raw protocol clients over real loopback sockets. Every wait is bounded."""

from __future__ import annotations

import re
import secrets
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from cli_helpers import mqcli_command, run_mqcli

from store import Store
from store.channel.batches import encode_batch
from store.channel.frames import Frame, FrameDecoder, FrameType, encode_frame
from store.channel.handshake import ClientHandshake, Session
from store.links import generate_key_file

READY = re.compile(r"^listening on (\S+):(\d+)$")


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def make_store(path: Path, name: str, *queues: str) -> str:
    """Create a store named `name` with `queues`; return its GUID."""
    with Store.open(path, create=True, name=name) as st:
        for q in queues:
            st.create_queue(q)
        return st.info().guid


def keygen(path: Path) -> Path:
    generate_key_file(path)
    return path


@contextmanager
def linked_pair(tmp: Path, a_queues: tuple[str, ...], b_queues: tuple[str, ...]) -> Iterator[SimpleNamespace]:
    """qmA (queues `a_queues`) with a link qmB to a real listener on qmB (queues `b_queues`):
    `.a`, `.b`, `.key`, `.listener`, `.tmp`. At the end the listener must stop cleanly and both
    stores pass `mqcli check`."""
    a, b = tmp / "a", tmp / "b"
    make_store(a, "qmA", *a_queues)
    make_store(b, "qmB", *b_queues)
    key = keygen(tmp / "k.key")
    listener = ListenerProc(b, key)
    assert mqcli(a, "link", "add", "qmB", f"127.0.0.1:{listener.port}", "--key-file", key).code == 0
    yield SimpleNamespace(a=a, b=b, key=key, listener=listener, tmp=tmp)
    try:
        assert listener.stop() == 0, listener.stderr
        for store in (a, b):
            assert mqcli(store, "check").code == 0
    finally:
        listener.kill()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mqcli(store: Path, *args: Any, timeout: float = 120, input: bytes | None = None):
    return run_mqcli(["--store", store, *args], input=input, timeout=timeout)


class ListenerProc:
    """A real `mqcli listen` subprocess; `port` once it printed its ready line."""

    def __init__(self, store: Path, key: Path, port: int = 0, *extra: str, ready_timeout: float = 30,
                 host: str = "127.0.0.1") -> None:
        self.store = store
        self.proc = subprocess.Popen(
            [*mqcli_command(), "--store", str(store), "listen", "--bind", f"{host}:{port}",
             "--key-file", str(key), *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: list[str] = []
        self._ready = threading.Event()
        self.port = 0
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(ready_timeout):
            self.kill()
            raise AssertionError(f"listener not ready within {ready_timeout}s: {self.lines}")
        if not self.port:
            raise AssertionError(f"listener exited before it was ready: {self.lines}")

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            m = READY.match(line)
            if m and not self.port:
                self.port = int(m.group(2))
                self._ready.set()
        self._ready.set()

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"listener did not stop within {timeout}s after signal {signum}") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def __enter__(self) -> ListenerProc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


class RawPeer:
    """A protocol client on a plain blocking socket, for tests that misbehave on purpose."""

    def __init__(self, port: int, timeout: float = 10, source: str | None = None) -> None:
        """`source`: the loopback address to connect from (127.0.0.2 plays another host)."""
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.decoder = FrameDecoder(1 << 20)
        self.pending: list[Frame] = []
        self.sent = bytearray()  # every byte this client sent

    def send(self, data: bytes) -> None:
        self.sent += data
        self.sock.sendall(data)

    def send_frame(self, ftype: FrameType, payload: bytes) -> None:
        self.send(encode_frame(ftype, payload))

    def send_parts(self, parts: list[bytes]) -> None:
        self.send(b"".join(parts))

    def read_frame(self) -> Frame | None:
        """The next frame, or None at the end of the stream (socket timeout raises)."""
        while not self.pending:
            data = self.sock.recv(65536)
            if not data:
                return None
            self.pending.extend(self.decoder.feed(data))
        return self.pending.pop(0)

    def closed_by_peer(self) -> bool:
        """Read until the end of the stream (ERROR frames allowed on the way); True if it came."""
        while True:
            try:
                frame = self.read_frame()
            except (ConnectionResetError, BrokenPipeError):
                return True
            if frame is None:
                return True
            if frame.type != FrameType.ERROR:
                return False

    def handshake(self, key: bytes, guid: str, name: str = "rawpeer") -> Session:
        client = ClientHandshake(key, guid, name)
        self.send_frame(FrameType.HELLO, client.hello())
        challenge = self.read_frame()
        assert challenge is not None and challenge.type == FrameType.CHALLENGE, challenge
        self.send_frame(FrameType.AUTH, client.on_challenge(challenge.payload))
        ready = self.read_frame()
        assert ready is not None and ready.type == FrameType.READY, ready
        return client.on_ready(ready.payload)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# the sending incarnation of the store that made each record of records_for: a batch of them
# goes under it, as a real dispatcher's would
_INCARNATIONS: dict[bytes, bytes] = {}
_MADE_UP = secrets.token_bytes(16)  # for records no store made


def incarnation_of(items: list[tuple[str, bytes]]) -> bytes:
    return _INCARNATIONS.get(items[0][1], _MADE_UP) if items else _MADE_UP


def batch_body(items: list[tuple[str, bytes]], sent_at: int = 0) -> bytes:
    return encode_batch(items, incarnation_of(items), sent_at)


def sealed_batch(session: Session, items: list[tuple[str, bytes]]) -> bytes:
    return b"".join(session.seal(FrameType.BATCH, batch_body(items)))


def records_for(tmp: Path, dest_qm: str, queue: str, bodies: list[bytes],
                name: str = "origin") -> tuple[str, list[tuple[str, bytes]]]:
    """Real wire items (destination, record) made by a real store: put to DIRECT=OS:dest_qm\\queue
    and take them from its outgoing queue. Returns (origin GUID, items)."""
    from store import NewMessage

    path = tmp / f"records-{name}"
    with Store.open(path, create=True, name=name) as st:
        key = tmp / f"records-{name}.key"
        if not key.exists():
            keygen(key)
        try:
            st.add_link(dest_qm, "127.0.0.1:9", str(key))
        except Exception:
            pass
        dest = f"DIRECT=OS:{dest_qm}\\{queue}"
        st.put_many(dest, [NewMessage(b) for b in bodies])
        taken = st.outgoing_take(dest, len(bodies), 1 << 30)
        assert taken is not None and len(taken.items) == len(bodies)
        for _, record in taken.items:
            _INCARNATIONS[record] = taken.incarnation
        return st.info().guid, taken.items


def message_count(path: Path) -> int:
    with Store.open(path) as st:
        return st.info().messages


def bodies(path: Path, queue: str) -> list[bytes]:
    with Store.open(path) as st:
        return [m.body for m in st.browse(queue, states="all")]

