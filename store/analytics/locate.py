"""Where a Spark task reads the store the driver planned, and that it is that store
(docs/design.md#pipeline, "Many hosts").

- `open_readonly(path)`: a store's LMDB environment, read-only, with the store's own settings.
- `planned(path)`: the identity (path, name, GUID) the driver plans a store's partitions with.
- `open_planned(where)`: what a partition opens. A store is opened at its path; a snapshot
  (`where.snapshot`, written by `mqcli snapshot`) is first copied to this host's local disk
  (`local_copy`, each file's checksum verified) and the copy opened. Either way the GUID found
  must be the GUID planned: a missing store, or another store at the same path, raises
  `StoreMismatch` naming the path, both GUIDs and the host, and nothing of it is read.

A snapshot's manifest is checked whole once, as it is read (`read_manifest`: every field's
type and range, the format version, the files a snapshot holds), so no reader meets a field of
the wrong kind; and a copy is checked against it before it is used (`local_copy`: each file's
size and checksum, then the store's own GUID, name and SequentialID, read read-only). That binds
a snapshot to one store's identity and finds damage and mismatches; it is not a signature: who
can write both files can make a consistent snapshot of another store, and the store's path is
the manifest's word alone (a store does not record its path). A snapshot is trusted for being
the running user's files (ownership.py), as a store is.

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
import struct
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lmdb

from .. import keys
from ..environment import MARKER as STORE_MARKER, no_store, open_environment, read_marker, store_exists
from ..errors import StoreCorrupt, StoreMismatch, StorePermission, StoreUnavailable
from ..ownership import OPENING, check_store, open_checked, private_folder, require_owner
from ..records import guid_text
from ..write import Counters
from .columns import StoreIdentity

MANIFEST = "manifest.json"  # a snapshot's manifest (snapshots.py writes it)
STORE_DIR = "store"         # a snapshot's copy of the store, beside its manifest
MARKER = "MQCLI-STORE-MISMATCH"
_WIRED = re.compile(rf"{MARKER}<<(.*?)>>{MARKER}")
MANIFEST_LIMIT = 16 << 20  # a manifest names a few files: a bigger one is not a manifest
MANIFEST_FORMAT = 1  # the manifest layout snapshots.take writes and read_manifest reads (no other)
SNAPSHOT_FILES = ("data.mdb", STORE_MARKER)  # the files of a snapshot's store/ (Store.backup's copy)
IDENTITY = ("guid", "name", "sequential_id")  # manifest fields a copy's own store must agree with
COPY_CHECKS = 2  # what a local copy was checked for (part of its name: a copy checked less is not reused)
_GUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_TAKEN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
_U63, _U64 = (1 << 63) - 1, (1 << 64) - 1
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
    """A snapshot's manifest, checked whole (check_manifest), and the uid owning it
    (StoreUnavailable when there is none; StoreCorrupt, naming the file and the field, when it
    is unreadable or damaged). The manifest must be the running user's (or another's for root
    with `allow_foreign`, or `owner`'s when given), as a store's files must: a snapshot left in
    a shared folder by another user is never read."""
    file = Path(snapshot) / MANIFEST
    try:
        fd, st = open_checked(file, os.O_RDONLY, f"the snapshot manifest {file}")
        with open(fd, "rb") as f:
            require_owner(st, f"the snapshot manifest {file}", allow_foreign=allow_foreign, owner=owner)
            data = f.read(MANIFEST_LIMIT + 1)
        if len(data) > MANIFEST_LIMIT:
            raise ValueError(f"it is over {MANIFEST_LIMIT >> 20} MiB, which no manifest is")
        try:
            document = json.loads(data)
        except RecursionError:  # the decoder recurses per nesting level; a manifest nests two
            raise ValueError("it nests deeper than a manifest does") from None
    except FileNotFoundError:
        raise StoreUnavailable(f"no snapshot at {snapshot} (it has no {MANIFEST}; take one with "
                               f"`mqcli snapshot DIR`)") from None
    except (OSError, ValueError) as exc:
        raise StoreCorrupt(f"the snapshot manifest {file} is unreadable: {exc}") from None
    try:
        manifest = check_manifest(document)
    except ValueError as exc:
        raise StoreCorrupt(f"the snapshot manifest {file} is damaged: {exc}; take the snapshot again") from None
    return manifest, st.st_uid


def check_manifest(document: object) -> dict[str, Any]:
    """`document` (a decoded manifest) if it has the shape snapshots.take writes: format
    MANIFEST_FORMAT; `guid` a GUID's text; `name`, `host` text; `store` an absolute path;
    `taken` an ISO-8601 UTC second; `taken_us` and `sequential_id` whole numbers in range;
    `files` exactly SNAPSHOT_FILES, each with its `size` and `sha256`. Else ValueError naming
    the first field that is not (fields it does not know are left alone: a format that changes
    the meaning of one is a new format)."""
    if not isinstance(document, dict):
        raise ValueError(f"it is {_kind(document)}, not an object")
    manifest: dict[str, Any] = document
    version = _field(manifest, "format", int, "a whole number")
    if version != MANIFEST_FORMAT:
        raise ValueError(f"'format' is {version}, and this mqcli reads format {MANIFEST_FORMAT} only")
    _matching(manifest, "guid", _GUID, "a GUID's text", "a GUID's text (like 6f1c2d3e-…-9a0b)")
    _field(manifest, "name", str, "text")
    _field(manifest, "host", str, "text")
    store = _field(manifest, "store", str, "an absolute path")
    if not store.startswith("/") or "\0" in store:
        raise ValueError(f"'store' must be an absolute path, got {store!r:.80}")
    _matching(manifest, "taken", _TAKEN, "a time", "a UTC time like 2026-01-31T12:00:00Z")
    _whole(manifest, "taken_us", _U63, "microseconds since 1970")
    _whole(manifest, "sequential_id", _U64, "the store's SequentialID")
    files = _field(manifest, "files", dict, "an object naming each file")
    for name in files:
        if name not in SNAPSHOT_FILES:
            raise ValueError(f"'files' names {name!r:.80}, which is no file of a snapshot "
                             f"(it holds {' and '.join(SNAPSHOT_FILES)})")
    for name in SNAPSHOT_FILES:
        entry = files.get(name)
        if entry is None:
            raise ValueError(f"'files' has no {name!r}")
        if not isinstance(entry, dict):
            raise ValueError(f"'files' entry {name!r} must be an object, got {_kind(entry)}")
        _whole(entry, "size", _U63, "bytes", within=f"'files' entry {name!r}")
        sha256 = _field(entry, "sha256", str, "a SHA-256 in hex", within=f"'files' entry {name!r}")
        if not _SHA256.fullmatch(sha256):
            raise ValueError(f"'files' entry {name!r}: 'sha256' must be 64 hex digits, got {sha256!r:.80}")
    return manifest


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a JSON boolean ({str(value).lower()})"
    names = {dict: "a JSON object", list: "a JSON array", str: "a JSON string", int: "a JSON number",
             float: "a JSON number"}
    return f"{names.get(type(value), type(value).__name__)} ({json.dumps(value)[:60]})"


def _field(record: dict[str, Any], key: str, kind: type, what: str, *, within: str = "") -> Any:
    """record[key], if it is of type `kind` (a bool is no number here); ValueError else."""
    where = f"{within}: " if within else ""
    if key not in record:
        raise ValueError(f"{where}{key!r} is missing")
    value = record[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{where}{key!r} must be {what}, got {_kind(value)}")
    return value


def _matching(record: dict[str, Any], key: str, pattern: re.Pattern[str], what: str, shape: str) -> str:
    """record[key], if it is text (`what`) that `pattern` matches whole (`shape`); ValueError else."""
    value: str = _field(record, key, str, what)
    if not pattern.fullmatch(value):
        raise ValueError(f"{key!r} must be {shape}, got {value!r:.80}")
    return value


def _whole(record: dict[str, Any], key: str, most: int, what: str, *, within: str = "") -> int:
    value: int = _field(record, key, int, f"a whole number ({what})", within=within)
    if not 0 <= value <= most:
        where = f"{within}: " if within else ""
        raise ValueError(f"{where}{key!r} must be 0 to {most} ({what}), got {value}")
    return value


def own_identity(path: Path, what: str | None = None) -> dict[str, Any]:
    """What the store at `path` (`what`, in errors) says it is, as a manifest names it: its
    GUID, name and SequentialID, read in one read-only transaction (nothing written, no
    messages walked). StoreCorrupt when its data cannot say."""
    what = what or f"the store at {path}"
    with open_readonly(path) as (env, dbs):
        try:
            with env.begin() as lt:
                meta = dbs["meta"]
                guid, name = lt.get(keys.META_GUID, db=meta), lt.get(keys.META_NAME, db=meta)
                counters = lt.get(keys.META_COUNTERS, db=meta)
            if guid is None:
                raise ValueError("it has no queue manager identity")
            return {"guid": guid_text(bytes(guid)), "name": bytes(name or b"").decode("utf-8"),
                    "sequential_id": Counters(None if counters is None else bytes(counters)).seq}
        except (lmdb.Error, ValueError, struct.error) as exc:
            raise StoreCorrupt(f"{what} is damaged: {exc}") from None


def local_copy(where: StoreIdentity) -> Path:
    """This host's verified copy of the snapshot `where.snapshot`, made on first use: each file
    of the manifest is copied (its size and checksum checked as it is read) into a private
    folder under $TMPDIR, the copy's own store identity compared with the manifest's
    (check_copy), and the whole copy renamed into place only then, so a copy found is a whole,
    checked one. Copies are kept per manifest for the next task (CACHE_DAYS)."""
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
    digest = hashlib.sha256(json.dumps([COPY_CHECKS, manifest], sort_keys=True).encode()).hexdigest()[:24]
    target = root / f"{where.guid}-{digest}"
    if (target / STORE_DIR).is_dir():
        os.utime(target)
        return target / STORE_DIR
    _prune(root)
    building = root / f".{target.name}.{secrets.token_hex(4)}"
    try:
        (building / STORE_DIR).mkdir(mode=0o700, parents=True)
        for name in SNAPSHOT_FILES:  # read_manifest: exactly these, each with size and sha256
            expected = manifest["files"][name]
            _copy_checked(Path(where.snapshot) / STORE_DIR / name, building / STORE_DIR / name,
                          expected["size"], expected["sha256"], where)
        check_copy(building / STORE_DIR, manifest, where.snapshot)
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


def check_copy(copy: Path, manifest: dict[str, Any], snapshot: str | Path) -> None:
    """The store copied from `snapshot` to `copy` is the one its manifest names: its own GUID,
    name and SequentialID (own_identity) are the manifest's; StoreCorrupt naming each that is not."""
    what = f"the store of the snapshot {snapshot}"
    try:
        found = own_identity(copy, what)
    except StoreUnavailable as exc:
        if isinstance(exc, StorePermission) or what in exc.message:
            raise
        # LMDB (or the marker) refused the copy: named by the snapshot, not by the private copy
        raise StoreCorrupt(f"{what} cannot be opened ({exc.message.replace(str(copy), 'its local copy')}); "
                           f"take the snapshot again") from None
    differ = [f"{field} {found[field]!r:.80} (the manifest says {manifest[field]!r:.80})"
              for field in IDENTITY if found[field] != manifest[field]]
    if differ:
        raise StoreCorrupt(f"the snapshot {snapshot} does not match its manifest: its store has "
                           f"{'; '.join(differ)}; a damaged or forged snapshot is not read")


def _copy_checked(source: Path, target: Path, size: int, sha256: str, where: StoreIdentity) -> None:
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
    copied = 0
    with src, open(target, "xb") as out:
        if st.st_size != size:  # before copying a byte of it
            raise _wrong_size(source, st.st_size, size)
        while chunk := src.read(1 << 20):
            copied += len(chunk)
            if copied > size:  # grew as it was read: not the file the manifest names
                raise _wrong_size(source, copied, size)
            digest.update(chunk)
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(target, 0o600)
    if copied != size:
        raise _wrong_size(source, copied, size)
    if digest.hexdigest() != sha256:
        raise StoreCorrupt(f"the snapshot file {source} does not match its manifest's checksum "
                           f"(damaged or cut short in transfer); copy the snapshot again")


def _wrong_size(source: Path, found: int, size: int) -> StoreCorrupt:
    return StoreCorrupt(f"the snapshot file {source} is {found} bytes, its manifest says {size} "
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
