"""Output that never makes its writer wait: bytes for a sink, written by a thread.

`export` reads one moment of the store (store/view.py): one read transaction, during which
LMDB cannot reuse the pages writers free. Written straight to `mqcli export | slow-consumer`
(or a pipe nobody reads), the transaction would last as long as the consumer dawdles and the
data file would grow under every writer meanwhile. Through a spool, the read takes as long as
reading does: what the sink has not taken yet waits in memory, up to MEMORY bytes, and beyond
that in an unlinked temporary file (TMPDIR), while a thread writes it out in order."""

from __future__ import annotations

import os
import tempfile
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from .render import disk_full, no_room, write_all

MEMORY = 16 << 20  # bytes waiting in memory before the rest waits in a temporary file
CHUNK = 1 << 16  # bytes gathered before they are handed to the thread


class Spool:
    """Bytes for `sink`, in the order written. `write` never waits for the sink; a failure of
    the sink (its reader gone, a full disk) is raised by the next `write` or by `close`."""

    def __init__(self, sink: BinaryIO) -> None:
        self._sink = sink
        self._gathered = bytearray()
        self._waiting: deque[bytes | tuple[int, int]] = deque()  # bytes, or (offset, length) in the file
        self._in_memory = 0
        self._file: int | None = None
        self._end = 0
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
            self._ready.notify()
        self._thread.join()
        self._forget_file()
        self._raise_failure()
        self._sink.flush()

    def abandon(self) -> None:
        """Drop what the sink has not taken (the command failed or was interrupted)."""
        with self._ready:
            self._waiting.clear()
            self._done = True
            self._ready.notify()
        self._thread.join(0.1)  # a thread stuck in a write to a stalled sink is left to the exit
        if not self._thread.is_alive():
            self._forget_file()

    def _hand_over(self) -> None:
        if not self._gathered:
            return
        self._raise_failure()
        chunk = bytes(self._gathered)
        self._gathered.clear()
        item: bytes | tuple[int, int] = chunk
        with self._ready:
            room = self._in_memory + len(chunk) <= MEMORY
            if room:
                self._in_memory += len(chunk)
        if not room:  # written outside the lock: the thread goes on writing meanwhile
            item = self._to_file(chunk)
        with self._ready:
            self._waiting.append(item)
            self._ready.notify()

    def _to_file(self, chunk: bytes) -> tuple[int, int]:
        if self._file is None:
            self._file, name = tempfile.mkstemp(prefix="mqcli-spool-")
            os.unlink(name)  # gone with the process, whatever ends it
        at, view, written = self._end, memoryview(chunk), 0
        try:
            while written < len(chunk):
                written += os.pwrite(self._file, view[written:], at + written)
        except OSError as exc:
            if no_room(exc):
                raise disk_full(f"the spool of unwritten output in {tempfile.gettempdir()} (TMPDIR)") from None
            raise
        self._end = at + len(chunk)
        return at, len(chunk)

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
                    item = self._waiting.popleft()
                    if isinstance(item, bytes):
                        self._in_memory -= len(item)
                write_all(self._sink, item if isinstance(item, bytes) else self._read_back(*item))
        except BaseException as exc:  # handed to the command's thread, which raises it
            with self._ready:
                self._failure = exc
                self._waiting.clear()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _forget_file(self) -> None:
        if self._file is not None:
            os.close(self._file)
            self._file = None


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
