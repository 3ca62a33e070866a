"""`mqcli batch [FILE|-]`: mqcli commands one per line, run in one process against one open
store, as `runmqsc` runs MQSC commands. A script that would start a process per command (about
a tenth of a second each) pays for one."""

from __future__ import annotations

import io
import json
import signal
import sys
import threading
from contextlib import nullcontext
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from store.errors import BadData

from .. import inputs, shell_words, signals
from ..signals import Deferral
from ..exits import ExitCode, Failed, Reported, Status, UsageError, errors_as_json, output_mode, report, to_devnull
from ..options import Session, shared_options, shared_stores
from ..render import json_line

if TYPE_CHECKING:
    from ..render import DocumentStream


@shared_options
def batch(
    s: Session,
    file: Annotated[str, typer.Argument(help="The commands, one per line; - (the default) reads stdin.")] = "-",
    keep_going: Annotated[bool, typer.Option("--keep-going", "-k", help="Run every line even after one fails; exit with the first failure's code.")] = False,
) -> None:
    """Run mqcli commands from a file, one per line, in one process against one open store.

    Each line is an mqcli command line without `mqcli` (a leading `mqcli` is allowed), quoted
    as in the shell; a `#` that begins a word starts a comment, a line that ends in a backslash
    goes on on the next (up to 100 lines), blank lines are skipped. When
    the batch reads stdin, its commands cannot (`put q -`). The batch's --store and -q
    apply to every line, and so does -o body or hex. In text each command prints what it prints;
    with -o jsonl each line gives one object {"line", "command", "exit", "result" | "output",
    "error", "notes"}: the command's JSON output as "result" (its -o jsonl lines as a list),
    other output as "output", its error as the object `-o json` prints, what else it said on
    stderr as "notes"; -o json gives the same objects as one array. The batch stops at the first command that fails and exits with its
    code, unless --keep-going; Ctrl-C stops it at once (130), as does a closed output (141). With
    -o jsonl a get's messages go out in its line's object as they are removed (its -o must
    be json or jsonl there), and a consume line is refused (its commands would write between
    the objects).

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
    # the root's switches for a store others may write to or another user owns hold for every line
    prefix += ["--allow-unsafe-permissions"] * s.allow_unsafe + ["--allow-foreign-owner"] * s.allow_foreign
    as_json = s.out.mode in ("json", "jsonl")
    if as_json:
        prefix += ["-o", "json"]
    elif s.out.mode != "text":
        prefix += ["-o", s.out.mode]
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
            inputs.stdin_read_by("this batch, for its commands" if file == "-" else None), \
            (s.out.documents() if as_json else nullcontext()) as results:
        for number, text in _continued(inputs.command_lines(stream)):
            stops = signals.stops()
            try:
                argv = shell_words.split(text)
            except ValueError as exc:
                code = _report(s, results, number, text, f"cannot split the line: {exc}")
            else:
                if not argv:
                    continue
                if argv[0] == "mqcli":
                    argv = argv[1:]
                # a get's -o as it reads it (its line's object is streamed: _ResultStream), read once
                get_output = _get_output(prefix + argv) if as_json and _is_get(argv) else None
                refused = _refused(argv, get_output, as_json)
                if refused:
                    code = _report(s, results, number, text, refused)
                elif results is not None:
                    code = _captured(results, number, text, prefix + argv, run_line, get_output)
                else:
                    code = run_line(prefix + argv)
                    if code and keep_going:  # the command's error does not say which line it was
                        s.out.note(f"mqcli: batch: line {number} failed (exit {code}): {_shown(text)}")
            own = code
            if signals.stops() != stops:  # a command that ended at Ctrl-C or SIGTERM with exit 0 ends the batch too
                code = ExitCode.TERMINATED if signals.last_stop() == signal.SIGTERM else ExitCode.INTERRUPTED
            if code in (ExitCode.INTERRUPTED, ExitCode.TERMINATED, ExitCode.OUTPUT_CLOSED):
                # at once, --keep-going or not: nobody reads what follows
                if code == own:
                    raise Reported(code)  # the line said so itself (on stderr, or in its object)
                raise typer.Exit(code)
            if code and not first_failure:
                first_failure = (int(code), number, _shown(text))
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


def _command(argv: list[str]) -> list[str]:
    """The command's words, after the root options a line may give before it, read as click
    reads them: an option of mqcli/fastpath.py's ROOT that takes a value takes the next word;
    a cluster of short options (`-qo jsonl`, `-qojsonl`) ends at the first letter that takes a
    value, which takes the rest of the word or the next one. Lenient: any other word that
    starts with a dash is passed over (`--traceback`, `--`), its errors left to the command."""
    from ..fastpath import ROOT

    at = 0
    while at < len(argv) and argv[at].startswith("-") and argv[at] != "-":
        arg = argv[at]
        at += 1
        if arg.startswith("--"):
            opt = ROOT.get(arg)
            if opt is not None and opt.convert is not None:
                at += 1
            continue
        for i in range(1, len(arg)):
            opt = ROOT.get("-" + arg[i])
            if opt is not None and opt.convert is not None:
                at += i == len(arg) - 1  # its value is the next word, else the rest of this one
                break
    return argv[at:]


def _refused(argv: list[str], get_output: str | None, as_json: bool) -> str | None:
    """Why a line may not run in this batch (a JSON one if `as_json`), or None. `get_output`:
    a get's -o in a JSON batch (_get_output), None for any other line."""
    words = _command(argv)
    if words[:1] == ["batch"]:
        return "a batch cannot run a batch"
    if as_json and words[:1] == ["consume"]:
        # its commands write to the batch's own stdout and stderr (they are processes), between
        # the line objects, where a JSON reader takes them for broken JSON
        return "consume runs commands whose output would go between the line objects of a -o json or " \
               "jsonl batch: run it in a text batch, or on its own"
    if get_output is not None:
        # a get's messages go out in the line's object as they come (_ResultStream), which
        # only JSON can be part of: its -o as the command reads it
        if get_output is _UNREAD:
            return "a get in a -o json or jsonl batch is read by mqcli's own parser, which does not take this " \
                   "line: write it without -- or --help, with values get takes; or run the batch in text"
        if get_output not in ("json", "jsonl"):
            return f"a get in a -o json or jsonl batch writes JSON (its messages go out in the line's " \
                   f"object as they are removed): drop -o {get_output}, or run the batch in text"
    return None


