"""CLI: the options every command shares (`--store`, `-o/--output`, `-q/--quiet`, and
`--delimiter` of get and browse) are declared once, in mqcli/options.py, and given to each
command by `@shared_options`; no command declares one of them by hand. The Session they make
decides the store path when first needed. Input reading lives in mqcli/inputs.py."""

from __future__ import annotations

import ast
import inspect
import os
import sys
from pathlib import Path
from typing import Annotated, Optional, get_args, get_origin

import click
import pytest
import typer
from cli_helpers import ERROR_PREFIX, invoke

from mqcli import inputs
from mqcli.app import app
from mqcli.exits import UsageError
from mqcli.options import Session, shared_options

ROOT_DIR = Path(__file__).resolve().parent.parent
# the shared options by parameter name, and the option names a hand declaration would use
SHARED = {"store": {"--store"}, "output": {"--output", "-o"}, "quiet": {"--quiet", "-q"},
          "delimiter": {"--delimiter"}}
SHARED_NAMES = set().union(*SHARED.values())


def _leaves(command: click.Command, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], click.Command]:
    if isinstance(command, click.Group):
        found: dict[tuple[str, ...], click.Command] = {}
        for name, sub in command.commands.items():
            found.update(_leaves(sub, (*path, name)))
        return found
    return {path: command}


def _declared_names(annotation: object) -> set[str]:
    """The option names a parameter's `Annotated[..., typer.Option(...)]` declares."""
    if get_origin(annotation) is not Annotated:
        return set()
    names: set[str] = set()
    for info in get_args(annotation)[1:]:
        if isinstance(info, typer.models.OptionInfo):
            names.update(d for d in (info.default, *(info.param_decls or ())) if isinstance(d, str))
    return names


def hand_declared(command: click.Command) -> list[str]:
    """What is wrong with how `command` gets the shared options: empty when each of them comes
    from @shared_options and the command's own function declares none."""
    callback = command.callback
    given = getattr(callback, "shared_options", None)
    if given is None:
        ours = sorted(n for p in command.params for n in p.opts if n in SHARED_NAMES)
        return [f"not made by @shared_options, yet takes {ours}"] if ours else []
    problems = []
    own = inspect.signature(inspect.unwrap(callback), eval_str=True).parameters.values()  # type: ignore[arg-type]
    for param in own:
        clash = _declared_names(param.annotation) & SHARED_NAMES
        if clash:
            problems.append(f"parameter {param.name} declares {sorted(clash)} by hand")
    for param in command.params:
        if set(param.opts) & SHARED_NAMES and param.name not in given:
            problems.append(f"{param.opts} is not one @shared_options added")
    return problems


COMMANDS = _leaves(typer.main.get_command(app))


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=[" ".join(p) for p in sorted(COMMANDS)])
def test_every_command_takes_the_shared_options_from_shared_options(path):
    command = COMMANDS[path]
    assert hand_declared(command) == []
    given = command.callback.shared_options  # type: ignore[union-attr]
    assert {"output", "quiet"} <= set(given)
    params = {p.name: p for p in command.params}
    for name in given:  # as declared once: the same names, help and checks everywhere
        assert set(params[name].opts) | set(params[name].secondary_opts) == SHARED[name]
    # after the command's own options, in one order: where `--help` has always shown them
    assert [p.name for p in command.params][-len(given):] == list(given)


def test_the_shared_options_are_alike_on_every_command():
    """Each shared option reads the same on every command: one declaration, not copies."""
    root = typer.main.get_command(app)
    ctx = click.Context(root, info_name="mqcli")
    for name in ("store", "output", "quiet"):
        seen = {p.get_help_record(ctx) for c in [root, *COMMANDS.values()] for p in c.params if p.name == name}
        assert len(seen) == 1, (name, seen)
    seen = {p.get_help_record(ctx) for c in COMMANDS.values() for p in c.params if p.name == "delimiter"}
    assert len(seen) == 1 and len([c for c in COMMANDS.values() if "delimiter" in
                                   {p.name for p in c.params}]) >= 2


def test_a_command_declaring_a_shared_option_by_hand_is_caught():
    """The check above fails on each way of declaring a shared option by hand."""
    toy = typer.Typer()

    @toy.command("plain")
    def plain(store: Annotated[Optional[Path], typer.Option("--store")] = None) -> None:
        """Hand-declared, no decorator."""

    @toy.command("mixed")
    @shared_options(store=False)
    def mixed(s: Session, where: Annotated[Optional[Path], typer.Option("--store")] = None) -> None:
        """Decorated, but --store declared by hand under another name."""

    @toy.command("clean")
    @shared_options
    def clean(s: Session) -> None:
        """As every command of mqcli is."""

    commands = _leaves(typer.main.get_command(toy))
    assert hand_declared(commands[("plain",)]) == ["not made by @shared_options, yet takes ['--store']"]
    assert hand_declared(commands[("mixed",)]) == [
        "parameter where declares ['--store'] by hand", "['--store'] is not one @shared_options added"]
    assert hand_declared(commands[("clean",)]) == []


