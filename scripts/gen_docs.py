#!/usr/bin/env python3
"""Generate the shell completions (completions/) and man pages (man/) from the mqcli app.

    python scripts/gen_docs.py            write every generated file (and remove stale ones)
    python scripts/gen_docs.py --check    change nothing; exit 1 naming each file that would change

Everything comes from one walk of the click command tree that Typer builds from `mqcli.app.app`
(`typer.main.get_command`): commands in the order `mqcli --help` lists them, each option with
its names, metavar, help (with click's `[default: …]` notes), choices and whether it takes a
value. Nothing else is read, so a new command or option reaches the completions and man pages
on the next run, and tests/test_generated_docs.py fails until that run is committed.

Completions are static scripts, not click's `_MQCLI_COMPLETE=bash_source` callbacks. Completing
then never starts Python or opens a store: a TAB costs a few shell function calls instead of an
interpreter start and the import of typer, rich and the store (about a quarter of a second),
the scripts work where mqcli is installed but not on the completing shell's PATH, and they can
be read and reviewed like any other file. What they cannot do is complete values that live in a
store (queue names, msg ids); option values are completed from click Choices or from a metavar
that lists the values (`text|json|jsonl|body`), and file names where the parameter is a path or
its metavar names a FILE.

Man pages are plain man(7) troff, no tbl or other preprocessor, and must render with
`groff -man -ww -z` silently. Text from help strings is escaped: backslashes (msg ids hold
`\\`), a leading `.` or `'`, hyphens of option names and command lines as `\\-`, and non-ASCII
characters as `\\[uXXXX]`. A help paragraph that click marks with `\\b` stays a literal
(.nf/.fi) block; a `\\b` block headed "Example:" or "Examples:" goes to the page's EXAMPLES
section (where man readers look for it) instead of being repeated in DESCRIPTION.

Output is deterministic: no dates, no absolute paths, the version only from mqcli.__version__.
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the checkout's mqcli, whatever is installed

import click  # noqa: E402
import typer  # noqa: E402

PROG = "mqcli"
GENERATED_BY = "scripts/gen_docs.py"
REGENERATE = "python scripts/gen_docs.py"


# ---- the command tree ------------------------------------------------------------------

@dataclass(frozen=True)
class Opt:
    names: tuple[str, ...]          # short names first, as click orders them: ("-o", "--output")
    secondary: tuple[str, ...]      # the off switch of a --x/--no-x flag
    metavar: str | None             # None for a flag
    help: str                       # the help text alone
    help_full: str                  # with click's notes, as --help shows it ([default: 3])
    choices: tuple[str, ...]
    complete: str                   # "file", "dir" or "" (nothing to offer)
    multiple: bool

    @property
    def takes_value(self) -> bool:
        return self.metavar is not None

    @property
    def all_names(self) -> tuple[str, ...]:
        return self.names + self.secondary


@dataclass(frozen=True)
class Arg:
    metavar: str                    # as in the usage line: QUEUE, [BODY], [QUEUES]..., FILE|-
    name: str                       # QUEUE, BODY, QUEUES, FILE|-
    help: str
    required: bool
    variadic: bool
    complete: str


@dataclass
class Cmd:
    path: tuple[str, ...]           # () is mqcli itself
    help: str                       # cleaned help text (click's \b markers kept)
    summary: str                    # the first sentence
    usage: tuple[str, ...]          # click's usage pieces after the command path
    options: list[Opt]
    arguments: list[Arg]
    commands: list[Cmd] = field(default_factory=list)
    is_group: bool = False

    @property
    def name(self) -> str:
        return " ".join((PROG,) + self.path)

    @property
    def page(self) -> str:
        return "-".join((PROG,) + self.path)

    def walk(self) -> list[Cmd]:
        out = [self]
        for sub in self.commands:
            out.extend(sub.walk())
        return out


_VALUE_LIST = re.compile(r"^[a-z0-9_.-]+(\|[a-z0-9_.-]+)+$")


def _completion(param: click.Parameter, metavar: str | None) -> tuple[tuple[str, ...], str]:
    """(choices, "file"|"dir"|"") for a parameter's value."""
    if isinstance(param.type, click.Choice):
        return tuple(str(c) for c in param.type.choices), ""
    if metavar and _VALUE_LIST.match(metavar):
        return tuple(metavar.split("|")), ""
    if isinstance(param.type, click.Path):
        return (), "file" if param.type.file_okay else "dir"
    if metavar and "FILE" in metavar:
        return (), "file"
    return (), ""


