"""Outgoing queues: outgoing list/show/hold/resume (docs/design.md#store-and-forward)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..exits import one_line
from ..options import Session, shared_options
from ..render import age, age_seconds, iso

if TYPE_CHECKING:
    from store import OutgoingInfo

app = typer.Typer(
    help="Outgoing queues: what waits to be sent to other queue managers, and why.\n\n\b\nExample:\n"
         "  mqcli outgoing list\n"
         "  mqcli outgoing hold 'DIRECT=OS:qm2\\orders'",
    no_args_is_help=True, rich_markup_mode=None)

QueueArg = Annotated[str, typer.Argument(metavar="QUEUE", show_default=False,
                                         help="The outgoing queue: its destination's format name.")]
COLUMNS = [("name", "outgoing queue"), ("state", "state"), ("messages", "messages"), ("bytes", "bytes"),
           ("oldest_age", "oldest"), ("link", "link"), ("last_error", "last error"),
           ("next_retry", "next retry"), ("why", "not sent because")]


def outgoing_doc(o: OutgoingInfo, now: int) -> dict[str, Any]:
    d = o.to_dict()
    d["oldest_age"] = age(o.oldest, now) if o.oldest is not None else None
    d["oldest_age_s"] = age_seconds(o.oldest, now)
    d["oldest"] = iso(o.oldest)
    d["next_retry"] = iso(o.next_retry)
    d["history"] = [{**h, "time": iso(h["time"])} for h in o.history]
    return d


def shown(value: Any) -> Any:
    """A value as text output shows it. The last error, a lock's reason and the history's
    details hold what a peer said (an ERROR frame's text, sent before it authenticated:
    docs/protocol.md §6), and an outgoing queue's name may have come with an arrival, so a
    control character, an escape sequence or a bidirectional override in them is shown escaped,
    as the error line shows it (mqcli.exits). JSON keeps the exact string (it escapes them)."""
    return one_line(value) if isinstance(value, str) else value


def _now() -> int:
    return int(time.time() * 1_000_000)


@app.command("list")
@shared_options
def list_(s: Session) -> None:
    """List the outgoing queues: state, messages, bytes, oldest age, last error, next retry.

    States (as MSMQ's outgoing queues): active, connecting, waiting (for a retry, or for a link), on-hold
    (`outgoing hold`), locked (the peer refused us, or an HTTP(S) or multicast destination,
    which is never dispatched). The last column says why a queue is not being sent.

    \b
    Example:
      mqcli outgoing list -o json
    """
    with s.open(reading=True) as st:
        found = st.outgoing_list()
    now = _now()  # after the read: no age of what it found is negative
    rows = [outgoing_doc(o, now) for o in found]
    if s.out.mode == "text":
        for row in rows:
            row.pop("history")
        rows = [{k: shown(v) for k, v in row.items()} for row in rows]
    s.out.table(rows, COLUMNS)


@app.command("show")
@shared_options
def show(s: Session, queue: QueueArg) -> None:
    """Show one outgoing queue with its connection history (newest 20 events).

    \b
    Example:
      mqcli outgoing show 'DIRECT=OS:qm2\\orders'
    """
    with s.open(reading=True) as st:
        doc = outgoing_doc(st.outgoing_show(queue), _now())
    if s.out.mode == "text":
        history = doc.pop("history")
        lines = [(k, shown(v)) for k, v in doc.items()] + [("history", "" if history else "-")]
        lines += [(f"  {h['time']}", shown(f"{h['event']}  {h['detail']}")) for h in history]
        s.out.document(doc, lines)
    else:
        s.out.document(doc)


def _hold(s: Session, queue: str, held: bool) -> None:
    with s.open() as st:
        doc = outgoing_doc(st.outgoing_hold(queue, held), _now())
    doc.pop("history")
    s.out.document(doc, [(k, shown(v)) for k, v in doc.items()] if s.out.mode == "text" else None)


@app.command("hold")
@shared_options
def hold(s: Session, queue: QueueArg) -> None:
    """Pause delivery from an outgoing queue (MSMQ's OnHold); messages stay and still expire.

    \b
    Example:
      mqcli outgoing hold 'DIRECT=OS:qm2\\orders'
    """
    _hold(s, queue, True)


@app.command("resume")
@shared_options
def resume(s: Session, queue: QueueArg) -> None:
    """Resume delivery: clears on-hold, a lock and the retry timer (the next dispatch sends).

    \b
    Example:
      mqcli outgoing resume 'DIRECT=OS:qm2\\orders'
    """
    _hold(s, queue, False)
