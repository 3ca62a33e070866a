"""Messages: put, get, browse, unlock, confirm, undo, delete, move, inflight (docs/design.md#states).

The options of put, get and browse are declared here; what they do is mqcli/messaging.py, which
mqcli/fastpath.py also runs, without Typer, for a command line it parses alone."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from store.errors import DiskFull

from .. import messaging, shorthands, values
from ..template import option as template_option
from ..exits import UsageError
from ..messaging import Filters, parse_lookup, optional_seconds, to_take
from ..options import NewConfirmOpt, NewLockOpt, Session, shared_options
from ..render import OutputClosed, age, age_seconds, iso, progress
from ..signals import deferred

QueueArg = Annotated[str, typer.Argument(help="Queue name or format name.", show_default=False)]
MsgIdOpt = Annotated[Optional[str], typer.Option("--msg-id", help="Only the message with this msg_id.")]
UniqueOpt = Annotated[Optional[str], typer.Option("--unique-id", callback=values.unique_id, help="Only the message with this MQe unique id (<guid>:<put time µs>).")]
CorrelOpt = Annotated[Optional[str], typer.Option("--correl-id", help="Only messages with this correlation id.")]
LookupOpt = Annotated[Optional[str], typer.Option("--lookup-id", help="Only the message with this lookup id (decimal or 0x hex).")]
PriorityOpt = Annotated[Optional[int], typer.Option("--priority", min=0, max=7, help="Only messages of this priority (0-7).")]
WhereOpt = Annotated[Optional[str], typer.Option(
    "--where", metavar="SELECTOR", callback=values.selector,
    help="Only messages the selector selects: SQL92 conditions on header fields and props.NAME, "
         "e.g. \"priority > 4 AND props.region = 'eu'\" or \"age > 10m AND label LIKE 'inv%'\" "
         "(README: Selectors).")]
# the selector shorthands (mqcli/shorthands.py): each ANDs a term to --where
LabelIsOpt = Annotated[Optional[str], typer.Option(
    "--label", help="Only messages with exactly this label (a pattern: --where \"label LIKE 'inv%'\").")]
PropIsOpt = Annotated[Optional[list[str]], typer.Option(
    "--prop", metavar="K=V", help="Only messages whose property K is V (repeatable: each must hold).")]
OlderOpt = Annotated[Optional[str], typer.Option(
    "--older-than", metavar="DURATION", help="Only messages put longer ago than this (age > D).")]
NewerOpt = Annotated[Optional[str], typer.Option(
    "--newer-than", metavar="DURATION", help="Only messages put less long ago than this (age < D).")]
BodyHasOpt = Annotated[Optional[str], typer.Option(
    "--body-contains", metavar="TEXT", help="Only messages whose body holds TEXT (its UTF-8 bytes).")]
FormatOpt = Annotated[Optional[str], typer.Option(
    "--format", metavar="TEMPLATE", callback=template_option,
    help="Write each message as TEMPLATE fills it (kcat -f): {msg_id} {priority} {label} {correl_id} "
         "{put_time} {size} {backouts} {props.NAME} {body} {body_hex} (and {queue} {state} {expires} "
         "{app_specific} {hops} {lookup_id} {unique_id} {dead_letter_reason} {original_queue}), "
         "{{ and }} for braces, escapes \\n \\t \\0 \\\\. Bodies are written as their bytes.")]
ConfirmOpt = Annotated[Optional[int], typer.Option("--confirm-id", callback=values.positive_id, help="Confirm id (a positive 63-bit integer you choose).")]
LockOpt = Annotated[Optional[int], typer.Option("--lock-id", callback=values.positive_id, help="Lock id of a browse with lock.")]
LeaseOpt = Annotated[Optional[str], typer.Option("--lease", help="Undo automatically if not confirmed within this time, e.g. 30s.")]
TxOpt = Annotated[Optional[int], typer.Option("--tx", metavar="TX", callback=values.positive_id, help="Inside this transaction (from `mqcli tx begin`): held tx-locked until `mqcli tx commit`.")]
FollowOpt = Annotated[bool, typer.Option("--follow", "-f", help="Follow the queue: messages as they become available, until --count, --idle or Ctrl-C (exit 0).")]
IdleOpt = Annotated[Optional[str], typer.Option("--idle", metavar="DURATION", help="With --follow: stop (exit 0) after this long without a message, e.g. 30s.")]


# ---- put, get and browse ---------------------------------------------------------------

@shared_options
def put(
    s: Session,
    queue: QueueArg,
    body: Annotated[Optional[str], typer.Argument(help="Message body; - reads it from stdin.", show_default=False)] = None,
    file: Annotated[Optional[Path], typer.Option("--file", "-f", help="Read the body from this file.")] = None,
    priority: Annotated[int, typer.Option("--priority", "-p", min=0, max=7, help="0-7, higher first.")] = 3,
    correl_id: Annotated[Optional[str], typer.Option("--correl-id", help="Correlation id (indexed).")] = None,
    label: Annotated[str, typer.Option("--label", callback=values.printable_label, help="Label, up to 250 characters.")] = "",
    prop: Annotated[Optional[list[str]], typer.Option("--prop", help="User property K=V (repeatable).")] = None,
    app_specific: Annotated[int, typer.Option("--app-specific", callback=values.app_specific, help="32-bit application value.")] = 0,
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
    messaging.put(**locals())  # its parameters, as Typer parsed them (same names: tests/test_fastpath.py)


@shared_options(delimiter=True)
def get(
    s: Session,
    queue: QueueArg,
    wait: Annotated[str, typer.Option("--wait", "-w", help="How long to wait for a message: 0, 250ms, 30s, 5m, 2h, forever.")] = "0",
    msg_id: MsgIdOpt = None, unique_id: UniqueOpt = None, correl_id: CorrelOpt = None,
    lookup_id: LookupOpt = None, priority: PriorityOpt = None, where: WhereOpt = None,
    label: LabelIsOpt = None, prop: PropIsOpt = None, older_than: OlderOpt = None, newer_than: NewerOpt = None,
    body_contains: BodyHasOpt = None,
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
    messaging.get(**locals())  # its parameters, as Typer parsed them (same names: tests/test_fastpath.py)


@shared_options(delimiter=True)
def browse(
    s: Session,
    queue: QueueArg,
    msg_id: MsgIdOpt = None, unique_id: UniqueOpt = None, correl_id: CorrelOpt = None,
    lookup_id: LookupOpt = None, priority: PriorityOpt = None, where: WhereOpt = None,
    label: LabelIsOpt = None, prop: PropIsOpt = None, older_than: OlderOpt = None, newer_than: NewerOpt = None,
    body_contains: BodyHasOpt = None,
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
    messaging.browse(**locals())  # its parameters, as Typer parsed them (same names: tests/test_fastpath.py)


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
    where: WhereOpt = None, label: LabelIsOpt = None, prop: PropIsOpt = None, body_contains: BodyHasOpt = None,
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
    where = shorthands.where(where, label=label, prop=prop, body_contains=body_contains)  # its own --older-than
    if where is not None and (confirm_id is not None or lock_id is not None):
        raise UsageError("--where (--label, --prop, --body-contains) goes with --all or --older-than "
                         "(a confirm or lock id names its messages)")
    with s.open() as st:
        if confirm_id is not None or lock_id is not None:
            n = st.undo(queue, confirm_id=confirm_id, lock_id=lock_id)  # type: ignore[arg-type]  # QUEUE given
            s.out.document({"queue": queue, "undone": n})
            return
        undone = st.undo_inflight(queue, older_than=optional_seconds(older_than, "age"), where=where)
        messaging.say_left_in_flight(s.out, undone)  # undone, those being delivered would go twice
    # of the undone, puts awaiting their confirm are removed (MQe), not given back: the depth
    # grows by undone - discarded
    s.out.document({"queue": queue, "undone": undone, "discarded": undone.discarded})


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
    copy: Annotated[bool, typer.Option("--copy", help="Copy instead of moving: each copy is a new message (new msg_id and put time) naming its source in the property mqcli.copy_of.")] = False,
    msg_id: MsgIdOpt = None, unique_id: UniqueOpt = None, correl_id: CorrelOpt = None,
    lookup_id: LookupOpt = None, priority: PriorityOpt = None, where: WhereOpt = None,
    label: LabelIsOpt = None, prop: PropIsOpt = None, older_than: OlderOpt = None, newer_than: NewerOpt = None,
    body_contains: BodyHasOpt = None,
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
    filters: Filters = dict(msg_id=msg_id, unique_id=unique_id, correl_id=correl_id, lookup_id=parse_lookup(lookup_id),
                             priority=priority, where=shorthands.selector(locals()))
    with s.open() as st:
        if dry_run:
            if st.queue_info(target).qid == st.queue_info(source).qid:  # as the move itself says
                raise UsageError(f"source and target are the same queue ({st.queue_info(source).name!r})")
            n = len(st.browse(source, limit=count, **filters))
            s.out.document({"source": source, "target": target, "would_move": n, "dry_run": True})
            return
        moved = 0
        batches = st.move(source, target, count=count, copy=copy, tx=tx, **filters)
        try:
            with progress(f"{'copy' if copy else 'move'} {source} → {target}",
                          total=to_take(st, source, count, filters)) as bar:
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
        except Exception:
            # a later batch failed (a quota, a throttled or full store, a queue deleted): the
            # batches before it committed and stay moved; say so, or a retry copies them again
            if moved:
                s.out.document({"source": source, "target": target, "copied" if copy else "moved": moved,
                                "failed": True})
            raise
    try:
        s.out.document({"source": source, "target": target, "copied" if copy else "moved": moved})
    except (OutputClosed, DiskFull):  # done all the same: said, lest a retry move (or copy) again
        s.out.note(f"{moved} message{'s' if moved != 1 else ''} {'copied' if copy else 'moved'} from "
                   f"{source!r} to {target!r}; the summary could not be written")
        raise


@shared_options
def inflight(s: Session,
             queue: Annotated[Optional[str], typer.Argument(help="Only this queue.", show_default=False)] = None) -> None:
    """Every locked, unconfirmed or transactional message: ids, state, age, lease left.

    \b
    Example:
      mqcli inflight orders
    """
    with s.open(reading=True) as st:
        found = st.inflight(queue)
        now = int(time.time() * 1_000_000)  # after the read: no age of what it found is negative
        rows = [{
            "queue": m.queue, "msg_id": m.msg_id, "state": m.state, "confirm_id": m.confirm_id,
            "lock_id": m.lock_id, "tx": m.tx, "since": iso(m.since), "age": age(m.since, now),
            "age_s": age_seconds(m.since, now),
            "lease_expires": iso(m.lease_expires),
            "lease_left": None if m.lease_expires is None else f"{max(0, m.lease_expires - now) / 1e6:.1f}s",
            "backouts": m.backouts,
        } for m in found]
    s.out.table(rows, [("queue", "queue"), ("msg_id", "msg_id"), ("state", "state"),
                       ("confirm_id", "confirm id"), ("lock_id", "lock id"), ("tx", "tx"), ("age", "age"),
                       ("lease_left", "lease left"), ("backouts", "backouts")])


def register(app: typer.Typer) -> None:
    for fn in (put, get, browse, unlock, confirm, undo, delete, move, inflight):
        app.command()(fn)