def _argument_help(command: click.Command) -> dict[str, str]:
    """Argument help from the Typer declarations.

    click 8.5's Parameter.__init__ sets `help`, overwriting what TyperArgument stored before
    calling it, so `param.help` is None for every argument (and `--help` shows none); the
    declared help is still on the typer.Argument() in the callback's signature.
    """
    from typer.models import ArgumentInfo
    from typer.utils import get_params_from_function

    if command.callback is None:
        return {}
    found = {}
    for name, meta in get_params_from_function(inspect.unwrap(command.callback)).items():
        if isinstance(meta.default, ArgumentInfo) and meta.default.help:
            found[name] = meta.default.help
    return found


def _clean(text: str | None) -> str:
    return inspect.cleandoc(text or "").partition("\f")[0].strip()


def _build(command: click.Command, ctx: click.Context, path: tuple[str, ...]) -> Cmd:
    options: list[Opt] = []
    arguments: list[Arg] = []
    declared = _argument_help(command)
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if isinstance(param, click.Option):
            metavar = None if param.is_flag or param.count else param.make_metavar(ctx)
            choices, complete = _completion(param, metavar)
            record = param.get_help_record(ctx)
            options.append(Opt(
                names=tuple(sorted(param.opts, key=lambda n: n.startswith("--"))),  # shorts first
                secondary=tuple(param.secondary_opts),
                metavar=metavar,
                help=_clean(param.help),
                help_full=_clean(record[1] if record else param.help),
                choices=choices,
                complete=complete,
                multiple=param.multiple or bool(param.count),
            ))
        elif isinstance(param, click.Argument):
            metavar = param.make_metavar(ctx)
            name = param.metavar or param.name.upper()
            choices, complete = _completion(param, name)
            arguments.append(Arg(
                metavar=metavar, name=name,
                help=_clean(getattr(param, "help", None) or declared.get(param.name, "")),
                required=param.required, variadic=param.nargs == -1, complete=complete,
            ))
    cmd = Cmd(path=path, help=_clean(command.help),
              summary=command.get_short_help_str(limit=10_000).strip(),
              usage=tuple(command.collect_usage_pieces(ctx)), options=options,
              arguments=arguments, is_group=isinstance(command, click.Group))
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            sub_ctx = sub.context_class(sub, info_name=name, parent=ctx, **sub.context_settings)
            cmd.commands.append(_build(sub, sub_ctx, path + (name,)))
    return cmd


def command_tree() -> Cmd:
    """The mqcli command tree, read from the Typer app."""
    from mqcli.app import app

    group = typer.main.get_command(app)
    ctx = group.context_class(group, info_name=PROG, **group.context_settings)
    return _build(group, ctx, ())


# ---- help text --------------------------------------------------------------------------

@dataclass(frozen=True)
class Block:
    lines: tuple[str, ...]
    literal: bool


def help_blocks(text: str) -> tuple[list[Block], list[str]]:
    """(description blocks, example lines) of a help text, split the way click renders it."""
    blocks: list[Block] = []
    examples: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        lines = para.splitlines()
        if not lines:
            continue
        if lines[0].strip() == "\b":
            body = lines[1:]
            if body and re.fullmatch(r"Examples?:", body[0].strip()):
                examples.extend(textwrap.dedent("\n".join(body[1:])).splitlines())
            elif body:
                blocks.append(Block(tuple(textwrap.dedent("\n".join(body)).splitlines()), True))
        else:
            blocks.append(Block(tuple(line.strip() for line in lines), False))
    return blocks, examples


# ---- troff ------------------------------------------------------------------------------

_OPTION_WORD = re.compile(r"(?<![\w\\-])--?[A-Za-z0-9][\w-]*")


def _troff_chars(text: str) -> str:
    out = []
    for ch in text:
        if ord(ch) < 128:
            out.append(ch)
        else:
            out.append(f"\\[u{ord(ch):04X}]")
    return "".join(out)


def roff(text: str, *, literal: bool = False) -> str:
    """Text for a troff text line: `\\` and non-ASCII escaped; hyphens of option words (all
    hyphens in a literal command line) as `\\-`, which is what a reader copies into a shell."""
    text = text.replace("\\", "\\e")
    if literal:
        text = text.replace("-", "\\-")
    else:
        text = _OPTION_WORD.sub(lambda m: m.group(0).replace("-", "\\-"), text)
    return _troff_chars(text)


def roff_code(text: str) -> str:
    """A name to be typed (option, command, page name): every hyphen is a minus."""
    return _troff_chars(text.replace("\\", "\\e").replace("-", "\\-"))


def text_line(line: str) -> str:
    """A line that troff must not read as a request."""
    return "\\&" + line if line.startswith((".", "'")) else line


