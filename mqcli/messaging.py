"""What put, get and browse do, given their options parsed: the Typer commands of
mqcli/commands/message.py and the start-up path of mqcli/fastpath.py both call these, so a
command runs the same code whichever parsed it (docs/design.md#command-line). Nothing here
imports Typer or click."""

from __future__ import annotations

import functools
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager, Optional, TypedDict

from store import errors
from store.records import Message

if TYPE_CHECKING:
    from store import NewMessage, Store, Undone

    from .template import Template

from . import inputs, shorthands
from .durations import parse_duration
from .exits import UsageError
from .render import Output, OutputClosed, counting, progress
from .session import Session
from .shorthands import key_values
from .signals import Terminated, WritingGate, deferred
from .values import AUTO

BATCH = 1000


class Filters(TypedDict):
    """The options that choose messages, as browse, browse_lock and move take them."""
    msg_id: Optional[str]
    unique_id: Optional[str]
    correl_id: Optional[str]
    lookup_id: Optional[int]
    priority: Optional[int]
    where: Optional[str]



def _formatted(s: Session, template: Optional[Template]) -> None:
    """--format takes the place of -o: the two do not go together."""
    if template is not None:
        if s.out.mode != "text":
            raise UsageError(f"--format writes each message as its template says; drop -o {s.out.mode}")
        s.out.template = template



