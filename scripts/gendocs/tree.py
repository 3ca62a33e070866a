"""The mqcli command tree, read from the click command tree that Typer builds from
`mqcli.app.app` (`typer.main.get_command`): commands in the order `mqcli --help` lists them, each
option with its names, metavar, help (with click's `[default: …]` notes), choices and whether it
takes a value; and help text split the way click renders it."""

from __future__ import annotations

import inspect
import re
import textwrap
from dataclasses import dataclass, field

import click
import typer

from mqcli.complete import kind_of

from . import PROG


@dataclass(frozen=True)
class Opt:
    names: tuple[str, ...]          # short names first, as click orders them: ("-o", "--output")
    secondary: tuple[str, ...]      # the off switch of a --x/--no-x flag
    metavar: str | None             # None for a flag
    help: str                       # the help text alone
    help_full: str                  # with click's notes, as --help shows it ([default: 3])
    choices: tuple[str, ...]
    complete: str                   # "file", "dir", a kind of mqcli/complete.py, or "" (nothing to offer)
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

    @property
    def words(self) -> str:
        """The command path as the shells' completion functions key it: `queue create`."""
        return " ".join(self.path)

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
    if isinstance(param.type, click.Path):  # a store path (mqcli/options.py) is a directory
        return (), "file" if param.type.file_okay and param.type.name != "directory" else "dir"
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
            complete = kind_of(path, param.name or "") or complete
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
            complete = kind_of(path, param.name or "") or complete
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