def _bold(name: str) -> str:
    return f"\\fB{roff_code(name)}\\fR"


def _italic(text: str) -> str:
    return f"\\fI{roff_code(text)}\\fR"


class Page:
    def __init__(self, title: str, summary_name: str, summary: str) -> None:
        from mqcli import __version__

        self.lines = [
            f'.\\" Generated by {GENERATED_BY} from the {PROG} app; do not edit.',
            f'.TH {roff_code(title.upper())} 1 "" "{PROG} {__version__}" "{PROG} manual"',
            ".nh",    # no hyphenation: names like mqcli-queue-create and MQ_ERROR_* stay whole
            ".ad l",  # ragged right: long names would otherwise stretch the spaces of a line
            ".SH NAME",
            text_line(f"{roff_code(summary_name)} \\- {roff(summary)}"),
        ]

    def section(self, name: str) -> None:
        self.lines.append(f".SH {name}")

    def raw(self, *lines: str) -> None:
        self.lines.extend(lines)

    def text(self, text: str) -> None:
        self.lines.extend(text_line(roff(line.strip())) for line in text.splitlines() if line.strip())

    def _new_paragraph(self) -> None:
        if not self.lines[-1].startswith(".SH"):  # a heading already starts one
            self.lines.append(".PP")

    def paragraph(self, text: str) -> None:
        self._new_paragraph()
        self.text(text)

    def literal(self, lines: tuple[str, ...] | list[str]) -> None:
        self._new_paragraph()
        self.lines += [".RS 4", ".nf"]
        self.lines += [text_line(roff(line, literal=True)) if line.strip() else "" for line in lines]
        self.lines += [".fi", ".RE"]

    def blocks(self, blocks: list[Block]) -> None:
        for block in blocks:
            if block.literal:
                self.literal(block.lines)
            else:
                self.paragraph("\n".join(block.lines))

    def item(self, tag: str, body: str, see: str | None = None) -> None:
        """A .TP entry: `tag` is already troff, `body` is plain text, `see` a page name."""
        self.lines += [".TP", text_line(tag)]
        self.text(body)
        if see:
            self.lines.append(f"See {_bold(see)}(1).")

    def render(self) -> str:
        # troff reads an empty line as a blank output line; literal blocks need none
        lines = ["\\&" if line == "" else line for line in self.lines]
        return "\n".join(lines) + "\n"


def _option_tag(opt: Opt) -> str:
    names = ", ".join(_bold(n) for n in opt.names)
    if opt.secondary:
        names += " / " + ", ".join(_bold(n) for n in opt.secondary)
    if opt.takes_value:
        names += f" {_italic(opt.metavar or '')}"
    return names


def _synopsis(cmd: Cmd) -> list[str]:
    pieces = " ".join(_italic(piece) for piece in cmd.usage)
    return [f"{_bold(cmd.name)} {pieces}".rstrip()]


def _see_also(page: Page, names: list[str]) -> None:
    page.section("SEE ALSO")
    refs = [f".BR {roff_code(n)} (1){',' if i < len(names) - 1 else ''}" for i, n in enumerate(names)]
    page.raw(*refs)


def command_page(cmd: Cmd, root: Cmd) -> str:
    page = Page(cmd.page, cmd.page, cmd.summary)
    page.section("SYNOPSIS")
    page.raw(*_synopsis(cmd))
    blocks, examples = help_blocks(cmd.help)
    page.section("DESCRIPTION")
    page.blocks(blocks)
    if cmd.is_group:
        page.section("COMMANDS")
        for sub in cmd.commands:
            page.item(_bold(sub.name), sub.summary, see=sub.page)
    if cmd.arguments:
        page.section("ARGUMENTS")
        for arg in cmd.arguments:
            page.item(_italic(arg.metavar), arg.help or ("Required." if arg.required else "Optional."))
    page.section("OPTIONS")
    for opt in cmd.options:
        page.item(_option_tag(opt), opt.help_full)
    page.paragraph(f"The global options of {PROG}(1) may also be given before the command.")
    if examples:
        page.section("EXAMPLES")
        page.literal(examples)
    related = [root.page]
    parent = next(c for c in root.walk() if c.path == cmd.path[:-1])
    if parent is not root:
        related.append(parent.page)
    related += [sub.page for sub in cmd.commands]
    _see_also(page, related)
    return page.render()


