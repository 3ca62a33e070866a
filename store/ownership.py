"""Whose files mqcli trusts: its own, checked on the opened file, never by path alone.

Modes are not enough. A user who makes a directory under a sticky, world-writable folder
(`/tmp`) owns it whatever its mode; if root then makes or uses a store in it, that user can
swap `data.mdb` for one of their own and forge messages, or read every later message. So a
store's directory and files, key files and mqcli's own temporary folders must belong to the
user running mqcli (its effective uid). Root may use another user's store when the caller
says so (`allow_foreign_owner`, the CLI's `--allow-foreign-owner`); making a store in someone
else's directory is refused always.

Every check is made with `fstat` on a descriptor opened with O_NOFOLLOW (a symbolic link where a
file belongs is refused; only the store directory itself may be reached through one), so a
path swapped between the check and the open cannot pass: what is checked is what was opened. LMDB opens its files by path, so `StoreFiles.verify_unchanged`
compares, after LMDB opened them, the files at those paths with the ones checked, and the files
LMDB mapped into memory (/proc/self/maps: the shared mappings new since the check) with the ones
checked: a path swapped to another file for the open and back before the comparison is caught
by the second, whatever that file's name. Opens in one process take turns (OPENING), so one
thread's mappings are never taken for a file swapped in under another's.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ForeignOwner, StorePermission, StoreUnavailable

# a store's entries that mqcli made (environment.py, holders.py, notify.py); their names are
# repeated here rather than imported so this module depends on nothing of the store's
_FILES = ("mqcli-store.json", "data.mdb", "lock.mdb")
_FOLDERS = ("wait", "holders")
_LMDB_FILES = ("data.mdb", "lock.mdb")


class _Opening:
    """Held by a store's open from its check to StoreFiles.verify_unchanged: the files another
    thread's LMDB maps meanwhile would otherwise look like files swapped in under this one. A
    child forked while another thread held it gets a free one (that thread is not in the child)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def forked(self) -> None:
        self._lock = threading.RLock()


OPENING = _Opening()
os.register_at_fork(after_in_child=OPENING.forked)


def describe(uid: int) -> str:
    """A user as `name (uid N)`, or `uid N` for a uid with no account."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def require_owner(st: os.stat_result, what: str, *, allow_foreign: bool = False,
                  owner: int | None = None) -> str | None:
    """None if the running user owns the file `st` describes; else ForeignOwner naming the
    owner — unless the user is root and `allow_foreign`: then the owner, for the caller to say.
    With `owner`, that user must own it instead: a Spark task checks the store it opens is
    owned by whom the planning accepted (analytics/locate.py), whoever the task runs as."""
    if owner is not None:
        if st.st_uid != owner:
            raise ForeignOwner(f"{what} is owned by {describe(st.st_uid)}, not by {describe(owner)} "
                               f"who owns the store the job planned; the job reads nothing of it")
        return None
    me = os.geteuid()
    if st.st_uid == me:
        return None
    named = describe(st.st_uid)
    if allow_foreign and me == 0:
        return named
    hint = ("run mqcli as that user, or as root pass --allow-foreign-owner" if me == 0
            else "run mqcli as that user")
    raise ForeignOwner(f"{what} is owned by {named}, not by {describe(me)} who runs mqcli; {hint}")


def open_checked(path: str | os.PathLike[str], flags: int, what: str, *, dir_fd: int | None = None,
                 mode: int = 0o600, follow: bool = False) -> tuple[int, os.stat_result]:
    """os.open with O_NOFOLLOW (unless `follow`) and O_CLOEXEC, then fstat: the descriptor and
    what it is. A symbolic link is StorePermission (a link where a file belongs is how a path
    is swapped)."""
    try:
        fd = os.open(path, flags | (0 if follow else os.O_NOFOLLOW) | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise StorePermission(f"{what} is a symbolic link; give the file itself") from None
        raise
    try:
        return fd, os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise


def private_dir(path: Path) -> None:
    """Make directory `path` for its maker alone (0700) whatever the umask, which masks
    mkdir's mode (under umask 0777 a store's wait/ and holders/ were made mode 000: no waits
    and no two-phase gets for a user who is not root). One that exists is left as it is."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return
    os.chmod(path, 0o700)


