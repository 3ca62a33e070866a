"""CLI, through the installed entry point: only `init` makes a store (a mistyped --store or
MQCLI_STORE must not become a new, empty queue manager), an empty store path is a usage
error, and names and labels with control characters are refused with exit 2."""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest

from cli_helpers import ERROR_PREFIX, Cli, mqcli_command, run_mqcli

# every command that opens a store, as a user would type it (none of them may make one)
STORE_COMMANDS = [
    ("info",), ("stats",), ("check",), ("sweep",), ("put", "q", "hi"), ("get", "q"),
    ("browse", "q"), ("queue", "list"), ("queue", "create", "q"), ("qmgr", "set", "--name", "x"),
    ("tx", "begin"), ("export",), ("link", "list"), ("outgoing", "list"), ("inflight",),
    ("backup", "{tmp}/copy"), ("trace", "show", "q"),
]


def _tree(path) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), path)
                  for d, dirs, files in os.walk(path) for n in dirs + files)


@pytest.mark.parametrize("via", ["--store", "MQCLI_STORE"])
def test_every_command_but_init_on_a_path_without_a_store_exits_11_and_creates_nothing(tmp_path, via):
    missing = tmp_path / "typo" / "qm1"
    before = _tree(tmp_path)
    for args in STORE_COMMANDS if via == "--store" else STORE_COMMANDS[:4]:
        args = [a.format(tmp=tmp_path) for a in args]
        if via == "--store":
            r = run_mqcli(["--store", missing, *args], env={"XDG_DATA_HOME": str(tmp_path / "xdg")})
        else:
            r = run_mqcli(args, env={"MQCLI_STORE": str(missing), "XDG_DATA_HOME": str(tmp_path / "xdg")})
        assert r.code == 11, r
        assert r.err_lines == [f"{ERROR_PREFIX}no store at {missing}; create it with "
                               f"`mqcli init --store {missing}` [MQ_ERROR_STORE_UNAVAILABLE]"], r
        assert _tree(tmp_path) == before, args  # no directory, no file, no wait/


def test_a_directory_that_exists_but_holds_no_store_is_left_untouched(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o755)
    r = run_mqcli(["--store", empty, "put", "q", "hi"])
    assert r.code == 11 and "no store at" in r.stderr
    assert os.listdir(empty) == [] and oct(empty.stat().st_mode & 0o777) == "0o755"


def test_init_makes_the_store_the_message_names_and_then_commands_work(tmp_path):
    path = tmp_path / "with space" / "qm1"
    r = run_mqcli(["--store", path, "info"])
    advice = f"mqcli init --store {shlex.quote(str(path))}"
    assert r.code == 11 and advice in r.stderr
    assert run_mqcli(shlex.split(advice)[1:] + ["-q"]).code == 0  # the advice, run as given
    assert run_mqcli(["--store", path, "queue", "create", "q", "-q"]).code == 0
    assert run_mqcli(["--store", path, "put", "q", "hi", "-q"]).code == 0
    assert run_mqcli(["--store", path, "get", "q", "-o", "body"]).stdout == b"hi\n"


def test_an_empty_store_path_is_a_usage_error(tmp_path):
    for args, env in ((["--store", "", "init"], {}), (["stats", "--store", ""], {}),
                      (["stats"], {"MQCLI_STORE": ""}), (["init"], {"MQCLI_STORE": ""})):
        proc = subprocess.run([*mqcli_command(), *args], capture_output=True, cwd=tmp_path, timeout=60,
                              env={**os.environ, "XDG_DATA_HOME": str(tmp_path / "xdg"), **env})
        errors = [line for line in proc.stderr.decode().splitlines() if line.startswith(ERROR_PREFIX)]
        assert proc.returncode == 2 and len(errors) == 1 and errors[0].endswith("[USAGE]"), proc
    assert os.listdir(tmp_path) == []  # not the current directory, not the default store



def test_init_on_a_path_that_is_not_utf8_is_exit_2_and_makes_nothing(tmp_path):
    # LMDB opens UTF-8 paths only: init found out after it had made the directory, its wait/,
    # the marker and lock.mdb, and left them (exit 2 all the same)
    path = os.path.join(os.fsencode(tmp_path), b"qm\xff")
    proc = subprocess.run([*mqcli_command(), "--store", path, "init"], capture_output=True, timeout=60,
                          env={**os.environ, "XDG_DATA_HOME": str(tmp_path / "xdg")})
    errors = [line for line in proc.stderr.decode().splitlines() if line.startswith(ERROR_PREFIX)]
    assert proc.returncode == 2 and len(errors) == 1 and "not valid UTF-8" in errors[0], proc
    assert os.listdir(tmp_path) == []


