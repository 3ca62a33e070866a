"""`mqcli put`, `get` and `browse` started without Typer or click (docs/design.md#command-line).

Importing Typer alone costs about three times `python -c pass`, more than a put's whole budget.
For these three commands, this module reads a command line that it understands whole: the root
options, the command's arguments and the options below, each written `--name VALUE`,
`--name=VALUE`, `-n VALUE` or as a flag, with values click would accept. It converts each value
as click and the Typer callbacks do (the same callbacks, from mqcli/values.py) and runs the
command's own code (mqcli/messaging.py) with the same Session, so the output, the errors and
the exit codes are the ones the Typer app gives.

`mqcli put --help` (get, browse) prints the help the Typer app prints, generated from it into
mqcli/help_text.py, when click would lay it out at that width.

Short options may be clustered as click takes them (`-qo jsonl`, `-qojsonl`, `-qp5`). Anything
else (another --help, an option it does not list, a value click would refuse, `--`) returns
None before anything has run, and mqcli/__main__.py hands
the command line to the Typer app, which says what is wrong. tests/test_fastpath.py walks the click tree of
each command against the tables below and runs a table of command lines through both paths.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from . import values

Convert = Callable[[str], Any]


class Opt(NamedTuple):
    """An option as this parser takes it: the parameter it fills, how its value is converted
    (None: a flag, True when given), and whether it may be repeated (a list)."""

    param: str
    convert: Convert | None
    multiple: bool = False


def _text(value: str) -> str:
    return value


def _int_range(low: int | None = None, high: int | None = None) -> Convert:
    """click's INT and IntRange(min, max), as Typer makes them of `min=`/`max=`: int() of the
    text, refused outside the bounds."""
    def convert(text: str) -> int:
        number = int(text)
        if (low is not None and number < low) or (high is not None and number > high):
            raise ValueError(f"{number} is out of range")
        return number
    return convert


def _then(first: Convert, callback: Callable[[Any], Any]) -> Convert:
    """A typed option with a Typer callback: the callback gets the converted value."""
    return lambda text: callback(first(text))


def _store_path(text: str) -> Path:
    """--store (mqcli/options.py _StorePath): any path but the empty one."""
    if not text:
        raise ValueError("an empty path")
    return Path(text)


_FLAG = None
_SHARED = {
    "--store": Opt("store", _store_path),
    "--output": Opt("output", values.output_mode), "-o": Opt("output", values.output_mode),
    "--quiet": Opt("quiet", _FLAG), "-q": Opt("quiet", _FLAG),
}
ROOT = {
    **_SHARED,
    "--allow-unsafe-permissions": Opt("allow_unsafe", _FLAG),
    "--allow-foreign-owner": Opt("allow_foreign", _FLAG),
}
_DELIMITER = {"--delimiter": Opt("delimiter", values.delimiter)}
_POSITIVE_ID = _then(_int_range(), values.positive_id)
_PRIORITY = Opt("priority", _int_range(0, 7))
_FILTERS = {
    "--msg-id": Opt("msg_id", _text),
    "--unique-id": Opt("unique_id", values.unique_id),
    "--correl-id": Opt("correl_id", _text),
    "--lookup-id": Opt("lookup_id", _text),
    "--priority": _PRIORITY,
    "--where": Opt("where", values.selector),
    # the shorthands: mqcli/shorthands.py makes them terms of the selector, as the command runs
    "--label": Opt("label", _text),
    "--prop": Opt("prop", _text, multiple=True),
    "--older-than": Opt("older_than", _text),
    "--newer-than": Opt("newer_than", _text),
    "--body-contains": Opt("body_contains", _text),
}


def _format(text: str) -> Any:
    from .template import option

    return option(text)


class Command(NamedTuple):
    arguments: tuple[str, ...]  # positional parameters, in order
    required: int               # how many of them must be given
    options: dict[str, Opt]
    fallback: frozenset[str]    # options of the command left to the Typer app


COMMANDS = {
    "put": Command(("queue", "body"), 1, {
        "--priority": _PRIORITY, "-p": _PRIORITY,
        "--correl-id": Opt("correl_id", _text),
        "--label": Opt("label", values.printable_label),
        "--prop": Opt("prop", _text, multiple=True),
        "--app-specific": Opt("app_specific", _then(_int_range(), values.app_specific)),
        "--ttl": Opt("ttl", _text),
        "--express": Opt("express", _FLAG),
        "--no-dead-letter": Opt("no_dead_letter", _FLAG),
        "--trace": Opt("trace", _FLAG),
        "--report-queue": Opt("report_queue", _text),
        "--confirm-id": Opt("confirm_id", values.id_or_auto),
        "--lease": Opt("lease", _text),
        "--tx": Opt("tx", _POSITIVE_ID),
        "--count": Opt("count", _int_range(1)), "-n": Opt("count", _int_range(1)),
        "--jsonl": Opt("jsonl", _text),
        "--new-ids": Opt("new_ids", _FLAG),
        "--lines": Opt("lines", _text),
        **_SHARED,
    }, frozenset({"--file", "-f"})),  # click checks that a file is readable, with its own words
    "get": Command(("queue",), 1, {
        "--wait": Opt("wait", _text), "-w": Opt("wait", _text),
        **_FILTERS,
        "--count": Opt("count", _int_range(1)), "-n": Opt("count", _int_range(1)),
        "--all": Opt("all_", _FLAG),
        "--confirm-id": Opt("confirm_id", values.id_or_auto),
        "--lock-id": Opt("lock_id", _POSITIVE_ID),
        "--lease": Opt("lease", _text),
        "--tx": Opt("tx", _POSITIVE_ID),
        "--follow": Opt("follow", _FLAG), "-f": Opt("follow", _FLAG),
        "--idle": Opt("idle", _text),
        "--format": Opt("template", _format),
        **_DELIMITER, **_SHARED,
    }, frozenset()),
    "browse": Command(("queue",), 1, {
        **_FILTERS,
        "--limit": Opt("limit", _int_range(1)), "--count": Opt("limit", _int_range(1)),
        "-n": Opt("limit", _int_range(1)),
        "--state": Opt("state", _text, multiple=True),
        "--lock": Opt("lock", _FLAG),
        "--lock-id": Opt("lock_id", values.id_or_auto),
        "--lease": Opt("lease", _text),
        "--follow": Opt("follow", _FLAG), "-f": Opt("follow", _FLAG),
        "--idle": Opt("idle", _text),
        "--from-start": Opt("from_start", _FLAG),
        "--format": Opt("template", _format),
        **_DELIMITER, **_SHARED,
    }, frozenset()),
}
# what mqcli/options.py's shared_options takes out of a command's options for the Session
SESSION = ("store", "output", "quiet", "delimiter")


class Parsed(NamedTuple):
    command: str
    root: dict[str, Any]
    given: dict[str, Any]  # the command's parameters given on the command line

    @property
    def output(self) -> str | None:
        """The -o the command runs with: its own, else the root's (as the Session takes them)."""
        output: str | None = self.given.get("output") or self.root.get("output")
        return output