def private_folder(path: Path, what: str) -> None:
    """Make folder `path` (0700) or accept it only if it is the running user's and no one
    else may enter it: exit 11 (StorePermission) otherwise, so nothing is written into
    another user's folder. For mqcli's own folders under $TMPDIR."""
    try:
        private_dir(path)
        fd, st = open_checked(path, os.O_RDONLY | os.O_DIRECTORY, what)
    except StorePermission:
        raise
    except OSError as exc:
        raise StoreUnavailable(f"cannot use {what} {path}: {exc.strerror or exc}") from None
    try:
        require_owner(st, f"{what} {path}")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise StorePermission(f"{what} {path} may be entered by others (mode "
                                  f"{stat.S_IMODE(st.st_mode):o}); run `chmod 700 {path}` or remove it")
    finally:
        os.close(fd)


@dataclass
class StoreFiles:
    """What was checked of a store directory: its identity and that of its files."""

    path: Path
    directory: tuple[int, int]
    files: dict[str, tuple[int, int]] = field(default_factory=dict)
    foreign_owner: str | None = None  # the owner of a store root uses with allow_foreign_owner
    owner_ids: tuple[int, int] | None = None  # and that owner's (uid, gid): as_owner
    mapped_before: frozenset[tuple[int, int]] | None = None  # files mapped before LMDB opened these

    def verify_unchanged(self) -> None:
        """After LMDB opened the store by path: the directory and files at those paths are
        still the ones checked (else a path was swapped meanwhile: StorePermission)."""
        # the marker is read before LMDB opens anything, and another process's upgrade may
        # replace it meanwhile (as the owner may: the directory is the owner's alone); what
        # LMDB maps, and the directory, must be the ones checked
        mapped = {name: identity for name, identity in self.files.items() if name in _LMDB_FILES}
        try:
            st = os.stat(self.path)
            now = {name: _identity(os.stat(self.path / name, follow_symlinks=False)) for name in mapped}
        except OSError:
            now = None
        other = self._mapped_other()
        if other is not None:
            why = f"LMDB opened {other} instead of its files"
        elif now is None or _identity(st) != self.directory or now != mapped:
            why = "a file or the directory was replaced"
        else:
            return
        raise StorePermission(f"the store at {self.path} changed while it was being opened ({why}); "
                              f"check who can write to {self.path.parent}")

    def _mapped_other(self) -> str | None:
        """A file LMDB mapped other than the ones checked (its path): one newly mapped shared
        since the check that is neither a checked file nor one LMDB made in the store
        directory (a lock file missing at the check). LMDB maps its files shared; what else
        maps files (the loader, a shared library) maps them private, so no file's name is
        trusted here: a name is whatever the swapper renamed it to. None where
        /proc/self/maps cannot be read."""
        if self.mapped_before is None:
            return None
        after = _mapped_files()
        if after is None:
            return None
        allowed = set(self.files.values())
        made = {os.path.realpath(self.path / name) for name in _LMDB_FILES if name not in self.files}
        return next((name for ident, name in after.items() if ident not in self.mapped_before
                     and ident not in allowed and name not in made),
                    None)


