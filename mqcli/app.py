"""The Typer app: the root options, the command tree (lazy: commands come from mqcli.registry,
each built when run), and `run`, where errors become exit codes (in exits.report, the one place)."""

from __future__ import annotations

import io
import os
import sys
from typing import Annotated, Optional

import click
import typer
import typer.main

from store.errors import DiskFull

from . import __version__, signals
from .exits import ExitCode, UsageError, report, wants_json
from .render import OutputClosed
from .options import SETTINGS_KEY, ForeignOpt, OutputOpt, QuietOpt, Settings, StoreOpt, UnsafeOpt
from .registry import COMMANDS, LazyGroup, add_to

_HELP = ("Queue administration over an embedded LMDB message store (MSMQ / MQ Everyplace semantics).\n\n"
         "\b\nExample:\n  mqcli queue create orders\n  mqcli put orders 'hello'\n  mqcli get orders")


def _typer(cls: type | None = None) -> typer.Typer:
    """The root app: its options and help, no command yet (commands come from mqcli.registry)."""
    root_app = typer.Typer(
        name="mqcli",
        help=_HELP,
        cls=cls,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    root_app.callback()(root)
    return root_app


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"mqcli {__version__}\n")
        raise typer.Exit()


def root(
    ctx: typer.Context,
    store: StoreOpt = None,
    output: OutputOpt = None,
    quiet: QuietOpt = False,
    allow_unsafe: UnsafeOpt = False,
    allow_foreign: ForeignOpt = False,
    traceback: Annotated[bool, typer.Option("--traceback", help="Show the traceback of an internal error.")] = False,
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
) -> None:
    ctx.ensure_object(dict)
    ctx.obj[SETTINGS_KEY] = Settings(store=store, output=output or "text", quiet=quiet,
                                     allow_unsafe=allow_unsafe, allow_foreign=allow_foreign)


_command: LazyGroup | None = None
_full: typer.Typer | None = None


def click_command() -> LazyGroup:
    """The click command tree of the app, built once; each command is built when first run."""
    global _command
    if _command is None:
        built = typer.main.get_command(_typer(LazyGroup))
        assert isinstance(built, LazyGroup)
        _command = built
    return _command


def full_command() -> LazyGroup:
    """The whole command tree, every command built (the doc generator, `mqcli batch`)."""
    return click_command().load_all()


def full_app() -> typer.Typer:
    """The Typer app with every command of mqcli.registry registered (eager: imports them all)."""
    global _full
    if _full is None:
        _full = _typer()
        for name in COMMANDS:
            add_to(_full, name)
    return _full


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # `from mqcli.app import app`: the whole app, as before the registry
        return full_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run(argv: list[str] | None = None, command: click.Command | None = None) -> int:
    """Run the command line (on `command`, the lazy tree by default) and return the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    json_errors = wants_json(argv)
    command = command or click_command()
    try:
        result = command.main(args=argv, prog_name="mqcli", standalone_mode=False)
        if result == ExitCode.INTERRUPTED:
            # typer turns Ctrl-C (and SIGTERM, a KeyboardInterrupt too) into a return value of
            # 130 when not in standalone mode
            return report(signals.interruption(), json_errors=json_errors)
        # click returns the code of a typer.Exit(code) when not in standalone mode (`batch`)
        return int(result) if isinstance(result, int) and not isinstance(result, bool) else ExitCode.OK
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        return report(signals.interruption(), json_errors=json_errors)
    except click.exceptions.NoArgsIsHelpError as exc:  # `mqcli`, `mqcli queue`: show the help
        sys.stderr.write(exc.ctx.get_help() + "\n")
        return ExitCode.USAGE
    except OutputClosed:
        # the reader went away (`mqcli get q --all | head`): nothing more to say, and a
        # destructive get whose output could not be written did not commit
        try:  # and no second EPIPE when Python flushes stdout at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            pass
        return ExitCode.OUTPUT_CLOSED
    except click.ClickException as exc:
        hint = ""
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            hint = f" (see `{exc.ctx.command_path} --help`)"
        return report(UsageError(exc.format_message() + hint), json_errors=json_errors)
    except Exception as exc:
        if "--traceback" in argv:
            raise
        if _caused_by_interrupt(exc):
            return report(signals.interruption(), json_errors=json_errors)
        if isinstance(exc, DiskFull):
            _drop_unwritten_stdout()
        return report(exc, json_errors=json_errors)


def _caused_by_interrupt(exc: BaseException) -> bool:
    """A Ctrl-C or SIGTERM that Python wrapped on its way out: a KeyboardInterrupt raised while
    a command's module was importing, inside a dataclass field's __set_name__, comes out as
    "RuntimeError: Error calling __set_name__" with the interrupt as its cause."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _drop_unwritten_stdout() -> None:
    """After a full device: what stdout still buffers cannot be written either, and Python's
    flush at exit would fail again and print a traceback-like warning (and exit 120)."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            pass
