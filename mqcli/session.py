"""One invocation's store and output: the Settings of the root options and the Session a command
gets from its shared options (mqcli/options.py declares them for Typer; mqcli/fastpath.py parses
them for put, get and browse without click). Nothing here imports Typer or click."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from . import default_store
from .render import Output

if TYPE_CHECKING:
    from store import Store


def default_store_path() -> Path:
    """The store of mqcli/default_store.py's rule; an empty MQCLI_STORE is a usage error."""
    path = default_store.from_environment()
    if path is None:
        from .exits import UsageError

        raise UsageError("MQCLI_STORE is empty; set it to a store directory or unset it")
    return path


@dataclass
class Settings:
    """The root options of one invocation (--store, -o, -q, the unsafe-store switches)."""

    store: Optional[Path] = None
    output: str = "text"
    quiet: bool = False
    allow_unsafe: bool = False
    allow_foreign: bool = False


class Session:
    """What one command needs: where the store is and how to render, from the command's shared
    options and the root's (a command's own value wins). The store path is decided when first
    needed, so that a command's own usage errors are said before a bad $MQCLI_STORE, and a
    command that opens no store (`link keygen`) does not ask for one."""

    def __init__(self, base: Settings, store: Optional[Path] = None, output: Optional[str] = None,
                 quiet: bool = False, *, delimiter: bytes = b"\n") -> None:
        self.given_store = store or base.store  # None: the default store (default_store_path)
        self.out = Output(output or base.output, quiet=quiet or base.quiet, delimiter=delimiter)
        self.allow_unsafe = base.allow_unsafe
        self.allow_foreign = base.allow_foreign
        self._warned_foreign: set[str] = set()  # stores said_foreign named
        self._said_stale = False  # a reading command said once that it shows the store as committed

    @cached_property
    def store_path(self) -> Path:
        return self.given_store or default_store_path()

    def open(self, *, create: bool = False, name: str | None = None, reading: bool = False) -> Store:
        """Open the store; only `init` passes `create` (docs/design.md#store: a typo makes no new store).
        `reading`: a command that only reads (Store.open: no LMDB write lock, ever). Inside
        `mqcli batch` the store is opened once, writable, and lent to each command (shared_stores)."""
        if _shared is not None:
            key = os.path.abspath(self.store_path)
            if key not in _shared:
                _shared[key] = self._open(create=create, name=name)
            return _Lent(_shared[key])  # type: ignore[return-value]  # a Store proxy
        return self._open(create=create, name=name, reading=reading)

    def _open(self, *, create: bool, name: str | None, reading: bool = False) -> Store:
        from store import Store

        try:
            st = Store.open(self.store_path, create=create, name=name,
                            allow_unsafe_permissions=self.allow_unsafe,
                            allow_foreign_owner=self.allow_foreign, reading=reading)
            st.on_stale = self._stale
        except (PermissionError, NotADirectoryError, FileExistsError) as exc:
            raise unusable_store(self.store_path, exc) from None
        from . import crash

        crash.arm(self.store_path, json_errors=self.out.mode in ("json", "jsonl"))  # a damaged page: exit 11
        self.said_foreign(st.foreign_owner)
        return st

    def _stale(self, why: str) -> None:
        """A reading command shows the store as last committed (Store._maintain_aside): say
        why once, on stderr (docs/design.md#store, "Reads take no write lock")."""
        if not self._said_stale:
            self._said_stale = True
            self.out.note(f"mqcli: note: showing the store as last committed, without the lapsed "
                          f"leases, expired messages or timed-out transactions now due: {why}")

    def said_foreign(self, owner: str | None, path: str | os.PathLike[str] | None = None) -> None:
        """Say once per store (stderr, even with -q) that root uses another user's store."""
        where = os.fspath(self.store_path if path is None else path)
        if owner is not None and where not in self._warned_foreign:
            self._warned_foreign.add(where)
            self.out.err.write(f"mqcli: warning: using the store at {where}, owned by {owner} "
                               f"(--allow-foreign-owner)\n")
            self.out.err.flush()


# the stores the commands of one `mqcli batch` share, by absolute path; None outside a batch
_shared: dict[str, Store] | None = None


def unshare(path: Path) -> None:
    """Close the handle a batch's commands share of the store at `path`, if one is open: for a
    command that opens the store in a forked child (`check`), where LMDB refuses an environment
    this process has open. The next command that opens it opens it again."""
    if _shared is not None:
        st = _shared.pop(os.path.abspath(path), None)
        if st is not None:
            st.close()


@contextmanager
def shared_stores() -> Iterator[None]:
    """Within the block, every command that opens a store gets the one open handle of that path
    (`mqcli batch`: one process, one open store); they are closed at the end."""
    global _shared
    _shared = {}
    try:
        yield
    finally:
        stores, _shared = _shared, None
        for st in stores.values():
            st.close()


class _Lent:
    """A shared store as a command's `with s.open() as st`: leaving the block keeps it open."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __enter__(self) -> Store:
        return self._store

    def __exit__(self, *exc: object) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def unusable_store(path: Path, exc: OSError) -> Exception:
    """A store path that cannot be used (not permitted, not a directory) is exit 11, naming
    it; the store raises its own errors for most of these, this catches what it lets through."""
    from store.errors import StorePermission, StoreUnavailable

    where = f" ({exc.filename})" if exc.filename and os.fspath(exc.filename) != os.fspath(path) else ""
    if isinstance(exc, PermissionError):
        return StorePermission(f"cannot open the store at {path}: permission denied{where}; run as its "
                               f"owner or give another --store")
    what = "is not a directory" if isinstance(exc, FileExistsError) else "has a part that is not a directory"
    return StoreUnavailable(f"cannot open the store at {path}: the path {what}{where}; give a store "
                            f"directory with --store")
