"""Snapshots: how stores on many hosts are analysed by one Spark job (docs/design.md#pipeline,
README.md "Stores on many hosts").

`take(store, DIR)` (`mqcli snapshot DIR`) writes into DIR a new subdirectory named for the
store and the time, `<name>-<guid8>-<YYYYmmddTHHMMSSZ>`, holding

- `store/`: the consistent, compacted copy `Store.backup` makes while the store is in use
  (LMDB's mdb_env_copy with compaction);
- `manifest.json`: the store's GUID, name and path, the host, the time, the SequentialID, and
  every file of `store/` with its size and SHA-256. GUID, name and SequentialID are read from
  the copy itself (locate.own_identity), so a reader can check a copy against them.

It is built under a hidden name (`.snapshot.part-<random>`) and renamed into place once whole,
so a reader (a sync to HDFS or object storage, a Spark job) never sees half a snapshot; readers
skip names starting with a dot. The build is marked live as a backup's is (a flock held while
it runs), so the next snapshot into DIR removes what a killed one left (engine._remove_dead_backups).
DIR and the directories above it must be the running user's or root's (ownership.check_parents, as
for a backup). Nothing of the store is changed: taking a snapshot runs no maintenance
(`Store.as_is`).

`find(DIR)` lists the snapshots of DIR (or DIR itself when it is one), the newest of each
store, each manifest checked whole as it is read (locate.read_manifest: a damaged one is
StoreCorrupt, exit 11, naming the snapshot and the field); the `mqstore` source plans its partitions over them on this host's local copies
(`local_copies`, locate.local_copy: sizes, checksums, and the copy's own GUID, name and
SequentialID checked against the manifest before Spark reads a page) and names them by the stores' original paths (`renamed`:
rows equal a direct scan's), each carrying the snapshot directory every executor copies and
opens in turn.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine import _backup_sibling, _remove_dead_backups
from ..environment import layout_error, sync_directory
from ..errors import StoreUnavailable
from ..ownership import check_parents
from .columns import StoreIdentity
from .locate import MANIFEST, MANIFEST_FORMAT, STORE_DIR, local_copy, own_identity, read_manifest
from .scan import ScanRange

if TYPE_CHECKING:
    from ..engine import Store

FORMAT = MANIFEST_FORMAT
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_BUILDING = "snapshot"  # snapshots are built as backups of DIR/snapshot are: `.snapshot.part-*`


def _checksums(folder: Path) -> dict[str, dict[str, Any]]:
    """Size and SHA-256 of the store's files (not LMDB's lock file, not the wait folder)."""
    files: dict[str, dict[str, Any]] = {}
    for file in sorted(folder.iterdir()):
        if not file.is_file() or file.name == "lock.mdb":
            continue
        digest = hashlib.sha256()
        with open(file, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        files[file.name] = {"size": file.stat().st_size, "sha256": digest.hexdigest()}
    return files


def _write_file(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def take(st: Store, root: str | Path) -> tuple[Path, dict[str, Any]]:
    """Write a snapshot of the open store `st` into a new subdirectory of `root` (made if
    missing); return its path and manifest."""
    root = Path(root)
    check_parents(root / _BUILDING, "snapshot")  # DIR too: whoever may change it could swap the build
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        failed = layout_error(root, exc)  # its kind: no permission, a full disk, else unusable
        raise type(failed)(f"cannot write a snapshot into {root}: {exc.strerror or exc}") from None
    with st.as_is():
        info = st.info()
    stamp = time.gmtime()
    name = f"{_UNSAFE.sub('_', info.name)[:64] or 'store'}-{info.guid[:8]}-{time.strftime('%Y%m%dT%H%M%SZ', stamp)}"
    _remove_dead_backups(root / _BUILDING)
    building, lock_fd = _backup_sibling(root / _BUILDING)
    try:
        st.backup(building / STORE_DIR)
        copied = own_identity(building / STORE_DIR)  # read-only: the copy as readers will check it
        manifest = {
            "format": FORMAT, "guid": copied["guid"], "name": copied["name"],
            "store": str(Path(st.path).absolute()), "host": socket.gethostname(),
            "taken": time.strftime("%Y-%m-%dT%H:%M:%SZ", stamp), "taken_us": int(time.time() * 1_000_000),
            "sequential_id": copied["sequential_id"], "files": _checksums(building / STORE_DIR),
        }
        _write_file(building / MANIFEST, json.dumps(manifest, indent=2).encode() + b"\n")
        target = root / name
        for n in range(2, 100):  # two snapshots of one store within a second
            try:
                os.rename(building, target)
                break
            except OSError:
                if not target.exists():
                    raise
                target = root / f"{name}-{n}"
        else:
            raise StoreUnavailable(f"cannot name a new snapshot in {root}: too many named {name}")
        sync_directory(root)
    except OSError as exc:
        failed = layout_error(building, exc)
        raise type(failed)(f"cannot write a snapshot into {root}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(building, ignore_errors=True)
        os.close(lock_fd)
    return target, manifest


def find(root: str | Path, *, allow_foreign: bool = False,
         notes: list[str] | None = None) -> list[tuple[Path, dict[str, Any], int]]:
    """The snapshots under `root` (or `root` itself when it is one): the newest of each store
    (by GUID), in the order of their stores' paths, with the uid owning each (the running
    user, or another for root with `allow_foreign`: locate.read_manifest). None at all is an
    error. Older snapshots of a store are its history, left out unsaid; one left out that was
    taken of another store with the same GUID (a copy, a restored backup; or the same store
    moved, reached by another path, on a host renamed) is said in `notes`: its figures are
    not in the result."""
    root = Path(root)
    if (root / MANIFEST).is_file():
        return [(root, *read_manifest(root, allow_foreign=allow_foreign))]
    try:
        entries = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError as exc:
        raise StoreUnavailable(f"cannot read the snapshots in {root}: {exc.strerror or exc}") from None
    found: dict[str, list[tuple[Path, dict[str, Any], int]]] = {}
    for entry in entries:
        if (entry / MANIFEST).is_file():
            manifest, owner = read_manifest(entry, allow_foreign=allow_foreign)
            found.setdefault(manifest["guid"], []).append((entry, manifest, owner))
    if not found:
        raise StoreUnavailable(f"no snapshots in {root} (take them with `mqcli snapshot {root}` on each host)")
    newest = []
    for guid, snaps in found.items():
        kept = max(snaps, key=lambda e: e[1]["taken_us"])  # read_manifest: whole numbers
        newest.append(kept)
        others = [e for e in snaps if _origin(e[1]) != _origin(kept[1])]
        if others and notes is not None:
            notes.append(
                f"snapshots of queue manager {guid} in {root} were taken of more than one store (a copy of "
                f"it, a restored backup, or the store moved or its host renamed): read the newest, {kept[0].name} "
                f"(store {_origin(kept[1])[1]} on {_origin(kept[1])[0]}); left out "
                + "; ".join(f"{e[0].name} (store {_origin(e[1])[1]} on {_origin(e[1])[0]})" for e in others))
    return sorted(newest, key=lambda e: (str(e[1]["store"]), str(e[0])))


def _origin(manifest: dict[str, Any]) -> tuple[str, str]:
    """Where a snapshot was taken: its host and store path."""
    return str(manifest["host"]), str(manifest["store"])


def identities(root: str | Path, *, allow_foreign: bool = False,
               notes: list[str] | None = None) -> list[StoreIdentity]:
    """The planned identity of each snapshot `find` gives (its `notes` too)."""
    return [StoreIdentity(path=str(m["store"]), name=str(m["name"]), guid=str(m["guid"]),
                          snapshot=str(p.absolute()), owner=owner)
            for p, m, owner in find(root, allow_foreign=allow_foreign, notes=notes)]


def local_copies(root: str | Path, *, allow_foreign: bool = False) -> dict[str, StoreIdentity]:
    """This host's verified local copy (locate.local_copy) of every snapshot `find` gives:
    copy path -> the planned identity (the original store's path, the snapshot directory)."""
    return {str(local_copy(where).absolute()): where for where in identities(root, allow_foreign=allow_foreign)}


def renamed(ranges: Sequence[ScanRange], by_copy: dict[str, StoreIdentity]) -> list[ScanRange]:
    """Ranges planned on local copies, named as the stores they copy, each carrying its
    snapshot directory (what every executor copies and opens in turn)."""
    return [replace(r, store=by_copy[r.store.path]) for r in ranges]
