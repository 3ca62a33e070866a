"""The Store's store-and-forward operations (docs/design.md#store-and-forward): links, outgoing queues, arrivals.

A mixin of `Store` (store/engine.py): every method is one read or write transaction over the
modules that hold the rules, store/links.py and store/outgoing.py. The channel
(store/channel/) drives a dispatcher and a listener through these methods only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from . import addressing, holders, links, outgoing
from .errors import InvalidArgument, LinkExists, LinkNotFound, QueueNotAvailable
from .links import LinkInfo
from .queues import QueueInfo
from .records import AVAILABLE

if TYPE_CHECKING:
    from .write import Write

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Route:
    """Outgoing queues that one link takes, with messages that may be sent now."""

    link: LinkInfo
    queues: list[str]


@dataclass(frozen=True, slots=True)
class Taken:
    token: int
    items: list[tuple[str, bytes]]  # (destination format name, record)
    incarnation: bytes = b""  # the sending incarnation: with each record's seq, names its transfer
    sent_at: int = 0  # µs: when they leave (the latest `since` of the batch)


@dataclass(slots=True)
class OutgoingInfo:
    name: str
    destination_qm: str
    state: str
    why: str | None
    link: str | None
    messages: int
    in_flight: int
    bytes: int
    oldest: int | None
    last_error: str | None
    next_retry: int | None
    attempts: int
    history: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class Forwarding:
    """The links, outgoing queues and arrivals of `Store` (store/engine.py), which runs each
    function in one LMDB transaction: `_write` a write, `_read` a read."""

    if TYPE_CHECKING:
        def _write(self, fn: Callable[[Write], T], maintain: bool = True) -> T: ...
        def _read(self, fn: Callable[[Write], T]) -> T: ...
    _now: Callable[[], int]
    _holder: holders.Holder
    path: Path

    # ---- links ----------------------------------------------------------------------------

    def add_link(self, name: str, address: str, key_file: str) -> LinkInfo:
        links.validate_name(name)
        host, port = links.parse_address(address)
        links.load_key(key_file)  # refuse a missing, unsafe or malformed key file now
        key_path = str(Path(key_file).resolve())

        def add(t: Write) -> LinkInfo:
            k = links.key(name)
            if t.lt.get(k, db=t.dbs["links"]) is not None:
                raise LinkExists(f"link {name!r} already exists (`mqcli link remove {name}` first)")
            link = LinkInfo(name, host, port, key_path, t.now)
            t.lt.put(k, links.encode(link), db=t.dbs["links"])
            t.durable = True
            return link
        return self._write(add)

    def remove_link(self, name: str) -> LinkInfo:
        def remove(t: Write) -> LinkInfo:
            link = _link(t, name)
            t.lt.delete(links.key(name), db=t.dbs["links"])
            t.durable = True
            return link
        return self._write(remove)

    def links(self) -> list[LinkInfo]:
        return self._read(_links)

    def link(self, name: str) -> LinkInfo:
        return self._read(lambda t: _link(t, name))

    def load_link_key(self, name: str) -> bytes:
        return links.load_key(self.link(name).key_file)

    def link_seen(self, name: str, peer_guid: str) -> None:
        """Remember the GUID the link's next hop showed at its last handshake."""
        def seen(t: Write) -> None:
            link = _link(t, name)
            if link.peer_guid != peer_guid:
                t.lt.put(links.key(name), links.encode(replace(link, peer_guid=peer_guid)), db=t.dbs["links"])
        self._write(seen)

    # ---- outgoing queues ------------------------------------------------------------------

    def outgoing_list(self) -> list[OutgoingInfo]:
        def read(t: Write) -> list[OutgoingInfo]:
            known = _links(t)
            return [_describe(t, q, known) for q in outgoing.outgoing_queues(t)]
        return self._read(read)

    def outgoing_show(self, name: str) -> OutgoingInfo:
        return self._read(lambda t: _describe(t, _outgoing(t, name), _links(t)))

    def outgoing_hold(self, name: str, held: bool = True) -> OutgoingInfo:
        """Hold (or resume) an outgoing queue; resuming also clears a lock and the retry timer."""
        def change(t: Write) -> OutgoingInfo:
            q = _outgoing(t, name)
            state = outgoing.load_state(t, q)
            state.held = held
            event = "hold" if held else "resume"
            if not held:
                state.locked, state.next_retry, state.attempts = None, None, 0
            state.history.append({"time": t.now, "event": event, "detail": "by an operator"})
            outgoing.save_state(t, q, state)
            t.durable = True
            return _describe(t, q, _links(t))
        return self._write(change)

    def dispatch_plan(self, *, ignore_retry: bool = False) -> list[Route]:
        """The links with outgoing queues that may be sent now; `ignore_retry` sends queues
        that wait for a retry time too (`dispatch --once`: an operator asked now)."""
        def read(t: Write) -> list[Route]:
            known = _links(t)
            routes: dict[str, list[str]] = {}
            by_name = {}
            for q in outgoing.outgoing_queues(t):
                link = outgoing.link_for(q, known)
                state = outgoing.load_state(t, q)
                if ignore_retry:
                    state.next_retry = None
                if outgoing.why_not_dispatched(q, state, link, t.now) is None and t.has_available(q.qid):
                    assert link is not None
                    routes.setdefault(link.name, []).append(q.name)
                    by_name[link.name] = link
            return [Route(by_name[n], qs) for n, qs in routes.items()]
        return self._read(read)

    def outgoing_take(self, queue: str, max_count: int = 1000, max_bytes: int = 4 << 20,
                      lease: float | None = None) -> Taken | None:
        """Hold up to max_count available messages of an outgoing queue in flight under a new
        token, held by this process (no lease: when it dies they go back, store/holders.py);
        None if none is available."""
        if max_count < 1 or max_bytes < 1:
            raise InvalidArgument("max_count and max_bytes must be at least 1")

        data_file = self._data_file()

        def take(t: Write) -> Taken | None:
            token, items, incarnation, sent_at = outgoing.take(t, _outgoing(t, queue), max_count, max_bytes,
                                                               data_file, self._holder)
            return Taken(token, items, incarnation, sent_at) if items else None
        return self._write(take)

    def _data_file(self) -> tuple[int, int]:
        """(st_dev, st_ino) of this store's data file: a sending incarnation belongs to one file."""
        st = os.stat(Path(self.path) / "data.mdb")
        return st.st_dev, st.st_ino

    def outgoing_done(self, queue: str, token: int) -> int:
        return self._write(lambda t: outgoing.done(t, _outgoing(t, queue), token))

    def outgoing_return(self, queue: str, token: int) -> int:
        return self._write(lambda t: outgoing.give_back(t, _outgoing(t, queue), token))

    def outgoing_event(self, queues: list[str], event: str, detail: str = "",
                       retry_at: float | None = None, dead_lettered: dict[str, int] | None = None) -> None:
        """Record a dispatch event on outgoing queues (state, last error, next retry, history);
        retry_at is a time in seconds since the epoch, like time.time(); `dead_lettered` counts
        by reason the arrivals the receiver dead-lettered (kept with a "sent" event)."""
        when = None if retry_at is None else int(retry_at * 1_000_000)

        def record(t: Write) -> None:
            for name in queues:
                outgoing.record_event(t, _outgoing(t, name), event, detail, when, dead_lettered)
        self._write(record)

    # ---- arrivals -------------------------------------------------------------------------

    def receive(self, origin_guid: str, items: list[tuple[str, bytes]], incarnation: bytes,
                sent_at: int = 0) -> outgoing.Received:
        """Store a batch received from the queue manager origin_guid in one durable commit; its
        sending incarnation and each record's seq name the transfers already received (dropped
        as duplicates), `sent_at` (µs) is when it left (Taken). Raises BadData, storing
        nothing, if any part is malformed."""
        batch = outgoing.decode_items(items)
        return self._write(lambda t: outgoing.receive(t, origin_guid, batch, incarnation, sent_at))

    def prune_seen(self, older_than: float = outgoing.SEEN_RETENTION_US / 1e6) -> int:
        """Forget the arrivals recorded more than `older_than` seconds ago (each receive also
        forgets a few of those past the retention of 7 days)."""
        return self._write(lambda t: outgoing.prune_seen(t, t.now - int(older_than * 1_000_000)))


