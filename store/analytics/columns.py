"""The message table of the pipeline: its columns, and Arrow record batches built from messages.

One schema serves the `mqstore` Spark data source and `mqcli export --format parquet`, so a
Parquet export reads back in Spark as the same DataFrame a live store gives. The columns are
SPEC §4's fields under their JSON names, in the record's own types, plus where the message is:

- `store`, `store_name`, `store_guid`: the store directory as given, the queue manager's name
  and GUID.
- `seq`: the SequentialID at enqueue (the seven low bytes of `lookup_id`), unique in a store.
- `since`: when the message entered its in-flight state (null when available); `analyze
  health --stuck-after` measures from it.
- on request, a named property as a STRING column of its own: `prop_<name>` (characters other
  than letters and digits as `_`; null when the message lacks it). A map column costs Spark
  far more per row than a string column: `analyze routes` reads its two properties so.

Times are Arrow `timestamp[us, UTC]` (Spark TIMESTAMP); the body is binary, `props` a
string→string map.

Two builders make the same batches: `message_batch` from `Message` objects (what
`Store.export_messages` gives `export --format parquet`), and `record_batch` straight from
stored records (what the data source reads): it unpacks each record's header with the codec's
own layout (store/records.py: the header struct, the flags, the field order) and slices out
only the columns asked for, without building a `Message` — four times faster, which is most of
a scan's cost. A record of another format version goes to `records.decode`, which knows it or
refuses it; tests/test_analytics_columns.py holds the two builders to the same output.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from .. import records
from ..errors import BadData, InvalidArgument
from ..records import Message, guid_text

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

# (name, kind): kinds map to one Arrow and one Spark type below
MESSAGE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("store", "string"), ("store_name", "string"), ("store_guid", "string"),
    ("queue", "string"), ("state", "string"), ("msg_id", "string"), ("seq", "long"),
    ("lookup_id", "long"), ("unique_id", "string"), ("correl_id", "string"), ("priority", "int"),
    ("label", "string"), ("body", "binary"), ("size", "long"), ("props", "map"),
    ("app_specific", "long"), ("class", "string"), ("delivery", "string"),
    ("put_time", "timestamp"), ("expires", "timestamp"), ("dead_letter", "bool"),
    ("trace", "bool"), ("report_queue", "string"), ("hops", "int"), ("backouts", "int"),
    ("confirm_id", "long"), ("lock_id", "long"), ("tx", "long"),
    ("lease_expires", "timestamp"), ("since", "timestamp"),
    ("dead_letter_reason", "string"), ("original_queue", "string"),
)
MESSAGE_COLUMN_NAMES = tuple(name for name, _ in MESSAGE_COLUMNS)

# the queue table (`option("table", "queues")`): every queue, empty ones too; depth and bytes
# are the queue's counters
QUEUE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("store", "string"), ("store_name", "string"), ("store_guid", "string"),
    ("queue", "string"), ("qid", "long"), ("queue_guid", "string"), ("label", "string"),
    ("quota", "long"), ("transactional", "bool"), ("journal", "bool"),
    ("max_backouts", "int"), ("created", "timestamp"), ("system", "bool"),
    ("depth", "long"), ("bytes", "long"),
)

# Message attributes read in one attrgetter call; the columns not listed are derived
_ATTRS = ("queue", "state", "seq", "lookup_hi", "origin", "msg_n", "correl_id", "priority",
          "label", "body", "props", "app_specific", "report", "express", "put_time", "expires",
          "dead_letter", "trace", "report_queue", "hops", "backouts", "confirm_id", "lock_id",
          "tx", "lease_expires", "since", "dead_letter_reason", "original_queue")
_AT = {name: i for i, name in enumerate(_ATTRS)}
_LOOKUP_SEQ_MASK = (1 << 56) - 1


def select(columns: Sequence[str] | None, table: tuple[tuple[str, str], ...] = MESSAGE_COLUMNS
           ) -> tuple[tuple[str, str], ...]:
    """The named columns of a table in the table's order (all when None); unknown → error."""
    if columns is None:
        return table
    known = {name for name, _ in table}
    unknown = [c for c in columns if c not in known]
    if unknown:
        raise InvalidArgument(f"unknown column {unknown[0]!r}; columns are {', '.join(known_names(table))}")
    wanted = set(columns)
    return tuple(c for c in table if c[0] in wanted)


