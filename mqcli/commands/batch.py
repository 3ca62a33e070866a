"""`mqcli batch [FILE|-]`: mqcli commands one per line, run in one process against one open
store, as `runmqsc` runs MQSC commands. A script that would start a process per command (about
a tenth of a second each) pays for one."""

from __future__ import annotations

import io
import json
import signal
import sys
import threading
from typing import Annotated, Any

import typer

from .. import inputs, shell_words, signals
from ..exits import ExitCode, Failed, Status
from ..options import Session, shared_options, shared_stores


@shared_options
def batch(
    s: Session,
    file: Annotated[str, typer.Argument(help="The commands, one per line; - (the default) reads stdin.")] = "-",
    keep_going: Annotated[bool, typer.Option("--keep-going", "-k", help="Run every line even after one fails; exit with the first failure's code.")] = False,
) -> None:
    """Run mqcli commands from a file, one per line, in one process against one open store.

    Each line is an mqcli command line without `mqcli` (a leading `mqcli` is allowed), quoted
    as in the shell; a `#` that begins a word starts a comment, blank lines are skipped. When
    the batch reads stdin, its commands cannot (`put q -`). The batch's --store and -q
    apply to every line. In text each command prints what it prints; with -o jsonl each prints
    one object {"line", "command", "exit", "result" | "output", "error"}, the command's own
    JSON output as "result". The batch stops at the first command that fails and exits with its
    code, unless --keep-going; Ctrl-C stops it at once (130), as does a closed output (141). With
    -o jsonl a destructive get is refused (its messages would be removed before the line's
    object is written): get two-phase (--confirm-id auto) or in a transaction, or run the batch in text.

    \b
    Examples:
      printf 'queue create orders\\nput orders "first order" --priority 5\\n' | mqcli batch
      mqcli batch setup.mqcli --keep-going -o jsonl
    """
    prefix: list[str] = []
    if s.given_store is not None:
        prefix += ["--store", str(s.given_store)]
    if s.out.quiet:
        prefix.append("-q")
    as_json = s.out.mode in ("json", "jsonl")
    if as_json:
        prefix += ["-o", "json"]
    first_failure: tuple[int, int, str] | None = None
    from ..app import click_command, run  # the app is loaded already: batch runs in it
    from ..fastpath import prepared

    tree = click_command()  # lazy: a command is built when a line first runs it

    def run_line(argv: list[str]) -> int:
        """put, get and browse as a process runs them (mqcli/fastpath.py: no click parsing, a
        tenth of the time a line), everything else through the Typer app."""
        fast = prepared(argv)
        return fast() if fast is not None else run(argv, tree)

    with inputs.opened(file) as stream, shared_stores(), _CtrlC(), \
            inputs.stdin_read_by("this batch, for its commands" if file == "-" else None):
        for number, text in inputs.command_lines(stream):
            stops = signals.stops()
            try:
                argv = shell_words.split(text)
            except ValueError as exc:
                code = _report(s, number, text, ExitCode.USAGE, f"cannot split the line: {exc}", as_json)
            else:
                if not argv:
                    continue
                if argv[0] == "mqcli":
                    argv = argv[1:]
                refused = _refused(argv, as_json)
                if refused:
                    code = _report(s, number, text, ExitCode.USAGE, refused, as_json)
                elif as_json:
                    code = _captured(s, number, text, prefix + argv, run_line)
                else:
                    code = run_line(prefix + argv)
            if signals.stops() != stops:  # a command that ended at Ctrl-C or SIGTERM with exit 0 ends the batch too
                code = ExitCode.TERMINATED if signals.last_stop() == signal.SIGTERM else ExitCode.INTERRUPTED
            if code in (ExitCode.INTERRUPTED, ExitCode.TERMINATED, ExitCode.OUTPUT_CLOSED):
                raise typer.Exit(code)  # at once, --keep-going or not: nobody reads what follows
            if code and not first_failure:
                first_failure = (int(code), number, text.strip())
            if code and not keep_going:
                break
    if first_failure:
        code, number, text = first_failure
        raise Failed(code, Status.BATCH, f"batch: line {number} failed (exit {code}): {text}")


class _CtrlC:
    """Notes a Ctrl-C during the batch, then acts as Python does (KeyboardInterrupt): a
    command that takes Ctrl-C as its normal end (`get --follow`, `stats --watch`) exits 0, and
    the batch stops there rather than running the next line."""

    def __init__(self) -> None:
        self._saved: Any = None

    def _note(self, signum: int, frame: object) -> None:
        signals.stopped_by(signum)
        raise KeyboardInterrupt

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._saved = signal.signal(signal.SIGINT, self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            signal.signal(signal.SIGINT, self._saved)


_GLOBAL_WITH_VALUE = frozenset(("--store", "-o", "--output", "--delimiter"))


def _command(argv: list[str]) -> list[str]:
    """The command's words, after the global options a line may give before it."""
    at = 0
    while at < len(argv) and argv[at].startswith("-"):
        at += 2 if argv[at] in _GLOBAL_WITH_VALUE else 1
    return argv[at:]


def _refused(argv: list[str], as_json: bool) -> str | None:
    """Why a line may not run in this batch, or None."""
    words = _command(argv)
    if words[:1] == ["batch"]:
        return "a batch cannot run a batch"
    if as_json and words[:1] == ["get"] and not any(a.split("=")[0] in ("--confirm-id", "--tx") for a in words):
        # its messages are removed when the get commits, and its output is written after, in
        # this line's object: a closed or stalled output would lose them (a text batch writes
        # them as a get does, removing only what was written)
        return "a destructive get cannot run in a -o jsonl batch (its messages could be lost with the output): " \
               "run the batch in text, or get two-phase (--confirm-id auto, then confirm) or in a transaction (--tx)"
    return None


def _captured(s: Any, number: int, text: str, argv: list[str], run: Any) -> int:
    """Run one command with its stdout and stderr captured; print its result object."""
    out, err = io.BytesIO(), io.BytesIO()
    saved = sys.stdout, sys.stderr
    wrappers = (io.TextIOWrapper(out, encoding="utf-8", write_through=True),
                io.TextIOWrapper(err, encoding="utf-8", write_through=True))
    sys.stdout, sys.stderr = wrappers
    try:
        code = run(argv)
    finally:
        sys.stdout, sys.stderr = saved
        for wrapper in wrappers:
            wrapper.flush()
            wrapper.detach()  # a dropped wrapper would close the buffer it wraps
    record: dict[str, Any] = {"line": number, "command": text.strip(), "exit": int(code)}
    data = out.getvalue().decode("utf-8", "replace")
    if data.strip():
        try:
            record["result"] = json.loads(data)
        except ValueError:
            record["output"] = data
    problem = err.getvalue().decode("utf-8", "replace").strip()
    if problem:
        try:
            record["error"] = json.loads(problem.splitlines()[-1])["error"]
        except (ValueError, KeyError, TypeError):
            record["error"] = problem
    s.out.document(record)
    return int(code)


def _report(s: Any, number: int, text: str, code: int, why: str, as_json: bool) -> int:
    if as_json:
        s.out.document({"line": number, "command": text.strip(), "exit": code, "error": why})
    else:
        s.out.note(f"mqcli: error: line {number}: {why} [USAGE]")
    return code


def register(app: typer.Typer) -> None:
    app.command()(batch)
