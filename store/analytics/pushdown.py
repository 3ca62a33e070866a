"""Filters of a query pushed into the `mqstore` source: fewer key ranges read, fewer rows built
(docs/design.md#pipeline).

Spark (4.1 and later, with `spark.sql.python.filterPushdown.enabled`, which `analyze` turns
on: planning.tune) hands a Python data source the conjuncts of a query's `WHERE` that compare
a column with literals (pyspark.sql.datasource.Filter: `EqualTo`, `In`, `GreaterThan`, …).
The source takes those on five columns and answers with the rest, which Spark applies after
the scan:

- `queue` (`=`, `IN`): only the ranges of the queues of those exact names are planned; a name
  that no store has reads nothing (it is a filter, not the `queues` option, which is an error
  for an unknown queue).
- `priority` (`=`, `IN`, `<`, `<=`, `>`, `>=`): a position key holds `7 - priority` right
  after the queue id (keys.py), so a priority window is a key range inside each queue.
- `state` (`=`, `IN`): a filter without `available` skips nothing (a message a get holds in
  place stays in `pos`), one of `available` alone skips the in-flight table.
- `class` (`=`, `IN`): `report` alone reads only reports (the source's `class` option).
- `put_time` (`<`, `<=`, `>`, `>=`, `=`): compared in the reader, before rows reach Spark; no
  key holds it (a queue's keys are in priority then arrival order, and an imported or
  transferred message keeps its put time), so every range of the chosen queues is read.

Every filter taken is also applied to each record batch (an exact mask), so a row the query
does not want never reaches Spark, whatever the key ranges cover. `Pushed` is plain data:
Spark pickles the reader, with it, to the workers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from .. import keys
from ..records import AVAILABLE
from .scan import MSG_TABLE, ScanRange

if TYPE_CHECKING:
    import pyarrow as pa

SET_COLUMNS = ("queue", "class", "state")
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MAX_PRIORITY = 7


@dataclass
class Pushed:
    """The filters the source took: each `None` (or the full window) when there is none."""

    sets: dict[str, frozenset[str]] = field(default_factory=dict)  # queue / class / state → allowed values
    priority: tuple[int, int] = (0, MAX_PRIORITY)                 # inclusive
    put_time: tuple[int | None, int | None] = (None, None)        # µs, inclusive bounds

    def any(self) -> bool:
        return bool(self.sets) or self.priority != (0, MAX_PRIORITY) or self.put_time != (None, None)

    def empty(self) -> bool:
        """No row can pass (e.g. `queue = 'a' AND queue = 'b'`)."""
        lo, hi = self.put_time
        return (any(not v for v in self.sets.values()) or self.priority[0] > self.priority[1]
                or (lo is not None and hi is not None and lo > hi))


def push(filters: Iterable[Any], pushed: Pushed, columns: Sequence[str]) -> list[Any]:
    """Take the filters this module handles into `pushed`; return the others (the very objects
    Spark passed: it matches them by reference)."""
    rest = []
    for f in filters:
        if not _take(f, pushed, columns):
            rest.append(f)
    return rest


def _take(f: Any, pushed: Pushed, columns: Sequence[str]) -> bool:
    from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual

    attribute = getattr(f, "attribute", None)
    if not isinstance(attribute, tuple) or len(attribute) != 1 or attribute[0] not in columns:
        return False
    column = attribute[0]
    if isinstance(f, (EqualTo, In)):
        values = (f.value,) if isinstance(f, EqualTo) else tuple(f.value)
    elif isinstance(f, (GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)):
        values = (f.value,)
    else:
        return False
    if column in SET_COLUMNS:
        if not isinstance(f, (EqualTo, In)) or not all(isinstance(v, str) for v in values):
            return False
        allowed = frozenset(values)
        pushed.sets[column] = allowed & pushed.sets[column] if column in pushed.sets else allowed
        return True
    if column == "priority":
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return False
        if isinstance(f, In):
            lo, hi = min(values, default=1), max(values, default=0)
            if set(range(lo, hi + 1)) != set(values):
                return False  # a window only: the rest stays Spark's
        else:
            lo, hi = _window(f, values[0], 0, MAX_PRIORITY)
        pushed.priority = (max(pushed.priority[0], lo), min(pushed.priority[1], hi))
        return True
    if column == "put_time":
        if isinstance(f, In) or not isinstance(values[0], datetime) or values[0].tzinfo is None:
            return False  # a TIMESTAMP_NTZ literal compares otherwise: Spark's
        us = (values[0] - EPOCH) // timedelta(microseconds=1)
        lo, hi = _window(f, us, None, None)
        old_lo, old_hi = pushed.put_time
        pushed.put_time = (_pick(max, old_lo, lo), _pick(min, old_hi, hi))
        return True
    return False


def _window(f: Any, value: int, lo: int | None, hi: int | None) -> tuple[int | None, int | None]:
    """The inclusive window of integers one comparison keeps."""
    from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, LessThan

    if isinstance(f, EqualTo):
        return value, value
    if isinstance(f, GreaterThan):
        return value + 1, hi
    if isinstance(f, GreaterThanOrEqual):
        return value, hi
    if isinstance(f, LessThan):
        return lo, value - 1
    return lo, value


def _pick(how: Any, a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return int(how(a, b))


def queue_names(pushed: Pushed, names: Iterable[str]) -> list[str] | None:
    """The queues to plan among the stores' `names`: None (all) without a queue filter."""
    allowed = pushed.sets.get("queue")
    if allowed is None:
        return None
    return sorted({n for n in names if n in allowed})


