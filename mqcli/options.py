"""Options every command shares, declared once, and the per-invocation session they make.

`--store`, `-o/--output` and `-q/--quiet` are accepted before the command (the root callback
keeps them in the context) and on each command (a command's own value wins). A command gets
them, and the Session built from them, with `@shared_options`; it never declares them itself.
The Session and the root Settings live in mqcli/session.py, which imports no Typer.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import click
import typer

from . import values
# the commands import these from here, with the options
from .session import Session as Session, Settings as Settings, shared_stores as shared_stores

SETTINGS_KEY = "mqcli"


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
    "--output", "-o", metavar="text|json|jsonl|body|hex", callback=values.output_mode, show_default=False,
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
NewConfirmOpt = Annotated[Optional[str], typer.Option(
    "--confirm-id", metavar="ID|auto", callback=values.id_or_auto, show_default=False,
    help="Confirm id: a positive 63-bit integer no one holds in the queue, or auto for a fresh one (printed).")]
NewLockOpt = Annotated[Optional[str], typer.Option(
    "--lock-id", metavar="ID|auto", callback=values.id_or_auto, show_default=False,
    help="Lock id: a positive 63-bit integer no one holds in the queue, or auto (the default) for a fresh one.")]
UnsafeOpt = Annotated[bool, typer.Option(
    "--allow-unsafe-permissions", help="Open a store whose directory others may write to.")]
ForeignOpt = Annotated[bool, typer.Option(
    "--allow-foreign-owner", help="As root, use a store owned by another user (said on stderr).")]


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
            kwargs["s"] = Session(settings(ctx), chosen.get("store"), chosen["output"], chosen["quiet"],
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