class _Refused(Exception):
    """A command line this parser leaves to the Typer app."""


def parse(argv: list[str]) -> Parsed | None:
    """The command line, parsed as click would, or None for one to hand to the Typer app."""
    try:
        for arg in argv:
            arg.encode("utf-8")  # bytes that are not UTF-8: click's handling, and its errors
        at, root = _options(argv, 0, ROOT)
        if at == len(argv) or argv[at] not in COMMANDS:
            return None
        name = argv[at]
        command = COMMANDS[name]
        given: dict[str, Any] = {}
        arguments: list[str] = []
        at += 1
        while at < len(argv):
            at, found = _options(argv, at, command.options)
            for param, value in found.items():
                if isinstance(value, list) and isinstance(given.get(param), list):
                    given[param] += value
                else:
                    given[param] = value
            if at < len(argv):  # an argument: click takes them anywhere between the options
                arguments.append(argv[at])
                at += 1
        if not command.required <= len(arguments) <= len(command.arguments):
            return None
        given.update(zip(command.arguments, arguments))
        return Parsed(name, root, given)
    except Exception:  # _Refused, bytes that are not UTF-8, a value click or a callback refuses
        return None


def _options(argv: list[str], at: int, table: dict[str, Opt]) -> tuple[int, dict[str, Any]]:
    """The options from argv[at] on, up to the first argument (a word not starting with `-`,
    or `-` alone); (where it stopped, parameter -> value)."""
    found: dict[str, Any] = {}
    while at < len(argv):
        arg = argv[at]
        if arg == "-" or not arg.startswith("-"):
            break
        if arg[1] != "-" and len(arg) > 2:  # a cluster of short options: -qo jsonl, -qojsonl, -p5
            at = _cluster(argv, at, table, found)
            continue
        name, eq, attached = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        opt = table.get(name)
        if opt is None:  # --help, --version, --traceback, --, an unknown option...
            raise _Refused(arg)
        if opt.convert is None:
            if eq:  # click: "Option '--express' does not take a value."
                raise _Refused(arg)
            value: Any = True
        else:
            if not eq:
                at += 1
                if at == len(argv):  # click: "Option '--label' requires an argument."
                    raise _Refused(arg)
                attached = argv[at]
            value = opt.convert(attached)
        _take(found, opt, value)
        at += 1
    return at, found


