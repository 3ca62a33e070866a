"""Opening the LMDB environment of a store directory safely.

- The map is reserved large once (LMDB only reserves address space; the file grows as pages
  are written), because `mdb_env_set_mapsize` while another process has the store open
  corrupts it. The size chosen at creation is kept in the store's marker file.
- The environment runs with `metasync=False`: each commit still fsyncs its data pages, but the
  meta page is flushed by the next sync. A commit that must be durable (recoverable messages,
  docs/design.md#store) calls `env.sync(True)` after it; a light commit (express messages, entering an
  in-flight state) does not, so an OS crash may undo it, never corrupt the store. We do not use
  MDB_NOSYNC for express messages: with it an OS crash can corrupt the whole environment.
- Stale reader slots of killed processes are cleared on open (`reader_check`).
- A data file cut short (a full disk, a bad copy) is refused before it is mapped, and checked
  again by a Store used after a wait: LMDB reads pages straight from the map, and a page past
  the end of the file is a SIGBUS, not an error (`verify_data_file`; docs/design.md#store, "A
  damaged data file", "A data file cut while it is mapped").
- What LMDB says of a damaged page is said in one place, naming the store and how to restore
  it (`lmdb_failed`).
"""

from __future__ import annotations

import collections
import errno
import fcntl
import json
import os
import stat
import struct
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NotRequired, TypedDict

import lmdb

from .errors import StoreCorrupt, StoreError, StoreFull, StorePermission, StoreUnavailable
from .keys import DATABASES
from .ownership import private_dir
from .writer_lock import WRITER_LOCK, in_room

MARKER = "mqcli-store.json"
STORE_FORMAT = 4  # 3: available records live in their position entries, a table of their own;
# 4: every write keeps each queue's counters (store/queue_counters.py). A mqcli of format 3 did
# not always, and trusted them where it did not: it must not write a store this one opened. So a
# writable open of a format-3 store marks it 4 (older mqcli refuse it then), and the store's
# layout (keys.META_FORMAT, Store._upgrade_layout) is brought up to date before any other write.
READABLE_FORMATS = (3, STORE_FORMAT)
DEFAULT_MAP_SIZE = 1 << 40  # 1 TiB of address space, sparse on disk
MAP_SIZES = range(1 << 16, 1 << 63)  # a marker's map size outside it is no size mqcli chose


def is_map_size(value: object) -> bool:
    """Whether `value` is a map size mqcli would choose (an int, not a bool, in MAP_SIZES)."""
    return type(value) is int and value in MAP_SIZES
MAX_READERS = 1024


_OURS = (MARKER, "data.mdb", "lock.mdb", "wait", WRITER_LOCK)
_MARKER_TEMP = f".{MARKER}.new"


def store_exists(path: Path) -> bool:
    """Whether `path` holds a store's marker (a store made whole, or one whose LMDB part an
    interrupted `init` left unfinished: its marker says "creating", and Store.open with
    create=True finishes it)."""
    try:
        return (path / MARKER).is_file()
    except OSError as exc:  # is_file ignores ENOENT, ENOTDIR, ELOOP, but not EACCES
        raise layout_error(path, exc) from None


def no_store(path: Path) -> StoreUnavailable:
    """The error for a path that holds no store: only `init` makes one."""
    import shlex

    return StoreUnavailable(f"no store at {path}; create it with `mqcli init --store {shlex.quote(str(path))}`")


def layout_error(path: Path, exc: OSError) -> StoreCorrupt | StoreFull | StorePermission | StoreUnavailable:
    """The store error for an OSError met while making or finding a store's files."""
    what = exc.strerror or str(exc)
    if isinstance(exc, PermissionError):
        return StorePermission(f"no permission for the store at {path}: {what}")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreFull(f"the disk is full: cannot make the store at {path} ({what})")
    return StoreUnavailable(f"cannot use {path} as a store: {what}")


_DISK_FULL_TEXTS = (os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT))


def says_disk_full(exc: lmdb.Error) -> bool:
    """Whether LMDB failed for want of disk space (it gives errno only as strerror text)."""
    return any(text in str(exc) for text in _DISK_FULL_TEXTS)


