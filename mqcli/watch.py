"""`mqcli stats --watch`: a live table of the queues that fits the terminal at any width.

Each refresh reads the per-queue counters once (`Store.stats`, one read transaction, no walk over
the messages: docs/design.md) and draws them at the terminal's width at that moment, so a resize
takes effect at once. Put and get rates are the change of the cumulative counters
(store/queue_counters.py) between two refreshes, divided by the time between them, like
`rate()` over Prometheus counters. A queue name too long for its column is shortened in the
middle, where names of one family differ least (`dead-l…r` and `dead-l…r-tx`), and never to a
text another name also shows: when no shortening keeps them apart, the names wrap whole. A
terminal too narrow for any table gets a record per queue instead (its name whole on a line,
then its figures). Ctrl-C ends the watch with exit 0, like `watch` and `top`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .render import age, human_bytes

if TYPE_CHECKING:
    from store import Store
    from store.engine import QueueStats

ELLIPSIS = "…"
WIDE = 160  # from this many columns each in-flight state and the last put/get get a column
_MIN_NAME = 6
RATE_WINDOW = 5.0  # seconds of readings a rate is taken over (one interval if longer)


def shorten_middle(name: str, width: int, tail: int | None = None) -> str:
    """`name` in at most `width` characters: whole if it fits, else its first and last
    characters around an ellipsis (`tail` of them at the end; default: half)."""
    if len(name) <= width:
        return name
    keep = max(width - 1, 0)
    tail = keep // 2 if tail is None else tail
    return name[:keep - tail] + ELLIPSIS + (name[len(name) - tail:] if tail else "")


def _tails(keep: int) -> Iterable[int]:
    """The split points to try, the balanced one first, then leaning to either end."""
    mid = keep // 2
    yield mid
    for step in range(1, keep):
        for tail in (mid + step, mid - step):
            if 0 < tail < keep:
                yield tail


def unambiguous_names(names: Sequence[str], width: int) -> dict[str, str] | None:
    """Each name in at most `width` characters, long ones shortened in the middle, all the
    shown texts distinct (and none the text of another name); None when no way of shortening
    to `width` keeps them apart."""
    if all(len(n) <= width for n in names):
        return {n: n for n in names}
    if width < 3:
        return None
    for tail in _tails(width - 1):
        shown = {n: shorten_middle(n, width, tail) for n in names}
        if len(set(shown.values())) == len(shown):
            return shown
    return None


class Rates:
    """Per-second rates of cumulative counters over the last `window` seconds of readings (at
    least the last two readings), so that a short interval does not make them flicker."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._readings: dict[str, deque[tuple[float, dict[str, int]]]] = {}

    def update(self, name: str, totals: dict[str, int], at: float) -> dict[str, float | None]:
        readings = self._readings.setdefault(name, deque())
        readings.append((at, dict(totals)))
        while len(readings) > 2 and readings[1][0] <= at - self.window:
            readings.popleft()
        first_at, first = readings[0]
        if at <= first_at:
            return {k: None for k in totals}
        # a counter that went down (the queue was deleted and made again) counts from zero
        return {k: max(v - first.get(k, 0), 0) / (at - first_at) for k, v in totals.items()}