def _cluster(argv: list[str], at: int, table: dict[str, Opt], found: dict[str, Any]) -> int:
    """The short options of the cluster argv[at], as click reads one: each letter an option;
    the first that takes a value takes the rest of the word, or the next word if none is
    left, and ends the cluster. Returns where the next word is."""
    arg = argv[at]
    for i in range(1, len(arg)):
        opt = table.get("-" + arg[i])
        if opt is None:  # -h, a letter no option has, or one left to the Typer app (-f)
            raise _Refused(arg)
        if opt.convert is None:
            _take(found, opt, True)
            continue
        value = arg[i + 1:]
        if not value:
            at += 1
            if at == len(argv):  # click: "Option '-o' requires an argument."
                raise _Refused(arg)
            value = argv[at]
        _take(found, opt, opt.convert(value))
        break
    return at + 1


def _take(found: dict[str, Any], opt: Opt, value: Any) -> None:
    if opt.multiple:
        found.setdefault(opt.param, []).append(value)
    else:
        found[opt.param] = value  # given twice: the last one, as click takes it


def _help(command: str) -> Callable[[], int] | None:
    """`mqcli put --help`: the text the Typer app prints (mqcli/help_text.py, generated from it),
    where click would lay it out at the width it was made for and write it as UTF-8."""
    import shutil

    from .help_text import HELP, WIDTH

    if max(min(shutil.get_terminal_size().columns, 80) - 2, 50) != WIDTH:  # click's HelpFormatter
        return None
    if (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "") != "utf8":
        return None

    def show() -> int:
        sys.stdout.write(HELP[command])
        sys.stdout.flush()
        return 0

    return lambda: _as_typer(show, [command, "--help"])


def prepared(argv: list[str]) -> Callable[[], int] | None:
    """The command line, ready to run (what it returns is its exit code) if this parser takes
    it; None to hand it to the Typer app. Imports what the command needs, and nothing runs yet."""
    if len(argv) == 2 and argv[0] in COMMANDS and argv[1] in ("--help", "-h"):
        return _help(argv[0])
    parsed = parse(argv)
    if parsed is None:
        return None
    from . import messaging
    from .session import Session, Settings

    root, given = parsed.root, dict(parsed.given)
    base = Settings(store=root.get("store"), output=root.get("output") or "text", quiet=root.get("quiet", False),
                    allow_unsafe=root.get("allow_unsafe", False), allow_foreign=root.get("allow_foreign", False))
    shared = {name: given.pop(name) for name in SESSION if name in given}
    body: Callable[..., None] = getattr(messaging, parsed.command)

    def command() -> int:
        s = Session(base, shared.get("store"), shared.get("output"), shared.get("quiet", False),
                    delimiter=shared.get("delimiter", b"\n"))
        body(s, **given)
        return 0

    return lambda: _as_typer(command, argv)


def _as_typer(command: Callable[[], int], argv: list[str]) -> int:
    """Run `command` as the Typer app runs a command: what Typer's main does with an EOFError
    and a broken pipe, then mqcli's own mapping of exceptions to exit codes (exits.outcome)."""
    from .exits import outcome, to_devnull

    def typer_main() -> int:
        try:
            return command()
        except EOFError:  # a new line, then as Ctrl-C
            sys.stderr.write("\n")
            raise KeyboardInterrupt from None
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            # exit 1, and no second error when Python flushes the streams at exit
            for stream in (sys.stdout, sys.stderr):
                to_devnull(stream)
            return 1

    return outcome(typer_main, argv)
