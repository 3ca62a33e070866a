"""Options every command shares, declared once, and the per-invocation session they make.

`--store`, `-o/--output` and `-q/--quiet` are accepted before the command (the root callback
keeps them in the context) and on each command (a command's own value wins). A command gets
them, and the Session built from them, with `@shared_options`; it never declares them itself.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import click
import typer

from . import default_store, values
from .render import MODES, Output

if TYPE_CHECKING:
    from store import Store

SETTINGS_KEY = "mqcli"


def default_store_path() -> Path:
    """The store of mqcli/default_store.py's rule; an empty MQCLI_STORE is a usage error."""
    path = default_store.from_environment()
    if path is None:
        from .exits import UsageError

        raise UsageError("MQCLI_STORE is empty; set it to a store directory or unset it")
    return path


def _check_mode(value: Optional[str]) -> Optional[str]:
    if value is not None and value not in MODES:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(MODES)}")
    return value


class _StorePath(click.Path):
    """A store directory: any path but the empty one (which would be the current directory).
    readable=False: click checks a path's readability by default, which made an unreadable
    store a usage error (exit 2); opening it says so, exit 11 (README.md#exit-codes)."""

    def __init__(self) -> None:
        super().__init__(readable=False, path_type=Path)
        self.name = "directory"  # the completions offer directories (scripts/gendocs/tree.py)

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> Any:
        if isinstance(value, str) and not value:
            self.fail("an empty path is no store directory; give one, or leave --store out", param, ctx)
        return super().convert(value, param, ctx)


StoreOpt = Annotated[Optional[Path], typer.Option(
    "--store", metavar="PATH", show_default=False, click_type=_StorePath(),
    help="Store directory (default: $MQCLI_STORE, else $XDG_DATA_HOME/mqcli/store).")]
OutputOpt = Annotated[Optional[str], typer.Option(
    "--output", "-o", metavar="text|json|jsonl|body|hex", callback=_check_mode, show_default=False,
    help="Output format.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No diagnostics on stderr.")]
DelimiterOpt = Annotated[str, typer.Option(
    "--delimiter", callback=values.delimiter,
    help="Separator after each body with -o body (escapes like \\n, \\0 allowed).")]
# what shared_options adds to a command, in this order: (parameter, annotated type, default)
_SHARED: tuple[tuple[str, Any, Any], ...] = (
    ("delimiter", DelimiterOpt, "\\n"),
    ("store", StoreOpt, None),
    ("output", OutputOpt, None),
    ("quiet", QuietOpt, False),
)
AUTO = "auto"
_MAX_ID = (1 << 63) - 1


def _id_or_auto(value: Optional[str]) -> Optional[int | str]:
    """A confirm id or lock id a new holder names: a positive 63-bit integer, or `auto` for a
    fresh one the store draws (and the command prints)."""
    if value is None or value == AUTO:
        return value
    try:
        number = int(value, 10)
    except ValueError:
        number = 0
    if not 0 < number <= _MAX_ID:
        raise typer.BadParameter(f"{value!r} is not a positive 63-bit integer or auto")
    return number


NewConfirmOpt = Annotated[Optional[str], typer.Option(
    "--confirm-id", metavar="ID|auto", callback=_id_or_auto, show_default=False,
    help="Confirm id: a positive 63-bit integer no one holds in the queue, or auto for a fresh one (printed).")]
NewLockOpt = Annotated[Optional[str], typer.Option(
    "--lock-id", metavar="ID|auto", callback=_id_or_auto, show_default=False,
    help="Lock id: a positive 63-bit integer no one holds in the queue, or auto (the default) for a fresh one.")]
UnsafeOpt = Annotated[bool, typer.Option(
    "--allow-unsafe-permissions", help="Open a store whose directory others may write to.")]
ForeignOpt = Annotated[bool, typer.Option(
    "--allow-foreign-owner", help="As root, use a store owned by another user (said on stderr).")]


