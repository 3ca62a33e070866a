"""Completion that knows the store: bash, zsh and fish, each run for real, complete the queue
names, outgoing queues' format names, transaction ids and link names of the store the command
line names (mqcli/complete.py, store/names.py); a missing store completes nothing and prints
nothing. The table of which parameter names what is checked against the click tree."""

from __future__ import annotations

import os
import pty
import select
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from test_generated_docs import TREE

from mqcli.complete import KINDS, PARAMETERS
from store import Store
from store.environment import committed_txnid
from store.links import generate_key_file

ROOT = Path(__file__).resolve().parent.parent
COMPLETIONS = ROOT / "completions"
QUEUES = {"dead-letter", "dead-letter-tx", "orders", "Orders.retry", "DIRECT=OS:qm2\\orders"}
needs = {shell: pytest.mark.skipif(shutil.which(shell) is None,
                                   reason=f"{shell} is not installed (.ci/run installs it)")
         for shell in ("zsh", "fish")}


# ---- the table against the click tree --------------------------------------------------

def _parameters() -> dict[str, dict[str, click.Parameter]]:
    """Each command's parameters by name, from the click tree test_generated_docs reads."""
    return {" ".join(path): {p.name: p for p in cmd.params if p.name} for path, cmd in TREE.items()}


#: parameters named like a queue, a transaction or a link whose value is not one in the store
NOT_FROM_THE_STORE = {
    ("backup", "target"): "a new directory",
    ("snapshot", "target"): "a directory to write the snapshot into",
    ("import", "source"): "a file",
    ("queue create", "name"): "a new queue",
    ("link add", "name"): "a new link",
    ("init", "name"): "the queue manager's name",
    ("qmgr set", "name"): "the queue manager's name",
    ("analyze health", "queue"): "a queue of the stores analyzed, not of --store",
    ("analyze routes", "queue"): "a queue of the stores analyzed, not of --store",
}
NAMING = {"queue", "queues", "source", "target", "dlq", "report_queue", "tx", "link", "name"}


def test_every_parameter_that_names_a_queue_transaction_or_link_is_in_the_table():
    tree = _parameters()
    for path, params in tree.items():
        for name, param in params.items():
            metavar = (getattr(param, "metavar", None) or "").upper()
            names_one = name in NAMING or metavar in ("QUEUE", "TX", "REPORT_QUEUE")
            if names_one and (path, name) not in NOT_FROM_THE_STORE:
                assert name in PARAMETERS.get(path, {}), f"`mqcli {path}` {name}: not in mqcli/complete.py"


def test_every_entry_of_the_table_is_a_parameter_of_its_command():
    tree = _parameters()
    for path, params in PARAMETERS.items():
        assert path in tree, f"no command `mqcli {path}`"
        for name, kind in params.items():
            assert name in tree[path], f"`mqcli {path}` has no parameter {name}"
            assert kind in KINDS


# ---- a store, and an mqcli on PATH running this checkout ------------------------------

@pytest.fixture(scope="module")
def env(tmp_path_factory):
    base = tmp_path_factory.mktemp("complete")
    store = Store.open(base / "store", create=True, name="qm1")
    store.create_queue("orders")
    store.create_queue("Orders.retry")
    store.put("DIRECT=OS:qm2\\orders", b"hello")  # makes the outgoing queue
    tx = store.tx_begin()
    store.add_link("qm2", "127.0.0.1:7000", str(generate_key_file(base / "qm2.key")))
    store.close()
    for name in ("paths/a", "paths/b"):
        (base / name).mkdir(parents=True)
    (base / "paths" / "c.txt").write_text("not a store\n")
    bin_dir = base / "bin"
    bin_dir.mkdir()
    (bin_dir / "mqcli").write_text(
        f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(ROOT))} exec {shlex.quote(sys.executable)} -m mqcli \"$@\"\n")
    (bin_dir / "mqcli").chmod(0o755)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("MQCLI_", "XDG_"))}
    environ.update(PATH=f"{bin_dir}{os.pathsep}{environ['PATH']}", MQCLI_STORE=str(base / "store"),
                   XDG_DATA_HOME=str(base / "xdg"), HOME=str(base))
    return {"environ": environ, "store": base / "store", "tx": str(tx), "base": base}


def _missing(env) -> dict[str, str]:
    return {**env["environ"], "MQCLI_STORE": str(env["base"] / "nowhere")}


# ---- the callback -----------------------------------------------------------------------

def _callback(env, *args: str, environ=None) -> subprocess.CompletedProcess:
    return subprocess.run(["mqcli", "__complete", *args], capture_output=True, text=True, timeout=60,
                          env=environ or env["environ"])


