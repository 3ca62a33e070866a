"""The dispatcher (`mqcli dispatch`): send what the outgoing queues hold over their links.

For each link with sendable outgoing queues (`Store.dispatch_plan`: [MS-MQQB] 3.1.7.12 leaves out held,
locked, multicast and HTTP(S) queues, and queues waiting for a retry): connect, authenticate
(handshake.py), then per queue take a batch in flight (`outgoing_take`: hidden under a token),
send it, and on its ACK — which the listener sends only after its commit — remove it
(`outgoing_done`). Two batches are in flight at once, so the listener commits one while the
next crosses the wire. A batch not acked (connection lost, timeout, refusal, shutdown) goes
back to the queue in order (`outgoing_return`) and is sent again later; the listener drops what
it already stored. A dispatcher killed outright leaves its batches held by a dead process: the
next write to the store, by anyone, returns them (store/holders.py), and nothing else: a
producer's unconfirmed put or a consumer's two-phase get on an outgoing queue stays theirs.
One dispatcher runs per store (`DispatchLock`).

`--once` sends everything sendable now and reports each link; `--follow` keeps doing it,
polling the plan (a cheap read) between rounds and retrying a failed link after an exponential
backoff with jitter, recorded on its outgoing queues (`outgoing show` prints it). A failure a
retry cannot fix — the peer does not hold our key, refuses our records, or a message is larger
than it accepts — locks the queues until an operator runs `mqcli outgoing resume`.

Store calls run on one worker thread (LMDB transactions belong to a thread); the event loop
does the network.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import random
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import (
    ChannelError, ChannelMessageTooLarge, ChannelTimeout, ConnectionLost, PeerError,
    ProtocolError, SelfLink, StoreError, StoreUnavailable, UnprovenPeerError, VersionMismatch,
)
from .batches import decode_ack, encode_batch
from .frames import HANDSHAKE_MAX_FRAME, FrameType, encode_frame
from .handshake import ClientHandshake, Session
from .wire import STREAM_LIMIT, Connection, error_code_for

if TYPE_CHECKING:
    from ..engine import Store
    from ..forwarding import Route
    from ..links import LinkInfo

T = TypeVar("T")
LOCK_FILE = "dispatch.lock"
_SEALED_OVERHEAD = 40  # tag and sequence number of a sealed frame
_BUSY_POLL = 2.0  # --follow: seconds between plans while some link is sending


@dataclass
class DispatchConfig:
    batch: int = 1000                 # messages per BATCH frame
    batch_bytes: int = 4 * 1024 * 1024
    window: int = 2                   # batches in flight before waiting for an ACK
    timeout: float = 30.0             # connect + handshake; each ACK; each write
    retry_min: float = 1.0            # --follow backoff: first delay...
    retry_max: float = 60.0           # ...doubling up to this, each drawn in [d/2, d]
    poll: float = 0.25                # --follow: how often an idle dispatcher looks again
    links: tuple[str, ...] = ()       # only these links (all when empty)


@dataclass
class LinkResult:
    """What one run over one link did."""

    link: str
    address: str
    peer: str | None = None
    messages: int = 0       # acknowledged by the peer (stored there, or already there)
    stored: int = 0
    duplicates: int = 0
    # arrivals the peer could not deliver (dead-lettered there), by reason: they did cross
    dead_lettered: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    seconds: float = 0.0
    error: str | None = None
    locked: bool = False
    retry_in: float | None = None

    def add(self, other: LinkResult) -> None:
        for name in ("messages", "stored", "duplicates", "batches", "seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.peer = other.peer or self.peer
        self.error, self.locked, self.retry_in = other.error, other.locked, other.retry_in
        add_reasons(self.dead_lettered, other.dead_lettered)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["seconds"] = round(self.seconds, 3)
        return d


def add_reasons(into: dict[str, int], more: dict[str, int]) -> None:
    for reason, n in more.items():
        into[reason] = into.get(reason, 0) + n


def describe_dead_lettered(dead_lettered: dict[str, int]) -> str:
    """`N dead-lettered there: reason (n); ...`, for a log or warning line."""
    total = sum(dead_lettered.values())
    reasons = "; ".join(f"{r} ({n})" for r, n in sorted(dead_lettered.items(), key=lambda x: (-x[1], x[0])))
    return f"{total} dead-lettered there: {reasons}"


class _Stopped(Exception):
    """The dispatcher was told to stop while a link was still connecting."""


def is_permanent(exc: BaseException) -> bool:
    """A failure that a retry cannot fix: the queues are locked until an operator resumes them.
    Only what this dispatcher verified counts: a version chosen in a CHALLENGE whose proof held,
    a link back to this queue manager, a message larger than the verified frame limit. A failed
    proof (a wrong key, or anything else answering at the address) and every ERROR frame (never
    sealed: anyone on the path can send one) are retried, so that nobody without the key can
    stop a link, and a link whose fault is fixed at the other end heals by itself."""
    return isinstance(exc, (VersionMismatch, ChannelMessageTooLarge, SelfLink))


def backoff(failures: int, low: float, high: float, rng: random.Random | None = None) -> float:
    """Exponential backoff with jitter: the n-th consecutive failure waits a random time in
    [d/2, d], d = min(high, low * 2**(n-1)) (jitter keeps many dispatchers from retrying in step)."""
    d = min(high, low * 2 ** min(max(failures - 1, 0), 62))
    return (rng or random).uniform(d / 2, d)


class DispatchLock:
    """One dispatcher per store: an exclusive flock on `dispatch.lock` in the store directory,
    released by the kernel when the process ends, however it ends."""

    def __init__(self, store_dir: Path) -> None:
        self.path = Path(store_dir) / LOCK_FILE
        self.fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EACCES):
                who = f" (pid {holder})" if holder.isdigit() else ""
                raise StoreUnavailable(f"another dispatcher{who} is running for the store at "
                                       f"{self.path.parent}; only one may run at a time") from None
            raise StoreUnavailable(f"cannot lock {self.path}: {exc.strerror}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = None

    def __enter__(self) -> DispatchLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Dispatcher:
    def __init__(self, st: Store, config: DispatchConfig | None = None, *,
                 log: Callable[[str], None] = lambda line: None) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.st = st
        self.config = config or DispatchConfig()
        self.log = log
        info = st.info()
        self.guid, self.name = info.guid, info.name
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="mqcli-dispatch-store")
        self.stopping = False
        self.stop_signal: int | None = None
        self._wake = asyncio.Event()
        self._stopped = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._failures: dict[str, int] = {}
        self._rng = random.Random()

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    def stop(self, signum: int | None = None) -> None:
        """First call: finish the batches in flight, send nothing new. Second: abandon them
        (they go back to their queues)."""
        if self.stopping:
            for task in self._tasks:
                task.cancel()
            return
        self.stopping = True
        self.stop_signal = signum if signum is not None else 0
        self._wake.set()
        self._stopped.set()

    # ---- the two modes ------------------------------------------------------------------

    async def once(self) -> list[LinkResult]:
        # an operator asked for it now: a retry time that `--follow` recorded does not hold it back
        plan = self._selected(await self._call(lambda: self.st.dispatch_plan(ignore_retry=True)))
        tasks = [asyncio.create_task(self.send_route(route, retry=False)) for route in plan]
        self._tasks.update(tasks)
        try:
            done = await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            self._tasks.difference_update(tasks)
        for r in done:  # a task cancelled by a second signal has no result: its batches went back
            if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
                raise r
        return [r for r in done if isinstance(r, LinkResult)]

    async def follow(self) -> list[LinkResult]:
        totals: dict[str, LinkResult] = {}
        running: dict[str, asyncio.Task[LinkResult]] = {}
        not_before: dict[str, float] = {}
        loop = asyncio.get_running_loop()
        while not self.stopping:
            now = loop.time()
            for route in self._selected(await self._call(self.st.dispatch_plan)):
                name = route.link.name
                if name in running or not_before.get(name, 0.0) > now or self.stopping:
                    continue
                task = asyncio.create_task(self.send_route(route, retry=True))
                running[name] = task
                self._tasks.add(task)
            self._wake.clear()
            waits: list[asyncio.Future[Any]] = [*running.values(), asyncio.ensure_future(self._wake.wait())]
            # a plan reads every outgoing queue: while links are busy sending (on the same store
            # thread) look less often; a link finishing wakes the loop at once
            pause = max(self.config.poll, _BUSY_POLL) if running else self.config.poll
            try:
                await asyncio.wait(waits, timeout=pause, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waits[-1].cancel()
            for name, task in list(running.items()):
                if task.done():
                    del running[name]
                    self._tasks.discard(task)
                    self._collect(task, totals, not_before, loop.time())
        if running:
            await asyncio.wait(running.values())
            for task in running.values():
                self._tasks.discard(task)
                self._collect(task, totals, not_before, loop.time())
        return list(totals.values())

    def _collect(self, task: asyncio.Task[LinkResult], totals: dict[str, LinkResult],
                 not_before: dict[str, float], now: float) -> None:
        if task.cancelled():
            return
        r = task.result()
        if r.link in totals:
            totals[r.link].add(r)
        else:
            totals[r.link] = r
        if r.retry_in is not None:
            not_before[r.link] = now + r.retry_in

    def _selected(self, plan: list[Route]) -> list[Route]:
        if not self.config.links:
            return plan
        wanted = {n.casefold() for n in self.config.links}
        return [r for r in plan if r.link.name.casefold() in wanted]

    # ---- one link ---------------------------------------------------------------------------

    async def send_route(self, route: Route, *, retry: bool) -> LinkResult:
        """Send every message of the route's queues; never raises for a link failure (the
        result carries it, and it is recorded on the queues)."""
        link, queues = route.link, list(route.queues)
        result = LinkResult(link.name, link.address)
        started = time.perf_counter()
        conn: Connection | None = None
        try:
            key = await self._call(self.st.load_link_key, link.name)
            await self._call(self.st.outgoing_event, queues, "connecting", f"to {link.address}")
            conn, session = await self._unless_stopped(self._connect(link, key))
            result.peer = f"{session.peer_name} ({session.peer_guid})"
            if link.peer_guid != session.peer_guid:
                await self._call(self.st.link_seen, link.name, session.peer_guid)
            await self._call(self.st.outgoing_event, queues, "connected",
                             f"{session.peer_name} ({session.peer_guid}) at {link.address}")
            too_large: list[tuple[str, ChannelMessageTooLarge]] = []
            for queue in queues:
                if self.stopping:
                    break
                part = LinkResult(link.name, link.address)  # each queue's history says what it sent
                try:
                    await self._drain(conn, session, queue, part)
                except ChannelMessageTooLarge as big:
                    # this queue's next message cannot go (its acks are in): lock this queue
                    # only, after what it sent is recorded; the link's other queues go on
                    too_large.append((queue, big))
                finally:
                    result.add(part)
                if part.messages:
                    detail = f"{part.messages} messages in {part.batches} batches"
                    if part.dead_lettered:
                        detail += f"; {describe_dead_lettered(part.dead_lettered)}"
                    await self._call(self.st.outgoing_event, [queue], "sent", detail, None,
                                     part.dead_lettered or None)
            for queue, refused in too_large:
                message = f"link {link.name!r} ({link.address}): {refused.message}"
                result.error, result.locked = message, True
                await self._call(self.st.outgoing_event, [queue], "locked", message)
                self.log(f"{message}; the outgoing queue is locked until `mqcli outgoing resume`")
            await conn.send(session.seal(FrameType.BYE, b""))
            if result.dead_lettered and retry:  # --once: the command reports it
                self.log(f"link {link.name!r}: {describe_dead_lettered(result.dead_lettered)}")
            self._failures.pop(link.name, None)
        except _Stopped:
            pass  # stopped while connecting: nothing was in flight, nothing failed
        except (StoreError, OSError) as exc:
            await self._failed(link, queues, exc, result, retry, conn)
        finally:
            result.seconds = time.perf_counter() - started
            if conn is not None:
                await conn.close()
        return result

    async def _failed(self, link: LinkInfo, queues: list[str], exc: StoreError | OSError, result: LinkResult,
                      retry: bool, conn: Connection | None) -> None:
        reason = exc.message if isinstance(exc, StoreError) else (exc.strerror or str(exc))
        message = f"link {link.name!r} ({link.address}): {reason}"
        result.error = message
        if conn is not None and isinstance(exc, ChannelError) and not isinstance(exc, (PeerError, ConnectionLost)):
            await conn.send_error(error_code_for(exc), exc.message)
        try:
            if is_permanent(exc):
                result.locked = True
                await self._call(self.st.outgoing_event, queues, "locked", message)
                self.log(f"{message}; its outgoing queues are locked until `mqcli outgoing resume`")
                return
            retry_at = None
            if retry:
                failures = self._failures[link.name] = self._failures.get(link.name, 0) + 1
                result.retry_in = backoff(failures, self.config.retry_min, self.config.retry_max, self._rng)
                retry_at = time.time() + result.retry_in
            await self._call(self.st.outgoing_event, queues, "error", message, retry_at)
        except StoreError as store_exc:  # a queue went away meanwhile: say so, keep going
            self.log(f"link {link.name!r}: cannot record the failure: {store_exc.message}")
        if retry:  # --once reports its failures in its result and exit status instead
            self.log(f"{message}; retry in {result.retry_in:.1f}s")

    async def _unless_stopped(self, work: Any) -> Any:
        """Await `work` unless the dispatcher is told to stop first (a connect may take the
        whole --timeout; a stop should not)."""
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self._stopped.wait())
        try:
            await asyncio.wait((task, stop), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait((task,))
            raise _Stopped()
        return task.result()

    async def _connect(self, link: LinkInfo, key: bytes) -> tuple[Connection, Session]:
        t = self.config.timeout
        try:
            async with asyncio.timeout(t):  # not wait_for: see store/channel/wire.py
                reader, writer = await asyncio.open_connection(link.host, link.port, limit=STREAM_LIMIT)
        except TimeoutError:
            raise ChannelTimeout(f"no connection within {t:g}s") from None
        except OSError as exc:
            why = os.strerror(exc.errno) if exc.errno else str(exc)
            hint = " (is `mqcli listen` running there?)" if exc.errno == errno.ECONNREFUSED else ""
            raise ChannelError(f"cannot connect: {why}{hint}") from None
        conn = Connection(reader, writer, max_frame=HANDSHAKE_MAX_FRAME, frame_timeout=t, write_timeout=t)
        try:
            client = ClientHandshake(key, self.guid, self.name)
            await conn.send((encode_frame(FrameType.HELLO, client.hello()),))
            try:
                challenge = await conn.expect((FrameType.CHALLENGE,), t, "waiting for CHALLENGE")
            except PeerError as exc:
                raise UnprovenPeerError(exc.peer_code, exc.text) from None
            auth = client.on_challenge(challenge.payload)
            if client.peer is not None and client.peer.guid == self.guid:
                raise SelfLink("it reaches this queue manager itself")
            await conn.send((encode_frame(FrameType.AUTH, auth),))
            ready = await conn.expect((FrameType.READY,), t, "waiting for READY")
            return conn, client.on_ready(ready.payload)
        except BaseException as exc:
            if isinstance(exc, ChannelError) and not isinstance(exc, (PeerError, ConnectionLost)):
                await conn.send_error(error_code_for(exc), exc.message)
            await conn.close()
            raise

    async def _drain(self, conn: Connection, session: Session, queue: str, result: LinkResult) -> None:
        """Send the queue until it is empty (or the dispatcher stops), `window` batches in flight."""
        c = self.config
        # the listener's frame limit bounds a batch; what take may exceed it by (the per-item
        # fields, one oversized first record) is checked on the encoded body below
        budget = max(1, min(c.batch_bytes, session.max_frame // 2))
        limit = session.max_frame - _SEALED_OVERHEAD
        inflight: deque[tuple[int, int, int]] = deque()  # (sealed seq, token, messages)
        blocked: ChannelMessageTooLarge | None = None  # the next message cannot go: stop after the acks
        try:
            while True:
                count = c.batch
                while len(inflight) < c.window and not self.stopping and blocked is None:
                    taken = await self._call(self.st.outgoing_take, queue, count, budget)
                    if taken is None:
                        break
                    body = encode_batch(taken.items, taken.incarnation, taken.sent_at)
                    if len(body) > limit:
                        await self._call(self.st.outgoing_return, queue, taken.token)
                        if len(taken.items) == 1:
                            blocked = ChannelMessageTooLarge(
                                f"the next message of {queue} ({len(taken.items[0][1])} bytes) is larger "
                                f"than the listener accepts ({session.max_frame}-byte frames); move it "
                                f"out of the queue (`mqcli get`), then `mqcli outgoing resume`")
                        count = max(1, len(taken.items) // 2)
                        continue
                    parts = session.seal(FrameType.BATCH, body)
                    inflight.append((session.sent, taken.token, len(taken.items)))
                    await conn.send(parts)
                if not inflight:
                    if blocked is not None:
                        raise blocked
                    return
                frame = await conn.expect((FrameType.ACK,), c.timeout, "waiting for an ACK")
                ack = decode_ack(session.open(frame.type, frame.payload))
                want, token, n = inflight[0]
                if ack.batch_seq != want:
                    raise ProtocolError(f"the listener acknowledged batch {ack.batch_seq}, expected {want}")
                counted = ack.stored + ack.duplicates + sum(ack.dead_lettered.values())
                if counted != n:  # docs/protocol.md §3.2: they add up to the batch (sent again: dropped there)
                    raise ProtocolError(f"the listener acknowledged batch {want} of {n} messages with counts "
                                        f"that add up to {counted}")
                await self._call(self.st.outgoing_done, queue, token)
                inflight.popleft()
                result.messages += n
                result.stored += ack.stored
                result.duplicates += ack.duplicates
                add_reasons(result.dead_lettered, ack.dead_lettered)
                result.batches += 1
        finally:
            # not acknowledged: back to the queue in order, sent again later (the peer drops
            # what it already has)
            for _, token, _ in inflight:
                try:
                    await asyncio.shield(self._call(self.st.outgoing_return, queue, token))
                except (StoreError, asyncio.CancelledError):
                    pass


def run(st: Store, config: DispatchConfig, *, follow: bool, log: Callable[[str], None]) -> tuple[list[LinkResult], int]:
    """Run a dispatcher under the store's dispatch lock; (results, stopping signal or 0)."""
    with DispatchLock(st.path):
        async def main() -> tuple[list[LinkResult], int]:
            d = Dispatcher(st, config, log=log)
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, d.stop, signum)
            try:
                results = await (d.follow() if follow else d.once())
            finally:
                for signum in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(signum)
                await loop.run_in_executor(None, d.close)
            return results, d.stop_signal or 0

        return asyncio.run(main())
