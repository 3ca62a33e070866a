"""`Store`: one queue manager in one directory (docs/design.md#store), its queues and its messages.

Each public method is one LMDB transaction (see `write.Write`); waiting getters sleep on a FIFO
(see `notify`) instead of polling.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import struct
import time
import weakref
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from operator import itemgetter
from pathlib import Path
from typing import Any, Literal, TypeVar, Unpack, overload

import lmdb

from . import keys
from .arguments import MAX_SECONDS, is_int, is_seconds, is_text, refuse_control_characters
from .consumer import Consumer, ConsumerIds
from .environment import (
    DEFAULT_MAP_SIZE, MAP_SIZES, ONE_HANDLE, RESTORE, STORE_FORMAT, check_permissions, creation_lock,
    discard_unfinished_data, is_map_size, layout_error, lmdb_failed, no_store, open_elsewhere, open_environment,
    prepare_directory, read_marker, says_disk_full, store_exists, sync_directory, verify_data_file, write_marker,
)
from .errors import (
    AlreadyReceived, IdInUse, InvalidArgument, MessageNotFound, QueueNotAvailable, StoreCorrupt, StoreError,
    StoreFull, StorePermission, StoreUnavailable, Timeout, TransactionError, UnknownLockId,
)
from .filters import Filter
from .forwarding import Forwarding
from .ids import AUTO
from .keys import DATABASES, U32, U64, queue_key
from .maintenance_process import maintain_in_child
from .notify import WAIT_DIR, Waiter, wake
from .ownership import OPENING, StoreFiles, as_owner, check_parents, check_store, open_checked, private_dir
from .queues import (
    DEAD_LETTER, DEAD_LETTER_TX, SYSTEM_QUEUES, QueueAttrs, QueueInfo, encode_queue, validate_attrs,
    validate_name,
)
from .records import (
    AVAILABLE, BROWSE_GET_UNCONFIRMED, DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_PRIORITY, GET_UNCONFIRMED,
    LOCKED_BROWSE, MAX_BODY_BYTES, MAX_PRIORITY, PUT_UNCONFIRMED, STATES, TX_LOCKED, Message, at_rest, decode,
    MAX_PUT_TIME_LEAD_US, check_put_time, decode_many, guid_text, validate_fields,
)
from . import addressing, deadletters, holders, ids, msmq_transactions
from .msmq_transactions import TxInfo
from .view import View
from .write import GONE, MAINTENANCE_BATCH, Carry, Write, new_guid
from .writer_lock import WriterLock

T = TypeVar("T")
FOREVER = None
_DISK_NEARLY_FULL = 64 << 20  # an EIO from a write with less free than this: a full disk
_WAIT_SLICE = 1.0  # a waiting getter re-checks at least this often (lapsed leases wake no one)
# a store used again after this long unused (a wait for a wake-up, a timer, input, a peer)
# checks its data file first (Store._env): the operations of a command come far closer together
_IDLE = 0.1
MAX_ID = (1 << 63) - 1
NewId = int | Literal["auto"]  # a confirm id or lock id a new holder names: AUTO draws a fresh one
_DEAD_LETTER_QUEUES = (DEAD_LETTER, DEAD_LETTER_TX)


_new_message = Message.__new__  # put_many's hot path: see there
_KEY, _RECORD = itemgetter(0), itemgetter(1)  # of a (position key, record) pair
_PLACE = itemgetter(slice(len(keys.queue_prefix(0)), None))  # a position key's tail: holders.PLACE


@dataclass(slots=True)
class NewMessage:
    """A message to put: the fields a producer chooses (docs/design.md#messages)."""

    body: bytes
    priority: int = DEFAULT_PRIORITY
    correl_id: str | None = None
    label: str = ""
    props: dict[str, str] | None = None
    app_specific: int = 0
    ttl: float | None = None
    express: bool = False
    dead_letter: bool = True
    trace: bool = False
    report_queue: str | None = None
    expires: int | None = None  # µs since the epoch, UTC: when given, the time to be received ends then (not ttl)

    def wrong_type(self) -> str | None:
        """Which field has a type a message cannot hold, said for a person; None if none has.
        Not on the put path: put_many asks only after a TypeError (or the like) was raised."""
        for name, kinds, what in _NEW_MESSAGE_TYPES:
            value = getattr(self, name)
            if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
                return f"{name} must be {what}, got {type(value).__name__} {value!r:.40}"
        if self.props is not None and not all(type(k) is str and type(v) is str for k, v in self.props.items()):
            return "props must map str names to str values"
        texts = [("correl_id", self.correl_id), ("label", self.label), ("report_queue", self.report_queue)]
        texts += [("a property", t) for kv in (self.props or {}).items() for t in kv]
        for name, text in texts:
            if text is not None and not is_text(text):
                return f"{name} is not valid text (it holds a lone surrogate): {text!r:.40}"
        return None


_NEW_MESSAGE_TYPES = (
    ("body", (bytes, bytearray), "bytes"), ("priority", (int,), "an int 0..7"),
    ("correl_id", (str, type(None)), "a str or None"), ("label", (str,), "a str"),
    ("props", (dict, type(None)), "a dict or None"), ("app_specific", (int,), "an int"),
    ("ttl", (int, float, type(None)), "a number of seconds or None"),
    ("expires", (int, type(None)), "a time in µs since the epoch or None"),
    ("report_queue", (str, type(None)), "a queue name (str) or None"),
)


class Imported(list[Message]):
    """What `Store.import_messages` stored, in input order; `skipped` holds, in input order,
    the messages it did not store because they were stored already, `expired` those whose
    time to be received had passed: dead-lettered (reason `expired`) or, sent without
    dead-lettering, dropped, as expiry would have done where they came from, and
    `unconfirmed` the puts that were awaiting their confirm (an older mqcli's export wrote
    them): not messages yet, not stored."""

    def __init__(self, stored: Iterable[Message] = (), skipped: Iterable[Message] = (),
                 expired: Iterable[Message] = (), unconfirmed: Iterable[Message] = ()) -> None:
        super().__init__(stored)
        self.skipped: list[Message] = list(skipped)
        self.expired: list[Message] = list(expired)
        self.unconfirmed: list[Message] = list(unconfirmed)


LAYOUT = 2
"""The layout of the tables (keys.META_FORMAT): 1 (or none), as stores of format 3 wrote them,
where a queue may lack its counters or keep them in an older layout; 2, every queue's counters
current (Store._upgrade_layout) and kept by every write since (environment.STORE_FORMAT 4)."""


def _layout(raw: bytes | None) -> int:
    return 0 if raw is None or len(raw) != U64.size else int(U64.unpack(raw)[0])


def _mark_current(path: Path, env: lmdb.Environment) -> bool:
    """A format-3 store opened to write: marked STORE_FORMAT first, so that no older mqcli
    writes it again (their counters would go stale here), then its layout brought up to date
    (Store._upgrade_layout). Another process may be doing the same: one at a time. False if
    the marker cannot be written (a directory its owner made read-only): the store is used as
    it is, each queue's counters counted as a write needs them (Write._counted)."""
    try:
        with creation_lock(path):
            marker = read_marker(path)
            if marker["format"] != STORE_FORMAT:
                write_marker(path, marker["map_size"])
    except (StorePermission, StoreUnavailable):
        return False
    except BaseException:
        env.close()
        raise
    return True


class Undone(int):
    """How many messages an operators' undo released (`Store.undo_inflight`) or a purge
    removed (`Store.purge_queue`), with what it left in flight: `delivering` counts by holder
    ("get in process 4711": a live process is writing them out or sending them, or a live
    consumer handling them) and
    `tx_locked` those in a transaction; `discarded` says how many of the undone were puts
    awaiting their confirm, which an undo removes (MQe), rather than gets given back."""

    delivering: dict[str, int]
    tx_locked: int
    discarded: int

    def __new__(cls, done: int, delivering: dict[str, int] | None = None, tx_locked: int = 0,
                discarded: int = 0) -> Undone:
        self = super().__new__(cls, done)
        self.delivering = delivering or {}
        self.tx_locked = tx_locked
        self.discarded = discarded
        return self


@dataclass(slots=True)
class StoreInfo:
    """The queue manager: identity, usage, quota and settings (`Store.info`)."""

    guid: str
    name: str
    path: str
    created: int
    sequential_id: int
    quota: int
    throttled: bool
    max_message_size: int
    messages: int
    bytes: int
    map_size: int
    map_used: int
    queues: int
    report_queue: str | None = None  # this queue manager's own report queue (qmgr set --report-queue)


@dataclass(slots=True)
class QueueStats:
    """One queue's depth by state and priority, bytes, oldest message, last put and get (`Store.stats`)."""

    name: str
    depth: int
    bytes: int
    system: bool
    by_state: dict[str, int]
    by_priority: dict[int, int]
    oldest_put_time: int | None = None  # the earliest put time of its messages in any state, µs
    last_put: int | None = None  # when a message was last put on the queue, µs since the epoch
    last_get: int | None = None  # when one was last got from it (None: never)
    quota: int = 0  # bytes, 0: none
    oldest_in_flight: int | None = None  # the earliest `since` of its in-flight messages, µs
    # cumulative since the queue was made (or since the store had counters): put_messages,
    # put_bytes, got_messages, got_bytes, expired, backed_out, dead_lettered
    totals: dict[str, int] = field(default_factory=dict)
    dead_lettered_by_reason: dict[str, int] = field(default_factory=dict)
    guid: str = ""  # the queue's own (QueueInfo.guid): a queue deleted and made again has another


@dataclass(slots=True)
class SweepResult:
    """What one sweep did: messages expired, leases undone, transactions aborted."""

    expired: int = 0
    leases_undone: int = 0
    transactions_aborted: int = 0


def _check_id(value: NewId | None, what: str, *, auto: bool = False) -> None:
    if auto and value == AUTO:
        return
    if value is not None and (not is_int(value) or not 0 < value <= MAX_ID):
        also = f" or {AUTO!r}" if auto else ""
        raise InvalidArgument(f"{what} must be a positive 63-bit integer{also}, got {value!r}")


@overload
def _new_id(t: Write, tag: bytes, q: QueueInfo, ident: NewId, extend: bool = False,
            draw: Callable[[Write, bytes, QueueInfo], int] = ids.draw) -> int: ...
@overload
def _new_id(t: Write, tag: bytes, q: QueueInfo, ident: NewId | None, extend: bool = False,
            draw: Callable[[Write, bytes, QueueInfo], int] = ids.draw) -> int | None: ...


def _new_id(t: Write, tag: bytes, q: QueueInfo, ident: NewId | None, extend: bool = False,
            draw: Callable[[Write, bytes, QueueInfo], int] = ids.draw) -> int | None:
    """The id a new holder takes: a fresh one for AUTO (`draw`n), else the one named, if no
    one else holds it (ids.claim: IdInUse otherwise)."""
    if ident is None:
        return None
    if ident == AUTO:
        return draw(t, tag, q)
    ids.claim(t, tag, q, ident, extend=extend)
    return ident


@overload
def _seconds(value: float, what: str) -> int: ...
@overload
def _seconds(value: float | None, what: str) -> int | None: ...


def _seconds(value: float | None, what: str) -> int | None:
    if value is None:
        return None
    if not is_seconds(value):
        raise InvalidArgument(_not_seconds(value, what))
    if value <= 0:
        raise InvalidArgument(f"{what} must be positive, got {value}")
    us = int(value * 1_000_000)
    if not us:  # 0 µs would read as none given: a lease or timeout that never ends
        raise InvalidArgument(f"{what} must be at least a microsecond (the store's resolution), got {value}")
    return us


def _not_seconds(value: object, what: str) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{what} must be a finite number of seconds up to {MAX_SECONDS} (136 years), got {value!r}"
    return f"{what} must be a number of seconds, got {type(value).__name__} {value!r:.40}"


def _check_count(value: int | None, what: str) -> None:
    if value is not None and (not is_int(value) or value < 1):
        raise InvalidArgument(f"{what} must be an int of at least 1, got {value!r:.40}")


_BACKUP_PART = ".part-"  # `.<target>.part-<random>`: a backup being built next to its target


def _backup_target_usable(target: Path) -> None:
    """`target` may be absent or an empty directory of the running user's, under directories
    no other user may change (ownership.check_parents, as for a new store: they could swap the
    copy being built); anything else is refused before anything is written."""
    check_parents(target, "backup")
    if check_store(target) is None:  # someone else's directory is refused
        return
    try:
        names = os.listdir(target)
    except OSError as exc:
        raise layout_error(target, exc) from None
    if names:
        raise StoreUnavailable(f"{target} is not empty (holds {sorted(names)[0]!r}); back up into a new "
                               f"or empty directory")


def _backup_sibling(target: Path) -> tuple[Path, int]:
    """A new private directory next to `target` to build the backup in, and a descriptor
    holding an exclusive flock on it for as long as the backup runs: the mark of a live backup
    (the kernel drops it however the process ends). Also what a snapshot is built in
    (analytics/snapshots.py), so that both leave only what _remove_dead_backups removes."""
    building = target.parent / f".{target.name}{_BACKUP_PART}{os.urandom(6).hex()}"
    check_parents(building, "backup")  # again: the parents made since _backup_target_usable
    try:
        os.mkdir(building, 0o700)  # fails if it exists: never someone else's directory
        fd, _ = open_checked(building, os.O_RDONLY | os.O_DIRECTORY, f"the backup directory {building}")
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError as exc:
        raise layout_error(building, exc) from None
    return building, fd


def _remove_dead_backups(target: Path) -> None:
    """Remove what killed backups (and snapshots) into `target` left: their sibling
    directories, ours and no longer locked by a live backup."""
    prefix = f".{target.name}{_BACKUP_PART}"
    try:
        names = [n for n in os.listdir(target.parent) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        left = target.parent / name
        try:
            fd, st = open_checked(left, os.O_RDONLY | os.O_DIRECTORY, f"{left}")
        except (OSError, StoreError):
            continue  # gone meanwhile, a link, or not a directory: not ours to remove
        try:
            if st.st_uid != os.geteuid():
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a backup still running
            shutil.rmtree(left, ignore_errors=True)
        finally:
            os.close(fd)


def _seal(file: Path) -> None:
    """Make a copied file private (0600) and durable (fsync)."""
    fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fchmod(fd, 0o600)
        os.fsync(fd)
    finally:
        os.close(fd)


def _qmgr_name(name: object) -> str:
    """A queue manager name a caller gives: text, not blank, no control characters (it is
    shown on one line by `info`, in trace reports and by peers)."""
    if not isinstance(name, str):
        raise InvalidArgument(f"the queue manager name must be a str, got {type(name).__name__} {name!r:.40}")
    if not name.strip():
        raise InvalidArgument("the queue manager name must not be empty")
    return refuse_control_characters(name, "the queue manager name")


def _mark_backup(target: Path, map_size: int, now: int) -> None:
    """Mark a backup's copy (meta `backup`): a store restored from it starts a new sending
    incarnation at its first send, as the SequentialIDs it gives next were given to messages
    sent after the backup (store/outgoing.py, docs/protocol.md §4). And give back what the
    original's processes were delivering (holders.give_back_all): no process holds anything in
    a copy."""
    env, dbs = open_environment(target, map_size)
    try:
        with env.begin(write=True) as lt:
            t = Write(lt, dbs, now)
            holders.give_back_all(t)
            lt.put(keys.META_BACKUP, U64.pack(now), db=dbs["meta"])
            t.flush()
        env.sync(True)
    finally:
        env.close()


# a reading handle's maintenance in a child (Store._maintain_aside): how long a read waits for
# it, and how long after one that could not be done the next is tried
ASIDE_WAIT = 5.0
ASIDE_RETRY = 10.0
ASIDE_EVERY = 1.0  # and at most one a second

# this process's id, kept current across fork() (read on every operation by Store._env)
_PID = [os.getpid()]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))