def known_names(table: tuple[tuple[str, str], ...]) -> list[str]:
    return [name for name, _ in table]


PROPERTY_KIND = "prop:"


def property_column(prop: str) -> tuple[str, str]:
    """The column of one property: (`prop_<name>`, its kind)."""
    return "prop_" + "".join(c if c.isalnum() else "_" for c in prop), PROPERTY_KIND + prop


def arrow_type(kind: str) -> pa.DataType:
    import pyarrow as pa

    if kind.startswith(PROPERTY_KIND):
        return pa.string()
    return {
        "string": pa.string(), "long": pa.int64(), "int": pa.int32(), "bool": pa.bool_(),
        "binary": pa.binary(), "timestamp": pa.timestamp("us", tz="UTC"),
        "map": pa.map_(pa.string(), pa.string()),
    }[kind]


def arrow_schema(columns: Sequence[tuple[str, str]] = MESSAGE_COLUMNS) -> pa.Schema:
    """The Arrow schema; it equals what Spark derives from `spark_schema` (the data source
    checks record batches against it field by field)."""
    import pyarrow as pa

    return pa.schema([pa.field(name, arrow_type(kind)) for name, kind in columns])


def spark_schema(columns: Sequence[tuple[str, str]] = MESSAGE_COLUMNS) -> StructType:
    from pyspark.sql import types as T

    kinds = {
        "string": T.StringType(), "long": T.LongType(), "int": T.IntegerType(),
        "bool": T.BooleanType(), "binary": T.BinaryType(), "timestamp": T.TimestampType(),
        "map": T.MapType(T.StringType(), T.StringType()),
    }
    return T.StructType([T.StructField(name, T.StringType() if kind.startswith(PROPERTY_KIND) else kinds[kind])
                         for name, kind in columns])


@dataclass(frozen=True)
class StoreIdentity:
    """Plain data naming a store in every row read from it."""

    path: str
    name: str
    guid: str


