"""Files the command line writes (`export --to`): all or nothing.

An export that fails halfway (a queue that does not exist, a full disk, Ctrl-C) must neither
leave a partial file nor truncate the older file it would have replaced. So the data goes to a
temporary file next to the target, renamed over it only when the export is complete. A target
that is not a regular file (a FIFO, `/dev/stdout`, a shell's `>(…)`) is written in place:
there is nothing to replace atomically.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .exits import UsageError


@contextlib.contextmanager
def written_whole(target: Path) -> Iterator[Path]:
    """The path to write to; on success it becomes `target`, on failure it is gone."""
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
