"""A two-phase consumer whose confirms ride on its next get ("ack and next").

A worker that gets a message two-phase, handles it and confirms it pays a commit for the get
and a durable one for the confirm. A consumer instead keeps the confirm until it gets the next
message and does both in one durable commit, so a steady worker pays one durable commit a
message. The confirm never waits for a message to come: a get that finds none commits the
confirms before it waits.

    with st.consumer("orders", lease=60) as c:
        for m in c:                 # each message two-phase, under its own confirm id
            if handle(m):
                c.confirm(m)        # committed with the next get (or at close)
            else:
                c.undo(m)           # now: a backout; at max-backouts, the dead-letter queue

A consumer killed meanwhile loses nothing: what it held goes back when its lease lapses (with a
backout), and a message it handled whose confirm had not been committed yet is delivered again
(at least once; the handler sees its `backouts` go up). Several messages may be in flight at
once (a worker with parallel handlers): each has its own confirm id.

While it lives, a consumer's messages are its own: it registers a row in table `holders` (kind
CONSUME, store/holders.py) on its first get, and draws its confirm ids from that row's range
(`ConsumerIds`), so an operators' undo (`undo --all/--older-than`) or a purge that meets them
leaves them to it, as they leave what a get is writing out (they would be handled twice, the
second time while the first handler still runs). Their leases lapse as any: a consumer that
stops getting its messages back does not keep them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from . import holders, ids
from .errors import AlreadyReceived, InvalidArgument, MessageNotFound, StoreError
from .records import Message

if TYPE_CHECKING:
    from .engine import Store
    from .queues import QueueInfo
    from .write import Write

FOREVER = None


class ConsumerIds:
    """A consumer's confirm ids, base+1, base+2, ..., each neither pending in the queue nor
    reserved (as ids.draw's); its row in `holders` is `token` (CONSUMERS | base)."""

    def __init__(self, base: int, holder: holders.Holder) -> None:
        self.base = base
        self.token = holders.CONSUMERS | base
        self.holder = holder  # its locked file says the consumer lives
        self.used = 0

    def draw(self, t: Write, tag: bytes, q: QueueInfo) -> int:
        # no one else takes one of them (ids.claim, ids.draw), but one pending or claimed
        # before the consumer registered, or reserved after a lapse, is stepped over
        while self.used < holders.CONSUMER_IDS:
            self.used += 1
            ident = self.base + self.used
            if ids.free(t, tag, q.qid, ident) and holders.claimed(t, q.qid, ident) is None:
                return ident
        return ids.draw(t, tag, q)  # 2^40 gets later: fresh ids, which an operators' undo may take


class Consumer:
    def __init__(self, store: Store, queue: str, *, lease: float | None = None, where: str | None = None) -> None:
        self.store = store
        self.queue = queue
        self.lease = lease
        self.where = where
        self.in_flight: dict[int, Message] = {}   # confirm id -> message handed out, not yet acked
        self._acked: dict[int, Message] = {}      # confirm id -> message to confirm with the next get
        # confirms that failed when committed, with why (a lease that lapsed meanwhile: the
        # message went back and may be handled again); the caller reads and clears it
        self.failed: list[tuple[Message, StoreError]] = []
        self._ids: ConsumerIds | None = None  # registered on the first get

    def next(self, wait: float | None = FOREVER) -> Message | None:
        """The next message (None if none came within `wait` seconds; None waits forever),
        got two-phase in the commit that confirms the messages acked since the last call."""
        if self._ids is None:
            self._ids = self.store._register_consumer(self)
        acked, self._acked = self._acked, {}
        message, failed = self.store._ack_and_get(self.queue, list(acked), wait=wait, lease=self.lease,
                                                  where=self.where, ids_from=self._ids)
        if failed:
            self.failed += [(acked[confirm_id], exc) for confirm_id, exc in failed]
        if message is not None:
            self.in_flight[message.confirm_id] = message  # type: ignore[index]  # got under a confirm id
        return message

    def confirm(self, m: Message) -> None:
        """`m` was handled: confirm it with the next get, or at close (flush)."""
        self._acked[m.confirm_id] = self._handed_out(m)  # type: ignore[index]  # got under a confirm id

    def undo(self, m: Message, *, backout: bool = True) -> None:
        """`m` was not handled: back to the queue now, with a backout (at the queue's
        max-backouts, to the dead-letter queue); without one if not `backout` (it never reached
        its handler whole: the worker's output closed under it). One whose lease lapsed is
        back already."""
        self._handed_out(m)
        try:
            self.store.undo(self.queue, confirm_id=m.confirm_id, backout=backout)
        except (MessageNotFound, AlreadyReceived) as exc:
            self.failed.append((m, exc))

    def flush(self) -> None:
        """Commit the confirms acked since the last get, now."""
        while self._acked:
            confirm_id, m = next(iter(self._acked.items()))
            try:
                self.store.confirm(self.queue, confirm_id)
            except (MessageNotFound, AlreadyReceived) as exc:
                self.failed.append((m, exc))
            del self._acked[confirm_id]

    def close(self) -> None:
        """Commit what was acked; messages handed out and never acked go back (undo)."""
        self.flush()
        for m in list(self.in_flight.values()):
            self.undo(m)
        if self._ids is not None:
            self.store._unregister_consumer(self._ids)
            self._ids = None

    def __iter__(self) -> Iterator[Message]:
        while True:
            m = self.next(FOREVER)
            if m is not None:
                yield m

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _handed_out(self, m: Message) -> Message:
        found = self.in_flight.pop(m.confirm_id, None)  # type: ignore[arg-type]  # got under a confirm id
        if found is None:
            raise InvalidArgument(f"message {m.msg_id} is not in flight from this consumer (acked already?)")
        return found