def rate_text(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 10:
        return f"{value:.1f}"
    if value < 10_000:
        return f"{value:.0f}"
    return f"{value / 1000:.0f}k"


def quota_text(used: int, quota: int) -> str:
    if not quota:
        return "-"
    pct = 100 * used / quota
    return f"{pct:.1f}%" if pct < 10 else f"{pct:.0f}%"


_STATES = [("available", "avail"), ("put-unconfirmed", "put-unc"), ("get-unconfirmed", "get-unc"),
           ("browse-get-unconfirmed", "brw-get"), ("locked-browse", "locked"), ("tx-locked", "tx")]


@dataclass
class Column:
    key: str
    header: str
    wide_only: bool = False
    narrow_only: bool = False


COLUMNS = [
    Column("queue", "queue"), Column("depth", "depth"), Column("bytes", "bytes"),
    Column("put_rate", "put/s"), Column("get_rate", "get/s"), Column("quota", "quota"),
    Column("in_flight", "in flight", narrow_only=True),
    *[Column(state, header, wide_only=True) for state, header in _STATES],
    Column("oldest", "oldest"), Column("last_put", "last put", wide_only=True),
    Column("last_get", "last get", wide_only=True), Column("by_priority", "by priority"),
]


def rows(stats: Sequence[QueueStats], rates: Rates, now_us: int, at: float) -> list[dict[str, str]]:
    """The cells of each queue, as text."""
    out = []
    for q in stats:
        r = rates.update(q.name, {"put": q.totals.get("put_messages", 0), "get": q.totals.get("got_messages", 0)}, at)
        row = {
            "queue": q.name, "depth": str(q.depth), "bytes": human_bytes(q.bytes),
            "put_rate": rate_text(r["put"]), "get_rate": rate_text(r["get"]),
            "quota": quota_text(q.bytes, q.quota),
            "in_flight": str(q.depth - q.by_state.get("available", 0)),
            "oldest": age(q.oldest_put_time, now_us),
            "last_put": age(q.last_put, now_us), "last_get": age(q.last_get, now_us),
            "by_priority": " ".join(f"p{p}:{n}" for p, n in sorted(q.by_priority.items()) if n) or "-",
        }
        row.update({state: str(q.by_state.get(state, 0)) for state, _ in _STATES})
        out.append(row)
    return out


def table(cells: list[dict[str, str]], width: int, title: str) -> Any:
    """A rich Table of `cells` that fits `width` columns."""
    from rich.table import Table

    wide = width >= WIDE
    columns = [c for c in COLUMNS if not (c.wide_only and not wide) and not (c.narrow_only and wide)]
    t = Table(title=title, box=None, pad_edge=False, header_style="bold", expand=False)

    def need(c: Column) -> int:
        return max([len(c.header), *(len(r[c.key]) for r in cells)])

    fixed = sum(need(c) for c in columns if c.key not in ("queue", "by_priority"))
    gaps = 2 * (len(columns) - 1)  # rich's padding (0, 1) between columns
    longest = max((len(r["queue"]) for r in cells), default=5)
    # the priorities may wrap; the names take what is left, but never less than a few characters
    room = width - fixed - gaps - min(need(COLUMNS[-1]), 12)
    if room < _MIN_NAME:  # no table fits: a record per queue, its name whole on a line of its own
        return records(cells, width, title)
    name_width = min(longest, room)
    shown = unambiguous_names([r["queue"] for r in cells], name_width)
    for c in columns:
        if c.key == "queue":
            if shown is None:  # no shortening keeps the names apart: they wrap, whole
                t.add_column(c.header, overflow="fold", width=name_width)
            else:
                t.add_column(c.header, no_wrap=True, min_width=min(name_width, max(len(v) for v in shown.values())))
        elif c.key == "by_priority":
            t.add_column(c.header, overflow="fold")
        else:
            t.add_column(c.header, justify="right", no_wrap=True)
    for r in cells:
        values = []
        for c in columns:
            v = r[c.key]
            values.append(shown[v] if c.key == "queue" and shown is not None else v)
        t.add_row(*values)
    return t


def records(cells: list[dict[str, str]], width: int, title: str) -> Any:
    """For a terminal too narrow for the table: each queue's name on its own line (whole: never
    ambiguous), then its figures as `label value` items packed into lines of `width`."""
    from rich.console import Group
    from rich.text import Text

    lines: list[Text] = [Text(title, style="bold")]
    for r in cells:
        lines.append(Text(r["queue"], style="bold", overflow="fold"))
        items = [f"{c.header} {r[c.key]}" for c in COLUMNS if c.key != "queue" and not c.wide_only]
        line = ""
        for item in items:
            if line and len(line) + 2 + len(item) > width:
                lines.append(Text(line, overflow="fold"))
                line = ""
            line = f"{line}  {item}" if line else f"  {item}"
        lines.append(Text(line, overflow="fold"))
    return Group(*lines)


class _Frame:
    """The latest reading, laid out at the console's width each time it is drawn."""

    def __init__(self, cells: list[dict[str, str]], title: str) -> None:
        self.cells, self.title = cells, title

    def __rich_console__(self, console: Any, options: Any) -> Any:
        yield table(self.cells, options.max_width, self.title)


def watch(st: Store, seconds: float) -> None:
    """Redraw the table every `seconds` until Ctrl-C (exit 0); SIGTERM stays exit 143."""
    from rich.console import Console
    from rich.live import Live

    from .signals import Terminated, deferred

    rates = Rates(window=max(seconds, RATE_WINDOW))

    def frame() -> _Frame:
        at = time.monotonic()
        stats = st.stats()
        now_us = int(time.time() * 1_000_000)
        return _Frame(rows(stats, rates, now_us, at),
                      f"mqcli stats — {time.strftime('%H:%M:%S')} — every {seconds:g}s, Ctrl-C to end")

    live = Live(frame(), console=Console(), refresh_per_second=4)
    try:
        with deferred():  # a signal inside rich's start or stop would leave stderr redirected into the table
            live.start(refresh=True)
        while True:
            time.sleep(seconds)
            live.update(frame(), refresh=True)
    except Terminated:
        raise
    except KeyboardInterrupt:
        return
    finally:
        with deferred():
            live.stop()