def _links(t: Write) -> list[LinkInfo]:
    return [links.decode(bytes(v)) for _, v in t.lt.cursor(db=t.dbs["links"])]


def _link(t: Write, name: str) -> LinkInfo:
    raw = t.lt.get(links.key(name), db=t.dbs["links"])
    if raw is None:
        raise LinkNotFound(f"no link named {name!r} (`mqcli link list`)")
    return links.decode(bytes(raw))


def _outgoing(t: Write, name: str) -> QueueInfo:
    q = addressing.lookup(t, name)
    if q.outgoing is None:
        raise QueueNotAvailable(f"{q.name!r} is not an outgoing queue (`mqcli outgoing list`)")
    return q


def _describe(t: Write, q: QueueInfo, known: list[LinkInfo]) -> OutgoingInfo:
    state = outgoing.load_state(t, q)
    link = outgoing.link_for(q, known)
    count, size = t.qstats(q.qid)
    messages = list(t.queue_messages(q))
    return OutgoingInfo(
        name=q.name, destination_qm=q.outgoing or "", state=outgoing.state_name(q, state, link),
        why=outgoing.why_not_dispatched(q, state, link, t.now), link=link.name if link else None,
        messages=count, in_flight=sum(1 for m in messages if m.state != AVAILABLE), bytes=size,
        oldest=min((m.put_time for m in messages), default=None), last_error=state.last_error,
        next_retry=state.next_retry, attempts=state.attempts, history=state.history,
    )
