"""Outgoing queues, their dispatch state, and arrivals from other queue managers (docs/design.md#store-and-forward).

[MS-MQQB] 3.1.7.12 (Message Position Available Event) decides what is sent: a message made available in an
outgoing queue is dispatched unless the queue is multicast, Locked or OnHold, or its
destination is a direct format name over HTTP or HTTPS. Here:

- An outgoing queue is a store queue whose name is the canonical format name of the
  destination (MSMQ names outgoing queues so too) and whose `outgoing` attribute names the
  queue manager it is bound for: the link that takes it. A put to a format name that is not
  local makes it on first use; get, browse, purge and stats work on it like on any queue.
- Its dispatch state (table `outq`): held (operator), locked (the peer refused us for a
  reason a retry cannot fix, e.g. the key), the phase of the last attempt (connecting,
  active, waiting for a retry), the last error, the next retry time and the connection
  history ([MS-MQQB]'s ConnectionHistory), the newest 20 events.
- In flight: the dispatcher holds a batch under a token (store/holders.py: the messages go
  get-unconfirmed, held by the dispatcher's process, so nobody else takes them), and on the
  peer's ack removes them in one light commit (a lost removal only makes the batch go again,
  and the receiver drops what it has seen); unacked batches go back in order, without a
  backout: a failed send is not the message's fault. A killed dispatcher's batches go back
  when the next writer sees it gone, and only those: a producer's unconfirmed put, a
  consumer's two-phase get or a browse lock on an outgoing queue are theirs.
- A transfer is named by (sending incarnation, seq): the sender's incarnation (16 random bytes
  in its meta table, renewed when the store was restored from a backup or its data file is
  another file) and the message's SequentialID in the outgoing queue, given at its enqueue
  there and kept while it waits, is in flight or is given back. msg_ids are not used: a copy,
  a replay, an import or a restored store repeats them (docs/protocol.md §4 says why the pair
  does not repeat).
- Arrival (`receive`): one durable commit per batch that records each transfer in `seen`, so
  a batch resent after a lost ack is stored once; adds a hop; puts each message in its target
  queue, or in the next outgoing queue when this queue manager forwards it, or in the
  dead-letter queue when it expired in transit, its queue does not exist or forwarding it
  would take it past HOP_LIMIT hops, and says how many went there and why (the ACK carries it
  back to the sender).
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, NamedTuple

from . import addressing, deadletters, formatnames, holders, keys, links, reports
from .errors import BadData, InvalidArgument, StoreError
from .links import LinkInfo
from .keys import queue_key
from .queues import QueueInfo, dead_letter_queue
from .records import GET_UNCONFIRMED, Message, at_rest, decode, guid_bytes, validate_fields

if TYPE_CHECKING:
    from .write import Write

ACTIVE, ON_HOLD, LOCKED, CONNECTING, WAITING = "active", "on-hold", "locked", "connecting", "waiting"
EVENTS = ("connecting", "connected", "sent", "error", "locked")
HISTORY = 20
MAX_HOPS = 0xFF  # what a record's hop count holds
#: The most hops a message makes (Windows' Message Queuing documentation, "Acknowledgment
#: Message Classes": MQMSG_CLASS_NACK_HOP_COUNT_EXCEEDED, "the maximum hop count is set by
#: Message Queuing (hop count = 15) and cannot be changed"). A queue manager that would forward
#: an arrival past it dead-letters it instead, so links that route in a circle do not pass a
#: message around for ever.
HOP_LIMIT = 15
HOP_LIMIT_REASON = f"hop count exceeded (a message makes at most {HOP_LIMIT} hops)"


@dataclass
class OutState:
    held: bool = False
    locked: str | None = None
    phase: str = ACTIVE
    last_error: str | None = None
    next_retry: int | None = None  # µs
    attempts: int = 0
    history: list[dict[str, object]] = field(default_factory=list)
    # seq → when a traced message was first taken (µs, a put time reserved then): the time of
    # its `sent` report however often it is given back and taken again (take)
    first_taken: dict[str, int] = field(default_factory=dict)


def decode_state(raw: bytes) -> OutState:
    """A value of table `outq` (BadData if it is not one)."""
    try:
        return OutState(**json.loads(raw))
    except (ValueError, TypeError) as exc:
        raise BadData(f"malformed outgoing state: {exc}") from None


def load_state(t: Write, q: QueueInfo) -> OutState:
    raw = t.lt.get(queue_key(q.name), db=t.dbs["outq"])
    if raw is None:
        return OutState()
    try:
        return decode_state(raw)
    except BadData as exc:
        raise BadData(f"outgoing queue {q.name!r}: {exc.message}") from None


def save_state(t: Write, q: QueueInfo, state: OutState) -> None:
    state.history = state.history[-HISTORY:]
    t.lt.put(queue_key(q.name), json.dumps(asdict(state), separators=(",", ":")).encode(), db=t.dbs["outq"])


# ---- routing --------------------------------------------------------------------------------------

def why_not_dispatched(q: QueueInfo, state: OutState, link: LinkInfo | None, now: int) -> str | None:
    """Why [MS-MQQB] 3.1.7.12 (or our retry timer) keeps this queue from being sent now, or None."""
    fn = formatnames.parse(q.name)
    if fn.kind == "multicast":
        return "multicast destinations are not dispatched ([MS-MQQB] 3.1.7.12)"
    if fn.protocol in ("http", "https"):
        return "HTTP(S) direct format names are not dispatched ([MS-MQQB] 3.1.7.12)"
    if state.held:
        return "on hold (`mqcli outgoing resume` to send)"
    if state.locked:
        return f"locked: {state.locked} (fix it, then `mqcli outgoing resume`)"
    if link is None:
        target = q.outgoing or "its queue manager"
        return (f"no link to {target} (`mqcli link add {q.outgoing or 'NAME'} HOST:PORT --key-file F`)")
    if state.next_retry is not None and state.next_retry > now:
        return "waiting for the next retry"
    return None


def state_name(q: QueueInfo, state: OutState, link: LinkInfo | None) -> str:
    fn = formatnames.parse(q.name)
    if state.held:
        return ON_HOLD
    if state.locked or not fn.dispatchable:  # [MS-MQQB] 3.1.7.12: multicast and HTTP(S) are never sent
        return LOCKED
    if link is None:
        return WAITING
    return state.phase


def link_for(q: QueueInfo, links: list[LinkInfo]) -> LinkInfo | None:
    """The link that takes an outgoing queue: the one named for its queue manager, or for a
    DIRECT=TCP: name the one whose host is that address."""
    if not q.outgoing:
        return None
    wanted = q.outgoing.casefold()
    for link in links:
        if link.name.casefold() == wanted:
            return link
    if formatnames.parse(q.name).protocol == "tcp":
        for link in links:
            if link.host == q.outgoing:
                return link
    return None


# ---- the dispatcher's side -----------------------------------------------------------------------

def outgoing_queues(t: Write) -> list[QueueInfo]:
    return [q for q in (t.queue(n) for n in t.queue_names()) if q.outgoing is not None]


def take(t: Write, q: QueueInfo, max_count: int, max_bytes: int,
         data_file: tuple[int, int], holder: holders.Holder) -> tuple[int, list[tuple[str, bytes]], bytes, int]:
    """Up to max_count available messages (and max_bytes of records, at least one) in queue
    order, held in flight by this dispatcher under a new token (store/holders.py); (token,
    their records as they go on the wire, the sending incarnation, the time they leave in µs).
    `data_file` is (st_dev, st_ino) of the store's data.mdb (sending_incarnation)."""
    token = holders.new_token()
    items: list[tuple[str, bytes]] = []
    size = 0
    taken = []
    if load_state(t, q).held:  # `outgoing hold` pauses a delivery under way too: what is in flight finishes
        return 0, items, b"", t.now
    # the position list's values are the available records, which is what goes on the wire
    for _, record in t.positions(keys.queue_prefix(q.qid)):
        if items and (len(items) >= max_count or size + len(record) > max_bytes):
            break
        record = bytes(record)
        items.append((q.name, record))
        size += len(record)
        taken.append(decode(record, q.name))
    if not taken:
        return 0, items, b"", t.now
    holder.register(t, token, q, holders.DISPATCH)
    incarnation = sending_incarnation(t, data_file)
    left = t.now
    state = _first_takes(t, q) if any(m.trace and m.report_queue for m in taken) else None
    for m in taken:
        # `since` is when the message leaves: the time of its `sent` report (reports.emit at
        # done), so that report comes before the next hop's `received`. A traced message gets
        # a put time reserved at its first take, which keeps the report's unique id unique,
        # and keeps it when it is given back and taken again: after a lost ACK the receiver
        # may have committed (and written `received`) before this take, and the message left
        # at the first one (docs/protocol.md §4). It is kept in the queue's state, not in the
        # record (a message given back is at rest, with no `since`), so a dispatcher killed
        # with the batch in flight leaves it for the next one.
        if state is not None and m.trace and m.report_queue:
            since = state.first_taken.get(str(m.seq))
            if since is None:
                since = state.first_taken[str(m.seq)] = t.allocate_ids(1)[1]
        else:
            since = t.now
        left = max(left, since)
        t.transition(m, durable=False, state=GET_UNCONFIRMED, confirm_id=token, since=since)
    if state is not None:
        save_state(t, q, state)
    if any(m.express for m in taken):
        # an express enqueue commits without a sync, so an OS crash could give its seq to
        # another message later; the seq goes on the wire only once it is on disk
        t.durable = True
    return token, items, incarnation, left


# The sending incarnation, meta `incarnation`: id(16) st_dev(8) st_ino(8), the file it was made
# for. A backup's copy holds the meta `backup` marker (Store.backup), so a store restored from it
# starts a new one at its first send; a data file that is another file (copied back, moved to
# another file system) starts a new one too. Either way the SequentialIDs it gives next may be
# ones it already sent before.
INCARNATION_SIZE = 16
_INCARNATION = struct.Struct(">16sQQ")


def sending_incarnation(t: Write, data_file: tuple[int, int]) -> bytes:
    """This store's sending incarnation for a batch taken now: a new one (in this commit, made
    durable) when there is none, the store was restored from a backup, or `data_file` (st_dev,
    st_ino of data.mdb) is not the file it was made for."""
    meta = t.dbs["meta"]
    raw = t.lt.get(keys.META_INCARNATION, db=meta)
    restored = t.lt.get(keys.META_BACKUP, db=meta) is not None
    if raw is not None and len(raw) == _INCARNATION.size and not restored:
        incarnation: bytes
        incarnation, dev, ino = _INCARNATION.unpack(raw)
        if (dev, ino) == tuple(data_file):
            return incarnation
    incarnation = os.urandom(INCARNATION_SIZE)
    t.lt.put(keys.META_INCARNATION, _INCARNATION.pack(incarnation, *data_file), db=meta)
    if restored:
        t.lt.delete(keys.META_BACKUP, db=meta)
    t.durable = True  # a lost incarnation would resend what was received under it as new
    return incarnation


