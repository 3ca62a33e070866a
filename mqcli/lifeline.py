"""A worker's lifeline: the commands `mqcli consume` runs die with it.

Each command runs in a session of its own (a Ctrl-C at the terminal is the worker's to act on),
so nothing ends it when the worker is killed outright (SIGKILL, the OOM killer). It would run
on while its message, back in the queue once the lease lapses, is handled a second time, and
a command still reading its body would see it end early. A small watcher process holds the
read end of a pipe that only the worker writes to. The worker tells it each command's process
group as it starts (`+PGID`) and as it ends (`-PGID`, before the worker reaps it, so the id
cannot be reused meanwhile). When the pipe reaches end of file, the worker is gone, and the
watcher kills the groups it was told of and still running.

A command is also told with a deadline (`+PGID DEADLINE`, CLOCK_MONOTONIC seconds, one clock for
every process of the machine): the watcher kills a group still running then. The worker kills
its commands at `--lease` itself, but a worker that is stopped (SIGSTOP, a debugger, a frozen
cgroup) kills nothing, while the store's lease of its message lapses and another worker runs it:
twice at once. The deadline falls between the two (consume.py `watcher_deadline`).

A command is only known to the watcher once it is started, so `start` runs it behind a gate:
its shell first reads a line from a pipe of the worker's, opened by its path under /proc (so
the command inherits no descriptor of it), and the worker writes that line only after telling
the watcher. A worker killed between the two leaves a shell that reads end of file (or finds
the worker gone) and exits 125 without running the command: never a command no watcher knows.
The worker first starts one shell at a gate of its own (`_gates_pass`): where a shell cannot
read the worker's descriptors under /proc (no /proc, a worker that is not dumpable, a PID
namespace showing another's /proc) commands start ungated, as before the gate, rather than
never; and a command whose shell ended without passing its gate is told apart (`release`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import BinaryIO

# the watcher: `-I -S`, no site-packages and no mqcli to import, a few ms to start
_WATCHER = """
import os, select, signal, time
groups = {}  # pgid -> deadline (CLOCK_MONOTONIC seconds; None: none)
pending = b""
def kill(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
def read():
    global pending
    data = os.read(0, 65536)
    pending += data
    *lines, pending = pending.split(b"\\n")
    for line in lines:
        if line[:1] == b"+":
            pgid, _, deadline = line[1:].partition(b" ")
            groups[int(pgid)] = float(deadline) if deadline else None
        elif line[:1] == b"-":
            groups.pop(int(line[1:]), None)
    return data
while True:
    deadlines = [d for d in groups.values() if d is not None]
    timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
    if select.select([0], [], [], timeout)[0]:
        if not read():
            break
        continue
    if select.select([0], [], [], 0)[0] and not read():  # an end told meanwhile is heeded first
        break
    now = time.monotonic()
    for pgid, deadline in list(groups.items()):
        if deadline is not None and deadline <= now:
            del groups[pgid]
            kill(pgid)
for pgid in groups:
    kill(pgid)
"""


class Lifeline:
    """The watcher of one worker; `with Lifeline() as line`. Leaving the block by an exception
    kills the commands still running first (their messages are undone after it), then ends
    the watcher, as does a normal end, with no command left to kill."""

    def __init__(self) -> None:
        self._groups: set[int] = set()
        self._gates: dict[int, Gate] = {}  # pgid -> its gate, kept open until the command ends
        self._lock = threading.Lock()
        self._watcher: subprocess.Popen[bytes] | None = None
        self.guarded = False  # whether commands wait at a gate (Gate): set by __enter__

    def __enter__(self) -> Lifeline:
        try:
            self._watcher = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHER], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            self._watcher = None  # no watcher: the commands outlive a killed worker, as before
        # a shell that cannot read the gate would never run its command: find out once, here
        self.guarded = self._watcher is not None and _gates_pass()
        return self

    def spawn(self, command: str, stdin: BinaryIO, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Gate]:
        """`command` started by /bin/sh in a session of its own, waiting at its gate (closed):
        `start`'s first half."""
        gate = Gate(self.guarded)
        try:
            return subprocess.Popen(["/bin/sh", "-c", gate.prefix + command], stdin=stdin, env=env,
                                    start_new_session=True), gate
        except BaseException:
            gate.close()
            raise

    def start(self, command: str, stdin: BinaryIO, env: dict[str, str],
              deadline: float | None = None) -> subprocess.Popen[bytes]:
        """Run `command` by /bin/sh in a session of its own, watched (to be killed at
        `deadline`, time.monotonic, if it still runs then) before it runs; `release` its group
        when it ends. Raises OSError as Popen does."""
        proc, gate = self.spawn(command, stdin, env)
        with self._lock:
            self._gates[proc.pid] = gate
        self.watch(proc.pid, deadline)
        gate.open()
        return proc

    def watch(self, pgid: int, deadline: float | None = None) -> None:
        """A command started in process group `pgid`, to be killed at `deadline` (time.monotonic)
        if it still runs then, whatever this process is doing."""
        with self._lock:
            self._groups.add(pgid)
            self._send(b"+%d\n" % pgid if deadline is None else b"+%d %.6f\n" % (pgid, deadline))

    def release(self, pgid: int) -> bool:
        """The command of group `pgid` ended (not reaped yet). Whether it went past its gate:
        False, its shell ended without running it (it could not read the gate)."""
        with self._lock:
            self._groups.discard(pgid)
            self._send(b"-%d\n" % pgid)
            gate = self._gates.pop(pgid, None)
        if gate is None:
            return True
        try:
            return gate.passed()
        finally:
            gate.close()

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
        with self._lock:
            gates, self._gates = list(self._gates.values()), {}
        for gate in gates:
            gate.close()
        watcher, self._watcher = self._watcher, None
        if watcher is not None and watcher.stdin is not None:
            try:
                watcher.stdin.close()
                watcher.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass


class Gate:
    """What a command waits at before it runs: a pipe of this process's. The command's shell
    reads a line from it by its path, /proc/PID/fd/N (a descriptor passed down would stay open
    in the command and everything it starts: sh cannot close a descriptor above 9); `open`
    writes the line. If this process dies first, the path is gone or the pipe ends (no other
    process holds its write end): the shell exits 125, the command never runs. PID is this
    process's as /proc names it (/proc/self), which is not os.getpid() in a PID namespace that
    shows another's /proc. `guarded=False` makes a gate that is always open (no prefix): where
    a command cannot read this process's descriptors (Lifeline's probe)."""

    def __init__(self, guarded: bool = True) -> None:
        # close-on-exec: no command inherits either end; non-blocking: `passed` asks at once
        self._read, self._write = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self.prefix = ""
        if guarded:
            where = f"/proc/{os.readlink('/proc/self')}/fd/{self._read}"
            self.prefix = f"IFS= read -r mqcli_gate <{where} && [ \"$mqcli_gate\" = go ] || exit 125; unset mqcli_gate; "

    def open(self) -> None:
        """Let the command run: the line, then the write end closed (the line stays in the
        pipe for the shell, however late it comes to read it)."""
        if self._write >= 0:
            os.write(self._write, b"go\n")
            os.close(self._write)
            self._write = -1

    def passed(self) -> bool:
        """Whether the command's shell took the line (or there was no gate): else the
        command never ran, though its shell ended."""
        if not self.prefix or self._read < 0:
            return True
        try:
            return os.read(self._read, 8) == b""
        except BlockingIOError:  # empty, its write end still open: nothing was written to take
            return self._write >= 0

    def close(self) -> None:
        """The command ended (or never started): the pipe goes."""
        for fd in (self._write, self._read):
            if fd >= 0:
                os.close(fd)
        self._read = self._write = -1


def _gates_pass() -> bool:
    """Whether a shell started here passes an open gate: /proc shows this process's
    descriptors to its children (not so for a process that is not dumpable, or without /proc)."""
    try:
        gate = Gate()
    except OSError:  # no /proc/self
        return False
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", gate.prefix + "exit 0"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        gate.open()
        try:
            return proc.wait(timeout=30) == 0 and gate.passed()
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return False
    except OSError:
        return False
    finally:
        gate.close()
