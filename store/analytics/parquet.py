"""`mqcli export --format parquet`: a store's messages as one Parquet file of the pipeline's
message table (columns.MESSAGE_COLUMNS), for stores that Spark cannot reach directly (docs/design.md#pipeline).

The file reads back as `spark.read.parquet(...)` with the same columns the `mqstore` source
gives, so `mqcli analyze health|routes --parquet DIR` runs on copies. Written by pyarrow alone:
no Spark needed to export.

The export reads the store as it is (`Store.as_is`: no maintenance first), so what is expired or
lapsed is exported as such. The file's footer metadata holds the queue table under
`QUEUES_KEY` (JSON: store, store_name, store_guid and queue of every queue exported, empty ones
too), so health from an export has a row for every queue, as from a direct scan.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..records import Message
from .columns import MESSAGE_COLUMNS, StoreIdentity, arrow_schema, message_batch

if TYPE_CHECKING:
    from ..engine import Store

ROW_GROUP = 65_536
QUEUES_KEY = b"mqcli.queues"
QUEUE_TABLE_FIELDS = ("store", "store_name", "store_guid", "queue")


def write_messages(st: Store, queues: Iterable[str] | None, target: str | Path,
                   progress: Callable[[int], None] | None = None) -> int:
    """Write every message of the queues (default all), any state, to the Parquet file
    `target` (replaced if it exists); return how many were written."""
    import pyarrow.parquet as pq

    with st.as_is():
        info = st.info()
    where = StoreIdentity(path=str(Path(st.path).absolute()), name=info.name, guid=info.guid)
    written = 0
    pending: list[Message] = []
    # one moment of the store (Store.view): each message once, also while moves run; the file
    # is written inside it (a local file, not a consumer that could stall the view)
    with st.view() as v:
        infos = v.queues(queues)
        table = [{"store": where.path, "store_name": where.name, "store_guid": where.guid, "queue": q.name}
                 for q in infos]
        schema = arrow_schema(MESSAGE_COLUMNS).with_metadata({QUEUES_KEY: json.dumps(table).encode()})
        with pq.ParquetWriter(str(target), schema, compression="zstd") as out:
            def flush() -> None:
                nonlocal written
                if pending:
                    out.write_batch(message_batch(pending, where), row_group_size=ROW_GROUP)
                    written += len(pending)
                    if progress is not None:
                        progress(len(pending))
                    pending.clear()

            for q in infos:
                for m in v.messages(q, hidden=True):
                    pending.append(m)
                    if len(pending) >= ROW_GROUP:
                        flush()
            flush()
    return written


def queue_table(path: str | Path) -> list[dict[str, Any]] | None:
    """The queue table of a Parquet export (a file, or a directory of them): every file's
    footer rows together; None when a file has none (not written by `export`, or by an older
    mqcli), as the queues of such an export are only those with messages."""
    import pyarrow.parquet as pq

    root = Path(path)
    # the files Spark reads of a directory: those not named _* or .* (_SUCCESS, .crc files)
    files = (sorted(f for f in root.rglob("*") if f.is_file() and not f.name.startswith(("_", ".")))
             if root.is_dir() else [root])
    rows: list[dict[str, Any]] = []
    for file in files:
        meta = pq.read_schema(file).metadata or {}
        if QUEUES_KEY not in meta:
            return None
        try:
            found = json.loads(meta[QUEUES_KEY])
            rows += [{k: str(r[k]) for k in QUEUE_TABLE_FIELDS} for r in found]
        except (ValueError, TypeError, KeyError):
            return None
    return rows or None
