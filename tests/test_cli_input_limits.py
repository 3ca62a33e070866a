"""Bad input against real `mqcli` processes: a store path that cannot be used (exit
11), and bodies larger than the store's max-message-size (exit 8), refused without reading
more of them than the limit."""

import os
import shutil
import subprocess
import sys
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
    assert mqcli("--store", store, "init")[0] == 0  # root's store: 0700
    assert mqcli("--store", store, "queue", "create", "q")[0] == 0
    assert store.stat().st_mode & 0o777 == 0o700
    if how == "--store":
        code, out, err = mqcli("--store", store, "get", "q", user=NOBODY)
    elif how == "MQCLI_STORE":
        code, out, err = mqcli("get", "q", env={"MQCLI_STORE": str(store)}, user=NOBODY)
    else:
        store = store / "sub"
        code, out, err = mqcli("--store", store, "info", user=NOBODY)
    assert (code, out) == (11, b""), err
    # the store's own error (store/environment.py layout_error), one line naming the path
    assert err.startswith("mqcli: error: ") and str(store) in err and "permission" in err.lower()
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
    assert err.startswith("mqcli: error: ") and str(path) in err
    assert err.count("\n") == 1 and "[MQ_ERROR_STORE_UNAVAILABLE]" in err


# ---- bodies over the store's max-message-size ---------------------------------------------

TOO_LARGE = ("mqcli: error: {where}the message body is larger than the store's max-message-size of "
             "4194304 bytes (`mqcli qmgr set --max-message-size`) [MQ_ERROR_INSUFFICIENT_RESOURCES]\n")

# Runs the command as its only child and prints that child's exit code and max RSS (os.wait4):
# a small parent, because a child's max RSS starts from its parent's size. Its data segment is
# capped, so that a command that reads an endless body fails fast instead of filling memory.
LAUNCHER = """
import os, resource, subprocess, sys
resource.setrlimit(resource.RLIMIT_DATA, (1536 << 20, 1536 << 20))
proc = subprocess.Popen(sys.argv[2:], stdin=open(sys.argv[1], "rb"), stderr=subprocess.PIPE)
err = proc.stderr.read()
_, status, usage = os.wait4(proc.pid, 0)
sys.stderr.buffer.write(err)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def measured(cli, *args, stdin="/dev/null"):
    """(exit code, max RSS in MiB, stderr) of `mqcli ARGS` run on `cli`'s store."""
    proc = subprocess.run([sys.executable, "-c", LAUNCHER, stdin, *mqcli_command(), *map(str, args)],
                          capture_output=True, env={**os.environ, **cli.env}, timeout=60)
    code, maxrss_kib = map(int, proc.stdout.split())
    return code, maxrss_kib / 1024, proc.stderr.decode("utf-8", "backslashreplace")


@pytest.mark.parametrize("args, stdin, where", [
    (["--file", "/dev/zero"], "/dev/null", ""),
    (["--file", "/dev/zero", "--count", "3"], "/dev/null", ""),
    (["-"], "/dev/zero", ""),
    (["--lines", "/dev/zero"], "/dev/null", "line 1: "),
    (["--lines", "-"], "/dev/zero", "line 1: "),
], ids=["file", "file-count", "stdin", "lines", "lines-stdin"])
def test_an_endless_body_is_refused_at_the_max_message_size_without_reading_it_all(cli, args, stdin, where):
    code, maxrss_mib, err = measured(cli, "put", "q", *args, stdin=stdin)
    assert (code, err) == (8, TOO_LARGE.format(where=where))
    assert maxrss_mib < 150  # the limit is 4 MiB; the old code read until MemoryError
    assert cli.json("queue", "show", "q")["depth"] == 0


def test_a_long_line_is_refused_naming_it_and_the_lines_before_its_batch_are_stored(cli, tmp_path):
    lines = tmp_path / "lines.txt"
    with open(lines, "wb") as out:
        out.write(b"short\n" * 2500)  # two whole batches of 1,000 and half of the third
        out.write(b"x" * (4194304 + 10) + b"\n")
        out.write(b"after\n")
    result = cli.subprocess("put", "q", "--lines", lines)
    assert result.code == 8
    assert result.stderr == TOO_LARGE.format(where="line 2501: ")
    assert len(result.out.splitlines()) == cli.json("queue", "show", "q")["depth"] == 2000


def test_lines_of_exactly_the_max_message_size_are_stored_with_lf_or_crlf(cli, tmp_path):
    lines = tmp_path / "lines.txt"
    body = b"y" * 4194304
    lines.write_bytes(body + b"\r\n" + body + b"\n" + body)
    result = cli.subprocess("put", "q", "--lines", lines)
    assert result.code == 0 and len(result.out.splitlines()) == 3
    got = cli.subprocess("get", "q", "--all", "-o", "body", "--delimiter", "|")
    assert got.stdout == (body + b"|") * 3


def test_a_large_file_is_refused_with_its_size_as_the_store_says_it(cli, tmp_path):
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(3 << 30)  # sparse: 3 GiB that take no disk
    code, maxrss_mib, err = measured(cli, "put", "q", "--file", big)
    assert code == 8 and maxrss_mib < 150
    assert err == ("mqcli: error: the message body is 3221225472 bytes, more than the store's "
                   "max-message-size of 4194304 bytes (`mqcli qmgr set --max-message-size`) "
                   "[MQ_ERROR_INSUFFICIENT_RESOURCES]\n")


def test_a_piped_body_a_little_over_the_limit_is_refused_with_its_size(cli):
    result = cli.subprocess("put", "q", "-", input=b"m" * (4194304 + 5))
    assert (result.code, result.stdout) == (8, b"")
    assert result.stderr.startswith("mqcli: error: the message body is 4194309 bytes, more than")
