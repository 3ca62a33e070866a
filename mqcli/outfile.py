"""Files the command line writes (`export --to`): all or nothing.

An export that fails halfway (a queue that does not exist, a full disk, Ctrl-C) must neither
leave a partial file nor truncate the older file it would have replaced. So the data goes to a
temporary file next to the target, renamed over it only when the export is complete. A target
that is not a regular file (a FIFO, a shell's `>(…)`), or names a descriptor open already
(`/dev/stdout`, `/dev/fd/N`), is written in place: there is nothing to replace atomically. A
symbolic link is written through: the file it leads to is replaced, the link stays.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .exits import UsageError


def _open_already(path: Path) -> bool:
    """Whether `path` leads through /proc: /dev/stdout, /dev/fd/N, /proc/self/fd/N name a
    descriptor open already (stdout redirected to a file is a regular file there, but not one
    to replace), written in place as a FIFO is."""
    at = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links followed
        at = os.path.join(os.path.realpath(os.path.dirname(at)), os.path.basename(at))
        if at.startswith("/proc/"):
            return True
        try:
            at = os.path.join(os.path.dirname(at), os.readlink(at))
        except OSError:  # not a link (or nothing there)
            return False
    return False


def regular_or_new(target: Path) -> bool:
    """Whether `target` (through its links) is a regular file or nothing yet."""
    try:
        return stat.S_ISREG(os.stat(target).st_mode)
    except OSError:
        return True  # nothing there yet; or written_whole says why it cannot write there


@contextlib.contextmanager
def written_whole(target: Path) -> Iterator[Path]:
    """The path to write to; on success it becomes `target` (the file a symbolic link leads to,
    not the link), on failure it is gone."""
    if _open_already(target):
        yield target
        return
    target = Path(os.path.realpath(target))  # renamed over, a link became a file (/dev/stdout, as root)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise UsageError(f"cannot write {target}: it is a directory")
    if mode is not None and not stat.S_ISREG(mode):
        yield target
        return
    try:  # 0600, like the store's own files: an export holds every message body
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror}") from None
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
