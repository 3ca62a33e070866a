"""Trace reports decoded where they are read: the `trace_*` columns of the `mqstore` source
(docs/design.md#trace-reports).

`analyze routes` needs of each report its route's identity, hop count, computer, event and the
body's target queue. Decoded by Spark SQL expressions (labels.py) that costs the JVM more than
the whole read (a large generated method per row, the body's regular expression per report);
decoded here, by store/trace.py's own decoders, it costs the Python worker that reads the
records a few microseconds a report and the rows Spark gets are a few integers and two short
strings. Parquet exports and reports files still go through labels.py; both decoders are held
to the same vectors (tests/vectors/), so the figures are the same either way.

- `trace_route` (long): the label's identity, qm_id (4 hex digits) × 2³² + message_id, as
  routes.py keys a route; null when the label is not a `received by`/`sent from` label.
- `trace_hops` (int), `trace_computer` (string: a GUID lowercase, else the machine name).
- `trace_computer_hi`, `trace_computer_lo` (long), `trace_computer_name` (string): the
  computer as `analyze routes` keys a step (computers.py): a GUID as two numbers (and no
  name), a machine name as itself (and no numbers).
- `trace_event` (string): `received`, `sent`, `conflict`, or null for a label that does not
  decode.
- `trace_queue` (string): the body's target queue as written, null when the body does not
  decode.

Labels come in bursts that share all but their head (every hop of every message traced through
one computer in one second), so a label is decoded once per distinct rest, its route and hop
count read from the head. A body is `<MESSAGE ID>` eight hex digits `</MESSAGE ID>` CR LF, then the rest (the target queue
and the optional elements): whether it decodes, and its queue, depend on the rest alone once the
head has that exact shape, and every message to one queue shares the rest. Bodies are therefore
decoded once per distinct rest (per Python worker), not once per report; any other head is
decoded whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..errors import BadData
from ..trace import ReportLabel, decode_body, decode_label
from .computers import KEY_FIELDS, key_of

TRACE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("trace_route", "long"), ("trace_hops", "int"), ("trace_computer", "string"),
    ("trace_computer_hi", "long"), ("trace_computer_lo", "long"), ("trace_computer_name", "string"),
    ("trace_event", "string"), ("trace_queue", "string"),
)
TRACE_COLUMN_NAMES = frozenset(name for name, _ in TRACE_COLUMNS)
# the computer's key (computers.py), in computers.KEY_FIELDS' order
COMPUTER_KEY_COLUMNS = tuple(f"trace_computer_{part}" for part in KEY_FIELDS)
_LABEL_COLUMNS = ("trace_route", "trace_hops", "trace_computer", "trace_event")  # label_fields' order

# the head as the encoder writes it ([MS-MQQB] `Report`: "<MESSAGE ID>" id "</MESSAGE ID>" CR LF)
_BODY_HEAD = re.compile(rb"<MESSAGE ID>[0-9A-Fa-f]{8}</MESSAGE ID>\r\n")
_HEAD_LENGTH = 35
_RESTS: dict[bytes, str | None] = {}  # a body's rest → its target queue (None: does not decode)
_MAX_RESTS = 65536
# a label's head, `qm_id:message_id:hops `: fixed width, so a label with
# this head decodes exactly when its rest (event, computer, time-date) does (store/trace.py)
_LABEL_HEAD = re.compile(r"[0-9A-Fa-f]{4}:[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2} ", re.ASCII)
_LABEL_HEAD_LENGTH = 17
# a label's rest → (event, computer, whether it decodes)
_LABEL_RESTS: dict[str, tuple[str | None, str | None, bool]] = {}


def body_queue(body: bytes) -> str | None:
    """The target queue of a report body (bytes as stored), None when it does not decode."""
    if _BODY_HEAD.match(body) is None:
        return _decoded_queue(body)
    rest = body[_HEAD_LENGTH:]
    try:
        return _RESTS[rest]
    except KeyError:
        pass
    queue = _decoded_queue(body)
    if len(_RESTS) >= _MAX_RESTS:
        _RESTS.clear()
    _RESTS[rest] = queue
    return queue


def _decoded_queue(body: bytes) -> str | None:
    try:
        return decode_body(body.decode("utf-8", "surrogateescape")).queue
    except BadData:
        return None


def label_fields(text: str) -> tuple[int | None, int | None, str | None, str | None]:
    """(trace_route, trace_hops, trace_computer, trace_event) of one report label."""
    if _LABEL_HEAD.match(text) is None:  # a conflict label, or one that does not decode
        label = _label(text)
        return None, None, None, None if label is None else label.event
    rest = text[_LABEL_HEAD_LENGTH:]
    fields = _LABEL_RESTS.get(rest)
    if fields is None:
        label = _label(text)
        fields = (None, None, False) if label is None else (label.event, label.computer, True)
        if len(_LABEL_RESTS) >= _MAX_RESTS:
            _LABEL_RESTS.clear()
        _LABEL_RESTS[rest] = fields
    if not fields[2]:
        return None, None, None, fields[0]
    # qm_id:message_id as twelve hex digits is qm_id × 2³² + message_id
    return int(text[0:4] + text[5:13], 16), int(text[14:16], 16), fields[1], fields[0]


def trace_values(labels: Sequence[str], bodies: Sequence[bytes]) -> dict[str, list[Any]]:
    """The TRACE_COLUMNS of reports with these labels and bodies, each as one list."""
    fields = list(map(label_fields, labels))
    return ({name: [f[i] for f in fields] for i, name in enumerate(_LABEL_COLUMNS)}
            | computer_keys([f[2] for f in fields]) | {"trace_queue": list(map(body_queue, bodies))})


def computer_keys(computers: Sequence[str | None]) -> dict[str, list[Any]]:
    """The COMPUTER_KEY_COLUMNS of these computers, each as one list."""
    keys = [key_of(c) for c in computers]
    return {name: [k[i] for k in keys] for i, name in enumerate(COMPUTER_KEY_COLUMNS)}


def _label(text: str) -> ReportLabel | None:
    try:
        return decode_label(text)
    except BadData:
        return None
