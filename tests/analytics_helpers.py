"""Helpers for the pipeline tests (tests/test_analytics_*.py): trace reports made as the store
makes them (docs/design.md#trace-reports; store/trace.py's encoders), put with `Store.import_messages` so that
each keeps its event time as its put time."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

from store import Message, Store
from store.records import guid_bytes
from store.trace import encode_body, encode_label

REPORT_QUEUE = "reports"


@dataclass(frozen=True)
class Event:
    """One trace report: what happened to a traced message, where and when."""

    hops: int
    computer: str          # GUID (or machine name) of the queue manager where it happened
    event: str             # enqueued, sent, received
    time_us: int
    delivered: bool = False


def report(origin: str, msg_n: int, target: str, ev: Event, report_n: int) -> Message:
    """The report message for `ev` of the traced message `origin\\msg_n`."""
    when = datetime.fromtimestamp(ev.time_us / 1e6, tz=timezone.utc)
    return Message(
        body=encode_body(msg_n & 0xFFFFFFFF, target).encode("utf-8"),
        # the report's own id: from the computer that made it (the traced message's origin
        # stands in for one known by its machine name)
        origin=guid_bytes(ev.computer if _is_guid(ev.computer) else origin), msg_n=report_n, put_time=ev.time_us,
        correl_id=f"{origin}\\{msg_n}",
        label=encode_label(origin[:4].upper(), msg_n & 0xFFFFFFFF, ev.hops, ev.computer, when),
        props={"mqcli.event": ev.event, "mqcli.delivered": "true" if ev.delivered else "false"},
        report=True, express=True,
    )


def _is_guid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def route_events(path: list[str], start_us: int, link_us: list[int], *, delivered: bool = True,
                 step_us: int = 100) -> list[Event]:
    """The reports of a message sent along `path` (queue manager GUIDs): enqueued and sent at
    hop 0, received (and sent, but at the end) at each later hop; link k takes link_us[k]."""
    events = [Event(0, path[0], "enqueued", start_us, delivered=len(path) == 1 and delivered)]
    t = start_us
    for hop in range(1, len(path)):
        t += step_us
        events.append(Event(hop - 1, path[hop - 1], "sent", t))
        t += link_us[hop - 1]
        last = hop == len(path) - 1
        events.append(Event(hop, path[hop], "received", t, delivered=last and delivered))
    return events


def put_reports(st: Store, messages: list[Message], queue: str = REPORT_QUEUE) -> None:
    if queue.casefold() not in {q.name.casefold() for q in st.list_queues()}:
        st.create_queue(queue)
    for i in range(0, len(messages), 1000):
        st.import_messages(queue, messages[i:i + 1000])


def new_guid() -> str:
    return str(uuid.uuid4())
