"""A worker's lifeline: the commands `mqcli consume` runs die with it.

Each command runs in a session of its own (a Ctrl-C at the terminal is the worker's to act on),
so nothing ends it when the worker is killed outright (SIGKILL, the OOM killer). It would run
on while its message, back in the queue once the lease lapses, is handled a second time, and
a command still reading its body would see it end early. A small watcher process holds the
read end of a pipe that only the worker writes to. The worker tells it each command's process
group as it starts (`+PGID`) and as it ends (`-PGID`, before the worker reaps it, so the id
cannot be reused meanwhile). When the pipe reaches end of file, the worker is gone, and the
watcher kills the groups it was told of and still running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

# the watcher: `-I -S`, no site-packages and no mqcli to import, a few ms to start
_WATCHER = """
import os, signal, sys
groups = set()
for line in sys.stdin.buffer:
    if line[:1] == b"+":
        groups.add(int(line[1:]))
    elif line[:1] == b"-":
        groups.discard(int(line[1:]))
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""


class Lifeline:
    """The watcher of one worker; `with Lifeline() as line`. Leaving the block by an exception
    kills the commands still running first (their messages are undone after it), then ends
    the watcher, as does a normal end, with no command left to kill."""

    def __init__(self) -> None:
        self._groups: set[int] = set()
        self._lock = threading.Lock()
        self._watcher: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Lifeline:
        try:
            self._watcher = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHER], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            self._watcher = None  # no watcher: the commands outlive a killed worker, as before
        return self

    def watch(self, pgid: int) -> None:
        """A command started in process group `pgid`."""
        with self._lock:
            self._groups.add(pgid)
            self._send(b"+%d\n" % pgid)

    def release(self, pgid: int) -> None:
        """The command of group `pgid` ended (not reaped yet)."""
        with self._lock:
            self._groups.discard(pgid)
            self._send(b"-%d\n" % pgid)

    def _send(self, line: bytes) -> None:
        if self._watcher is not None and self._watcher.stdin is not None:
            try:
                os.write(self._watcher.stdin.fileno(), line)  # shorter than PIPE_BUF: whole or not at all
            except OSError:
                self._watcher = None  # the watcher is gone (killed): nothing more to tell it

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:
            with self._lock:
                for pgid in self._groups:
                    try:
                        os.killpg(pgid, signal.SIGKILL)
                    except OSError:
                        pass
        watcher, self._watcher = self._watcher, None
        if watcher is not None and watcher.stdin is not None:
            try:
                watcher.stdin.close()
                watcher.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
