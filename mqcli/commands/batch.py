"""`mqcli batch [FILE|-]`: mqcli commands one per line, run in one process against one open
store, as `runmqsc` runs MQSC commands. A script that would start a process per command (about
a tenth of a second each) pays for one."""

from __future__ import annotations

import io
import json
import shlex
import sys
from typing import Annotated, Any

import typer

from .. import inputs
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
    as in the shell; `#` starts a comment, blank lines are skipped. The batch's --store and -q
    apply to every line. In text each command prints what it prints; with -o jsonl each prints
    one object {"line", "command", "exit", "result" | "output", "error"}, the command's own
    JSON output as "result". The batch stops at the first command that fails and exits with its
    code, unless --keep-going; Ctrl-C stops it at once (130).

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
    stream = inputs.open_text(file)
    first_failure: tuple[int, int, str] | None = None
    from ..app import click_command, run  # the app is loaded already: batch runs in it
    from ..fastpath import prepared

    tree = click_command()  # lazy: a command is built when a line first runs it

    def run_line(argv: list[str]) -> int:
        """put, get and browse as a process runs them (mqcli/fastpath.py: no click parsing, a
        tenth of the time a line), everything else through the Typer app."""
        fast = prepared(argv)
        return fast() if fast is not None else run(argv, tree)

    with shared_stores():
        for number, text in inputs.command_lines(stream):
            try:
                argv = shlex.split(text, comments=True)
            except ValueError as exc:
                code = _report(s, number, text, ExitCode.USAGE, f"cannot split the line: {exc}", as_json)
            else:
                if not argv:
                    continue
                if argv[0] == "mqcli":
                    argv = argv[1:]
                if "batch" in argv[:1]:
                    code = _report(s, number, text, ExitCode.USAGE, "a batch cannot run a batch", as_json)
                elif as_json:
                    code = _captured(s, number, text, prefix + argv, run_line)
                else:
                    code = run_line(prefix + argv)
            if code in (ExitCode.INTERRUPTED, ExitCode.TERMINATED):
                raise typer.Exit(code)
            if code and not first_failure:
                first_failure = (int(code), number, text.strip())
            if code and not keep_going:
                break
    if first_failure:
        code, number, text = first_failure
        raise Failed(code, Status.BATCH, f"batch: line {number} failed (exit {code}): {text}")


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
