"""The writers' waiting room: a flock in front of LMDB's write lock, where a signal gets through.

LMDB lets one writer in at a time: a robust pthread mutex in `lock.mdb`. A process waiting for
it waits in pthread_mutex_lock, which no signal interrupts, so Python runs no signal handler
until it is let in: behind a writer stopped inside its transaction (Ctrl-Z, SIGSTOP, a
debugger), `mqcli put` and `mqcli get` would not end on SIGTERM or Ctrl-C for as long as that
writer stays stopped. So every writer first takes an exclusive flock(2) on the store's
`writer.lock` and keeps it until its LMDB write transaction is committed or aborted: the
others wait in flock, a system call that a signal interrupts (EINTR). Python runs the handler
there, and when it raises (SIGTERM, Ctrl-C: mqcli/signals.py) the writer ends with nothing
begun; PEP 475 retries the call only if the handler returns.

- LMDB's mutex still makes writers take turns: the flock only decides where they wait. A
  writer that takes no flock (an older mqcli) is still serialized by LMDB, and whoever comes
  after it waits in LMDB's mutex, as before.
- A flock belongs to the open file description and goes with the process however it ends: a
  holder killed (SIGKILL, while stopped too) lets the next writer in.
- `lock.mdb` is never opened here: closing any descriptor of a file drops every POSIX
  (fcntl) lock the process holds on it, and LMDB uses those to tell live processes.
- One descriptor a Store handle (`WriterLock`), opened at its first write, O_CLOEXEC: a
  program the process runs has none. A forked child shares the description, so only the
  process that opened it ever unlocks or closes it (LOCK_UN through a shared description frees
  the parent's lock; Store._env refuses a handle after a fork before this is reached). A
  forked child that outlives its parent inside a write transaction would keep the flock: the
  store never forks there.
- Not reentrant, and one thread of a process in the room at a time: another thread writing
  through the same handle passes the flock (the same description) and waits in LMDB's mutex.
- The file is made by a handle's first write (`init`'s, and the first of a new mqcli on a
  store an older one made): 0600, the store owner's. A writable open takes the room too, for
  the write transaction that opens the tables (environment.open_environment), if the file is
  there: the first open of an older store waits in LMDB's mutex, as before. Where it cannot
  be made (a store directory this user may not write to) writers wait there alone.
- Reading handles (Store.open(reading=True)) open no write transaction and never come here.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from fcntl import LOCK_EX, LOCK_NB, LOCK_UN, flock
from pathlib import Path

from .errors import StoreUnavailable
from .ownership import open_checked, require_owner

WRITER_LOCK = "writer.lock"
_TAKE = LOCK_EX | LOCK_NB  # at once or not at all: the fast path, one system call
_NONE = -1  # the descriptor of a room that could not be made: writers wait in LMDB's mutex alone

# threads (by ident) waiting in flock now; see `waiting`
_waiting: set[int] = set()


def waiting() -> bool:
    """Whether the main thread is waiting for its turn to write now, with nothing begun: a
    signal handler that would rather not interrupt a write (mqcli/signals.py's Deferral)
    may act at once here."""
    return threading.main_thread().ident in _waiting


def open_room(store_dir: Path, create: bool = True) -> int:
    """The descriptor of `store_dir`'s writer.lock, made if missing (with `create`); _NONE where
    it is not there or cannot be made or opened (writers wait in LMDB's mutex alone then, as
    before it existed). A symbolic link or anything but a regular file there, or a file of a
    third user's, is refused (StorePermission, StoreUnavailable), as the store's other files are."""
    path = store_dir / WRITER_LOCK
    try:
        # O_NONBLOCK: a FIFO put there must not hang the open
        flags = os.O_RDONLY | os.O_NONBLOCK | (os.O_CREAT if create else 0)
        fd, st = open_checked(path, flags, str(path))
    except OSError:
        return _NONE
    try:
        if not stat.S_ISREG(st.st_mode):
            raise StoreUnavailable(f"{path} is not a regular file; the store at {store_dir} is not as "
                                   f"`mqcli init` made it")
        owner = os.stat(store_dir)
        if st.st_uid != owner.st_uid:
            if st.st_uid == os.geteuid() == 0:
                # made by root in a user's store (`sudo mqcli put`): given to the owner, who
                # could not open it otherwise and would write without the room
                _give(fd, owner)
            else:
                require_owner(st, str(path))
        if stat.S_IMODE(st.st_mode) != 0o600 and st.st_uid == os.geteuid():
            os.fchmod(fd, 0o600)  # made under a umask that masked the owner's bits too
    except OSError:
        os.close(fd)
        return _NONE
    except BaseException:
        os.close(fd)
        raise
    return fd


def _give(fd: int, owner: os.stat_result) -> None:
    try:
        os.fchown(fd, owner.st_uid, owner.st_gid)
    except OSError:
        pass  # not permitted: it stays root's, and the owner's writers wait in LMDB's mutex


def _wait(fd: int) -> None:
    """Wait for the flock another writer holds (the slow path: the fast one is LOCK_NB). A
    signal whose handler raises ends the wait with its exception."""
    me = threading.get_ident()
    _waiting.add(me)
    try:
        flock(fd, LOCK_EX)
    except BaseException:  # a signal's exception, maybe right after the flock was taken
        flock(fd, LOCK_UN)
        raise
    finally:
        _waiting.discard(me)


def _enter(fd: int) -> None:
    """Take the flock: at once when it is free (one system call), else wait for it."""
    try:
        flock(fd, _TAKE)
    except BlockingIOError:
        _wait(fd)
    except BaseException:  # a signal's exception right after the flock was taken
        flock(fd, LOCK_UN)
        raise


@contextmanager
def in_room(store_dir: Path) -> Iterator[None]:
    """The room taken over the block by a descriptor of its own, opened and closed here: for
    the one write transaction an open makes (environment.open_environment). Not made here:
    that open also makes a backup's copy (Store.backup), whose files are the store's data
    alone; a store's first write makes it (WriterLock)."""
    fd = open_room(store_dir, create=False)
    try:
        if fd != _NONE:
            _enter(fd)
        yield
    finally:
        if fd != _NONE:
            os.close(fd)  # drops the flock


class WriterLock:
    """A Store handle's turn to write: `with lock:` around each LMDB write transaction (the
    transaction ends inside the block, so the flock is let go after its commit or abort)."""

    __slots__ = ("_dir", "_fd", "_pid")

    def __init__(self, store_dir: Path) -> None:
        self._dir = store_dir
        self._fd: int | None = None  # opened at the first write
        self._pid = os.getpid()

    def __enter__(self) -> None:
        fd = self._fd
        if fd is None:
            fd = self._fd = open_room(self._dir)
        if fd != _NONE:
            _enter(fd)

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        if self._fd != _NONE:
            flock(self._fd, LOCK_UN)  # type: ignore[arg-type]  # set by __enter__

    def close(self) -> None:
        """Close the descriptor (in the process that opened it only: see the module's doc)."""
        fd, self._fd = self._fd, None
        if fd is not None and fd != _NONE and os.getpid() == self._pid:
            os.close(fd)
