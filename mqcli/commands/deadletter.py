"""Dead letters: `redrive` moves them back where they came from (like IBM MQ's runmqdlq)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import shorthands
from ..options import Session, shared_options
from .message import BodyHasOpt, LabelIsOpt, NewerOpt, OlderOpt, PropIsOpt, WhereOpt


@shared_options
def redrive(
    s: Session,
    dlq: Annotated[str, typer.Argument(help="The dead-letter queue: dead-letter or dead-letter-tx.",
                                       show_default=True)] = "dead-letter",
    to: Annotated[Optional[str], typer.Option("--to", metavar="QUEUE",
                                              help="Move them all to QUEUE instead of each to its original queue.")] = None,
    where: WhereOpt = None, label: LabelIsOpt = None, prop: PropIsOpt = None, older_than: OlderOpt = None, newer_than: NewerOpt = None,
    body_contains: BodyHasOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would move where, change nothing.")] = False,
) -> None:
    """Move dead letters back to their original queues (or --to QUEUE), fresh, atomically per batch of 1,000.

    A re-driven message starts fresh: backouts 0, no dead-letter reason, original queue or
    dead-letter time. Prints how many went to each queue. A dead letter whose original queue
    no longer exists stays in the dead-letter queue and is reported on stderr (and under
    "stayed" in json). Each dead letter shows its reason, MQ status, original queue and
    dead-letter time in `mqcli browse dead-letter`.

    \b
    Examples:
      mqcli redrive
      mqcli redrive --where "dead_letter_reason = 'max-backouts' AND original_queue = 'payments'"
      mqcli redrive dead-letter-tx --to orders.retry --dry-run
      mqcli redrive --where "age < 1h" -o json
    """
    where = shorthands.selector(locals())
    with s.open() as st:
        try:
            result = st.redrive(dlq, to=to, where=where, dry_run=dry_run)
        except Exception as exc:
            done = getattr(exc, "redriven", None)
            if done is not None and done.moved:  # the batches before the error committed: say so
                s.out.document({"dead_letter_queue": dlq, "moved": done.moved, "failed": True})
            raise
    verb = "would move" if dry_run else "moved"
    for original, n in result.stayed.items():
        why = "it names no original queue" if original is None else f"queue {original!r} no longer exists"
        s.out.note(f"mqcli: {n} dead letter{'s' if n != 1 else ''} stay{'s' if n == 1 else ''} in {dlq}: {why}")
    if s.out.mode in ("json", "jsonl"):
        s.out.document({"dead_letter_queue": dlq, verb.replace(" ", "_"): result.moved,
                        "stayed": {("" if k is None else k): n for k, n in result.stayed.items()},
                        "dry_run": dry_run})
        return
    s.out.document({}, [(f"{verb} to {name}", n) for name, n in result.moved.items()]
                   + [(f"stayed from {name or '-'}", n) for name, n in result.stayed.items()]
                   + [("total " + verb, result.total)])


def register(app: typer.Typer) -> None:
    app.command()(redrive)
