"""Trace reports: trace decode, show and route (SPEC §7, seed 001).

A message put with `--trace --report-queue Q` leaves report messages in Q (store/reports.py);
their labels and bodies follow the seed's ABNF, and `trace decode` reads them back strictly
(store/trace.py). `show` lists a report queue decoded, `route` one message's reports in hop
order; neither consumes them.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from store import reports, trace
from store.errors import MessageNotFound

from .. import inputs
from ..exits import UsageError
from ..options import OutputOpt, QuietOpt, StoreOpt, session
from ..render import iso

EXAMPLE_LABEL = "1A2B:0000002A:01 received by 6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f at 03:15:42 PM Sun,Nov 22 26"

app = typer.Typer(
    help="Trace reports (seed 001): decode labels and bodies, list a report queue, follow a route.\n\n"
         "\b\nExamples:\n"
         "  mqcli put orders hello --trace --report-queue reports\n"
         "  mqcli trace show reports\n"
         f"  mqcli trace decode '{EXAMPLE_LABEL}'",
    no_args_is_help=True, rich_markup_mode=None)


def _read_stdin(body: bool) -> str:
    data = inputs.read_small(sys.stdin.buffer, inputs.TRACE_INPUT_BYTES,
                             "trace report body" if body else "trace label (250 characters)")
    # bytes that are not UTF-8 become lone surrogates, which no rule accepts: the decoder then
    # names their column like any other bad character
    text = data.decode("utf-8", "surrogateescape")
    if not body and text.endswith("\n"):
        text = text[:-1]  # a label holds no LF: this is the line end `echo` adds
    return text


@app.command("decode")
def decode(
    ctx: typer.Context,
    text: Annotated[Optional[str], typer.Argument(
        metavar="[LABEL|-]", show_default=False,
        help="The label (with --body, the body); - or nothing reads it from stdin.")] = None,
    body: Annotated[bool, typer.Option("--body", help="Decode a report body instead of a label.")] = False,
    store: StoreOpt = None, output: OutputOpt = None, quiet: QuietOpt = False,
) -> None:
    """Decode a trace report's label (or body) strictly by the seed's ABNF and print its fields.

    A label gives qm_id, message_id, hops, computer (the GUID, lowercase), time (ISO-8601 UTC)
    and has_seconds; its trailing NUL is optional, and from stdin one line end is ignored. A
    body (--body, read exactly as given, CR LF included) gives message_id and queue. Invalid
    input exits 12 naming the 1-based column and the ABNF rule that failed.

    \b
    Examples:
      mqcli trace decode '1A2B:0000002A:01 received by 6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f at 03:15:42 PM Sun,Nov 22 26' -o json
      mqcli get reports -o json | jq -r .label | mqcli trace decode -
      mqcli get reports -o body --delimiter '' | mqcli trace decode --body -
    """
    s = session(ctx, store, output, quiet)
    if text is None and sys.stdin.isatty():
        raise UsageError("give the " + ("body" if body else "label") + ", or - to read it from stdin")
    if text is None or text == "-":
        text = _read_stdin(body)
    decoded = trace.decode_body(text) if body else trace.decode_label(text)
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
def show(
    ctx: typer.Context,
    report_queue: Annotated[str, typer.Argument(metavar="REPORT_QUEUE", help="The report queue.")],
    limit: Annotated[Optional[int], typer.Option("--limit", "-n", min=1, help="At most this many reports.")] = None,
    store: StoreOpt = None, output: OutputOpt = None, quiet: QuietOpt = False,
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
    s = session(ctx, store, output, quiet)
    with s.open() as st:
        messages = st.browse(report_queue, limit=limit)
    rows = [reports.describe(m) for m in messages if m.report]
    s.out.table(_shown(rows, text=s.out.mode == "text"), SHOW_COLUMNS, title=f"trace reports in {report_queue}")


@app.command("route")
def route(
    ctx: typer.Context,
    msg_id: Annotated[str, typer.Argument(metavar="MSG_ID", help="The traced message's id.")],
    report_queue: Annotated[str, typer.Option("--report-queue", "-r", help="The queue its reports went to.")],
    store: StoreOpt = None, output: OutputOpt = None, quiet: QuietOpt = False,
) -> None:
    """Print one traced message's route hop by hop, with the time each step took.

    The reports are found by correlation id (each report carries the traced message's id) and
    ordered by hop, then time. Exit 4 when the report queue holds no report of that message.

    \b
    Example:
      mqcli trace route '6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f\\42' --report-queue reports
    """
    s = session(ctx, store, output, quiet)
    with s.open() as st:
        messages = st.browse(report_queue, correl_id=msg_id)
    steps = _shown(reports.route([reports.describe(m) for m in messages if m.report]), text=False)
    if not steps:
        raise MessageNotFound(f"no trace report of message {msg_id!r} in {report_queue!r}")
    for r in steps:
        us = r["since_previous_us"]
        r["since_previous"] = "" if us is None else f"+{int(us) / 1000:.3f} ms"
    s.out.table(steps, ROUTE_COLUMNS, title=f"route of {msg_id}")
