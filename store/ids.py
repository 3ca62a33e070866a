"""Confirm ids and lock ids: one holder each, and a day's memory of the ones taken from their holder.

A confirm id or lock id names what one holder has in flight in one queue (docs/store-api.md).
Two holders under one id cannot be told apart: a worker whose lease lapsed would confirm, and
so delete, the message a second worker got again under the same id. So a get, put or browse
with lock that names an id pending in the queue is refused (`claim`), and an id whose messages
left their in-flight state without their holder (a lapsed lease, expiry, an operators' undo,
a purge: `CAUSES`) is remembered in the ``ids`` table (keys.py) for `RETENTION_US`: meanwhile
a late confirm or undo is told what happened and where the messages went (`unknown`), and no
new holder may take the id. `draw` makes a fresh id that is neither pending nor remembered.
A holder's own confirm or undo leaves no record: the id is free again.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Final

from . import holders, keys
from .errors import (
    BadData, ConfirmIdLapsed, IdInUse, LockIdLapsed, MessageNotFound, UnknownConfirmId, UnknownLockId,
)
from .records import iso_time

if TYPE_CHECKING:
    from .queues import QueueInfo
    from .records import Message
    from .write import Write

RETENTION_US = 24 * 3600 * 1_000_000  # how long a lapsed id is remembered, and reserved
PRUNE_BATCH = 16  # expired records forgotten by each write that records a lapse
AUTO: Final = "auto"  # as a confirm id or lock id: a fresh one, drawn by `draw`

_BY_TIME = b"T"
_WHAT = {keys.CONFIRM: "confirm id", keys.LOCK: "lock id"}
_ID_KEY_SIZE = 13  # tag(1) qid(4) id(8)


LAPSED, EXPIRED, UNDONE, PURGED = "lapsed", "expired", "undone", "purged"
# what took messages from their holder -> (the event for a person, why a dead letter went,
# what a message gone for good became)
CAUSES = {
    LAPSED: ("the lease of {what} {ident} lapsed", "max-backouts reached", "discarded (an unconfirmed put is undone)"),
    EXPIRED: ("the messages under {what} {ident} expired", "expired",
              "dropped (an unconfirmed put, or a message sent without dead-lettering, is not dead-lettered)"),
    UNDONE: ("{what} {ident} was undone by an operator (undo --all/--older-than)", "max-backouts reached",
             "discarded (an unconfirmed put is undone)"),
    PURGED: ("the messages under {what} {ident} were purged", "", "removed by the purge"),
}


@dataclass(slots=True)
class Lapse:
    """What became of the messages under an id when they were taken from their holder (one
    record per id and queue; several messages under one id add up; `cause` is the latest's)."""

    at: int  # µs since the epoch: the latest time messages under the id were taken
    queue: str
    returned: int = 0  # back in the queue, available
    backouts: int = 0  # the highest backout count among those
    dead_lettered: int = 0  # moved to a dead-letter queue (max-backouts, expiry)
    dead_letter_queue: str | None = None
    discarded: int = 0  # gone: puts never confirmed (undone), dropped or purged
    cause: str = LAPSED  # a key of CAUSES (records written before it were lapses)

    @property
    def until(self) -> int:
        return self.at + RETENTION_US

    def event(self, tag: bytes, ident: int) -> str:
        """What happened, for a person: "the lease of confirm id 42 lapsed"."""
        return CAUSES.get(self.cause, CAUSES[LAPSED])[0].format(what=_WHAT[tag], ident=ident)

    def describe(self) -> str:
        """Where the messages went, for a person: "its message went back to queue 'q' (backouts 1)"."""
        _, dead_why, gone = CAUSES.get(self.cause, CAUSES[LAPSED])
        total = self.returned + self.dead_lettered + self.discarded
        parts = []
        if self.returned:
            backouts = f" (backouts {'up to ' if self.returned > 1 else ''}{self.backouts})" if self.backouts else ""
            parts.append(f"{_subject(self.returned, total)} went back to queue {self.queue!r}{backouts}")
        if self.dead_lettered:
            parts.append(f"{_subject(self.dead_lettered, total)} went to the dead-letter queue "
                         f"{self.dead_letter_queue!r} ({dead_why})")
        if self.discarded:
            parts.append(f"{_subject(self.discarded, total)} {'was' if self.discarded == 1 else 'were'} {gone}")
        return "; ".join(parts)

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Lapse:
        try:
            return cls(**json.loads(raw))
        except (ValueError, TypeError) as exc:
            raise BadData(f"a lapsed-id record cannot be read: {exc}") from None


def _subject(n: int, total: int) -> str:
    if n == total:
        return "its message" if n == 1 else f"its {n} messages"
    return f"{n} of its {total} messages"


def when(us: int) -> str:
    """A time in an error message: ISO-8601 UTC to the second."""
    return iso_time(us)[:19] + "Z"


def id_key(tag: bytes, qid: int, ident: int) -> bytes:
    return keys.id_in_queue_prefix(tag, qid, ident)


def time_key(at: int, key: bytes) -> bytes:
    return _BY_TIME + keys.U64.pack(at) + key


# ---- the rule: one holder per id -------------------------------------------------------------

def pending(t: Write, tag: bytes, qid: int, ident: int) -> bool:
    """Whether some in-flight message of the queue holds the id: one cursor step on the
    confirm (K) or lock (L) index."""
    prefix = keys.id_in_queue_prefix(tag, qid, ident)
    cur = t.cursor("idx")
    return cur.set_range(prefix) and cur.key().startswith(prefix)


def lapse_of(t: Write, tag: bytes, qid: int, ident: int) -> Lapse | None:
    """The record of the id's lapse in the queue, if it lapsed less than a day ago."""
    raw = t.lt.get(id_key(tag, qid, ident), db=t.dbs["ids"])
    if raw is None:
        return None
    lapse = Lapse.decode(bytes(raw))
    return lapse if lapse.until > t.now else None  # expired, not yet pruned


def claim(t: Write, tag: bytes, q: QueueInfo, ident: int, *, extend: bool = False) -> None:
    """Refuse (IdInUse, exit 5) an id another holder has: pending in the queue (unless
    `extend`: the caller's own earlier batches hold it), or lapsed less than a day ago."""
    what = _WHAT[tag]
    if not extend and pending(t, tag, q.qid, ident):
        held = "held" if tag == keys.CONFIRM else "locked"
        release = "confirm or undo" if tag == keys.CONFIRM else "get, unlock or undo"
        raise IdInUse(f"{what} {ident} is pending in queue {q.name!r}: messages are {held} under "
                      f"it, and an id has one holder; {release} them first, or use another id or auto")
    hold = holders.claimed(t, q.qid, ident) if tag == keys.CONFIRM and not extend else None
    if hold is not None:
        raise IdInUse(f"{what} {ident} is taken in queue {q.name!r}: a {hold.what} is writing out "
                      f"messages it will hold under it, and an id has one holder; use another id or auto")
    hold = holders.consuming(t, q.qid, ident) if tag == keys.CONFIRM and not extend else None
    if hold is not None:
        raise IdInUse(f"{what} {ident} is taken in queue {q.name!r}: it is one of the ids of a {hold.what}, "
                      f"and an id has one holder; use another id or auto")
    # `extend`: the caller's own bulk operation goes on under its id, whatever took its earlier
    # batches meanwhile (an operators' undo between two batches of one get): it is still their holder
    lapse = None if extend else lapse_of(t, tag, q.qid, ident)
    if lapse is not None:
        raise IdInUse(f"{lapse.event(tag, ident)} at {when(lapse.at)} in queue {q.name!r}, "
                      f"so the id is reserved until {when(lapse.until)} (a late confirm or undo "
                      f"must not reach a new holder); use another id or auto")


def random_id() -> int:
    """63 random bits, as `secrets.randbits(63)` (which would load hmac and hashlib at start-up):
    from `os.urandom`, read 512 bytes at a time (one system call for 64 ids). A forked child
    drops what its parent read, so the two never draw the same ids."""
    r = _RANDOM
    if r.at >= _RANDOM_BYTES:
        r.pool, r.at = os.urandom(_RANDOM_BYTES), 0
    at = r.at
    r.at = at + 8
    ident: int = _U64_AT(r.pool, at)[0]
    return ident >> 1


class _Pool:
    __slots__ = ("pool", "at")

    def __init__(self) -> None:
        self.pool, self.at = b"", _RANDOM_BYTES


_RANDOM_BYTES = 512
_RANDOM = _Pool()  # random bytes read, and the next unused offset
_U64_AT = keys.U64.unpack_from


def _forget_random() -> None:
    _RANDOM.pool, _RANDOM.at = b"", _RANDOM_BYTES


os.register_at_fork(after_in_child=_forget_random)


def free(t: Write, tag: bytes, qid: int, ident: int) -> bool:
    """Whether an id is neither pending in the queue nor reserved (after a lapse)."""
    return not pending(t, tag, qid, ident) and lapse_of(t, tag, qid, ident) is None


def draw(t: Write, tag: bytes, q: QueueInfo) -> int:
    """A fresh positive 63-bit id, neither pending in the queue nor reserved, nor a consumer's."""
    while True:
        ident = random_id()
        if ident and free(t, tag, q.qid, ident) and (tag != keys.CONFIRM or holders.consuming(t, q.qid, ident) is None):
            return ident


def unknown(t: Write, tag: bytes, q: QueueInfo, ident: int) -> MessageNotFound:
    """The error for an id nothing is pending under (exit 4): it lapsed (and where its
    messages went), or it is unknown (never used, confirmed, undone)."""
    lapse = lapse_of(t, tag, q.qid, ident)
    if lapse is not None:
        error = ConfirmIdLapsed if tag == keys.CONFIRM else LockIdLapsed
        return error(f"{lapse.event(tag, ident)} at {when(lapse.at)}; {lapse.describe()}")
    if tag == keys.CONFIRM:
        return UnknownConfirmId(f"no message of queue {q.name!r} is pending under confirm id {ident}")
    return UnknownLockId(f"no message of queue {q.name!r} is locked under lock id {ident}")


# ---- remembering ids taken from their holder ------------------------------------------------

def record_lapse(t: Write, held: Message, kept: Message | None, cause: str) -> None:
    """Remember the ids of `held` (the message as it was, in flight) that `cause` (CAUSES) just
    took from its holder; `kept` is what that left of it (Write.release, dead-lettering): back
    in its queue, moved to a dead-letter queue, or None (an unconfirmed put, discarded; a
    message dropped or purged). A message in no in-flight state has no ids: nothing is written."""
    if not (held.confirm_id or held.lock_id):
        return
    for tag, ident in ((keys.CONFIRM, held.confirm_id), (keys.LOCK, held.lock_id)):
        if not ident:
            continue
        db = t.dbs["ids"]
        key = id_key(tag, held.qid, ident)
        lapse = lapse_of(t, tag, held.qid, ident)
        old = t.lt.get(key, db=db)
        if old is not None:
            t.lt.delete(time_key(Lapse.decode(bytes(old)).at, key), db=db)
        if lapse is None:
            lapse = Lapse(at=t.now, queue=held.queue)
        lapse.at, lapse.cause = t.now, cause
        if kept is None:
            lapse.discarded += 1
        elif kept.qid != held.qid:
            lapse.dead_lettered += 1
            lapse.dead_letter_queue = kept.queue
        else:
            lapse.returned += 1
            lapse.backouts = max(lapse.backouts, kept.backouts)
        t.lt.put(key, lapse.encode(), db=db)
        t.lt.put(time_key(t.now, key), b"", db=db)
    prune(t, PRUNE_BATCH)


def prune(t: Write, limit: int | None = None) -> int:
    """Forget records older than `RETENTION_US`, the oldest first, at most `limit` of them."""
    db = t.dbs["ids"]
    doomed = t.entries_before(db, _BY_TIME, t.now - RETENTION_US + 1, limit)  # RETENTION_US old, too
    for k in doomed:
        t.lt.delete(k, db=db)
        t.lt.delete(k[9:], db=db)
    return len(doomed)


def check(t: Write) -> list[str]:
    """Problems of the ``ids`` table: each record readable, with its time-ordered entry (prune
    walks those only: a record without one would never be forgotten), and no time entry alone."""
    db = t.dbs["ids"]
    problems = []
    for key, raw in t.lt.cursor(db=db):
        key = bytes(key)
        if key[:1] == _BY_TIME:
            if len(key) != 9 + _ID_KEY_SIZE or t.lt.get(key[9:], db=db) is None:
                problems.append(f"ids entry {key.hex()}: a time entry without its record")
            continue
        if len(key) != _ID_KEY_SIZE or key[:1] not in _WHAT:
            problems.append(f"ids entry {key.hex()}: malformed key")
            continue
        try:
            lapse = Lapse.decode(bytes(raw))
        except BadData as exc:
            problems.append(f"ids entry {key.hex()}: {exc.message}")
            continue
        if t.lt.get(time_key(lapse.at, key), db=db) is None:
            problems.append(f"ids entry {key.hex()}: its time-ordered entry is missing, so it is never forgotten")
    return problems
