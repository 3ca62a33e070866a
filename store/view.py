"""One moment of a store: reads that all see the same committed state (`Store.view()`).

A dump must hold every message once. Read in many short snapshots (as `browse` pages), a
message moved from a queue not read yet into one read already is in no snapshot, and one moved
the other way is in two: a hunt saw 3 duplicates among 283 messages exported while `move` ran.
A view is one LMDB read transaction, so every message is where it was at that moment, once.
Writers go on meanwhile, but LMDB cannot reuse the pages they free until the view ends, so its
holder reads and does not wait on anyone (docs/design.md#store: "One moment")."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from . import addressing
from .filters import Filter
from .queues import QueueInfo
from .records import Message
from .write import Write


class View:
    """The reads of one moment; valid inside its `Store.view()` block only."""

    def __init__(self, t: Write, info: Callable[[Write, QueueInfo], QueueInfo]) -> None:
        self._t = t
        self._info = info

    @property
    def now(self) -> int:
        """The view's time (µs), what a selector's age is measured from."""
        return self._t.now

    def queues(self, names: Iterable[str] | None = None) -> list[QueueInfo]:
        """The queues named (default every queue, in name order), with their depths; a queue
        named twice (`export q Q`) is in the list once."""
        t = self._t
        if isinstance(names, str):
            names = [names]  # one queue's name, not its letters
        found = [t.queue(n) for n in t.queue_names()] if names is None else [addressing.lookup(t, n) for n in names]
        once = {q.qid: q for q in found}  # popped where each queue is first named
        return [self._info(t, q) for q in found if once.pop(q.qid, None) is not None]

    def messages(self, q: QueueInfo, *, hidden: bool = False, where: str | None = None) -> Iterator[Message]:
        """Every message of `q`, in queue order, in any state; without `hidden`, not the hidden
        ones (a put awaiting its confirm or inside an open transaction is not a message yet:
        docs/design.md#states); with `where`, those the selector selects."""
        f = Filter(where=where) if where is not None else None
        now = self._t.now
        for m in self._t.queue_messages(q):
            if (hidden or not m.hidden) and (f is None or f.matches(m, now)):
                yield m
