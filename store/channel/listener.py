"""The listener (`mqcli listen`): receive batches from authenticated peers into the local store.

One asyncio server; per connection: handshake (bounded by `handshake_timeout`, frames no larger
than HANDSHAKE_MAX_FRAME until the peer has proved the key), then BATCH frames, each opened
(seal and sequence checked), decoded, and handed to `Store.receive` — one durable commit that
de-duplicates by transfer (the sender's incarnation and seq) — and only after that commit
returned, ACKed, with the count of arrivals dead-lettered here by reason.
Anything else (a wrong key, garbage, an oversized or truncated frame, a timeout) closes the
connection with an ERROR frame where one can still be sent; nothing of an unfinished or
unverified frame is ever stored.

Store calls run on one worker thread: LMDB has one writer anyway, and the event loop keeps
reading the next batch from the socket while the current one commits.

Shutdown (SIGTERM or Ctrl-C): stop accepting; a connection waiting for a frame or in the middle
of one is closed at once (nothing of it was stored); a connection whose batch is committing
finishes that commit and sends its ACK first, then closes. Either way every batch is stored
wholly and acked, or not stored; the sender resends what was not acked.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ChannelError, StoreError
from .batches import decode_batch, decode_bye, encode_ack
from .frames import (
    DEFAULT_MAX_FRAME, HANDSHAKE_MAX_FRAME, MIN_MAX_FRAME, ErrorCode, FrameType, PeerError, encode_frame,
)
from .handshake import ServerHandshake, Session, check_key
from .wire import STREAM_LIMIT, ChannelTimeout, Connection, ConnectionLost, error_code_for

if TYPE_CHECKING:
    from ..engine import Store

DEFAULT_PORT = 1801  # MSMQ's TCP port


@dataclass
class ListenerConfig:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    max_frame: int = DEFAULT_MAX_FRAME
    idle_timeout: float = 60.0       # no frame started for this long: close
    handshake_timeout: float = 10.0  # HELLO to READY
    frame_timeout: float = 30.0      # a frame's first byte to its last
    write_timeout: float = 30.0
    max_connections: int = 64
    drain_timeout: float = 60.0      # at shutdown: how long a committing batch may take

    def __post_init__(self) -> None:
        if self.max_frame < MIN_MAX_FRAME:
            raise ChannelError(f"the maximum frame size must be at least {MIN_MAX_FRAME} bytes")


def parse_bind(text: str) -> tuple[str, int]:
    """HOST:PORT, or PORT alone (on 127.0.0.1); [v6]:PORT. Port 0 picks a free one."""
    host, colon, port = text.rpartition(":")
    if not colon:
        host, port = "127.0.0.1", text
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ChannelError(f"--bind {text!r} is not HOST:PORT with a port 0-65535")
    return host, int(port)


@dataclass
class _Peer:
    conn: Connection
    task: asyncio.Task[Any]
    busy: bool = False       # a batch is committing or its ACK is being sent
    closing: bool = False    # shutdown: close after the current ACK


class Listener:
    def __init__(self, st: Store, key: bytes, config: ListenerConfig | None = None, *,
                 log: Callable[[str], None] = lambda line: None) -> None:
        self.st = st
        self.key = check_key(key)
        self.config = config or ListenerConfig()
        self.log = log
        info = st.info()
        self.guid, self.name = info.guid, info.name
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="mqcli-listen-store")
        self._peers: dict[asyncio.Task[Any], _Peer] = {}
        self._server: asyncio.base_events.Server | None = None
        self._stopped = asyncio.Event()
        self.stop_signal: int | None = None
        self.address: tuple[str, int] | None = None

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> tuple[str, int]:
        c = self.config
        try:
            self._server = await asyncio.start_server(self._handle, c.host, c.port, limit=STREAM_LIMIT,
                                                      reuse_address=True)
        except OSError as exc:
            raise ChannelError(f"cannot listen on {c.host}:{c.port}: {exc.strerror or exc}") from None
        sock = self._server.sockets[0].getsockname()
        self.address = (sock[0], sock[1])
        return self.address

    def stop(self, signum: int | None = None) -> None:
        if self.stop_signal is None:
            self.stop_signal = signum if signum is not None else 0
        self._stopped.set()

    async def serve_until_stopped(self) -> None:
        await self._stopped.wait()
        await self._shutdown()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for peer in list(self._peers.values()):
            if peer.busy:
                peer.closing = True  # finish the commit, send its ACK, then close
            else:
                peer.task.cancel()   # waiting for or inside a frame: nothing of it is stored
        tasks = [p.task for p in self._peers.values()]
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=self.config.drain_timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        if self._server is not None:
            try:  # 3.11 waits here for every connection's transport to be gone
                await asyncio.wait_for(self._server.wait_closed(), 10)
            except asyncio.TimeoutError:
                pass
        # a commit on the worker thread is never cut short: wait for it before the store closes
        self._executor.shutdown(wait=True)

    # ---- one connection ---------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        c = self.config
        conn = Connection(reader, writer, max_frame=HANDSHAKE_MAX_FRAME, frame_timeout=c.frame_timeout,
                          write_timeout=c.write_timeout)
        task = asyncio.current_task()
        assert task is not None
        if self._stopped.is_set() or len(self._peers) >= c.max_connections:
            code = ErrorCode.SHUTTING_DOWN if self._stopped.is_set() else ErrorCode.BUSY
            await conn.send_error(code, "the listener is stopping" if self._stopped.is_set()
                                  else f"too many connections (at most {c.max_connections})")
            await conn.close()
            return
        peer = self._peers[task] = _Peer(conn, task)
        stats = [0, 0, 0, 0]  # batches, stored, duplicates, dead-lettered
        who = conn.peer
        try:
            session = await asyncio.wait_for(self._handshake(conn), c.handshake_timeout)
            who = f"{conn.peer} (queue manager {session.peer_name!r}, {session.peer_guid})"
            conn.decoder.max_frame = c.max_frame
            await self._serve(peer, session, stats)
            self.log(f"{who}: closed after {stats[0]} batches: {stats[1]} messages stored, "
                     f"{stats[2]} duplicates dropped" + (f", {stats[3]} dead-lettered" if stats[3] else ""))
        except asyncio.CancelledError:
            # shutdown cancelled us between batches; end normally (asyncio 3.11's stream server
            # logs a traceback for a connection handler that ends cancelled)
            await conn.send_error(ErrorCode.SHUTTING_DOWN, "the listener is stopping")
            if stats[0]:
                self.log(f"{who}: closed at shutdown after {stats[0]} batches ({stats[1]} stored)")
        except asyncio.TimeoutError:
            self.log(f"{who}: refused: no handshake within {c.handshake_timeout:g}s")
            await conn.send_error(ErrorCode.PROTOCOL, "handshake timed out")
        except PeerError as exc:
            self.log(f"{who}: {exc.message}")
        except ConnectionLost as exc:
            self.log(f"{who}: {exc.message}" + (f" ({stats[1]} stored before)" if stats[0] else ""))
        except ChannelTimeout as exc:
            self.log(f"{who}: closed: {exc.message}")
            await conn.send_error(ErrorCode.PROTOCOL, exc.message)
        except StoreError as exc:  # ChannelError from the peer, BadData or a store refusal
            refused = "refused" if not stats[0] else "closed"
            self.log(f"{who}: {refused}: {exc.message}")
            await conn.send_error(error_code_for(exc), exc.message)
        except Exception as exc:  # a bug: keep serving others, tell this peer to retry later
            self.log(f"{who}: internal error: {type(exc).__name__}: {exc}")
            await conn.send_error(ErrorCode.STORE, "internal error in the listener")
        finally:
            del self._peers[task]
            await conn.close()

    async def _handshake(self, conn: Connection) -> Session:
        server = ServerHandshake(self.key, self.guid, self.name, self.config.max_frame)
        hello = await conn.expect((FrameType.HELLO,), None, "expecting HELLO")
        challenge = server.on_hello(hello.payload)
        await conn.send((encode_frame(FrameType.CHALLENGE, challenge),))
        auth = await conn.expect((FrameType.AUTH,), None, "expecting AUTH")
        session = server.on_auth(auth.payload)
        if session.peer_guid == self.guid:  # our dispatcher refuses this itself, at CHALLENGE
            raise ChannelError("the peer is this queue manager itself (a link that points back here)")
        await conn.send((encode_frame(FrameType.READY, b""),))
        return session

    async def _serve(self, peer: _Peer, session: Session, stats: list[int]) -> None:
        conn = peer.conn
        loop = asyncio.get_running_loop()
        while True:
            frame = await conn.expect((FrameType.BATCH, FrameType.BYE), self.config.idle_timeout,
                                      "waiting for the next batch")
            if frame.type == FrameType.BYE:
                decode_bye(session.open(frame.type, frame.payload))
                return
            body = session.open(frame.type, frame.payload)
            batch = decode_batch(body)
            seq = session.received
            # From here to the ACK no cancellation: the commit runs to its end whatever happens,
            # and its ACK goes out if the connection still stands.
            peer.busy = True
            got = await asyncio.shield(loop.run_in_executor(
                self._executor, self.st.receive, session.peer_guid, batch.items, batch.incarnation,
                batch.sent_at))
            stats[0] += 1
            stats[1] += got.stored
            stats[2] += got.duplicates
            stats[3] += got.undelivered
            await conn.send(session.seal(FrameType.ACK, encode_ack(seq, got.stored, got.duplicates,
                                                                   got.dead_lettered)))
            peer.busy = False
            if peer.closing:
                await conn.send_error(ErrorCode.SHUTTING_DOWN, "the listener is stopping")
                return


def serve(st: Store, key: bytes, config: ListenerConfig, *, log: Callable[[str], None],
          ready: Callable[[str, int], None]) -> int:
    """Run a listener until SIGTERM or SIGINT; return the signal that stopped it."""
    async def main() -> int:
        listener = Listener(st, key, config, log=log)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, listener.stop, signum)
        host, port = await listener.start()
        ready(host, port)
        try:
            await listener.serve_until_stopped()
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
        return listener.stop_signal or 0

    return asyncio.run(main())


__all__ = ["Listener", "ListenerConfig", "serve", "parse_bind", "DEFAULT_PORT"]
