"""What the analyses hand back: rows as plain data, datasets written to `--out DIR`, charts.

- `to_records(df)`: rows as dicts of JSON types; TIMESTAMP columns become ISO-8601 UTC text
  (read as µs since the epoch inside Spark, so the session's time zone does not matter).
- `write_datasets({"links": df, …}, DIR, fmt)`: one directory per dataset under DIR (replaced
  if it exists), one part file each: Parquet keeps the types; CSV (with a header) and JSON
  (one object a line) write timestamps as ISO-8601 with their offset, and CSV (RFC 4180
  quoting), which has no nesting, holds arrays and maps as JSON text.
- `plot_links` / `plot_health`: PNG charts drawn with matplotlib's Agg backend (no display).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument
from ..records import STATES, iso_time

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

FORMATS = ("parquet", "csv", "json")
TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"


def to_records(df: DataFrame, limit: int | None = None) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    times = [f.name for f in df.schema.fields if isinstance(f.dataType, T.TimestampType)]
    cols = [F.unix_micros(F.col(f"`{f.name}`")).alias(f.name) if f.name in times else F.col(f"`{f.name}`")
            for f in df.schema.fields]
    selected = df.select(*cols)
    if limit is not None:
        selected = selected.limit(limit)
    out = []
    for row in selected.collect():
        d = row.asDict(recursive=True)
        for name in times:
            d[name] = None if d[name] is None else iso_time(d[name])
        out.append(d)
    return out


def write_datasets(datasets: Mapping[str, DataFrame], out_dir: str | Path, fmt: str) -> list[str]:
    """Write each dataset to OUT_DIR/<name>; return the directories written."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if fmt not in FORMATS:
        raise InvalidArgument(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    out = Path(out_dir).absolute()
    written = []
    for name, df in datasets.items():
        if fmt == "csv":
            nested = (T.ArrayType, T.MapType, T.StructType)
            df = df.select(*[F.to_json(F.col(f"`{f.name}`")).alias(f.name) if isinstance(f.dataType, nested)
                             else F.col(f"`{f.name}`") for f in df.schema.fields])
        writer = df.coalesce(1).write.mode("overwrite")
        if fmt == "csv":
            # RFC 4180 quoting (a quote inside a field is doubled), which every CSV reader takes;
            # Spark's default escapes it with a backslash
            writer = (writer.option("header", True).option("escape", '"')
                      .option("timestampFormat", TIMESTAMP_FORMAT))
        elif fmt == "json":
            writer = writer.option("timestampFormat", TIMESTAMP_FORMAT)
        target = out / name
        getattr(writer, fmt)(str(target))
        written.append(str(target))
    return written


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, no GUI toolkit
    import matplotlib.pyplot as plt

    return plt


def plot_links(links: Sequence[Mapping[str, Any]], path: str | Path, names: Mapping[str, str]) -> str:
    """Per-link latency (p50, p95, p99 in ms), one group of bars per link."""
    plt = _pyplot()
    labels = [f"{names.get(r['from_qm'], r['from_qm'][:8])} → {names.get(r['to_qm'], r['to_qm'][:8])}"
              for r in links]
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.6 * max(1, len(links))))
    height = 0.25
    for i, (key, colour) in enumerate((("p50_ms", "#4c72b0"), ("p95_ms", "#dd8452"), ("p99_ms", "#c44e52"))):
        ax.barh([j + (i - 1) * height for j in range(len(links))], [r[key] or 0 for r in links],
                height=height, label=key.replace("_ms", ""), color=colour)
    ax.set_yticks(range(len(links)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("latency (ms)")
    ax.set_title("trace report latency per link" if links else "no links in the trace reports")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(str(path), format="png", dpi=100)
    plt.close(fig)
    return str(path)


def plot_health(rows: Sequence[Mapping[str, Any]], path: str | Path) -> str:
    """Depth per queue, stacked by state."""
    plt = _pyplot()
    labels = [f"{r['store_name']}:{r['queue']}" for r in rows]
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.4 * max(1, len(rows))))
    left = [0] * len(rows)
    for state in STATES:
        values = [r[state] for r in rows]
        if any(values):
            ax.barh(range(len(rows)), values, left=left, label=state)
            left = [a + b for a, b in zip(left, values)]
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("messages")
    ax.set_title("queue depth by state")
    if any(left):
        ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(str(path), format="png", dpi=100)
    plt.close(fig)
    return str(path)