# The README's "Exit codes" (README.md#exit-codes), by ExitCode name; the status names come from store.errors.
EXIT_MEANINGS = {
    "OK": "Success.",
    "INTERNAL": "Unexpected internal error (a bug): a one-line message; --traceback shows more. "
                "Also a question answered no (queue purge, queue delete): nothing was done.",
    "USAGE": "Usage error: a bad option, argument or duration, or an option value that cannot be "
             "valid (a malformed --delimiter escape, an id beyond its 64 bits, a number out of range).",
    "TIMEOUT": "No message within --wait (an empty queue with no wait too).",
    "NOT_FOUND": "No message with that id, confirm id or lock id, or the id's lease lapsed.",
    "ALREADY_RECEIVED": "The message is held by another lock, confirm or transaction, or the "
                        "confirm id or lock id named is pending in the queue or lapsed less "
                        "than 24 hours ago.",
    "QUEUE_NOT_AVAILABLE": "The queue does not exist or was deleted.",
    "QUEUE_QUOTA": "Enqueue status 1: the queue quota would be exceeded.",
    "STORE_QUOTA": "Enqueue status 2: the store quota would be exceeded, the store is throttled, "
                   "or the store is full; or the disk or device written to (stdout, export --to) "
                   "is full.",
    "EXPIRED": "Enqueue status 3: the message timed out (expired before it could be enqueued).",
    "TRANSACTION": "Transaction error: an unknown, finished or timed-out transaction, or the "
                   "transaction rules of the queue broken.",
    "STORE": "Store error: the store cannot be opened, is locked out, corrupt, or not permitted.",
    "BAD_DATA": "Bad data: a malformed label, body, format name, JSONL record, import file or "
                "key file.",
    "CHANNEL": "Channel error: a link cannot be reached, authenticated, or broke.",
    "INTERRUPTED": "Interrupted (Ctrl-C); nothing half-done is left behind.",
    "TERMINATED": "Terminated (SIGTERM), handled as Ctrl-C is; nothing half-done is left behind.",
}


def _statuses() -> dict[int, list[str]]:
    """exit code -> the [STATUS] names an error line may show, from store.errors."""
    from store import errors

    found: dict[int, list[str]] = {}
    for obj in vars(errors).values():
        if isinstance(obj, type) and issubclass(obj, errors.StoreError) and obj is not errors.StoreError:
            status = f"{obj.status} ({obj.code})" if obj.code else obj.status
            names = found.setdefault(obj.exit_code, [])
            if status not in names:
                names.append(status)
    return found


def exit_status(page: Page) -> None:
    from mqcli.exits import ExitCode

    names = {code.name for code in ExitCode}
    if names != set(EXIT_MEANINGS):
        raise SystemExit(f"gen_docs: EXIT_MEANINGS does not match mqcli.exits.ExitCode "
                         f"(missing {sorted(names - set(EXIT_MEANINGS))}, "
                         f"unknown {sorted(set(EXIT_MEANINGS) - names)}); update it with README.md's exit codes")
    statuses = _statuses()
    page.section("EXIT STATUS")
    page.paragraph(f"Errors print one line on standard error, "
                   f"\"{PROG}: error: <what, and what to do> [STATUS]\"; with -o json or -o jsonl "
                   "instead only a JSON object carrying the status, code, exit code and message.")
    for code in ExitCode:
        status = {"USAGE": "USAGE", "INTERNAL": "INTERNAL, DECLINED", "INTERRUPTED": "INTERRUPTED"}.get(code.name)
        shown = ([status] if status else []) + statuses.get(int(code), [])
        body = EXIT_MEANINGS[code.name]
        if shown:
            body += " Status: " + ", ".join(shown) + "."
        page.item(f"\\fB{int(code)}\\fR  {code.name}", body)


def main_page(root: Cmd) -> str:
    page = Page(PROG, PROG, root.summary)
    page.section("SYNOPSIS")
    page.raw(*_synopsis(root))
    blocks, examples = help_blocks(root.help)
    page.section("DESCRIPTION")
    page.blocks(blocks)
    page.paragraph(f"Each command has its own page, {PROG}-COMMAND(1) (subcommands as "
                   f"{PROG}-queue-create(1)), and --help with an example.")
    page.section("OPTIONS")
    page.paragraph("These options may be given before the command; --store, -o and -q are also "
                   "accepted on each command, where the command's own value wins.")
    for opt in root.options:
        page.item(_option_tag(opt), opt.help_full)
    page.section("COMMANDS")
    for cmd in root.walk()[1:]:
        page.item(_bold(" ".join(cmd.path)), cmd.summary, see=cmd.page)
    exit_status(page)
    page.section("ENVIRONMENT")
    page.item(_bold("MQCLI_STORE"), "The store directory when --store is not given.")
    page.item(_bold("XDG_DATA_HOME"),
              "Without --store and MQCLI_STORE the store is $XDG_DATA_HOME/mqcli/store, "
              "or ~/.local/share/mqcli/store when XDG_DATA_HOME is not set.")
    page.section("FILES")
    page.item(_italic("$XDG_DATA_HOME/mqcli/store/"),
              "The default store: one queue manager, a directory created with mode 0700.")
    page.item(_italic("STORE/mqcli-store.json"), "The store's marker: its format and map size.")
    page.item(_italic("STORE/data.mdb") + ", " + _italic("STORE/lock.mdb"),
              "The LMDB environment holding queues, messages and indexes (mode 0600).")
    page.item(_italic("STORE/wait/"), "FIFOs through which getters waiting with --wait are woken.")
    page.section("EXAMPLES")
    page.literal(examples + [line for cmd in root.walk()[1:]
                             for line in help_blocks(cmd.help)[1][:1]])
    _see_also(page, [cmd.page for cmd in root.walk()[1:]])
    return page.render()


