"""completions/ and man/ are generated from the app by scripts/gen_docs.py and kept current
(STYLE practice 9): stale files fail here, every command has a page and completes in every
shell, the pages render without a groff warning, and the bash completion really completes."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer

from mqcli.app import app

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gen_docs.py"
BASH = ROOT / "completions" / "mqcli.bash"
ZSH = ROOT / "completions" / "_mqcli"
FISH = ROOT / "completions" / "mqcli.fish"
MAN = ROOT / "man"
REGENERATE = "python scripts/gen_docs.py"


def _tree() -> dict[tuple[str, ...], click.Command]:
    """Every command of the app by path, () being mqcli itself; read independently of the
    generator so that a generator that skips a command is caught."""
    found: dict[tuple[str, ...], click.Command] = {}

    def walk(cmd: click.Command, ctx: click.Context, path: tuple[str, ...]) -> None:
        found[path] = cmd
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub, click.Context(sub, info_name=name, parent=ctx), path + (name,))

    root = typer.main.get_command(app)
    walk(root, click.Context(root, info_name="mqcli"), ())
    return found


TREE = _tree()
COMMANDS = [path for path in TREE if path]
GROUPS = {path: list(cmd.commands) for path, cmd in TREE.items() if isinstance(cmd, click.Group)}


def _long_options(cmd: click.Command) -> list[str]:
    return [n for p in cmd.params if isinstance(p, click.Option) and not p.hidden
            for n in p.opts + p.secondary_opts if n.startswith("--")]


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_docs"] = module  # dataclasses look their module up while it loads
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["gen_docs"]
    return module


def _run_bash(script: str) -> str:
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", f"source {BASH}\n{script}"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and not result.stderr, result.stderr
    return result.stdout


_COMPLETE = """
complete_line() {
    COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
    _mqcli
    echo "${COMPREPLY[*]}"
}
"""


def _bash_complete(*lines: list[str]) -> list[set[str]]:
    calls = "\n".join("complete_line " + " ".join(f"'{w}'" for w in words) for words in lines)
    out = _run_bash(_COMPLETE + calls).split("\n")
    return [set(line.split()) for line in out[:len(lines)]]


# ---- (1) up to date ---------------------------------------------------------------------

def test_generated_files_are_up_to_date():
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True,
                            text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, (
        f"completions/ or man/ are stale: run `{REGENERATE}` and commit the result\n{result.stderr}")


def test_check_mode_names_stale_missing_and_extra_files_and_write_mode_fixes_them(tmp_path, capsys):
    gen = _load_generator()
    gen.ROOT = tmp_path
    assert gen.main([]) == 0
    (tmp_path / "man" / "mqcli-put.1").write_text("stale\n")
    (tmp_path / "completions" / "mqcli.fish").unlink()
    (tmp_path / "man" / "mqcli-gone.1").write_text(".TH GONE 1\n")
    capsys.readouterr()

    assert gen.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "stale: man/mqcli-put.1" in err
    assert "missing: completions/mqcli.fish" in err
    assert "not generated (remove it): man/mqcli-gone.1" in err
    assert f"run `{REGENERATE}`" in err
    assert (tmp_path / "man" / "mqcli-put.1").read_text() == "stale\n"  # --check changes nothing

    assert gen.main([]) == 0
    assert not (tmp_path / "man" / "mqcli-gone.1").exists()
    assert gen.main(["--check"]) == 0


def test_generated_files_hold_no_absolute_paths_or_dates():
    for path in [BASH, ZSH, FISH, *MAN.glob("*.1")]:
        text = path.read_text(encoding="utf-8")
        assert str(ROOT) not in text, path
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), path


# ---- (2) every command is covered -------------------------------------------------------

def test_every_command_has_a_man_page_and_no_page_lacks_a_command():
    expected = {"mqcli.1"} | {"mqcli-" + "-".join(path) + ".1" for path in COMMANDS}
    assert {p.name for p in MAN.glob("*.1")} == expected
    for path in COMMANDS:
        page = (MAN / ("mqcli-" + "-".join(path) + ".1")).read_text(encoding="utf-8")
        assert page.count(".SH NAME") == 1 and ".SH SYNOPSIS" in page and ".SH OPTIONS" in page
        for option in _long_options(TREE[path]):
            assert "\\fB" + option.replace("-", "\\-") + "\\fR" in page, (path, option)
    overview = (MAN / "mqcli.1").read_text(encoding="utf-8")
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "EXIT STATUS",
                    "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"):
        assert f".SH {section}\n" in overview, section
    for path in COMMANDS:
        assert "\\fB" + " ".join(path).replace("-", "\\-") + "\\fR" in overview, path


def test_every_command_and_option_completes_in_bash():
    groups = list(GROUPS)
    leaves = [path for path in COMMANDS if path not in GROUPS]
    results = _bash_complete(*(["mqcli", *path, ""] for path in groups),
                             *(["mqcli", *path, "--"] for path in leaves))
    for path, got in zip(groups, results):
        assert got == set(GROUPS[path]), path
    for path, got in zip(leaves, results[len(groups):]):
        assert set(_long_options(TREE[path])) <= got, path


def _zsh_function(text: str, path: tuple[str, ...]) -> str:
    name = "_mqcli" + "".join("__" + p.replace("-", "_") for p in path)
    match = re.search(rf"^{name}\(\) {{\n(.*?)^}}$", text, re.M | re.S)
    assert match, f"no zsh function {name}"
    return match.group(1)


def test_every_command_and_option_is_in_the_zsh_completion():
    text = ZSH.read_text(encoding="utf-8")
    assert text.startswith("#compdef mqcli\n")
    for path, names in GROUPS.items():
        body = _zsh_function(text, path)
        for name in names:
            assert f"'{name}:" in body and f"{name}) _mqcli" in body, (path, name)
    for path in COMMANDS:
        body = _zsh_function(text, path)
        for option in _long_options(TREE[path]):
            assert re.search(rf"[,'){{*]{re.escape(option)}[=\[,}}]", body), (path, option)


def test_every_command_and_option_is_in_the_fish_completion():
    text = FISH.read_text(encoding="utf-8")
    for path, names in GROUPS.items():
        cond = "-n '__mqcli_at \\'" + " ".join(path) + "\\''"
        for name in names:
            assert f"complete -c mqcli {cond} -a '{name}' " in text, (path, name)
    for path in COMMANDS:
        cond = "-n '__mqcli_at \\'" + " ".join(path) + "\\''"
        lines = [line for line in text.splitlines() if line.startswith(f"complete -c mqcli {cond} ")]
        for option in _long_options(TREE[path]):
            assert any(f" -l {option[2:]} " in line for line in lines), (path, option)


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_commands_and_output_modes():
    def complete(line: str) -> set[str]:
        result = subprocess.run(["fish", "--no-config", "-c", f"source {FISH}; complete -C '{line}'"],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and not result.stderr, result.stderr
        return {row.split("\t")[0] for row in result.stdout.splitlines()}

    assert complete("mqcli qu") == {"queue"}
    assert complete("mqcli --store /tmp/x queue ") == set(GROUPS[("queue",)])
    assert complete("mqcli put q -o ") == {"text", "json", "jsonl", "body", "hex"}


# ---- (3) the pages render cleanly -------------------------------------------------------

@pytest.mark.skipif(shutil.which("groff") is None,
                    reason="groff is not installed (apt-get install groff-base; CI installs it)")
def test_man_pages_render_without_groff_warnings():
    pages = sorted(str(p) for p in MAN.glob("*.1"))
    result = subprocess.run(["groff", "-man", "-ww", "-z", *pages], capture_output=True, text=True,
                            timeout=120)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.skipif(shutil.which("groff") is None,
                    reason="groff is not installed (apt-get install groff-base; CI installs it)")
def test_man_pages_show_backslashes_hyphens_and_examples_as_typed():
    result = subprocess.run(["groff", "-man", "-Tascii", "-P-c", "-P-b", "-P-u",
                             str(MAN / "mqcli-delete.1")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert "mqcli delete orders --msg-id '6f1c2d3e-...-9a0b\\17'" in result.stdout
    assert "--lock-id INTEGER" in result.stdout


# ---- (4) and (5) the shells accept the scripts ------------------------------------------

def test_bash_completion_parses():
    result = subprocess.run(["bash", "-n", str(BASH)], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completion_parses():
    result = subprocess.run(["zsh", "-n", str(ZSH)], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completion_parses():
    result = subprocess.run(["fish", "--no-config", "-n", str(FISH)], capture_output=True, text=True,
                            timeout=60)
    assert (result.returncode, result.stderr) == (0, "")


def test_bash_completes_commands_options_and_values():
    got = _bash_complete(
        ["mqcli", "qu"],
        ["mqcli", "queue", "cr"],
        ["mqcli", "--store", "/tmp/x", "-o", "json", "queue", "c"],
        ["mqcli", "put", "q", "-o", ""],
        ["mqcli", "get", "q", "--output", "=", "js"],  # --output=js, split at "=" by bash
        ["mqcli", "qmgr", "set", "--no"],
        ["mqcli", "nonsense", ""],
    )
    assert got == [
        {"queue"},
        {"create"},
        {"create"},
        {"text", "json", "jsonl", "body", "hex"},
        {"json", "jsonl"},
        {"--no-throttle"},
        set(),
    ]