def test_a_store_made_and_used_under_umask_0777_keeps_its_directories_usable(tmp_path):
    # mkdir's mode is masked by the umask: under 0777 the store's wait/ and holders/ were made
    # mode 000, and a user who is not root could neither wait for a message nor hold one
    store = tmp_path / "qm1"
    script = ("umask 777 && mqcli init -q && mqcli queue create q -q && mqcli put q hi -q && "
              "mqcli get q --wait 10ms --confirm-id 7 -o body && (mqcli get q --wait 10ms; test $? = 3)")
    proc = subprocess.run(["sh", "-c", script.replace("mqcli ", shlex.join(mqcli_command()) + " ")],
                          capture_output=True, timeout=120,
                          env={**os.environ, "MQCLI_STORE": str(store), "XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert proc.returncode == 0 and proc.stdout.endswith(b"\nhi\n"), proc
    modes = {name: oct(os.stat(store / name).st_mode & 0o777) for name in ("", "wait", "holders")}
    assert modes == {"": "0o700", "wait": "0o700", "holders": "0o700"}

# ---- names with control characters ----------------------------------------------------------

@pytest.fixture
def store(tmp_path):
    cli = Cli(tmp_path / "store", tmp_path / "xdg")
    assert cli.subprocess("init", "--name", "qm1", "-q").code == 0
    assert cli.subprocess("queue", "create", "q", "-q").code == 0
    return cli


def _refused(cli: Cli, *args: str) -> str:
    r = cli.subprocess(*args)
    assert r.code == 2, r
    errors = [line for line in r.err_lines if line.startswith(ERROR_PREFIX)]
    assert len(errors) == 1 and errors[0].endswith("]") and "control character" in errors[0], r
    return errors[0]


@pytest.mark.parametrize("bad", ["a\nb", "esc\x1b[31mred", "c1\x85x"])  # argv cannot hold NUL
def test_names_and_labels_with_control_characters_are_refused_with_exit_2(store, tmp_path, bad):
    before = store.subprocess("info", "-o", "json").json()
    queues = store.subprocess("queue", "list", "-o", "json").json()
    _refused(store, "qmgr", "set", "--name", bad)
    _refused(store, "queue", "create", "fine", "--label", bad)
    _refused(store, "queue", "set", "q", "--label", bad)
    _refused(store, "put", "q", "body", "--label", bad)
    for name_args in (("queue", "create", bad), ("link", "add", bad, "127.0.0.1:7000", "--key-file", "k")):
        r = store.subprocess(*name_args)  # names already had a character set; still exit 2
        assert r.code == 2 and r.stderr.count("\n") == 1, r
    fresh = tmp_path / "fresh"
    r = run_mqcli(["--store", fresh, "init", "--name", bad])
    assert r.code == 2 and "control character" in r.stderr, r
    assert not fresh.exists()  # refused before anything was made
    after = store.subprocess("info", "-o", "json").json()
    assert after["name"] == before["name"] == "qm1" and after["sequential_id"] == before["sequential_id"]
    assert store.subprocess("queue", "list", "-o", "json").json() == queues
    assert store.subprocess("check").code == 0


def test_printable_names_and_labels_are_still_accepted(store):
    assert store.subprocess("qmgr", "set", "--name", "Zürich qm ☃", "-q").code == 0
    assert store.subprocess("info", "-o", "json").json()["name"] == "Zürich qm ☃"
    assert store.subprocess("queue", "set", "q", "--label", "payroll — 2026", "-q").code == 0
    record = store.subprocess("put", "q", "x", "--label", "étiquette", "-o", "json").json()
    assert record["label"] == "étiquette"


def test_control_characters_are_c0_del_and_c1_and_nothing_printable():
    from store.arguments import control_character

    for text, found in (("a\rb", "\r"), ("tab\there", "\t"), ("del\x7f", "\x7f"), ("\x00nul", "\x00"),
                        ("c1\x9f", "\x9f"), ("ok", None), ("Zürich ☃ — \u00a0", None)):
        assert control_character(text) == found, text
