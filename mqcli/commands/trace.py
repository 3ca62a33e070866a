"""Trace reports: trace decode, show and route (docs/design.md#trace-reports).

A message put with `--trace --report-queue Q` leaves report messages in Q (store/reports.py);
their labels and bodies are the forms Windows writes, and `trace decode` reads every documented
form back (`--strict`: [MS-MQQB]'s ABNF alone; store/trace.py). `show` lists a report queue decoded, `route` one message's reports in hop
order; neither consumes them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from store import reportfile, reports, trace
from store.errors import BadData, MessageNotFound, TraceFormatError
from store.records import guid_text, parse_msg_id

from .. import inputs
from ..exits import UsageError
from ..options import Session, shared_options
from ..render import back_in_time, iso

EXAMPLE_LABEL = "1A2B:0000002A:01 received by 6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f at 03:15:42 PM Sun,Nov 22 26"

app = typer.Typer(
    help="Trace reports (MSMQ's PROPID_M_TRACE): decode labels and bodies, list a report queue, follow a route.\n\n"
         "\b\nExamples:\n"
         "  mqcli put orders hello --trace --report-queue reports\n"
         "  mqcli trace show reports\n"
         f"  mqcli trace decode '{EXAMPLE_LABEL}'",
    no_args_is_help=True, rich_markup_mode=None)


@app.command("decode")
@shared_options
def decode(
    s: Session,
    text: Annotated[Optional[str], typer.Argument(
        metavar="[LABEL|-]", show_default=False,
        help="The label (with --body, the body); - or nothing reads it from stdin.")] = None,
    body: Annotated[bool, typer.Option("--body", help="Decode a report body instead of a label.")] = False,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Accept only [MS-MQQB]'s ABNF (received by a GUID; no next hop or hop count).")] = False,
) -> None:
    """Decode a trace report's label (or body), in any form Windows documents, and print its fields.

    Labels: `received by COMPUTER at TIME`, `sent from COMPUTER to ADDRESS at TIME` and `Report
    Message Conflict`, the computer a GUID or a machine name. A label gives event (received,
    sent, conflict), qm_id, message_id, hops, computer (a GUID lowercase, a machine name as
    written), time (ISO-8601 UTC), has_seconds and next_hop (a sent label's address); a
    conflict label gives its event only. Its trailing NUL is optional, and from stdin one line
    end (LF or CR LF) is ignored. A body (--body, read exactly as given, CR LF included) gives message_id,
    queue, next_hop and hop_count (null when absent). --strict accepts only [MS-MQQB]'s ABNF.
    Invalid input exits 12 naming the 1-based column and the ABNF rule that failed.

    \b
    Examples:
      mqcli trace decode '1A2B:0000002A:01 received by 6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f at 03:15:42 PM Sun,Nov 22 26' -o json
      mqcli trace decode '1A2B:0000002A:01 sent from SRV01 to 10.0.0.5 at 03:15 PM Sun,Nov 22 26'
      mqcli trace decode --strict 'Report Message Conflict'
      mqcli get reports -o json | jq -r .label | mqcli trace decode -
      mqcli get reports -o body --delimiter '' | mqcli trace decode --body -
    """
    if text is None and sys.stdin.isatty():
        raise UsageError("give the " + ("body" if body else "label") + ", or - to read it from stdin")
    if text is None or text == "-":
        text = inputs.trace_text(body)
        if not body and text.endswith("\r"):
            text = text[:-1]  # a label holds no CR: with the LF trace_text took, a Windows line end
    decoded = trace.decode_body(text, strict=strict) if body else trace.decode_label(text, strict=strict)
    s.out.document(decoded.to_dict())


SHOW_COLUMNS = (("msg_id", "message"), ("hops", "hop"), ("event", "event"), ("computer", "computer"),
                ("time", "time"), ("target", "target"))
ROUTE_COLUMNS = (("hops", "hop"), ("event", "event"), ("computer", "computer"), ("time", "time"),
                 ("since_previous", "+time"), ("target", "target"))


def _shown(rows: list[dict], *, text: bool) -> list[dict]:
    for r in rows:
        r["time"] = iso(r["time"])
        if text and "error" in r:
            r["event"] = "undecodable: " + str(r["error"])
    return rows


@app.command("show")
@shared_options
def show(
    s: Session,
    report_queue: Annotated[str, typer.Argument(metavar="REPORT_QUEUE", help="The report queue.")],
    limit: Annotated[Optional[int], typer.Option("--limit", "-n", min=1, help="At most this many reports.")] = None,
) -> None:
    """List the trace reports in a queue, decoded, oldest first, without consuming them.

    Each row is one report: the traced message's id, its hop count, the event (enqueued, sent,
    received), the queue manager that reported it (its GUID) and the time (µs, from the report's
    put time; the label holds whole seconds). A report whose label does not decode is listed
    with the error.

    \b
    Examples:
      mqcli trace show reports
      mqcli trace show reports -o json | jq '.[] | select(.hops > 0)'
    """
    with s.open(reading=True) as st:
        messages = st.browse(report_queue, limit=limit)
    rows = [reports.describe(m) for m in messages if m.report]
    s.out.table(_shown(rows, text=s.out.mode == "text"), SHOW_COLUMNS, title=f"trace reports in {report_queue}")


@app.command("route")
@shared_options
def route(
    s: Session,
    msg_id: Annotated[str, typer.Argument(metavar="MSG_ID", help="The traced message's id.")],
    report_queue: Annotated[Optional[str], typer.Option(
        "--report-queue", "-r", show_default=False, help="The queue its reports went to.")] = None,
    reports_file: Annotated[Optional[Path], typer.Option(
        "--reports", metavar="FILE", show_default=False,
        help="Read the reports from FILE (JSONL or CSV rows of label, body, arrived) instead.")] = None,
) -> None:
    """Print one traced message's route hop by hop, with the time each step took.

    The reports are found by correlation id (each report carries the traced message's id) and
    ordered by hop, then time. Exit 4 when the report queue holds no report of that message.
    With --reports FILE (an export of a report queue, e.g. Windows'; README: "Reports from a
    Windows report queue") the reports are the file's rows whose label names the message:
    MSG_ID is then GUID\\N (the label's qm-id is the GUID's first four digits, its message id
    N's low 32 bits) or QMID:MESSAGEID as in the label.
    Step times are the events', from the labels (whole seconds; MSMQ writes them when the
    event happens): not the rows' arrival times, whose order is not the events'. Malformed
    rows exit 12 naming the row and the column; reports of the message that do not decode are
    noted (exit 12 when no other report of it does).

    \b
    Examples:
      mqcli trace route '6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f\\42' --report-queue reports
      mqcli trace route 1A2B:0000002A --reports reports.csv
    """
    if (report_queue is None) == (reports_file is None):
        raise UsageError("give --report-queue QUEUE or --reports FILE (one of them)")
    if reports_file is not None:
        _print_route(s, _file_route_rows(reports_file, msg_id), msg_id, str(reports_file))
        return
    assert report_queue is not None
    with s.open(reading=True) as st:
        messages = st.browse(report_queue, correl_id=msg_id)
    _print_route(s, [reports.describe(m) for m in messages if m.report], msg_id, report_queue)


def _route_identity(msg_id: str) -> tuple[str, int]:
    """(qm_id, message_id) that the labels of `msg_id`'s reports carry (store/reports.py)."""
    m = re.fullmatch(r"([0-9A-Fa-f]{4}):([0-9A-Fa-f]{8})", msg_id)
    if m:
        return m[1].upper(), int(m[2], 16)
    try:
        origin, n = parse_msg_id(msg_id)
    except BadData:
        raise BadData(f"MSG_ID must be GUID\\N or QMID:MESSAGEID (as in a label, e.g. 1A2B:0000002A), "
                         f"got {msg_id!r}") from None
    return guid_text(origin)[:4].upper(), n & trace.MAX_MESSAGE_ID


def _file_route_rows(path: Path, msg_id: str) -> list[dict]:
    """The rows of a reports file that belong to `msg_id`, described as `trace show` does: the
    decodable labels with its identity, and the conflict reports whose body names its message
    id (a conflict label names no queue manager, so these are a guess when two origins share
    message ids). A row whose label begins with the message's identity (`QMID:MESSAGEID:`) but
    whose label or body does not decode is kept with its `error`, as `trace show` lists such a
    report: it is no step, and _print_route says so. Times are the events' (store/reportfile.py
    event_times), not the arrivals at the report queue."""
    qm_id, message_id = _route_identity(msg_id)
    head = f"{qm_id}:{message_id:08X}:"
    rows: list[dict] = []
    for r in reportfile.read(path):
        row: dict = {"report_id": None, "msg_id": msg_id, "delivered": None, "time": r.time, "row": r.row}
        try:
            label = trace.decode_label(r.label)
            body = trace.decode_body(r.body)
        except TraceFormatError as exc:
            if r.label[:len(head)].upper() == head:
                rows.append({**row, "error": str(exc)})
            continue
        fields = reports.describe_fields(label, body)
        mine = (fields["message_id"] == message_id and
                (label.event == trace.CONFLICT or str(fields["qm_id"]).upper() == qm_id))
        if mine:
            rows.append({**row, **fields})
    # in route order before reports.route's (hops, time), which keeps the order of equal times:
    # an arrival before the departure of its hop when their labels give one second
    rows.sort(key=lambda r: (r.get("hops") or 0, r.get("event") == trace.SENT, r["time"], r["row"]))
    return rows


def _print_route(s: Session, rows: list[dict], msg_id: str, where: str) -> None:
    """The route table; conflict reports (a hop's copies for its own report queue) are no
    step of it: they are counted in a note, and a queue of conflict reports alone says where
    the reports went."""
    conflicts = sum(1 for r in rows if r.get("event") == trace.CONFLICT)
    undecodable = [r for r in rows if "error" in r]
    steps = _shown(reports.route(rows), text=False)
    if undecodable:
        first = undecodable[0]
        which = f"row {first['row']}" if "row" in first else f"report {first['report_id']}"
        why = (f"{len(undecodable)} report(s) of message {msg_id!r} in {where!r} do not decode "
               f"({which}: {first['error']})")
        if not steps:
            raise BadData(f"{why}, and no other report of it does")
        s.out.note(f"{why}; they are not steps of the route")
    if not steps:
        if conflicts:
            raise MessageNotFound(
                f"{where!r} holds only {conflicts} conflict report(s) of message {msg_id!r}: copies this "
                "queue manager kept because the message names another report queue; trace that one")
        raise MessageNotFound(f"no trace report of message {msg_id!r} in {where!r}")
    if conflicts:
        s.out.note(f"{conflicts} conflict report(s) of {msg_id} in {where} (copies for a queue manager's "
                   "own report queue) are not steps of the route")
    for r in steps:
        us = r["since_previous_us"]
        r["since_previous"] = "" if us is None else f"{int(us) / 1000:+.3f} ms"  # one sign (two clocks may differ)
    backwards = [int(r["since_previous_us"]) for r in steps if r["since_previous_us"] is not None
                 and int(r["since_previous_us"]) < 0]
    if backwards:
        s.out.note(back_in_time(len(backwards), "step(s) of the route", -min(backwards) / 1000))
    s.out.table(steps, ROUTE_COLUMNS, title=f"route of {msg_id}")
