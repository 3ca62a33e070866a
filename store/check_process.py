"""`mqcli check` of a store that may be damaged: the check (store/check.py) runs in a forked
child, so that a bad page that kills LMDB's reader takes only the child down. The child's death
by a signal of damage is StoreCorrupt here; errors of opening come back as the same StoreError
classes."""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile

import lmdb

from .engine import Store
from .environment import RESTORE, lmdb_failed
from .errors import StoreCorrupt, StoreError, StoreUnavailable

# signals by which a process dies reading a damaged LMDB file: LMDB keeps no checksums and
# trusts its pages, so a bad page can fail one of its assertions (SIGABRT) or send a read past
# the end of the file or the map (SIGBUS, SIGSEGV)
_DAMAGE_SIGNALS = {"SIGABRT", "SIGBUS", "SIGSEGV", "SIGILL", "SIGFPE"}


def _error_classes() -> dict[str, type[StoreError]]:
    found: dict[str, type[StoreError]] = {}
    todo: list[type[StoreError]] = [StoreError]
    while todo:
        cls = todo.pop()
        found[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return found


def _check_here(path: str, allow_unsafe_permissions: bool, allow_foreign_owner: bool) -> dict[str, object]:
    """The child's side: open, check, and say what came out as a small JSON document."""
    try:
        with Store.open(path, allow_unsafe_permissions=allow_unsafe_permissions,
                        allow_foreign_owner=allow_foreign_owner, reading=True) as st:
            return {"problems": st.check()}
    except StoreError as exc:
        return {"error": type(exc).__name__, "message": exc.message}
    except lmdb.Error as exc:
        failed = lmdb_failed(exc, path)
        return {"error": type(failed).__name__, "message": failed.message}
    except Exception as exc:  # noqa: BLE001  (not a damaged store: a bug, reported as one by the parent)
        return {"error": None, "message": f"{type(exc).__name__}: {exc}"}


def check_isolated(path: str | os.PathLike[str], *, allow_unsafe_permissions: bool = False,
                   allow_foreign_owner: bool = False) -> list[str]:
    """Open the store at `path` and check it in a forked child process, so that a damaged
    file cannot take the caller down with it (`mqcli check`): the child's death by a signal
    is StoreCorrupt here. Errors of opening come back as the same StoreError classes."""
    path = os.fspath(path)
    if not hasattr(os, "fork"):
        with Store.open(path, allow_unsafe_permissions=allow_unsafe_permissions,
                        allow_foreign_owner=allow_foreign_owner, reading=True) as st:
            return st.check()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # or the child would inherit, and write again, what is buffered
    read_end, write_end = os.pipe()
    said = tempfile.TemporaryFile()  # noqa: SIM115  (the child's stderr: what LMDB prints as it aborts; closed below, after the fork)
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        status = 70
        for signum in (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS):
            signal.signal(signum, signal.SIG_DFL)  # it must die of them (mqcli/crash.py catches them)
        try:
            os.close(read_end)
            os.dup2(said.fileno(), 2)
            data = json.dumps(_check_here(path, allow_unsafe_permissions, allow_foreign_owner)).encode()
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as src:
            data = src.read()
    finally:
        _, wait_status = os.waitpid(pid, 0)
    with said:
        said.seek(0)
        last = said.read().decode("utf-8", "replace").strip().rpartition("\n")[2]
    if os.WIFSIGNALED(wait_status):
        name = signal.Signals(os.WTERMSIG(wait_status)).name
        if name in _DAMAGE_SIGNALS:
            why = f"{name}: {last[-200:]}" if last else name
            if name == "SIGBUS":  # a mapped page past the end of the file was read
                size = os.stat(os.path.join(path, "data.mdb")).st_size
                why = f"SIGBUS: it read past the end of data.mdb ({size} bytes): the file is truncated"
            raise StoreCorrupt(f"the store at {path} is damaged: reading it killed the check "
                               f"({why}); {RESTORE}")
        raise StoreUnavailable(f"the check of the store at {path} was killed ({name})")
    try:
        result = json.loads(data)
    except ValueError:
        raise StoreUnavailable(f"the check of the store at {path} stopped without a result "
                               f"(exit status {os.waitstatus_to_exitcode(wait_status)})") from None
    if "problems" in result:
        return list(result["problems"])
    cls = _error_classes().get(result["error"] or "")
    if cls is None:
        raise RuntimeError(result["message"])
    raise cls(result["message"])
