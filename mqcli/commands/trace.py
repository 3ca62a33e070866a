"""Trace reports: trace decode (SPEC §7, seed 001).

A message put with `--trace --report-queue Q` leaves report messages in Q; their labels and
bodies follow the seed's ABNF, and `trace decode` reads them back strictly (store/trace.py).
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from store import trace

from ..exits import UsageError
from ..options import OutputOpt, QuietOpt, StoreOpt, session

EXAMPLE_LABEL = "1A2B:0000002A:01 received by 6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f at 03:15:42 PM Sun,Nov 22 26"

app = typer.Typer(
    help="Trace reports (seed 001): decode their labels and bodies.\n\n\b\nExample:\n"
         f"  mqcli trace decode '{EXAMPLE_LABEL}'",
    no_args_is_help=True, rich_markup_mode=None)


def _read_stdin(body: bool) -> str:
    data = sys.stdin.buffer.read()
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