def prepare_directory(path: Path) -> None:
    """Make `path` a store's directory (0700, with `wait/`), or refuse it unchanged: a path
    that is not a directory, a directory holding anything else, or one holding an LMDB data
    file with no marker (a store whose marker was lost: making a new identity over it would
    orphan its messages and links)."""
    try:
        try:
            names = os.listdir(path)
        except FileNotFoundError:
            path.mkdir(mode=0o700, parents=True)
            names = []
        foreign = [n for n in names if n not in _OURS and n != _MARKER_TEMP]
        if foreign:
            raise StoreUnavailable(f"{path} is not empty and not an mqcli store (holds {foreign[0]!r})")
        if "data.mdb" in names and MARKER not in names and not (path / MARKER).exists():
            raise StoreCorrupt(
                f"{path} holds a store's data.mdb but not its {MARKER}; restore the marker from a "
                f"backup (or remove data.mdb and lock.mdb to start afresh, losing its messages)")
        os.chmod(path, 0o700)
        private_dir(path / "wait")  # FIFOs of waiting getters (notify.py)
    except OSError as exc:
        raise layout_error(path, exc) from None


@contextmanager
def creation_lock(path: Path) -> Iterator[None]:
    """Serialize the processes making (or finishing) the store in directory `path`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise layout_error(path, exc) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def discard_unfinished_data(path: Path) -> None:
    """In a store still being made (under creation_lock): a data file shorter than LMDB's two
    meta pages holds no commit (LMDB writes both before its first one), so an `init` that a
    full disk stopped there leaves nothing to keep. Remove it, and LMDB makes it anew."""
    file = path / "data.mdb"
    try:
        if file.stat().st_size < 2 * 4096:
            file.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise layout_error(path, exc) from None


class Marker(TypedDict):
    """The marker file (`MARKER`) that says a directory holds a store."""
    format: int  # STORE_FORMAT of the mqcli that made it
    map_size: int  # chosen at creation, kept for every later open
    creating: NotRequired[bool]  # `init` has not made the LMDB part yet


def write_marker(path: Path, map_size: int, *, creating: bool = False, format: int = STORE_FORMAT) -> None:
    """Write the marker whole or not at all (0600): a temporary file, synced, renamed.
    `creating`: the LMDB part is not made yet (Store.open finishes such a store). `format`:
    another than this version's (a backup's copy of a store not yet upgraded keeps its own)."""
    temp = path / _MARKER_TEMP
    marker: Marker = {"format": format, "map_size": map_size}
    if creating:
        marker["creating"] = True
    try:
        try:  # a temporary file a killed writer left: made anew, never written through
            temp.unlink()
        except FileNotFoundError:
            pass
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, json.dumps(marker).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(temp, 0o600)
        os.rename(temp, path / MARKER)
        sync_directory(path)
    except OSError as exc:
        try:
            temp.unlink()
        except OSError:
            pass
        raise layout_error(path, exc) from None


def sync_directory(path: Path) -> None:
    """fsync a directory, so that a rename into it survives a crash."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_marker(path: Path) -> Marker:
    try:
        marker: Marker = json.loads((path / MARKER).read_text())
        if not is_map_size(marker.get("map_size")):
            raise ValueError(f"no map size mqcli would choose: {marker.get('map_size')!r:.40}")
    except FileNotFoundError:
        raise no_store(path) from None
    except PermissionError:
        raise StorePermission(f"no permission to read the store at {path}") from None
    except (ValueError, OSError, AttributeError) as exc:
        raise StoreCorrupt(f"the store marker {path / MARKER} is unreadable: {exc}") from None
    if marker.get("format") not in READABLE_FORMATS:
        raise StoreUnavailable(
            f"the store at {path} has format {marker.get('format')!r}; this mqcli reads formats "
            f"{' and '.join(map(str, READABLE_FORMATS))} (export it with the mqcli that made it, then import)")
    return marker


def check_permissions(path: Path) -> None:
    """Refuse a store whose directory others may write to (docs/design.md#store: 0700)."""
    mode = path.stat().st_mode
    if stat.S_IMODE(mode) & (stat.S_IWGRP | stat.S_IWOTH):
        raise StorePermission(
            f"the store directory {path} is writable by group or others "
            f"(mode {stat.S_IMODE(mode):o}); run `chmod 700 {path}` or pass --allow-unsafe-permissions"
        )


# LMDB's two meta pages (lmdb.h 0.9, 64-bit): page header pgno(8) pad(2) flags(2) lower(2)
# upper(2), then MDB_meta: magic, version, address, mapsize, the free and main MDB_db (pad —
# the page size, in the free db —, flags, depth, branch, leaf and overflow pages, entries,
# root), last_pg, txnid. Native byte order: LMDB writes its own structs.
_META = struct.Struct("=QHHHH" + "IIQQ" + "IHHQQQQQ" * 2 + "QQ")
_META_MAGIC, _META_VERSION = 0xBEEFC0DE, 1
_FREE_ROOT, _MAIN_ROOT, _NO_PAGE = 16, 24, (1 << 64) - 1


@dataclass(frozen=True)
class MetaPage:
    """What the newest of LMDB's two meta pages says."""

    psize: int
    txnid: int
    last_pg: int  # the highest page any commit took: the file's pages are 0 to last_pg
    roots: tuple[int, ...]  # root pages of the free-page and main B-trees (those that exist)
    free_root: int | None = None  # the free-page B-tree's root (None: no page is free)
    main_root: int | None = None  # the main B-tree's root: the named tables' records


def read_meta(data: BinaryIO) -> MetaPage | str:
    """The newest meta page of an open data file, or what is wrong with the two."""
    found = meta_pages(data)
    return found if isinstance(found, str) else max(found, key=lambda m: m.txnid)


def meta_pages(data: BinaryIO) -> list[MetaPage] | str:
    """Both meta pages of an open data file, or what is wrong with them."""
    found = []
    psize = 0
    for page in (0, 1):
        data.seek(page * psize)
        raw = data.read(_META.size)
        if len(raw) < _META.size:
            return f"it ends inside meta page {page}"
        meta = _META.unpack(raw)
        if meta[5] != _META_MAGIC or meta[6] != _META_VERSION:
            return f"meta page {page} is not an LMDB meta page"
        if page == 0:
            psize = meta[9]
            if psize < 512 or psize > 65536 or psize & (psize - 1):
                return f"meta page 0 gives an impossible page size {psize}"
        roots = tuple(r for r in (meta[_FREE_ROOT], meta[_MAIN_ROOT]) if r != _NO_PAGE)
        free_root = meta[_FREE_ROOT] if meta[_FREE_ROOT] != _NO_PAGE else None
        main_root = meta[_MAIN_ROOT] if meta[_MAIN_ROOT] != _NO_PAGE else None
        found.append(MetaPage(psize, meta[-1], meta[-2], roots, free_root, main_root))
    return found


def committed_txnid(path: Path) -> int:
    """The id of the store's last committed LMDB transaction (one more for each commit that
    changed something), read from the meta pages without opening the environment."""
    with open(path / "data.mdb", "rb") as data:
        meta = read_meta(data)
    if isinstance(meta, str):
        raise StoreCorrupt(f"the store at {path} is damaged: {meta}")
    return meta.txnid


RESTORE = "restore the store from a backup (`mqcli backup`) or a snapshot (`mqcli snapshot`)"
# what LMDB returns for pages that are not what it expects: it keeps no checksums, so a damaged
# page is one of the wrong type, number or size (MDB_CORRUPTED, MDB_PAGE_NOTFOUND, MDB_INVALID)
_DAMAGE = (lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.InvalidError)
_opened: set[str] = set()  # the stores this process opened (lmdb_failed)


def lmdb_failed(exc: lmdb.Error, path: str | os.PathLike[str] | None = None, what: str = "") -> StoreError:
    """The one error for what LMDB said reading or writing the store at `path` (after `what`,
    a prefix): damage it met is StoreCorrupt naming the store and how to restore it, anything
    else StoreUnavailable (both exit 11, README.md#exit-codes). Without `path`, the one store
    this process opened, if it opened one."""
    if path is None and len(_opened) == 1:
        path = next(iter(_opened))
    where = f"the store at {os.fspath(path)}" if path is not None else "the store"
    if isinstance(exc, _DAMAGE):
        return StoreCorrupt(f"{what}{where} is damaged: LMDB: {exc}; {RESTORE}")
    return StoreUnavailable(f"{what}LMDB failed on {where}: {exc} (`mqcli check` tells whether it is damaged)")


def verify_data_file(path: Path, data: BinaryIO | None = None) -> None:
    """Refuse a data file that LMDB would map and then crash on: LMDB reads pages straight
    from the map, and a page past the end of a file cut short (a copy stopped by a full disk,
    `truncate`) is a SIGBUS wherever it is touched, not an error. So before LMDB maps it, the
    file must hold every page its newest meta page says the environment uses, 0 to `last_pg`
    (an fstat and a read of the two meta pages: about 0.1 ms). LMDB itself may leave the
    file shorter: pages a transaction took and freed again before its commit are never
    written (a large value put and deleted in one transaction), and it copies such a file
    only as far as it goes (`mdb_env_copy`). Those pages are in the free list, which no read
    follows, so a short file is accepted when every page it lacks is listed there
    (`_free_pages`, read from the file, not through a map). Pages of zeros inside the file
    are LMDB's to find (MDB_CORRUPTED), or `mqcli check`'s, which walks every table in a
    child process. With `data`, the file open already: the one a Store has mapped, checked
    again when the store is used after a wait (a file cut while it was mapped: about 15 µs)."""
    file = path / "data.mdb"
    if struct.calcsize("P") != 8:
        return  # another meta layout
    for _attempt in range(3):  # a meta page read while a commit rewrites it may be torn
        try:
            opened = nullcontext(data) if data is not None else open(file, "rb")  # noqa: SIM115  (closed by the `with`)
        except FileNotFoundError:
            return  # a store being created
        with opened as read:
            meta = read_meta(read)
            size = os.fstat(read.fileno()).st_size
            if isinstance(meta, str):
                continue
            in_file = size // meta.psize  # whole pages: a page cut anywhere is lost
            if all(r < in_file for r in meta.roots):
                if meta.last_pg < in_file:
                    return
                free = _free_pages(read, meta, in_file)
                lacking = meta.last_pg + 1 - in_file
                if free is not None and lacking <= len(free) and all(
                        p in free for p in range(in_file, meta.last_pg + 1)):
                    return
    if isinstance(meta, str):
        what = f"{file} is not a sound LMDB data file: {meta} ({size} bytes)"
    else:
        needed = (max(meta.last_pg, *meta.roots) + 1) * meta.psize
        what = (f"{file} is truncated: {size} bytes, but LMDB's meta page says it uses {needed} "
                f"({needed // meta.psize} pages of {meta.psize} bytes)")
    raise StoreCorrupt(f"the store at {path} is damaged: {what}; {RESTORE}")


# LMDB's page layout (lmdb.h/mdb.c 0.9, 64-bit, native byte order): a page header, then on a
# branch or leaf page an array of 16-bit node offsets up to `lower`; a node is lo, hi,
# flags, key size, the key, then (leaf) the value or (F_BIGDATA) the number of its first
# overflow page. A branch node's child page number is lo | hi << 16 | flags << 32, a leaf
# node's value size lo | hi << 16. The free-page table maps a transaction id to the pages it
# freed: a count, then that many page numbers.
_PAGE_HEADER = struct.Struct("=QHHHH")  # pgno, pad, flags, lower, upper
_NODE = struct.Struct("=HHHH")  # lo, hi, flags, key size
_P_BRANCH, _P_LEAF, _P_OVERFLOW, _F_BIGDATA = 0x01, 0x02, 0x04, 0x01
_U64 = struct.Struct("=Q")


def _free_pages(data: BinaryIO, meta: MetaPage, in_file: int) -> set[int] | None:
    """The pages LMDB's free-page table lists, read with plain reads of the file's first
    `in_file` pages; None if the table does not read as one whole B-tree there."""
    free = _free_list(data, meta, in_file)
    return None if free is None else set(free[1])