@dataclass
class Settings:
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

    def __init__(self, ctx: typer.Context, store: Optional[Path] = None, output: Optional[str] = None,
                 quiet: bool = False, *, delimiter: bytes = b"\n") -> None:
        base = settings(ctx)
        self.given_store = store or base.store  # None: the default store (default_store_path)
        self.out = Output(output or base.output, quiet=quiet or base.quiet, delimiter=delimiter)
        self.allow_unsafe = base.allow_unsafe
        self.allow_foreign = base.allow_foreign
        self._warned_foreign: set[str] = set()  # stores said_foreign named

    @cached_property
    def store_path(self) -> Path:
        return self.given_store or default_store_path()

    def open(self, *, create: bool = False, name: str | None = None) -> Store:
        """Open the store; only `init` passes `create` (docs/design.md#store: a typo makes no new store).
        Inside `mqcli batch` the store is opened once and lent to each command (shared_stores)."""
        if _shared is not None:
            key = os.path.abspath(self.store_path)
            if key not in _shared:
                _shared[key] = self._open(create=create, name=name)
            return _Lent(_shared[key])  # type: ignore[return-value]  # a Store proxy
        return self._open(create=create, name=name)

    def _open(self, *, create: bool, name: str | None) -> Store:
        from store import Store

        try:
            st = Store.open(self.store_path, create=create, name=name,
                            allow_unsafe_permissions=self.allow_unsafe,
                            allow_foreign_owner=self.allow_foreign)
        except (PermissionError, NotADirectoryError, FileExistsError) as exc:
            raise unusable_store(self.store_path, exc) from None
        self.said_foreign(st.foreign_owner)
        return st

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


def settings(ctx: typer.Context) -> Settings:
    root = ctx.find_root()
    obj = root.obj if isinstance(root.obj, dict) else {}
    return obj.get(SETTINGS_KEY) or Settings()


def shared_options(command: Optional[Callable[..., None]] = None, *, store: bool = True,
                   delimiter: bool = False) -> Any:
    """Give a command the shared options and the session they make: the command names a
    parameter `s: Session` and declares none of `--store`, `-o/--output`, `-q/--quiet`
    (nor `--delimiter` with delimiter=True); this adds them after its own options, in that
    order, and hands it the Session built from them and the root's (a decorator, as
    sqlite-utils stacks its output options and rq its shared options on every command).
    store=False leaves `--store` out, for a command that uses no store (`link keygen`)."""

    def decorate(fn: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(fn, eval_str=True)
        if "s" not in signature.parameters:
            raise TypeError(f"{fn.__name__} takes no `s: Session` for its shared options")
        own = [p for p in signature.parameters.values() if p.name != "s"]
        clash = {p.name for p in own} & {name for name, _, _ in _SHARED}
        if clash:
            raise TypeError(f"{fn.__name__} declares a shared option by hand: {sorted(clash)}")
        added = [(name, kind, default) for name, kind, default in _SHARED
                 if (name != "store" or store) and (name != "delimiter" or delimiter)]
        # the click context, under the command's own name for it if it takes one
        own_context = next((p.name for p in own if p.annotation is typer.Context), None)
        context = [] if own_context else [inspect.Parameter(
            _CONTEXT, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
        params = context + own + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                                    annotation=kind, default=default)
                                  for name, kind, default in added]

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            ctx = kwargs[own_context] if own_context else kwargs.pop(_CONTEXT)
            chosen = {name: kwargs.pop(name) for name, _, _ in added}
            kwargs["s"] = Session(ctx, chosen.get("store"), chosen["output"], chosen["quiet"],
                                  delimiter=chosen.get("delimiter", b"\n"))
            return fn(*args, **kwargs)

        run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]  # read by typer
        # typer reads the types from here too; these are the evaluated ones
        run.__annotations__ = {p.name: p.annotation for p in params}
        run.__annotations__["return"] = signature.return_annotation
        run.shared_options = tuple(name for name, _, _ in added)  # type: ignore[attr-defined]  # for the tests
        return run

    return decorate if command is None else decorate(command)


# the name under which the wrapper takes the click context: none a command uses itself
_CONTEXT = "_shared_options_ctx"