def _mapped_files() -> dict[tuple[int, int], str] | None:
    """(st_dev, st_ino) -> path of every file mapped shared into this process (/proc/self/maps:
    permissions such as `r--s`)."""
    try:
        with open("/proc/self/maps", "rb") as f:
            lines = f.read().decode("utf-8", "surrogateescape").splitlines()
    except OSError:
        return None
    mapped: dict[tuple[int, int], str] = {}
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 6 or parts[4] == "0" or not parts[1].endswith("s"):
            continue
        major, _, minor = parts[3].partition(":")
        mapped[(os.makedev(int(major, 16), int(minor, 16)), int(parts[4]))] = parts[5]
    return mapped


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def check_store(path: Path, *, allow_foreign: bool = False, owner: int | None = None) -> StoreFiles | None:
    """Check the store directory `path` and mqcli's files in it: each must be the running
    user's (or, for root with `allow_foreign`, the directory's owner's; or, given, `owner`'s)
    and no symbolic link. None if there is no directory at `path` (nothing is made here)."""
    try:
        # a store path may be a symbolic link to the directory (a store moved to a bigger
        # disk): what counts is the directory opened, checked here, and still there after
        # LMDB opened it (verify_unchanged)
        dfd, st = open_checked(path, os.O_RDONLY | os.O_DIRECTORY, f"the store directory {path}", follow=True)
    except (FileNotFoundError, NotADirectoryError):
        if os.path.lexists(path) and not os.path.isdir(path):
            raise StoreUnavailable(f"cannot open the store at {path}: the path is not a directory; give "
                                   f"a store directory with --store") from None
        return None
    except PermissionError:
        raise StorePermission(f"no permission for the store at {path}: permission denied") from None
    except OSError as exc:
        raise StoreUnavailable(f"cannot open the store at {path}: {exc.strerror or exc}") from None
    try:
        foreign = require_owner(st, f"the store directory {path}", allow_foreign=allow_foreign, owner=owner)
        checked = StoreFiles(path, _identity(st), foreign_owner=foreign,
                             owner_ids=None if foreign is None else (st.st_uid, st.st_gid))
        for name in _FILES + _FOLDERS:
            flags = os.O_RDONLY | os.O_NONBLOCK | (os.O_DIRECTORY if name in _FOLDERS else 0)
            what = f"{path / name}"
            try:
                fd, fst = open_checked(name, flags, what, dir_fd=dfd)
            except FileNotFoundError:
                continue
            except NotADirectoryError:
                raise StoreUnavailable(f"{what} is not a directory; the store at {path} is not as "
                                       f"`mqcli init` made it") from None
            except PermissionError:
                raise StorePermission(f"no permission to open {what}") from None
            os.close(fd)
            if name in _FILES and not stat.S_ISREG(fst.st_mode):
                raise StoreUnavailable(f"{what} is not a regular file; the store at {path} is not as "
                                       f"`mqcli init` made it")
            # root, allowed, uses the store of its directory's owner: not a third user's files
            if fst.st_uid != st.st_uid or foreign is None:
                require_owner(fst, what, owner=owner)
            if name in _LMDB_FILES and fst.st_nlink != 1:
                # another name for the same file: another store (`cp -al`, `ln`) sharing these
                # pages under its own lock file, whose writers would not see ours
                raise StorePermission(f"{what} has {fst.st_nlink} names (hard links); a store's data and "
                                      f"lock files must have one: copy the store with `mqcli backup` "
                                      f"instead of linking it")
            if name in _FILES:
                checked.files[name] = _identity(fst)
        if "data.mdb" in checked.files:
            mapped = _mapped_files()
            checked.mapped_before = None if mapped is None else frozenset(mapped)
        return checked
    finally:
        os.close(dfd)


@contextmanager
def as_owner(checked: StoreFiles) -> Iterator[None]:
    """Root opening another user's store (allow_foreign_owner) does what it does by path
    inside the store directory with that user's ids, then its own again. LMDB opens (and
    truncates, and writes) its lock and data files by path: the owner, who may swap them for
    symbolic links meanwhile, could otherwise make root's open write a file of root's. As the
    owner, such an open fails (the owner may not write it) and verify_unchanged says why. A
    store its owner cannot reach (under a directory of root's) is opened as root: neither can
    the owner swap anything in it."""
    if checked.owner_ids is None:
        yield
        return
    uid, gid = checked.owner_ids
    groups, egid, euid = os.getgroups(), os.getegid(), os.geteuid()
    try:
        owner_groups = os.getgrouplist(pwd.getpwuid(uid).pw_name, gid)
    except KeyError:  # a uid with no account: its own group only
        owner_groups = [gid]

    def back() -> None:
        os.seteuid(euid)
        os.setegid(egid)
        os.setgroups(groups)

    os.setgroups(owner_groups)
    os.setegid(gid)
    os.seteuid(uid)
    if not os.access(checked.path, os.X_OK, effective_ids=True):
        back()
        yield
        return
    try:
        yield
    finally:
        back()


def check_parents(path: Path, made: str = "store") -> None:
    """Refuse to make a store (or a backup, a snapshot: `made`) under a directory another user
    may change: every directory above `path` that exists must be the running user's or root's,
    and one that others may write to must be sticky (/tmp). Whoever can rename entries there
    can swap the new store for a link to anywhere while it is made (and root's init, or
    backup, then writes there) or later (and every command then uses another store).
    StorePermission naming the directory."""
    me = os.geteuid()
    for parent in Path(os.path.realpath(path)).parents:
        try:
            st = os.stat(parent)
        except FileNotFoundError:
            continue  # made by this init, the running user's
        except OSError as exc:
            where = f"use {parent} for a store" if made == "store" else f"write a {made} into {parent}"
            raise StoreUnavailable(f"cannot {where}: {exc.strerror or exc}") from None
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid not in (me, 0):
            raise StorePermission(f"{parent} is owned by {describe(st.st_uid)}, who could swap the {made} "
                                  f"made under it; make the {made} in a directory of your own")
        if mode & (stat.S_IWGRP | stat.S_IWOTH) and not mode & stat.S_ISVTX:
            raise StorePermission(f"{parent} may be written by others (mode {mode:o}), who could swap "
                                  f"the {made} made under it; make the {made} in a directory of your own")
