"""Bad input against real `mqcli` processes: a store path that cannot be used (SPEC §6 exit
11), and bodies larger than the store's max-message-size (exit 8), refused without reading
more of them than the limit."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from cli_helpers import mqcli_command

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


# ---- a store path that cannot be used -----------------------------------------------------

@pytest.fixture
def public_dir():
    """A directory anyone may enter (pytest's tmp_path is private to its owner)."""
    path = Path(tempfile.mkdtemp(prefix="mqcli-perm-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def mqcli(*args, env=None, user=()):
    proc = subprocess.run([*user, *mqcli_command(), *map(str, args)], capture_output=True,
                          env={**os.environ, **(env or {})}, timeout=60, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "backslashreplace")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root to run mqcli as another user (setpriv)")
@pytest.mark.parametrize("how", ["--store", "MQCLI_STORE", "a path inside it"])
def test_a_store_the_user_may_not_read_is_exit_11_naming_it(public_dir, how):
    store = public_dir / "s"
    assert mqcli("--store", store, "queue", "create", "q")[0] == 0  # root's store: 0700
    assert store.stat().st_mode & 0o777 == 0o700
    if how == "--store":
        code, out, err = mqcli("--store", store, "get", "q", user=NOBODY)
    elif how == "MQCLI_STORE":
        code, out, err = mqcli("get", "q", env={"MQCLI_STORE": str(store)}, user=NOBODY)
    else:
        store = store / "sub"
        code, out, err = mqcli("--store", store, "info", user=NOBODY)
    assert (code, out) == (11, b""), err
    assert err.startswith(f"mqcli: error: cannot open the store at {store}: permission denied")
    assert err.endswith("[MQ_ERROR_ACCESS_DENIED]\n") and err.count("\n") == 1


@pytest.mark.parametrize("kind", ["file", "fifo", "symlink loop", "under a file"])
def test_a_store_path_that_is_not_a_directory_is_exit_11_naming_it(tmp_path, kind):
    (tmp_path / "afile").write_bytes(b"")
    if kind == "file":
        path = tmp_path / "afile"
    elif kind == "fifo":
        path = tmp_path / "afifo"
        os.mkfifo(path)
    elif kind == "symlink loop":
        path = tmp_path / "l1"
        os.symlink(tmp_path / "l2", path)
        os.symlink(path, tmp_path / "l2")
    else:
        path = tmp_path / "afile" / "sub"
    code, out, err = mqcli("--store", path, "info")
    assert (code, out) == (11, b""), err
    assert err.startswith(f"mqcli: error: cannot open the store at {path}: ")
    assert err.count("\n") == 1 and "[MQ_ERROR_STORE_UNAVAILABLE]" in err
