"""The Typer app: the root options, the command tree (lazy: commands come from mqcli.registry,
each built when run), and `run`, where errors become exit codes (in exits.report, the one place)."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import click
import typer
import typer.main

from . import __version__
from .exits import ExitCode, UsageError, command_path, one_line, outcome, report, wants_json
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
    return outcome(lambda: _main(command or click_command(), argv), argv)


def _main(command: click.Command, argv: list[str]) -> int:
    """click's part: its own exceptions become exit codes here, the command's in exits.outcome."""
    try:
        result = command.main(args=argv, prog_name="mqcli", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        raise KeyboardInterrupt from None
    except click.exceptions.NoArgsIsHelpError as exc:  # `mqcli`, `mqcli queue`: show the help
        sys.stderr.write(exc.ctx.get_help() + "\n")
        return ExitCode.USAGE
    except click.ClickException as exc:
        hint = ""
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            hint = f" (see `{exc.ctx.command_path} --help`)"
        message = exc.format_message() + hint
        if command_path(argv) == ("health",):  # a Nagios check: a usage error is UNKNOWN (3), not CRITICAL (2)
            from .commands.health import usage_error

            return usage_error(one_line(message), as_json=wants_json(argv))
        return report(UsageError(message), json_errors=wants_json(argv))
    if result == ExitCode.INTERRUPTED:
        # typer turns Ctrl-C (and SIGTERM, a KeyboardInterrupt too) into a return value of
        # 130 when not in standalone mode
        raise KeyboardInterrupt
    # click returns the code of a typer.Exit(code) when not in standalone mode (`batch`)
    return int(result) if isinstance(result, int) and not isinstance(result, bool) else ExitCode.OK
