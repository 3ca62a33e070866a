"""Queue administration: queue create/list/show/set/purge/delete (docs/design.md#queues)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Optional

import typer

if TYPE_CHECKING:
    from store import QueueInfo, Store

from .. import shorthands, values
from ..durations import parse_size
from ..exits import Declined, UsageError
from ..messaging import say_left_in_flight
from ..options import Session, shared_options
from ..render import iso
from .message import BodyHasOpt, LabelIsOpt, NewerOpt, OlderOpt, PropIsOpt, WhereOpt

app = typer.Typer(
    help="Queue administration.\n\n\b\nExample:\n  mqcli queue create orders --max-backouts 5\n  mqcli queue list",
    no_args_is_help=True, rich_markup_mode=None)

NameArg = Annotated[str, typer.Argument(help="Queue name (1-124 of letters, digits, . _ - /).", show_default=False)]
LabelOpt = Annotated[Optional[str], typer.Option("--label", help="Description, up to 250 characters.")]
QuotaOpt = Annotated[Optional[str], typer.Option("--quota", help="Bytes of messages the queue may hold (0: no limit), e.g. 64MiB.")]
JournalOpt = Annotated[Optional[bool], typer.Option("--journal/--no-journal", help="Keep a copy of each got message in NAME;journal.")]
BackoutsOpt = Annotated[Optional[int], typer.Option("--max-backouts", callback=values.in_range(0, 0xFFFF, "a count of backouts"), help="Dead-letter a message undone this many times (0: never).")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Say what would happen, change nothing.")]

COLUMNS = [("name", "queue"), ("depth", "depth"), ("available", "available"), ("bytes", "bytes"),
           ("quota", "quota"), ("max_backouts", "max-backouts"), ("transactional", "tx"),
           ("journal", "journal"), ("label", "label")]


def queue_doc(q: QueueInfo) -> dict:
    d = q.to_dict()
    d.pop("qid", None)
    d["created"] = iso(q.created)
    d["last_put"], d["last_get"] = iso(q.last_put), iso(q.last_get)
    return d


@app.command("create")
@shared_options
def create(
    s: Session, name: NameArg,
    label: LabelOpt = None, quota: QuotaOpt = None,
    transactional: Annotated[bool, typer.Option("--transactional", help="Accept puts only inside a transaction.")] = False,
    journal: JournalOpt = None, max_backouts: BackoutsOpt = None,
) -> None:
    """Create a queue.

    \b
    Example:
      mqcli queue create orders --quota 64MiB --max-backouts 5
    """
    with s.open() as st:
        q = st.create_queue(name, label=label or "", quota=0 if quota is None else parse_size(quota, "quota"),
                            transactional=transactional, journal=bool(journal),
                            max_backouts=max_backouts or 0)
    s.out.document(queue_doc(q))


@app.command("list")
@shared_options
def list_(s: Session) -> None:
    """List the queues with their depth and attributes (outgoing queues: `mqcli outgoing list`).

    \b
    Example:
      mqcli queue list -o json
    """
    with s.open(reading=True) as st:
        rows = [queue_doc(q) for q in st.list_queues(outgoing=False)]  # those are `outgoing list`
    s.out.table(rows, COLUMNS)


@app.command("show")
@shared_options
def show(s: Session, name: NameArg) -> None:
    """Show one queue's attributes and depth.

    \b
    Example:
      mqcli queue show orders
    """
    with s.open(reading=True) as st:
        q = st.queue_info(name)
        qm_guid = st.info().guid
        # every queue has a public (GUID) and a private (number) format name ([MS-MQMQ] 2.1)
        s.out.document({**queue_doc(q), "format_name": f"PUBLIC={q.guid}",
                        "private_format_name": f"PRIVATE={qm_guid}\\{q.qid:08x}"})


@app.command("set")
@shared_options
def set_(
    s: Session, name: NameArg,
    label: LabelOpt = None, quota: QuotaOpt = None, journal: JournalOpt = None,
    max_backouts: BackoutsOpt = None,
) -> None:
    """Change a queue's label, quota, journal or max-backouts.

    \b
    Example:
      mqcli queue set orders --max-backouts 3 --quota 0
    """
    if label is None and quota is None and journal is None and max_backouts is None:
        raise UsageError("nothing to set: give --label, --quota, --journal/--no-journal or --max-backouts")
    with s.open() as st:
        q = st.set_queue(name, label=label, quota=None if quota is None else parse_size(quota, "quota"),
                         journal=journal, max_backouts=max_backouts)
    s.out.document(queue_doc(q))


def _confirm(action: str, name: str, depth: int, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"refusing to {action} queue {name!r} ({depth} messages) without --yes")
    if not typer.confirm(f"{action} queue {name!r} and its {depth} messages?"):
        raise Declined(f"queue {name!r} not {action}d (answered no)")


def _remove_all(s: Session, name: str, action: str, yes: bool, dry_run: bool,
                remove: Callable[[Store], dict], count: Callable[[Store], int] | None = None) -> None:
    """purge and delete: say what would go (--dry-run), ask (or need --yes), then do it.
    `count`: how many would go, when not the whole queue (purge --where)."""
    with s.open() as st:
        depth = st.queue_info(name).depth if count is None else count(st)
        if dry_run:
            s.out.document({"queue": name, "would_remove": depth, "dry_run": True})
            return
        _confirm(action, name, depth, yes)
        s.out.document({"queue": name, **remove(st)})


@app.command("purge")
@shared_options
def purge(s: Session, name: NameArg, yes: YesOpt = False, dry_run: DryRunOpt = False,
          where: WhereOpt = None, label: LabelIsOpt = None, prop: PropIsOpt = None, older_than: OlderOpt = None, newer_than: NewerOpt = None,
          body_contains: BodyHasOpt = None) -> None:
    """Remove every message of a queue, in any state (with --where, those it selects); refused
    (exit 10) while an open transaction holds one of them. Messages a running get or dispatch
    is delivering are left (said on stderr): that get removes them once delivered.

    \b
    Examples:
      mqcli queue purge orders --yes
      mqcli queue purge orders --where "age > 7d" --dry-run
      mqcli queue purge orders --older-than 168h --prop region=test --yes
    """
    where = shorthands.selector(locals())
    def remove(st: Store) -> dict:
        removed = st.purge_queue(name, where=where)
        say_left_in_flight(s.out, removed)
        return {"removed": removed}

    _remove_all(s, name, "purge", yes, dry_run, remove,
                None if where is None else lambda st: st.purge_queue(name, where=where, dry_run=True))


@app.command("delete")
@shared_options
def delete(s: Session, name: NameArg, yes: YesOpt = False, dry_run: DryRunOpt = False) -> None:
    """Delete a queue and its messages; refused (exit 10) while an open transaction holds
    one of them, and (exit 5) while a running get or dispatch is delivering one (it would be
    counted as deleted and delivered both): delete when that ends, or purge first.

    \b
    Example:
      mqcli queue delete scratch --yes
    """
    _remove_all(s, name, "delete", yes, dry_run,
                lambda st: {"deleted": True, "removed": st.delete_queue(name)})
