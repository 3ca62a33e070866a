"""Messages: put, get, browse, unlock, confirm, undo, delete, move, inflight (docs/design.md#states)."""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ContextManager, Optional, TypedDict

import typer

from store import errors
from store.records import Message

if TYPE_CHECKING:
    from store import NewMessage, Store

from .. import inputs, values
from ..durations import parse_duration
from ..exits import UsageError
from ..options import AUTO, NewConfirmOpt, NewLockOpt, Session, shared_options
from ..render import Output, age, counting, iso, progress
from ..signals import Terminated, WritingGate, deferred
from ..template import Template, TemplateError, compile_template

BATCH = 1000

QueueArg = Annotated[str, typer.Argument(help="Queue name or format name.", show_default=False)]
MsgIdOpt = Annotated[Optional[str], typer.Option("--msg-id", help="Only the message with this msg_id.")]
UniqueOpt = Annotated[Optional[str], typer.Option("--unique-id", callback=values.unique_id, help="Only the message with this MQe unique id (<guid>:<put time µs>).")]
CorrelOpt = Annotated[Optional[str], typer.Option("--correl-id", help="Only messages with this correlation id.")]
LookupOpt = Annotated[Optional[str], typer.Option("--lookup-id", help="Only the message with this lookup id (decimal or 0x hex).")]
PriorityOpt = Annotated[Optional[int], typer.Option("--priority", min=0, max=7, help="Only messages of this priority (0-7).")]


class _Filters(TypedDict):
    """The options that choose messages, as browse, browse_lock and move take them."""
    msg_id: Optional[str]
    unique_id: Optional[str]
    correl_id: Optional[str]
    lookup_id: Optional[int]
    priority: Optional[int]
    where: Optional[str]


def _selector(text: Optional[str]) -> Optional[str]:
    """A --where selector is checked as the command line is read (exit 2, naming the column)."""
    if text is not None:
        from store.selectors import SelectorError, compile_selector  # only a --where loads the parser

        try:
            compile_selector(text)
        except SelectorError as exc:
            raise typer.BadParameter(str(exc).removeprefix("--where: ")) from None
    return text


WhereOpt = Annotated[Optional[str], typer.Option(
    "--where", metavar="SELECTOR", callback=_selector,
    help="Only messages the selector selects: SQL92 conditions on header fields and props.NAME, "
         "e.g. \"priority > 4 AND props.region = 'eu'\" or \"age > 10m AND label LIKE 'inv%'\" "
         "(README: Selectors).")]
def _template(text: Optional[str]) -> Optional[Template]:
    """A --format template is compiled as the command line is read: an unknown placeholder is
    exit 2 naming it, before any message is taken."""
    if text is None:
        return None
    try:
        return compile_template(text)
    except TemplateError as exc:
        raise typer.BadParameter(str(exc)) from None


FormatOpt = Annotated[Optional[str], typer.Option(
    "--format", metavar="TEMPLATE", callback=_template,
    help="Write each message as TEMPLATE fills it (kcat -f): {msg_id} {priority} {label} {correl_id} "
         "{put_time} {size} {backouts} {props.NAME} {body} {body_hex} (and {queue} {state} {expires} "
         "{app_specific} {hops} {lookup_id} {unique_id} {dead_letter_reason} {original_queue}), "
         "{{ and }} for braces, escapes \\n \\t \\0 \\\\. Bodies are written as their bytes.")]


def _formatted(s: Session, template: Optional[Template]) -> None:
    """--format takes the place of -o: the two do not go together."""
    if template is not None:
        if s.out.mode != "text":
            raise UsageError(f"--format writes each message as its template says; drop -o {s.out.mode}")
        s.out.template = template


ConfirmOpt = Annotated[Optional[int], typer.Option("--confirm-id", callback=values.positive_id, help="Confirm id (a positive 63-bit integer you choose).")]
LockOpt = Annotated[Optional[int], typer.Option("--lock-id", callback=values.positive_id, help="Lock id of a browse with lock.")]
LeaseOpt = Annotated[Optional[str], typer.Option("--lease", help="Undo automatically if not confirmed within this time, e.g. 30s.")]
TxOpt = Annotated[Optional[int], typer.Option("--tx", metavar="TX", callback=values.positive_id, help="Inside this transaction (from `mqcli tx begin`): held tx-locked until `mqcli tx commit`.")]
FollowOpt = Annotated[bool, typer.Option("--follow", "-f", help="Follow the queue: messages as they become available, until --count, --idle or Ctrl-C (exit 0).")]
IdleOpt = Annotated[Optional[str], typer.Option("--idle", metavar="DURATION", help="With --follow: stop (exit 0) after this long without a message, e.g. 30s.")]


