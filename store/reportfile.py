"""Report rows from a file: an export of a report queue that no mqcli store wrote (a Windows
Message Queuing report queue read with System.Messaging, say), for `analyze routes --reports`
and `trace route --reports`.

A file is JSON Lines (one object a line) or CSV with a header line; JSON Lines when its name
ends in .jsonl or .json, CSV when it ends in .csv, else by its first character (`{`: JSON
Lines). Each row has three fields, named case-insensitively (other fields are ignored):

- `label`: the report's label, in any form Windows documents (store/trace.py), NUL or not;
- `body`: the report's body text (`<MESSAGE ID>…` with its CR LF);
- `arrived`: when the report arrived at the report queue, ISO-8601 with a UTC offset or `Z`
  (e.g. `2026-11-22T15:15:42.1234567Z`; digits beyond µs are dropped), within the times a
  store holds (MIN_US..MAX_US).

A report's time (`ReportRow.time`, event_times) is when its event happened, as its label
says ([MS-MQQB] 3.1.5.8.9: the label's time-date is the writing queue manager's clock at the
event), not when it arrived: reports of one message travel back to the report queue by
different paths, so their arrival order is not their events' order. The label keeps whole
seconds (or whole minutes, when it leaves the seconds out): within that precision a step is
not put before the step it follows in its route, so the precision is never read as a negative
latency; a label that is a whole second (or minute) or more before the previous step's keeps
its own time (the two queue managers' clocks disagree, and the route shows it). A report
whose label has no time (a conflict report, or a label that does not decode) is at its
arrival; it is no step of a route.

A label or body that does not decode is data like any report's (counted as undecodable); a
row that is not a row (not an object, a field missing or not a string, a time that is not
one or is outside the times a store holds, a column named twice) is malformed: BadData (exit
12) naming the row (1-based, the header line not counted) and the column. The input is
bounded: at most MAX_FILE_BYTES bytes and MAX_ROWS rows.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from . import trace
from .errors import BadData, InvalidArgument, TraceFormatError
from .records import MAX_US, MIN_US

MAX_FILE_BYTES = 256 << 20
MAX_ROWS = 1_000_000
COLUMNS = ("label", "body", "arrived")
# ISO-8601 with up to 9 fractional digits (.NET's round-trip format gives 7) and an offset
_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)", re.ASCII)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The times a store holds are records.MIN_US..MAX_US: what iso_time writes and parse_iso_time
# reads (datetime's years 1 to 9999, UTC; Spark's TIMESTAMP has the same range). An offset can
# take a time written in range out of it (9999-12-31T23:59:59-01:00 is in the year 10000, UTC).


@dataclass(frozen=True, slots=True)
class ReportRow:
    label: str
    body: str
    arrived: int  # µs since the epoch, UTC: when it reached the report queue
    time: int     # µs since the epoch, UTC: when its event happened (event_times)
    row: int      # its number in the file, as errors name it (1-based, the header line not counted)


def read(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES, max_rows: int = MAX_ROWS) -> list[ReportRow]:
    """The rows of the report file at `path` (see the module docstring)."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise InvalidArgument(f"cannot read the reports file {str(p)!r}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise BadData(f"{p}: the reports file is larger than {max_bytes:,} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadData(f"{p}: not UTF-8 text (byte {exc.start + 1})") from None
    suffix = p.suffix.lower()
    jsonl = suffix in (".jsonl", ".json") or (suffix != ".csv" and text.lstrip()[:1] == "{")
    rows = _jsonl_rows(p, text, max_rows) if jsonl else _csv_rows(p, text, max_rows)
    read_rows = [(n, *_row(p, n, fields)) for n, fields in rows]
    times = event_times([(label, arrived) for _, label, _, arrived in read_rows])
    return [ReportRow(label, body, arrived, time, n) for (n, label, body, arrived), time in zip(read_rows, times)]


def event_times(rows: list[tuple[str, int]]) -> list[int]:
    """The time of each report (label, arrival µs), in µs, as the module docstring says:
    `trace route --reports` and `analyze routes --reports` both take their times from here.

    The reports of one route (its labels' qm-id and message-id) are walked in route order:
    hop, then a `received by` (the arrival, or the first enqueue at hop 0) before a `sent
    from` (the departure) of the same hop, then the label's time, then the file's order. A
    step's time is its label's, or the previous step's when that is inside the label's
    precision (the label cannot tell them apart)."""
    times = [arrived for _, arrived in rows]
    routes: dict[tuple[str, int], list[tuple[int, int, int, int, int]]] = {}
    for i, (text, _) in enumerate(rows):
        try:
            label = trace.decode_label(text)
        except TraceFormatError:
            continue
        if label.time is None or label.qm_id is None or label.message_id is None or label.hops is None:
            continue  # a conflict report names no time and no route
        at = (label.time - _EPOCH) // timedelta(microseconds=1)
        precision = 1_000_000 if label.has_seconds else 60_000_000
        routes.setdefault((label.qm_id.upper(), label.message_id), []).append(
            (label.hops, label.event == trace.SENT, at, i, precision))
    for steps in routes.values():
        steps.sort()
        previous: int | None = None
        for _, _, at, i, precision in steps:
            if previous is not None and at <= previous < at + precision:
                at = previous
            times[i] = previous = at
    return times


def _too_many(p: Path, max_rows: int) -> BadData:
    return BadData(f"{p}: more than {max_rows:,} rows")


def _jsonl_rows(p: Path, text: str, max_rows: int) -> list[tuple[int, dict[str, object]]]:
    rows: list[tuple[int, dict[str, object]]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if len(rows) == max_rows:
            raise _too_many(p, max_rows)
        try:
            obj = json.loads(line, object_pairs_hook=_Pairs)
        except ValueError as exc:
            raise BadData(f"{p}: row {n}: not a JSON object: {exc}") from None
        if not isinstance(obj, _Pairs):
            raise BadData(f"{p}: row {n}: not a JSON object")
        fields: dict[str, object] = {}
        for key, value in obj:
            name = key.casefold()
            if name in fields and name in COLUMNS:
                raise BadData(f"{p}: row {n}, column {name!r}: named twice")
            fields[name] = value
        rows.append((n, fields))
    return rows


class _Pairs(list[tuple[str, object]]):
    """A JSON object's members as written, so that a name given twice (which json.loads would
    silently resolve to the last) can be refused."""


def _csv_rows(p: Path, text: str, max_rows: int) -> list[tuple[int, dict[str, object]]]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            return []
        names = [h.strip().casefold() for h in header]
        missing = [c for c in COLUMNS if c not in names]
        if missing:
            raise BadData(f"{p}: row 0 (the header): no column {missing[0]!r} (the columns are "
                          f"{', '.join(COLUMNS)})")
        twice = [c for c in COLUMNS if names.count(c) > 1]
        if twice:
            raise BadData(f"{p}: row 0 (the header): column {twice[0]!r} is named {names.count(twice[0])} times")
        rows: list[tuple[int, dict[str, object]]] = []
        for n, cells in enumerate(reader, 1):
            if not cells:
                continue
            if len(rows) == max_rows:
                raise _too_many(p, max_rows)
            if len(cells) != len(names):
                raise BadData(f"{p}: row {n}: {len(cells)} columns, the header has {len(names)}")
            rows.append((n, dict(zip(names, cells))))
        return rows
    except csv.Error as exc:
        raise BadData(f"{p}: row {reader.line_num}: not CSV: {exc}") from None


def _row(p: Path, n: int, fields: dict[str, object]) -> tuple[str, str, int]:
    """(label, body, arrival µs) of row `n`."""
    values = []
    for c in COLUMNS:
        v = fields.get(c)
        if not isinstance(v, str):
            raise BadData(f"{p}: row {n}, column {c!r}: " + ("missing" if v is None else "not a string"))
        values.append(v)
    return values[0], values[1], parse_time(values[2], f"{p}: row {n}, column 'arrived'")


def parse_time(text: str, where: str) -> int:
    """ISO-8601 with a UTC offset or Z, in µs since the epoch, within MIN_US..MAX_US."""
    m = _TIME.fullmatch(text.strip())
    try:
        if m is None:
            raise ValueError
        whole = datetime.fromisoformat(m[1] + ("+00:00" if m[3] == "Z" else m[3]))
    except ValueError:
        raise BadData(f"{where}: {text[:60]!r} is not an ISO-8601 time with a UTC offset or Z "
                      "(e.g. 2026-11-22T15:15:42.123Z)") from None
    # by subtraction, not astimezone(UTC): the UTC time of one in range may be out of range
    us = (whole - _EPOCH) // timedelta(microseconds=1) + int((m[2] or "").ljust(6, "0")[:6])
    if not MIN_US <= us <= MAX_US:
        raise BadData(f"{where}: {text[:60]!r} is outside the times a store holds "
                      "(0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z, UTC)")
    return us