def narrow(ranges: list[ScanRange], pushed: Pushed) -> list[ScanRange]:
    """The ranges cut to the priority window, without the in-flight table when only available
    messages are wanted."""
    states = pushed.sets.get("state")
    out = []
    lo, hi = pushed.priority
    for r in ranges:
        if r.table == MSG_TABLE:
            if states is None or states - {AVAILABLE}:
                out.append(r)
            continue
        if (lo, hi) == (0, MAX_PRIORITY):
            out.append(r)
            continue
        for qid, name in sorted(r.queues.items()):
            start = max(r.start, keys.queue_prefix(qid) + bytes((MAX_PRIORITY - hi,)))
            end_key = keys.queue_prefix(qid) + bytes((MAX_PRIORITY - lo + 1,))
            end = end_key if r.end is None else min(r.end, end_key)
            if start < end:
                out.append(replace(r, start=start, end=end, queues={qid: name}))
    return out


def reads_reports_only(pushed: Pushed) -> bool:
    return pushed.sets.get("class") == frozenset({"report"})


def keep(batch: pa.RecordBatch, pushed: Pushed) -> pa.RecordBatch:
    """The rows of `batch` every pushed filter passes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pushed.any():
        return batch
    mask = None
    names = batch.schema.names

    def both(m: Any) -> None:
        nonlocal mask
        mask = m if mask is None else pc.and_(mask, m)

    for column, allowed in pushed.sets.items():
        if column in names:
            both(pc.is_in(batch.column(column), value_set=pa.array(sorted(allowed), pa.string())))
    if "priority" in names and pushed.priority != (0, MAX_PRIORITY):
        col = batch.column("priority")
        both(pc.and_(pc.greater_equal(col, pushed.priority[0]), pc.less_equal(col, pushed.priority[1])))
    lo, hi = pushed.put_time
    if "put_time" in names and (lo, hi) != (None, None):
        us = pc.cast(batch.column("put_time"), pa.int64())
        if lo is not None:
            both(pc.greater_equal(us, lo))
        if hi is not None:
            both(pc.less_equal(us, hi))
    if mask is None:
        return batch
    return batch.filter(pc.fill_null(mask, False))


def log_read(path: str, r: ScanRange, rows: int) -> None:
    """One line per key range read, appended to `path` (the source's `readLog` option): what a
    query read, for tests and for seeing what pushdown saves. Lines are short single writes
    to an O_APPEND file, so the workers' lines do not mix."""
    line = json.dumps({"store": r.store.path, "guid": r.store.guid, "table": r.table,
                       "start": r.start.hex(), "end": None if r.end is None else r.end.hex(),
                       "queues": sorted(r.queues.values()), "rows": rows}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)
