"""export and import: JSONL dumps of queues with every field, ids kept (README.md#command-reference)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Annotated, BinaryIO, Optional

import typer

from store import Message, errors

from .. import inputs, shorthands
from ..exits import UsageError
from ..messaging import BATCH
from .message import BodyHasOpt, LabelIsOpt, NewerOpt, OlderOpt, PropIsOpt, WhereOpt
from ..options import Session, shared_options
from ..outfile import regular_or_new, written_whole
from ..render import OutputClosed, json_line, progress, writing_to
from ..signals import deferred
from ..spool import spooled


@shared_options
def export(
    s: Session,
    queues: Annotated[Optional[list[str]], typer.Argument(help="Queues to export (default: all).", show_default=False)] = None,
    to: Annotated[Optional[Path], typer.Option("--to", help="Write to this file instead of stdout.")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", metavar="jsonl|parquet",
        help="jsonl (default), or parquet: the analyze pipeline's message table (needs --to and "
             "`pip install 'mqcli[spark]'`).")] = "jsonl",
    where: WhereOpt = None, label: LabelIsOpt = None, prop: PropIsOpt = None, older_than: OlderOpt = None, newer_than: NewerOpt = None,
    body_contains: BodyHasOpt = None,
) -> None:
    """Dump queues as JSONL, one message a line with every field (any state), in queue order.

    With --format parquet the dump is one Parquet file with the columns of the `mqstore` Spark
    source (`mqcli analyze --parquet` reads it).

    \b
    Examples:
      mqcli export orders --to orders.jsonl
      mqcli export | gzip > qm1.jsonl.gz
      mqcli export --format parquet --to qm1.parquet
      mqcli export orders --where "props.region = 'eu'" --to eu.jsonl
    """
    where = shorthands.selector(locals())
    if fmt not in ("jsonl", "parquet"):
        raise UsageError(f"--format must be jsonl or parquet, got {fmt!r}")
    if fmt == "parquet" and where is not None:
        raise UsageError("--where (and its shorthands) goes with the JSONL export (the Parquet table is for analysis: filter it there)")
    if fmt == "parquet":
        _export_parquet(s, queues, to)
        return
    # reads do not write: the store is exported as it is, expired and lapsed messages included
    with s.open(reading=True) as st, st.as_is(), writing_to(None if to is None else str(to)):
        if to is None:
            count = _write_jsonl(st, queues, sys.stdout.buffer, where)
        else:
            with written_whole(to) as path, open(path, "wb") as sink:
                count = _write_jsonl(st, queues, sink, where)
    s.out.note(f"exported {count} messages" + (f" to {to}" if to else ""))


DEFINITION = "queue_definition"  # the key of a queue's definition record in a JSONL dump
_DEFINED = ("label", "quota", "transactional", "journal", "max_backouts")


def _write_jsonl(st, queues: Optional[list[str]], sink, where: Optional[str] = None) -> int:
    """One moment of the store (Store.view: each message once, where it was, also while moves
    run), written through a spool so that a slow reader of the output does not hold the view."""
    count = 0
    try:
        # the depths (an upper bound: messages awaiting a confirm or a commit are left out), read
        # when a bar is drawn; the bar ends after the view, the spool after both: neither a
        # slow reader of the output nor a terminal that stopped scrolling (Ctrl-S) holds the view
        with spooled(sink) as out, progress("export", total=lambda: _depth(st, queues)) as bar, st.view() as v:
            for q in v.queues(queues):
                # a queue's definition goes first, so that an import makes the queue as it was
                # (a restored queue without its max-backouts would cycle its poison messages);
                # system, journal and outgoing queues are made by the importing store itself
                if not q.system and q.outgoing is None and not q.name.casefold().endswith(";journal"):
                    definition = {"name": q.name, **{k: getattr(q, k) for k in _DEFINED}}
                    out.write(json_line({DEFINITION: definition}) + b"\n")
                for m in v.messages(q, where=where):
                    out.write(json_line(m.to_dict()) + b"\n")
                    count += 1
                    bar.advance()
    except BrokenPipeError:  # `mqcli export q | head`: exit 141, as for get
        raise OutputClosed() from None
    return count


def _export_parquet(s: Session, queues: Optional[list[str]], to: Optional[Path]) -> None:
    from store.analytics import require

    if to is None:
        raise UsageError("--format parquet writes a file: give --to FILE.parquet")
    if not regular_or_new(to):  # a FIFO or device: Parquet's footer is written after a seek back
        raise UsageError(f"--format parquet writes a regular file, and {to} is not one")
    require(("pyarrow",), "export --format parquet")
    from store.analytics.parquet import write_messages

    with s.open(reading=True) as st, progress("export", total=lambda: _depth(st, queues)) as bar, writing_to(str(to)), \
            written_whole(to) as path:
        count = write_messages(st, queues, path, bar.advance)
    s.out.note(f"exported {count} messages to {to}")


def _depth(st, queues: Optional[list[str]]) -> int:
    with st.view() as v:
        return sum(q.depth for q in v.queues(queues))


@shared_options
def import_(
    s: Session,
    source: Annotated[str, typer.Argument(metavar="FILE|-", help="JSONL file, or - for stdin.", show_default=False)],
    queue: Annotated[Optional[str], typer.Option("--queue", help="Put every record on this queue instead of its own.")] = None,
    new_ids: Annotated[bool, typer.Option("--new-ids", help="Store each record as a copy with a new msg_id and put time, "
                                                          "instead of skipping those already stored.")] = False,
) -> None:
    """Load a JSONL dump: every record back on its queue (created if missing), ids kept.

    A msg_id is unique within a store: a record whose msg_id is stored already (or came
    earlier in the input) is skipped and counted, so importing a dump again changes nothing;
    --new-ids stores copies instead. A record of a put still awaiting its confirm (an older
    mqcli's export held them) is no message: left out and counted (`unconfirmed`). A file is validated whole first, so a bad line (exit 12,
    naming the line) stores nothing; from stdin, each batch of 1,000 is all or nothing.

    \b
    Examples:
      mqcli --store /tmp/qm2 import orders.jsonl
      mqcli export orders | mqcli --store /tmp/qm2 import -
      mqcli import orders.jsonl --queue replay --new-ids
    """
    imported = skipped = expired = unconfirmed = 0
    # a put time far ahead of the clock is refused (records.check_put_time); --new-ids replaces it
    put_times = None if new_ids else inputs.put_time_check()
    with inputs.opened(source) as stream, s.open() as st:
        limit = inputs.record_line_limit(st.info().max_message_size)
        records: Iterable[tuple[int, Message | dict]] = _records(stream, limit, put_times=put_times)
        position = None
        if stream.seekable():  # validation pass: nothing is stored if a line is bad
            whole = inputs.WholeFile(stream, lambda first, end: _targeted(stream, limit, queue, first, end, put_times))
            with inputs.reading_progress("import: check", stream) as checked:
                whole.check(checked)
            records, position = whole, whole.position
        known = {q.name.casefold() for q in st.list_queues()}
        pending: list[Message] = []
        target: str | None = None

        def flush() -> None:
            nonlocal imported, skipped, expired, unconfirmed
            if pending:
                assert target is not None  # set with the first pending record
                with deferred():  # a batch that commits is counted
                    done = st.import_messages(target, pending, create=True, new_ids=new_ids)
                    imported += len(done)
                    skipped += len(done.skipped)
                    expired += len(done.expired)
                    unconfirmed += len(done.unconfirmed)
                if target.casefold() not in known:
                    known.add(target.casefold())
                    s.out.note(f"created queue {target!r}")
                step(len(pending))
                pending.clear()

        try:
            with inputs.reading_progress("import", stream, position) as step:
                for number, m in records:
                    if not isinstance(m, Message):
                        if queue is None:  # with --queue the records' own queues are not made
                            flush()
                            _define(st, s, number, m, known)
                        continue
                    name = _target(number, m, queue)
                    if name != target or len(pending) >= BATCH:
                        flush()
                        target = name
                    pending.append(m)
                flush()
        except KeyboardInterrupt:
            # the batches that committed stay imported: say how many, then exit 130
            s.out.document({**_counts(s, imported, skipped, expired, unconfirmed), "interrupted": True})
            raise
    s.out.document(_counts(s, imported, skipped, expired, unconfirmed))


def _counts(s: Session, imported: int, skipped: int, expired: int, unconfirmed: int) -> dict[str, int]:
    """An import's summary; `expired` only when some were (their time to be received had
    passed: dead-lettered, as expiry would have), `unconfirmed` only when some were (puts
    awaiting their confirm in an older mqcli's export: not messages, not stored)."""
    counts = {"imported": imported, "skipped": skipped}
    if expired:
        s.out.note(f"{expired} record{'s' if expired != 1 else ''} had expired: dead-lettered with the reason "
                   "'expired' (dropped if sent without dead-lettering), as expiry would have in their old place")
        counts["expired"] = expired
    if unconfirmed:
        many = unconfirmed != 1
        s.out.note(f"{unconfirmed} record{'s were puts' if many else ' was a put'} awaiting {'their' if many else 'its'} "
                   f"confirm when exported (an older mqcli exported them): not {'messages' if many else 'a message'}, "
                   f"not imported")
        counts["unconfirmed"] = unconfirmed
    return counts


def _records(stream: BinaryIO, limit: int, first: int = 1, end: int | None = None,
             put_times: Callable[[int], None] | None = None) -> Iterator[tuple[int, Message | dict]]:
    """(line number, message or queue definition) for each line of a dump (from line `first`
    on, up to `end`: inputs.jsonl_lines; `put_times`: inputs.read_records);
    a dump written before definitions were exported has messages only, and imports as it always did."""
    return inputs.read_records(stream, limit, other=_definition_of, first=first, end=end, put_times=put_times)


def _targeted(stream: BinaryIO, limit: int, queue: str | None, first: int,
              end: int | None, put_times: Callable[[int], None] | None) -> Iterator[tuple[int, Message | dict]]:
    """The records of a dump from line `first` on (up to `end`), each message's target queue checked."""
    for number, m in _records(stream, limit, first, end, put_times):
        if isinstance(m, Message):
            _target(number, m, queue)
        yield number, m


def _definition_of(number: int, record: object) -> dict | None:
    if isinstance(record, dict) and DEFINITION in record:
        return _definition(number, record)
    return None


def _definition(number: int, record: object) -> dict:
    definition = record.get(DEFINITION) if isinstance(record, dict) and len(record) == 1 else None
    if not isinstance(definition, dict) or not isinstance(definition.get("name"), str):
        raise errors.BadData(f"line {number}: a {DEFINITION} record is {{\"{DEFINITION}\": {{\"name\": ..., ...}}}}")
    unknown = set(definition) - {"name", *_DEFINED}
    if unknown:
        raise errors.BadData(f"line {number}: {DEFINITION} has an unknown field {sorted(unknown)[0]!r}")
    kinds = {"label": str, "quota": int, "transactional": bool, "journal": bool, "max_backouts": int}
    for key, kind in kinds.items():
        if key in definition and type(definition[key]) is not kind:
            raise errors.BadData(f"line {number}: {DEFINITION} field {key!r} has the wrong type: {definition[key]!r}")
    return definition


def _define(st, s: Session, number: int, definition: dict, known: set[str]) -> None:
    """Make a missing queue from its definition; leave an existing one as it is, and say so."""
    name = definition["name"]
    attrs = {k: v for k, v in definition.items() if k != "name"}
    try:
        st.create_queue(name, **attrs)
    except errors.QueueExists:
        s.out.note(f"queue {name!r} exists: left as it is (its definition in the dump is not applied)")
        return
    except errors.InvalidArgument as exc:
        raise errors.BadData(f"line {number}: {exc.message}") from None
    known.add(name.casefold())
    s.out.note(f"created queue {name!r} from its definition")


def _target(number: int, m: Message, queue: Optional[str]) -> str:
    """The queue a record goes to: --queue, else the record's own, which must be a valid name
    (the file's fault, so bad data naming the line, not a usage error)."""
    from store.addressing import check_import_name

    if queue:
        return queue
    if not m.queue:
        raise errors.BadData(f"line {number}: the record names no queue; use --queue")
    try:
        return check_import_name(m.queue)
    except (errors.BadData, errors.InvalidArgument) as exc:
        raise errors.BadData(f"line {number}: {exc.message}") from None


def register(app: typer.Typer) -> None:
    app.command()(export)
    app.command("import")(import_)


__all__ = ["register", "UsageError"]
