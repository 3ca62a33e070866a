"""The kinds of the pipeline's columns and their Arrow types: what columns.py (the tables and
their schemas) and record_arrays.py (batches decoded at once) both build on.

A kind is `string`, `long`, `int`, `bool`, `binary`, `timestamp` (µs, UTC) or `map` (string
to string), or `prop:<name>` for one property as a STRING column of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

PROPERTY_KIND = "prop:"


def arrow_type(kind: str) -> pa.DataType:
    import pyarrow as pa

    if kind.startswith(PROPERTY_KIND):
        return pa.string()
    return {
        "string": pa.string(), "long": pa.int64(), "int": pa.int32(), "bool": pa.bool_(),
        "binary": pa.binary(), "timestamp": pa.timestamp("us", tz="UTC"),
        "map": pa.map_(pa.string(), pa.string()),
    }[kind]
