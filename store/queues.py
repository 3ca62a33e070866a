"""Queue records and queue names (docs/design.md#queues)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TypedDict, Unpack

from .arguments import is_int
from .errors import InvalidArgument, StoreCorrupt
from .keys import MAX_KEY, queue_key

DEAD_LETTER = "dead-letter"
DEAD_LETTER_TX = "dead-letter-tx"
SYSTEM_QUEUES = (DEAD_LETTER, DEAD_LETTER_TX)
MAX_NAME = 124


def dead_letter_queue(transactional: bool) -> str:
    """MSMQ's two dead-letter queues: a message of a transactional queue goes to DEADXACT."""
    return DEAD_LETTER_TX if transactional else DEAD_LETTER


_NAME_PUNCTUATION = frozenset("._-/")


@dataclass(slots=True)
class QueueInfo:
    """A queue's record: its name, ids and attributes."""

    name: str
    qid: int
    guid: str
    label: str = ""
    quota: int = 0
    transactional: bool = False
    journal: bool = False
    max_backouts: int = 0
    created: int = 0
    system: bool = False
    # an outgoing queue (docs/design.md#store-and-forward): its name is the destination's format name, and this the
    # name of the queue manager it is bound for (the link that takes it), "" if unknown
    outgoing: str | None = None
    # filled in from the queue's counters when read; not stored in the record
    depth: int = 0
    bytes: int = 0
    available: int = 0
    # when a message was last put on the queue and last got from it, µs since the epoch; None:
    # never (a store made by an mqcli that kept no times has none until the next put or get)
    last_put: int | None = None
    last_get: int | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


_STORED = ("name", "qid", "guid", "label", "quota", "transactional", "journal", "max_backouts",
           "created", "system", "outgoing")


JOURNAL_SUFFIX = ";journal"
# the longest key of a queue name, case-folded: its journal's, NAME;journal, is the longest key
# made from it (store/keys.py), and must fit in LMDB's too
MAX_NAME_KEY = MAX_KEY - len(JOURNAL_SUFFIX)


def journal_name(name: str) -> str:
    """The journal of queue NAME is NAME;journal (MSMQ's QUEUE;JOURNAL); users cannot create
    a queue with a ';' in its name, so it never collides."""
    return name + JOURNAL_SUFFIX


def validate_name(name: str) -> str:
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME:
        raise InvalidArgument(f"queue name must be 1..{MAX_NAME} characters, got {name!r}")
    bad = [c for c in name if not (c.isalnum() or c in _NAME_PUNCTUATION)]
    if bad:
        raise InvalidArgument(
            f"queue name {name!r} has {bad[0]!r}; use letters, digits and . _ - /"
        )
    queue_key(name, MAX_NAME_KEY)  # 124 characters may case-fold to more bytes than a key holds
    return name


class QueueAttrs(TypedDict, total=False):
    """The attributes a new queue may be given (the rest of QueueInfo is made or counted)."""
    label: str
    quota: int
    transactional: bool
    journal: bool
    max_backouts: int
    system: bool
    outgoing: str | None


def new_queue(name: str, qid: int, created: int, **attrs: Unpack[QueueAttrs]) -> QueueInfo:
    import uuid  # here: uuid imports platform, which a put or get does not need at start-up

    return QueueInfo(name=name, qid=qid, guid=str(uuid.uuid4()), created=created, **attrs)


def encode_queue(q: QueueInfo) -> bytes:
    return json.dumps({k: getattr(q, k) for k in _STORED}, separators=(",", ":")).encode()


def decode_queue(raw: bytes) -> QueueInfo:
    try:
        return QueueInfo(**json.loads(raw))
    except (ValueError, TypeError) as exc:
        raise StoreCorrupt(f"malformed queue record: {exc}") from None


def validate_attrs(quota: int | None = None, max_backouts: int | None = None, label: str | None = None,
                   journal: bool | None = None, transactional: bool | None = None) -> None:
    """The queue attributes a caller gives, or a stored record holds (None: not given)."""
    if quota is not None and (not is_int(quota) or quota < 0):
        raise InvalidArgument(f"quota must be a byte count ≥ 0, got {quota!r}")
    if max_backouts is not None and (not is_int(max_backouts) or not 0 <= max_backouts <= 0xFFFF):
        raise InvalidArgument(f"max-backouts must be 0..65535, got {max_backouts!r}")
    if label is not None and not isinstance(label, str):
        raise InvalidArgument(f"queue label must be a str, got {type(label).__name__} {label!r:.40}")
    if label is not None and len(label) > 250:
        raise InvalidArgument("queue label is longer than 250 characters")
    for name, flag in (("journal", journal), ("transactional", transactional)):
        if flag is not None and not isinstance(flag, bool):  # "no" is truthy: it must not be stored
            raise InvalidArgument(f"{name} must be True or False, got {flag!r:.40}")
