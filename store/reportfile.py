"""Report rows from a file: an export of a report queue that no mqcli store wrote (a Windows
Message Queuing report queue read with System.Messaging, say), for `analyze routes --reports`
and `trace route --reports`.

A file is JSON Lines (one object a line) or CSV with a header line; JSON Lines when its name
ends in .jsonl or .json, CSV when it ends in .csv, else by its first character (`{`: JSON
Lines). Each row has three fields, named case-insensitively (other fields are ignored):

- `label`: the report's label, in any form Windows documents (store/trace.py), NUL or not;
- `body`: the report's body text (`<MESSAGE ID>…` with its CR LF);
- `arrived`: when the report arrived, ISO-8601 with a UTC offset or `Z`
  (e.g. `2026-11-22T15:15:42.1234567Z`; digits beyond µs are dropped).

A label or body that does not decode is data like any report's (counted as undecodable); a
row that is not a row (not an object, a field missing or not a string, a time that is not
one) is malformed: BadData (exit 12) naming the row (1-based, the header line not counted)
and the column. The input is bounded: at most MAX_FILE_BYTES bytes and MAX_ROWS rows.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .errors import BadData, InvalidArgument

MAX_FILE_BYTES = 256 << 20
MAX_ROWS = 1_000_000
COLUMNS = ("label", "body", "arrived")
# ISO-8601 with up to 9 fractional digits (.NET's round-trip format gives 7) and an offset
_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)", re.ASCII)


@dataclass(frozen=True, slots=True)
class ReportRow:
    label: str
    body: str
    arrived: int  # µs since the epoch, UTC


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
    return [_row(p, n, fields) for n, fields in rows]


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
            obj = json.loads(line)
        except ValueError as exc:
            raise BadData(f"{p}: row {n}: not a JSON object: {exc}") from None
        if not isinstance(obj, dict):
            raise BadData(f"{p}: row {n}: not a JSON object")
        rows.append((n, {str(k).casefold(): v for k, v in obj.items()}))
    return rows


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


def _row(p: Path, n: int, fields: dict[str, object]) -> ReportRow:
    values = []
    for c in COLUMNS:
        v = fields.get(c)
        if not isinstance(v, str):
            raise BadData(f"{p}: row {n}, column {c!r}: " + ("missing" if v is None else "not a string"))
        values.append(v)
    return ReportRow(values[0], values[1], parse_time(values[2], f"{p}: row {n}, column 'arrived'"))


def parse_time(text: str, where: str) -> int:
    """ISO-8601 with a UTC offset or Z, in µs since the epoch."""
    m = _TIME.fullmatch(text.strip())
    try:
        if m is None:
            raise ValueError
        whole = datetime.fromisoformat(m[1] + ("+00:00" if m[3] == "Z" else m[3]))
    except ValueError:
        raise BadData(f"{where}: {text[:60]!r} is not an ISO-8601 time with a UTC offset or Z "
                      "(e.g. 2026-11-22T15:15:42.123Z)") from None
    micros = int((m[2] or "").ljust(6, "0")[:6])
    return int(whole.astimezone(UTC).timestamp()) * 1_000_000 + micros
