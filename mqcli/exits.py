"""Exit codes and the one place where an exception becomes one.

The codes, their meanings and the statuses error lines show are the table of
store/exit_codes.py (re-exported here: `ExitCode`, `Status`).

Every expected error prints one line on stderr, `mqcli: error: <what, and what to do> [STATUS]`,
or with `-o json|jsonl` instead only a JSON object with the same status, message and exit code:
the -o the command runs with, as its parser reads it (wants_json decides, for every error).
No command calls sys.exit.
"""

from __future__ import annotations

import io
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from store.errors import StoreError
from store.exit_codes import ExitCode, Status

__all__ = ["ExitCode", "Status", "UsageError", "Declined", "Failed", "outcome", "report", "wants_json",
           "output_mode", "errors_as_json"]


class UsageError(Exception):
    """A command line that cannot be run as written (exit 2)."""


class Declined(Exception):
    """The user answered no to the command's question (`queue purge`): nothing was done
    (exit 1). Not an interruption (exit 130): the user did not stop mqcli, mqcli asked."""


class Failed(Exception):
    """A command whose parts failed with their own codes, each already shown (a `batch` line):
    the one-line error names the first, and its code is the command's."""

    def __init__(self, code: int, status: Status, message: str) -> None:
        super().__init__(message)
        self.code, self.status = code, status


class Reported(Exception):
    """The command ends with `code`, whose one-line error was printed already (a `batch` line
    that was interrupted printed it)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def one_line(text: str) -> str:
    """Errors are one line: a newline or other control character that came in with the
    user's text (a queue name, a file's line) is shown escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def output_mode(argv: list[str]) -> str | None:
    """The -o a command line runs with, read by the parser that runs it: mqcli/fastpath.py's for
    a line it takes (put, get, browse without Typer), else click's over the app's command tree.
    None: it gives none (text)."""
    from .fastpath import parse

    parsed = parse(argv)
    return parsed.output if parsed is not None else _click_parse(argv)[1]


def command_path(argv: list[str]) -> tuple[str, ...]:
    """The names of the command a command line runs and of its groups (`("queue", "create")`),
    as click's parser reads them (_click_parse), also from a line click refuses."""
    return _click_parse(argv)[0]


def _click_parse(argv: list[str]) -> tuple[tuple[str, ...], str | None]:
    """The command path and the -o click reads in `argv`, with its own parser (so a cluster
    `-qo json`, the last -o given, a word after `--` or an option's value are what click takes
    them for), the command's own -o over its groups' and the root's. Only the words are parsed:
    no value is converted and no callback runs (`--version` prints nothing here). A command line
    click refuses still gives what it read: an unknown option is passed over, and parsing stops
    at the word it cannot read (`-o` without a value)."""
    import click

    from .app import click_command

    command: click.Command | None = click_command()
    parent: click.Context | None = None
    name, args, output = "mqcli", list(argv), None
    path: tuple[str, ...] = ()
    while command is not None:
        ctx = command.context_class(command, info_name=name, parent=parent, **{
            **command.context_settings, "resilient_parsing": True, "ignore_unknown_options": True})
        opts, args, _ = command.make_parser(ctx).parse_args(args)
        output = opts.get("output", output)
        while args and args[0].startswith("-") and args[0] != "-":  # an unknown option, passed over
            args = args[1:]
        if not isinstance(command, click.Group) or not args:
            break
        name, parent = args[0], ctx
        command, args = command.get_command(ctx, name), args[1:]
        if command is not None:
            path += (name,)
    return path, output


_batch_line = False  # errors_as_json: a line of a JSON batch is running


@contextmanager
def errors_as_json() -> Iterator[None]:
    """Within the block every error is a JSON object, whatever -o its command gives: a line of a
    `-o json|jsonl` batch, whose error goes into the line's object as "error" (`-o text` there
    makes the line's output text, not the batch's)."""
    global _batch_line
    saved, _batch_line = _batch_line, True
    try:
        yield
    finally:
        _batch_line = saved


def wants_json(argv: list[str]) -> bool:
    """Whether the command line's errors are JSON objects: the -o it runs with is json or jsonl
    (output_mode), or it is a line of a JSON batch (errors_as_json)."""
    return _batch_line or output_mode(argv) in ("json", "jsonl")


