"""Trace report messages ([MS-MQQB] 3.1.5.8.9): made in the same commit as the event they report.

A message put with `trace` and a `report_queue` makes the queue manager that handles it send a
report message each time it is enqueued: at its origin (our addition: MSMQ skips local sends),
when it leaves a queue manager, and when it arrives at one (also when it is dead-lettered
there on arrival: delivered false). [MS-MQQB]'s report:

- class report, delivery express, destination the report queue's public format name;
- label `qm-id:message-id:hops received by computer at time-date` and a NUL, body
  `<MESSAGE ID>id</MESSAGE ID>CRLF<TARGET QUEUE>queue</TARGET QUEUE>CRLF` (store/trace.py).

How [MS-MQQB]'s fields are filled here (each a reading of it, noted where it is applied):

- qm-id, "the first four hexadecimal digits of the source queue identifier": the first four of
  the origin queue manager's GUID, upper-case. With message-id (the low 32 bits of the msg_id
  number) it names the traced message across every hop.
- computer, "UserHeader.SourceQueueManager": the GUID of the queue manager reporting the event.
  Each hop re-sends the message as its source, so the reports of one message name every queue
  manager on its route, which is what an operator reading them needs (`trace route`).
- hops: the message's hop count at the event (0 at the origin, +1 per arrival).
- time: the event's time, UTC, whole seconds; the report's own put_time holds it to the µs.

Beyond [MS-MQQB], each report carries the traced message's msg_id as its correlation id (so
`trace route` is one index lookup) and two properties: `mqcli.event` (enqueued, sent or
received) and `mqcli.delivered` (true when this enqueue put the message into its target queue
rather than into an outgoing queue). A report made away from the report queue's queue manager
goes into the outgoing queue for it and travels back like any message.

A queue manager may have its own report queue (`qmgr set --report-queue`, Store.set_qmgr).
Windows' "Specifying Multiple Report Queues": when a hop's own report queue differs from the
one the message carries, the hop sends its report to the message's report queue and a
conflict report, label `Report Message Conflict`, to its own. Here the conflict report's body
is the body of the report it mirrors (message id, target queue, next hop and hop count), its
correlation id the traced message's msg_id and its put time the report's, so it can be tied to
the message and the event; it carries `mqcli.event` = conflict. It is made in the same commit,
and, like any report, is dropped when its queue refuses it.

[MS-MQQB] 3.1.5.8.9 discards a trace message whose queue cannot be opened: a report queue that
does not exist, or that refuses the report (quota, throttled), drops the report and the traced
operation goes on (docs/design.md#trace-reports).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from . import addressing, formatnames
from .addressing import REPORT_QM_PROP
from .errors import InvalidArgument, StoreError, TraceFormatError
from .records import AVAILABLE, DEFAULT_PRIORITY, Message, guid_text

if TYPE_CHECKING:
    from .queues import QueueInfo
    from .trace import ReportBody, ReportLabel
    from .write import Write

# a report's event: trace.py's label events (received, sent, conflict), and the first enqueue.
# trace.py is loaded only where a label or body is made or read (docs/layers.md: it compiles
# its grammar on import, a cost every put would pay); tests/test_trace_reports.py checks the names agree
ENQUEUED, SENT, RECEIVED, CONFLICT = "enqueued", "sent", "received", "conflict"
EVENT_PROP, DELIVERED_PROP = "mqcli.event", "mqcli.delivered"


def keep_report_queue(t: Write, m: Message) -> None:
    """Set what a traced message keeps as its report queue: the public format name of the queue
    its `report_queue` names when that is a queue here ([MS-MQQB] 3.1.5.8.9: the destination is the report
    queue's public format name), and this queue manager's name in the property
    mqcli.report_qm, so that reports made at later hops find their way back (no directory
    service). A report queue that does not exist is not an error: its reports are discarded."""
    try:
        m.report_queue = f"PUBLIC={addressing.lookup(t, m.report_queue or '').guid}"
    except StoreError:
        return
    m.props = {**m.props, REPORT_QM_PROP: t.qm_name}


def target_format_name(t: Write, m: Message) -> str:
    """The format name of the queue a message is bound for ([MS-MQQB]'s UserHeader
    .DestinationQueue) in MS-MQMQ's spelling: an outgoing queue is named by it; a local queue is
    DIRECT=OS:qm\\name."""
    if "=" in m.queue:
        return formatnames.parse(m.queue).mqmq_text()
    return f"DIRECT=OS:{t.qm_name}\\{m.queue}"


def emit(t: Write, messages: list[Message], event: str, *, delivered: bool,
         at: Callable[[Message], int | None] | None = None, next_hop: str | None = None) -> int:
    """Send the report of `event` for each traced message in `messages`; return how many were
    sent. Reports are plain enqueues in the caller's transaction: one commit for both.

    The report's time (its put time, and the label's time) is this commit's, or `at(m)` when
    that gives one: a put time allocated earlier for this report (Write.allocate_ids), as
    outgoing.take does for `sent`, whose event is the take, before the commit that reports it.

    A `sent` report is written as Windows writes a departure: label `… sent from <this queue
    manager's GUID> to <next_hop> at …`, body with `<NEXT HOP>` and `<HOP COUNT>`; `next_hop`
    is the address the message leaves for (the link's HOST:PORT)."""
    sent = 0
    for m in messages:
        if m.trace and m.report_queue:
            sent += _emit_one(t, m, event, delivered, at(m) if at is not None else None, next_hop)
    return sent


def next_hop_address(*candidates: str | None) -> str:
    """The first of `candidates` that a report can name as an address (trace.py: an IPX
    address, or a host and an optional port); a link's host that is not one (an IPv6
    literal) falls back to the next candidate, and last to `unknown`."""
    from . import trace

    for c in candidates:
        if c and trace._address_value(c) is not None:
            return c
    return "unknown"


def _emit_one(t: Write, m: Message, event: str, delivered: bool, at: int | None = None,
              next_hop: str | None = None) -> int:
    from . import trace

    try:
        q = addressing.for_put(t, m.report_queue or "", m)  # here, or the way back to its queue manager
    except StoreError:
        return 0  # [MS-MQQB] 3.1.5.8.9: the open failed, discard the report
    computer = guid_text(t.origin)
    n, put_time = t.allocate_ids(1)
    if at is not None:
        put_time = at
    when = datetime.fromtimestamp((t.now if at is None else at) / 1e6, tz=UTC)
    message_id = m.msg_n & trace.MAX_MESSAGE_ID
    hops = min(m.hops, trace.MAX_HOPS)
    # a departure names where the message goes, in the label and the body (Windows' form); an
    # arrival, and the first enqueue at the origin (a `received by` at hop 0), names no next hop
    departure = event == SENT
    hop = next_hop_address(next_hop) if departure else None
    label = trace.encode_label(guid_text(m.origin)[:4].upper(), message_id, hops, computer, when, next_hop=hop)
    hop_count = hops if departure else None
    try:
        body = trace.encode_body(message_id, target_format_name(t, m), next_hop=hop,
                                 hop_count=hop_count).encode("utf-8")
    except InvalidArgument:  # a queue manager name no DIRECT=OS: name can hold
        body = trace.encode_body(message_id, f"PUBLIC={t.queue(m.queue).guid}", next_hop=hop,
                                 hop_count=hop_count).encode("utf-8")
    report = Message(
        body, q.name, AVAILABLE, DEFAULT_PRIORITY, origin=t.origin, msg_n=n, put_time=put_time,
        correl_id=m.msg_id, label=label, report=True, express=True, dead_letter=False,
        props={EVENT_PROP: event, DELIVERED_PROP: "true" if delivered else "false",
               **({REPORT_QM_PROP: m.props[REPORT_QM_PROP]} if REPORT_QM_PROP in m.props else {})},
    )
    if q.outgoing is not None:  # bound for another queue manager: the report travels by itself
        report.report_queue = None
    own = _own_report_queue(t, m)
    try:
        t.enqueue(q, [report])
    except StoreError:
        return 0  # refused (quota, throttled): discarded like a failed open
    if own is not None:
        _emit_conflict(t, own, report)
    return 1


def _own_report_queue(t: Write, m: Message) -> QueueInfo | None:
    """This queue manager's own report queue when it differs from the message's (which is
    `PUBLIC=<guid>` of a queue here once keep_report_queue has run at the origin, or a name
    given at the put); None when there is none, it is the message's, or it is gone."""
    name = t.report_queue
    if name is None:
        return None
    try:
        own = t.queue(name)
    except StoreError:
        return None  # deleted since: like a report queue that does not open, nothing is sent
    mine = m.report_queue or ""
    if mine == f"PUBLIC={own.guid}" or ("=" not in mine and mine.casefold() == own.name.casefold()):
        return None
    return own


def _emit_conflict(t: Write, own: QueueInfo, report: Message) -> None:
    from . import trace

    n, _ = t.allocate_ids(1)
    conflict = Message(
        report.body, own.name, AVAILABLE, DEFAULT_PRIORITY, origin=t.origin, msg_n=n,
        put_time=report.put_time, correl_id=report.correl_id, label=trace.encode_conflict_label(), report=True,
        express=True, dead_letter=False,
        props={EVENT_PROP: CONFLICT, DELIVERED_PROP: report.props[DELIVERED_PROP]})
    try:
        t.enqueue(own, [conflict])
    except StoreError:
        pass  # refused (quota, throttled): discarded like any report


def describe(m: Message) -> dict[str, object]:
    """A report message's decoded label and body; a report whose label or body does not decode
    keeps its `error` instead of those fields. The event is the label's (a `received by` at
    hop 0 is the first enqueue at the origin: `enqueued`), so reports that no mqcli wrote, or
    whose properties were lost, read the same; `delivered` is mqcli's property (None without)."""
    row: dict[str, object] = {
        "report_id": m.msg_id, "msg_id": m.correl_id, "event": m.props.get(EVENT_PROP),
        "delivered": m.props.get(DELIVERED_PROP) == "true" if DELIVERED_PROP in m.props else None,
        "time": m.put_time}
    from . import trace

    try:
        label = trace.decode_label(m.label)
        body = trace.decode_body(m.body.decode("utf-8", "surrogateescape"))
    except TraceFormatError as exc:
        row["error"] = str(exc)
        return row
    row.update(describe_fields(label, body))
    return row


def describe_fields(label: ReportLabel, body: ReportBody) -> dict[str, object]:
    """The fields of a decoded report, as `describe` and `trace route --reports` show them."""
    event = label.event
    if event == RECEIVED and label.hops == 0:
        event = ENQUEUED
    return {"event": event, "qm_id": label.qm_id,
            "message_id": label.message_id if label.message_id is not None else body.message_id,
            "hops": label.hops if label.hops is not None else body.hop_count,
            "computer": label.computer,
            "label_time": None if label.time is None else label.time.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "target": body.queue, "next_hop": label.next_hop or body.next_hop}


def route(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """One message's reports in route order (hop, then time), each with the µs since the
    previous one: the time a hop took."""
    ordered = sorted((r for r in rows if "error" not in r and r["event"] != CONFLICT),
                     key=lambda r: (r["hops"], r["time"]))
    previous = None
    for r in ordered:
        time_us = int(r["time"])  # type: ignore[call-overload]  # a row's time is µs, an int
        r["since_previous_us"] = None if previous is None else time_us - previous
        previous = time_us
    return ordered
