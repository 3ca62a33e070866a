"""Output that rarely makes its writer wait: bytes for a sink, written by a thread.

`export` reads one moment of the store (store/view.py): one read transaction, during which
LMDB cannot reuse the pages writers free. Written straight to `mqcli export | slow-consumer`
(or a pipe nobody reads), the transaction would last as long as the consumer dawdles and the
data file would grow under every writer meanwhile. Through a spool the read takes about as long
as reading does: what the sink has not taken yet waits in memory, up to MEMORY bytes, and
beyond that in an unlinked temporary file in TMPDIR, while a thread writes it out in order.

The file is emptied whenever the thread has caught up with it, and it stops growing where
its file system would keep less than KEEP_FREE bytes (or a fraction FREE_SHARE of itself)
free, or cannot be written at all (no TMPDIR, read-only, `ulimit -f`): from there `write`
waits for the sink, as a plain write would (the view is then held while the reader is slow,
its cost without a spool). A spool never fails an export that could have been written."""

from __future__ import annotations

import os
import tempfile
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from .render import write_all

MEMORY = 16 << 20  # bytes waiting in memory before the rest waits in a temporary file
CHUNK = 1 << 16  # bytes gathered before they are handed to the thread
KEEP_FREE = 256 << 20  # the file stops growing where its file system would keep less free
FREE_SHARE = 0.05  # or less than this share of it
CHECK_EVERY = 64 << 20  # file bytes written between two looks at the free space


class Spool:
    """Bytes for `sink`, in the order written. A failure of the sink (its reader gone, a
    full disk) is raised by the next `write` or by `close`."""

    def __init__(self, sink: BinaryIO) -> None:
        self._sink = sink
        self._gathered = bytearray()
        self._waiting: deque[bytes | tuple[int, int]] = deque()  # bytes, or (offset, length) in the file
        self._in_memory = 0
        self._in_file = 0  # bytes of the file the thread has not written out yet
        self._file: int | None = None
        self._file_failed = False  # no file (any more): wait for the sink instead
        self._end = 0  # where the next chunk goes in the file
        self._checked_at = -CHECK_EVERY  # the file's end when its free space was last looked at
        self._done = False
        self._failure: BaseException | None = None
        self._ready = threading.Condition()
        self._thread = threading.Thread(target=self._drain, name="spool", daemon=True)
        self._thread.start()

    def write(self, data: bytes) -> None:
        self._gathered += data
        if len(self._gathered) >= CHUNK:
            self._hand_over()

    def close(self) -> None:
        """Wait until the sink took everything (and flush it); raise its failure if it had one."""
        self._hand_over()
        with self._ready:
            self._done = True
            self._ready.notify_all()
        self._thread.join()
        self._forget_file()
        self._raise_failure()
        self._sink.flush()

    def abandon(self) -> None:
        """Drop what the sink has not taken (the command failed or was interrupted)."""
        with self._ready:
            self._waiting.clear()
            self._done = True
            self._ready.notify_all()
        self._thread.join(0.1)  # a thread stuck in a write to a stalled sink is left to the exit
        if not self._thread.is_alive():
            self._forget_file()

    def _hand_over(self) -> None:
        if not self._gathered:
            return
        chunk = bytes(self._gathered)
        self._gathered.clear()
        with self._ready:
            self._raise_failure()
            if self._in_memory + len(chunk) <= MEMORY or self._file_failed:
                self._keep(chunk)
                return
            if self._in_file == 0 and self._end:  # the thread caught up: start the file afresh
                self._end = self._checked_at = 0
                self._truncate()
        place = self._to_file(chunk)  # written outside the lock: the thread goes on meanwhile
        with self._ready:
            if place is None:  # no room for a file: wait for the sink instead
                self._keep(chunk)
                return
            self._in_file += len(chunk)
            self._waiting.append(place)
            self._ready.notify_all()

    def _keep(self, chunk: bytes) -> None:
        """With the lock held: queue `chunk` in memory, once memory has room for it (waiting
        for the sink to take some, unless nothing waits in memory), or raise the sink's failure."""
        while self._in_memory and self._in_memory + len(chunk) > MEMORY and self._failure is None:
            self._ready.wait()
        self._raise_failure()
        self._in_memory += len(chunk)
        self._waiting.append(chunk)
        self._ready.notify_all()

    def _to_file(self, chunk: bytes) -> tuple[int, int] | None:
        """Write `chunk` at the file's end; None where the file cannot (or should not) grow."""
        if self._file_failed:
            return None
        try:
            if self._file is None:
                self._file = _unlinked_file()
            if self._end - self._checked_at >= CHECK_EVERY:
                fs = os.fstatvfs(self._file)
                free = fs.f_bavail * fs.f_frsize
                if free - len(chunk) < max(KEEP_FREE, FREE_SHARE * fs.f_blocks * fs.f_frsize):
                    raise OSError("little room left")
                self._checked_at = self._end
            at, view, written = self._end, memoryview(chunk), 0
            while written < len(chunk):
                written += os.pwrite(self._file, view[written:], at + written)
        except OSError:  # no TMPDIR, read-only, full, `ulimit -f`: the sink is waited for instead
            self._file_failed = True
            return None
        self._end = at + len(chunk)
        return at, len(chunk)

    def _truncate(self) -> None:
        if self._file is not None:
            try:
                os.ftruncate(self._file, 0)
            except OSError:
                self._file_failed = True

    def _read_back(self, at: int, length: int) -> bytes:
        assert self._file is not None
        parts = []
        while length:
            part = os.pread(self._file, length, at)
            if not part:
                raise OSError(f"the spool file ended {length} bytes early")
            parts.append(part)
            at += len(part)
            length -= len(part)
        return b"".join(parts)

    def _drain(self) -> None:
        try:
            while True:
                with self._ready:
                    while not self._waiting and not self._done:
                        self._ready.wait()
                    if not self._waiting:
                        return
                    item = self._waiting[0]
                data = item if isinstance(item, bytes) else self._read_back(*item)
                write_all(self._sink, data)
                with self._ready:
                    if self._waiting and self._waiting[0] is item:
                        self._waiting.popleft()
                        if isinstance(item, bytes):
                            self._in_memory -= len(item)
                        else:
                            self._in_file -= item[1]
                    self._ready.notify_all()
        except BaseException as exc:  # handed to the command's thread, which raises it
            with self._ready:
                self._failure = exc
                self._waiting.clear()
                self._ready.notify_all()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _forget_file(self) -> None:
        if self._file is not None:
            os.close(self._file)
            self._file = None


def _unlinked_file() -> int:
    """A read-write file in TMPDIR that no name leads to (0600, gone with the process)."""
    f = tempfile.TemporaryFile(prefix="mqcli-spool-")  # O_TMPFILE where the file system has it
    fd = os.dup(f.fileno())
    f.close()
    return fd


@contextmanager
def spooled(sink: BinaryIO) -> Iterator[Spool]:
    """A spool for `sink`, closed (everything written) when the block ends, abandoned if it
    raises."""
    spool = Spool(sink)
    try:
        yield spool
    except BaseException:
        spool.abandon()
        raise
    spool.close()
