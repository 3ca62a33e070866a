"""Opening the LMDB environment of a store directory safely.

- The map is reserved large once (LMDB only reserves address space; the file grows as pages
  are written), because `mdb_env_set_mapsize` while another process has the store open
  corrupts it. The size chosen at creation is kept in the store's marker file.
- The environment runs with `metasync=False`: each commit still fsyncs its data pages, but the
  meta page is flushed by the next sync. A commit that must be durable (recoverable messages,
  SPEC §2) calls `env.sync(True)` after it; a light commit (express messages, entering an
  in-flight state) does not, so an OS crash may undo it, never corrupt the store. We do not use
  MDB_NOSYNC for express messages: with it an OS crash can corrupt the whole environment.
- Stale reader slots of killed processes are cleared on open (`reader_check`).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import lmdb

from .errors import StoreCorrupt, StorePermission, StoreUnavailable
from .keys import DATABASES

MARKER = "mqcli-store.json"
STORE_FORMAT = 3  # 3: available records live in their position entries, a table of their own
DEFAULT_MAP_SIZE = 1 << 40  # 1 TiB of address space, sparse on disk
MAX_READERS = 1024


def store_exists(path: Path) -> bool:
    return (path / MARKER).is_file()


def create_layout(path: Path, map_size: int) -> None:
    """Make the directory (0700) and the marker file (0600); refuse a foreign directory."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    foreign = [p.name for p in path.iterdir() if p.name not in (MARKER, "data.mdb", "lock.mdb", "wait")]
    if foreign:
        raise StoreUnavailable(f"{path} is not empty and not an mqcli store (holds {foreign[0]!r})")
    (path / "wait").mkdir(mode=0o700, exist_ok=True)  # FIFOs of waiting getters (notify.py)
    marker = path / MARKER
    fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"format": STORE_FORMAT, "map_size": map_size}, f)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(marker, 0o600)


def read_marker(path: Path) -> dict:
    try:
        marker = json.loads((path / MARKER).read_text())
        if not isinstance(marker.get("map_size"), int):
            raise ValueError("no map size")
    except FileNotFoundError:
        raise StoreUnavailable(f"no store at {path} (create one with `mqcli init`)") from None
    except PermissionError:
        raise StorePermission(f"no permission to read the store at {path}") from None
    except (ValueError, OSError, AttributeError) as exc:
        raise StoreCorrupt(f"the store marker {path / MARKER} is unreadable: {exc}") from None
    if marker.get("format") != STORE_FORMAT:
        raise StoreUnavailable(
            f"the store at {path} has format {marker.get('format')!r}; this mqcli reads format "
            f"{STORE_FORMAT} (export it with the mqcli that made it, then import)")
    return marker


def check_permissions(path: Path) -> None:
    """Refuse a store whose directory others may write to (SPEC §2: 0700)."""
    mode = path.stat().st_mode
    if stat.S_IMODE(mode) & (stat.S_IWGRP | stat.S_IWOTH):
        raise StorePermission(
            f"the store directory {path} is writable by group or others "
            f"(mode {stat.S_IMODE(mode):o}); run `chmod 700 {path}` or pass --allow-unsafe-permissions"
        )


def open_environment(path: Path, map_size: int, readonly: bool = False) -> tuple[lmdb.Environment, dict]:
    try:
        env = lmdb.open(
            str(path), map_size=map_size, max_dbs=len(DATABASES) + 4, max_readers=MAX_READERS,
            metasync=False, sync=True, mode=0o600, readonly=readonly, lock=True, readahead=False,
        )
    except lmdb.InvalidError as exc:
        raise StoreCorrupt(f"the store at {path} is corrupt: {exc}") from None
    except lmdb.Error as exc:
        raise StoreUnavailable(f"cannot open the store at {path}: {exc}") from None
    for name in ("data.mdb", "lock.mdb"):
        file = path / name
        if not readonly and file.exists() and stat.S_IMODE(file.stat().st_mode) != 0o600:
            os.chmod(file, 0o600)
    env.reader_check()
    try:
        if readonly:
            dbs = {name.decode(): env.open_db(name, create=False) for name in DATABASES}
        else:
            with env.begin(write=True) as txn:
                dbs = {name.decode(): env.open_db(name, txn=txn) for name in DATABASES}
    except lmdb.Error as exc:
        env.close()
        raise StoreCorrupt(f"the store at {path} lacks its tables: {exc}") from None
    return env, dbs