def parse_lookup(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        raise UsageError(f"invalid lookup id {text!r}: give a decimal or 0x hex number") from None


def optional_seconds(text: Optional[str], what: str) -> Optional[float]:
    return None if text is None else parse_duration(text, allow_forever=False, what=what)



# ---- put --------------------------------------------------------------------------------

def _put_stream(st: Store, out: Output, queue: str, items: Iterator[list[Message] | list[NewMessage]],
                keep_ids: bool, confirm_id: Optional[int | str], lease: Optional[float],
                tx: Optional[int] = None, new_ids: bool = False, *,
                tracking: ContextManager[Callable[[int], None]]) -> int:
    """Put the batches of `items`; `tracking` is the progress bar, told of each batch."""
    total = skipped = stored = 0
    pending: int | None = None  # the confirm id the messages are put under (two-phase)
    extend = False  # the later batches add to the confirm id the first one took
    try:
        with tracking as step, out.messages() if out.mode in ("json", "jsonl") else _ids(out) as stream:
            for batch in items:
                if stored and out.reader_gone():  # `| head -1` left: no batch more is stored whose ids no one sees
                    raise OutputClosed()
                with deferred() as gate:  # what is committed is printed: Ctrl-C waits for the ids
                    done: list[Message]
                    if keep_ids:
                        done, n_skipped = _store_records(st, queue, batch, new_ids)  # type: ignore[arg-type]
                        skipped += n_skipped
                    else:
                        done = st.put_many(queue, batch, confirm_id=confirm_id, lease=lease, tx=tx,  # type: ignore[arg-type]
                                           extend=extend)
                    stored += len(done)
                    pending = done[0].confirm_id if done and done[0].confirm_id is not None else pending
                    with gate.writing(_ids_stalled(out, stored)):
                        _announcing(out, confirm_id, stream.extend)(done)
                if confirm_id is not None and not extend and done:
                    confirm_id, extend = done[0].confirm_id, True
                total += len(done)
                step(len(batch))
    except (OutputClosed, errors.DiskFull):
        _ids_lost(out, stored, queue, pending)
        raise
    finally:  # also when interrupted: the ids printed are not all the records read
        if skipped:
            out.note(f"skipped {skipped} already stored (their msg_ids are in the store; --new-ids stores copies)")
    return total


def _ids_stalled(out: Output, stored: int) -> Callable[[], None]:
    """What a put says when the ids of its committed messages (`stored` so far in all) could
    not all be written (Deferral.writing)."""
    return lambda: out.note(f"{stored} message{'s' if stored != 1 else ''} stored; the output stalled, "
                            "so not all of their ids were written")


def _ids_lost(out: Output, stored: int, queue: str = "", pending: int | None = None) -> None:
    """What a put says when writing the ids of its `stored` messages failed (a closed or full
    stdout): they are stored all the same, and a script that retries on the exit code would
    store them again. Put under a confirm id (`pending`), they wait for it: the id is said,
    since with -o json only the records that could not be written held it."""
    if not stored:
        return
    what = "1 message stored" if stored == 1 else f"{stored} messages stored"
    if pending is not None:
        q = shlex.quote(queue)
        what += (f", put-unconfirmed under confirm id {pending} (`mqcli confirm {q} --confirm-id {pending}`, "
                 f"or `mqcli undo {q} --confirm-id {pending}`)")
    out.note(f"{what}; {'its id could not' if stored == 1 else 'not all of their ids could'} be written")


def _store_records(st: Store, queue: str, batch: list[Message | NewMessage],
                   new_ids: bool) -> tuple[list[Message], int]:
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
            # a put of a record that expired is refused (exit 9), as the put of a new one is;
            # an import (a dump restored) dead-letters it as expiry would have
            imported = st.import_messages(queue, run, new_ids=new_ids, refuse_expired=True)  # type: ignore[arg-type]
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


def _announcing(out: Output, confirm_id: Optional[int | str],
                write: Callable[[list[Message]], None]) -> Callable[[list[Message]], None]:
    """`write`, saying first the confirm id `auto` drew (the messages carry it): what is
    written whole stays pending under it even when the output is cut part way, so the id is
    known before the first message goes out."""
    if confirm_id != AUTO:
        return write

    def announced(messages: list[Message]) -> None:
        if messages:
            _note_id(out, "confirm id", messages[0].confirm_id)
        write(messages)
    return announced


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


def put(s: Session, queue: str, body: Optional[str] = None, file: Optional[Path] = None, priority: int = 3,
        correl_id: Optional[str] = None, label: str = "", prop: Optional[list[str]] = None, app_specific: int = 0,
        ttl: Optional[str] = None, express: bool = False, no_dead_letter: bool = False, trace: bool = False,
        report_queue: Optional[str] = None, confirm_id: Optional[int | str] = None, lease: Optional[str] = None,
        tx: Optional[int] = None, count: int = 1, jsonl: Optional[str] = None, new_ids: bool = False,
        lines: Optional[str] = None) -> None:
    """mqcli put (its help: mqcli/commands/message.py)."""
    props = key_values(prop)
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
                            app_specific=app_specific, ttl=optional_seconds(ttl, "ttl"), express=express,
                            dead_letter=not no_dead_letter, trace=trace, report_queue=report_queue)
    lease_s = optional_seconds(lease, "lease")

    with s.open() as st:
        if jsonl is not None:
            with inputs.opened(jsonl) as stream:
                max_size = st.info().max_message_size
                limit = inputs.record_line_limit(max_size)
                read = inputs.put_records(stream, limit, max_size, new_ids)
                records = (m for _, m in read)
                batches: Iterator[list] = (list(b) for b in _chunks(records, BATCH))
                position = read.position if isinstance(read, inputs.WholeFile) else None
                _put_stream(st, s.out, queue, batches, True, None, None, new_ids=new_ids,
                            tracking=inputs.reading_progress(f"put {queue}", stream, position))
        elif lines is not None:
            with inputs.opened(lines) as stream:
                bodies = inputs.body_lines(stream, st.info().max_message_size)
                _put_stream(st, s.out, queue, ([new(b) for b in chunk]
                                               for chunk in _chunks(bodies, BATCH)),
                            False, confirm_id, lease_s, tx, tracking=inputs.reading_progress(f"put {queue}", stream))
        elif count == 1 and confirm_id is None:
            message = new(inputs.message_body(body, file, lambda: st.info().max_message_size))
            with deferred() as gate:
                done = st.put_many(queue, [message], lease=lease_s, tx=tx)
                try:
                    with gate.writing(_ids_stalled(s.out, 1)):
                        s.out.msg_ids(done)
                except (OutputClosed, errors.DiskFull):
                    _ids_lost(s.out, 1)
                    raise
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


