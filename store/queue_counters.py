"""Per-queue counters kept in the store, written in the commit that changes them: how many
messages are in each in-flight state and at each priority now, and cumulative counts (put, got,
expired, backed out, dead-lettered, by reason) that make rates possible. A put counts when its
message becomes visible: a two-phase put when confirmed, a transaction's puts when it commits
(an undone or aborted put never reached the queue: Write.put_made_visible). `stats`, Prometheus
metrics and `health` read them without walking a queue's messages.

meta ``k qid(4)`` → 20 × u64: enqueued messages, enqueued bytes, got messages, got bytes,
expired, backed out, dead-lettered, the five in-flight states (STATES order, available left
out: it is the depth less these), the eight priorities (0..7); then the put order of each
priority: 8 × i64, the latest put time enqueued at each priority (0..7) since it was last
empty, and one byte whose bit p says priority p is out of put order.
meta ``r qid(4)`` → JSON {reason kind: count} of the messages dead-lettered from the queue.

Why the put order: a queue's messages of one priority are kept in seq order (store/keys.py),
which is put order while each message enqueued there has a put time no earlier than the latest
one already there, as every put has (put times only grow, `Write.allocate_ids`). Then the
priority's first message is its oldest, and the oldest message of the queue is found from the
first of each priority (`Write.oldest_times`). A message that keeps an earlier put time (an
import, `put --jsonl`, a move, a dead-lettering, an arrival) and lands behind a younger one
marks its priority out of put order, until the priority is empty again; `oldest_times` reads
every put time of such a priority.

A queue whose ``k`` entry is missing (a store written before these counters) has its current
counts computed once from its messages, and its cumulative counts start at zero; one written
before the put order was kept (the 20 counts alone) has its put order found from its messages
by the first write that uses them, which stores it (until then each read finds it again).
"""

from __future__ import annotations

import json
import operator
import re
import struct
from functools import lru_cache
from dataclasses import dataclass, field

from .keys import U32
from .records import AVAILABLE, STATES

IN_FLIGHT_STATES = tuple(s for s in STATES if s != AVAILABLE)
_COUNTS = ">" + "Q" * (7 + len(IN_FLIGHT_STATES) + 8)
_LAYOUT = struct.Struct(_COUNTS + "8qB")
_COUNTS_ONLY = struct.Struct(_COUNTS)  # the layout before the put order was kept
_CUMULATIVE = ("put_messages", "put_bytes", "got_messages", "got_bytes", "expired", "backed_out", "dead_lettered")
# read and written on every commit that puts or gets: one C call each way, no generator
_cumulative = operator.attrgetter(*_CUMULATIVE)
_in_flight = operator.itemgetter(*IN_FLIGHT_STATES)
_N, _M = len(_CUMULATIVE), len(_CUMULATIVE) + len(IN_FLIGHT_STATES)  # decode spells out the first _N
_P = _M + 8  # where the put order starts
EVERY_PRIORITY = 0xFF  # an out_of_order mask: the put order of no priority is known


@lru_cache(maxsize=4096)  # asked on every commit that puts or gets
def counters_key(qid: int) -> bytes:
    return b"k" + U32.pack(qid)


def reasons_key(qid: int) -> bytes:
    return b"r" + U32.pack(qid)


@dataclass
class QueueCounters:
    """A queue's running counts of messages and bytes put and got."""

    put_messages: int = 0
    put_bytes: int = 0
    got_messages: int = 0
    got_bytes: int = 0
    expired: int = 0
    backed_out: int = 0
    dead_lettered: int = 0
    in_flight: dict[str, int] = field(default_factory=lambda: {s: 0 for s in IN_FLIGHT_STATES})
    by_priority: list[int] = field(default_factory=lambda: [0] * 8)
    # the put order (module docstring): the latest put time enqueued at each priority since it
    # was last empty (µs), and the priorities out of put order (bit p: priority p)
    latest_put: list[int] = field(default_factory=lambda: [0] * 8)
    out_of_order: int = 0

    def encode(self) -> bytes:
        return _LAYOUT.pack(*_cumulative(self), *_in_flight(self.in_flight), *self.by_priority,
                            *self.latest_put, self.out_of_order)

    @classmethod
    def decode(cls, raw: bytes) -> QueueCounters:
        """From an entry of either layout (SIZES); one without the put order has every
        priority out of put order until the order is found (`Write.queue_counters`)."""
        if len(raw) == SIZE:
            v = _LAYOUT.unpack(raw)
        else:
            v = _COUNTS_ONLY.unpack(raw) + (0,) * 8 + (EVERY_PRIORITY,)
        return cls(v[0], v[1], v[2], v[3], v[4], v[5], v[6], dict(zip(IN_FLIGHT_STATES, v[_N:_M])),
                   list(v[_M:_P]), list(v[_P:_P + 8]), v[_P + 8])

    def in_put_order(self, priority: int) -> bool:
        """Whether the priority's first message (in seq order, in any state) is its oldest."""
        return not self.out_of_order >> priority & 1

    @property
    def size(self) -> int:
        return _LAYOUT.size


SIZE = _LAYOUT.size
SIZES = (SIZE, _COUNTS_ONLY.size)  # what `decode` reads: this layout and the one before it

_KIND_END = re.compile(r"[:(]")


def reason_kind(reason: str) -> str:
    """A dead-letter reason without its details, for counting and metric labels:
    "queue quota exceeded (100 bytes)" → "queue quota exceeded"."""
    kind = _KIND_END.split(reason, maxsplit=1)[0].strip()
    return kind or "other"


def decode_reasons(raw: bytes | None) -> dict[str, int]:
    if not raw:
        return {}
    value = json.loads(raw)
    if not isinstance(value, dict) or not all(isinstance(k, str) and type(v) is int for k, v in value.items()):
        raise ValueError("not an object of counts")
    return value


def encode_reasons(reasons: dict[str, int]) -> bytes:
    return json.dumps(reasons, sort_keys=True, separators=(",", ":")).encode()
