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
import subprocess
import sys
from pathlib import Path

_DONE = "done"
# the other process: open writable, maintain until none is due, say `done` or why not on stdout
_CHILD = """
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
            said = "done"
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
    argv = [sys.executable, "-c", _CHILD, os.fspath(path), guid, str(int(allow_unsafe)), str(int(allow_foreign))]
    try:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, env=env, close_fds=True)
    except OSError as exc:
        return f"cannot start the process that applies them: {exc.strerror or exc}"
    try:
        said, _ = child.communicate(timeout=wait)
    except subprocess.TimeoutExpired:
        return f"another process has held the store's write lock for {wait:g}s (a writer stopped inside its commit?)"
    finally:
        if child.poll() is None:  # timed out, or this process is interrupted: not left behind
            child.kill()
            child.wait()
    text = said.decode("utf-8", "replace").strip()
    if text == _DONE:
        return None
    return text or f"the process that applies them ended with status {child.returncode}"