def _lookup(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        raise UsageError(f"invalid lookup id {text!r}: give a decimal or 0x hex number") from None


def _seconds(text: Optional[str], what: str) -> Optional[float]:
    return None if text is None else parse_duration(text, allow_forever=False, what=what)


# ---- put --------------------------------------------------------------------------------

def _put_stream(st: Store, out: Output, queue: str, items: Iterator[list[Message] | list[NewMessage]],
                keep_ids: bool, confirm_id: Optional[int | str], lease: Optional[float],
                tx: Optional[int] = None, new_ids: bool = False, *,
                tracking: ContextManager[Callable[[int], None]]) -> int:
    """Put the batches of `items`; `tracking` is the progress bar, told of each batch."""
    total = skipped = 0
    extend = False  # the later batches add to the confirm id the first one took
    try:
        with tracking as step, out.messages() if out.mode in ("json", "jsonl") else _ids(out) as stream:
            for batch in items:
                with deferred():  # what is committed is printed: Ctrl-C waits for the ids
                    done: list[Message]
                    if keep_ids:
                        done, n_skipped = _store_records(st, queue, batch, new_ids)  # type: ignore[arg-type]
                        skipped += n_skipped
                    else:
                        done = st.put_many(queue, batch, confirm_id=confirm_id, lease=lease, tx=tx,  # type: ignore[arg-type]
                                           extend=extend)
                    stream.extend(done)
                if confirm_id is not None and not extend and done:
                    if confirm_id == AUTO:
                        _note_id(out, "confirm id", done[0].confirm_id)
                    confirm_id, extend = done[0].confirm_id, True
                total += len(done)
                step(len(batch))
    finally:  # also when interrupted: the ids printed are not all the records read
        if skipped:
            out.note(f"skipped {skipped} already stored (their msg_ids are in the store; --new-ids stores copies)")
    return total


def _store_records(st: Store, queue: str, batch: list[Message | NewMessage], new_ids: bool) -> tuple[list[Message], int]:
    """A batch of `put --jsonl` records in input order: each run of replayed records (with
    msg_id) imported keeping its ids, each run of new messages put; (stored, skipped)."""
    done: list[Message] = []
    skipped = 0
    at = 0
    while at < len(batch):
        replay = isinstance(batch[at], Message)
        end = at
        while end < len(batch) and isinstance(batch[end], Message) == replay:
            end += 1
        run = batch[at:end]
        if replay:
            imported = st.import_messages(queue, run, new_ids=new_ids)  # type: ignore[arg-type]
            skipped += len(imported.skipped)
            done += imported
        else:
            done += st.put_many(queue, run)  # type: ignore[arg-type]
        at = end
    return done, skipped


def _note_id(out: Output, what: str, ident: Optional[int]) -> None:
    """Say the id `auto` drew, on stderr, for the user to copy (with -o json|jsonl the records
    carry it; -q silences it)."""
    if out.mode not in ("json", "jsonl"):
        out.note(f"{what}: {ident}")


class _ids:
    """What a put prints in text mode: each new msg_id."""

    def __init__(self, out: Output) -> None:
        self.out = out

    def __enter__(self) -> _ids:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def extend(self, messages: list[Message]) -> None:
        self.out._write("".join(m.msg_id + "\n" for m in messages).encode("utf-8"))


def _printable_label(value: str) -> str:
    """A label typed on the command line is shown on one line: no control characters. (The
    store itself keeps any label: a trace report's ends in NUL, and imports keep theirs.)"""
    from store.arguments import control_character

    c = control_character(value or "")
    if c is not None:
        raise typer.BadParameter(f"the label {value!r:.80} holds the control character {c!r}; "
                                 f"use printable characters only")
    return value


@shared_options
def put(
    s: Session,
    queue: QueueArg,
    body: Annotated[Optional[str], typer.Argument(help="Message body; - reads it from stdin.", show_default=False)] = None,
    file: Annotated[Optional[Path], typer.Option("--file", "-f", help="Read the body from this file.")] = None,
    priority: Annotated[int, typer.Option("--priority", "-p", min=0, max=7, help="0-7, higher first.")] = 3,
    correl_id: Annotated[Optional[str], typer.Option("--correl-id", help="Correlation id (indexed).")] = None,
    label: Annotated[str, typer.Option("--label", callback=_printable_label, help="Label, up to 250 characters.")] = "",
    prop: Annotated[Optional[list[str]], typer.Option("--prop", help="User property K=V (repeatable).")] = None,
    app_specific: Annotated[int, typer.Option("--app-specific", callback=values.in_range(-(1 << 31), (1 << 31) - 1, "a signed 32-bit integer"), help="32-bit application value.")] = 0,
    ttl: Annotated[Optional[str], typer.Option("--ttl", help="Time to be received, e.g. 5m; then dead-lettered.")] = None,
    express: Annotated[bool, typer.Option("--express", help="Commit without the second flush (may be lost on an OS crash).")] = False,
    no_dead_letter: Annotated[bool, typer.Option("--no-dead-letter", help="Drop instead of dead-lettering on expiry.")] = False,
    trace: Annotated[bool, typer.Option("--trace", help="Request trace reports (needs --report-queue).")] = False,
    report_queue: Annotated[Optional[str], typer.Option("--report-queue", help="Where trace reports go.")] = None,
    confirm_id: NewConfirmOpt = None,
    lease: LeaseOpt = None,
    tx: TxOpt = None,
    count: Annotated[int, typer.Option("--count", "-n", min=1, help="Put the body this many times.")] = 1,
    jsonl: Annotated[Optional[str], typer.Option("--jsonl", metavar="FILE|-", help="Put the records of a JSONL file (or -): your own, any of body|body_b64 priority label correl_id props ttl|expires app_specific express, or as `get -o jsonl` prints them, keeping their msg_ids (one stored already is skipped). A file is checked whole first: a bad line stores nothing of it (exit 12); from a pipe, nothing of the bad line's batch of 1,000.")] = None,
    new_ids: Annotated[bool, typer.Option("--new-ids", help="With --jsonl: store each record as a copy with a new msg_id and put time.")] = False,
    lines: Annotated[Optional[str], typer.Option("--lines", metavar="FILE|-", help="Put one message per line of a file (or -).")] = None,
) -> None:
    """Put a message (or many) on a queue; prints each new msg_id.

    --jsonl reads one JSON object a line: a new message takes any of body (or body_b64),
    priority, label, correl_id, props, ttl (a duration) or expires, app_specific, express; a
    record with a msg_id (as `get -o jsonl` prints it) keeps it, and as a msg_id is unique
    within a store, one stored already is skipped (not printed, counted on stderr); --new-ids
    makes copies. An unknown field or a wrong type is exit 12 naming the line and the field: a
    file is checked whole first, so nothing of it is stored; a pipe is stored as it comes, in
    batches of 1,000 that are each all or nothing.

    \b
    Examples:
      mqcli put orders 'hello' --priority 5 --correl-id order-17
      mqcli put orders - < payload.bin
      mqcli put orders --lines events.txt
      echo '{"body": "x", "priority": 5, "props": {"region": "eu"}, "ttl": "10m"}' | mqcli put orders --jsonl -
      mqcli get old -o jsonl --all | mqcli put new --jsonl -
      mqcli put orders 'hello' --tx "$(mqcli tx begin)"
    """
    props = {}
    for item in prop or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--prop wants K=V, got {item!r}")
        props[key] = value
    if trace and not report_queue:
        raise UsageError("--trace needs --report-queue")
    if sum(x is not None for x in (jsonl, lines)) > 1:
        raise UsageError("give one of --jsonl and --lines")
    if (jsonl or lines) and (body is not None or file is not None):
        raise UsageError(f"--{'jsonl' if jsonl else 'lines'} takes the bodies from its input; drop the BODY/--file")
    if jsonl is not None and tx is not None:
        # --jsonl keeps the records' ids (import_messages), which has no transaction
        raise UsageError("--jsonl cannot be used with --tx; use --lines, or put the records first and move them")
    if jsonl is not None and (confirm_id is not None or lease is not None):
        raise UsageError("--jsonl puts the records as they are; --confirm-id and --lease do not go with it")
    if new_ids and jsonl is None:
        raise UsageError("--new-ids goes with --jsonl (every other put makes new ids)")
    if lease is not None and confirm_id is None:
        raise UsageError("--lease goes with --confirm-id (how long the put may stay unconfirmed)")
    from store import NewMessage  # the engine loads with the store, not for `put --help`

    new = functools.partial(NewMessage, priority=priority, correl_id=correl_id, label=label, props=props or None,
                            app_specific=app_specific, ttl=_seconds(ttl, "ttl"), express=express,
                            dead_letter=not no_dead_letter, trace=trace, report_queue=report_queue)
    lease_s = _seconds(lease, "lease")

    with s.open() as st:
        if jsonl is not None:
            with inputs.opened(jsonl) as stream:
                max_size = st.info().max_message_size
                limit = inputs.record_line_limit(max_size)
                records = (m for _, m in inputs.put_records(stream, limit, max_size))
                batches: Iterator[list] = (list(b) for b in _chunks(records, BATCH))
                _put_stream(st, s.out, queue, batches, True, None, None, new_ids=new_ids,
                            tracking=inputs.reading_progress(f"put {queue}", stream))
        elif lines is not None:
            with inputs.opened(lines) as stream:
                bodies = inputs.body_lines(stream, st.info().max_message_size)
                _put_stream(st, s.out, queue, ([new(b) for b in chunk]
                                               for chunk in _chunks(bodies, BATCH)),
                            False, confirm_id, lease_s, tx, tracking=inputs.reading_progress(f"put {queue}", stream))
        elif count == 1 and confirm_id is None:
            message = new(inputs.message_body(body, file, lambda: st.info().max_message_size))
            with deferred():
                s.out.msg_ids(st.put_many(queue, [message], lease=lease_s, tx=tx))
        else:
            data = inputs.message_body(body, file, lambda: st.info().max_message_size)
            _put_stream(st, s.out, queue,
                        ([new(data) for _ in range(n)] for n in _sizes(count, BATCH)),
                        False, confirm_id, lease_s, tx, tracking=counting(f"put {queue}", count))


def _chunks(items: Iterator, size: int) -> Iterator[list]:
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _sizes(total: int, size: int) -> Iterator[int]:
    while total > 0:
        yield min(total, size)
        total -= size


_SELECTING = ("msg_id", "unique_id", "correl_id", "lookup_id", "priority", "where", "lock_id")


def _to_take(st: Store, queue: str, count: Optional[int], filters: Mapping[str, Any]) -> Callable[[], Optional[int]]:
    """How many messages a get or move of `queue` will take, for its progress bar (asked only
    when one is drawn): its available messages (from the counters), at most `count`; with a
    filter, only `count` is known."""
    def known() -> Optional[int]:
        if any(filters.get(k) is not None for k in _SELECTING):
            return count
        available = st.queue_stats(queue).by_state["available"]
        return available if count is None else min(count, available)
    return known


# ---- get and browse ---------------------------------------------------------------------

@shared_options(delimiter=True)
def get(
    s: Session,
    queue: QueueArg,
    wait: Annotated[str, typer.Option("--wait", "-w", help="How long to wait for a message: 0, 250ms, 30s, 5m, 2h, forever.")] = "0",
    msg_id: MsgIdOpt = None, unique_id: UniqueOpt = None, correl_id: CorrelOpt = None,
    lookup_id: LookupOpt = None, priority: PriorityOpt = None, where: WhereOpt = None,
    count: Annotated[Optional[int], typer.Option("--count", "-n", min=1, help="Get up to N messages.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Get every available message.")] = False,
    confirm_id: NewConfirmOpt = None, lock_id: LockOpt = None, lease: LeaseOpt = None,
    tx: TxOpt = None,
    follow: FollowOpt = False, idle: IdleOpt = None, template: FormatOpt = None,
) -> None:
    """Get (destructively) the next message; with --confirm-id, a two-phase get.

    The messages are held by this process while they are written to stdout, with no lock on
    the store, and removed once written whole: a killed get may show a message again, never
    lose one. Exit 3 when there is none within --wait. With --tx the
    message is tx-locked and removed when the transaction commits (back on abort).

    \b
    Examples:
      mqcli get orders --wait 30s
      mqcli get orders --confirm-id 42 --lease 1m -o json && mqcli confirm orders --confirm-id 42
      C=$(mqcli get orders --confirm-id auto -o json | jq .confirm_id) && mqcli confirm orders --confirm-id "$C"
      mqcli get orders --all -o jsonl > drained.jsonl
      mqcli get orders --all --where "props.region = 'eu' AND age > 10m" -o jsonl
      mqcli get orders --tx "$T" -o json > order.json
      mqcli get orders --unique-id "$(mqcli browse orders -n 1 -o json | jq -r '.[0].unique_id')"
      mqcli get orders --follow --where "props.region = 'eu'" -o jsonl
      mqcli get orders --follow --count 100 --idle 30s -o body
      mqcli get orders --all -o hex
      mqcli get orders --all --format '{msg_id}\\t{props.region}\\t{body}\\n'
    """
    _formatted(s, template)  # type: ignore[arg-type]
    if follow:
        return _get_follow(s, queue, where=where, count=count, idle=idle, all_=all_, wait=wait,
                           others=(msg_id, unique_id, correl_id, lookup_id, priority, confirm_id, lock_id, lease, tx))
    if idle is not None:
        raise UsageError("--idle goes with --follow")
    if count is not None and all_:
        raise UsageError("give --count or --all, not both")
    if lease is not None and confirm_id is None:
        raise UsageError("--lease goes with --confirm-id (how long the get may stay unconfirmed)")
    seconds = parse_duration(wait, what="wait")
    filters = dict(msg_id=msg_id, unique_id=unique_id, correl_id=correl_id, lookup_id=_lookup(lookup_id),
                   priority=priority, where=where, confirm_id=confirm_id, lock_id=lock_id,
                   lease=_seconds(lease, "lease"), tx=tx)
    with s.open() as st:
        if count is None and not all_:
            m = _delivered(st.get, queue, wait=seconds, deliver=lambda got: s.out.message(got[0]), **filters)
            if confirm_id == AUTO:
                _note_id(s.out, "confirm id", m.confirm_id)
            return
        left = count
        empty: Optional[errors.Timeout] = None
        with progress(f"get {queue}", total=_to_take(st, queue, count, filters)) as bar, s.out.messages() as stream:
            if all(v is None for k, v in filters.items() if k != "priority"):
                # the plain bulk get: each batch's removal shares a commit with the next hold
                def deliver(found: list[Message]) -> None:
                    stream.extend(found)
                    bar.advance(len(found))

                try:
                    _delivered(st.get_batches, queue, deliver=deliver, limit=count, batch=BATCH,
                               wait=seconds, priority=priority)
                except errors.Timeout as exc:
                    empty = exc  # still exit 3, after the stream ends: `-o json` prints []
                left = 0
            while left is None or left > 0:
                try:
                    got = _delivered(st.get_many, queue, BATCH if left is None else min(left, BATCH),
                                     wait=seconds if stream.count == 0 else 0, deliver=stream.extend, **filters)
                except errors.Timeout as exc:
                    if stream.count == 0:
                        empty = exc  # still exit 3, after the stream ends: `-o json` prints []
                    break  # the queue has no more: what was got is the result
                except errors.UnknownLockId:
                    if stream.count == 0:
                        raise
                    break  # the lock has no more: what was got is the result
                if confirm_id is not None and "extend" not in filters:
                    if confirm_id == AUTO:
                        _note_id(s.out, "confirm id", got[0].confirm_id)
                    # the later batches add to the id the first one took (one holder: this get)
                    filters.update(confirm_id=got[0].confirm_id, extend=True)
                bar.advance(len(got))
                if left is not None:
                    left -= len(got)
                if msg_id is not None or unique_id is not None or lookup_id is not None:
                    break  # an exact id names one message
        if empty is not None:
            raise empty


def _get_follow(s: Session, queue: str, *, where: Optional[str], count: Optional[int],
                idle: Optional[str], all_: bool, wait: str, others: tuple) -> None:
    """get --follow: take messages as they come, each batch written with no write transaction
    open (the held delivery of get_many), until --count, --idle or Ctrl-C (exit 0)."""
    if all_ or wait != "0" or any(v is not None for v in others):
        raise UsageError("--follow goes with --where, --count and --idle only")
    seconds = None if idle is None else parse_duration(idle, allow_forever=False, what="idle")
    left = count
    with s.open() as st, s.out.messages() as stream:
        try:
            while left is None or left > 0:
                try:  # sleeps on the store's wake-up while the queue has nothing for it
                    got = _delivered(st.get_many, queue, BATCH if left is None else min(left, BATCH),
                                     wait=seconds, where=where, deliver=stream.extend)
                except errors.Timeout:
                    return  # --idle passed without a message: done
                if left is not None:
                    left -= len(got)
        except KeyboardInterrupt as exc:
            if isinstance(exc, Terminated):
                raise
            # Ctrl-C is how a follow ends: what was written was removed, the rest stays


def _browse_follow(st: Store, out: Output, queue: str, *, where: Optional[str], count: Optional[int],
                   idle: Optional[str], from_start: bool) -> None:
    """browse --follow: print messages as they become available, until --count, --idle or
    Ctrl-C (exit 0); each batch is printed with no transaction open."""
    seconds = None if idle is None else parse_duration(idle, allow_forever=False, what="idle")
    left = count
    batches = st.follow(queue, where=where, from_start=from_start, idle=seconds)
    with out.messages() as stream:
        try:
            for found in batches:
                if left is not None:
                    found = found[:left]
                    left -= len(found)
                stream.extend(found)
                if left is not None and left <= 0:
                    break
        except KeyboardInterrupt as exc:
            if isinstance(exc, Terminated):
                raise
        finally:
            batches.close()


def _delivered(get, *args, deliver, **kw):
    """`get(*args, deliver=...)`, the store calling `deliver` with each batch with no write
    transaction open. Ctrl-C and SIGTERM act at once while the get waits; once output has
    started they stop it after the batch being written (or interrupt a write stalled for
    long, see WritingGate), and wait while the get commits the removal of what was written."""
    gate = WritingGate()

    def deliver_held(found: list[Message]) -> None:
        gate.start_writing()
        try:
            deliver(found)
        finally:
            gate.stop_writing()

    try:
        return get(*args, deliver=deliver_held, **kw)
    finally:
        gate.release()


@shared_options(delimiter=True)
def browse(
    s: Session,
    queue: QueueArg,
    msg_id: MsgIdOpt = None, unique_id: UniqueOpt = None, correl_id: CorrelOpt = None,
    lookup_id: LookupOpt = None, priority: PriorityOpt = None, where: WhereOpt = None,
    limit: Annotated[Optional[int], typer.Option("--limit", "--count", "-n", min=1, help="At most N messages (with --follow: stop after N).")] = None,
    state: Annotated[Optional[list[str]], typer.Option("--state", metavar="put-unconfirmed|available|locked-browse|get-unconfirmed|browse-get-unconfirmed|tx-locked|all", help="Show messages in this state (repeatable). Default: available.")] = None,
    lock: Annotated[bool, typer.Option("--lock", help="Browse with lock: lock each match and print the lock id.")] = False,
    lock_id: NewLockOpt = None, lease: LeaseOpt = None,
    follow: FollowOpt = False, idle: IdleOpt = None,
    from_start: Annotated[bool, typer.Option("--from-start", help="With --follow: first the messages available now, then the new ones.")] = False,
    template: FormatOpt = None,
) -> None:
    """Show messages in queue order without taking them; --lock locks them (MQe browseWithLock).

    With --follow, keep showing messages as they become available (new puts, and messages
    undone or unlocked back to the queue), without taking them, until --count, --idle or
    Ctrl-C (exit 0): from now, or --from-start.

    \b
    Examples:
      mqcli browse orders --limit 10
      mqcli browse orders --state all -o jsonl
      mqcli browse dead-letter --where "dead_letter_reason = 'max-backouts' AND original_queue = 'payments'"
      L=$(mqcli browse orders --lock --limit 5 --lease 1m) && mqcli get orders --lock-id "$L"
      mqcli browse orders --follow --where "priority > 4"
      mqcli browse orders --follow --from-start --idle 10s -o jsonl
      mqcli browse orders --msg-id "$ID" -o hex
      mqcli browse orders --format '{put_time} {priority} {label} {size}\\n'
      mqcli browse orders --format '{body_hex}\\n' --where "props.kind = 'bin'"
    """
    _formatted(s, template)  # type: ignore[arg-type]
    filters: _Filters = dict(msg_id=msg_id, unique_id=unique_id, correl_id=correl_id, lookup_id=_lookup(lookup_id),
                             priority=priority, where=where)
    if not lock and (lock_id is not None or lease is not None):
        raise UsageError("--lock-id and --lease go with --lock")
    if not follow and (idle is not None or from_start):
        raise UsageError("--idle and --from-start go with --follow")
    if follow and (lock or state or any(v is not None for k, v in filters.items() if k != "where")):
        raise UsageError("--follow goes with --where, --count, --idle and --from-start only")
    with s.open() as st:
        if follow:
            return _browse_follow(st, s.out, queue, where=where, count=limit, idle=idle, from_start=from_start)
        if lock:
            if state:
                raise UsageError("--state does not go with --lock (only available messages are locked)")
            lid, locked = st.browse_lock(queue, limit=limit, lock_id=lock_id,  # type: ignore[arg-type]  # int|AUTO
                                         lease=_seconds(lease, "lease"), **filters)
            if s.out.mode == "text":
                s.out.value(lid, "lock_id")  # the data a script needs; the messages go to stderr
                if not s.out.quiet:
                    note = Output("text", stdout=sys.stderr.buffer)
                    with note.messages() as stream:
                        stream.extend(locked)
            else:
                with s.out.messages() as stream:
                    stream.extend(locked)
            return
        states: str | list[str] | None = None
        if state:
            states = "all" if "all" in state else [x for part in state for x in part.split(",")]
        # read a page at a time (no read transaction open while output is written, nor every
        # message in memory); the output shows each as it comes
        with s.out.messages() as stream:
            for page in st.browse_pages(queue, limit=limit, states=states, **filters):
                stream.extend(page)


# ---- confirm, undo, unlock, delete ------------------------------------------------------

@shared_options
def confirm(s: Session, queue: QueueArg,
            confirm_id: Annotated[int, typer.Option("--confirm-id", callback=values.positive_id, help="The confirm id of the put or get.", show_default=False)]) -> None:
    """Confirm the put or get pending under a confirm id (MQe confirm).

    \b
    Example:
      mqcli confirm orders --confirm-id 42
    """
    with s.open() as st:
        n = st.confirm(queue, confirm_id)
    s.out.document({"queue": queue, "confirm_id": confirm_id, "confirmed": n})


@shared_options
def undo(
    s: Session, queue: Annotated[Optional[str], typer.Argument(help="Queue (optional with --all/--older-than).", show_default=False)] = None,
    confirm_id: ConfirmOpt = None, lock_id: LockOpt = None,
    older_than: Annotated[Optional[str], typer.Option("--older-than", help="Operators: undo every in-flight message older than this.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Operators: undo every in-flight message.")] = False,
) -> None:
    """Undo a pending put or get (--confirm-id) or a browse lock (--lock-id); operators can
    undo everything in flight (--all, --older-than).

    \b
    Examples:
      mqcli undo orders --confirm-id 42
      mqcli undo --older-than 10m
    """
    chosen = sum(x for x in (confirm_id is not None, lock_id is not None, older_than is not None, all_))
    if chosen != 1:
        raise UsageError("give exactly one of --confirm-id, --lock-id, --older-than and --all")
    if queue is None and (confirm_id is not None or lock_id is not None):
        raise UsageError("--confirm-id and --lock-id need the QUEUE")
    with s.open() as st:
        if confirm_id is not None or lock_id is not None:
            n = st.undo(queue, confirm_id=confirm_id, lock_id=lock_id)  # type: ignore[arg-type]  # QUEUE given
        else:
            n = st.undo_inflight(queue, older_than=_seconds(older_than, "age"))
    s.out.document({"queue": queue, "undone": n})


@shared_options
def unlock(s: Session, queue: QueueArg,
           lock_id: Annotated[int, typer.Option("--lock-id", callback=values.positive_id, help="Lock id printed by browse --lock.", show_default=False)]) -> None:
    """Unlock the messages of a browse with lock (MQe unlockMessage).

    \b
    Example:
      mqcli unlock orders --lock-id 8123001
    """
    with s.open() as st:
        n = st.unlock(queue, lock_id)
    s.out.document({"queue": queue, "lock_id": lock_id, "unlocked": n})


@shared_options
def delete(s: Session, queue: QueueArg,
           msg_id: Annotated[str, typer.Option("--msg-id", help="msg_id of the message to delete.", show_default=False)],
           lock_id: LockOpt = None) -> None:
    """Delete one message by msg_id (MQe deleteMessage); a locked one needs its --lock-id.

    \b
    Example:
      mqcli delete orders --msg-id '6f1c2d3e-...-9a0b\\17'
    """
    with s.open() as st:
        m = st.delete(queue, msg_id, lock_id=lock_id)
    s.out.document({"queue": queue, "msg_id": m.msg_id, "deleted": True})


# ---- move and inflight ------------------------------------------------------------------

@shared_options
def move(
    s: Session, source: QueueArg,
    target: Annotated[str, typer.Argument(help="Target queue.", show_default=False)],
    copy: Annotated[bool, typer.Option("--copy", help="Copy instead of moving (ids are kept).")] = False,
    msg_id: MsgIdOpt = None, unique_id: UniqueOpt = None, correl_id: CorrelOpt = None,
    lookup_id: LookupOpt = None, priority: PriorityOpt = None, where: WhereOpt = None,
    count: Annotated[Optional[int], typer.Option("--count", "-n", min=1, help="At most N messages.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would move, change nothing.")] = False,
    tx: TxOpt = None,
) -> None:
    """Move (or copy) available messages to another queue, atomically per batch of 1,000.

    With --tx (both queues transactional) nothing moves until the transaction commits.

    \b
    Examples:
      mqcli move dead-letter orders --correl-id order-17
      mqcli move orders orders.backup --copy
      mqcli move dead-letter orders --where "original_queue = 'orders' AND dead_letter_reason = 'expired'"
      mqcli move inbox work --count 10 --tx "$T"
    """
    filters: _Filters = dict(msg_id=msg_id, unique_id=unique_id, correl_id=correl_id, lookup_id=_lookup(lookup_id),
                             priority=priority, where=where)
    with s.open() as st:
        if dry_run:
            st.queue_info(target)
            n = len(st.browse(source, limit=count, **filters))
            s.out.document({"source": source, "target": target, "would_move": n, "dry_run": True})
            return
        moved = 0
        batches = st.move(source, target, count=count, copy=copy, tx=tx, **filters)
        try:
            with progress(f"{'copy' if copy else 'move'} {source} → {target}",
                          total=_to_take(st, source, count, filters)) as bar:
                while True:
                    with deferred():  # a batch that commits is counted
                        batch = next(batches, None)
                        if batch is None:
                            break
                        moved += len(batch)
                    bar.advance(len(batch))
        except KeyboardInterrupt:
            # the batches that committed stay moved: say how many (a rerun of --copy would
            # copy them again), then exit 130
            s.out.document({"source": source, "target": target, "copied" if copy else "moved": moved,
                            "interrupted": True})
            raise
    s.out.document({"source": source, "target": target, "copied" if copy else "moved": moved})


@shared_options
def inflight(s: Session,
             queue: Annotated[Optional[str], typer.Argument(help="Only this queue.", show_default=False)] = None) -> None:
    """Every locked, unconfirmed or transactional message: ids, state, age, lease left.

    \b
    Example:
      mqcli inflight orders
    """
    now = int(time.time() * 1_000_000)
    with s.open() as st:
        rows = [{
            "queue": m.queue, "msg_id": m.msg_id, "state": m.state, "confirm_id": m.confirm_id,
            "lock_id": m.lock_id, "tx": m.tx, "since": iso(m.since), "age": age(m.since, now),
            "age_s": None if m.since is None else round((now - m.since) / 1e6, 3),
            "lease_expires": iso(m.lease_expires),
            "lease_left": None if m.lease_expires is None else f"{max(0, m.lease_expires - now) / 1e6:.1f}s",
            "backouts": m.backouts,
        } for m in st.inflight(queue)]
    s.out.table(rows, [("queue", "queue"), ("msg_id", "msg_id"), ("state", "state"),
                       ("confirm_id", "confirm id"), ("lock_id", "lock id"), ("tx", "tx"), ("age", "age"),
                       ("lease_left", "lease left"), ("backouts", "backouts")])


def register(app: typer.Typer) -> None:
    for fn in (put, get, browse, unlock, confirm, undo, delete, move, inflight):
        app.command()(fn)