def test_the_callback_prints_the_names_of_each_kind(env):
    assert set(_callback(env, "queue").stdout.splitlines()) == QUEUES
    assert _callback(env, "outgoing").stdout.splitlines() == ["DIRECT=OS:qm2\\orders"]
    assert _callback(env, "tx").stdout.splitlines() == [env["tx"]]
    assert _callback(env, "link").stdout.splitlines() == ["qm2"]
    # names are case-insensitive: a lowercase word finds both
    assert set(_callback(env, "queue", "--", "or").stdout.splitlines()) == {"orders", "Orders.retry"}


def test_the_callback_neither_writes_nor_makes_a_store(env):
    before = committed_txnid(env["store"])
    mtime = (env["store"] / "data.mdb").stat().st_mtime_ns
    assert _callback(env, "queue", "--store", str(env["store"])).returncode == 0
    assert (committed_txnid(env["store"]), (env["store"] / "data.mdb").stat().st_mtime_ns) == (before, mtime)
    result = _callback(env, "queue", environ=_missing(env))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert not (env["base"] / "nowhere").exists()


def test_the_callback_imports_neither_typer_nor_rich_nor_the_engine(env):
    probe = ("import sys, runpy; sys.argv = ['mqcli', '__complete', 'queue']\n"
             "try:\n    runpy.run_module('mqcli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in ('typer', 'click', 'rich', 'store.engine', 'pyspark') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                            env={**env["environ"], "PYTHONPATH": str(ROOT)})
    assert result.stdout.splitlines()[-1] == "[]", result.stderr


def test_completion_prints_each_shells_script(env):
    for shell, name in (("bash", "mqcli.bash"), ("zsh", "_mqcli"), ("fish", "mqcli.fish")):
        result = subprocess.run(["mqcli", "completion", shell], capture_output=True, text=True, timeout=60,
                                env=env["environ"])
        assert result.returncode == 0 and result.stdout == (COMPLETIONS / name).read_text(), shell
    result = subprocess.run(["mqcli", "completion", "tcsh"], capture_output=True, text=True, timeout=60,
                            env=env["environ"])
    assert result.returncode == 2 and "'tcsh' is not one of" in result.stderr


# ---- bash: the completion function with COMP_WORDS / COMP_CWORD ------------------------

def _bash(env, *lines: str, environ=None) -> list[list[str]]:
    """COMPREPLY for each line, the cursor at its end; COMP_WORDS split as readline does with
    bash's default COMP_WORDBREAKS (= and : are words of their own)."""
    script = [f"source {shlex.quote(str(COMPLETIONS / 'mqcli.bash'))}"]
    for line in lines:
        pieces = line.replace("=", " = ").replace(":", " : ").split()
        if line.endswith((" ", "=", ":")):
            pieces.append("")
        script += [f"COMP_LINE={shlex.quote(line)}; COMP_POINT=${{#COMP_LINE}}",
                   "COMP_WORDS=(" + " ".join(shlex.quote(p) for p in pieces) + ")",
                   f"COMP_CWORD={len(pieces) - 1}; COMPREPLY=(); _mqcli",
                   "printf '%s\\n' \"${COMPREPLY[@]}\"; echo '--end--'"]
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", "\n".join(script)], capture_output=True,
                            text=True, timeout=120, env=environ or env["environ"])
    assert result.returncode == 0 and result.stderr == "", result.stderr
    out = result.stdout.split("--end--\n")[:-1]
    return [[w for w in chunk.splitlines() if w] for chunk in out]


def test_bash_completes_the_stores_names(env):
    get, move2, put2, commit, tx_opt, remove, show, direct, state, store_opt = _bash(
        env, "mqcli get ", "mqcli move orders ", "mqcli put orders ", "mqcli tx commit ", "mqcli get q --tx ",
        "mqcli link remove ", "mqcli outgoing show ", "mqcli get DIRECT=OS:q", "mqcli browse q --state ",
        f"mqcli --store={env['store']} get Ord")
    quoted = QUEUES - {"DIRECT=OS:qm2\\orders"} | {"DIRECT=OS:qm2\\\\orders"}  # as typed: backslash escaped
    assert set(get) == quoted and set(move2) == quoted
    assert put2 == []  # BODY names nothing
    assert commit == [env["tx"]] and tx_opt == [env["tx"]]
    assert remove == ["qm2"]
    assert show == ["DIRECT=OS:qm2\\\\orders"]
    assert direct == ["qm2\\\\orders"]  # the rest of the word after the last : piece
    assert state == ["put-unconfirmed", "available", "locked-browse", "get-unconfirmed",
                     "browse-get-unconfirmed", "tx-locked", "all"]
    assert set(store_opt) == {"Orders.retry", "orders"}
    # a store path: directories only
    assert sorted(_bash(env, f"mqcli --store {env['base']}/paths/")[0]) == [f"{env['base']}/paths/{d}" for d in "ab"]


