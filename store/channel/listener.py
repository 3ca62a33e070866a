"""The listener (`mqcli listen`): receive batches from authenticated peers into the local store.

One asyncio event loop; per connection: handshake (bounded by `handshake_timeout`, frames no larger
than HANDSHAKE_MAX_FRAME until the peer has proved the key), then BATCH frames, each opened
(seal and sequence checked), decoded, and handed to `Store.receive` — one durable commit that
de-duplicates by transfer (the sender's incarnation and seq) — and only after that commit
returned, ACKed, with the count of arrivals dead-lettered here by reason.
Anything else (a wrong key, garbage, an oversized or truncated frame, a timeout) closes the
connection with an ERROR frame where one can still be sent; nothing of an unfinished or
unverified frame is ever stored.

Store calls run on one worker thread: LMDB has one writer anyway, and the event loop keeps
reading the next batch from the socket while the current one commits.

Connections (docs/protocol.md §5). A connection is *handshaking* from its accept until it has
proved the key, then a *session*; the two are counted apart, so sockets that never
authenticate cannot take the places of peers that do. At most `max_connections` sessions. The
handshaking ones have their own, smaller pool — `max_handshakes` in all, and
`max_handshakes_per_address` from one address — and `handshake_timeout` to prove the key. When
the pool is full a new connection is still let in, and the handshaking connection least likely
to be a real peer is dropped (ERROR BUSY) to make room: one from the new connection's address
when that address is over its share, else from the address holding most; of those, one that
has not sent its HELLO before one that has, the oldest first. A real peer sends HELLO as soon
as it is connected and answers the CHALLENGE within a round trip, so a crowd of idle or
half-open sockets only ever displaces its own members. The listener accepts one connection per
turn of its event loop (its own accept loop, not asyncio's, which takes up to a whole backlog
at once): between two accepts every connection already in — the sessions above all — is
served, and a new connection's HELLO is read before many newer ones are let in (a burst of
them would push it out of the pool first). A connection costs a socket, a task and its buffers, no thread, and the
pool bounds how many of them strangers hold.

Shutdown (SIGTERM or Ctrl-C): stop accepting; a connection waiting for a frame or in the middle
of one is closed at once (nothing of it was stored); a connection whose batch is committing
finishes that commit and sends its ACK first, then closes. Either way every batch is stored
wholly and acked, or not stored; the sender resends what was not acked.
"""

from __future__ import annotations

import asyncio
import errno
import signal
import socket
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..arguments import is_decimal
from ..errors import (
    ChannelError, ChannelTimeout, ConnectionLost, ListenerBusy, PeerError, StoreError, StoreUnavailable,
)
from .batches import decode_batch, decode_bye, encode_ack
from .frames import (
    DEFAULT_MAX_FRAME, HANDSHAKE_MAX_FRAME, MAX_MAX_FRAME, MIN_MAX_FRAME, ErrorCode, FrameType, encode_frame,
)
from .handshake import ServerHandshake, Session, check_key
from .wire import STREAM_LIMIT, Connection, error_code_for

if TYPE_CHECKING:
    from ..engine import Store

DEFAULT_PORT = 1801  # MSMQ's TCP port


#: The kernel's queue of connections not yet accepted. Deep, so that a crowd reconnecting
#: faster than one accept per turn fills this queue, not the SYN path: a connection refused
#: there would wait for its SYN to be resent (a second, then three...).
ACCEPT_BACKLOG = 1024
#: A crowd of connections closed before they authenticate is logged one line per this many
#: seconds, not one line each.
REFUSED_LOG_WINDOW = 10.0