def _free_list(data: BinaryIO, meta: MetaPage, in_file: int) -> tuple[list[int], list[int]] | None:
    """The pages LMDB's free-page table takes and the pages it lists (as listed: a page twice
    if twice), read with plain reads of the file's first `in_file` pages; None if the table
    does not read as one whole B-tree there."""
    if meta.free_root is None:
        return [], []
    tree = _tree(data, meta.free_root, meta.psize, in_file)
    if tree is None:
        return None
    listed: list[int] = []
    for _flags, _key, value in tree[1]:
        if len(value) < _U64.size:
            return None
        count = _U64.unpack_from(value)[0]
        if count > len(value) // _U64.size - 1:
            return None
        listed.extend(struct.unpack_from(f"={count}Q", value, _U64.size))
    return tree[0], listed


Node = tuple[int, bytes, bytes]  # a leaf node's flags, key and value


def _tree(data: BinaryIO, root: int, psize: int, in_file: int, *,
          nodes: bool = True) -> tuple[list[int], list[Node]] | None:
    """The B-tree whose root is page `root`, read with plain reads of the file's first
    `in_file` pages: the pages it takes (branch, leaf, overflow) and (with `nodes`) its leaf
    nodes; None if it does not read as one whole B-tree there."""

    def read(pgno: int, at: int, length: int) -> bytes | None:
        if pgno >= in_file or (pgno * psize + at + length) > in_file * psize:
            return None
        data.seek(pgno * psize + at)
        raw = data.read(length)
        return raw if len(raw) == length else None

    todo, seen, pages, found = [root], set(), list[int](), list[Node]()
    while todo:
        pgno = todo.pop()
        page = read(pgno, 0, psize) if pgno not in seen else None
        if page is None:
            return None
        seen.add(pgno)
        pages.append(pgno)
        number, _, flags, lower, _ = _PAGE_HEADER.unpack_from(page)
        if number != pgno or not flags & (_P_BRANCH | _P_LEAF) or not _PAGE_HEADER.size <= lower <= psize:
            return None
        for i in range((lower - _PAGE_HEADER.size) // 2):
            (at,) = struct.unpack_from("=H", page, _PAGE_HEADER.size + 2 * i)
            if at + _NODE.size > psize:
                return None
            lo, hi, node_flags, key_size = _NODE.unpack_from(page, at)
            if flags & _P_BRANCH:
                todo.append(lo | hi << 16 | node_flags << 32)
                continue
            key_at = at + _NODE.size
            size, at = lo | hi << 16, key_at + key_size
            if node_flags & _F_BIGDATA:  # the value is on overflow pages of its own
                first = _U64.unpack_from(page, at)[0] if at + _U64.size <= psize else in_file
                value = read(first, 0, _PAGE_HEADER.size + size if nodes else _PAGE_HEADER.size)
                if value is None or not _overflow_page(value, first):
                    return None
                value = value[_PAGE_HEADER.size:]
                pages.extend(range(first, first + (_PAGE_HEADER.size - 1 + size) // psize + 1))  # LMDB's OVPAGES
            elif at + size <= psize:
                value = page[at:at + size]
            else:
                return None
            if nodes:
                found.append((node_flags, page[key_at:key_at + key_size], value))
    return pages, found


def _overflow_page(raw: bytes, pgno: int) -> bool:
    number, _, flags, _, _ = _PAGE_HEADER.unpack_from(raw)
    return number == pgno and bool(flags & _P_OVERFLOW)


_F_SUBDATA, _MDB_DUPSORT = 0x02, 0x04  # a main-table node that is a named table's record; its flag
_MDB_DB = struct.Struct("=IHHQQQQQ")  # a named table's record: pad, flags, depth, 3 page counts, entries, root
_FREE_LIST = "LMDB's free list (the B-tree of the pages it may reuse)"


def free_list_problems(path: Path, txnid: int) -> list[str]:
    """What is wrong with LMDB's free list in the store at `path` as of its commit `txnid`,
    read with plain reads (LMDB offers no read of it, and reads it only to take pages for a
    write: a damaged one fails every write and nothing else). It must read as one whole
    B-tree and list pages of the file (2 to `last_pg`), each once, none that a B-tree takes:
    a write would take such a page from under its table. Every page must be one or the
    other, as LMDB's own audit counts them (mdb.c `mdb_audit`). The caller holds a read
    transaction of commit `txnid`, so that no writer reuses its pages meanwhile; [] when that
    commit's meta page is gone already (two commits came since: nothing to say). A table's
    B-tree that does not read here is the table walk's to report."""
    with open(path / "data.mdb", "rb") as data:
        first = meta_pages(data)
        meta = next((m for m in first if m.txnid == txnid), None) if isinstance(first, list) else None
        if meta is None:
            return []
        in_file = os.fstat(data.fileno()).st_size // meta.psize
        problems = _page_problems(data, meta, in_file)
        if problems and meta_pages(data) != first:  # a meta page read while a commit wrote it
            return []
    return problems


def _page_problems(data: BinaryIO, meta: MetaPage, in_file: int) -> list[str]:
    free = _free_list(data, meta, in_file)
    if free is None:
        return [f"{_FREE_LIST} does not read as a B-tree from its root, page {meta.free_root}: a damaged "
                f"page (every write would fail)"]
    free_tree, listed = free
    problems = []
    outside = [p for p in listed if not 2 <= p <= meta.last_pg]
    if outside:
        more = f", and {len(outside) - 1} more" if len(outside) > 1 else ""
        problems.append(f"{_FREE_LIST} lists page {outside[0]}, which the store does not have (it has "
                        f"pages 2 to {meta.last_pg}){more}")
    twice = [p for p, n in collections.Counter(listed).items() if n > 1]
    if twice:
        problems.append(f"{_FREE_LIST} lists page {twice[0]} twice")
    main = _tree(data, meta.main_root, meta.psize, in_file) if meta.main_root is not None else ([], [])
    if main is None:
        return problems  # no table opens: the open said so
    owners = {"LMDB's free list": free_tree, "LMDB's main table": main[0]}
    for flags, key, value in main[1]:
        if not flags & _F_SUBDATA or len(value) != _MDB_DB.size:
            continue
        record = _MDB_DB.unpack(value)
        if record[1] & _MDB_DUPSORT:
            return problems  # its sub-trees' pages are not walked here (mqcli's tables have none)
        table = _tree(data, record[-1], meta.psize, in_file, nodes=False) if record[-1] != _NO_PAGE else ([], [])
        if table is None:
            return problems
        owners[f"table {key.decode('utf-8', 'replace')}"] = table[0]
    free_pages = set(listed)
    taken = {0, 1}
    for owner, pages in owners.items():
        used = free_pages.intersection(pages)
        if used:
            problems.append(f"{_FREE_LIST} lists page {min(used)}, which {owner} uses"
                            f"{f' (and {len(used) - 1} more)' if len(used) > 1 else ''}: a write would "
                            f"take it and overwrite it")
        taken.update(pages)
    lost = meta.last_pg + 1 - len(taken | free_pages)
    if lost > 0 and not problems:
        problems.append(f"{lost} of the store's {meta.last_pg + 1} pages are in no table and not in {_FREE_LIST}: "
                        f"a damaged free list or table record")
    return problems


# LMDB's lock file: a header and a 64-byte slot per reader (MDB_txninfo, MDB_reader; 65,664
# bytes for 1,024 readers here). Rounded up: extra room is harmless.
LOCK_FILE_BYTES = 64 * (MAX_READERS + 16)


def reserve_lock_file(path: Path) -> None:
    """Allocate the lock file's blocks before LMDB maps it. LMDB writes the lock file through
    its map, and a store made on a full disk would die of SIGBUS there (a page that cannot be
    allocated when first written through a map); reserved, it is a clear StoreFull here."""
    file = path / "lock.mdb"
    try:
        if file.exists() and file.stat().st_blocks * 512 >= LOCK_FILE_BYTES:
            return
        fd = os.open(file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.posix_fallocate(fd, 0, LOCK_FILE_BYTES)
        finally:
            os.close(fd)
    except OSError as exc:
        raise layout_error(path, exc) from None


_FLOCK = "hhqqi4x"  # struct flock: l_type, l_whence, l_start, l_len, l_pid


def open_elsewhere(path: Path) -> bool:
    """Whether another process has the store's LMDB environment open: LMDB holds a shared
    fcntl lock on the first byte of lock.mdb for as long as it has it open. Ask before this
    process opens it: closing a descriptor drops every fcntl lock the process holds on the
    file, LMDB's own too."""
    try:
        fd = os.open(path / "lock.mdb", os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False  # none yet: no one has it open
    try:
        held = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0))
    except OSError:
        return True  # cannot tell: as if someone had
    finally:
        os.close(fd)
    return bool(struct.unpack(_FLOCK, held)[0] != fcntl.F_UNLCK)


_ADDED_LATER = frozenset((b"holders", b"ids"))  # not in stores no mqcli since them wrote


# why a process has one handle on a store, and what a forked one does instead
ONE_HANDLE = ("LMDB allows one handle on a store a process, and a forked process keeps its parent's "
              "registered though it may not use it; use the one open handle, and in a forked process "
              "open the store in a process started anew (subprocess, or multiprocessing's 'spawn' start method)")


def open_environment(path: Path, map_size: int, readonly: bool = False, reserve: bool | None = None,
                     ) -> tuple[lmdb.Environment, dict[str, lmdb._Database]]:
    """The store's LMDB environment and its tables. Writable, the tables are opened in a write
    transaction (LMDB's write lock, briefly). `readonly`, in a read transaction: no lock is
    taken, and a table a later version added is left out if this store lacks it (the caller
    sees it missing from the dict). `reserve`: allocate the lock file first (by default when
    writable), and make its files 0600 again; a read-only open of a copy (a snapshot, read-only
    media) does neither."""
    verify_data_file(path)
    ours = (not readonly) if reserve is None else reserve  # a store of ours, not a copy to read
    if ours:
        reserve_lock_file(path)
    try:
        env = lmdb.open(
            str(path), map_size=map_size, max_dbs=len(DATABASES) + 4, max_readers=MAX_READERS,
            metasync=False, sync=True, mode=0o600, readonly=readonly, lock=True, readahead=False,
        )
    except _DAMAGE as exc:
        raise lmdb_failed(exc, path) from None
    except lmdb.Error as exc:
        if says_disk_full(exc):
            raise StoreFull(f"the disk is full: cannot open the store at {path} ({exc})") from None
        if "Cannot allocate memory" in str(exc):  # mmap of the whole map: address space, not RAM
            raise StoreUnavailable(
                f"cannot open the store at {path}: its map needs {map_size:,} bytes of address "
                f"space (reserved, not used); a limit on virtual memory (`ulimit -v`) forbids it") from None
        if "already open in this process" in str(exc):
            raise StoreUnavailable(f"cannot open the store at {path} again in this process: {ONE_HANDLE}") from None
        raise StoreUnavailable(f"cannot open the store at {path}: {exc}") from None
    for file_name in ("data.mdb", "lock.mdb"):
        file = path / file_name
        if ours and file.exists() and stat.S_IMODE(file.stat().st_mode) != 0o600:
            os.chmod(file, 0o600)
    env.reader_check()
    try:
        if readonly:
            dbs: dict[str, lmdb._Database] = {}
            for name in DATABASES:
                try:
                    dbs[name.decode()] = env.open_db(name, create=False)
                except lmdb.NotFoundError:
                    # a table added in a later version (``ids``, ``holders``) is made by the first writable
                    # open; a reader of a store no such version opened yet does without it
                    if name not in _ADDED_LATER:
                        raise
        else:
            with in_room(path), env.begin(write=True) as txn:  # a signal ends the wait (writer_lock.py)
                dbs = {name.decode(): env.open_db(name, txn=txn) for name in DATABASES}
    except lmdb.Error as exc:
        env.close()
        if says_disk_full(exc):
            raise StoreFull(f"the disk is full: cannot make the tables of the store at {path}") from None
        if isinstance(exc, (lmdb.CorruptedError, lmdb.PageNotFoundError)):
            raise StoreCorrupt(f"the store at {path} is damaged: LMDB cannot open its tables ({exc}); "
                               f"{RESTORE}") from None
        raise StoreCorrupt(f"the store at {path} lacks its tables: {exc}") from None
    _opened.add(os.path.abspath(path))
    return env, dbs
