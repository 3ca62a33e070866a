"""The message table of the pipeline: its columns, and Arrow record batches built from messages.

One schema serves the `mqstore` Spark data source and `mqcli export --format parquet`, so a
Parquet export reads back in Spark as the same DataFrame a live store gives. The columns are
the message fields under their JSON names (docs/design.md#messages), in the record's own types,
plus where the message is:

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
stored records (what the data source reads): `records.decode_columns` reads only the fields
asked for, each as one list over the batch, without building a `Message` — four times faster,
which is most of a scan's cost — and this module only makes Arrow arrays of those lists. The
record layout is known to store/records.py alone; tests/test_analytics_columns.py holds the two
builders to the same output.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from .. import records
from ..errors import InvalidArgument
from ..records import Message, lookup_id_of, msg_id_text, unique_id_text
from . import record_arrays
from .kinds import PROPERTY_KIND, arrow_type
from .report_fields import TRACE_COLUMN_NAMES, trace_values

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


def property_column(prop: str) -> tuple[str, str]:
    """The column of one property: (`prop_<name>`, its kind)."""
    return "prop_" + "".join(c if c.isalnum() else "_" for c in prop), PROPERTY_KIND + prop


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
    """Plain data naming a store in every row read from it; `snapshot`, when set, is the
    snapshot directory (`mqcli snapshot`) read in place of the store at `path` (locate.py)."""

    path: str
    name: str
    guid: str
    snapshot: str | None = None
    owner: int | None = None  # the uid that owns the store (or snapshot) as planned: tasks check it


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
        values: Sequence[Any] = cols[_AT[name]]
        return values

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
            arr = pa.array(list(map(msg_id_text, raw("origin"), raw("msg_n"))), typ)
        elif name == "unique_id":
            arr = pa.array(list(map(unique_id_text, raw("origin"), raw("put_time"))), typ)
        elif name == "lookup_id":
            arr = pa.array(list(map(lookup_id_of, raw("lookup_hi"), raw("seq"))), typ)
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

def record_batch(raws: Sequence[bytes], queue_names: dict[int, str], where: StoreIdentity,
                 columns: Sequence[tuple[str, str]] = MESSAGE_COLUMNS, report_only: bool = False
                 ) -> pa.RecordBatch | None:
    """One Arrow batch of `columns` from stored records of one store (None if no record is
    kept): records of queues not in `queue_names` (qid → name) are skipped, and with
    `report_only` those that are not reports. A whole batch at once (record_arrays.py) where
    it can be, else record by record (`reference_batch`)."""
    import pyarrow as pa

    try:
        arrays = record_arrays.record_batch(raws, queue_names, where, columns, report_only)
    except record_arrays.Unhandled:
        pass  # record by record below, which says what is wrong with a bad record
    else:
        return None if arrays is None else pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(columns))
    return reference_batch(raws, queue_names, where, columns, report_only)


def reference_batch(raws: Sequence[bytes], queue_names: dict[int, str], where: StoreIdentity,
                    columns: Sequence[tuple[str, str]] = MESSAGE_COLUMNS, report_only: bool = False
                    ) -> pa.RecordBatch | None:
    """record_batch, record by record (records.RecordColumns): every column, and BadData naming
    what is wrong with a bad record."""
    import pyarrow as pa

    fields = records.decode_columns(raws, queue_names, report_only)
    if not len(fields):
        return None
    traced = (trace_values(fields.values("label"), fields.values("body"))
              if any(name in TRACE_COLUMN_NAMES for name, _ in columns) else {})
    arrays = [pa.array(traced[name], arrow_type(kind)) if name in traced
              else _column(name, kind, fields, queue_names, where) for name, kind in columns]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(columns))


def _column(name: str, kind: str, fields: records.RecordColumns, queue_names: dict[int, str],
            where: StoreIdentity) -> pa.Array:
    import pyarrow as pa

    typ = arrow_type(kind)
    if name == "store":
        values: Any = [where.path] * len(fields)
    elif name == "store_name":
        values = [where.name] * len(fields)
    elif name == "store_guid":
        values = [where.guid] * len(fields)
    elif name == "queue":
        values = list(map(queue_names.__getitem__, fields.values("qid")))
    elif name == "props":
        offsets, keys, items = fields.props_entries()
        return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(keys, pa.string()),
                                       pa.array(items, pa.string()), type=typ)
    elif kind.startswith(PROPERTY_KIND):
        values = fields.prop_values(kind[len(PROPERTY_KIND):])
    else:
        values = fields.values(name)
    return pa.array(values, typ)