def say_left_in_flight(out: Output, n: Undone) -> None:
    """Say on stderr what an undo or a purge left in flight, and why."""
    for holder, count in n.delivering.items():
        out.note(f"{count} left in flight: a {holder} is delivering them (writing them out, sending "
                 f"them or handling them); it removes them once delivered, and they come back if it "
                 f"fails or dies")
    if n.tx_locked:
        out.note(f"{n.tx_locked} left in flight: tx-locked (their transaction's commit or abort, "
                 f"or its timeout, decides; `mqcli tx list`)")


_SELECTING = ("msg_id", "unique_id", "correl_id", "lookup_id", "priority", "where", "lock_id")


def to_take(st: Store, queue: str, count: Optional[int], filters: Mapping[str, Any]) -> Callable[[], Optional[int]]:
    """How many messages a get or move of `queue` will take, for its progress bar (asked only
    when one is drawn): its available messages (from the counters), at most `count`; with a
    filter, only `count` is known."""
    def known() -> Optional[int]:
        if any(filters.get(k) is not None for k in _SELECTING):
            return count
        available = st.queue_info(queue).available  # counters only (stats would find the oldest too)
        return available if count is None else min(count, available)
    return known


# ---- get and browse ---------------------------------------------------------------------

def get(s: Session, queue: str, wait: str = "0", msg_id: Optional[str] = None, unique_id: Optional[str] = None,
        correl_id: Optional[str] = None, lookup_id: Optional[str] = None, priority: Optional[int] = None,
        where: Optional[str] = None, label: Optional[str] = None, prop: Optional[list[str]] = None,
        older_than: Optional[str] = None, newer_than: Optional[str] = None, body_contains: Optional[str] = None,
        count: Optional[int] = None, all_: bool = False,
        confirm_id: Optional[int | str] = None, lock_id: Optional[int] = None, lease: Optional[str] = None,
        tx: Optional[int] = None, follow: bool = False, idle: Optional[str] = None,
        template: Optional[Template] = None) -> None:
    """mqcli get (its help: mqcli/commands/message.py)."""
    _formatted(s, template)
    where = shorthands.selector(locals())
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
    filters = dict(msg_id=msg_id, unique_id=unique_id, correl_id=correl_id, lookup_id=parse_lookup(lookup_id),
                   priority=priority, where=where, confirm_id=confirm_id, lock_id=lock_id,
                   lease=optional_seconds(lease, "lease"), tx=tx)
    with s.open() as st:
        if count is None and not all_:
            _delivered(st.get, queue, wait=seconds,
                       deliver=_announcing(s.out, confirm_id, lambda got: s.out.message(got[0])), **filters)
            return
        left = count
        empty: Optional[errors.Timeout] = None
        with progress(f"get {queue}", total=to_take(st, queue, count, filters)) as bar, s.out.messages() as stream:
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
                                     wait=seconds if stream.count == 0 else 0,
                                     deliver=_announcing(s.out, confirm_id, stream.extend), **filters)
                except errors.Timeout as exc:
                    if stream.count == 0:
                        empty = exc  # still exit 3, after the stream ends: `-o json` prints []
                    break  # the queue has no more: what was got is the result
                except errors.UnknownLockId:
                    if stream.count == 0:
                        raise
                    break  # the lock has no more: what was got is the result
                if confirm_id is not None and "extend" not in filters:
                    # the later batches add to the id the first one took (one holder: this get)
                    confirm_id = got[0].confirm_id
                    filters.update(confirm_id=confirm_id, extend=True)
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