def _open_verified(path: Path, map_size: int, checked: StoreFiles,
                   readonly: bool = False) -> tuple[lmdb.Environment, dict[str, Any]]:
    """The store's environment, opened by path after `checked`, and only if the directory and
    files LMDB opened are still the ones checked (StoreFiles.verify_unchanged)."""
    env, dbs = open_environment(path, map_size, readonly=readonly, reserve=True)
    try:
        checked.verify_unchanged()
    except BaseException:
        env.close()
        raise
    return env, dbs


class Store(Forwarding):
    """An open store. Use `Store.open(path)`; one per process per directory."""

    def __init__(self, path: Path, env: lmdb.Environment, dbs: dict[str, Any],
                 clock: Callable[[], float]) -> None:
        self.path = path
        self._lmdb = env
        self._pid = os.getpid()
        self._closed = False
        self._dbs = dbs
        self._clock = clock
        self._wait_dir = str(path / WAIT_DIR)
        self.foreign_owner: str | None = None  # set by open: the owner of another user's store
        self._queue_cache: dict[bytes, tuple[bytes, QueueInfo]] = {}
        self._holder = holders.Holder(path)
        # this handle's consumers' rows in `holders` (store/consumer.py): token -> the holder
        # (a locked file of its own) that says the consumer lives; forgotten at close
        self._consumers: dict[int, holders.Holder] = {}
        # the file LMDB maps, to see it cut short after a wait (Store._env); unbuffered: each check reads anew
        self._data = open(path / "data.mdb", "rb", buffering=0)  # noqa: SIM115  (closed by close())
        self._data_path = os.path.abspath(path / "data.mdb")  # where it must stay (_still_at_its_path)
        self._used = time.monotonic()  # when the map was last used
        self._whole = os.fstat(self._data.fileno()).st_size  # its size when last found whole (open checked it)
        self._writers = WriterLock(path)  # the writers' waiting room (writer_lock.py), opened at the first write
        self._as_is = 0  # > 0: inside `as_is()`, reads run no maintenance
        self._carry: Carry | None = None  # what this process's last commit left (write.Carry)
        # opened `reading` (LMDB read-only): maintenance runs in a child (maintenance_process.py)
        self.reading = False
        self._allow = (False, False)  # allow_unsafe_permissions, allow_foreign_owner: for that child
        self._aside_failed = -1e9  # when the child last could not do it (time.monotonic)
        self._aside_last = -1e9  # when the last child started
        self._guid = ""  # the store's identity, read at open: the child maintains no other store
        # told why a read shows the store as last committed, without what is due (the CLI's note)
        self.on_stale: Callable[[str], None] | None = None

    # ---- opening -----------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, create: bool = False, name: str | None = None,
             map_size: int | None = None, allow_unsafe_permissions: bool = False,
             allow_foreign_owner: bool = False, clock: Callable[[], float] | None = None,
             reading: bool = False) -> Store:
        """Open the store in directory `path`; with `create`, make it first if there is none
        (only `mqcli init` does: a mistyped path must not become a new, empty queue manager).

        `reading`, for a handle that only reads (stats, browse, inflight): the environment is
        opened read-only, without LMDB's write lock, so that another process's write, even one
        stopped inside its commit, holds up none of its reads (docs/design.md#store, "Reads
        take no write lock"). Maintenance a read finds due runs in a child process, waited for
        a while (store/maintenance_process.py); an operation that writes is InvalidArgument.

        The directory and mqcli's files in it must belong to the running user (store/ownership.py);
        root may open another user's store with `allow_foreign_owner`, and the handle's
        `foreign_owner` then names that user. A store is only ever made in a directory of the
        running user's."""
        if not isinstance(path, (str, os.PathLike)) or os.fspath(path) in ("", b""):
            raise InvalidArgument(f"a store path must be a non-empty path, got {path!r:.60}")
        path = Path(path)
        with OPENING:  # the files mapped meanwhile are this open's (StoreFiles.verify_unchanged)
            return cls._open(path, create, name, map_size, allow_unsafe_permissions, allow_foreign_owner,
                             clock, reading)

    @classmethod
    def _open(cls, path: Path, create: bool, name: str | None, map_size: int | None,
              allow_unsafe_permissions: bool, allow_foreign_owner: bool,
              clock: Callable[[], float] | None, reading: bool = False) -> Store:
        checked = check_store(path, allow_foreign=allow_foreign_owner)  # before reading anything
        if checked is None or not store_exists(path) or read_marker(path).get("creating"):
            if not create:
                if checked is not None and store_exists(path):
                    raise StoreUnavailable(f"the store at {path} was never finished (an interrupted "
                                           f"`mqcli init`); run `mqcli init` again")
                raise no_store(path)
            made = cls._make(path, name=name, map_size=map_size, clock=clock)
            if made is not None:
                return made
            checked = check_store(path, allow_foreign=allow_foreign_owner)  # made meanwhile by another
            if checked is None:
                raise no_store(path)  # and removed again
        with as_owner(checked):  # root in another user's store: by path, with the owner's ids
            if not allow_unsafe_permissions:
                check_permissions(path)
            marker = read_marker(path)
            map_size = max(map_size or 0, marker["map_size"])
            current = marker["format"] == STORE_FORMAT
            # an older mqcli's store is upgraded only by a writer that has it to itself: an older
            # process working in it would misread what the upgrade writes (open_elsewhere)
            upgrade = not reading and not current and not open_elsewhere(path)
            env, dbs = _open_verified(path, map_size, checked, readonly=reading)
            if reading and len(dbs) < len(DATABASES):  # a table of a later version still to make
                env.close()
                env, dbs = _open_verified(path, map_size, checked)
                reading = False
            if upgrade:
                current = _mark_current(path, env)
        store = cls(path, env, dbs, clock or time.time)
        store.foreign_owner = checked.foreign_owner
        store.reading = reading
        store._allow = (allow_unsafe_permissions, allow_foreign_owner)
        try:
            with env.begin() as lt:
                guid = lt.get(keys.META_GUID, db=dbs["meta"])
                layout = lt.get(keys.META_FORMAT, db=dbs["meta"])
        except lmdb.Error as exc:  # a damaged page on the way (LMDB keeps no checksums)
            env.close()
            raise lmdb_failed(exc, path) from None
        if guid is None:  # a finished store always has one
            env.close()
            raise StoreCorrupt(f"the store at {path} has no queue manager identity (its data "
                               f"file was replaced or cut short); {RESTORE}")
        store._guid = guid_text(bytes(guid))
        if not reading and current and _layout(layout) < LAYOUT:  # format 4: no older mqcli has it open
            try:
                store._write(store._upgrade_layout, maintain=False)
            except BaseException:
                store.close()
                raise
        return store

    @staticmethod
    def _upgrade_layout(t: Write) -> None:
        """Bring the tables an older mqcli wrote up to LAYOUT, before any other write: every
        queue's counters, counted from its messages if it had none, in the current layout
        (store/queue_counters.py). Computed later, inside a write that had already moved a
        message, they missed it or counted it twice: a confirm or an unlock exited 11 "out of
        range" on every try, a commit stored counters one short."""
        if _layout(t.lt.get(keys.META_FORMAT, db=t.dbs["meta"])) >= LAYOUT:
            return  # another process did it first
        for name in t.queue_names():
            t.queue_counters(t.queue(name).qid, change=True)
        t.lt.put(keys.META_FORMAT, U64.pack(LAYOUT), db=t.dbs["meta"])
        t.durable = True

    @classmethod
    def create(cls, path: str | os.PathLike[str], *, name: str | None = None,
               map_size: int | None = None, clock: Callable[[], float] | None = None) -> Store:
        """Make a store (or finish one an interrupted creation left)."""
        made = cls._make(Path(path), name=name, map_size=map_size, clock=clock)
        if made is None:
            raise StoreUnavailable(f"a store already exists at {path}")
        return made

    @classmethod
    def _make(cls, path: Path, *, name: str | None, map_size: int | None,
              clock: Callable[[], float] | None) -> Store | None:
        """The directory; a marker saying "creating"; the identity and the system queues in
        one commit; then the marker without "creating". Stopped anywhere (killed, a full disk)
        it leaves nothing, or a store the next call finishes; no `check`-clean store without
        its system queues. Serialized between processes; None if a store was already made.
        Only in a directory of the running user's (checked before anything is changed in it)."""
        if name:
            _qmgr_name(name)
        if map_size is not None and not is_map_size(map_size):
            raise InvalidArgument(f"map_size must be an int from {MAP_SIZES.start} to {MAP_SIZES.stop - 1}, "
                                  f"got {map_size!r:.40}")
        try:
            os.fspath(path).encode()
        except UnicodeEncodeError:  # py-lmdb takes UTF-8 paths only: found out after the directory was made
            raise InvalidArgument(f"the store path {os.fsdecode(path)!a} is not valid UTF-8; "
                                  f"a store's path must be (LMDB opens it as UTF-8)") from None
        with OPENING:
            return cls._make_checked(path, name, map_size, clock)

    @classmethod
    def _make_checked(cls, path: Path, name: str | None, map_size: int | None,
                      clock: Callable[[], float] | None) -> Store | None:
        check_store(path)  # a directory someone else made (and can swap files in) is refused
        check_parents(path)  # and one under a directory someone else can change
        if not store_exists(path):
            prepare_directory(path)
        with creation_lock(path):
            checked = check_store(path)  # ours still: made by us, or by no one else meanwhile
            if checked is None:
                raise no_store(path)  # removed meanwhile
            if store_exists(path):
                marker = read_marker(path)
                if not marker.get("creating"):
                    return None  # made meanwhile by another process
                map_size = marker["map_size"]
            else:
                map_size = map_size or DEFAULT_MAP_SIZE
                write_marker(path, map_size, creating=True)
            discard_unfinished_data(path)
            # the files were rewritten or are made next (in a directory only we can write to):
            # what must hold is that LMDB opened them in the directory checked
            checked.files.clear()
            env, dbs = _open_verified(path, map_size, checked)
            store = cls(path, env, dbs, clock or time.time)
            store._initialize(name)
            try:
                write_marker(path, map_size)
            except BaseException:
                store.close()
                raise
        return store

    def _initialize(self, name: str | None) -> None:
        """The queue manager's identity and its system queues, in one durable commit."""
        def initialize(t: Write) -> None:
            meta = self._dbs["meta"]
            if t.lt.get(keys.META_GUID, db=meta) is not None:
                return  # another process finished it first
            t.lt.put(keys.META_FORMAT, U64.pack(LAYOUT), db=meta)
            t.lt.put(keys.META_GUID, new_guid(), db=meta)
            t.lt.put(keys.META_NAME, (name or os.uname().nodename).encode(), db=meta)
            t.lt.put(keys.META_CREATED, U64.pack(t.now), db=meta)
            for system in SYSTEM_QUEUES:
                t.create_queue(system, system=True)
        try:
            self._write(initialize, maintain=False)
        except BaseException:
            self.close()
            raise

    @property
    def _env(self) -> lmdb.Environment:
        """The LMDB environment, in the process that opened it only: LMDB handles do not
        survive fork() ("use an MDB_env in the process which opened it, without fork()ing").
        Used again after a wait (`_IDLE`, or a getter's wake-up: `_waited`), the data file's
        size is looked at first (an fstat), and the file checked as at open (verify_data_file)
        if it shrank: a file cut while it was mapped is a SIGBUS at the first read of a page it
        lost (docs/design.md#store, "A data file cut while it is mapped"); not on a command's
        back-to-back operations."""
        if self._closed:
            raise StoreUnavailable(f"this handle on the store at {self.path} is closed; open the store again")
        if _PID[0] != self._pid:  # every operation asks: no getpid() system call each time
            raise StoreUnavailable(
                f"this handle on the store at {self.path} was opened by process {self._pid}, before "
                f"process {os.getpid()} forked from it: {ONE_HANDLE}")
        now = time.monotonic()
        if now - self._used > _IDLE:
            # LMDB never shrinks its file: one not shorter than when it was last found whole
            # needs no second look (which reads the free list of a file with a free tail: ~1 ms
            # of a getter's wake-up in bench cli's wait latency)
            held = os.fstat(self._data.fileno())
            self._still_at_its_path(held)
            if held.st_size < self._whole:
                verify_data_file(self.path, self._data)
            self._whole = held.st_size
        self._used = now
        return self._lmdb

    def _still_at_its_path(self, held: os.stat_result) -> None:
        """StoreUnavailable if the data file this handle has open is no longer the one at its
        path (a store restored in place, `rm -r` and a copy, while a command kept it open): what
        it wrote would go into a file no one sees again, and what it shows is not the store."""
        try:
            named = os.stat(self._data_path)
        except OSError:
            named = None
        if named is None or (named.st_dev, named.st_ino) != (held.st_dev, held.st_ino):
            raise StoreUnavailable(f"the store at {self.path} was replaced or removed while this command had it "
                                   f"open (restored from a backup?); run the command again")

    def _waited(self) -> None:
        """After a wait for a wake-up: the next use checks the data file (`_env`)."""
        self._used = -1e9

    def close(self) -> None:
        """Close the handle (again: nothing). A forked child leaves its parent's handle alone."""
        if not self._closed and os.getpid() == self._pid:
            if self._consumers:  # consumers never closed: their rows go (else they look alive while the process lives)
                self._forget_consumers(list(self._consumers))
            self._lmdb.close()
            self._data.close()
            self._holder.close()
            self._writers.close()
        self._closed = True

    def __enter__(self) -> Store:
        return self

    def __exit__(self, _type: object, exc: object, _tb: object) -> None:
        self.close()
        if isinstance(exc, lmdb.Error):  # met by a read of the block's own (an iterator's)
            raise lmdb_failed(exc, self.path) from None

    def _now(self) -> int:
        return int(self._clock() * 1_000_000)

    # ---- transactions ------------------------------------------------------------------

    def _maintain(self, t: Write) -> SweepResult:
        """What is due on the next access (docs/design.md#leases), at the start of every write: dead holders'
        messages go back first (a lapse or expiry that came while they were held is due now,
        and the steps after skip the messages of live holders), then lapsed leases are undone,
        expired messages dead-lettered and timed-out transactions aborted. `sweep` runs the
        same steps until nothing is left."""
        if not t.maintenance_due():  # the usual case: nothing is due
            return SweepResult()
        if t.any_held():
            holders.recover(t, self._holder)
        done = SweepResult(leases_undone=t.lapse_leases(), expired=t.expire_messages())
        for tx_id, _ in t.due(keys.TX_TIMEOUT):
            msmq_transactions.finish(t, tx_id, commit=False)
            done.transactions_aborted += 1
        return done

    def _write(self, fn: Callable[[Write], T], maintain: bool = True) -> T:
        """Run `fn` in one write transaction; sync if it made durable changes; wake getters.

        Maintenance expires at most a batch of messages a write (a write transaction stays
        short); when more were due, that batch is committed alone and the next write takes the
        next, until none is left, and only then `fn` runs: no get hands out a message whose
        ttl passed (the 257th of 300 that expired at once was delivered)."""
        while True:
            result = self._write_once(fn, maintain)
            if result is not _BACKLOG:
                return result  # type: ignore[return-value]  # fn's

    def _write_once(self, fn: Callable[[Write], T], maintain: bool) -> T | _Backlog:
        if self.reading:
            raise InvalidArgument("this handle on the store is open for reading only "
                                  "(Store.open(reading=True)); open the store again to write")
        try:
            env = self._env
            # the flock first: a signal ends the wait for it (writer_lock.py), not LMDB's mutex's
            with self._writers, env.begin(write=True) as lt:
                t = Write(lt, self._dbs, self._now(), self._queue_cache, env.begin)
                txn = lt.id()
                carry, self._carry = self._carry, None  # used once: a write that fails leaves none
                if carry is not None and carry.txn + 1 == txn:  # no other write came between
                    t.adopt(carry)
                backlog = maintain and self._maintain(t).expired >= MAINTENANCE_BATCH  # more may be due
                result = _BACKLOG if backlog else fn(t)
                changed = t.flush()
            if changed:  # committed as transaction `txn`: what the next one may start from
                self._carry = t.carry(txn)
        except (lmdb.MapFullError, lmdb.TxnFullError) as exc:
            if maintain:
                # the maintenance may be what does not fit (a dead holder's messages going back
                # need room before the commit frees their held places): the operation alone,
                # a get or a purge, may be what makes room; maintenance comes again next time
                return self._write(fn, maintain=False)
            if isinstance(exc, lmdb.TxnFullError):
                raise StoreFull("the transaction is too large for LMDB; use smaller batches") from None
            raise StoreFull(f"the store at {self.path} is full (its map is used up); get or purge messages") from None
        except lmdb.Error as exc:
            raise self._write_failed(exc) from None
        if t.durable:
            try:
                env.sync(True)
            except lmdb.Error as exc:  # committed, but maybe not on disk
                raise self._write_failed(exc, "the commit went through but its sync failed: ") from None
        if t.woke:
            wake(self._wait_dir, t.woke)
        return result

    def _waiter(self, qid: int, what: str) -> Waiter:
        """A registration for the wake-up of queue `qid` (store/notify.py), made before the look
        that may find nothing, so that no wake-up between the two is lost."""
        try:
            return Waiter(self.path, qid)
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot {what} in the store at {self.path}: {exc.strerror or exc} "
                f"({self.path / WAIT_DIR} must be a directory this user may write)") from None

    def _write_failed(self, exc: lmdb.Error, what: str = "", disk: Path | None = None) -> StoreError:
        """The error for a failed write (to the store, or to `disk`): a full disk is exit 8
        like a full map (README.md#exit-codes). LMDB reports a short write as EIO, so a full disk can also
        come as "Input/output error"."""
        text = str(exc)
        disk = disk or self.path
        try:
            fs = os.statvfs(disk)
            free = fs.f_bavail * fs.f_frsize
        except OSError:
            free = None
        if says_disk_full(exc) or (
                "Input/output error" in text and free is not None and free < _DISK_NEARLY_FULL):
            return StoreFull(f"{what}the disk holding {disk} is full "
                             f"({free if free is not None else '?'} bytes free); free space, or get or purge messages")
        return lmdb_failed(exc, self.path, what)

    @contextmanager
    def as_is(self) -> Iterator[Store]:
        """Reads inside the block change nothing: no maintenance runs before them, so what is
        expired or lapsed is read as such (docs/design.md#pipeline, "Reads do not write": export,
        snapshot and the pipeline)."""
        self._as_is += 1
        try:
            yield self
        finally:
            self._as_is -= 1

    def _read(self, fn: Callable[[Write], T]) -> T:
        """Run `fn` on a consistent snapshot, after undoing lapsed leases and expiring if due
        (not inside `as_is()`)."""
        try:
            if not self._as_is and self._maintenance_due():
                if self.reading:
                    self._maintain_aside()
                else:
                    try:
                        self._write(lambda t: None)
                    except StoreFull:
                        pass  # a full map: show the store as it is (what is due shows as such)
            with self._env.begin() as lt:
                return fn(Write(lt, self._dbs, self._now(), self._queue_cache))
        except lmdb.Error as exc:
            raise lmdb_failed(exc, self.path) from None

    def _maintain_aside(self) -> None:
        """A reading handle's maintenance: done by another process that opens the store
        writable, waited for up to ASIDE_WAIT seconds. Not done (another process holds the write
        lock that long, or the store cannot be written: read-only media), the read shows the
        store as last committed, and `on_stale` says why; the handle tries again after
        ASIDE_RETRY seconds, not on every read. A handle that reads again and again (`stats
        --watch`, `browse --follow`) starts one at most every ASIDE_EVERY seconds."""
        now = time.monotonic()
        if now - self._aside_failed < ASIDE_RETRY or now - self._aside_last < ASIDE_EVERY:
            return
        self._aside_last = now
        why = maintain_in_child(self.path, self._guid, *self._allow, wait=ASIDE_WAIT)
        if why is not None:
            self._aside_failed = time.monotonic()
            if self.on_stale is not None:
                self.on_stale(why)

    def _maintenance_due(self) -> bool:
        with self._env.begin() as lt:
            t = Write(lt, self._dbs, self._now(), self._queue_cache)
            # held messages lapse or expire when their holder gives them back, not now
            return bool(t.due(keys.LEASE, but_held=True) or t.due(keys.EXPIRY, but_held=True)
                        or t.due(keys.TX_TIMEOUT)
                        or (t.any_held() and holders.recovery_due(t, self._holder)))

    # ---- the queue manager -------------------------------------------------------------

    def info(self) -> StoreInfo:
        def read(t: Write) -> StoreInfo:
            stat = self._env.stat()
            einfo = self._env.info()
            return StoreInfo(
                guid=guid_text(t.origin),
                name=t.qm_name,
                path=str(self.path),
                created=t.meta_int(keys.META_CREATED),
                sequential_id=t.counters.seq,
                quota=t.meta_int(keys.META_QUOTA),
                throttled=bool(t.meta_int(keys.META_THROTTLED)),
                max_message_size=t.meta_int(keys.META_MAX_MESSAGE_SIZE) or DEFAULT_MAX_MESSAGE_SIZE,
                messages=t.counters.count,
                bytes=t.counters.bytes,
                map_size=einfo["map_size"],
                map_used=(einfo["last_pgno"] + 1) * stat["psize"],
                queues=t.lt.stat(self._dbs["queues"])["entries"],
                report_queue=t.report_queue,
            )
        return self._read(read)

    def set_qmgr(self, *, name: str | None = None, quota: int | None = None,
                 throttled: bool | None = None, max_message_size: int | None = None,
                 report_queue: str | None = None) -> StoreInfo:
        """Change the queue manager's settings; None leaves one as it is. `report_queue` names
        a queue of this store as the queue manager's own report queue (reports.py: a hop whose
        report queue differs from a traced message's sends it a conflict report); "" removes it."""
        validate_attrs(quota=quota)
        if report_queue is not None and not isinstance(report_queue, str):
            raise InvalidArgument(f"the report queue must be a str, got {type(report_queue).__name__} {report_queue!r:.40}")
        if name is not None:
            _qmgr_name(name)
        if throttled is not None and not isinstance(throttled, bool):
            raise InvalidArgument(f"throttled must be True or False, got {throttled!r:.40}")
        if max_message_size is not None and (not is_int(max_message_size)
                                             or not 1 <= max_message_size <= MAX_BODY_BYTES):
            raise InvalidArgument(f"max-message-size must be 1..{MAX_BODY_BYTES} bytes, got {max_message_size!r}")

        def change(t: Write) -> None:
            if name is not None:
                t.lt.put(keys.META_NAME, name.encode(), db=self._dbs["meta"])
            if quota is not None:
                t.set_meta_int(keys.META_QUOTA, quota)
            if throttled is not None:
                t.set_meta_int(keys.META_THROTTLED, int(throttled))
            if max_message_size is not None:
                t.set_meta_int(keys.META_MAX_MESSAGE_SIZE, max_message_size)
            if report_queue == "":
                t.lt.delete(keys.META_REPORT_QUEUE, db=self._dbs["meta"])
            elif report_queue is not None:
                q = addressing.lookup(t, report_queue)  # QueueNotAvailable when there is no such queue here
                if q.outgoing is not None or q.system or "=" in report_queue:
                    raise InvalidArgument(f"the report queue must be an application queue of this store, got {report_queue!r}")
                t.lt.put(keys.META_REPORT_QUEUE, q.name.encode(), db=self._dbs["meta"])
            t.durable = True
        self._write(change)
        return self.info()

    # ---- queues ------------------------------------------------------------------------

    def create_queue(self, name: str, *, label: str = "", quota: int = 0, transactional: bool = False,
                     journal: bool = False, max_backouts: int = 0) -> QueueInfo:
        validate_name(name)
        validate_attrs(quota=quota, max_backouts=max_backouts, label=label, journal=journal,
                       transactional=transactional)
        refuse_control_characters(label, "queue label")
        return self._create_queue(name, label=label, quota=quota, transactional=transactional,
                                  journal=journal, max_backouts=max_backouts)

    def _create_queue(self, name: str, **attrs: Unpack[QueueAttrs]) -> QueueInfo:
        return self._write(lambda t: t.create_queue(name, **attrs))

    def _queue_info(self, t: Write, q: QueueInfo) -> QueueInfo:
        count, size = t.qstats(q.qid)
        last_put, last_get = t.queue_times(q.qid)
        return replace(q, depth=count, bytes=size, available=t.count_available(q.qid),
                       last_put=last_put, last_get=last_get)

    def queue_info(self, name: str) -> QueueInfo:
        return self._read(lambda t: self._queue_info(t, addressing.lookup(t, name)))

    def list_queues(self, *, outgoing: bool = True) -> list[QueueInfo]:
        """Every queue, in name order; without the outgoing queues if `outgoing` is False."""
        def read(t: Write) -> list[QueueInfo]:
            return [self._queue_info(t, q) for q in (t.queue(n) for n in t.queue_names())
                    if outgoing or q.outgoing is None]
        return self._read(read)

    def set_queue(self, name: str, *, label: str | None = None, quota: int | None = None,
                  journal: bool | None = None, max_backouts: int | None = None,
                  transactional: bool | None = None) -> QueueInfo:
        validate_attrs(quota=quota, max_backouts=max_backouts, label=label, journal=journal,
                       transactional=transactional)
        if label is not None:
            refuse_control_characters(label, "queue label")

        def change(t: Write) -> QueueInfo:
            q = replace(addressing.lookup(t, name))
            for attr, value in (("label", label), ("quota", quota), ("journal", journal),
                                ("max_backouts", max_backouts), ("transactional", transactional)):
                if value is not None:
                    setattr(q, attr, value)
            t.lt.put(queue_key(q.name), encode_queue(q), db=self._dbs["queues"])
            t.queue_changed(q.name)
            t.durable = True
            return self._queue_info(t, q)
        return self._write(change)

    def purge_queue(self, name: str, *, where: str | None = None, dry_run: bool = False) -> Undone:
        """Remove every message of the queue, in any state (with `where`, those the selector
        selects); how many (an `Undone`). With `dry_run` nothing is removed: how many would be.
        A message an open transaction holds is not removed: the purge is refused
        (TransactionError), as IBM MQ's CLEAR QLOCAL refuses uncommitted messages (the abort
        would have had nothing to give back). Nor is one a live process is delivering (a get
        writing it out, a dispatcher sending it): it is on its way out, and counted by holder in
        `delivering`; the delivery's end removes it, or gives it back if the delivery failed."""
        f = Filter(where=where) if where is not None else None

        def doomed(t: Write) -> list[Message]:
            q = addressing.lookup(t, name)
            found = [m for m in t.queue_messages(q) if f is None or f.matches(m, t.now)]
            _refuse_open_transactions(q, found)
            return found

        if dry_run:
            return Undone(len(self._read(doomed)))

        def purge(t: Write) -> Undone:
            holders.recover(t, self._holder)  # dead consumers' rows too: their messages are no one's
            removed, delivering = 0, Counter[str]()
            for m in doomed(t):
                by = holders.delivering(t, m)
                if by is not None:
                    delivering[by] += 1
                    continue
                ids.record_lapse(t, m, None, ids.PURGED)  # if in flight: its holder's late confirm is told
                t.remove(m)
                removed += 1
            t.durable = True
            return Undone(removed, dict(delivering))
        return self._write(purge)

    def delete_queue(self, name: str) -> int:
        def delete(t: Write) -> int:
            q = addressing.lookup(t, name)
            if q.system:
                raise InvalidArgument(f"{q.name!r} is a system queue and cannot be deleted")
            doomed = list(t.queue_messages(q))
            _refuse_open_transactions(q, doomed)
            holders.recover(t, self._holder)
            _refuse_delivering(t, q, doomed)
            t.remove_many(doomed)
            t.lt.delete(queue_key(q.name), db=self._dbs["queues"])
            t.queue_changed(q.name)
            t.lt.delete(queue_key(q.name), db=self._dbs["outq"])  # an outgoing queue's dispatch state
            t.lt.delete(U32.pack(q.qid), db=self._dbs["qids"])
            t.forget_queue(q.qid)
            t.durable = True
            return len(doomed)
        return self._write(delete)

    # ---- put ---------------------------------------------------------------------------

    def put(self, queue: str, body: bytes, *, confirm_id: NewId | None = None, lease: float | None = None,
            tx: int | None = None, **fields: Any) -> Message:
        return self.put_many(queue, [NewMessage(body, **fields)], confirm_id=confirm_id, lease=lease, tx=tx)[0]

    def put_many(self, queue: str, messages: Iterable[NewMessage], *, confirm_id: NewId | None = None,
                 lease: float | None = None, tx: int | None = None, extend: bool = False) -> list[Message]:
        """Put messages in one commit, all or none ([MS-MQDMPR] 3.1.7.1.9 checks for each in turn).

        With `confirm_id` the messages are put-unconfirmed under it. The id must not be pending
        in the queue (IdInUse) unless `extend`: the caller's own earlier batches of one bulk put
        hold it. AUTO draws a fresh id; the messages carry it.

        With `tx` the messages are enqueued inside that transaction: tx-locked (invisible)
        until it commits. A transactional queue takes puts only inside a transaction, and a
        transaction puts only to transactional queues (MSMQ).
        """
        _check_id(confirm_id, "confirm id", auto=True)
        if tx is not None and confirm_id is not None:
            raise InvalidArgument("a put is either in a transaction or two-phase, not both")
        if lease is not None and confirm_id is None:
            raise InvalidArgument("a lease goes with a confirm id: it bounds how long the put stays unconfirmed")
        lease_us = _seconds(lease, "lease")
        batch = list(messages)

        def put(t: Write) -> list[Message]:
            q = addressing.for_put(t, queue)
            cid = _new_id(t, keys.CONFIRM, q, confirm_id, extend)
            origin, now = t.origin, t.now
            first_n, first_time = t.allocate_ids(len(batch))
            in_flight = confirm_id is not None
            state = PUT_UNCONFIRMED if in_flight else AVAILABLE
            since = now if in_flight else None
            lease_expires = now + lease_us if in_flight and lease_us else None
            out: list[Message] = []
            keep, name, qid = out.append, q.name, q.qid
            any_traced = False
            try:  # costs nothing until a field of the wrong type makes Python raise
                for i, new in enumerate(batch):
                    ttl, props = new.ttl, new.props
                    # every field set on a bare instance, as records.decode makes one: Message's
                    # __init__ with 31 arguments costs 2,200 instructions more a message (-7% of
                    # a batched put's); a field left out fails every put (encode reads them all)
                    m = _new_message(Message)
                    m.body = new.body
                    m.queue = name
                    m.state = state
                    m.priority = new.priority
                    m.seq = 0
                    m.qid = qid
                    m.origin = origin
                    m.msg_n = (first_n + i) & 0xFFFFFFFF
                    m.lookup_hi = 0
                    m.put_time = first_time + i
                    m.expires = new.expires if ttl is None else now + _seconds(ttl, "ttl")
                    m.correl_id = new.correl_id
                    m.label = new.label
                    m.props = dict(props) if props else {}
                    m.app_specific = new.app_specific
                    m.report = False
                    m.express = new.express
                    m.trace = new.trace
                    m.dead_letter = new.dead_letter
                    m.report_queue = new.report_queue
                    m.hops = 0
                    m.backouts = 0
                    m.confirm_id = cid
                    m.lock_id = None
                    m.tx = None
                    m.lease_expires = lease_expires
                    m.since = since
                    m.dead_letter_reason = None
                    m.original_queue = None
                    m.tx_put = False
                    validate_fields(m)
                    keep(m)
                    any_traced = any_traced or m.trace
                traced = [m for m in out if m.trace and m.report_queue] if any_traced else []
                if traced:
                    from . import reports  # docs/layers.md: only a traced message sends reports

                for m in traced:
                    reports.keep_report_queue(t, m)
                if tx is not None:
                    _transactional_queue(q, True)
                    msmq_transactions.prepare_enqueue(t, tx, msmq_transactions.load(t, tx), q.qid, out)
                else:
                    _transactional_queue(q, False)
                t.enqueue(q, out, transactional=tx is not None)  # encodes the records
            except (TypeError, AttributeError, ValueError, struct.error):
                wrong = next(filter(None, (new.wrong_type() for new in batch)), None)
                if wrong is None:
                    raise  # not the caller's types: a bug, shown as one
                raise InvalidArgument(wrong) from None
            if traced:  # docs/design.md#trace-reports: a report when first enqueued at its origin, in this commit
                reports.emit(t, traced, reports.ENQUEUED, delivered="=" not in q.name)
            return out
        return self._write(put)

    def import_messages(self, queue: str, messages: Iterable[Message], *, create: bool = False,
                        new_ids: bool = False, refuse_expired: bool = False) -> Imported:
        """Enqueue existing messages keeping their ids, times and counts (import, copy, arrival).

        A msg_id is unique within a store: a message whose msg_id the store holds already (in
        any queue and state), or that repeats one earlier in `messages`, is skipped, decided
        in the commit that stores the rest, so two imports of one dump at once store it once.
        Skipped means the same message: the same msg_id with the same put time (unique id); a
        store restored from a backup gives a msg_id again, to another message, with a later
        put time, and that one is stored. Messages of this queue manager's own move its id
        counters past theirs (Write.keep_ids_ahead_of), so a message whose put time is more
        than records.MAX_PUT_TIME_LEAD_US ahead of the store's clock is refused (BadData, the
        batch stores nothing): it would stamp every later put there.
        With `new_ids` nothing is skipped: each message is stored as a copy with a new msg_id
        and put time from this queue manager, as a put would give it (the put time is part of
        the unique id, which must not repeat the original's either).

        Each goes through the enqueue checks ([MS-MQDMPR] 3.1.7.1.9); one whose time to be
        received passed (a dump's message with a ttl) is not refused with status 3 but
        dead-lettered with the reason `expired`, as expiry would have in its old place
        (`Imported.expired`), unless `refuse_expired` (a put of the record: MessageExpired,
        exit 9); the batch is one commit, all or none. Each gets a new SequentialID and so a
        new lookup id, as [MS-MQDMPR]'s enqueue does. The messages are updated in place (state
        available; those stored get their new queue and lookup id, and with `new_ids` their
        new ids); pass copies to keep the originals. With `create`, a missing queue is made (a
        journal NAME;journal, or an outgoing queue for a format name, as export writes them).

        A put that was awaiting its confirm (state put-unconfirmed: an export by an older
        mqcli wrote them) is not a message: it is not stored (`Imported.unconfirmed`).

        Returns the messages stored, in input order, as an `Imported` list whose `skipped`
        holds the others.
        """
        batch = list(messages)
        unconfirmed = [m for m in batch if m.state == PUT_UNCONFIRMED]
        if unconfirmed:
            batch = [m for m in batch if m.state != PUT_UNCONFIRMED]
        for m in batch:
            at_rest(m)
            validate_fields(m)

        def enqueue(t: Write) -> Imported:
            q = addressing.for_import(t, queue) if create else addressing.lookup(t, queue)
            if new_ids:
                t.give_new_ids(batch)
                kept, late = (batch, []) if refuse_expired else t.expired_on_arrival(q, batch)
                return Imported(t.enqueue(q, kept), expired=late, unconfirmed=unconfirmed)
            latest, origin = t.now + MAX_PUT_TIME_LEAD_US, t.origin
            for m in batch:  # only this queue manager's own move its counters (keep_ids_ahead_of)
                if m.put_time > latest and m.origin == origin:
                    check_put_time(m.put_time, t.now, f"message {m.msg_id}: ")  # raises, naming it
            fresh: list[Message] = []
            skipped: list[Message] = []
            seen = t.stored_msg_ids(batch)  # then each one stored by this batch
            for m in batch:
                identity = (m.origin, m.msg_n, m.put_time)
                if identity in seen:
                    skipped.append(m)
                else:
                    seen.add(identity)
                    fresh.append(m)
            t.keep_ids_ahead_of(fresh)
            kept, late = (fresh, []) if refuse_expired else t.expired_on_arrival(q, fresh)
            return Imported(t.enqueue(q, kept), skipped, late, unconfirmed)
        return self._write(enqueue)

    # ---- get ---------------------------------------------------------------------------

    def get(self, queue: str, *, wait: float | None = FOREVER, msg_id: str | None = None,
            unique_id: str | None = None, correl_id: str | None = None, lookup_id: int | None = None,
            priority: int | None = None, where: str | None = None,
            confirm_id: NewId | None = None, lock_id: int | None = None, lease: float | None = None,
            deliver: Callable[[list[Message]], None] | None = None, tx: int | None = None) -> Message:
        """Get the next message ([MS-MQDMPR] 3.1.7.1.10 Dequeue Message). `wait=None` waits forever, `0` not at all."""
        return self.get_many(queue, 1, wait=wait, msg_id=msg_id, unique_id=unique_id, correl_id=correl_id,
                             lookup_id=lookup_id, priority=priority, where=where, confirm_id=confirm_id,
                             lock_id=lock_id, lease=lease, deliver=deliver, tx=tx)[0]

    def get_many(self, queue: str, count: int, *, wait: float | None = 0.0, msg_id: str | None = None,
                 unique_id: str | None = None, correl_id: str | None = None, lookup_id: int | None = None,
                 priority: int | None = None, where: str | None = None,
                 confirm_id: NewId | None = None, lock_id: int | None = None, lease: float | None = None,
                 deliver: Callable[[list[Message]], None] | None = None,
                 tx: int | None = None, extend: bool = False) -> list[Message]:
        """Get up to `count` messages in one commit, waiting for the first one if asked.

        With `confirm_id` a two-phase get: the messages are held under it until confirmed or
        undone. The id must not be pending in the queue (IdInUse) unless `extend`: the caller's
        own earlier batches of one bulk get hold it. With `lock_id` too, the messages of that
        browse lock are taken (the lock's own holder names it). AUTO draws a fresh confirm id;
        the messages carry it.

        With `tx` the messages are dequeued inside that transaction (tx-locked until commit,
        back in place with a backout on abort); [MS-MQDMPR] 3.1.7.1.10 makes it exclusive with two-phase.

        `deliver(messages)` is called with the messages taken, in order, with no write
        transaction open (store/holders.py): a destructive get holds them under this process
        while they are delivered, then removes them. If `deliver` raises, the first
        `exc.delivered` of them (an int attribute of the exception, 0 if absent) are removed
        and the others go back without a backout; the exception then propagates. A process
        killed meanwhile loses nothing: its messages go back when the next writer sees it gone.
        """
        return self._get_many(queue, count, wait=wait, msg_id=msg_id, unique_id=unique_id,
                              correl_id=correl_id, lookup_id=lookup_id, priority=priority, where=where,
                              confirm_id=confirm_id, lock_id=lock_id, lease=lease, deliver=deliver,
                              tx=tx, extend=extend)

    def get_batches(self, queue: str, deliver: Callable[[list[Message]], None], *,
                    limit: int | None = None, batch: int = 1000, wait: float | None = 0.0,
                    priority: int | None = None) -> int:
        """Get every available message of a queue (at most `limit`), in batches of up to
        `batch`, as repeated `get_many(queue, batch, deliver=deliver)` would (`mqcli get
        --all`), and return how many were delivered; waits up to `wait` for the first message
        (errors.Timeout if none comes). The removal of one batch and the hold of the next share
        one commit. If `deliver` raises, its batch ends as in get_many and the exception
        propagates."""
        _check_count(batch, "batch")
        _check_count(limit, "limit")
        chain = _Chain()
        total = 0
        try:
            while limit is None or total < limit:
                try:
                    found = self._get_many(queue, batch if limit is None else min(batch, limit - total),
                                           wait=wait if total == 0 else 0, priority=priority,
                                           deliver=deliver, chain=chain)
                except Timeout:
                    if total == 0:
                        raise
                    break
                total += len(found)
        finally:
            if chain.end is not None:  # the last batch's removal, alone
                self._write(chain.end)
        return total

    def _get_many(self, queue: str, count: int, *, wait: float | None = 0.0, msg_id: str | None = None,
                  unique_id: str | None = None, correl_id: str | None = None, lookup_id: int | None = None,
                  priority: int | None = None, where: str | None = None,
                  confirm_id: NewId | None = None, lock_id: int | None = None, lease: float | None = None,
                  deliver: Callable[[list[Message]], None] | None = None,
                  tx: int | None = None, extend: bool = False, chain: _Chain | None = None,
                  draw: Callable[[Write, bytes, QueueInfo], int] = ids.draw) -> list[Message]:
        """get_many; with a `chain`, a plain held get first runs the end of the chain's last
        batch (if any) in the write that holds its own batch, and leaves its own end in the
        chain instead of committing it (get_batches). A confirm id AUTO is `draw`n."""
        if tx is not None and confirm_id is not None:
            raise InvalidArgument("a get is either in a transaction or two-phase, not both")
        _check_count(count, "count")
        if wait is not None and not is_seconds(wait):
            raise InvalidArgument(_not_seconds(wait, "wait") + " (None waits forever)")
        _check_id(confirm_id, "confirm id", auto=True)
        _check_id(lock_id, "lock id")
        if lease is not None and confirm_id is None:
            raise InvalidArgument("a lease goes with a confirm id: it bounds how long the get stays unconfirmed")
        lease_us = _seconds(lease, "lease")
        f = Filter(msg_id=msg_id, unique_id=unique_id, correl_id=correl_id, lookup_id=lookup_id, priority=priority,
                   where=where)
        waits = wait is None or wait > 0
        plain = f.plain and lock_id is None
        if f.exact or lock_id is not None:
            waits = False  # an exact id either names a message now or does not ([MS-MQDMPR] 3.1.7.1.10)
        # a get that writes its messages out holds them while it does (a SIGKILL gives them
        # back): a get in a transaction too, whose messages go into it only once written
        held = deliver is not None and confirm_id is None
        inline = False  # deliver inside the removal's write: only when a hold has no room
        token: int | None = None
        held_at: list[tuple[bytes, bytes]] | None = None  # a plain held get's positions and records
        positions: list[bytes] = []  # their position keys
        places = b""  # and its row's list of them
        queue_name = queue

        def take(t: Write) -> tuple[int, list[Message]]:
            nonlocal token, held_at, positions, places, queue_name
            if chain is not None and chain.end is not None:
                chain.end(t)  # the last batch's removal, in this commit
            q = addressing.lookup(t, queue)
            queue_name = q.name
            if tx is not None:
                _transactional_queue(q, True)
                record = msmq_transactions.load(t, tx)
                if held:  # into T once written: a commit of T meanwhile never removes an unwritten one
                    found = t.take(q, f, size, lock_id)
                    if found:
                        token = self._holder.hold(t, q, found, holders.GET)
                        for m in found:  # as they will be once delivered (lock_for_dequeue)
                            m.state, m.tx, m.tx_put, m.since = TX_LOCKED, tx, False, t.now
                            m.lock_id = m.lease_expires = None
                else:
                    found = t.take(q, f, count, lock_id)
                    for m in found:
                        msmq_transactions.lock_for_dequeue(t, tx, record, m)
            elif held and plain:
                token = holders.new_token()
                held_at = t.hold_next(q, priority, size)
                if held_at:  # held in place: the row lists their position keys' tails
                    positions = list(map(_KEY, held_at))
                    places = b"".join(map(_PLACE, positions))
                    self._holder.register(t, token, q, holders.GET, places)
                return q.qid, held_at  # type: ignore[return-value]  # decoded after the commit
            elif held:
                found = t.take(q, f, size, lock_id)
                if found:
                    token = self._holder.hold(t, q, found, holders.GET)
            elif confirm_id is None and plain:
                found = t.get_next(q, priority, count)
            elif deliver is not None and confirm_id is not None and not inline:
                # two-phase and written out: held by this process while written (a SIGKILL
                # gives them back), put under the confirm id in the write that ends the hold,
                # so that nothing unwritten is ever pending under it
                pending_id = _new_id(t, keys.CONFIRM, q, confirm_id, extend, draw)
                found = t.take(q, f, size, lock_id)
                if found:  # the row names the id: it has this holder from now on (ids.claim)
                    token = self._holder.hold(t, q, found, holders.TWO_PHASE_GET, pending_id)
                    for m in found:  # as they will be once delivered
                        m.state = BROWSE_GET_UNCONFIRMED if m.state == LOCKED_BROWSE else GET_UNCONFIRMED
                        m.confirm_id, m.since = pending_id, t.now
                        m.lease_expires = t.now + lease_us if lease_us else m.lease_expires
            else:
                cid = _new_id(t, keys.CONFIRM, q, confirm_id, extend, draw)
                found = t.take(q, f, count, lock_id)
                if cid is None:
                    t.remove_many(found)
                    t.got(q, found)
                else:
                    for m in found:  # two-phase read ([MS-MQDMPR] 3.1.7.1.10 iTwoPhaseRead)
                        t.transition(
                            m, durable=False, confirm_id=cid, since=t.now,
                            state=BROWSE_GET_UNCONFIRMED if m.state == LOCKED_BROWSE else GET_UNCONFIRMED,
                            lease_expires=t.now + lease_us if lease_us else m.lease_expires,
                        )
            if inline and found:
                deliver(found)  # type: ignore[misc]  # a full store: see below
            return q.qid, found

        size = count  # a held get's batch: smaller when a full map has no room to hold it
        deadline = None if wait is None else time.monotonic() + max(wait, 0.0)
        waiter: Waiter | None = None
        try:
            while True:
                try:
                    qid, found = self._write(take)
                    if chain is not None:
                        chain.end = None  # committed with this write
                except StoreFull:
                    # holding copies each record into `msg` before the commit frees its place, so
                    # a full map may have no room for a whole batch, though a get is the way to
                    # make room: hold fewer, down to one, each delivered and removed in turn
                    if not held:
                        raise
                    if size > 1:
                        size = (size + 1) // 2
                        continue
                    # not even one fits: this get writes its output inside the write that
                    # removes the message (a reader that stalls now
                    # holds up the others; a failed write removes nothing)
                    held, inline, token, held_at = False, True, None, None
                    continue
                if found:
                    break
                remaining = _WAIT_SLICE if deadline is None else deadline - time.monotonic()
                if not waits or remaining <= 0:
                    raise Timeout(" ".join(filter(None, ("no message", f.describe(), f"in queue {queue!r}",
                                                         f"within {wait:g}s" if wait else None))))
                if waiter is None:
                    waiter = self._waiter(qid, "wait for a message")  # before the next look: no lost wake-up
                    continue
                waiter.wait(min(remaining, _WAIT_SLICE))
                self._waited()
        finally:
            if waiter is not None:
                waiter.close()
        if inline:
            return found
        placed = None
        if held_at is not None:
            found = decode_many(map(_RECORD, held_at), queue_name)
            placed = holders.Placed(token, places, positions, found)  # type: ignore[arg-type]  # set with held_at
        if deliver is not None:
            two_phase = found[0].confirm_id if confirm_id is not None and tx is None else None  # auto: drawn
            end = self._deliver(queue, found, deliver, hold=token, placed=placed, two_phase=two_phase, tx=tx,
                                later=chain is not None and placed is not None, lease_us=lease_us)
            if chain is not None:
                chain.end = end
        return found

    def _deliver(self, queue: str, found: list[Message], deliver: Callable[[list[Message]], None], *,
                 hold: int | None, placed: holders.Placed | None, two_phase: int | None,
                 tx: int | None = None, later: bool = False,
                 lease_us: int | None = None) -> Callable[[Write], None] | None:
        """Call `deliver(found)` with no transaction open; then end the `hold`: remove what was
        delivered (a `two_phase` get: put it under its confirm id) and put back the rest. If `deliver` raises, the exception's `delivered` attribute (default 0)
        says how many of the first messages it delivered whole. A get in transaction `tx`
        keeps what it delivered in the transaction (its abort returns them) and gives the rest
        back, out of the transaction and without a backout: a commit must not remove messages
        nobody received. With `later`, a delivery that went through returns the hold's end for
        the caller's next write to run instead."""
        ended: list[bool] = []  # the end found T gone: what it delivered went back
        try:
            deliver(found)
        except BaseException as exc:
            done = getattr(exc, "delivered", 0)
            done = done if type(done) is int and 0 <= done <= len(found) else 0
            if hold is not None:
                self._write(self._ending(queue, hold, placed, two_phase, {m.seq for m in found[:done]}, lease_us,
                                         tx, ended))
            raise
        if hold is not None:  # all delivered (held in place: None says so, no set to make)
            end = self._ending(queue, hold, placed, two_phase, None if placed is not None else {m.seq for m in found},
                               lease_us, tx, ended)
            if later:
                return end
            self._write(end)
        if ended:
            raise TransactionError(f"transaction {tx} ended (committed, aborted or timed out) while this get "
                                   f"was writing its messages out: they went back to queue {queue!r}, outside it")
        return None

    def _ending(self, queue: str, hold: int, placed: holders.Placed | None,
                two_phase: int | None, delivered: set[int] | None, lease_us: int | None = None,
                tx: int | None = None, ended: list[bool] | None = None, lock: int | None = None,
                named: bool = False) -> Callable[[Write], None]:
        """The write that ends a delivery: see _deliver. A held two-phase get puts what was
        delivered (the seqs `delivered`; None: all, held in place only) under its confirm id
        (with its lease) and gives back the rest. A held get in transaction `tx` puts what was
        delivered into it and gives back the rest; with `tx` gone meanwhile it gives back all
        and says so in `ended`. A browse with `lock` (browse_lock) locks what was delivered
        under it (with its lease) and gives back the rest; a lock id the caller `named` that
        another holder took meanwhile gives back all and says so in `ended`."""
        def end(t: Write) -> None:
            found = holders.lookup(t, hold)
            if found is None:
                return
            if not t.queue_exists(found.qid):  # deleted meanwhile, and its messages with it
                holders.forget(t, hold)
                return
            q = t.queue(t.queue_name(found.qid))
            if placed is not None:  # held in place by hold_next
                t.end_hold(q, placed, delivered)
                return
            assert delivered is not None, "only a hold in place is ended with None"
            if lock is not None:
                mine = not (named and ids.pending(t, keys.LOCK, q.qid, lock))
                for m in t.with_token(q, hold):
                    if mine and m.seq in delivered:
                        t.transition(m, durable=False, state=LOCKED_BROWSE, confirm_id=None, lock_id=lock,
                                     since=t.now, lease_expires=t.now + lease_us if lease_us else None)
                    else:
                        holders.give_back(t, m)
                holders.forget(t, hold)
                if delivered and not mine and ended is not None:
                    ended.append(True)
                return
            if tx is not None:
                record = msmq_transactions.find(t, tx)
                for m in t.with_token(q, hold):
                    if record is not None and m.seq in delivered:
                        msmq_transactions.lock_for_dequeue(t, tx, record, m)
                    else:
                        holders.give_back(t, m)
                holders.forget(t, hold)
                if record is None and delivered and ended is not None:
                    ended.append(True)
                return
            if two_phase is not None:  # held while written, now pending under the confirm id
                for m in t.with_token(q, hold):
                    if m.seq in delivered:
                        t.transition(m, durable=False, confirm_id=two_phase, since=t.now,
                                     lease_expires=t.now + lease_us if lease_us else m.lease_expires)
                    else:
                        holders.give_back(t, m)
                holders.forget(t, hold)
                return
            removed, _ = holders.finish(t, found, q, delivered)
            t.got(q, removed)
        return end

    # ---- browse ------------------------------------------------------------------------

    def browse(self, queue: str, *, msg_id: str | None = None, unique_id: str | None = None,
               correl_id: str | None = None,
               lookup_id: int | None = None, priority: int | None = None, limit: int | None = None,
               states: str | Iterable[str] | None = None, where: str | None = None) -> list[Message]:
        """Messages in queue order without taking them; default only available ones."""
        f = Filter(msg_id=msg_id, unique_id=unique_id, correl_id=correl_id, lookup_id=lookup_id, priority=priority,
                   where=where)
        wanted = _states(states)
        return self._read(lambda t: _browsed(t, queue, f, wanted, limit))

    def browse_pages(self, queue: str, *, msg_id: str | None = None, unique_id: str | None = None,
                     correl_id: str | None = None, lookup_id: int | None = None, priority: int | None = None,
                     limit: int | None = None, states: str | Iterable[str] | None = None,
                     where: str | None = None, page: int = 1000) -> Iterator[list[Message]]:
        """What `browse` returns, in pages: snapshots of `page` messages, each resuming after the
        last one's place: a browse of a deep queue holds neither every message in memory nor one
        long read transaction while its output is written (an export reads one moment instead:
        `view()`).
        A message's place (priority, seq) never changes, so between pages none is shown twice,
        and one there all along is shown; one that changed meanwhile is shown as the page that
        reached its place found it (docs/design.md#states: browse between pages)."""
        f = Filter(msg_id=msg_id, unique_id=unique_id, correl_id=correl_id, lookup_id=lookup_id, priority=priority,
                   where=where)
        wanted = _states(states)
        _check_count(limit, "limit")
        if f.exact:  # one message, or a few copies of it: read at once
            yield self._read(lambda t: _browsed(t, queue, f, wanted, limit))
            return
        after: tuple[int, int] | None = None
        left = limit
        while left is None or left > 0:
            n = page if left is None else min(page, left)
            chunk = self._read(lambda t, after=after, n=n: _browsed(t, queue, f, wanted, n, after))  # type: ignore[misc]
            if chunk:
                yield chunk
            if len(chunk) < n:
                return
            left = None if left is None else left - len(chunk)
            after = (7 - chunk[-1].priority, chunk[-1].seq)

    def follow(self, queue: str, *, where: str | None = None, from_start: bool = False,
               idle: float | None = None) -> Generator[list[Message], None, None]:
        """Browse a queue as messages become available, without taking them: yields each
        look's new matches in queue order, each batch read in its own read transaction and
        yielded with none open. From now (the messages available at the start are not
        yielded), or with `from_start` from the first one. Stops after `idle` seconds without
        a new match (None: never; the caller stops it by closing the generator).

        "Becomes available" is a put (or a confirmed put, a committed transactional put, a
        move in) — a new seq beyond the highest seen — or a message that was in flight at the
        last look going back to the queue (undo, unlock, lapsed lease, aborted transaction):
        those seqs are remembered from one look to the next, so memory is bounded by the
        queue's messages in flight, not its depth. A message that leaves and comes back
        between two looks is not yielded again. Sleeps on the store's wake-up (store/notify.py)
        between looks, re-looking at least every second like a waiting get."""
        if idle is not None and (not is_seconds(idle) or idle < 0):
            raise InvalidArgument(_not_seconds(idle, "idle") + " (None follows until closed)")
        f = Filter(where=where)
        high = 0 if from_start else None  # highest seq looked at; None: take it from the first look
        pending: set[tuple[int, int]] = set()  # (7-priority, seq) in flight at the last look
        qid = 0

        def look(t: Write) -> list[Message]:
            nonlocal high, pending, qid
            q = addressing.lookup(t, queue)
            qid = q.qid
            start = high
            new_high = t.counters.seq if high is None else high
            found: list[Message] = []
            if start is not None:
                for p in range(MAX_PRIORITY, -1, -1):
                    begin = keys.pos_key(q.qid, p, start + 1)
                    for _, raw in t.positions(keys.priority_prefix(q.qid, p), begin):
                        m = decode(raw, q.name)
                        new_high = max(new_high, m.seq)
                        if f.matches(m, t.now):
                            found.append(m)
                for p7, seq in pending:
                    back = t.available_at(q, p7, seq)  # in flight at the last look, available again
                    if back is not None and f.matches(back, t.now):
                        found.append(back)
            in_flight = t.in_flight_places(q)
            new_high = max([new_high, *(seq for _, seq in in_flight)])
            pending = {place for place in in_flight if start is None or place[1] <= new_high}
            high = new_high
            found.sort(key=lambda m: (7 - m.priority, m.seq))
            return found

        deadline = None if idle is None else time.monotonic() + idle
        first = self._read(look)
        if first:
            yield first
        waiter: Waiter | None = None
        try:
            waiter = self._waiter(qid, f"follow queue {queue!r}")  # before the next look: no lost wake-up
            while True:
                found = self._read(look)
                if found:
                    yield found
                    deadline = None if idle is None else time.monotonic() + idle
                    continue
                remaining = _WAIT_SLICE if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    return
                waiter.wait(min(remaining, _WAIT_SLICE))
                self._waited()
        finally:
            if waiter is not None:
                waiter.close()

    def browse_lock(self, queue: str, *, msg_id: str | None = None, unique_id: str | None = None,
                    correl_id: str | None = None,
                    lookup_id: int | None = None, priority: int | None = None, limit: int | None = None,
                    lock_id: NewId | None = None, lease: float | None = None,
                    where: str | None = None,
                    deliver: Callable[[int, list[Message]], None] | None = None) -> tuple[int, list[Message]]:
        """Browse with lock (MQe browseWithLock): each match becomes locked-browse(lock_id).

        The lock id must not be pending in the queue nor reserved after a lapse (IdInUse);
        without one (or with AUTO) a fresh one is drawn. Returns it with the messages.

        With `deliver`, `deliver(lock_id, messages)` is called with no transaction open (it
        writes the lock id out) while this process holds the messages (docs/holders.md), and
        they are locked only in the write after it returns: if it raises, or this process dies
        first, they go back as they were, since nobody got the id to unlock them with. A lock id
        named by the caller that someone else took meanwhile gives them back too (IdInUse)."""
        _check_id(lock_id, "lock id", auto=True)
        lease_us = _seconds(lease, "lease")
        f = Filter(msg_id=msg_id, unique_id=unique_id, correl_id=correl_id, lookup_id=lookup_id, priority=priority,
                   where=where)
        lock = 0
        token: int | None = None

        def lock_them(t: Write) -> list[Message]:
            nonlocal lock, token
            q = addressing.lookup(t, queue)
            lock = _new_id(t, keys.LOCK, q, lock_id or AUTO)
            found = _first(t.candidates(q, f), limit)
            if deliver is not None:
                if found:
                    token = self._holder.hold(t, q, found, holders.GET)
                for m in found:  # as they will be once the lock id is out
                    m.state, m.lock_id, m.since = LOCKED_BROWSE, lock, t.now
                    m.lease_expires = t.now + lease_us if lease_us else None
                return found
            for m in found:
                t.transition(m, durable=False, state=LOCKED_BROWSE, lock_id=lock, since=t.now,
                             lease_expires=t.now + lease_us if lease_us else None)
            return found
        found = self._write(lock_them)
        if not found:
            raise Timeout(" ".join(filter(None, ("no message", f.describe(), f"in queue {queue!r} to lock"))))
        if deliver is None or token is None:
            return lock, found
        taken: list[bool] = []  # the id was someone else's by the end: given back
        named = lock_id not in (None, AUTO)

        def end(delivered: set[int]) -> Callable[[Write], None]:
            return self._ending(queue, token, None, None, delivered, lease_us, lock=lock, named=named, ended=taken)
        try:
            deliver(lock, found)
        except BaseException:
            self._write(end(set()))
            raise
        self._write(end({m.seq for m in found}))
        if taken:
            raise IdInUse(f"lock id {lock} was taken in queue {queue!r} while its messages were written out; "
                          f"they went back unlocked (an id has one holder): use another id or auto")
        return lock, found

    # ---- confirm, undo, unlock, delete -------------------------------------------------

    def confirm(self, queue: str, confirm_id: int) -> int:
        """Confirm the put or get pending under `confirm_id` (MQe confirm)."""
        _check_id(confirm_id, "confirm id")

        return self._write(lambda t: _confirm(t, addressing.lookup(t, queue), confirm_id))

    def consumer(self, queue: str, *, lease: float | None = None, where: str | None = None) -> Consumer:
        """A two-phase consumer of a queue whose confirms ride on its next get (store/consumer.py)."""
        return Consumer(self, queue, lease=lease, where=where)

    def _register_consumer(self, consumer: Consumer) -> ConsumerIds:
        """A consumer's row in `holders` (kind CONSUME, in a light commit of its own) and the
        confirm ids it names (store/consumer.py): a range no live consumer of the queue has,
        nor any pending or claimed id. The row has a holder of its own, whose locked file says
        the consumer lives: dropped unclosed, the consumer lets go of it (the row's next
        reader finds it dead and forgets it), and a closed store lets go of every one."""
        holder = holders.Holder(self.path)

        def register(t: Write) -> ConsumerIds:
            q = addressing.lookup(t, consumer.queue)
            while True:
                ids_from = ConsumerIds(holders.new_token(), holder)
                if holders.range_free(t, q.qid, ids_from.base):
                    holder.register(t, ids_from.token, q, holders.CONSUME)
                    return ids_from
        try:
            ids_from = self._write(register)
        except BaseException:
            holder.close()
            raise
        self._consumers[ids_from.token] = holder
        weakref.finalize(consumer, holder.let_go)
        return ids_from

    def _unregister_consumer(self, ids_from: ConsumerIds) -> None:
        """The consumer's row gone: it holds nothing more."""
        self._forget_consumers([ids_from.token])

    def _forget_consumers(self, tokens: list[int]) -> None:
        """These consumers' rows gone and their holders closed; if the write fails (the store
        went away), their holders let go, and the rows' next reader forgets them."""
        gone = [self._consumers.pop(token) for token in tokens if token in self._consumers]

        def forget(t: Write) -> None:
            for token in tokens:
                holders.forget(t, token)
        try:
            self._write(forget, maintain=False)
        except StoreError:
            for holder in gone:
                holder.let_go()
            return
        for holder in gone:
            holder.close()

    def _ack_and_get(self, queue: str, confirm_ids: list[int], *, wait: float | None,
                     lease: float | None, where: str | None, ids_from: ConsumerIds,
                     ) -> tuple[Message | None, list[tuple[int, StoreError]]]:
        """Confirm `confirm_ids` and get the next message two-phase under a fresh confirm id,
        in one durable commit (Consumer.next). Returns the message (None if none came within
        `wait`; the confirms are committed then too) and the confirms that failed: an id whose
        lease lapsed or that is unknown (exit 4) does not stop the others or the get. The get's
        confirm id is the consumer's next (`ids_from`).

        The consumer's loop (no selector) runs as one straight write: the confirms, then the
        next available message taken two-phase (Write.take_two_phase). Only when none is
        there and the caller waits does it go on as `get` waits, its confirms committed."""
        failed: list[tuple[int, StoreError]] = []

        def acks(t: Write) -> Any:
            failed.clear()  # a retried write runs this again
            q = addressing.lookup(t, queue)
            for confirm_id in confirm_ids:
                try:
                    _confirm(t, q, confirm_id)
                except (MessageNotFound, AlreadyReceived) as exc:  # lapsed, unknown, or not ours
                    failed.append((confirm_id, exc))
            return q
        if where is None:
            try:
                if wait is not None and not is_seconds(wait):
                    raise InvalidArgument(_not_seconds(wait, "wait") + " (None waits forever)")
                lease_us = _seconds(lease, "lease")
                m = self._write(lambda t: t.take_two_phase(acks(t), lease_us, ids_from.draw))
            except BaseException:
                if confirm_ids:  # the get's write failed: the confirms alone, as the chained get does
                    self._write(acks)
                raise
            if m is not None or wait == 0:
                return m, failed
            confirm_ids = []  # committed: the wait below confirms nothing more
        chain = _Chain(acks if confirm_ids else None)
        try:
            found = self._get_many(queue, 1, wait=wait, confirm_id=AUTO, lease=lease, where=where, chain=chain,
                                   draw=ids_from.draw)
        except Timeout:
            return None, failed
        finally:
            if chain.end is not None:  # the get's write failed: the confirms alone
                self._write(chain.end)
        return found[0], failed

    def undo(self, queue: str, *, confirm_id: int | None = None, lock_id: int | None = None,
             backout: bool = True) -> int:
        """Undo the put or get under a confirm id, or the browse lock under a lock id (docs/design.md#states).

        An undone get counts a backout (at the queue's max-backouts: the dead-letter queue).
        Not `backout`: its messages never reached their handler, which cannot have failed on
        them (a consumer's command killed by SIGPIPE when the consumer's own output closed),
        as a destructive get puts back what it could not write."""
        if (confirm_id is None) == (lock_id is None):
            raise InvalidArgument("undo needs exactly one of a confirm id and a lock id")
        _check_id(confirm_id, "confirm id")
        _check_id(lock_id, "lock id")

        def undo(t: Write) -> int:
            q = addressing.lookup(t, queue)
            if confirm_id is not None:
                _not_held_by_a_process(t, confirm_id)
                pending = t.with_confirm_id(q, confirm_id)
            else:
                pending = [m for m in t.with_lock_id(q, lock_id) if m.state == LOCKED_BROWSE]  # type: ignore[arg-type]  # one id is given
                if not pending:
                    raise AlreadyReceived(f"the messages under lock id {lock_id} are got, pending confirm; undo their confirm id")
            for m in pending:
                t.undo_one(m, backout)
            return len(pending)
        return self._write(undo)

    def unlock(self, queue: str, lock_id: int) -> int:
        """Unlock the messages locked by a browse with lock (MQe unlockMessage)."""
        return self.undo(queue, lock_id=lock_id)

    def delete(self, queue: str, msg_id: str, *, lock_id: int | None = None) -> Message:
        """Delete one message by msg_id (MQe deleteMessage)."""
        _check_id(lock_id, "lock id")
        f = Filter(msg_id=msg_id)

        def delete(t: Write) -> Message:
            q = addressing.lookup(t, queue)
            found = [m for m in t.by_msg_id(*f.msg_id_parts)  # type: ignore[misc]  # Filter parsed msg_id
                     if m.qid == q.qid and not m.hidden]
            if not found:
                raise MessageNotFound(f"no message with msg_id {msg_id} in queue {q.name!r}")
            if lock_id is not None:
                t.with_lock_id(q, lock_id)  # raises UnknownLockId when nobody holds that lock
            for m in found:
                # docs/design.md#states: an available message, or a locked-browse one with its lock id; a wrong
                # lock id changes nothing, even on a message that could be deleted without one
                if (m.state == LOCKED_BROWSE and m.lock_id == lock_id) if lock_id is not None \
                        else m.state == AVAILABLE:
                    t.leave(m, GONE)
                    return m
            if lock_id is not None and all(m.state == AVAILABLE for m in found):
                raise UnknownLockId(f"message {msg_id} is not locked under lock id {lock_id}")
            raise AlreadyReceived(f"message {msg_id} is held by a lock, confirm id or transaction")
        return self._write(delete)

    # ---- operators: move, bulk undo, stats, export, backup ------------------------------

    def move(self, source: str, target: str, *, count: int | None = None, copy: bool = False,
             msg_id: str | None = None, unique_id: str | None = None, correl_id: str | None = None,
             lookup_id: int | None = None, priority: int | None = None, batch: int = 1000, tx: int | None = None,
             where: str | None = None) -> Generator[list[Message], None, None]:
        """Move (or copy) available messages in queue order, one commit per batch.

        Yields each batch after its commit, so a caller can show progress; a batch is atomic.
        Moved messages keep msg_id, put time, hops and backouts and are enqueued in the target
        with the enqueue checks (a quota there stops the move with that batch undone). With
        `tx` each move is a dequeue and an enqueue inside that transaction (both queues must be
        transactional, or the source `dead-letter-tx`): nothing moves until it commits.

        A message moved (or copied) out of a dead-letter queue into a queue that is not one
        starts fresh: backouts 0, no dead-letter reason or original queue. Kept, its backouts
        would send it straight back at the next undo when they had reached max-backouts.
        """
        for queue in (source, target):
            if not isinstance(queue, str):
                raise InvalidArgument(f"a queue name must be a str, got {type(queue).__name__} {queue!r:.40}")
        _check_count(count, "count")
        _check_count(batch, "batch")
        if queue_key(source) == queue_key(target):
            raise InvalidArgument("source and target are the same queue")
        f = Filter(msg_id=msg_id, unique_id=unique_id, correl_id=correl_id, lookup_id=lookup_id, priority=priority,
                   where=where)
        left = count
        after: tuple[int, int] | None = None  # copy: the last position copied (it stays put)

        def one(t: Write) -> list[Message]:
            nonlocal after
            src, dst = addressing.lookup(t, source), addressing.lookup(t, target)
            if src.qid == dst.qid:  # two names of one queue (a format name): each pass would find its own moves again
                raise InvalidArgument(f"source and target are the same queue ({src.name!r})")
            fresh = src.name in _DEAD_LETTER_QUEUES and dst.name not in _DEAD_LETTER_QUEUES
            if tx is not None:  # the transaction and the queues' rules first, found or not
                if src.name != DEAD_LETTER_TX:  # it holds transactional queues' dead letters
                    _transactional_queue(src, True)
                _transactional_queue(dst, True)
                msmq_transactions.load(t, tx)
            size = batch if left is None else min(batch, left)
            found = []
            for m in t.candidates(src, f):
                if copy and after is not None and (7 - m.priority, m.seq) <= after:
                    continue
                found.append(m)
                if len(found) >= size:
                    break
            if not found:
                return []
            if copy:
                after = (7 - found[-1].priority, found[-1].seq)
            if copy:
                clones = _copies(t, found, fresh)
            else:
                clones = [_moved(m, fresh) for m in found] if fresh or tx is not None else found
            if tx is not None:
                record = msmq_transactions.load(t, tx)
                if not copy:
                    for m in found:
                        msmq_transactions.lock_for_dequeue(t, tx, record, m)
                    msmq_transactions.note_moved(t, tx, record, found)
                msmq_transactions.prepare_enqueue(t, tx, record, dst.qid, clones)
                return t.enqueue(dst, clones, transactional=True)
            if not copy:
                t.remove_many(found)
            return t.enqueue(dst, clones)

        while left is None or left > 0:
            moved = self._write(one)
            if not moved:
                return
            if left is not None:
                left -= len(moved)
            yield moved
            if f.exact:
                return

    def redrive(self, dlq: str = DEAD_LETTER, *, to: str | None = None, where: str | None = None,
                dry_run: bool = False, batch: int = 1000) -> deadletters.Redriven:
        """Move the available dead letters of `dlq` back to their original queues (or all to
        `to`), fresh (backouts 0, no reason, original queue or dead-letter time), in queue
        order, one commit per batch: a batch is atomic, and a quota in a destination stops the
        redrive with that batch undone (QueueQuotaExceeded). A dead letter whose original queue
        no longer exists (or that names none) stays where it is and is counted in `stayed`.
        With `dry_run` nothing changes: the counts say what would move."""
        if not isinstance(dlq, str) or (to is not None and not isinstance(to, str)):
            raise InvalidArgument("dlq and to must be queue names (str)")
        _check_count(batch, "batch")
        f = Filter(where=where)
        result = deadletters.Redriven(dry_run=dry_run)
        after: tuple[int, int] | None = None  # the last place looked at: what stays is not read again

        def one(t: Write) -> tuple[dict[str, int], dict[str | None, int], tuple[int, int] | None]:
            src = addressing.lookup(t, dlq)
            if src.name not in _DEAD_LETTER_QUEUES:
                raise InvalidArgument(f"{src.name!r} is not a dead-letter queue ({' or '.join(_DEAD_LETTER_QUEUES)})")
            target = None if to is None else addressing.lookup(t, to)
            if target is not None and target.name in _DEAD_LETTER_QUEUES:
                raise InvalidArgument(f"redrive moves dead letters out of the dead-letter queues, not into {target.name!r}")
            by_dest: dict[str, tuple[QueueInfo, list[Message]]] = {}
            stayed: dict[str | None, int] = {}
            last, looked = after, 0
            for m in t.candidates(src, f):
                place = (7 - m.priority, m.seq)
                if after is not None and place <= after:
                    continue
                if not dry_run and looked >= batch:
                    break
                looked += 1
                last = place
                dst = target
                if dst is None and m.original_queue is not None:
                    try:
                        dst = t.queue(m.original_queue)
                    except QueueNotAvailable:
                        dst = None
                    if dst is not None and dst.name in _DEAD_LETTER_QUEUES:
                        dst = None  # no way out of the dead-letter queues by their own record
                if dst is None:
                    stayed[m.original_queue] = stayed.get(m.original_queue, 0) + 1
                    continue
                by_dest.setdefault(dst.name, (dst, []))[1].append(m)
            if not dry_run:
                for dst, found in by_dest.values():
                    t.remove_many(found)
                    t.enqueue(dst, [deadletters.fresh(m) for m in found])
            return {name: len(found) for name, (_, found) in by_dest.items()}, stayed, last if looked else None

        while True:
            try:
                moved, stayed, last = self._read(one) if dry_run else self._write(one)
            except Exception as exc:
                exc.redriven = result  # type: ignore[attr-defined]  # the batches that committed
                raise
            for name, n in moved.items():
                result.moved[name] = result.moved.get(name, 0) + n
            for original, n in stayed.items():
                result.stayed[original] = result.stayed.get(original, 0) + n
            if last is None or dry_run:
                return result
            after = last

    def undo_inflight(self, queue: str | None = None, *, older_than: float | None = None,
                      where: str | None = None) -> Undone:
        """Operators' undo (`undo --older-than/--all`): every in-flight message of the
        queue (or store) that entered its state more than `older_than` seconds ago. Left in
        flight, and counted in the `Undone` returned: messages a live process is delivering
        (a get writing them out, a dispatcher sending them: undone, they would go twice) and
        tx-locked ones (their transaction's commit or abort decides). With `where`, only the
        messages the selector selects."""
        f = Filter(where=where) if where is not None else None
        if older_than is not None and (not is_seconds(older_than) or older_than < 0):
            raise InvalidArgument(f"older_than must be a number of seconds ≥ 0, got {older_than!r:.40}")
        limit_us = None if older_than is None else int(older_than * 1_000_000)

        def undo(t: Write) -> Undone:
            holders.recover(t, self._holder)  # dead consumers' rows too: their messages are no one's
            names = [queue] if queue is not None else t.queue_names()
            done, delivering, tx_locked, discarded = 0, Counter[str](), 0, 0
            for name in names:
                for m in t.in_flight(addressing.lookup(t, name)):  # held records only, not the whole queue
                    if limit_us is not None and t.now - (m.since or t.now) < limit_us:
                        continue
                    if f is not None and not f.matches(m, t.now):
                        continue
                    if m.state == TX_LOCKED:
                        tx_locked += 1
                        continue
                    by = holders.delivering(t, m)
                    if by is not None:
                        delivering[by] += 1
                        continue
                    discarded += m.state == PUT_UNCONFIRMED
                    t.take_from_holder(m, ids.UNDONE)
                    done += 1
            return Undone(done, dict(delivering), tx_locked, discarded)
        return self._write(undo)

    def stats(self) -> list[QueueStats]:
        """Per queue: depth by state and priority, bytes, oldest message (`mqcli stats`)."""
        def read(t: Write) -> list[QueueStats]:
            return [self._queue_stats(t, t.queue(name)) for name in t.queue_names()]
        return self._read(read)

    def queue_stats(self, name: str) -> QueueStats:
        """One queue's `stats`, from its counters (no walk over its messages but for the
        oldest, `_queue_stats`). How many a drain or a move of the whole queue will take is
        `queue_info(name).available`, counters only."""
        return self._read(lambda t: self._queue_stats(t, addressing.lookup(t, name)))

    @staticmethod
    def _queue_stats(t: Write, q: QueueInfo) -> QueueStats:
        """From the queue's counters and the ends of its position lists: no walk over its
        messages but the in-flight ones (store/queue_counters.py), and for the oldest put time
        (of every message, in any state) the available ones of each priority out of put order
        (`Write.oldest_times`)."""
        count, size = t.qstats(q.qid)
        c = t.queue_counters(q.qid)
        by_state = {s: c.in_flight.get(s, 0) for s in STATES}
        by_state[GET_UNCONFIRMED] += len(t.placed(q.qid))  # held in place: available records
        by_state[AVAILABLE] = t.count_available(q.qid)
        oldest, oldest_in_flight = t.oldest_times(q.qid)
        last_put, last_get = t.queue_times(q.qid)
        return QueueStats(
            name=q.name, depth=count, bytes=size, system=q.system, by_state=by_state,
            by_priority=dict(enumerate(c.by_priority)), oldest_put_time=oldest, last_put=last_put,
            last_get=last_get, quota=q.quota, oldest_in_flight=oldest_in_flight,
            totals={name: getattr(c, name) for name in ("put_messages", "put_bytes", "got_messages", "got_bytes",
                                                        "expired", "backed_out", "dead_lettered")},
            dead_lettered_by_reason=dict(t.reasons(q.qid)), guid=q.guid)

    @contextmanager
    def view(self) -> Iterator[View]:
        """Reads that all see one moment of the store (store/view.py): one LMDB read
        transaction, held until the block ends. No maintenance runs first (as in `as_is()`).
        Writers go on meanwhile, but the pages they free cannot be reused until the block ends,
        so a long block grows the data file: read in it, and do not wait on output or input
        (export spools what it writes: mqcli/spool.py)."""
        try:
            with self._env.begin() as lt:
                yield View(Write(lt, self._dbs, self._now(), self._queue_cache), self._queue_info)
        except lmdb.Error as exc:
            raise lmdb_failed(exc, self.path) from None

    def export_messages(self, queues: Iterable[str] | None = None, *, hidden: bool = False,
                        where: str | None = None) -> Iterator[Message]:
        """Every message of the queues (default: all), in queue order, in any state, as of one
        moment (`view()`: a message moved between queues meanwhile is where it was, once; the
        read transaction is held while you iterate). Without `hidden`, not the hidden ones: a
        put awaiting its confirm or inside an open transaction is not a message yet
        (docs/design.md#states), and an import would make it one (the JSONL export leaves them
        out; the Parquet one, for analysis, keeps them like a direct scan). With `where`, only
        the messages the selector selects (README.md#selectors)."""
        with self.view() as v:
            for q in v.queues(queues):
                yield from v.messages(q, hidden=hidden, where=where)

    def backup(self, target: str | os.PathLike[str]) -> Path:
        """A consistent, compacted copy of the store taken while writers run (LMDB mdb_env_copy).

        Built whole in a private sibling directory (0700, files 0600, synced) and renamed into
        place, so `target` is either absent (or as it was: an empty directory) or a whole
        store. A backup killed part-way leaves only its sibling, which the next backup into
        `target` removes (docs/store-api.md)."""
        target = Path(target)
        if store_exists(target):
            raise StoreUnavailable(f"{target} already holds a store; back up into a new directory")
        _backup_target_usable(target)
        try:
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise layout_error(target, exc) from None
        _remove_dead_backups(target)
        building, lock_fd = _backup_sibling(target)
        try:
            self._env.copy(str(building), compact=True)
            _seal(building / "data.mdb")
            marker = read_marker(self.path)
            map_size = marker["map_size"]
            _mark_backup(building, map_size, self._now())
            private_dir(building / WAIT_DIR)
            # a whole copy is a store (synced with its directory), of the original's format: one not
            # yet upgraded (open elsewhere when this mqcli came) stays an older mqcli's to open
            write_marker(building, map_size, format=marker["format"])
            try:
                os.rename(building, target)  # onto nothing, or onto an empty directory
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    raise StoreUnavailable(f"{target} is no longer empty (another backup or process "
                                           f"wrote there meanwhile); back up into a new directory") from None
                raise
            sync_directory(target.parent)
        except BaseException as exc:
            shutil.rmtree(building, ignore_errors=True)
            if isinstance(exc, lmdb.Error):
                failed = self._write_failed(exc, disk=target.parent)  # a full disk is exit 8
                raise type(failed)(f"cannot back up to {target}: {failed}") from None
            if isinstance(exc, OSError):
                raise layout_error(target, exc) from None
            raise
        finally:
            os.close(lock_fd)
        return target

    # ---- transactions ------------------------------------------------------------------

    def tx_begin(self, *, timeout: float | None = msmq_transactions.DEFAULT_TIMEOUT) -> int:
        """Start a transaction that later invocations can add to; returns its id.

        It is aborted if not committed within `timeout` seconds (default ten minutes); `None`
        (`FOREVER`) never times out.
        """
        timeout_us = _seconds(timeout, "timeout")
        return self._write(lambda t: msmq_transactions.begin(t, timeout_us))

    def tx_commit(self, tx: int) -> int:
        """Apply every operation of the transaction in one LMDB transaction; returns their count."""
        return self._write(lambda t: msmq_transactions.finish(t, tx, commit=True))

    def tx_abort(self, tx: int) -> int:
        """Undo every operation of the transaction; returns their count."""
        return self._write(lambda t: msmq_transactions.finish(t, tx, commit=False))

    def tx_list(self) -> list[TxInfo]:
        def read(t: Write) -> list[TxInfo]:
            return [msmq_transactions.info(t, i, msmq_transactions.load(t, i)) for i in msmq_transactions.all_ids(t)]
        return self._read(read)

    def tx_show(self, tx: int) -> tuple[TxInfo, list[Message]]:
        def read(t: Write) -> tuple[TxInfo, list[Message]]:
            record = msmq_transactions.load(t, tx)
            return msmq_transactions.info(t, tx, record), msmq_transactions.operations(t, tx, record)
        return self._read(read)

    # ---- maintenance and inspection ----------------------------------------------------

    def sweep(self, *, dry_run: bool = False) -> SweepResult:
        """Expire messages, undo lapsed leases and abort timed-out transactions until none is
        due (docs/design.md#leases)."""
        if dry_run:
            def due(t: Write) -> SweepResult:
                return SweepResult(expired=len(t.due(keys.EXPIRY, but_held=True, limit=None)),
                                   leases_undone=len(t.due(keys.LEASE, but_held=True, limit=None)),
                                   transactions_aborted=len(t.due(keys.TX_TIMEOUT, limit=None)))
            with self.as_is():
                return self._read(due)
        total = SweepResult()
        first = True
        while True:
            forgotten = 0

            def one(t: Write, first: bool = first) -> SweepResult:
                nonlocal forgotten
                step = self._maintain(t)
                if first:
                    holders.recover(t, self._holder)  # dead consumers' rows too (Write.any_held skips them)
                    holders.remove_dead_files(self._holder)
                forgotten = ids.prune(t, MAINTENANCE_BATCH)  # lapsed ids older than a day
                return step
            step = self._write(one, maintain=False)
            first = False
            total.expired += step.expired
            total.leases_undone += step.leases_undone
            total.transactions_aborted += step.transactions_aborted
            if not (step.expired or step.leases_undone or step.transactions_aborted or forgotten):
                return total

    def inflight(self, queue: str | None = None) -> list[Message]:
        def read(t: Write) -> list[Message]:
            names = [queue] if queue is not None else t.queue_names()
            return [m for n in names for m in t.in_flight(addressing.lookup(t, n))]
        return self._read(read)

    def check(self) -> list[str]:
        from . import check  # docs/layers.md: loaded only by the check, not by every start-up

        with self._env.begin() as lt:
            return check.check_store(Write(lt, self._dbs, self._now(), self._queue_cache), self.path)


