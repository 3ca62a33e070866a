"""export and import: JSONL dumps of queues with every field, ids kept (SPEC §6)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from store import Message, errors

from ..exits import UsageError
from ..options import OutputOpt, QuietOpt, StoreOpt, session
from ..render import json_line, progress
from .message import BATCH, _open_input, read_records


def export(
    ctx: typer.Context,
    queues: Annotated[Optional[list[str]], typer.Argument(help="Queues to export (default: all).", show_default=False)] = None,
    to: Annotated[Optional[Path], typer.Option("--to", help="Write to this file instead of stdout.")] = None,
    store: StoreOpt = None, output: OutputOpt = None, quiet: QuietOpt = False,
) -> None:
    """Dump queues as JSONL, one message a line with every field (any state), in queue order.

    \b
    Examples:
      mqcli export orders --to orders.jsonl
      mqcli export | gzip > qm1.jsonl.gz
    """
    s = session(ctx, store, output, quiet)
    with s.open() as st:
        sink = open(to, "wb") if to is not None else sys.stdout.buffer
        try:
            count = 0
            with progress("export") as bar:
                for m in st.export_messages(queues):
                    sink.write(json_line(m.to_dict()) + b"\n")
                    count += 1
                    bar.advance()
            sink.flush()
        finally:
            if to is not None:
                sink.close()
    s.out.note(f"exported {count} messages" + (f" to {to}" if to else ""))


def import_(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="FILE|-", help="JSONL file, or - for stdin.", show_default=False)],
    queue: Annotated[Optional[str], typer.Option("--queue", help="Put every record on this queue instead of its own.")] = None,
    store: StoreOpt = None, output: OutputOpt = None, quiet: QuietOpt = False,
) -> None:
    """Load a JSONL dump: every record back on its queue (created if missing), ids kept.

    A file is validated whole first, so a bad line (exit 12, naming the line) stores nothing;
    from stdin, each batch of 1,000 is all or nothing.

    \b
    Examples:
      mqcli --store /tmp/qm2 import orders.jsonl
      mqcli export orders | mqcli --store /tmp/qm2 import -
    """
    s = session(ctx, store, output, quiet)
    stream = _open_input(source)
    if stream.seekable():
        for _ in read_records(stream):  # validation pass: nothing is stored if a line is bad
            pass
        stream.seek(0)
    imported = 0
    with s.open() as st:
        known = {q.name.casefold() for q in st.list_queues()}
        pending: list[Message] = []
        target = None

        def flush() -> None:
            nonlocal imported
            if pending:
                if target.casefold() not in known:  # type: ignore[union-attr]
                    st.create_queue(target)  # type: ignore[arg-type]
                    known.add(target.casefold())  # type: ignore[union-attr]
                    s.out.note(f"created queue {target!r}")
                imported += len(st.import_messages(target, pending))  # type: ignore[arg-type]
                pending.clear()

        with progress("import") as bar:
            for number, m in read_records(stream):
                name = queue or m.queue
                if not name:
                    raise errors.BadData(f"line {number}: the record names no queue; use --queue")
                if name != target or len(pending) >= BATCH:
                    flush()
                    target = name
                pending.append(m)
                bar.advance()
            flush()
    if stream is not sys.stdin.buffer:
        stream.close()
    s.out.document({"imported": imported})


def register(app: typer.Typer) -> None:
    app.command()(export)
    app.command("import")(import_)


__all__ = ["register", "UsageError"]