# ---- bash -------------------------------------------------------------------------------

def _words(words: list[str] | tuple[str, ...]) -> str:
    return " ".join(words)


def _bash_case(func: str, comment: str, entries: list[tuple[str, str]]) -> list[str]:
    """A function that sets REPLY from a case on its first argument."""
    out = [f"# {comment}", f"{func}()", "{", '    case "$1" in']
    for key, value in entries:
        out.append(f'        "{key}") REPLY="{value}" ;;')
    out += ['        *) REPLY="" ;;', "    esac", "}", ""]
    return out


def bash(root: Cmd) -> str:
    cmds = root.walk()
    key = lambda c: " ".join(c.path)  # noqa: E731
    # option name -> {command path: action}; one `*:NAME` pattern where every command agrees
    by_name: dict[str, dict[str, str | None]] = {}
    for cmd in cmds:
        for opt in cmd.options:
            if not opt.takes_value:
                continue
            if opt.choices:
                action: str | None = f'COMPREPLY=($(compgen -W "{_words(opt.choices)}" -- "$3"))'
            elif opt.complete:
                action = f'_mqcli_{opt.complete}s "$3"'
            else:
                action = None
            for name in opt.names:
                by_name.setdefault(name, {})[key(cmd)] = action
    values: dict[str, list[str]] = {}
    for name, actions in by_name.items():
        if len(set(actions.values())) == 1:
            action = next(iter(actions.values()))
            if action:
                values.setdefault(action, []).append(f"*:{name}")
        else:
            for path, action in actions.items():
                if action:
                    values.setdefault(action, []).append(f'"{path}:{name}"')
    arguments: dict[str, list[str]] = {}
    for cmd in cmds:
        kinds = sorted({a.complete for a in cmd.arguments if a.complete})
        if kinds:
            arguments.setdefault(f"_mqcli_{kinds[0]}s \"$2\"", []).append(key(cmd))
    out = [
        "# bash completion for mqcli                                 -*- shell-script -*-",
        f"# Generated by {GENERATED_BY} from the {PROG} app; do not edit.",
        "# Static: completing never runs mqcli or Python. Install: source this file, or copy it",
        "# to ~/.local/share/bash-completion/completions/mqcli.",
        "",
    ]
    out += _bash_case("_mqcli_commands", "The subcommands of a command path (\"\" is mqcli itself).",
                      [(key(c), _words([s.path[-1] for s in c.commands])) for c in cmds if c.is_group])
    out += _bash_case("_mqcli_options", "The options of a command path.",
                      [(key(c), _words([n for o in c.options for n in o.all_names])) for c in cmds])
    out += _bash_case("_mqcli_value_options", "The options of a command path that take a value.",
                      [(key(c), _words([n for o in c.options if o.takes_value for n in o.names]))
                       for c in cmds if any(o.takes_value for o in c.options)])
    out += [
        "# Complete the value of option $2 of command path $1; $3 is the word so far.",
        "_mqcli_option_value()",
        "{",
        '    case "$1:$2" in',
    ]
    for action, keys in values.items():
        out.append("        " + "|".join(keys) + f") {action} ;;")
    out += [
        "    esac",
        "}",
        "",
        "# Complete a positional argument of command path $1; $2 is the word so far.",
        "_mqcli_argument()",
        "{",
        '    case "$1" in',
    ]
    for action, keys in arguments.items():
        out.append("        " + "|".join(f'"{k}"' for k in keys) + f") {action} ;;")
    out += [
        "    esac",
        "}",
        "",
        "_mqcli_files()",
        "{",
        "    compopt -o filenames 2>/dev/null",
        '    COMPREPLY=($(compgen -f -- "$1"))',
        "}",
        "",
        "_mqcli_dirs()",
        "{",
        "    compopt -o filenames 2>/dev/null",
        '    COMPREPLY=($(compgen -d -- "$1"))',
        "}",
        "",
        "_mqcli()",
        "{",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" path="" word option="" REPLY i=1 positional=0',
        "    COMPREPLY=()",
        "    # Walk the words before the cursor: descend into subcommands, step over option values.",
        "    # COMP_WORDBREAKS holds \"=\", so --output=json arrives as \"--output\" \"=\" \"json\".",
        "    while (( i < COMP_CWORD )); do",
        '        word="${COMP_WORDS[i]}"',
        '        if [[ $positional == 0 && $word == -- ]]; then',
        "            positional=1",
        '        elif [[ $positional == 0 && $word == -* ]]; then',
        '            _mqcli_value_options "$path"',
        '            if [[ " $REPLY " == *" $word "* ]]; then',
        '                if [[ ${COMP_WORDS[i+1]} == = ]]; then (( i += 2 )); else (( i += 1 )); fi',
        "            fi",
        '        elif [[ $word != = ]]; then',
        '            _mqcli_commands "$path"',
        '            if [[ -n $REPLY && " $REPLY " == *" $word "* ]]; then',
        '                path="${path:+$path }$word"',
        "            elif [[ -n $REPLY ]]; then",
        "                return 0  # not a command of this group",
        "            fi",
        "        fi",
        "        (( i += 1 ))",
        "    done",
        "",
        "    if (( COMP_CWORD >= 2 )) && [[ $cur == = ]]; then",
        '        option="${COMP_WORDS[COMP_CWORD-1]}" cur=""',
        '    elif (( COMP_CWORD >= 3 )) && [[ ${COMP_WORDS[COMP_CWORD-1]} == = ]]; then',
        '        option="${COMP_WORDS[COMP_CWORD-2]}"',
        "    elif (( COMP_CWORD >= 2 )); then",
        '        option="${COMP_WORDS[COMP_CWORD-1]}"',
        "    fi",
        '    if [[ $positional == 0 && $option == -* ]]; then',
        '        _mqcli_value_options "$path"',
        '        if [[ " $REPLY " == *" $option "* ]]; then',
        '            _mqcli_option_value "$path" "$option" "$cur"',
        "            return 0",
        "        fi",
        "    fi",
        '    if [[ $positional == 0 && $cur == -* ]]; then',
        '        _mqcli_options "$path"',
        '        COMPREPLY=($(compgen -W "$REPLY" -- "$cur"))',
        "        return 0",
        "    fi",
        '    _mqcli_commands "$path"',
        "    if [[ -n $REPLY ]]; then",
        '        COMPREPLY=($(compgen -W "$REPLY" -- "$cur"))',
        "        return 0",
        "    fi",
        '    _mqcli_argument "$path" "$cur"',
        "}",
        "",
        "complete -F _mqcli mqcli",
    ]
    return "\n".join(out) + "\n"