def test_shared_options_refuses_a_parameter_named_as_a_shared_one():
    def command(s: Session, quiet: bool = False) -> None:
        """A command with its own quiet."""

    with pytest.raises(TypeError, match=r"declares a shared option by hand: \['quiet'\]"):
        shared_options(command)


def test_no_source_outside_options_declares_a_shared_option():
    """No typer.Option(...) in mqcli/ names a shared option, but in mqcli/options.py."""
    found = []
    for path in sorted((ROOT_DIR / "mqcli").rglob("*.py")):
        if path.name == "options.py" and path.parent.name == "mqcli":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "Option":
                names = {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
                if names & SHARED_NAMES:
                    found.append(f"{path.relative_to(ROOT_DIR)}:{node.lineno} {sorted(names & SHARED_NAMES)}")
    assert found == []


def test_no_module_imports_a_private_name_of_another():
    found = []
    for path in sorted((ROOT_DIR / "mqcli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if private:
                    found.append(f"{path.relative_to(ROOT_DIR)}:{node.lineno} {private}")
    assert found == []


# ---- the session: the store path is decided when a command needs it -----------------------

def test_a_command_that_opens_no_store_needs_no_store_path(tmp_path):
    """`link keygen` writes a key file; an empty MQCLI_STORE (a usage error for any command
    that opens the store) does not concern it."""
    key = tmp_path / "k.key"
    r = invoke(["link", "keygen", key, "-o", "json"], env={"MQCLI_STORE": ""})
    assert r.code == 0 and r.json() == {"key_file": str(key), "mode": "0600"}
    assert len(key.read_text().strip()) == 64
    assert os.listdir(tmp_path) == ["k.key"]


def test_a_command_says_its_own_usage_error_before_a_bad_store_path(tmp_path):
    r = invoke(["browse", "q", "--lock-id", "5"], env={"MQCLI_STORE": ""})
    assert r.code == 2
    assert r.err_lines == [f"{ERROR_PREFIX}--lock-id and --lease go with --lock [USAGE]"]
    r = invoke(["browse", "q"], env={"MQCLI_STORE": ""})
    assert r.code == 2 and len(r.err_lines) == 1 and "MQCLI_STORE is empty" in r.stderr


def test_health_says_an_unusable_store_path_as_unknown(tmp_path):
    """The Nagios plugin API: whatever stops the check is UNKNOWN (3), an empty MQCLI_STORE as
    much as a missing store or a bad threshold."""
    r = invoke(["health"], env={"MQCLI_STORE": ""})
    assert r.code == 3 and r.out.startswith("MQCLI UNKNOWN - MQCLI_STORE is empty"), r
    r = invoke(["health", "--store", tmp_path / "none"])
    assert r.code == 3 and r.out.startswith(f"MQCLI UNKNOWN - no store at {tmp_path / 'none'}"), r


def test_batch_passes_its_store_and_quiet_to_every_line(tmp_path):
    store = tmp_path / "qm"
    assert invoke(["--store", store, "init", "-q"]).code == 0
    r = invoke(["batch", "-", "--store", store, "-q"], input="queue create a\nput a hello\n",
               env={"MQCLI_STORE": str(tmp_path / "elsewhere")})
    assert r.code == 0 and r.stderr == ""
    r = invoke(["--store", store, "get", "a", "-o", "body"])
    assert r.code == 0 and r.stdout == b"hello\n"
    assert not (tmp_path / "elsewhere").exists()


# ---- inputs ---------------------------------------------------------------------------------

def test_opened_closes_a_file_and_leaves_stdin_open(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"{}\n")
    with inputs.opened(str(path)) as stream:
        assert stream.read() == b"{}\n"
    assert stream.closed
    with inputs.opened("-") as stream:
        assert stream is sys.stdin.buffer
    assert not sys.stdin.buffer.closed


def test_opened_names_a_file_it_cannot_read(tmp_path):
    with pytest.raises(UsageError) as caught:
        with inputs.opened(str(tmp_path / "missing.jsonl")):
            pass
    assert str(caught.value) == f"cannot read {tmp_path / 'missing.jsonl'}: No such file or directory"
