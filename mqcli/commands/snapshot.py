"""snapshot: a consistent compacted copy of the store plus a manifest, for analysis on other
hosts (docs/design.md#pipeline, README.md "Stores on many hosts")."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..options import Session, shared_options


@shared_options
def snapshot(
    s: Session,
    target: Annotated[Path, typer.Argument(metavar="DIR", help="Directory to write the snapshot into "
                                                                "(made if missing), e.g. a shared mount.")],
) -> None:
    """Write a snapshot of the store into a new subdirectory of DIR, for `mqcli analyze
    --snapshots DIR` on any host.

    The subdirectory, named for the store and the time (NAME-GUID8-YYYYmmddTHHMMSSZ), holds
    `store/` (the consistent, compacted copy `backup` makes while others keep using the store)
    and `manifest.json` (GUID, name, path, host, time, SequentialID, SHA-256 of each file). It
    appears whole or not at all. The store is read as it is: nothing is swept or changed.

    \b
    Examples:
      mqcli snapshot /shared/mq-snapshots
      0 * * * * mqcli --store /var/lib/mq/qm1 snapshot /var/spool/mq-snapshots -q   # cron, then sync
    """
    from store.analytics.snapshots import take

    with s.open(reading=True) as st:  # it writes nothing: no wait behind a stopped writer
        path, manifest = take(st, target)
    doc = {"snapshot": str(path), **{k: v for k, v in manifest.items() if k != "format"}}
    if s.out.mode == "text":
        doc["files"] = ", ".join(f"{name} ({f['size']} bytes)" for name, f in manifest["files"].items())
    s.out.document(doc)



def register(app: typer.Typer) -> None:
    app.command()(snapshot)