# ---- zsh --------------------------------------------------------------------------------

def _zq(text: str) -> str:
    """Single-quoted for zsh."""
    return "'" + text.replace("'", "'\\''") + "'"


def _z_desc(text: str) -> str:
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def _z_message(text: str) -> str:
    return text.replace("\\", "\\\\").replace(":", "\\:")


def _z_action(choices: tuple[str, ...], complete: str) -> str:
    if choices:
        return "(" + " ".join(choices) + ")"
    return {"file": "_files", "dir": "_files -/"}.get(complete, " ")


def _z_option(opt: Opt) -> list[str]:
    desc = "[" + _z_desc(opt.help) + "]"
    if "--help" in opt.names:
        prefix = "(- *)"  # nothing else to complete after --help
    elif opt.multiple:
        prefix = "*"
    elif len(opt.all_names) > 1:
        prefix = "(" + " ".join(opt.all_names) + ")"
    else:
        prefix = ""
    value = ""
    if opt.takes_value:
        value = ":" + _z_message(opt.metavar or "") + ":" + _z_action(opt.choices, opt.complete)
    # --name= and -n+: the value in the next word, or joined (--name=VALUE, -nVALUE)
    names = [n + ("" if not opt.takes_value else "=" if n.startswith("--") else "+") for n in opt.names]
    if len(names) > 1:
        specs = [_zq(prefix) + "{" + ",".join(names) + "}" + _zq(desc + value)]
    else:
        specs = [_zq(prefix + names[0] + desc + value)]
    specs += [_zq(prefix + name + desc) for name in opt.secondary]
    return specs


def _z_func(cmd: Cmd) -> str:
    return "_mqcli" + "".join("__" + p.replace("-", "_") for p in cmd.path)


