"""CLI: global options before and on each command, MQCLI_STORE, output modes, data on stdout and
diagnostics on stderr, -q, --version, and `--help` with an example for every command."""

import click
import pytest
import typer

from cli_helpers import invoke
from mqcli import __version__
from mqcli.app import app


def _commands(group: click.Group, path=()):
    """Every command path of the app: (('init',), ('queue', 'create'), ...), groups included."""
    for name, command in group.commands.items():
        yield (*path, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


ROOT = typer.main.get_command(app)
COMMANDS = sorted(_commands(ROOT))
GROUPS = [p for p in COMMANDS if isinstance(ROOT.commands[p[0]], click.Group) and len(p) == 1]
LEAVES = [p for p in COMMANDS if p not in GROUPS]

EXPECTED = {("init",), ("info",), ("qmgr",), ("qmgr", "set"), ("queue",), ("queue", "create"),
            ("queue", "list"), ("queue", "show"), ("queue", "set"), ("queue", "purge"),
            ("queue", "delete"), ("put",), ("get",), ("browse",), ("unlock",), ("confirm",), ("undo",),
            ("delete",), ("move",), ("inflight",), ("sweep",), ("stats",), ("export",), ("import",),
            ("check",), ("backup",), ("bench",)}


def test_every_command_of_this_suite_exists():
    assert EXPECTED <= set(COMMANDS)


@pytest.mark.parametrize("path", LEAVES, ids=[" ".join(p) for p in LEAVES])
def test_every_command_help_exits_0_with_an_example(tmp_path, path):
    for flag in ("--help", "-h"):
        r = invoke([*path, flag], env={"MQCLI_STORE": str(tmp_path / "s")})
        assert r.code == 0, r
        assert r.out.startswith(f"Usage: mqcli {' '.join(path)} ")
        assert "Example" in r.out, r.out
        assert r.stderr == ""
    assert not (tmp_path / "s").exists()  # --help opens no store


@pytest.mark.parametrize("path", GROUPS, ids=[" ".join(p) for p in GROUPS])
def test_every_command_group_help_has_an_example(path):
    r = invoke([*path, "--help"])
    assert r.code == 0
    assert "Example" in r.out


def test_root_help_has_an_example():
    r = invoke(["--help"])
    assert r.code == 0 and "Example" in r.out and "Commands" in r.out


def test_version():
    for args in (["--version"], ["--version", "info"]):
        r = invoke(args)
        assert r.code == 0 and r.out == f"mqcli {__version__}\n" and r.stderr == ""


# ---- --store, MQCLI_STORE, -o, -q: before the command and on it ---------------------------


def test_global_options_work_before_the_command_and_on_it(tmp_path):
    store = tmp_path / "explicit"
    base = {"MQCLI_STORE": None, "XDG_DATA_HOME": str(tmp_path / "xdg")}
    assert invoke(["init", "--store", store, "-q"], env=base).code == 0
    before = invoke(["--store", store, "-o", "json", "info"], env=base)
    after = invoke(["info", "--store", store, "-o", "json"], env=base)
    assert before.code == after.code == 0
    assert before.json()["path"] == after.json()["path"] == str(store)
    assert before.json()["guid"] == after.json()["guid"]
    mixed = invoke(["--store", store, "info", "--output", "json"], env=base)
    assert mixed.json()["guid"] == before.json()["guid"]
    assert not (tmp_path / "xdg").exists()


def test_mqcli_store_is_honoured_and_store_option_wins(tmp_path):
    env = {"MQCLI_STORE": str(tmp_path / "from-env"), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    for name in ("from-env", "opt", "cmd"):
        assert invoke(["--store", tmp_path / name, "init", "-q"], env=env).code == 0
    assert invoke(["-o", "json", "info"], env=env).json()["path"] == str(tmp_path / "from-env")
    r = invoke(["--store", tmp_path / "opt", "-o", "json", "info"], env=env)
    assert r.json()["path"] == str(tmp_path / "opt")
    r = invoke(["--store", tmp_path / "root", "info", "--store", tmp_path / "cmd", "-o", "json"], env=env)
    assert r.json()["path"] == str(tmp_path / "cmd")  # the command's own value wins
    assert not (tmp_path / "root").exists()


def test_default_store_is_under_xdg_data_home(tmp_path):
    env = {"MQCLI_STORE": None, "XDG_DATA_HOME": str(tmp_path / "xdg")}
    assert invoke(["init", "-q"], env=env).code == 0
    r = invoke(["-o", "json", "info"], env=env)
    assert r.json()["path"] == str(tmp_path / "xdg" / "mqcli" / "store")


def test_command_output_option_wins_over_the_root_one(cli):
    cli.put("q", "x")
    r = cli.ok("-o", "json", "browse", "q", "-o", "body")
    assert r.stdout == b"x\n"


def test_output_modes_of_a_listing(cli):
    cli.put("q", "a")
    cli.put("q", "b")
    assert [m["body"] for m in cli.ok("browse", "q", "-o", "json").json()] == ["a", "b"]
    assert [m["body"] for m in cli.ok("browse", "q", "-o", "jsonl").jsonl()] == ["a", "b"]
    assert cli.ok("browse", "q", "-o", "body").stdout == b"a\nb\n"
    assert cli.ok("-o", "json", "browse", "q", "--priority", "0").json() == []
    assert cli.ok("browse", "q", "-o", "jsonl", "--priority", "0").stdout == b""


def test_data_goes_to_stdout_and_diagnostics_to_stderr(cli, tmp_path):
    cli.put("q", "a")
    r = cli.ok("export")
    assert r.jsonl()[-1]["body"] == "a" and r.stderr == "exported 1 messages\n"
    r = cli.ok("browse", "q", "--lock")
    assert r.out.strip().isdigit() and "msg_id=" in r.stderr and "msg_id=" not in r.out
    r = cli.ok("check")
    assert r.stdout == b"" and r.stderr


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_silences_diagnostics(cli, where):
    cli.put("q", "a")
    for args in (("export",), ("check",), ("init",), ("browse", "q", "--lock")):
        argv = ("-q", *args) if where == "before" else (*args, "--quiet")
        r = cli.ok(*argv)
        assert r.stderr == "", argv
    assert cli.ok("-q", "export").jsonl()  # the data is still there


def test_quiet_does_not_silence_errors(cli):
    r = cli.fails(6, "-q", "get", "nope")
    assert r.err_lines == [cli.error_line(r)]