def message_batch(messages: Sequence[Message], where: StoreIdentity,
                  columns: Sequence[tuple[str, str]] = MESSAGE_COLUMNS) -> pa.RecordBatch:
    """One Arrow record batch of `columns` from decoded messages of one store."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(messages)
    get = attrgetter(*_ATTRS)
    rows = [get(m) for m in messages]
    cols: list[Any] = list(zip(*rows)) if rows else [()] * len(_ATTRS)

    def raw(name: str) -> Sequence[Any]:
        return cols[_AT[name]]

    arrays = []
    for name, kind in columns:
        typ = arrow_type(kind)
        if name == "store":
            arr = pa.array([where.path] * n, typ)
        elif name == "store_name":
            arr = pa.array([where.name] * n, typ)
        elif name == "store_guid":
            arr = pa.array([where.guid] * n, typ)
        elif name == "msg_id":
            arr = pa.array([f"{guid_text(o)}\\{k}" for o, k in zip(raw("origin"), raw("msg_n"))], typ)
        elif name == "unique_id":
            arr = pa.array([f"{guid_text(o)}:{t}" for o, t in zip(raw("origin"), raw("put_time"))], typ)
        elif name == "lookup_id":
            arr = pa.array([(hi << 56) | (s & _LOOKUP_SEQ_MASK) for hi, s in zip(raw("lookup_hi"), raw("seq"))], typ)
        elif name == "size":
            arr = pc.binary_length(pa.array(raw("body"), pa.binary())).cast(typ)
        elif name == "class":
            arr = pc.if_else(pa.array(raw("report"), pa.bool_()), "report", "normal").cast(typ)
        elif name == "delivery":
            arr = pc.if_else(pa.array(raw("express"), pa.bool_()), "express", "recoverable").cast(typ)
        elif name == "props":
            arr = pa.array([list(p.items()) for p in raw("props")], typ)
        elif kind.startswith(PROPERTY_KIND):
            key = kind[len(PROPERTY_KIND):]
            arr = pa.array([p.get(key) for p in raw("props")], typ)
        else:
            arr = pa.array(raw(name), typ)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(columns))


def queue_batch(rows: Iterable[dict[str, Any]], columns: Sequence[tuple[str, str]] = QUEUE_COLUMNS
                ) -> pa.RecordBatch:
    """One Arrow record batch of the queue table from plain rows."""
    import pyarrow as pa

    rows = list(rows)
    arrays = [pa.array([r[name] for r in rows], arrow_type(kind)) for name, kind in columns]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(columns))


# ---- straight from stored records ------------------------------------------------------

_HEADER = records._HEADER_AND_LENGTHS
_FIXED = records._FIXED
_NONE16 = records._NONE16
_STATE_NAME = records._STATE_NAME
_F_REPORT, _F_EXPRESS, _F_TRACE, _F_NO_DEAD_LETTER = (
    records._F_REPORT, records._F_EXPRESS, records._F_TRACE, records._F_NO_DEAD_LETTER)
_PROP_KEY, _PROP_VALUE = records._PROP_KEY, records._PROP_VALUE
# header positions (records._HEADER_AND_LENGTHS)
(_H_VERSION, _H_FLAGS, _H_STATE, _H_PRIORITY, _H_QID, _H_SEQ, _H_LOOKUP_HI, _H_ORIGIN, _H_MSG_N,
 _H_PUT_TIME, _H_EXPIRES, _H_APP_SPECIFIC, _H_HOPS, _H_BACKOUTS, _H_CONFIRM_ID, _H_LOCK_ID, _H_TX,
 _H_LEASE, _H_SINCE, _H_N_CORREL, _H_N_LABEL, _H_N_RQ, _H_N_REASON, _H_N_ORIG, _H_N_PROPS,
 _H_N_BODY) = range(26)
# the optional strings in record order; each column's text, or None when absent
_STRINGS = ("correl_id", "label", "report_queue", "dead_letter_reason", "original_queue")
_STRING_LENGTH = (_H_N_CORREL, _H_N_LABEL, _H_N_RQ, _H_N_REASON, _H_N_ORIG)
# header-only columns: header position, or a function of the header
_NULL_IF_ZERO = {"expires": _H_EXPIRES, "confirm_id": _H_CONFIRM_ID, "lock_id": _H_LOCK_ID,
                 "tx": _H_TX, "lease_expires": _H_LEASE, "since": _H_SINCE}
_PLAIN = {"seq": _H_SEQ, "priority": _H_PRIORITY, "app_specific": _H_APP_SPECIFIC,
          "put_time": _H_PUT_TIME, "hops": _H_HOPS, "backouts": _H_BACKOUTS, "size": _H_N_BODY}


def record_batch(raws: Sequence[bytes], queue_names: dict[int, str], where: StoreIdentity,
                 columns: Sequence[tuple[str, str]] = MESSAGE_COLUMNS, report_only: bool = False
                 ) -> pa.RecordBatch | None:
    """One Arrow batch of `columns` from stored records of one store (None if no record is
    kept): records of queues not in `queue_names` (qid → name) are skipped, and with
    `report_only` those that are not reports."""
    import pyarrow as pa

    unpack = _HEADER.unpack_from
    headers, kept = [], []
    for buf in raws:
        if buf[0] != records.FORMAT_V1:
            records.decode(buf)  # another version: raises BadData unless it knows it
            raise BadData(f"record format {buf[0]} cannot be read column by column")
        try:
            h = unpack(buf)
        except Exception as exc:
            raise BadData(f"malformed message record: {exc}") from None
        if h[_H_QID] not in queue_names or (report_only and not h[_H_FLAGS] & _F_REPORT):
            continue
        headers.append(h)
        kept.append(buf)
    if not headers:
        return None
    # where each optional string and the props and body start, checked against the length
    starts: list[tuple[int, ...]] = []
    for h, buf in zip(headers, kept):
        at = _FIXED
        offsets = []
        for i in _STRING_LENGTH:
            offsets.append(at)
            n = h[i]
            if n != _NONE16:
                at += n
        offsets.append(at)  # props
        at += h[_H_N_PROPS]
        offsets.append(at)  # body
        if at + h[_H_N_BODY] != len(buf):
            raise BadData("record length does not match its fields")
        starts.append(tuple(offsets))
    try:
        arrays = [_column(name, kind, headers, kept, starts, queue_names, where) for name, kind in columns]
    except (UnicodeDecodeError, struct.error) as exc:
        raise BadData(f"malformed message record: {exc}") from None
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(columns))


def _column(name: str, kind: str, headers: list[tuple[Any, ...]], kept: list[bytes],
            starts: list[tuple[int, ...]], queue_names: dict[int, str], where: StoreIdentity) -> pa.Array:
    import pyarrow as pa

    typ = arrow_type(kind)
    n = len(headers)
    if name == "store":
        values: Any = [where.path] * n
    elif name == "store_name":
        values = [where.name] * n
    elif name == "store_guid":
        values = [where.guid] * n
    elif name == "queue":
        values = [queue_names[h[_H_QID]] for h in headers]
    elif name == "state":
        values = [_STATE_NAME.get(h[_H_STATE]) for h in headers]
        if None in values:
            raise BadData("malformed message record: unknown state")
    elif name in _PLAIN:
        i = _PLAIN[name]
        values = [h[i] for h in headers]
    elif name in _NULL_IF_ZERO:
        i = _NULL_IF_ZERO[name]
        values = [h[i] or None for h in headers]
    elif name == "msg_id":
        values = [f"{guid_text(h[_H_ORIGIN])}\\{h[_H_MSG_N]}" for h in headers]
    elif name == "unique_id":
        values = [f"{guid_text(h[_H_ORIGIN])}:{h[_H_PUT_TIME]}" for h in headers]
    elif name == "lookup_id":
        values = [(h[_H_LOOKUP_HI] << 56) | (h[_H_SEQ] & _LOOKUP_SEQ_MASK) for h in headers]
    elif name == "class":
        values = ["report" if h[_H_FLAGS] & _F_REPORT else "normal" for h in headers]
    elif name == "delivery":
        values = ["express" if h[_H_FLAGS] & _F_EXPRESS else "recoverable" for h in headers]
    elif name == "trace":
        values = [bool(h[_H_FLAGS] & _F_TRACE) for h in headers]
    elif name == "dead_letter":
        values = [not h[_H_FLAGS] & _F_NO_DEAD_LETTER for h in headers]
    elif name in _STRINGS:
        k = _STRINGS.index(name)
        i = _STRING_LENGTH[k]
        empty = "" if name == "label" else None
        values = [empty if h[i] == _NONE16 or (h[i] == 0 and empty is not None)
                  else buf[s[k]:s[k] + h[i]].decode("utf-8")
                  for h, buf, s in zip(headers, kept, starts)]
    elif name == "body":
        values = [buf[s[6]:] for buf, s in zip(kept, starts)]
    elif name == "props":
        return _props_array(headers, kept, starts, typ)
    elif kind.startswith(PROPERTY_KIND):
        key = kind[len(PROPERTY_KIND):]
        values = [_props_of(buf[s[5]:s[6]])[2].get(key) for buf, s in zip(kept, starts)]
    else:  # pragma: no cover - every column of MESSAGE_COLUMNS is handled above
        raise InvalidArgument(f"column {name!r} cannot be read from records")
    return pa.array(values, typ)


_PROPS_SEEN: dict[bytes, tuple[list[str], list[str], dict[str, str]]] = {}  # property block → parsed


def _props_of(block: bytes) -> tuple[list[str], list[str], dict[str, str]]:
    """A property block's keys, values and map. Blocks repeat (every trace report has one of
    four), so each distinct block is parsed once."""
    parsed = _PROPS_SEEN.get(block)
    if parsed is None:
        if len(_PROPS_SEEN) >= 4096:
            _PROPS_SEEN.clear()
        ks, vs = _parse_props(block)
        parsed = _PROPS_SEEN[block] = (ks, vs, dict(zip(ks, vs)))
    return parsed


def _props_array(headers: list[tuple[Any, ...]], kept: list[bytes], starts: list[tuple[int, ...]],
                 typ: pa.DataType) -> pa.Array:
    """The props map column from the records' property blocks (records._encode_props)."""
    import pyarrow as pa

    ks: list[str] = []
    vs: list[str] = []
    offsets = [0]
    for buf, s in zip(kept, starts):
        parsed = _props_of(buf[s[5]:s[6]])
        ks += parsed[0]
        vs += parsed[1]
        offsets.append(len(ks))
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(ks, pa.string()),
                                   pa.array(vs, pa.string()), type=typ)


def _parse_props(block: bytes) -> tuple[list[str], list[str]]:
    ks, vs, at = [], [], 0
    while at < len(block):
        (nk,) = _PROP_KEY.unpack_from(block, at)
        at += _PROP_KEY.size
        ks.append(block[at:at + nk].decode("utf-8"))
        at += nk
        (nv,) = _PROP_VALUE.unpack_from(block, at)
        at += _PROP_VALUE.size
        vs.append(block[at:at + nv].decode("utf-8"))
        at += nv
    if at != len(block):
        raise BadData("malformed message properties")
    return ks, vs