_UNREAD = "unread"  # _get_output: a line mqcli/fastpath.py does not take


def _get_output(argv: list[str]) -> str | None:
    """The -o of a get line (with the batch's own options first) as the command reads it
    (mqcli/fastpath.py), or _UNREAD."""
    from ..fastpath import parse

    parsed = parse(argv)
    return _UNREAD if parsed is None else parsed.output


def _is_get(argv: list[str]) -> bool:
    """Whether a line is a get. In a JSON batch every get's output is streamed (_ResultStream):
    a destructive get removes only what it has written, and telling one apart by its options
    would have to read them exactly as the command does (`--label --tx` gives a label)."""
    return _command(argv)[:1] == ["get"]


_MOST_LINES = 100  # lines of one continued command


def _continued(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """The command lines, a line that ends in a backslash joined with the next one (the
    backslash and the line end left out, as the shell does; not a backslash in a comment or
    in single quotes), numbered by its first line. A command so continued is no longer than
    one line may be (inputs.COMMAND_LINE_CHARS)."""
    first, size, after = 0, 0, shell_words.NEW_WORD
    parts: list[str] = []
    for number, text in lines:
        if not parts:
            first, after = number, shell_words.NEW_WORD
        goes_on = shell_words.continues(text, after)
        continues = goes_on is not None
        if goes_on is not None:
            after = goes_on
        parts.append(text[:-1] if continues else text)
        size += len(parts[-1])
        if size > inputs.COMMAND_LINE_CHARS or len(parts) > _MOST_LINES:
            raise BadData(f"the command that starts on line {first} is longer than "
                          f"{inputs.COMMAND_LINE_CHARS} characters or {_MOST_LINES} lines")
        if not continues:
            yield first, "".join(parts)
            parts, size = [], 0
    if parts:  # the last line ended in a backslash: the command ends there
        yield first, "".join(parts)


def _captured(results: DocumentStream, number: int, text: str, argv: list[str], run: Any,
              get_output: str | None) -> int:
    """Run one command with its stdout and stderr captured; write its result object (a
    get's, whose -o is `get_output`, as it writes: _ResultStream)."""
    out = _ResultStream(results, number, text, get_output == "jsonl") if get_output is not None else io.BytesIO()
    err = io.BytesIO()
    saved = sys.stdout, sys.stderr
    wrappers = (io.TextIOWrapper(out, encoding="utf-8", write_through=True),
                io.TextIOWrapper(err, encoding="utf-8", write_through=True))
    sys.stdout, sys.stderr = wrappers
    gate = Deferral()
    late: KeyboardInterrupt | None = None
    try:
        with errors_as_json():  # its error is the line's "error", whatever its -o
            code = run(argv)
    except KeyboardInterrupt as exc:  # it came as the command returned: what it printed is whole
        late = exc
        code = ExitCode.TERMINATED if isinstance(exc, signals.Terminated) else ExitCode.INTERRUPTED
    finally:
        gate.hold()  # from here a signal waits until the line's object is written
        sys.stdout, sys.stderr = saved
        for wrapper in wrappers:
            wrapper.flush()
            wrapper.detach()  # a dropped wrapper would close the buffer it wraps
        if results.output.torn and results.output.out is sys.stdout.buffer:
            to_devnull(sys.stdout)  # a streamed get's write was cut: the exit's flush must not block
    try:
        if isinstance(out, _ResultStream) and out.started:
            if not results.output.torn:
                with gate.writing(lambda: _stalled_note(results, number, code, text)):
                    out.finish(_said(err.getvalue(), late, {"exit": int(code)}))
        else:
            _write_record(results, number, text, int(code), out.getvalue(), err.getvalue(), argv, late, gate)
    finally:
        gate.release()
    return int(code)


class _ResultStream(io.BytesIO):
    """A get's stdout in a JSON batch. A destructive get removes only what it has written
    (docs/design.md#dequeue), so its output cannot wait in memory for the line's object:
    each write goes out at once as the next part of the object, its "result" ({"line",
    "command", "result", then "exit" and the rest once the command ends: `finish`). The
    command's -o json loses its line ends (JSON has none inside a document; a jsonl line
    must be whole), its -o jsonl lines become the elements of a list. A write cut short
    counts as not written at all (`written` 0, as render.write_all reads it), so the get
    keeps every message of that delivery."""

    def __init__(self, results: DocumentStream, number: int, text: str, jsonl: bool) -> None:
        super().__init__()
        self._results, self._jsonl = results, jsonl
        self._head = json_line({"line": number, "command": text.strip()})[:-1] + b',"result":' + (b"[" if jsonl else b"")
        self.started = False
        self._line_ended = False  # jsonl: a line was written whole; the next one follows a comma
        self._cut = False  # a write was cut short: the get is ending

    def write(self, data: Any) -> int:
        data = bytes(data)
        if not data:
            return 0
        head = b"" if self.started else self._results.start() + self._head
        self.started = True
        if self._jsonl:
            lead = b"," if self._line_ended else b""
            ended = data.endswith(b"\n")
            shown = (data[:-1] if ended else data).replace(b"\n", b",")  # inner line ends: one byte each
        else:
            lead, ended, shown = b"", False, data.replace(b"\n", b"")
        if self._cut:  # the end of the get's array after the failure: not waiting for a stalled reader
            self._results.output.write_unless_stalled(head + lead + shown)
            return len(data)
        try:
            self._results.output._write(head + lead + shown)
        except BaseException as exc:
            # none of this write counts as delivered: the line's object is torn, and a JSON
            # reader takes nothing from a torn document, so the get keeps these messages
            self._cut = True
            exc.written = 0  # type: ignore[attr-defined]
            raise
        if self._jsonl:
            self._line_ended = ended
        return len(data)

    def finish(self, rest: dict[str, Any]) -> None:
        """The end of the line's object: `rest` ({"exit", "error", "notes"}) after the result."""
        self._results.output._write((b"]" if self._jsonl else b"") + b"," + json_line(rest)[1:]
                                    + self._results.end())


def _stalled_note(results: DocumentStream, number: int, code: int, text: str) -> None:
    results.output.note(f"mqcli: batch: line {number} ran (exit {code}); the output "
                        f"stalled, so its object was not written: {_shown(text)}")


def _write_record(results: DocumentStream, number: int, text: str, code: int, stdout: bytes, stderr: bytes,
                  argv: list[str], late: KeyboardInterrupt | None, gate: Deferral) -> None:
    """The line's object from what the command printed. A signal that came meanwhile waits for
    it, unless the output stalled (Deferral.writing): then stderr says the line ran."""
    record: dict[str, Any] = {"line": number, "command": text.strip(), "exit": code}
    data = stdout.decode("utf-8", "replace")
    if data.strip():
        result = _json_output(data, jsonl=output_mode(argv) == "jsonl")
        if result is _NOT_JSON:
            record["output"] = data
        else:
            record["result"] = result
    with gate.writing(lambda: _stalled_note(results, number, code, text)):
        results.write(_said(stderr, late, record))


def _said(stderr: bytes, late: KeyboardInterrupt | None, record: dict[str, Any]) -> dict[str, Any]:
    """`record` with what the command said on stderr: its error object as "error", other
    lines as "notes"; an interruption that came as it returned is its error."""
    notes = []
    for line in stderr.decode("utf-8", "replace").splitlines():
        error = _json_output(line)
        if isinstance(error, dict) and isinstance(error.get("error"), dict):
            record["error"] = error["error"]
        elif line.strip():
            notes.append(line)
    if notes:
        record["notes"] = notes
    if late is not None:
        record["error"] = _error_object(late)
    return record


_NOT_JSON = object()


def _json_output(data: str, jsonl: bool = False) -> Any:
    """A command's JSON output: one document, or (`jsonl`) its lines as a list; else _NOT_JSON."""
    try:
        return [json.loads(line) for line in data.splitlines() if line.strip()] if jsonl else json.loads(data)
    except ValueError:
        return _NOT_JSON


def _error_object(exc: BaseException) -> Any:
    """The error object `-o json` prints for `exc` (exits.report decides it)."""
    line = io.StringIO()
    report(exc, json_errors=True, stream=line)
    return json.loads(line.getvalue())["error"]


def _shown(text: str, most: int = 200) -> str:
    """A command line as a message quotes it: a long one cut short."""
    text = text.strip()
    return text if len(text) <= most else text[:most] + "…"


def _report(s: Any, results: DocumentStream | None, number: int, text: str, why: str) -> int:
    """A line the batch itself refuses: a usage error (exit 2), in the form a command's is."""
    if results is not None:
        results.write({"line": number, "command": text.strip(), "exit": int(ExitCode.USAGE),
                       "error": _error_object(UsageError(why))})
    else:
        s.out.note(f"mqcli: error: line {number}: {why} [USAGE]")
    return int(ExitCode.USAGE)


def register(app: typer.Typer) -> None:
    app.command()(batch)