def decode_incarnation(raw: bytes) -> tuple[bytes, int, int]:
    """The meta `incarnation` entry as (id, st_dev, st_ino); BadData if it is not one."""
    if len(raw) != _INCARNATION.size:
        raise BadData(f"{len(raw)} bytes, not {_INCARNATION.size}")
    return _INCARNATION.unpack(raw)


def done(t: Write, q: QueueInfo, token: int) -> int:
    hold = holders.lookup(t, token)
    if hold is None:
        return 0
    sent, _ = holders.finish(t, hold, q, {m.seq for m in t.with_token(q, token)})
    t.got(q, sent)  # gone from the queue as a get takes them: its counts add up, its outflow rate shows
    t.durable = False  # light: a lost removal resends the batch, which the receiver drops
    if any(m.trace and m.report_queue for m in sent):
        reports.emit(t, sent, reports.SENT, delivered=False, at=lambda m: m.since, next_hop=_next_hop(t, q))
        state = load_state(t, q)
        if state.first_taken:
            for m in sent:
                state.first_taken.pop(str(m.seq), None)
            save_state(t, q, state)
    return len(sent)


def _first_takes(t: Write, q: QueueInfo) -> OutState:
    """The queue's state for a take of traced messages, without the first takes of messages
    that left the queue another way (a get, a purge, a move) long ago: a retake comes within
    the receiver's memory of transfers (SEEN_RETENTION_US), or is taken for a new one anyway."""
    state = load_state(t, q)
    stale = t.now - SEEN_RETENTION_US
    state.first_taken = {seq: at for seq, at in state.first_taken.items() if at > stale}
    return state


def _next_hop(t: Write, q: QueueInfo) -> str:
    """Where an outgoing queue's messages go: its link's HOST:PORT (its host, or the queue
    manager's name, when a report cannot name that address)."""
    link = link_for(q, [links.decode(bytes(v)) for _, v in t.lt.cursor(db=t.dbs["links"])])
    if link is None:
        return reports.next_hop_address(q.outgoing)
    return reports.next_hop_address(link.address, link.host, q.outgoing)


def give_back(t: Write, q: QueueInfo, token: int) -> int:
    """A batch that was not acknowledged, back in its place without a backout."""
    hold = holders.lookup(t, token)
    if hold is None:
        return 0
    _, back = holders.finish(t, hold, q, set())
    return len(back)


def record_event(t: Write, q: QueueInfo, event: str, detail: str, retry_at: int | None,
                 dead_lettered: dict[str, int] | None = None) -> None:
    if event not in EVENTS:
        raise ValueError(f"unknown outgoing event {event!r}")
    state = load_state(t, q)
    entry: dict[str, object] = {"time": t.now, "event": event, "detail": detail}
    if dead_lettered:
        entry["dead_lettered"] = dict(dead_lettered)
    state.history.append(entry)
    if event == "connecting":
        state.phase = CONNECTING
    elif event in ("connected", "sent"):
        state.phase, state.last_error, state.next_retry, state.attempts = ACTIVE, None, None, 0
    elif event == "error":
        state.phase, state.last_error, state.next_retry = WAITING, detail, retry_at
        state.attempts += 1
    else:
        state.locked, state.last_error = detail, detail
    save_state(t, q, state)


# ---- the receiver's side -------------------------------------------------------------------------

def decode_items(items: list[tuple[str, bytes]]) -> list[tuple[str, formatnames.FormatName, Message]]:
    """Decode and validate a received batch whole before anything is stored (BadData if any
    part is malformed)."""
    out = []
    for text, raw in items:
        fn = formatnames.parse(text)
        m = decode(bytes(raw))  # only BadData (tests/reliability fuzz it)
        try:
            validate_fields(m)
        except InvalidArgument as exc:  # from the wire, a field out of range is bad data
            raise BadData(f"received message: {exc}") from None
        out.append((text, fn, m))
    return out


# `seen` holds two entries per arrival: I incarnation(16) seq(8) → arrival time(8), looked up
# for each arrival, and J time(8) incarnation(16) seq(8) → b"", in time order, so that each
# receive can forget a few of the oldest past SEEN_RETENTION without a scan: the table stays as
# large as one retention period of traffic. Stores written before transfers were named so hold
# M origin(16) n(4) and T time(8) origin(16) n(4) (by msg_id): still read (check) and forgotten
# by time, never matched against an arrival.
SEEN_RETENTION_US = 7 * 86400 * 1_000_000
_SEEN_BY_TRANSFER, _SEEN_BY_TIME = b"I", b"J"
_OLD_BY_ID, _OLD_BY_TIME = b"M", b"T"
# tag of an arrival's entry → (tag of its time-ordered entry, size of the arrival's name)
_SEEN_LAYOUTS = {_SEEN_BY_TRANSFER: (_SEEN_BY_TIME, INCARNATION_SIZE + 8), _OLD_BY_ID: (_OLD_BY_TIME, 16 + 4)}
_SEEN_ARRIVAL_TAG = {by_time: by_arrival for by_arrival, (by_time, _) in _SEEN_LAYOUTS.items()}