def zsh(root: Cmd) -> str:
    out = [
        "#compdef mqcli",
        "# zsh completion for mqcli",
        f"# Generated by {GENERATED_BY} from the {PROG} app; do not edit.",
        "# Static: completing never runs mqcli or Python. Install: put this file, named _mqcli,",
        "# in a directory of $fpath before compinit runs (or source it after compinit).",
        "",
    ]
    for cmd in root.walk():
        func = _z_func(cmd)
        specs = [s for opt in cmd.options for s in _z_option(opt)]
        if cmd.is_group:
            specs += ["': :->command'", "'*:: :->args'"]
        else:
            for n, arg in enumerate(cmd.arguments, 1):
                message = _z_message(arg.name.lower() + (f" ({arg.help})" if arg.help else ""))
                action = _z_action((), arg.complete)
                if arg.variadic:
                    specs.append(_zq(f"*:{message}:{action}"))
                else:
                    specs.append(_zq(f"{n}:{'' if arg.required else ':'}{message}:{action}"))
        out += [f"{func}() {{"]
        if cmd.is_group:
            out += ['    local curcontext="$curcontext" state state_descr line ret=1',
                    "    typeset -A opt_args"]
            out += ["    _arguments -s -S -C \\"]
        else:
            out += ["    _arguments -s -S \\"]
        out += [f"        {spec} \\" for spec in specs[:-1]] + [f"        {specs[-1]}" + (" && ret=0" if cmd.is_group else "")]
        if cmd.is_group:
            items = [_zq(sub.path[-1].replace(":", "\\:") + ":" + sub.summary) for sub in cmd.commands]
            out += [
                "    case $state in",
                "        command)",
                "            local -a commands",
                "            commands=(",
            ] + [f"                {item}" for item in items] + [
                "            )",
                f"            _describe -t commands {_zq(cmd.name + ' command')} commands && ret=0",
                "            ;;",
                "        args)",
                f'            curcontext="${{curcontext%:*:*}}:{cmd.page}-$words[1]:"',
                "            case $words[1] in",
            ]
            for sub in cmd.commands:
                out.append(f"                {sub.path[-1]}) {_z_func(sub)} && ret=0 ;;")
            out += [
                "            esac",
                "            ;;",
                "    esac",
                "    return ret",
            ]
        out += ["}", ""]
    out += [
        'if [[ "$funcstack[1]" == "_mqcli" ]]; then',
        '    _mqcli "$@"',
        "else",
        "    compdef _mqcli mqcli",
        "fi",
    ]
    return "\n".join(out) + "\n"


# ---- fish -------------------------------------------------------------------------------

