"""Dead letters: why a message was dead-lettered, as an MQ status, and re-driving them.

A dead letter carries three things: its reason (`dead_letter_reason`), the queue it was
dead-lettered from (`original_queue`) and when, in the reserved property
`mqcli.dead_letter_time` (ISO-8601 UTC), like a journal copy's `mqcli.journal_time`. A
property rather than a new record field: records written before it stay valid as they are
(no format version to bump, store/records.py), the time travels through export and import
with the other properties, and a selector can name it (`"props.mqcli.dead_letter_time"`, the quoted form README.md#selectors gives for any name).
Older dead letters simply lack it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .queues import DEAD_LETTER, DEAD_LETTER_TX
from .records import POISON_STATUS, Message, dead_letter_status, iso_time  # noqa: F401  (re-exported)

DEAD_LETTER_TIME = "mqcli.dead_letter_time"
DEAD_LETTER_QUEUES = (DEAD_LETTER, DEAD_LETTER_TX)

def dead_lettered(m: Message, reason: str, original_queue: str, now: int, *, expires: int | None) -> Message:
    """The copy of `m` that a dead-letter queue keeps: its reason, original queue and time."""
    return replace(m, dead_letter_reason=reason, original_queue=original_queue,
                   props={**m.props, DEAD_LETTER_TIME: iso_time(now)}, expires=expires)


def fresh(m: Message) -> Message:
    """A message moved out of a dead-letter queue starts fresh: backouts 0, no reason, no
    original queue, no dead-letter time. Kept, its backouts would send it straight back at
    the next undo when they had reached max-backouts."""
    props = dict(m.props)
    props.pop(DEAD_LETTER_TIME, None)
    return replace(m, props=props, backouts=0, dead_letter_reason=None, original_queue=None)


@dataclass(slots=True)
class Redriven:
    """What a redrive did (or, dry, would do): messages per destination queue, and the
    messages that stayed, per original queue that no longer exists (None: the message names
    no original queue)."""

    moved: dict[str, int] = field(default_factory=dict)
    stayed: dict[str | None, int] = field(default_factory=dict)
    dry_run: bool = False

    @property
    def total(self) -> int:
        return sum(self.moved.values())


__all__ = ["DEAD_LETTER_TIME", "Redriven", "dead_letter_status", "dead_lettered", "fresh"]