def report(exc: BaseException, *, json_errors: bool, stream: TextIO | None = None) -> int:
    """Print the one-line error for `exc` and return its exit code."""
    stream = stream or sys.stderr
    lmdb = sys.modules.get("lmdb")  # only a process that opened a store can meet an LMDB error
    if lmdb is not None and isinstance(exc, lmdb.Error):
        # one the store let through: exit 11, never an internal error, said as the store says it
        from store.environment import lmdb_failed

        exc = lmdb_failed(exc)
    if isinstance(exc, UnicodeEncodeError) and "surrogates" in exc.reason:
        # an argument's bytes that are not UTF-8 (Python keeps them as surrogates): usable as
        # a body, not as a queue name, label, id or option
        text = exc.object if isinstance(exc.object, str) else ""
        shown = repr(text if len(text) <= 60 else text[:60] + "…")
        exc = UsageError(f"{shown} is not valid UTF-8 (only a message body may hold any bytes)")
    code: int | None = None  # None: the status's own exit code
    if isinstance(exc, StoreError):
        entry, message = exc.entry, exc.message
    elif isinstance(exc, UsageError):
        entry, message = Status.USAGE, str(exc)
    elif isinstance(exc, Declined):
        entry, message = Status.DECLINED, str(exc)
    elif isinstance(exc, Failed):
        entry, code, message = exc.status, exc.code, str(exc)
    elif isinstance(exc, KeyboardInterrupt):
        from .signals import Terminated

        if isinstance(exc, Terminated):
            entry, code, message = Status.INTERRUPTED, ExitCode.TERMINATED, "terminated (SIGTERM)"
        else:
            entry, message = Status.INTERRUPTED, "interrupted"
    else:
        entry = Status.INTERNAL
        message = f"internal error: {type(exc).__name__}: {exc} (a bug; rerun with --traceback and report it)"
    if code is None:
        code = entry.exit
        assert code is not None, entry  # only BATCH has none, and a Failed carries its own
    status, mq_code = entry.name, entry.code
    message = one_line(message)
    if json_errors:  # only the object: a script reads stderr with `jq` as it reads stdout
        import json

        stream.write(json.dumps({"error": {"status": status, "code": mq_code, "exit": int(code),
                                           "message": message}}) + "\n")
    else:
        stream.write(f"mqcli: error: {message} [{status}]\n")
    stream.flush()
    return int(code)


def outcome(command: Callable[[], int], argv: list[str]) -> int:
    """Run `command` (a command line parsed by click, or by mqcli/fastpath.py) and return its
    exit code: what it raises becomes one here, in the form wants_json gives (read only when
    there is an error: a command that succeeds does not pay for it)."""
    from . import signals
    from .render import OutputClosed

    try:
        return command()
    except Reported as exc:
        return exc.code
    except KeyboardInterrupt:
        return _interrupted(argv)
    except OutputClosed:
        # the reader went away (`mqcli get q --all | head`): nothing more to say, and a
        # destructive get whose output could not be written did not commit
        to_devnull(sys.stdout)  # and no second EPIPE when Python flushes stdout at exit
        return ExitCode.OUTPUT_CLOSED
    except Exception as exc:
        if "--traceback" in argv:
            raise
        if _caused_by_interrupt(exc) or signals.resent():
            return _interrupted(argv)
        from store.errors import DiskFull

        if isinstance(exc, DiskFull):
            _drop_unwritten_stdout()
        return report(exc, json_errors=wants_json(argv))


def _interrupted(argv: list[str]) -> int:
    """Report the Ctrl-C or SIGTERM that ended the command. The exit code is decided: one that
    is still on its way (sent again by signals._dropped) is not reported a second time."""
    from . import signals

    if signals.resent():
        for signum in signals.SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
    return report(signals.interruption(), json_errors=wants_json(argv))


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
        to_devnull(sys.stdout)


def to_devnull(stream: TextIO) -> None:
    """What is left for `stream` (stdout or stderr, whose reader went away or whose device is
    full) goes nowhere, so that Python's flush at exit does not fail again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass
