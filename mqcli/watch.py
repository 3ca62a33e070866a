"""`mqcli stats --watch`: a live table of the queues on a terminal, a snapshot per interval
anywhere else.

Each refresh reads the per-queue counters once (`Store.stats`, one read transaction, no walk over
the messages: docs/design.md). Put and get rates are the change of the cumulative counters
(store/queue_counters.py) between two refreshes, divided by the time between them, like
`rate()` over Prometheus counters; a terminal, a pipe and a file get the same rates.

On a terminal (text output), the table is redrawn in place at the terminal's width at that
moment, so a resize takes effect at once. A queue name too long for its column is shortened in
the middle, where names of one family differ least (`dead-l…r` and `dead-l…r-tx`), and never to
a text another name also shows: when no shortening keeps them apart, the names wrap whole. A
terminal too narrow for any table gets a record per queue instead (its name whole on a line,
then its figures).

To a pipe or a file (or with `-o jsonl` anywhere), each interval's snapshot is appended and
flushed, as `vmstat 1` does: in text a line `mqcli stats — <UTC time> — every <interval>`, then
the table with every column and every name whole, then an empty line; in jsonl one object per
queue per interval, the object `stats -o jsonl` prints for the queue plus `time` (when the
counters were read, the same for every queue of one interval) and `put_rate` and `get_rate`
(messages per second, null until a second reading). `-o json` is one document and a watch never
ends, so the command refuses it. A reader that goes away (`| head -1`) ends the watch at once
with exit 141 (README.md#exit-codes), also while it waits for the next interval.

Ctrl-C ends the watch with exit 0, like `watch` and `top`; SIGTERM stays exit 143. A snapshot
being written when either comes is finished first (a file never ends in half a line), unless
its reader has stalled (mqcli/signals.py Deferral.writing).
"""

from __future__ import annotations

import os
import select
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import pairwise
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .render import age, human_bytes
from .signals import Terminated, deferred

if TYPE_CHECKING:
    from store import Store
    from store.engine import QueueStats

    from .render import Output

    # what `stats -o jsonl` prints for one queue, given the time its counters were read (µs)
    Record = Callable[[QueueStats, int], dict[str, Any]]

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
        # by queue name: the queue's identity (its guid) and its readings
        self._readings: dict[str, tuple[str, deque[tuple[float, dict[str, int]]]]] = {}

    def update(self, name: str, totals: dict[str, int], at: float, identity: str = "") -> dict[str, float | None]:
        """The rates of queue `name` with its counters `totals` read at `at`. A queue of that
        name with another `identity` (deleted and made again) starts with no readings: its
        counters count from zero, and the old queue's readings say nothing of them."""
        known = self._readings.get(name)
        if known is None or known[0] != identity:
            known = self._readings[name] = (identity, deque())
        readings = known[1]
        readings.append((at, dict(totals)))
        while len(readings) > 2 and readings[1][0] <= at - self.window:
            readings.popleft()
        first_at = readings[0][0]
        if at <= first_at:
            return {k: None for k in totals}
        # the increases between readings; a counter that went down (a store restored from a
        # backup) counted from zero, as Prometheus' rate() takes a reset
        return {k: sum(b.get(k, 0) - a.get(k, 0) if b.get(k, 0) >= a.get(k, 0) else b.get(k, 0)
                       for (_, a), (_, b) in pairwise(readings)) / (at - first_at)
                for k in totals}


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


def queue_rates(q: QueueStats, rates: Rates, at: float) -> dict[str, float | None]:
    """The put and get rates of `q` read at `at`: the one source of the rates every output shows."""
    return rates.update(q.name, {"put": q.totals.get("put_messages", 0), "get": q.totals.get("got_messages", 0)}, at,
                        q.guid)


def rows(stats: Sequence[QueueStats], rates: Rates, now_us: int, at: float) -> list[dict[str, str]]:
    """The cells of each queue, as text."""
    out = []
    for q in stats:
        r = queue_rates(q, rates, at)
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


def watch(st: Store, seconds: float, out: Output, record: Record) -> None:
    """Show the queues every `seconds` until Ctrl-C (exit 0); SIGTERM stays exit 143. A live
    table on a terminal in text; else a snapshot appended per interval, in text or jsonl
    (`record` gives a queue's object); `-o json` is the caller's to refuse."""
    rates = Rates(window=max(seconds, RATE_WINDOW))
    fd = _fileno(out)
    try:
        if out.mode != "jsonl" and fd is not None and os.isatty(fd):
            _live(st, seconds, rates)
        else:
            _snapshots(st, seconds, rates, out, record, fd)
    except KeyboardInterrupt as exc:
        if isinstance(exc, Terminated):
            raise


def _read(st: Store) -> tuple[list[QueueStats], float, int]:
    """The counters of every queue, when they were read (for the rates) and the time (µs)."""
    at = time.monotonic()
    stats = st.stats()
    return stats, at, int(time.time() * 1_000_000)


def _live(st: Store, seconds: float, rates: Rates) -> None:
    from rich.console import Console
    from rich.live import Live

    def frame() -> _Frame:
        stats, at, now_us = _read(st)
        return _Frame(rows(stats, rates, now_us, at),
                      f"mqcli stats — {time.strftime('%H:%M:%S')} — every {seconds:g}s, Ctrl-C to end")

    live = Live(frame(), console=Console(), refresh_per_second=4)
    try:
        with deferred():  # a signal inside rich's start or stop would leave stderr redirected into the table
            live.start(refresh=True)
        while True:
            time.sleep(seconds)
            live.update(frame(), refresh=True)
    finally:
        with deferred():
            live.stop()


def _snapshots(st: Store, seconds: float, rates: Rates, out: Output, record: Record, fd: int | None) -> None:
    """Append a snapshot each interval, each written whole and flushed (Output._write: a reader
    that went away is OutputClosed, exit 141)."""
    from .render import iso, json_line

    watching = fd  # the output whose reader's going ends the wait for the next interval
    while True:
        stats, at, now_us = _read(st)
        if out.mode == "jsonl":
            when = iso(now_us)
            data = b"".join(json_line({"time": when, **record(q, now_us), **_rate_fields(queue_rates(q, rates, at))})
                            + b"\n" for q in stats)
        else:
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now_us // 1_000_000))
            data = _text_snapshot(rows(stats, rates, now_us, at), f"mqcli stats — {when} — every {seconds:g}s")
        with deferred() as gate, gate.writing(lambda: None):  # a signal waits for the snapshot's end
            out._write(data)
        if watching is None:
            time.sleep(seconds)
        elif _reader_left(watching, seconds):
            # a snapshot is written at once: a closed pipe raises there. If the write goes
            # through (a hang-up that still takes writes), the intervals go back to sleeping,
            # so that an event that stays raised does not make this loop spin.
            watching = None


def _rate_fields(rates: dict[str, float | None]) -> dict[str, float | None]:
    return {f"{k}_rate": None if v is None else round(v, 3) for k, v in rates.items()}


def _text_snapshot(cells: list[dict[str, str]], title: str) -> bytes:
    """The title line, the table with every column and every name whole (a file has no width
    to fit), no colour, then an empty line."""
    from io import StringIO

    from rich.console import Console

    width = max(WIDE, sum(max([len(c.header), *(len(r[c.key]) for r in cells)]) + 2 for c in COLUMNS))
    buffer = StringIO()
    # markup off: a cell is text, never rich markup
    Console(file=buffer, width=width, color_system=None, force_terminal=False, markup=False,
            highlight=False).print(table(cells, width, ""))
    lines = [line.rstrip() for line in buffer.getvalue().splitlines()]
    return "\n".join([title, *lines, "", ""]).encode("utf-8")


def _fileno(out: Output) -> int | None:
    """The descriptor `out` writes to; None for one in memory (a `batch` line's output)."""
    try:
        return out.out.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _reader_left(fd: int, seconds: float) -> bool:
    """Wait `seconds`; True, early, when `fd` reports an error or hang-up: a pipe whose reader
    closed (`| head -1`) reports POLLERR, a socket whose peer left POLLHUP. Asking for no event
    keeps a file or a pipe with room from waking the wait (those two conditions are reported
    whatever is asked)."""
    poller = select.poll()
    poller.register(fd, 0)
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if poller.poll(min(left, 86400) * 1000):  # poll takes at most 2**31 ms at a time
            return True
    return False
