"""The Typer app: the root options, the command groups, and `run`, where errors become exit
codes (in exits.report, the one place)."""

from __future__ import annotations

import io
import os
import sys
from typing import Annotated, Optional

import typer

from store.errors import DiskFull

from . import __version__, signals
from .exits import ExitCode, UsageError, report, wants_json
from .render import OutputClosed
from .options import SETTINGS_KEY, ForeignOpt, OutputOpt, QuietOpt, Settings, StoreOpt, UnsafeOpt

app = typer.Typer(
    name="mqcli",
    help="Queue administration over an embedded LMDB message store (MSMQ / MQ Everyplace "
         "semantics).\n\n\b\nExample:\n  mqcli queue create orders\n  mqcli put orders 'hello'\n  mqcli get orders",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"mqcli {__version__}\n")
        raise typer.Exit()


@app.callback()
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


def _register() -> None:
    from .commands import message, qmgr, queue, trace, transfer, tx

    qmgr.register(app)
    app.add_typer(queue.app, name="queue")
    message.register(app)
    transfer.register(app)
    from .commands import deadletter; deadletter.register(app)  # redrive
    app.add_typer(tx.app, name="tx")
    app.add_typer(trace.app, name="trace")
    from .commands import link, outgoing
    app.add_typer(link.app, name="link")
    app.add_typer(outgoing.app, name="outgoing")
    from .commands import consume; consume.register(app)
    from .commands import batch; batch.register(app)
    from .commands import health; health.register(app)
    from .commands import channel; channel.register(app)  # listen, dispatch
    from .commands import completion; completion.register(app)
    from .commands import analyze; analyze.register(app)  # PySpark pipeline, imported lazily
    from .commands import snapshot; snapshot.register(app)  # snapshots for the pipeline
    from .commands import bench
    bench.register(app)


_register()


_command = None


def click_command():
    """The click command tree of the app, built once (`mqcli batch` runs many commands)."""
    global _command
    if _command is None:
        _command = typer.main.get_command(app)
    return _command


def run(argv: list[str] | None = None) -> int:
    """Run the command line and return the exit code."""
    import click

    argv = list(sys.argv[1:] if argv is None else argv)
    json_errors = wants_json(argv)
    command = click_command()
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
        if isinstance(exc, DiskFull):
            _drop_unwritten_stdout()
        return report(exc, json_errors=json_errors)


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
