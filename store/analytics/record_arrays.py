"""Arrow columns of stored records, a whole batch at a time: the `mqstore` source's fast path
(docs/design.md#pipeline).

`columns.record_batch` reads a batch field by field into Python lists (records.RecordColumns).
At two million trace reports that was most of what `analyze routes` cost: about 8 µs a report
in the Python workers, against 0.7 µs for reading the records out of LMDB. Here the records of
a batch become one Arrow binary array, whose buffer numpy reads as a table of fixed-size
headers (the layout records.py publishes: HEADER_FIELDS, HEADER_FORMAT), and each column asked
for is computed over the whole batch at once:

- header fields: a numpy column each; the ones a record leaves at zero when absent (`expires`,
  `confirm_id`, ...) are null there, as `records.decode` makes them None;
- optional strings: where each one starts follows from the lengths before it; each becomes an
  Arrow string view over the batch's own buffer (checked to be UTF-8), then a string array;
- properties (`prop_<name>`), and the trace columns from labels and bodies: the same parts
  repeat, so Arrow's dictionary encoding finds the distinct ones and only those are decoded
  in Python, by the decoders the per-record path uses (records.block_property,
  report_fields.label_fields and body_queue). A property block is one of a few; a trace
  label is a fixed-width head (`qm_id:message_id:hops `, read here as hex digits) and a rest
  shared by a computer's reports of one second; a trace body a fixed-width head and the rest
  naming the target queue. Labels and bodies without that head are decoded one by one.

Anything else raises `Unhandled`, and columns.record_batch reads the batch record by record,
which stays the reference (tests/test_analytics_record_arrays.py holds the two to the same
batches) and names what is wrong: a column not built here (`msg_id`, `unique_id`,
`lookup_id`, `body`, `props`), a record of another format version, one cut short or whose
lengths do not add up, text that is not UTF-8, an unknown state.

numpy comes with the `spark` extra (pyproject.toml), as pyarrow does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import records
from .kinds import PROPERTY_KIND, arrow_type
from .report_fields import COMPUTER_KEY_COLUMNS, TRACE_COLUMNS, body_queue, computer_keys, label_fields

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from .columns import StoreIdentity


class Unhandled(Exception):
    """This batch is for the per-record builder (columns.record_batch)."""


# the columns built here beyond the header's own fields, the trace columns and properties
_FLAG_COLUMNS = {"class", "delivery", "dead_letter", "trace"}
_CONSTANT_COLUMNS = {"store": "path", "store_name": "name", "store_guid": "guid"}
_HEADER_COLUMNS = {"seq": "seq", "priority": "priority", "app_specific": "app_specific", "put_time": "put_time",
                   "hops": "hops", "backouts": "backouts", "size": "n_body"}
_ZERO_IS_NULL = {"expires", "confirm_id", "lock_id", "tx", "lease_expires", "since"}
_TRACE_LABEL_COLUMNS = ("trace_route", "trace_hops", "trace_computer", "trace_event")  # label_fields' order
_BUILT = (_FLAG_COLUMNS | set(_CONSTANT_COLUMNS) | set(_HEADER_COLUMNS) | _ZERO_IS_NULL
          | set(records.OPTIONAL_STRINGS) | set(_TRACE_LABEL_COLUMNS) | set(COMPUTER_KEY_COLUMNS)
          | {"queue", "state", "trace_queue"})

# a label's head `qm_id:message_id:hops ` (report_fields._LABEL_HEAD) and a body's
# `<MESSAGE ID>` eight hex digits `</MESSAGE ID>` CR LF (report_fields._BODY_HEAD)
_LABEL_HEAD = 17
_LABEL_HEX = (0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12)  # qm_id and message_id: the route, 48 bits
_LABEL_HOPS = (14, 15)
_LABEL_FIXED = {4: ord(":"), 13: ord(":"), 16: ord(" ")}
_BODY_OPEN, _BODY_CLOSE = b"<MESSAGE ID>", b"</MESSAGE ID>\r\n"
_BODY_HEAD = len(_BODY_OPEN) + 8 + len(_BODY_CLOSE)
_BODY_DIGITS = slice(len(_BODY_OPEN), len(_BODY_OPEN) + 8)
_BODY_READ = -(-_BODY_HEAD // 8) * 8  # the head read as whole 64-bit words

_INLINE = 12  # the bytes an Arrow view holds itself
_NUMPY_CODES = {"B": "u1", "H": ">u2", "I": ">u4", "Q": ">u8", "i": ">i4", "q": ">i8"}
_TYPES: dict[str, Any] = {}  # the header's numpy type and the hex digit table, made on first use


def handles(columns: Sequence[tuple[str, str]]) -> bool:
    """Whether every one of these columns is built here."""
    return all(name in _BUILT or kind.startswith(PROPERTY_KIND) for name, kind in columns)


def _types() -> dict[str, Any]:
    if not _TYPES:
        import numpy as np

        parts = re.findall(r"(\d*)([A-Za-z])", records.HEADER_FORMAT.lstrip(">!"))
        header = np.dtype([(name, "S" + count if code == "s" else _NUMPY_CODES[code])
                           for name, (count, code) in zip(records.HEADER_FIELDS, parts, strict=True)])
        if header.itemsize != records.HEADER_SIZE:
            raise AssertionError("records.HEADER_FIELDS do not describe the record header")
        hex_digits = np.full(256, 0xFF, np.uint8)
        for value, c in enumerate(b"0123456789abcdef"):
            hex_digits[c] = value
        for value, c in enumerate(b"ABCDEF", 10):
            hex_digits[c] = value
        # a body head's fixed bytes, and the mask that keeps only those, as 64-bit words
        padding = bytes(_BODY_READ - _BODY_HEAD)
        body_fixed = _BODY_OPEN + bytes(8) + _BODY_CLOSE + padding
        body_mask = bytes(b and 0xFF for b in body_fixed)
        _TYPES.update(header=header, hex=hex_digits, body_fixed=np.frombuffer(body_fixed, "<u8"),
                      body_mask=np.frombuffer(body_mask, "<u8"))
    return _TYPES


def record_batch(raws: Sequence[bytes], queue_names: dict[int, str], where: StoreIdentity,
                 columns: Sequence[tuple[str, str]], report_only: bool = False) -> list[pa.Array] | None:
    """The arrays of `columns` (in order) from stored records of one store, kept as
    columns.record_batch keeps them; None if none is kept. Unhandled: see the module docstring."""
    if not raws or not handles(columns):
        raise Unhandled
    import numpy as np
    import pyarrow as pa

    types = _types()
    whole = pa.array(raws, pa.large_binary())
    _, offsets_buffer, data_buffer = whole.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int64, len(raws) + 1)
    if data_buffer is None or (np.diff(offsets) < records.HEADER_SIZE).any():
        raise Unhandled  # cut short
    data = _Bytes(np.frombuffer(data_buffer, np.uint8), data_buffer)
    header = data.first(offsets[:-1], records.HEADER_SIZE).view(types["header"])[:, 0]
    if (header["version"] != records.FORMAT_V1).any():
        raise Unhandled
    keep = np.isin(header["qid"], np.fromiter(queue_names, np.int64, len(queue_names)))
    if report_only:
        keep &= (header["flags"] & records.FLAG_REPORT) != 0
    if not keep.any():
        return None
    starts, ends = offsets[:-1], offsets[1:]
    if not keep.all():
        header, starts, ends = header[keep], starts[keep], ends[keep]
    batch = _Batch(data, header, starts, ends)
    try:
        return [batch.column(name, kind, queue_names, where) for name, kind in columns]
    except (pa.ArrowInvalid, UnicodeDecodeError):  # a string that is not UTF-8
        raise Unhandled from None


class _Bytes(NamedTuple):
    """The records of a batch one after the other, as numpy reads them and as Arrow holds them."""
    array: np.ndarray
    buffer: pa.Buffer

    def first(self, at: np.ndarray, width: int) -> np.ndarray:
        """The `width` bytes from each of `at`, one row each (past the buffer's end, its last
        byte again: what follows a shorter span is not part of it)."""
        import numpy as np

        size = len(self.array)
        late = np.flatnonzero(at > size - width)  # the spans that run past the buffer's end
        if len(late) == len(at):
            rows: np.ndarray = np.empty((len(at), width), np.uint8)
        else:
            # the buffer as `width`-byte items starting at every byte: one item copied for
            # each start, not an index computed for every byte
            items = np.ndarray((size - width + 1,), np.dtype((np.void, width)), self.array, strides=(1,))
            rows = items[np.minimum(at, size - width)].view(np.uint8).reshape(len(at), width)
        if len(late):
            rows[late] = self.array[np.minimum(at[late, None] + np.arange(width), size - 1)]
        return rows

    def span(self, at: int, length: int) -> bytes:
        return bytes(self.array[at:at + length])


class _Batch:
    """The kept records of a batch: their headers, and where each optional part starts."""

    def __init__(self, data: _Bytes, header: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        import numpy as np

        self.data, self.header, self.rows = data, header, len(header)
        self.strings: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # name: (at, length, present)
        at = starts + records.HEADER_SIZE
        for name in records.OPTIONAL_STRINGS:
            length = header["n_" + name].astype(np.int64)
            present = length != records.ABSENT
            length[~present] = 0
            self.strings[name] = (at, length, present)
            at = at + length
        self.props_at, self.props_length = at, header["n_props"].astype(np.int64)
        self.body_at = at + self.props_length
        self.body_length = header["n_body"].astype(np.int64)
        if not np.array_equal(self.body_at + self.body_length, ends):
            raise Unhandled  # the lengths do not add up
        self._trace: dict[str, pa.Array] | None = None

    def column(self, name: str, kind: str, queue_names: dict[int, str], where: StoreIdentity) -> pa.Array:
        import numpy as np
        import pyarrow as pa

        typ, header, rows = arrow_type(kind), self.header, self.rows
        if name in _CONSTANT_COLUMNS:
            return pa.array([getattr(where, _CONSTANT_COLUMNS[name])] * rows, typ)
        if name in _HEADER_COLUMNS:
            values = header[_HEADER_COLUMNS[name]]
            if name == "seq" and (values >= 1 << 63).any():
                raise Unhandled  # beyond a long column
            return pa.array(values.astype(np.int32 if kind == "int" else np.int64), typ)
        if name in _ZERO_IS_NULL:
            values = header[name].astype(np.int64)
            return pa.array(values, typ, mask=values == 0)
        if name in self.strings:
            at, length, present = self.strings[name]
            # a label is never null: "" when absent, as records.decode gives it
            return _strings(self.data, at, length, None if name == "label" else present)
        if name == "queue":
            qids, inverse = np.unique(header["qid"], return_inverse=True)
            return pa.array([queue_names[int(q)] for q in qids], typ).take(pa.array(inverse.astype(np.int32)))
        if name == "state":
            codes = header["state"].astype(np.int32)
            known = np.array([state is not None for state in records.STATE_BY_CODE])
            if (codes >= len(known)).any() or not known[codes].all():
                raise Unhandled
            return pa.array(records.STATE_BY_CODE, typ).take(pa.array(codes))
        if name in _FLAG_COLUMNS:
            return _flag_column(name, header["flags"], typ)
        if kind.startswith(PROPERTY_KIND):
            key = kind[len(PROPERTY_KIND):]
            return _property_column(self.data, self.props_at, self.props_length, key)
        return self.trace()[name]

    def trace(self) -> dict[str, pa.Array]:
        """The trace columns (report_fields.TRACE_COLUMNS), made once for the batch."""
        if self._trace is None:
            at, length, _ = self.strings["label"]
            self._trace = _label_columns(self.data, at, length)
            self._trace["trace_queue"] = _body_queues(self.data, self.body_at, self.body_length)
        return self._trace


def _flag_column(name: str, flags: np.ndarray, typ: pa.DataType) -> pa.Array:
    import numpy as np
    import pyarrow as pa

    if name == "class":
        return pa.array(["normal", "report"], typ).take(pa.array(((flags & records.FLAG_REPORT) != 0).astype(np.int8)))
    if name == "delivery":
        return pa.array(["recoverable", "express"], typ).take(
            pa.array(((flags & records.FLAG_EXPRESS) != 0).astype(np.int8)))
    if name == "trace":
        return pa.array((flags & records.FLAG_TRACE) != 0, typ)
    return pa.array((flags & records.FLAG_NO_DEAD_LETTER) == 0, typ)  # dead_letter


def _views(data: _Bytes, at: np.ndarray, length: np.ndarray, typ: pa.DataType,
           present: np.ndarray | None = None) -> pa.Array:
    """A binary or string view array of the spans data[at[i]:at[i] + length[i]] (null where
    not `present`), over the records' own buffer: nothing is copied but a view's first bytes
    (Arrow's view layout: 16 bytes, the length and then the bytes themselves up to 12 of
    them, else their first 4, the buffer's index and the offset)."""
    import numpy as np
    import pyarrow as pa

    rows, inline = len(at), _INLINE
    if len(data.array) >= 1 << 31:
        raise Unhandled  # beyond a view's 32-bit offset
    first = data.first(at, inline)
    short = np.flatnonzero(length < inline)
    if len(short):
        first[short] *= np.arange(inline) < length[short, None]  # a short value's view holds zeros after it
    words = first.view("<i4")  # each view's last 12 bytes: a short value, or a long one's first 4
    far = length > inline
    views = np.empty((rows, 4), "<i4")
    views[:, 0] = length
    views[:, 1] = words[:, 0]
    views[:, 2] = np.where(far, 0, words[:, 1])  # buffer 0: the records'
    views[:, 3] = np.where(far, at, words[:, 2])
    validity, nulls = None, 0
    if present is not None and (nulls := rows - int(np.count_nonzero(present))):
        validity = pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(typ, rows, [validity, pa.py_buffer(views), data.buffer], nulls)


def _strings(data: _Bytes, at: np.ndarray, length: np.ndarray, present: np.ndarray | None) -> pa.Array:
    """A string array of the spans (null where not `present`); ArrowInvalid if one is not UTF-8."""
    import pyarrow as pa

    array = _views(data, at, length, pa.string_view(), present)
    array.validate(full=True)
    return array.cast(pa.string())


def _by_distinct(data: _Bytes, headed: np.ndarray, rest_at: np.ndarray, rest_length: np.ndarray,
                 decode: Callable[[int], Any]) -> tuple[list[Any], np.ndarray]:
    """decode(row) of every row, as (values, index): row i's is values[index[i]]. Rows that
    are `headed` share their value with every row of the same rest (the spans at
    rest_at/rest_length), so it is computed once per distinct rest, for its first row; each
    other row is decoded alone."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    index = np.empty(len(headed), np.int32)
    values: list[Any] = []
    rows = np.flatnonzero(headed)
    if len(rows):
        codes = pc.dictionary_encode(_views(data, rest_at[rows], rest_length[rows], pa.binary_view())).indices
        codes_np = codes.to_numpy(zero_copy_only=False)
        _, first = np.unique(codes_np, return_index=True)  # the codes are 0 .. distinct - 1
        values = [decode(int(rows[i])) for i in first]
        index[rows] = codes_np
    others = np.flatnonzero(~headed)
    index[others] = np.arange(len(values), len(values) + len(others))
    values += [decode(int(row)) for row in others]
    return values, index


def _property_column(data: _Bytes, at: np.ndarray, length: np.ndarray, key: str) -> pa.Array:
    import numpy as np
    import pyarrow as pa

    def value(row: int) -> str | None:
        return records.block_property(data.span(at[row], length[row]), key)

    values, index = _by_distinct(data, np.ones(len(at), bool), at, length, value)
    return pa.array(values, pa.string()).take(pa.array(index))


def _label_columns(data: _Bytes, at: np.ndarray, length: np.ndarray) -> dict[str, pa.Array]:
    """trace_route, trace_hops, trace_computer (and its key, trace_computer_hi, _lo, _name) and
    trace_event of every label, as report_fields.label_fields (and computer_keys) give them."""
    import numpy as np
    import pyarrow as pa

    types = _types()
    head = length >= _LABEL_HEAD
    chars = data.first(at, _LABEL_HEAD)
    digits = types["hex"][chars]
    head &= (digits[:, _LABEL_HEX + _LABEL_HOPS] < 16).all(axis=1)
    for i, c in _LABEL_FIXED.items():
        head &= chars[:, i] == c

    def fields(row: int) -> tuple[int | None, int | None, str | None, str | None]:
        return label_fields(data.span(at[row], length[row]).decode("utf-8"))

    # a headed label's computer and event are its rest's, and its route and hops its head's
    # when the rest decodes; label_fields gives a label without that head no route
    values, index = _by_distinct(data, head, at + _LABEL_HEAD, np.maximum(length - _LABEL_HEAD, 0), fields)
    routed = np.array([v[0] is not None for v in values], bool)[index] & head
    # the route's 12 hex digits as 6 bytes, the low ones of a big-endian 64-bit number
    packed = np.zeros((len(at), 8), np.uint8)
    packed[:, 2:] = digits[:, _LABEL_HEX[0::2]] << 4 | digits[:, _LABEL_HEX[1::2]]
    route = packed.view(">u8")[:, 0].astype(np.int64)
    hops = digits[:, _LABEL_HOPS[0]].astype(np.int32) * 16 + digits[:, _LABEL_HOPS[1]]
    take = pa.array(index)
    kinds = dict(TRACE_COLUMNS)
    return {"trace_route": pa.array(route, pa.int64(), mask=~routed),
            "trace_hops": pa.array(hops, pa.int32(), mask=~routed),
            "trace_computer": pa.array([v[2] for v in values], pa.string()).take(take),
            "trace_event": pa.array([v[3] for v in values], pa.string()).take(take)} | {
        name: pa.array(keys, arrow_type(kinds[name])).take(take)
        for name, keys in computer_keys([v[2] for v in values]).items()}


def _body_queues(data: _Bytes, at: np.ndarray, length: np.ndarray) -> pa.Array:
    """trace_queue of every body, as report_fields.body_queue gives it."""
    import numpy as np
    import pyarrow as pa

    types = _types()
    head = length >= _BODY_HEAD
    chars = data.first(at, _BODY_READ)
    head &= ((chars.view("<u8") & types["body_mask"]) == types["body_fixed"]).all(axis=1)
    head &= (types["hex"][chars[:, _BODY_DIGITS]] < 16).all(axis=1)

    def queue(row: int) -> str | None:
        return body_queue(data.span(at[row], length[row]))

    values, index = _by_distinct(data, head, at + _BODY_HEAD, np.maximum(length - _BODY_HEAD, 0), queue)
    return pa.array(values, pa.string()).take(pa.array(index))
