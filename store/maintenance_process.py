"""The maintenance of a reading handle (Store.open(reading=True)), done by another process.

A reading handle's environment is read-only: it never waits for LMDB's write lock, which another
process may hold for as long as it likes (one stopped inside its commit holds it until it goes
on or dies). When a read finds maintenance due (a lapsed lease, an expired message, a timed-out
transaction, a dead holder's messages), a new Python process (`_CHILD`) opens the store
writable, as any command does, runs the maintenance until none is due (Store._write) and exits;
the reader waits for it a while and then reads what it committed. If it is not done in time, it is killed (a write it had not committed
is no write: LMDB discards it), and the read shows the store as last committed. A new process,
not a fork: LMDB allows one environment per process, and a forked child may neither use its
parent's nor open its own (py-lmdb's "already open in this process"), nor close the parent's
(that would free the parent's reader slot). The reader's environment and signal handlers are
untouched: Ctrl-C while it waits is its usual Ctrl-C (the process is killed first).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
import subprocess
import sys
from pathlib import Path

_DONE = "done"
# the other process: open writable, maintain until none is due, say `done` or why not on stdout
_CHILD = f"""
import sys
from store.engine import Store
from store.errors import StoreError
path, guid, allow_unsafe, allow_foreign = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1"
try:
    with Store.open(path, allow_unsafe_permissions=allow_unsafe, allow_foreign_owner=allow_foreign) as st:
        with st.as_is():
            found = st.info().guid
        if found == guid:
            st._write(lambda t: None)
            said = {_DONE!r}
        else:
            said = "the store at " + path + " is another one now (queue manager " + found + "): it was replaced"
except StoreError as exc:
    said = "the store cannot be written here: " + exc.message
except Exception as exc:
    said = type(exc).__name__ + ": " + str(exc)
sys.stdout.write(said.replace("\\n", " ") + "\\n")
"""


def maintain_in_child(path: Path, guid: str, allow_unsafe: bool, allow_foreign: bool, *,
                      wait: float) -> str | None:
    """Run the maintenance of the store at `path` (if it is still the store `guid`: a store
    moved away and another made at its path is not maintained for the reader of the first) in
    another process, waiting up to `wait` seconds. None when it was done; else why not, to say (the reader shows the store as last
    committed)."""
    here = str(Path(__file__).resolve().parent.parent)  # where `store` is imported from
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (here, os.environ.get("PYTHONPATH"))))}
    # -P: no current directory first on sys.path (a store.py there would run instead, as this
    # user: as root, for a root reader); -s: no user site-packages either
    argv = [sys.executable, "-P", "-s", "-c", _CHILD, os.fspath(path), guid, str(int(allow_unsafe)),
            str(int(allow_foreign))]
    try:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, env=env, close_fds=True,
                                 preexec_fn=_die_with_parent(os.getpid()))
    except OSError as exc:
        return f"cannot start the process that applies them: {exc.strerror or exc}"
    try:
        said, _ = child.communicate(timeout=wait)
    except subprocess.TimeoutExpired:
        return (f"they were not applied within {wait:g}s: another process holds the store's write lock "
                f"(a writer stopped inside its commit?), or this host is very busy")
    finally:
        if child.poll() is None:  # timed out, or this process is interrupted: not left behind
            child.kill()
            child.wait()
    text = said.decode("utf-8", "replace").strip()
    if text == _DONE:
        return None
    return text or f"the process that applies them ended with status {child.returncode}"


def _die_with_parent(parent: int) -> Callable[[], None]:
    """In the child before exec: killed when the reader dies (Linux's PR_SET_PDEATHSIG), even by
    a signal it does not handle (SIGHUP) or SIGKILL, so that no process waits on the write lock
    for a reader long gone; and gone at once if the reader died before this was set."""
    def setup() -> None:
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass  # not Linux: the reader's kill on its way out is all there is
        if os.getppid() != parent:
            os._exit(1)
    return setup
