"""Security: what a store's files let others do, and what its data can make mqcli do.

- A store is created 0700 (directory, its wait/ directory) with files and FIFOs 0600, whatever
  the umask of the creating process (000 and 077 tried), through real `mqcli` processes.
- A store directory that group or others may write to is refused (exit 11, how to fix it)
  unless `--allow-unsafe-permissions`; a data file someone made readable is made 0600 again.
- No code path unpickles or evaluates data: the source of store/ and mqcli/ is parsed and no
  pickle-like module, eval/exec/compile, shell or os.system use is found; and message fields,
  JSONL records, labels and names built to run code when unpickled or evaluated are stored and
  printed back byte for byte while the file they would create never appears.
"""

from __future__ import annotations

import ast
import base64
import json
import os
import pickle
import stat
import subprocess
import time
from pathlib import Path

import pytest

from cli_helpers import mqcli_command, run_mqcli

ROOT = Path(__file__).resolve().parents[2]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _with_umask(umask: int, args: list, env: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen([*mqcli_command(), *map(str, args)], env={**os.environ, **env},
                            preexec_fn=lambda: os.umask(umask), **kw)


@pytest.mark.parametrize("umask", [0o000, 0o077, 0o022], ids=lambda m: f"umask-{m:03o}")
def test_a_store_is_created_0700_with_0600_files_whatever_the_umask(tmp_path, umask):
    store = tmp_path / "store"
    env = {"MQCLI_STORE": str(store)}
    for args in (["init", "-q"], ["queue", "create", "q", "-q"]):
        proc = _with_umask(umask, args, env, stdout=subprocess.DEVNULL)
        assert proc.wait(timeout=60) == 0
    # a waiting get makes its FIFO in wait/; look at it while it waits, then wake it
    getter = _with_umask(umask, ["get", "q", "--wait", "60s", "-o", "body"], env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60  # a hang guard, not a timing threshold
        while not list((store / "wait").iterdir()):
            assert getter.poll() is None and time.monotonic() < deadline, getter.stderr.read()
            time.sleep(0.01)
        fifos = list((store / "wait").iterdir())
        assert all(stat.S_ISFIFO(f.lstat().st_mode) and mode(f) == 0o600 for f in fifos)
        put = _with_umask(umask, ["put", "q", "hello"], env, stdout=subprocess.DEVNULL)
        assert put.wait(timeout=60) == 0
        out, err = getter.communicate(timeout=60)
        assert (getter.returncode, out) == (0, b"hello\n"), err
    finally:
        if getter.poll() is None:
            getter.kill()
            getter.wait()
    assert mode(store) == 0o700 and mode(store / "wait") == 0o700
    files = {p.name: mode(p) for p in store.iterdir() if p.is_file()}
    assert files == {"data.mdb": 0o600, "lock.mdb": 0o600, "mqcli-store.json": 0o600, "writer.lock": 0o600}


@pytest.mark.parametrize("unsafe", [0o720, 0o702, 0o770, 0o1777], ids=lambda m: f"mode-{m:o}")
def test_a_store_others_may_write_to_is_refused_unless_allowed(cli, unsafe):
    cli.put("q", "kept")
    os.chmod(cli.store, unsafe)
    for args in (["put", "q", "x"], ["browse", "q"], ["check"], ["backup", cli.store.parent / "b"]):
        r = cli.subprocess(*args)
        assert r.code == 11, r
        assert r.err_lines == [
            f"mqcli: error: the store directory {cli.store} is writable by group or others (mode "
            f"{unsafe:o}); run `chmod 700 {cli.store}` or pass --allow-unsafe-permissions "
            f"[MQ_ERROR_ACCESS_DENIED]"], r
    assert not (cli.store.parent / "b").exists()
    assert cli.subprocess("--allow-unsafe-permissions", "check", "-q").code == 0
    r = cli.subprocess("--allow-unsafe-permissions", "get", "q", "-o", "body")
    assert (r.code, r.stdout) == (0, b"kept\n")
    assert mode(cli.store) == unsafe  # allowing is not fixing: the operator decides


def test_a_store_file_made_readable_is_made_0600_again(cli):
    for name in ("data.mdb", "lock.mdb"):
        os.chmod(cli.store / name, 0o644)
    cli.subprocess("browse", "q")
    assert mode(cli.store / "data.mdb") == 0o600 and mode(cli.store / "lock.mdb") == 0o600


# ---- no code path unpickles or evaluates data ----------------------------------------------

UNPICKLERS = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle",
              "jsonpickle", "copyreg", "yaml"}
EVALUATORS = {"eval", "exec", "compile", "__import__", "execfile", "input"}
# multiprocessing pickles what goes through its queues; allowed only where the data is the
# product's own, between processes it forked itself (bench results: counts and timings)
MULTIPROCESSING_ALLOWED = {"mqcli/commands/bench.py"}


def _sources() -> list[Path]:
    files = sorted(p for d in ("store", "mqcli") for p in (ROOT / d).rglob("*.py"))
    assert len(files) > 20, files
    return files


def _findings(path: Path, rel: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
        where = f"{rel}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                if top in UNPICKLERS:
                    found.append(f"{where}: imports {name}")
                if top == "multiprocessing" and rel not in MULTIPROCESSING_ALLOWED:
                    found.append(f"{where}: imports multiprocessing (pickles data)")
        elif isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
            if isinstance(fn, ast.Name) and name in EVALUATORS and not _evaluates_nothing(node):
                found.append(f"{where}: calls {name}()")
            if isinstance(fn, ast.Attribute) and name in ("system", "popen", "spawnl", "spawnlp"):
                found.append(f"{where}: calls .{name}()")
            for kw in node.keywords:
                if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                    found.append(f"{where}: runs a shell")
    return found


def _evaluates_nothing(call: ast.Call) -> bool:
    """`exec("")`: no data, no code (mqcli/__main__.py clears CPython's escaped-interrupt flag so)."""
    return (isinstance(call.func, ast.Name) and call.func.id == "exec" and not call.keywords
            and len(call.args) == 1 and isinstance(call.args[0], ast.Constant) and call.args[0].value == "")


def test_no_source_file_unpickles_evaluates_or_runs_a_shell():
    findings = [f for path in _sources() for f in _findings(path, path.relative_to(ROOT).as_posix())]
    assert findings == []


def test_the_source_scan_finds_what_it_looks_for(tmp_path):
    """The scan itself: a file doing each forbidden thing is caught, line by line."""
    bad = tmp_path / "probe.py"
    bad.write_text("import pickle\nfrom marshal import loads\nimport multiprocessing\n"
                   "eval('1')\nexec('x=1')\nimport os\nos.system('true')\n"
                   "import subprocess\nsubprocess.run('true', shell=True)\n")
    found = _findings(bad, "store/probe.py")
    assert [f.split(": ", 1)[1] for f in found] == [
        "imports pickle", "imports marshal", "imports multiprocessing (pickles data)",
        "calls eval()", "calls exec()", "calls .system()", "runs a shell"]


class _Boom:
    """Unpickling this runs a shell command that creates the sentinel file."""

    def __init__(self, sentinel: Path) -> None:
        self.sentinel = sentinel

    def __reduce__(self):
        return (os.system, (f"touch {self.sentinel}",))


def test_data_built_to_run_code_is_stored_and_printed_back_verbatim(cli, tmp_path):
    sentinel = tmp_path / "pwned"
    payload = pickle.dumps(_Boom(sentinel))
    code = f"__import__('os').system('touch {sentinel}')"
    shell = f"$(touch {sentinel}); `touch {sentinel}`"

    r = cli.subprocess("put", "q", "-", "--label", code, "--correl-id", shell,
                       "--prop", f"k={code}", "-o", "json", input=payload)
    assert r.code == 0, r
    msg_id = r.json()["msg_id"]
    exported = cli.subprocess("export", "q")
    record = json.loads(exported.stdout.splitlines()[-1])  # after the queue's definition record
    assert base64.b64decode(record["body_b64"]) == payload
    assert (record["label"], record["correl_id"], record["props"]) == (code, shell, {"k": code})

    # the same record through import into another queue (a copy: its msg_id is stored), and
    # out again as raw bytes
    assert cli.subprocess("import", "-", "--queue", "again", "--new-ids", input=exported.stdout).code == 0
    got = cli.subprocess("get", "again", "-o", "body", "--delimiter", "")
    assert got.stdout == payload
    got = cli.subprocess("get", "q", "--msg-id", msg_id, "-o", "json")
    assert got.json()["label"] == code

    # as names and labels the tools parse: refused or not found, never run
    for args in (["browse", shell], ["put", code, "x"], ["browse", f"DIRECT=OS:{shell}\\q"],
                 ["trace", "decode", code], ["get", "q", "--wait", code]):
        assert cli.subprocess(*args).code in (2, 3, 6, 12), args
    assert not sentinel.exists()
    assert run_mqcli(["--store", cli.store, "check"]).code == 0