def seen_key(incarnation: bytes, seq: int) -> bytes:
    """The entry of the transfer (sending incarnation, seq)."""
    return _SEEN_BY_TRANSFER + incarnation + keys.U64.pack(seq)


def seen_time_key(key: bytes, arrived: int) -> bytes:
    """The time-ordered entry that goes with the entry `key` (seen_key) of an arrival."""
    return _SEEN_LAYOUTS[key[:1]][0] + keys.U64.pack(arrived) + key[1:]


def decode_seen(key: bytes, value: bytes) -> tuple[bytes, int]:
    """An entry of table `seen` as (the seen_key of its arrival, the arrival time in µs);
    BadData if its key or value does not have one of the layouts above."""
    tag = key[:1]
    by_arrival = tag in _SEEN_LAYOUTS
    if not by_arrival and tag not in _SEEN_ARRIVAL_TAG:
        known = b"".join(sorted([*_SEEN_LAYOUTS, *_SEEN_ARRIVAL_TAG]))
        raise BadData(f"key starts with {tag!r}, none of {known.decode()}")
    name_size = _SEEN_LAYOUTS[tag if by_arrival else _SEEN_ARRIVAL_TAG[tag]][1]
    size, value_size = (1 + name_size, keys.U64.size) if by_arrival else (1 + keys.U64.size + name_size, 0)
    if len(key) != size:
        raise BadData(f"key is {len(key)} bytes, not {size}")
    if len(value) != value_size:
        want = "an 8-byte time" if by_arrival else "empty"
        raise BadData(f"value is {len(value)} bytes, not {want}")
    if by_arrival:
        return key, keys.U64.unpack(value)[0]
    return _SEEN_ARRIVAL_TAG[tag] + key[1 + keys.U64.size:], keys.U64.unpack_from(key, 1)[0]


#: How far ahead of this store's clock a sender's departure time may be and still be followed
#: (received after it, `bump_put_time`): beyond it the two ends read different clocks.
MAX_SENDER_LEAD_US = 1_000_000


class Received(NamedTuple):
    """What one received batch became: `stored` in their target (or next outgoing) queue,
    `duplicates` received before and dropped, and by reason those the receiver could not
    deliver (in its dead-letter queue, or discarded when they asked for no dead-lettering)."""

    stored: int
    duplicates: int
    dead_lettered: dict[str, int]

    @property
    def undelivered(self) -> int:
        return sum(self.dead_lettered.values())


def bump_put_time(t: Write, sent_at: int) -> None:
    """Make this commit's put times (its `received` reports) later than `sent_at`, the time the
    batch left its sender, if that is within MAX_SENDER_LEAD_US of our clock: the sender's put
    time counter may run a little ahead of its clock (ids are allocated one µs apart), and on
    one clock a `received` must not come before its `sent`."""
    c = t.counters
    if c.put_time < sent_at <= t.now + MAX_SENDER_LEAD_US:
        c.put_time = sent_at