@dataclass
class ListenerConfig:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    max_frame: int = DEFAULT_MAX_FRAME
    idle_timeout: float | None = 60.0  # no frame started for this long: close; None: never
    handshake_timeout: float = 5.0   # accept to READY: a connection not authenticated by then is closed
    frame_timeout: float = 30.0      # a frame's first byte to its last
    write_timeout: float = 30.0
    max_connections: int = 64        # authenticated sessions at once
    max_handshakes: int = 32         # connections not authenticated yet, in all...
    max_handshakes_per_address: int = 8  # ...and from one address
    drain_timeout: float = 60.0      # at shutdown: how long a committing batch may take

    def __post_init__(self) -> None:
        if not MIN_MAX_FRAME <= self.max_frame <= MAX_MAX_FRAME:
            raise ChannelError(f"the maximum frame size must be {MIN_MAX_FRAME} to {MAX_MAX_FRAME} bytes "
                               f"(a frame's length is a 32-bit field)")
        if not self.handshake_timeout > 0:
            raise ChannelError("the handshake timeout must be positive")
        if min(self.max_connections, self.max_handshakes, self.max_handshakes_per_address) < 1:
            raise ChannelError("connection limits must be at least 1")


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback address (a name is resolved; one that
    does not resolve is not known to be loopback)."""
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(str(info[4][0]).partition("%")[0]).is_loopback
                               for info in infos)


def parse_bind(text: str) -> tuple[str, int]:
    """HOST:PORT, or PORT alone (on 127.0.0.1); [v6]:PORT. Port 0 picks a free one."""
    host, colon, port = text.rpartition(":")
    if not colon:
        host, port = "127.0.0.1", text
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not is_decimal(port) or not 0 <= int(port) <= 65535:
        raise ChannelError(f"--bind {text!r} is not HOST:PORT with a port 0-65535")
    return host, int(port)


@dataclass(eq=False)
class _Peer:
    host: str
    address: str             # host:port, for the log
    task: asyncio.Task[Any] | None = None
    conn: Connection | None = None
    hello: bool = False      # it sent its HELLO (a real peer does at once)
    session: bool = False    # authenticated: counted among the sessions, never dropped for room
    busy: bool = False       # a batch is committing or its ACK is being sent
    closing: bool = False    # shutdown: close after the current ACK
    dropped: str | None = None  # why it was closed to make room for a newer connection
    expired: bool = False    # not authenticated within the handshake timeout
    deadline: asyncio.TimerHandle | None = None


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
        self._peers: set[_Peer] = set()
        self._sessions: set[_Peer] = set()
        # handshaking connections by address, each in the order they were accepted
        self._handshaking: dict[str, dict[_Peer, None]] = {}
        self._n_handshaking = 0
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self.stop_signal: int | None = None
        self.address: tuple[str, int] | None = None
        self._refused: Counter[str] | None = None  # by host, while a log window is open
        self._failed: StoreUnavailable | None = None  # the store became unusable: the listener ends with it
        self._refused_flush: asyncio.TimerHandle | None = None

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> tuple[str, int]:
        c = self.config
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(c.host, c.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
            family, kind, proto, _, where = infos[0]
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(where)
                sock.listen(ACCEPT_BACKLOG)
                sock.setblocking(False)
            except BaseException:
                sock.close()
                raise
        except OSError as exc:
            raise ChannelError(f"cannot listen on {c.host}:{c.port}: {exc.strerror or exc}") from None
        self._sock = sock
        name = sock.getsockname()
        self.address = (name[0], name[1])
        self._accepting = loop.create_task(self._accept_loop(sock))
        return self.address

    def stop(self, signum: int | None = None) -> None:
        if self.stop_signal is None:
            self.stop_signal = signum if signum is not None else 0
        self._stopped.set()

    async def serve_until_stopped(self) -> None:
        assert self._accepting is not None
        stopped = asyncio.ensure_future(self._stopped.wait())
        try:
            await asyncio.wait((stopped, self._accepting), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        failed = None
        if self._accepting.done() and not self._accepting.cancelled():
            failed = self._accepting.exception()
        await self._shutdown()
        if self._failed is not None:
            raise self._failed  # exit 11, as any command whose store went away
        if failed is not None:
            raise ChannelError(f"the listener cannot accept connections: {failed}") from None

    async def _shutdown(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            await asyncio.wait((self._accepting,))
        if self._sock is not None:
            self._sock.close()
        for peer in list(self._peers):
            if peer.busy:
                peer.closing = True  # finish the commit, send its ACK, then close
            elif peer.task is not None:
                peer.task.cancel()   # waiting for or inside a frame: nothing of it is stored
        tasks = [p.task for p in self._peers if p.task is not None]
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=self.config.drain_timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        self._flush_refused(final=True)
        # a commit on the worker thread is never cut short: wait for it before the store closes
        self._executor.shutdown(wait=True)

    # ---- accepting, and the pool of connections not authenticated yet ----------------------

    async def _accept_loop(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, addr = await loop.sock_accept(listening)
            except (ConnectionAbortedError, InterruptedError):
                continue  # gone while it waited in the kernel's queue
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    raise
                # out of descriptors or memory: every connection held is bounded in time, so
                # some close soon; the ones waiting stay in the kernel's queue meanwhile
                self._note_refused("", f"cannot accept a connection now: {exc.strerror}")
                await asyncio.sleep(0.1)
                continue
            self._admit(sock, addr)
            # one accept per turn of the event loop: the connections already in go first
            await asyncio.sleep(0)

    def _admit(self, sock: socket.socket, addr: Any) -> None:
        host, port = str(addr[0]), addr[1]
        self._make_room(host)
        peer = _Peer(host, f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        self._handshaking.setdefault(host, {})[peer] = None
        self._n_handshaking += 1
        self._peers.add(peer)
        loop = asyncio.get_running_loop()
        peer.task = loop.create_task(self._handle(peer, sock))
        # cleanup also for a task cancelled before its first step, whose `finally` never runs
        peer.task.add_done_callback(lambda _: self._gone(peer, sock))
        # a timer, not wait_for: wait_for runs the handshake as a second task, whose end can
        # cross a cancellation and be lost
        peer.deadline = loop.call_later(self.config.handshake_timeout, self._expire, peer)

    def _gone(self, peer: _Peer, sock: socket.socket) -> None:
        if peer.deadline is not None:
            peer.deadline.cancel()
        self._forget_handshake(peer)
        self._sessions.discard(peer)
        self._peers.discard(peer)
        if peer.conn is None:
            sock.close()
        else:
            peer.conn.abort()  # closed already, unless cut short in its close

    def _expire(self, peer: _Peer) -> None:
        if peer in self._handshaking.get(peer.host, ()) and peer.task is not None:  # not leaving already
            peer.expired = True
            self._forget_handshake(peer)
            peer.task.cancel()

    def _make_room(self, host: str) -> None:
        """Before a connection from `host` joins the handshaking pool: drop one if it is full."""
        c = self.config
        own = self._handshaking.get(host)
        if own is not None and len(own) >= c.max_handshakes_per_address:
            self._drop(own, f"too many connections from {host} waiting to authenticate "
                            f"(at most {c.max_handshakes_per_address})")
        elif self._n_handshaking >= c.max_handshakes:
            crowd = max(self._handshaking.values(), key=len)
            self._drop(crowd, f"too many connections waiting to authenticate (at most {c.max_handshakes})")

    def _drop(self, pool: dict[_Peer, None], why: str) -> None:
        # the least likely to be a real peer: no HELLO yet, then the oldest
        victim = next((p for p in pool if not p.hello), None) or next(iter(pool))
        victim.dropped = why
        self._forget_handshake(victim)
        assert victim.task is not None
        victim.task.cancel()

    def _forget_handshake(self, peer: _Peer) -> None:
        pool = self._handshaking.get(peer.host)
        if pool is not None and pool.pop(peer, False) is None:
            self._n_handshaking -= 1
            if not pool:
                del self._handshaking[peer.host]

    def _note_refused(self, host: str, line: str) -> None:
        """Log a connection closed before it authenticated: the first at once, then, while
        more keep coming, one line per REFUSED_LOG_WINDOW seconds saying how many."""
        if self._refused is not None:
            self._refused[host] += 1
            return
        self.log(line)
        self._refused = Counter()
        self._refused_flush = asyncio.get_running_loop().call_later(REFUSED_LOG_WINDOW, self._flush_refused)

    def _flush_refused(self, final: bool = False) -> None:
        if self._refused_flush is not None:
            self._refused_flush.cancel()
            self._refused_flush = None
        counts, self._refused = self._refused, None
        if not counts:
            return  # a quiet window: the next one is logged at once
        top, n = counts.most_common(1)[0]
        when = "" if final else f" in the last {REFUSED_LOG_WINDOW:g}s"
        self.log(f"{sum(counts.values())} more connections closed before they authenticated{when}"
                 + (f" ({n} from {top})" if top else ""))
        if not final:  # still coming: keep counting
            self._refused = Counter()
            self._refused_flush = asyncio.get_running_loop().call_later(REFUSED_LOG_WINDOW, self._flush_refused)

    # ---- one connection ---------------------------------------------------------------------

    async def _handle(self, peer: _Peer, sock: socket.socket) -> None:
        c = self.config
        stats = [0, 0, 0, 0]  # batches, stored, duplicates, dead-lettered
        who = peer.address
        try:
            session = await self._authenticate(peer, sock)
            assert peer.conn is not None
            who = f"{peer.address} (queue manager {session.peer_name!r}, {session.peer_guid})"
            peer.conn.decoder.max_frame = c.max_frame
            await self._serve(peer, session, stats)
            self.log(f"{who}: closed after {stats[0]} batches: {stats[1]} messages stored, "
                     f"{stats[2]} duplicates dropped" + (f", {stats[3]} dead-lettered" if stats[3] else ""))
        except (asyncio.CancelledError, Exception) as exc:
            self._forget_handshake(peer)  # on its way out: not counted, not a victim to drop
            await self._refuse(peer, who, exc, stats)
        finally:  # then _gone
            self._forget_handshake(peer)
            self._sessions.discard(peer)
            if peer.conn is not None:
                await peer.conn.close()

    async def _refuse(self, peer: _Peer, who: str, exc: BaseException, stats: list[int]) -> None:
        """Log why the connection ends and tell the peer, where it can still be told."""
        c, conn = self.config, peer.conn

        def log(line: str) -> None:
            if peer.session:
                self.log(line)
            else:
                self._note_refused(peer.host, line)

        async def tell(code: ErrorCode, text: str, linger: bool = False) -> None:
            if conn is not None:
                await conn.send_error(code, text)
                if linger:  # a batch refused: the next may be on the wire; the ERROR is read, not reset away
                    await conn.linger()

        if isinstance(exc, asyncio.CancelledError):
            if peer.expired:
                log(f"{who}: refused: no handshake within {c.handshake_timeout:g}s")
                await tell(ErrorCode.PROTOCOL, "handshake timed out")
                return
            if peer.dropped is not None:  # made room for a newer connection
                log(f"{who}: dropped before it authenticated: {peer.dropped}")
                await tell(ErrorCode.BUSY, f"{peer.dropped}; retry later")
                return
            # shutdown cancelled us between batches; end normally (asyncio logs a traceback
            # for a connection task that ends cancelled)
            await tell(ErrorCode.SHUTTING_DOWN, "the listener is stopping")
            if stats[0]:
                self.log(f"{who}: closed at shutdown after {stats[0]} batches ({stats[1]} stored)")
        elif isinstance(exc, PeerError) or isinstance(exc, ConnectionLost):
            log(f"{who}: {exc.message}" + (f" ({stats[1]} stored before)" if stats[0] else ""))
        elif isinstance(exc, ChannelTimeout):
            log(f"{who}: closed: {exc.message}")
            await tell(ErrorCode.PROTOCOL, exc.message)
        elif isinstance(exc, ListenerBusy):
            self.log(f"{who}: refused: {exc.message}")
            await tell(ErrorCode.BUSY, exc.message)
        elif isinstance(exc, StoreUnavailable):  # replaced, removed or damaged under us: nothing to serve
            self.log(f"{who}: closed: {exc.message}; the listener stops")
            self._failed = exc
            self._stopped.set()
            await tell(ErrorCode.STORE, "the receiving store is unavailable; the listener is stopping")
        elif isinstance(exc, StoreError):  # ChannelError from the peer, BadData or a store refusal
            log(f"{who}: {'refused' if not stats[0] else 'closed'}: {exc.message}")
            await tell(error_code_for(exc), exc.message, linger=peer.session)
        elif isinstance(exc, OSError):  # the socket broke before it became a stream
            log(f"{who}: the connection broke: {exc.strerror or exc}")
        else:  # a bug: keep serving others, tell this peer to retry later
            self.log(f"{who}: internal error: {type(exc).__name__}: {exc}")
            await tell(ErrorCode.STORE, "internal error in the listener")

    async def _authenticate(self, peer: _Peer, sock: socket.socket) -> Session:
        c = self.config
        reader, writer = await asyncio.open_connection(sock=sock, limit=STREAM_LIMIT)
        conn = peer.conn = Connection(reader, writer, max_frame=HANDSHAKE_MAX_FRAME,
                                      frame_timeout=c.frame_timeout, write_timeout=c.write_timeout)
        server = ServerHandshake(self.key, self.guid, self.name, c.max_frame)
        hello = await conn.expect((FrameType.HELLO,), None, "expecting HELLO")
        challenge = server.on_hello(hello.payload)
        peer.hello = True
        await conn.send((encode_frame(FrameType.CHALLENGE, challenge),))
        auth = await conn.expect((FrameType.AUTH,), None, "expecting AUTH")
        session = server.on_auth(auth.payload)
        if session.peer_guid == self.guid:  # our dispatcher refuses this itself, at CHALLENGE
            raise ChannelError("the peer is this queue manager itself (a link that points back here)")
        # proved the key: from here a session, counted against max_connections (no await
        # between the count and the move, so the two pools never both or neither hold it)
        self._forget_handshake(peer)
        assert peer.deadline is not None
        peer.deadline.cancel()
        if len(self._sessions) >= c.max_connections:
            raise ListenerBusy(f"too many connections (at most {c.max_connections} peers at once)")
        self._sessions.add(peer)
        peer.session = True
        await conn.send((encode_frame(FrameType.READY, b""),))
        return session

    async def _serve(self, peer: _Peer, session: Session, stats: list[int]) -> None:
        conn = peer.conn
        assert conn is not None  # _authenticate set it
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


__all__ = ["Listener", "ListenerConfig", "ListenerBusy", "serve", "parse_bind", "is_loopback", "DEFAULT_PORT"]
