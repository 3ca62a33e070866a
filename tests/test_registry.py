"""mqcli/registry.py is the one place a command is registered, and a process pays only for the
command it runs: the map against the command modules, the lazy tree against the whole one, and
what `put`, `get`, `browse`, `--help` and `--version` import, seen from a real subprocess."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer

import mqcli.commands
from mqcli.app import click_command, full_app, full_command
from mqcli.registry import COMMANDS, LazyGroup

ROOT = Path(__file__).resolve().parent.parent


def _registered_by_modules() -> tuple[dict[str, tuple[str, str]], set[tuple[str, str]]]:
    """What the command modules define: name -> (module, attribute) of every command their own
    `register(app)` adds, and (module, attribute) of each group (a module-level typer.Typer) of
    a module without `register`. A module that defines a command missing from the map shows here."""
    named: dict[str, tuple[str, str]] = {}
    groups: set[tuple[str, str]] = set()
    for info in pkgutil.iter_modules(mqcli.commands.__path__):
        module = importlib.import_module(f"mqcli.commands.{info.name}")
        register = getattr(module, "register", None)
        if register is None:
            groups |= {(info.name, k) for k, v in vars(module).items() if isinstance(v, typer.Typer)}
            continue
        scratch = typer.Typer()
        register(scratch)
        for command in scratch.registered_commands:
            name = command.name or command.callback.__name__.replace("_", "-")  # type: ignore[union-attr]
            named[name] = (info.name, command.callback.__name__)  # type: ignore[union-attr]
        for group in scratch.registered_groups:
            attribute = next(k for k, v in vars(module).items() if v is group.typer_instance)
            named[group.name] = (info.name, attribute)  # type: ignore[index]
    return named, groups


def test_every_command_a_module_defines_is_in_the_map():
    named, groups = _registered_by_modules()
    in_map = {name: (e.module, e.attribute) for name, e in COMMANDS.items()}
    assert {name: in_map.get(name) for name in named} == named
    assert groups <= set(in_map.values())
    assert set(in_map.values()) == set(named.values()) | groups


def test_the_help_line_of_each_entry_is_the_first_sentence_of_the_commands_help():
    tree = full_command()
    for name, entry in COMMANDS.items():
        assert entry.help == tree.commands[name].get_short_help_str(limit=10**6), name


def test_the_lazy_tree_and_the_whole_tree_are_the_same_commands_in_the_same_order():
    whole = typer.main.get_command(full_app())
    assert isinstance(whole, click.Group)
    assert list(whole.commands) == list(COMMANDS)
    lazy = click_command()
    assert isinstance(lazy, LazyGroup)
    assert lazy.list_commands(click.Context(lazy)) == list(COMMANDS)


def _help(command: click.Command) -> str:
    ctx = click.Context(command, info_name="mqcli", terminal_width=100, max_content_width=100)
    return command.get_help(ctx)


def test_the_lazy_root_help_is_the_whole_trees_help():
    whole = typer.main.get_command(full_app())
    fresh = typer.main.get_command(importlib.import_module("mqcli.app")._typer(LazyGroup))
    assert _help(fresh) == _help(whole)
    assert fresh.commands == {}  # listed from the map: nothing was built


def test_every_command_is_in_the_man_pages_and_the_completions():
    for name in COMMANDS:
        assert (ROOT / "man" / f"mqcli-{name}.1").exists(), name
        for script in ("completions/mqcli.bash", "completions/_mqcli", "completions/mqcli.fish"):
            assert name in (ROOT / script).read_text(encoding="utf-8"), (name, script)


# ---- what a process imports ------------------------------------------------------------

def _imports(args: list[str], store: Path) -> tuple[int, list[str]]:
    """Exit code and imported modules of `python -m mqcli ARGS` run in a child (as a user runs
    it: the entry point's main), read from sys.modules at exit."""
    probe = ("import atexit, json, os, sys\n"
             "atexit.register(lambda: os.write(int(os.environ['PROBE_FD']), json.dumps(sorted(sys.modules)).encode()))\n"
             "sys.argv = ['mqcli'] + json.loads(os.environ['PROBE_ARGS'])\n"
             "from mqcli.__main__ import main\nmain()\n")
    read, write = os.pipe()
    env = dict(os.environ, PROBE_ARGS=json.dumps(args), PROBE_FD=str(write), MQCLI_STORE=str(store),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", probe], env=env, pass_fds=(write,), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    _, err = proc.communicate(timeout=60)
    assert data, err
    return proc.returncode, json.loads(data)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("registry") / "store"
    for args in (["init"], ["queue", "create", "q"], ["put", "q", "first"]):
        done = subprocess.run([sys.executable, "-m", "mqcli", *args, "--store", str(path)], cwd=ROOT,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    return path


HEAVY = ("rich", "pyspark", "pyarrow", "matplotlib", "pandas")


@pytest.mark.parametrize("args", [["put", "q", "hello"], ["get", "q"], ["browse", "q"], ["put", "--help"],
                                  ["put", "q", "--file", "README.md"]], ids=" ".join)
def test_put_get_browse_import_no_other_command_and_nothing_heavy(args, store):
    code, modules = _imports(args, store)
    assert code == 0
    commands = {m for m in modules if m.startswith("mqcli.commands.")}
    if "--file" in args:  # an option mqcli/fastpath.py leaves to the Typer app: only its module
        assert commands == {"mqcli.commands.message"}
    else:  # the plain command lines run without Typer or click, and text output needs no JSON
        assert commands == set()
        assert {"typer", "click", "orjson", "uuid"}.isdisjoint(modules)
    assert [m for m in modules if m.split(".")[0] in HEAVY] == []
    # the parts of the store a put, get or browse never uses
    assert {"store.check", "store.selectors", "store.trace", "store.reports", "store.outgoing", "store.channel",
            "store.analytics"}.isdisjoint(modules)
    if "--help" in args:  # a help text opens no store
        assert "store.engine" not in modules


def test_the_root_help_imports_no_command_module(store):
    code, modules = _imports(["--help"], store)
    assert code == 0
    assert [m for m in modules if m.startswith("mqcli.commands") or m.split(".")[0] in HEAVY] == []
    assert "store.engine" not in modules


def test_version_imports_nothing_of_the_app(store):
    code, modules = _imports(["--version"], store)
    assert code == 0
    assert [m for m in modules if m.startswith("mqcli.") and m != "mqcli.__main__"] == []
    assert {"typer", "click", "store"}.isdisjoint(modules)


def test_the_dataclasses_a_put_loads_have_docstrings(store):
    """dataclasses computes `inspect.signature` for a class without a docstring, at import: a
    few milliseconds of every start-up for a dozen of them."""
    import dataclasses
    import inspect

    _, loaded = _imports(["put", "q", "hello"], store)
    bare = []
    for name in loaded:
        if name.startswith(("store", "mqcli.")) and name != "mqcli.__main__":
            module = importlib.import_module(name)
            bare += [f"{name}.{k}" for k, v in vars(module).items()
                     if inspect.isclass(v) and v.__module__ == name and dataclasses.is_dataclass(v)
                     and (v.__dict__.get("__doc__") or "").startswith(f"{v.__name__}(")]
    assert bare == []