def _refuse_open_transactions(q: QueueInfo, doomed: list[Message]) -> None:
    """A queue delete or purge removes no message an open transaction holds (IBM MQ's DELETE
    QLOCAL and CLEAR QLOCAL refuse uncommitted messages): TransactionError naming them."""
    open_txs = sorted({m.tx for m in doomed if m.state == TX_LOCKED and m.tx is not None})
    if open_txs:
        raise TransactionError(
            f"queue {q.name!r} has messages of open transaction "
            f"{', '.join(map(str, open_txs))}; commit or abort it first (`mqcli tx list`)")


def _refuse_delivering(t: Write, q: QueueInfo, doomed: list[Message]) -> None:
    """A queue delete removes no message a live process is delivering (a get writing it out, a
    dispatch sending it, a consumer handling it): that process removes it once delivered, and the delete would count
    it as deleted too. AlreadyReceived naming the process; purge leaves such messages instead."""
    busy = Counter(by for by in (holders.delivering(t, m) for m in doomed) if by is not None)
    if busy:
        held = "; ".join(f"{count} by a {holder}" for holder, count in busy.items())
        raise AlreadyReceived(f"queue {q.name!r} has messages being delivered ({held}); delete it "
                              f"when that ends (a purge now leaves those and removes the rest)")


