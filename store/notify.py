"""Waking getters in other processes when a message becomes available.

A waiting getter makes a FIFO `wait/<qid>.<pid>.<token>` in the store directory, opens it for
reading and (so that it never sees end-of-file) for writing too, and sleeps in `select` on it;
it makes and opens the FIFO under another name first and renames it into place, so a writer
never sees it unopened.
A writer that made a message available in queue `qid` writes one byte to each FIFO of that
queue after its commit. A FIFO whose getter died has no reader left; opening it for writing
fails with ENXIO and the writer removes it. No busy spinning, no server.
"""

from __future__ import annotations

import errno
import os
import select
import time
from pathlib import Path

from .ownership import private_dir

WAIT_DIR = "wait"


class Waiter:
    """One getter's FIFO. Register before looking at the queue, so no wake-up is lost."""

    def __init__(self, store_dir: Path, qid: int) -> None:
        self.dir = store_dir / WAIT_DIR
        private_dir(self.dir)
        name = f"{qid}.{os.getpid()}.{os.urandom(4).hex()}"
        self.path = self.dir / name
        # made and opened under a name no writer looks at, then renamed into place: a writer
        # must never find it between mkfifo and open, take it for a dead getter's and remove it
        making = self.dir / f"new-{name}"
        os.mkfifo(making, 0o600)
        try:
            self.rfd = os.open(making, os.O_RDONLY | os.O_NONBLOCK)
            self.wfd = os.open(making, os.O_WRONLY | os.O_NONBLOCK)
            os.rename(making, self.path)
        except BaseException:
            _unlink(str(making))
            raise

    def wait(self, seconds: float) -> bool:
        """Sleep until woken or `seconds` pass; True if woken."""
        ready, _, _ = select.select([self.rfd], [], [], max(seconds, 0.0))
        if not ready:
            return False
        try:
            while os.read(self.rfd, 4096):
                pass
        except BlockingIOError:
            pass
        return True

    def close(self) -> None:
        for fd in (self.rfd, self.wfd):
            os.close(fd)
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def __enter__(self) -> Waiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# wait dir -> (device, inode, mtime in ns, the names in it): what the last scan found, kept
# while the directory's mtime stays as it was and was settled when read (_names)
_SCANNED: dict[str, tuple[int, int, int, tuple[str, ...]]] = {}
_SETTLED_NS = 50_000_000  # well over a clock tick (1-10 ms) and the mtime steps of sub-second filesystems
_SETTLED_WHOLE_NS = 2_000_000_000  # whole (or even) seconds


def wake(wait_dir: str, qids: set[int]) -> None:
    """Wake every getter waiting on one of `qids` (`wait_dir`: the store's wait directory).

    Runs after a commit, so it never raises: a wake-up it cannot deliver (no file descriptors
    left, `wait/` not a directory) only delays a getter until its next look (at most
    engine._WAIT_SLICE); failing would report a committed put as failed."""
    names = _names(wait_dir)
    if not names:
        return
    prefixes = tuple(f"{qid}." for qid in qids)
    for name in names:
        if name.startswith(prefixes):
            _wake_one(os.path.join(wait_dir, name))


def _names(wait_dir: str) -> tuple[str, ...]:
    """The names in the wait directory. A writer wakes after every commit that made a message
    available, and the directory rarely changes (a getter comes to wait or leaves), so it is
    read again only when its mtime changed. The mtime is read before the names, and the names
    are kept only when that mtime was already settled: older than the coarse clock that stamps
    a directory change can lag (a tick, at most 10 ms; _SETTLED_NS), or on a filesystem that
    keeps whole seconds (no fraction in the mtime) older than two seconds. A FIFO renamed into
    place after the read then gives the directory a later mtime, so the next wake sees it.
    (Were the wall clock set back meanwhile, that getter looks again within its wait slice:
    late, not lost.)"""
    try:
        st = os.stat(wait_dir)
    except OSError:
        return ()
    known = _SCANNED.get(wait_dir)
    if known is not None and known[0] == st.st_dev and known[1] == st.st_ino and known[2] == st.st_mtime_ns:
        return known[3]
    try:
        names = tuple(os.listdir(wait_dir))
    except OSError:
        _SCANNED.pop(wait_dir, None)
        return ()  # the others look again within a slice
    mtime = st.st_mtime_ns
    if mtime < time.time_ns() - (_SETTLED_NS if mtime % 1_000_000_000 else _SETTLED_WHOLE_NS):
        _SCANNED[wait_dir] = (st.st_dev, st.st_ino, mtime, names)
    else:
        _SCANNED.pop(wait_dir, None)
    return names


def _wake_one(path: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # its getter is gone
            _unlink(path)
        return
    try:
        os.write(fd, b"\0")
    except OSError:
        pass  # already full of wake-ups (EAGAIN), or its getter just left (EPIPE)
    finally:
        os.close(fd)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass  # gone already, or not ours to remove: a later writer tries again
