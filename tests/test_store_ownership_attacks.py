"""A store's files swapped or replaced by something else (store/ownership.py, real processes):
a FIFO or /dev/zero (through a symbolic link; /dev/zero itself is never touched) where
data.mdb or lock.mdb belongs, a hard-linked data.mdb, a store directory group- or
world-writable, a store on a read-only bind mount, data.mdb swapped for a link to another
store's while processes open it. Each is one error line, exit 11, no hang, no traceback, and a
store is never read through a swapped file."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from cli_helpers import ERROR_PREFIX, Cli


def _store(where: Path, body: str = "mine") -> Cli:
    cli = Cli(where / "store", where / "xdg")
    cli.ok("init", "-q")
    cli.ok("queue", "create", "q", "-q")
    cli.ok("put", "q", body, "-q")
    return cli


def _refused(cli: Cli, *args: str, status: str) -> str:
    r = cli.subprocess(*args, timeout=60)  # a FIFO opened for reading would block: the timeout says so
    assert r.code == 11, r
    assert "Traceback" not in r.stderr
    assert len(r.err_lines) == 1 and r.err_lines[0].startswith(ERROR_PREFIX), r
    assert r.err_lines[0].endswith(f"[{status}]"), r
    return r.err_lines[0]


@pytest.mark.parametrize("name", ["data.mdb", "lock.mdb"])
@pytest.mark.parametrize("what", ["fifo", "dev-zero-link", "hard-link"])
def test_a_store_file_replaced_is_refused_without_hanging(tmp_path, name, what):
    cli = _store(tmp_path)
    path = tmp_path / "store" / name
    if what == "hard-link":
        os.link(path, tmp_path / "second-name")
        line = _refused(cli, "browse", "q", status="MQ_ERROR_ACCESS_DENIED")
        assert "hard links" in line
        (tmp_path / "second-name").unlink()
        assert cli.subprocess("browse", "q", "-o", "body").stdout == b"mine\n"  # untouched
        return
    path.rename(tmp_path / "kept")
    if what == "fifo":
        os.mkfifo(path)
        assert "not a regular file" in _refused(cli, "get", "q", status="MQ_ERROR_STORE_UNAVAILABLE")
    else:
        path.symlink_to("/dev/zero")
        assert "symbolic link" in _refused(cli, "get", "q", status="MQ_ERROR_ACCESS_DENIED")
        assert Path("/dev/zero").is_char_device()
    path.unlink()
    (tmp_path / "kept").rename(path)
    assert cli.subprocess("get", "q", "-o", "body").stdout == b"mine\n"  # nothing was lost


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o1777])
def test_a_store_directory_others_may_write_to_is_refused(tmp_path, mode):
    cli = _store(tmp_path)
    os.chmod(tmp_path / "store", mode)
    try:
        line = _refused(cli, "put", "q", "x", status="MQ_ERROR_ACCESS_DENIED")
        assert "writable by group or others" in line and "--allow-unsafe-permissions" in line
        r = cli.subprocess("--allow-unsafe-permissions", "browse", "q", "-o", "body")
        assert r.code == 0 and r.stdout == b"mine\n", r
    finally:
        os.chmod(tmp_path / "store", 0o700)


def test_a_store_on_a_read_only_bind_mount_is_read_but_not_written(tmp_path):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root and mount(8) to bind-mount a store read-only")
    cli = _store(tmp_path)
    target = tmp_path / "ro"
    target.mkdir(mode=0o700)
    bound = subprocess.run(["mount", "--bind", str(tmp_path / "store"), str(target)], capture_output=True, text=True)
    if bound.returncode != 0:
        pytest.skip(f"bind mounts are not allowed here: {bound.stderr.strip()}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], capture_output=True, text=True)
        if ro.returncode != 0:
            pytest.skip(f"a read-only remount is not allowed here: {ro.stderr.strip()}")
        ro_cli = Cli(target, tmp_path / "xdg")
        for args in (("get", "q"), ("put", "q", "x"), ("init",)):
            assert "Read-only file system" in _refused(ro_cli, *args, status="MQ_ERROR_STORE_UNAVAILABLE")
        # the commands that only read take no write lock (docs/design.md#store): they read it
        assert ro_cli.subprocess("browse", "q", "-o", "body").stdout == b"mine\n"
        assert ro_cli.subprocess("info", "-o", "json").json()["messages"] == 1
    finally:
        subprocess.run(["umount", str(target)], capture_output=True)
    assert cli.subprocess("get", "q", "-o", "body").stdout == b"mine\n"


@pytest.mark.slow
@pytest.mark.parametrize("forged_name", ["store/data.mdb", "libforged.so"])
def test_data_mdb_swapped_while_processes_open_the_store_is_never_read(tmp_path, forged_name):
    """data.mdb exchanged (renameat2 RENAME_EXCHANGE, atomic) with a link to another store's,
    whose queue holds "forged", again and again while processes browse: each shows ours or
    refuses with exit 11, never the other store's. The other store's data file may have any
    name (a copy named like a shared library is no less foreign)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "renameat2"):
        pytest.skip("no renameat2 in this C library")
    cli = _store(tmp_path / "a")
    _store(tmp_path / "b", body="forged")
    data = os.fsencode(tmp_path / "a" / "store" / "data.mdb")
    evil = os.fsencode(tmp_path / "a" / "store" / "data.evil")
    forged = tmp_path / "b" / forged_name
    if not forged.exists():
        shutil.copyfile(tmp_path / "b" / "store" / "data.mdb", forged)
    os.symlink(forged, evil)
    at_cwd, exchange = -100, 2
    if libc.renameat2(at_cwd, data, at_cwd, evil, exchange) != 0:
        pytest.skip(f"RENAME_EXCHANGE is not supported here: {os.strerror(ctypes.get_errno())}")
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            libc.renameat2(at_cwd, data, at_cwd, evil, exchange)

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        results = [cli.subprocess("browse", "q", "-o", "body") for _ in range(40)]
    finally:
        stop.set()
        swapper.join()
    if os.path.islink(data):
        libc.renameat2(at_cwd, data, at_cwd, evil, exchange)
    for r in results:
        assert "Traceback" not in r.stderr
        assert b"forged" not in r.stdout, r
        assert (r.code, r.stdout) == (0, b"mine\n") or (r.code == 11 and len(r.err_lines) == 1), r
    assert cli.subprocess("browse", "q", "-o", "body").stdout == b"mine\n"
