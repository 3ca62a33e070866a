"""Where a Spark task reads the store the driver planned, and that it is that store
(docs/design.md#pipeline, "Many hosts").

- `open_readonly(path)`: a store's LMDB environment, read-only, with the store's own settings.
- `planned(path)`: the identity (path, name, GUID) the driver plans a store's partitions with.
- `open_planned(where)`: what a partition opens. A store is opened at its path; a snapshot
  (`where.snapshot`, written by `mqcli snapshot`) is first copied to this host's local disk
  (`local_copy`, each file's checksum verified) and the copy opened. Either way the GUID found
  must be the GUID planned: a missing store, or another store at the same path, raises
  `StoreMismatch` naming the path, both GUIDs and the host, and nothing of it is read.

LMDB is never opened over a network filesystem here: its locks and memory map assume one host
(the `lmdb.h` caveats: "do not use LMDB databases on remote filesystems"). A snapshot on shared
storage is read once, sequentially, as plain files, and the copy opened locally.

A `StoreMismatch` raised in a Python worker reaches the driver only as text inside Spark's
exception; `wire` puts the one-line message between `MARKER`s and `unwire` finds it again, so
`mqcli analyze` can end with the same one-line error and exit 11 (session.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lmdb

from .. import keys
from ..environment import no_store, open_environment, read_marker, store_exists
from ..errors import StoreCorrupt, StoreMismatch, StorePermission, StoreUnavailable
from ..ownership import OPENING, check_store, open_checked, private_folder, require_owner
from ..records import guid_text
from .columns import StoreIdentity

MANIFEST = "manifest.json"  # a snapshot's manifest (snapshots.py writes it)
STORE_DIR = "store"         # a snapshot's copy of the store, beside its manifest
MARKER = "MQCLI-STORE-MISMATCH"
_WIRED = re.compile(rf"{MARKER}<<(.*?)>>{MARKER}")
MANIFEST_LIMIT = 16 << 20  # a manifest names a few files: a bigger one is not a manifest
CACHE_DAYS = 1.0  # local copies not used for this long are removed when another is made


@contextmanager
def open_readonly(path: str | Path, *, allow_foreign: bool = False,
                  owner: int | None = None) -> Iterator[tuple[lmdb.Environment, dict[str, Any]]]:
    """The store's environment, read-only, with the store's own map size and tables, once its
    directory and files are checked as Store.open checks them (ownership.check_store: the
    running user's, or another's for root with `allow_foreign`, or `owner`'s when given) and
    found unchanged after LMDB opened them: another user's (or a forged) store is never read."""
    path = Path(path)
    with OPENING:  # the files mapped meanwhile are this open's (StoreFiles.verify_unchanged)
        checked = check_store(path, allow_foreign=allow_foreign, owner=owner)
        if checked is None or not store_exists(path):
            raise no_store(path)
        env, dbs = open_environment(path, read_marker(path)["map_size"], readonly=True)
        try:
            checked.verify_unchanged()
        except BaseException:
            env.close()
            raise
    try:
        yield env, dbs
    finally:
        env.close()


def identity(lt: lmdb.Transaction, dbs: dict[str, Any], path: str) -> StoreIdentity:
    """The identity of the store open at `path` (open_readonly checked whose it is, and the
    tasks reading it check the same owner: `owner`)."""
    guid = lt.get(keys.META_GUID, db=dbs["meta"])
    if guid is None:
        raise StoreCorrupt(f"the store at {path} has no queue manager identity")
    name = lt.get(keys.META_NAME, db=dbs["meta"]) or b""
    return StoreIdentity(path=path, name=bytes(name).decode("utf-8"), guid=guid_text(bytes(guid)),
                         owner=os.stat(path).st_uid)


def planned(path: str | Path, *, allow_foreign: bool = False) -> StoreIdentity:
    """The identity of the store at `path` (its absolute path as the `store` column shows it)."""
    text = str(Path(path).absolute())
    with open_readonly(path, allow_foreign=allow_foreign) as (env, dbs), env.begin() as lt:
        return identity(lt, dbs, text)


def host() -> str:
    return socket.gethostname()


def wire(message: str) -> StoreMismatch:
    """A StoreMismatch whose text carries `message` between markers (it crosses from a Python
    worker to the driver as text); its `message` stays the plain line."""
    exc = StoreMismatch(message)
    exc.args = (f"{MARKER}<<{message}>>{MARKER}",)
    return exc


def unwire(text: str) -> str | None:
    """The one-line message a worker's StoreMismatch carried, if `text` holds one."""
    found = _WIRED.search(text)
    return found.group(1) if found else None


def _missing(where: StoreIdentity, what: str) -> StoreMismatch:
    return wire(f"{what} is missing on executor host {host()} (expected store GUID {where.guid}, "
                f"found none); the job reads nothing of it")


def _other(where: StoreIdentity, what: str, found: str) -> StoreMismatch:
    return wire(f"{what} on executor host {host()} is another store (expected GUID {where.guid}, "
                f"found {found}); the job reads nothing of it")


def _refused(where: StoreIdentity, what: str, exc: StorePermission) -> StoreMismatch:
    return wire(f"{what} on executor host {host()} is refused (expected store GUID {where.guid}): "
                f"{exc}")


@contextmanager
def open_planned(where: StoreIdentity) -> Iterator[tuple[lmdb.Environment, dict[str, Any]]]:
    """The planned store (or its snapshot's local copy), read-only, once its GUID is checked."""
    if where.snapshot is not None:
        path = local_copy(where)
        what = f"the snapshot {where.snapshot} of {where.path}"
    else:
        path = Path(where.path)
        what = f"the store {where.path}"
        try:
            if not store_exists(path):
                raise _missing(where, what)
        except StoreUnavailable as exc:  # a path that cannot be looked into is missing here too
            if isinstance(exc, StoreMismatch):
                raise
            raise _missing(where, what) from None
        try:  # owned by whom the planning accepted (open_readonly checks again, as it opens)
            check_store(path, owner=where.owner)
        except StorePermission as exc:
            raise _refused(where, what, exc) from None
    # a direct store must be owned by whom the planning accepted; a local copy is ours
    with open_readonly(path, owner=None if where.snapshot is not None else where.owner) as (env, dbs):
        with env.begin() as lt:
            raw = lt.get(keys.META_GUID, db=dbs["meta"])
        found = "none" if raw is None else guid_text(bytes(raw))
        if found != where.guid:
            raise _other(where, what, found)
        yield env, dbs


def read_manifest(snapshot: str | Path, *, allow_foreign: bool = False,
                  owner: int | None = None) -> tuple[dict[str, Any], int]:
    """A snapshot's manifest and the uid owning it (StoreUnavailable when there is none or it is
    unreadable). The manifest must be the running user's (or another's for root with
    `allow_foreign`, or `owner`'s when given), as a store's files must: a snapshot left in a
    shared folder by another user is never read."""
    file = Path(snapshot) / MANIFEST
    try:
        fd, st = open_checked(file, os.O_RDONLY, f"the snapshot manifest {file}")
        with open(fd, "rb") as f:
            require_owner(st, f"the snapshot manifest {file}", allow_foreign=allow_foreign, owner=owner)
            data = f.read(MANIFEST_LIMIT + 1)
        if len(data) > MANIFEST_LIMIT:
            raise ValueError(f"it is over {MANIFEST_LIMIT >> 20} MiB, which no manifest is")
        manifest = json.loads(data)
        if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
            raise ValueError("no list of files")
        str(manifest["guid"]), str(manifest["store"])
    except FileNotFoundError:
        raise StoreUnavailable(f"no snapshot at {snapshot} (it has no {MANIFEST}; take one with "
                               f"`mqcli snapshot DIR`)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreCorrupt(f"the snapshot manifest {file} is unreadable: {exc}") from None
    return manifest, st.st_uid


def local_copy(where: StoreIdentity) -> Path:
    """This host's verified copy of the snapshot `where.snapshot`, made on first use: each file
    of the manifest is copied (hashed as it is read) into a private folder under $TMPDIR and
    the whole copy renamed into place only once every checksum matched, so a copy found is a
    whole one. Copies are kept per manifest for the next task (CACHE_DAYS)."""
    assert where.snapshot is not None
    what = f"the snapshot {where.snapshot} of {where.path}"
    try:
        manifest, _ = read_manifest(where.snapshot, owner=where.owner)
    except StoreUnavailable as exc:
        if isinstance(exc, StoreCorrupt):
            raise
        if isinstance(exc, StorePermission):
            raise _refused(where, what, exc) from None
        raise _missing(where, what) from None
    if manifest["guid"] != where.guid:
        raise _other(where, what, str(manifest["guid"]))
    root = Path(tempfile.gettempdir()) / f"mqcli-snapshots-{os.getuid()}"
    private_folder(root, "the snapshot copies folder")
    digest = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:24]
    target = root / f"{where.guid}-{digest}"
    if (target / STORE_DIR).is_dir():
        os.utime(target)
        return target / STORE_DIR
    _prune(root)
    building = root / f".{target.name}.{secrets.token_hex(4)}"
    try:
        (building / STORE_DIR).mkdir(mode=0o700, parents=True)
        for name, expected in manifest["files"].items():
            if "/" in name or name in ("", ".", ".."):
                raise StoreCorrupt(f"the snapshot manifest of {where.snapshot} names a file {name!r} outside it")
            _copy_checked(Path(where.snapshot) / STORE_DIR / name, building / STORE_DIR / name,
                          str(expected["sha256"]), where)
        try:
            os.rename(building, target)
        except OSError:
            if not (target / STORE_DIR).is_dir():  # not a copy another task finished first
                raise
    except OSError as exc:
        raise StoreUnavailable(f"cannot copy the snapshot {where.snapshot} to {root} on host {host()}: "
                               f"{exc.strerror or exc}") from None
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target / STORE_DIR


def _copy_checked(source: Path, target: Path, sha256: str, where: StoreIdentity) -> None:
    digest = hashlib.sha256()
    try:
        fd, st = open_checked(source, os.O_RDONLY, f"the snapshot file {source}")
    except FileNotFoundError:
        raise _missing(where, f"the snapshot file {source}") from None
    src = open(fd, "rb")
    try:
        require_owner(st, f"the snapshot file {source}", owner=where.owner)
    except StorePermission as exc:
        src.close()
        raise _refused(where, f"the snapshot {where.snapshot} of {where.path}", exc) from None
    with src, open(target, "xb") as out:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(target, 0o600)
    if digest.hexdigest() != sha256:
        raise StoreCorrupt(f"the snapshot file {source} does not match its manifest's checksum "
                           f"(damaged or cut short in transfer); copy the snapshot again")


def _prune(root: Path) -> None:
    """Remove local copies not used for CACHE_DAYS, and copies left half-made that long."""
    cutoff = time.time() - CACHE_DAYS * 86400
    for entry in root.iterdir():
        try:
            if entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            continue
