"""`mqcli export --format parquet`: a store's messages as one Parquet file of the pipeline's
message table (columns.MESSAGE_COLUMNS), for stores that Spark cannot reach directly (docs/design.md#pipeline).

The file reads back as `spark.read.parquet(...)` with the same columns the `mqstore` source
gives, so `mqcli analyze health|routes --parquet DIR` runs on copies. Written by pyarrow alone:
no Spark needed to export.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..records import Message
from .columns import MESSAGE_COLUMNS, StoreIdentity, arrow_schema, message_batch

if TYPE_CHECKING:
    from ..engine import Store

ROW_GROUP = 65_536


def write_messages(st: Store, queues: Iterable[str] | None, target: str | Path,
                   progress: Callable[[int], None] | None = None) -> int:
    """Write every message of the queues (default all), any state, to the Parquet file
    `target` (replaced if it exists); return how many were written."""
    import pyarrow.parquet as pq

    info = st.info()
    where = StoreIdentity(path=str(Path(st.path).absolute()), name=info.name, guid=info.guid)
    written = 0
    pending: list[Message] = []
    with pq.ParquetWriter(str(target), arrow_schema(MESSAGE_COLUMNS), compression="zstd") as out:
        def flush() -> None:
            nonlocal written
            if pending:
                out.write_batch(message_batch(pending, where), row_group_size=ROW_GROUP)
                written += len(pending)
                if progress is not None:
                    progress(len(pending))
                pending.clear()

        for m in st.export_messages(queues, hidden=True):
            pending.append(m)
            if len(pending) >= ROW_GROUP:
                flush()
        flush()
    return written