def receive(t: Write, origin_guid: str, batch: list[tuple[str, formatnames.FormatName, Message]],
            incarnation: bytes, sent_at: int = 0) -> Received:
    """Store a received batch (decoded by decode_items) that the sending incarnation
    `incarnation` sent at `sent_at` (µs); each item's seq is the sender's, from its record."""
    guid_bytes(origin_guid)  # validates the peer's GUID
    if type(incarnation) is not bytes or len(incarnation) != INCARNATION_SIZE:
        raise BadData(f"a sending incarnation is {INCARNATION_SIZE} bytes")
    seen_db = t.dbs["seen"]
    stamp = keys.U64.pack(t.now)
    by_queue: dict[int, tuple[QueueInfo, list[Message]]] = {}
    routed: dict[str, QueueInfo | StoreError] = {}  # a batch names a few destinations many times
    seen_entries = []
    in_batch: set[bytes] = set()
    undelivered: dict[str, int] = {}
    get = t.lt.get
    duplicates = 0
    bump_put_time(t, sent_at)
    for text, fn, m in batch:
        key = seen_key(incarnation, m.seq)  # the sender's seq: read before enqueue gives ours
        if key in in_batch or get(key, db=seen_db) is not None:
            duplicates += 1
            continue
        in_batch.add(key)
        seen_entries.append((key, stamp))
        seen_entries.append((seen_time_key(key, t.now), b""))
        m.hops = min(m.hops + 1, MAX_HOPS)
        at_rest(m)
        # a public name's route depends on the message (mqcli.report_qm), so it is not reused
        q = routed.get(text) if fn.kind != "public" else None
        if q is None:
            try:
                q = addressing.for_put_parsed(t, fn, text, m)
            except StoreError as exc:
                q = exc
            if fn.kind != "public":
                routed[text] = q
        if isinstance(q, StoreError):
            _dead_letter(t, m, text, f"destination not available: {q}", undelivered=undelivered)
            continue
        if m.expires is not None and m.expires <= t.now:
            _dead_letter(t, m, q.name, "expired in transit", q.transactional, undelivered)
            continue
        if q.outgoing is not None and m.hops >= HOP_LIMIT:  # it would leave for hop HOP_LIMIT + 1
            _dead_letter(t, m, q.name, HOP_LIMIT_REASON, q.transactional, undelivered)
            continue
        by_queue.setdefault(q.qid, (q, []))[1].append(m)
    if seen_entries:
        t.lt.cursor(db=seen_db).putmulti(seen_entries)
    prune_seen(t, t.now - SEEN_RETENTION_US, limit=2 * len(batch) + 16)
    stored = 0
    for q, messages in by_queue.values():
        messages, over = t.check_enqueue(q, messages, arrivals=True)
        for m in over:  # MSMQ: "the queue storage limit, or quota, is reached" makes it undeliverable
            _dead_letter(t, m, q.name, f"queue quota exceeded ({q.quota} bytes)", q.transactional, undelivered)
        if not messages:
            continue
        t.enqueue(q, messages, check=False)
        reports.emit(t, messages, reports.RECEIVED, delivered=q.outgoing is None)
        stored += len(messages)
    t.durable = True
    return Received(stored, duplicates, undelivered)


def _dead_letter(t: Write, m: Message, queue: str, reason: str, transactional: bool = False,
                 undelivered: dict[str, int] | None = None) -> None:
    """Dead-letter an arrival here, where its delivery failed (MSMQ); one for a transactional
    queue goes to dead-letter-tx, like any other message of such a queue (Write.dead_letter).
    `undelivered` counts it by reason, dead-lettered or (no dead_letter flag) discarded."""
    if undelivered is not None:
        undelivered[reason] = undelivered.get(reason, 0) + 1
    # [MS-MQQB] 3.1.5.8.9: a traced message reports its arrival whatever becomes of it here;
    # the report names the queue it was sent to (an arrival's own queue is set by its enqueue)
    with contextlib.suppress(StoreError):  # a report that cannot be made is discarded, as one whose open fails
        reports.emit(t, [replace(m, queue=queue)], reports.RECEIVED, delivered=False)
    if m.dead_letter:
        moved = deadletters.dead_lettered(m, reason, queue, t.now, expires=None)
        t.enqueue(t.queue(dead_letter_queue(transactional)), [moved], check=False)


def prune_seen(t: Write, before: int, limit: int | None = None) -> int:
    """Forget arrivals recorded before `before` (µs), the oldest of each layout first, at most
    `limit` of them: a resend comes within minutes of the first send, not days."""
    db = t.dbs["seen"]
    doomed: list[bytes] = []
    for by_time in (_OLD_BY_TIME, _SEEN_BY_TIME):
        doomed += t.entries_before(db, by_time, before, None if limit is None else limit - len(doomed))
    for k in doomed:
        t.lt.delete(k, db=db)
        t.lt.delete(_SEEN_ARRIVAL_TAG[k[:1]] + k[9:], db=db)
    return len(doomed)