def _fq(text: str) -> str:
    """Single-quoted for fish."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_switch(func: str, doc: str, entries: list[tuple[str, list[str]]]) -> list[str]:
    out = [f"function {func} --argument-names path --description {_fq(doc)}", "    switch $path"]
    for key, words in entries:
        out.append(f"        case {_fq(key)}")
        out.append("            printf '%s\\n' " + " ".join(_fq(w) for w in words))
    out += ["    end", "end", ""]
    return out


def fish(root: Cmd) -> str:
    cmds = root.walk()
    key = lambda c: " ".join(c.path)  # noqa: E731
    out = [
        "# fish completion for mqcli",
        f"# Generated by {GENERATED_BY} from the {PROG} app; do not edit.",
        "# Static: completing never runs mqcli or Python. Install: copy this file to",
        "# ~/.config/fish/completions/mqcli.fish.",
        "",
    ]
    out += _fish_switch("__mqcli_commands", "mqcli: the subcommands of a command path",
                        [(key(c), [s.path[-1] for s in c.commands]) for c in cmds if c.is_group])
    out += _fish_switch("__mqcli_value_options", "mqcli: the options of a command path that take a value",
                        [(key(c), [n for o in c.options if o.takes_value for n in o.names])
                         for c in cmds if any(o.takes_value for o in c.options)])
    out += [
        "function __mqcli_path --description 'mqcli: the command path before the cursor (? if unknown)'",
        "    set -l line (commandline -pc)",
        '    if test "$line" = "$__mqcli_path_line"',
        '        echo "$__mqcli_path_value"',
        "        return",
        "    end",
        "    set -l words (commandline -opc)",
        "    set -e words[1]",
        "    set -l path",
        "    set -l skip 0",
        "    set -l positional 0",
        "    for word in $words",
        "        if test $skip -eq 1",
        "            set skip 0",
        "            continue",
        "        end",
        "        if test $positional -eq 0",
        "            switch $word",
        "                case --",
        "                    set positional 1",
        "                    continue",
        "                case '--*=*'",
        "                    continue",
        "                case '-*'",
        '                    if contains -- $word (__mqcli_value_options "$path")',
        "                        set skip 1",
        "                    end",
        "                    continue",
        "            end",
        "        end",
        '        set -l commands (__mqcli_commands "$path")',
        "        if contains -- $word $commands",
        "            set -a path $word",
        "        else if set -q commands[1]",
        "            set path '?'",
        "            break",
        "        end",
        "    end",
        '    set -g __mqcli_path_line "$line"',
        '    set -g __mqcli_path_value "$path"',
        '    echo "$path"',
        "end",
        "",
        "function __mqcli_at --argument-names expected --description 'mqcli: is the command path this?'",
        "    set -l path (__mqcli_path)",
        '    test "$path" = "$expected"',
        "end",
        "",
        "complete -c mqcli -f",
    ]
    for cmd in cmds:
        cond = f"-n {_fq('__mqcli_at ' + _fq(key(cmd)))}"
        out += ["", f"# {cmd.name}"]
        for sub in cmd.commands:
            out.append(f"complete -c mqcli {cond} -a {_fq(sub.path[-1])} -d {_fq(sub.summary)}")
        for opt in cmd.options:
            for names in (opt.names, opt.secondary):
                if not names:
                    continue
                flags = []
                for n in names:
                    flags.append(f"-l {n[2:]}" if n.startswith("--") else f"-s {n[1:]}")
                spec = " ".join(flags)
                if opt.takes_value and names is opt.names:
                    if opt.choices:
                        spec += f" -x -a {_fq(' '.join(opt.choices))}"
                    elif opt.complete:
                        spec += " -r -F"
                    else:
                        spec += " -x"
                help_ = opt.help.splitlines()[0] if opt.help else ""
                out.append(f"complete -c mqcli {cond} {spec} -d {_fq(help_)}")
        if any(a.complete for a in cmd.arguments):
            out.append(f"complete -c mqcli {cond} -F")
    return "\n".join(out) + "\n"


# ---- files ------------------------------------------------------------------------------

def generate() -> dict[str, str]:
    """Every generated file: path relative to the repository -> content."""
    root = command_tree()
    files = {
        "completions/mqcli.bash": bash(root),
        "completions/_mqcli": zsh(root),
        "completions/mqcli.fish": fish(root),
        "man/mqcli.1": main_page(root),
    }
    for cmd in root.walk()[1:]:
        files[f"man/{cmd.page}.1"] = command_page(cmd, root)
    return files


def _existing() -> set[str]:
    """Generated files now in the tree (so a removed command's page counts as stale)."""
    found = {f"man/{p.name}" for p in (ROOT / "man").glob(f"{PROG}*.1")}
    found |= {f"completions/{p.name}" for p in (ROOT / "completions").glob("*") if p.is_file()}
    return found


def check(files: dict[str, str]) -> list[str]:
    """A line (and a short diff) for each file that generating would change."""
    problems = []
    for rel, content in sorted(files.items()):
        path = ROOT / rel
        if not path.exists():
            problems.append(f"missing: {rel}")
            continue
        current = path.read_text(encoding="utf-8")
        if current != content:
            diff = list(difflib.unified_diff(current.splitlines(), content.splitlines(),
                                             f"{rel} (in the tree)", f"{rel} (generated)", lineterm="", n=1))
            shown = diff[:24] + ([f"... {len(diff) - 24} more diff lines"] if len(diff) > 24 else [])
            problems.append(f"stale: {rel}\n" + textwrap.indent("\n".join(shown), "    "))
    for rel in sorted(_existing() - set(files)):
        problems.append(f"not generated (remove it): {rel}")
    return problems


def write(files: dict[str, str]) -> list[str]:
    changed = []
    for rel, content in sorted(files.items()):
        path = ROOT / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != content:
            path.write_text(content, encoding="utf-8", newline="\n")
            changed.append(f"wrote {rel}")
    for rel in sorted(_existing() - set(files)):
        (ROOT / rel).unlink()
        changed.append(f"removed {rel}")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate completions/ and man/ from the mqcli app.")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a generated file is missing or stale")
    args = parser.parse_args(argv)
    files = generate()
    if args.check:
        problems = check(files)
        if problems:
            print("\n".join(problems), file=sys.stderr)
            print(f"{len(problems)} generated file(s) out of date: run `{REGENERATE}` and commit the result",
                  file=sys.stderr)
            return 1
        print(f"{len(files)} generated files up to date")
        return 0
    changed = write(files)
    print("\n".join(changed) if changed else f"{len(files)} generated files already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
