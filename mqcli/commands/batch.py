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

from ..exits import ExitCode, Failed, Status, UsageError
from ..options import OutputOpt, QuietOpt, StoreOpt, session, settings, shared_stores

MAX_LINE = 1 << 20  # a command line longer than 1 MiB is refused (exit 12), not read whole


def batch(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(help="The commands, one per line; - (the default) reads stdin.")] = "-",
    keep_going: Annotated[bool, typer.Option("--keep-going", "-k", help="Run every line even after one fails; exit with the first failure's code.")] = False,
    store: StoreOpt = None, output: OutputOpt = None, quiet: QuietOpt = False,
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
    s = session(ctx, store, output, quiet)
    base = settings(ctx)
    prefix: list[str] = []
    if store is not None or base.store is not None:
        prefix += ["--store", str(store or base.store)]
    if quiet or base.quiet:
        prefix.append("-q")
    as_json = s.out.mode in ("json", "jsonl")
    if as_json:
        prefix += ["-o", "json"]
    stream = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8") if file == "-" else _open(file)
    first_failure: tuple[int, int, str] | None = None
    from ..app import run  # the app is loaded already: batch runs in it

    with shared_stores():
        for number, text in _lines(stream):
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
                    code = _captured(s, number, text, prefix + argv, run)
                else:
                    code = run(prefix + argv)
            if code in (ExitCode.INTERRUPTED, ExitCode.TERMINATED):
                raise typer.Exit(code)
            if code and not first_failure:
                first_failure = (int(code), number, text.strip())
            if code and not keep_going:
                break
    if first_failure:
        code, number, text = first_failure
        raise Failed(code, Status.BATCH, f"batch: line {number} failed (exit {code}): {text}")


def _open(path: str) -> io.TextIOBase:
    try:
        return open(path, encoding="utf-8", errors="strict")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def _lines(stream: Any) -> Any:
    """(line number, text) of each line, each read with a bound."""
    number = 0
    while True:
        try:
            text = stream.readline(MAX_LINE + 1)
        except UnicodeDecodeError as exc:
            from store.errors import BadData
            raise BadData(f"line {number + 1} is not UTF-8 text: {exc.reason}") from None
        if not text:
            return
        number += 1
        if len(text) > MAX_LINE:
            from store.errors import BadData
            raise BadData(f"line {number} is longer than {MAX_LINE:,} characters")
        yield number, text.rstrip("\n")


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