class _Backlog:
    """What a write that only expired a batch of messages returns (Store._write runs another)."""


_BACKLOG = _Backlog()


@dataclass(slots=True)
class _Chain:
    """The end of a batch get_batches delivered, to run in the write of the next batch."""
    end: Callable[[Write], None] | None = None


def _confirm(t: Write, q: QueueInfo, confirm_id: int) -> int:
    """Confirm the put or get pending under `confirm_id` in queue `q` (MQe confirm)."""
    _not_held_by_a_process(t, confirm_id)
    pending = t.with_confirm_id(q, confirm_id)
    got = []
    for m in pending:
        if m.state == PUT_UNCONFIRMED:
            t.leave(m, AVAILABLE)
        else:
            t.leave(m, GONE)
            got.append(m)
    t.got(q, got)  # a confirmed get is a get
    return len(pending)


def _not_held_by_a_process(t: Write, confirm_id: int) -> None:
    """A holder's token is not a confirm id anyone may confirm or undo: its messages are being
    written out or sent right now, and go back by themselves if that process dies."""
    hold = holders.lookup(t, confirm_id) if t.any_held() else None
    if hold is not None:
        raise AlreadyReceived(f"id {confirm_id} belongs to a {hold.what} that is delivering its "
                              f"messages; they return by themselves if it dies")


