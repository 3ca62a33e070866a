"""The README keeps its promises: the two quick-start commands, CI running the test command,
and every command in the reference."""

import re
from pathlib import Path

import typer

from mqcli.app import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def command_paths(group, prefix=()):
    for name, cmd in sorted(group.commands.items()):
        path = (*prefix, name)
        if hasattr(cmd, "commands"):
            yield from command_paths(cmd, path)
        else:
            yield " ".join(path)


def quick_start_commands():
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_readme_has_the_two_quick_start_commands():
    install_and_run, install_and_test = quick_start_commands()
    assert "pip install" in install_and_run and "mqcli" in install_and_run
    assert "pip install" in install_and_test and "pytest" in install_and_test


def test_ci_runs_the_readmes_test_command():
    _, install_and_test = quick_start_commands()
    assert install_and_test in (ROOT / ".ci" / "run").read_text()


def test_every_command_is_in_the_command_reference():
    reference = README.split("## Command reference", 1)[1]
    missing = [path for path in command_paths(typer.main.get_command(app))
               if f"`{path} " not in reference and f"`{path}`" not in reference and f", `{path}" not in reference]
    assert missing == []


def test_every_command_has_help_with_an_example():
    for path in command_paths(typer.main.get_command(app)):
        cmd = typer.main.get_command(app)
        for part in path.split():
            cmd = cmd.commands[part]
        assert cmd.help and "Example" in cmd.help, path