def _must_exist(st: Store, queue: str, filters: Filters) -> None:
    """Raise get's MessageNotFound (exit 4) when no message of `queue`, in any state, has the
    id `filters` name. One that is held, or in a state --state leaves out, is there to browse
    (`--state all` shows it), so a browse that shows none of it is exit 0. Reads the id's index
    and the queue's messages in flight, not the whole queue."""
    from store.filters import Filter

    f = Filter(**filters)
    now = int(time.time() * 1_000_000)  # what a selector's `age` is measured from
    if not st.browse(queue, limit=1, **filters) and not any(f.matches(m, now) for m in st.inflight(queue)):
        raise f.not_found(st.queue_info(queue).name)


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


def browse(s: Session, queue: str, msg_id: Optional[str] = None, unique_id: Optional[str] = None,
           correl_id: Optional[str] = None, lookup_id: Optional[str] = None, priority: Optional[int] = None,
           where: Optional[str] = None, label: Optional[str] = None, prop: Optional[list[str]] = None,
           older_than: Optional[str] = None, newer_than: Optional[str] = None, body_contains: Optional[str] = None,
           limit: Optional[int] = None, state: Optional[list[str]] = None,
           lock: bool = False, lock_id: Optional[int | str] = None, lease: Optional[str] = None,
           follow: bool = False, idle: Optional[str] = None, from_start: bool = False,
           template: Optional[Template] = None) -> None:
    """mqcli browse (its help: mqcli/commands/message.py)."""
    _formatted(s, template)
    where = shorthands.selector(locals())
    filters: Filters = dict(msg_id=msg_id, unique_id=unique_id, correl_id=correl_id, lookup_id=parse_lookup(lookup_id),
                             priority=priority, where=where)
    if not lock and (lock_id is not None or lease is not None):
        raise UsageError("--lock-id and --lease go with --lock")
    if not follow and (idle is not None or from_start):
        raise UsageError("--idle and --from-start go with --follow")
    if follow and (lock or state or any(v is not None for k, v in filters.items() if k != "where")):
        raise UsageError("--follow goes with --where, --count, --idle and --from-start only")
    with s.open(reading=not lock) as st:
        if follow:
            return _browse_follow(st, s.out, queue, where=where, count=limit, idle=idle, from_start=from_start)
        if lock:
            if state:
                raise UsageError("--state does not go with --lock (only available messages are locked)")
            def lock_id_out(lid: int, locked: list[Message]) -> None:
                """The lock id to the caller; the messages are locked only once it is out (a closed
                or full stdout, a signal while it stalls, a SIGKILL: they go back as they were)."""
                if s.out.mode == "text":
                    s.out.value(lid, "lock_id")  # the data a script needs; the messages go to stderr
                else:
                    with s.out.messages() as stream:
                        stream.extend(locked)

            _, locked = st.browse_lock(queue, limit=limit, lock_id=lock_id,  # type: ignore[arg-type]  # int|AUTO
                                       lease=optional_seconds(lease, "lease"), deliver=lock_id_out, **filters)
            if s.out.mode == "text" and not s.out.quiet:
                note = Output("text", stdout=sys.stderr.buffer)
                with note.messages() as stream:
                    stream.extend(locked)
            return
        states: str | list[str] | None = None
        if state:
            states = "all" if "all" in state else [x for part in state for x in part.split(",")]
        if msg_id is not None or unique_id is not None or lookup_id is not None:
            # an id names one message (or its few copies): read at once, and known to exist
            # before any output, so that an id that names none is get's exit 4 alone
            found = st.browse(queue, limit=limit, states=states, **filters)
            if not found:
                _must_exist(st, queue, filters)
            with s.out.messages() as stream:
                stream.extend(found)
            return
        # read a page at a time (no read transaction open while output is written, nor every
        # message in memory); the output shows each as it comes
        with s.out.messages() as stream:
            for page in st.browse_pages(queue, limit=limit, states=states, **filters):
                stream.extend(page)

