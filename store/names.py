"""The names a store holds, read for shell completion (mqcli/complete.py): queue names, the
format names of outgoing queues, open transaction ids and link names.

One read-only LMDB transaction and nothing else: no store is made, no table created, no
maintenance run (a lapsed lease or a timed-out transaction waits for the next write, as
docs/design.md says of every read; a transaction past its deadline is left out here). A
directory that is not a finished store of the running user's, with the permissions
`Store.open` asks for, holds no names: completion must never fail loudly or change anything.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lmdb

from .environment import check_permissions, open_environment, read_marker, store_exists
from .errors import StoreError
from .ownership import check_store
from .queues import decode_queue


@dataclass(slots=True)
class Names:
    queues: list[str] = field(default_factory=list)      # local queues, as created (case kept)
    outgoing: list[str] = field(default_factory=list)    # outgoing queues: their format names
    transactions: list[int] = field(default_factory=list)
    links: list[str] = field(default_factory=list)


def read_names(path: Path) -> Names:
    """Every name in the store at `path`; empty Names if there is no usable store there."""
    try:
        if check_store(path) is None or not store_exists(path):
            return Names()
        check_permissions(path)
        marker = read_marker(path)
        if marker.get("creating"):
            return Names()
        env, dbs = open_environment(path, marker["map_size"], readonly=True)
    except (StoreError, OSError):
        return Names()
    try:
        return _read(env, dbs)
    except Exception:  # a damaged store: `mqcli check` says what is wrong, completion offers nothing
        return Names()
    finally:
        env.close()


def _read(env: lmdb.Environment, dbs: dict[str, Any]) -> Names:
    names = Names()
    now = int(time.time() * 1_000_000)
    with env.begin() as lt:
        for _key, raw in lt.cursor(db=dbs["queues"]):
            q = decode_queue(raw)
            (names.queues if q.outgoing is None else names.outgoing).append(q.name)
        for key, raw in lt.cursor(db=dbs["txs"]):
            deadline = json.loads(raw).get("deadline")
            if deadline is None or deadline > now:
                names.transactions.append(int.from_bytes(key, "big"))
        for _key, raw in lt.cursor(db=dbs["links"]):
            names.links.append(json.loads(raw)["name"])
    return names
