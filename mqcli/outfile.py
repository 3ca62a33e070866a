"""Files the command line writes (`export --to`): all or nothing.

An export that fails halfway (a queue that does not exist, a full disk, Ctrl-C) must neither
leave a partial file nor truncate the older file it would have replaced. So the data goes to a
temporary file next to the target, renamed over it only when the export is complete. A target
that is not a regular file (a FIFO, a shell's `>(…)`), or names a descriptor open already
(`/dev/stdout`, `/dev/fd/N`), is written in place: there is nothing to replace atomically. A
symbolic link is written through: the file it leads to is replaced, the link stays. But only a
link the running user could trust, by the rule Linux applies to links in sticky directories
(fs.protected_symlinks), with the directory's owner trusted only if it is root: a link that is
the running user's, or root's in a directory of root's (`/dev/stdout`). Root writing a metrics
file into another user's directory would otherwise replace whatever file that user's link
names (/etc/shadow); such a path is a usage error and nothing is written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from store.ownership import describe

from .exits import UsageError

_MAX_LINKS = 40  # the kernel's own limit on links followed in one path


def _trusted_path(target: Path) -> tuple[str, bool]:
    """`target` with every symbolic link in it followed (os.path.realpath), each checked
    before it is followed (the module's rule, else UsageError naming the link and its owner),
    and whether it leads through /proc: /dev/stdout, /dev/fd/N, /proc/self/fd/N name a
    descriptor open already (stdout redirected to a file is a regular file there, but not one
    to replace), written in place as a FIFO is."""
    me = os.geteuid()
    pending = os.path.abspath(target).split("/")[1:]
    at, followed = "/", 0
    while pending:
        if at == "/proc" or at.startswith("/proc/"):  # its links (self, fd/N) are the kernel's
            return os.path.join(at, *pending), True
        name = pending.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            at = os.path.dirname(at)
            continue
        path = os.path.join(at, name)
        try:
            st = os.lstat(path)
        except OSError:  # nothing there (or not reachable): written_whole says why if it matters
            at = path
            continue
        if not stat.S_ISLNK(st.st_mode):
            at = path
            continue
        followed += 1
        try:
            folder = os.lstat(at).st_uid
        except OSError:
            folder = -1
        if st.st_uid != me and not (st.st_uid == folder == 0):
            raise UsageError(f"not writing {target}: it leads through the symbolic link {path}, owned by "
                             f"{describe(st.st_uid)}, who could point it at any file; only links of yours, "
                             f"or root's in root's directories, are followed")
        try:
            link = os.readlink(path)
        except OSError as exc:
            raise UsageError(f"cannot write {target}: {exc.strerror}") from None
        if followed > _MAX_LINKS:
            raise UsageError(f"cannot write {target}: {os.strerror(errno.ELOOP)}")
        if link.startswith("/"):
            at = "/"
        pending[:0] = link.split("/")
    return at, at == "/proc" or at.startswith("/proc/")


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
    resolved, open_already = _trusted_path(target)
    if open_already:
        yield target
        return
    target = Path(resolved)  # renamed over, a link became a file (/dev/stdout, as root)
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
    # written through the descriptor mkstemp opened (its /proc name), not by the temporary
    # file's name: in a directory another user may write (a textfile collector's), that user
    # could swap the name for a link between mkstemp and the writer's open, and root would
    # truncate, fill and chmod the file it leads to
    by_fd = f"/proc/self/fd/{fd}"
    try:
        yield Path(by_fd if os.path.exists(by_fd) else tmp)
        _still_ours(fd, tmp, target)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            if _is_ours(fd, tmp):
                os.unlink(tmp)
        raise
    finally:
        os.close(fd)


def _is_ours(fd: int, tmp: str) -> bool:
    try:
        named, held = os.lstat(tmp), os.fstat(fd)
    except OSError:
        return False
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _still_ours(fd: int, tmp: str, target: Path) -> None:
    """Before the rename: the temporary file's name still names the file written (another
    user with write access to the directory could have put something else there)."""
    if not _is_ours(fd, tmp):
        raise UsageError(f"not writing {target}: its temporary file {tmp} was replaced or removed by someone "
                         f"else meanwhile (write into a directory only you can change)")