def _transactional_queue(q: QueueInfo, in_transaction: bool) -> None:
    """MSMQ: a transactional queue takes messages only inside a transaction, and only a
    transactional queue takes them inside one (exit 10)."""
    if q.transactional and not in_transaction:
        raise TransactionError(f"queue {q.name!r} is transactional: put inside a transaction "
                               f"(`mqcli tx begin`, then --tx)")
    if in_transaction and not q.transactional:
        raise TransactionError(f"queue {q.name!r} is not transactional: only transactional queues "
                               f"take part in transactions")


def _states(states: str | Iterable[str] | None) -> set[str]:
    if states is None:
        return {AVAILABLE}
    if states == "all":
        return set(STATES)
    if not isinstance(states, (str, list, tuple, set, frozenset)):
        raise InvalidArgument(f"states must be a state name or several, got {type(states).__name__} {states!r:.40}")
    wanted = {states} if isinstance(states, str) else set(states)
    unknown = wanted - set(STATES)
    if unknown:
        raise InvalidArgument(f"unknown state {sorted(unknown)[0]!r}; states are {', '.join(STATES)}")
    return wanted


def _moved(m: Message, fresh: bool) -> Message:
    """The copy of `m` that a move enqueues in its target; `fresh` out of a dead-letter queue."""
    if fresh:
        return deadletters.fresh(m)
    return replace(m, props=dict(m.props))