def test_bash_completes_nothing_and_says_nothing_without_a_store(env):
    assert _bash(env, "mqcli get ", "mqcli tx commit ", f"mqcli --store {env['base']}/none get ",
                 environ=_missing(env)) == [[], [], []]


# ---- zsh: the completion system in an interactive zsh on a pty ---------------------------

_ZSHRC = """\
PS1='> '
fpath=({completions} $fpath)
autoload -Uz compinit && compinit -u -D
# every match the completion functions add, recorded (as comptest harnesses do)
compadd() {{
    if [[ " $* " == *" -"[OAD]" "* ]]; then builtin compadd "$@"; return; fi
    local -a hits
    builtin compadd -A hits "$@"
    (( $#hits )) && print -rl -- $hits >> {out}
    builtin compadd "$@"
}}
"""


def _zsh(env, line: str, environ=None) -> list[str]:
    home = Path(env["base"]) / f"zsh-{time.monotonic_ns()}"
    home.mkdir()
    out, done = home / "matches", home / "done"
    (home / ".zshrc").write_text(_ZSHRC.format(completions=COMPLETIONS, out=out))
    pid, fd = pty.fork()
    if pid == 0:  # the child: an interactive zsh reading our .zshrc
        os.execvpe("zsh", ["zsh", "-i"], {**(environ or env["environ"]), "ZDOTDIR": str(home), "TERM": "xterm"})
    seen = b""

    def read_until(predicate) -> None:
        nonlocal seen
        deadline = time.monotonic() + 60
        while not predicate() and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    seen += os.read(fd, 65536)
                except OSError:
                    return

    try:
        read_until(lambda: b"\x1b[?2004h" in seen)  # zle is reading keys
        # TAB, then (after the completion, keys being read in order) a line that says it is done
        os.write(fd, line.encode() + b"\t\x15touch " + str(done).encode() + b"\n")
        read_until(done.exists)
        os.write(fd, b"exit\n")
        read_until(lambda: os.waitpid(pid, os.WNOHANG) != (0, 0))
    finally:
        try:
            os.kill(pid, 9)  # still there only if it hung; then the asserts below say why
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)
    assert done.exists(), seen[-2000:]
    return out.read_text().splitlines() if out.exists() else []


@needs["zsh"]
def test_zsh_completes_the_stores_names(env):
    assert set(_zsh(env, "mqcli get ")) == QUEUES - {"DIRECT=OS:qm2\\orders"} | {"DIRECT=OS:qm2\\\\orders"}
    assert _zsh(env, "mqcli tx abort ") == [env["tx"]]
    assert _zsh(env, f"mqcli --store {env['store']} link remove ") == ["qm2"]


@needs["zsh"]
def test_zsh_completes_nothing_without_a_store(env):
    assert _zsh(env, "mqcli get ", environ=_missing(env)) == []


# ---- fish: complete -C -----------------------------------------------------------------

def _fish(env, line: str, environ=None) -> list[str]:
    script = f"source {shlex.quote(str(COMPLETIONS / 'mqcli.fish'))}; complete -C {shlex.quote(line)}"
    result = subprocess.run(["fish", "--no-config", "-c", script], capture_output=True, text=True, timeout=120,
                            env=environ or env["environ"])
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return [row.split("\t")[0] for row in result.stdout.splitlines()]


@needs["fish"]
def test_fish_completes_the_stores_names(env):
    assert set(_fish(env, "mqcli get ")) == QUEUES
    assert set(_fish(env, "mqcli move orders ")) == QUEUES
    assert _fish(env, "mqcli put orders ") == []
    assert _fish(env, "mqcli get q --tx ") == [env["tx"]]
    assert _fish(env, "mqcli dispatch --link ") == ["qm2"]
    assert _fish(env, "mqcli outgoing hold ") == ["DIRECT=OS:qm2\\orders"]
    assert "tx-locked" in _fish(env, "mqcli browse q --state ")
    assert _fish(env, f"mqcli get --store {env['base']}/paths/") == [f"{env['base']}/paths/{d}/" for d in ("a", "b")]


@needs["fish"]
def test_fish_completes_nothing_without_a_store(env):
    assert _fish(env, "mqcli get ", environ=_missing(env)) == []
    assert _fish(env, f"mqcli --store={env['base']}/none tx show ") == []
