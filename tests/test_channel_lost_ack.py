"""A lost ACK does not send trace times back: a real listener behind a real TCP proxy (a thread on
loopback) that cuts the connection instead of passing on the first ACK, as a connection that
drops, or a listener killed, after the receiver's commit does. The receiver has stored the
message and written its `received` report; the sender gives the batch back and sends it again
later, the receiver drops it as a duplicate, and the `sent` report keeps the time of the first
send: on one clock `sent` comes before `received` (docs/protocol.md §4)."""

import json
import socket
import struct
import threading

from channel_helpers import ListenerProc, keygen, make_store, mqcli
from store import Store
from store.channel.frames import FrameType
from store.reports import describe

TO_B = "DIRECT=OS:qmB\\orders"


class AckSwallower:
    """A TCP proxy to 127.0.0.1:`upstream` that passes every byte, except that it closes both
    connections instead of passing on the first ACK frame from the server."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.acks_to_drop = 1
        self.dropped = threading.Event()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.stopping = threading.Event()
        self.sockets: list[socket.socket] = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                client, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            up = socket.create_connection(("127.0.0.1", self.upstream), timeout=10)
            self.sockets += [client, up]
            for args in ((client, up, False), (up, client, True)):
                thread = threading.Thread(target=self._pump, args=args, daemon=True)
                self.threads.append(thread)
                thread.start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_server: bool) -> None:
        buffered = b""
        try:
            while data := src.recv(65536):
                if not from_server:
                    dst.sendall(data)
                    continue
                buffered += data
                while len(buffered) >= 5:
                    length, ftype = struct.unpack(">IB", buffered[:5])
                    if len(buffered) < 5 + length:
                        break
                    frame, buffered = buffered[:5 + length], buffered[5 + length:]
                    if ftype == FrameType.ACK and self.acks_to_drop:
                        self.acks_to_drop -= 1
                        self.dropped.set()
                        return  # the connection dies after the receiver's commit, before its ACK
                    dst.sendall(frame)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        self.stopping.set()
        self.server.close()
        for s in self.sockets:
            try:
                s.close()
            except OSError:
                pass
        for thread in self.threads:
            thread.join(10)


def _reports(path, msg_id):
    """The trace reports of `msg_id` in a store: its report queue and its outgoing queues."""
    with Store.open(path) as st:
        queues = [q.name for q in st.list_queues() if q.name == "reports" or q.outgoing is not None]
        return [r for q in queues for r in (describe(m) for m in st.browse(q)) if r["msg_id"] == msg_id]


def test_a_lost_ack_leaves_sent_before_received_on_one_clock(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    make_store(a, "qmA", "reports")
    make_store(b, "qmB", "orders")
    key = keygen(tmp_path / "k.key")
    listener = ListenerProc(b, key)
    proxy = AckSwallower(listener.port)
    try:
        assert mqcli(a, "link", "add", "qmB", f"127.0.0.1:{proxy.port}", "--key-file", key).code == 0
        put = mqcli(a, "-o", "json", "put", TO_B, "traced", "--trace", "--report-queue", "reports")
        msg_id = json.loads(put.out)["msg_id"]
        first = mqcli(a, "dispatch", "--once", "--timeout", "5s", timeout=60)
        assert first.code == 13 and proxy.dropped.is_set(), first
        with Store.open(b) as st:
            assert st.queue_info("orders").depth == 1  # B committed: only its ACK was lost
        again = mqcli(a, "-o", "json", "dispatch", "--once", "--timeout", "5s", timeout=60)
        assert again.code == 0, again
        (row,) = json.loads(again.out)
        assert (row["messages"], row["duplicates"]) == (1, 1)  # sent again, dropped as a duplicate
    finally:
        proxy.close()
        assert listener.stop() == 0, listener.stderr
        listener.kill()
    steps = {r["event"]: r for r in _reports(a, msg_id) + _reports(b, msg_id)}
    assert set(steps) == {"enqueued", "sent", "received"}
    assert steps["enqueued"]["time"] <= steps["sent"]["time"] <= steps["received"]["time"], steps
    for store in (a, b):
        assert mqcli(store, "check").code == 0