COPY_OF = "mqcli.copy_of"  # a move --copy's copy: the msg_id of the message it copied


def _copies(t: Write, found: list[Message], fresh: bool) -> list[Message]:
    """What `move --copy` enqueues: new messages (SPEC section 5: a msg_id is unique within a
    store), each naming its source's msg_id in the property COPY_OF."""
    copies = [_moved(m, fresh) for m in found]
    for m, source in zip(copies, found):
        m.props[COPY_OF] = source.msg_id
    t.give_new_ids(copies)
    return copies


def _browsed(t: Write, queue: str, f: Filter, wanted: set[str], limit: int | None,
             after: tuple[int, int] | None = None) -> list[Message]:
    """Up to `limit` messages of `queue` in a state `wanted` that `f` selects, in queue order,
    after the place `after` if given (Store.browse, Store.browse_pages)."""
    q = addressing.lookup(t, queue)
    if wanted == {AVAILABLE}:
        try:
            return _first(t.candidates(q, f, after=after), limit)
        except (MessageNotFound, AlreadyReceived):
            return []
    source = (m for m in t.queue_messages(q, after) if m.state in wanted and f.matches(m, t.now))
    return _first(source, limit)


def _first(source: Iterable[Message], limit: int | None) -> list[Message]:
    _check_count(limit, "limit")
    out = []
    for m in source:
        out.append(m)
        if limit is not None and len(out) >= limit:
            break
    return out


__all__ = ["Store", "NewMessage", "StoreInfo", "SweepResult", "StoreError", "GET_UNCONFIRMED",
           "DEAD_LETTER"]
