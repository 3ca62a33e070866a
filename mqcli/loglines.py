"""Log lines on stderr that never block the process writing them.

`listen` and `dispatch --follow` log as they serve, from their event loop: a stderr that
stops being read (`listen 2>&1 | tee log` with tee stopped, a terminal paused by Ctrl-S, a
stalled journald) blocked the whole loop in one write. The listener then answered no peer
and neither could be stopped with SIGTERM, the signal's handler being the loop's. A line is
therefore written without waiting: whole, or not at all, and counted; the next line that gets
through says how many were dropped.

- a pipe is written through a description of its own, opened non-blocking by its /proc/self/fd
  path (the file's own description stays blocking: a shell or `2>&1` shares it), and a line
  of at most PIPE_BUF bytes goes in whole or not at all;
- a socket (journald's stream) is sent with MSG_DONTWAIT;
- a terminal, a file or anything else is written as before (a terminal paused by Ctrl-S
  blocks it: opening a terminal anew could make it the process's controlling terminal).
"""

from __future__ import annotations

import os
import select
import socket
import stat
import sys
import time
from collections.abc import Callable

from .exits import one_line


class LogLines:
    """`LogLines(prefix)(line)` writes `mqcli: PREFIX: LINE` to stderr, never blocking, the
    line escaped (it may quote a peer: its ERROR frame's text); nothing with `quiet`."""

    def __init__(self, prefix: str, quiet: bool = False) -> None:
        self.prefix = prefix
        self.quiet = quiet
        self.dropped = 0
        self._send: Callable[[bytes], int] | None = None
        try:
            fd = sys.stderr.fileno()
            mode = os.fstat(fd).st_mode
        except (AttributeError, OSError, ValueError):  # no stderr at all, or one in memory
            return
        if stat.S_ISFIFO(mode):
            try:
                own = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:  # not Linux, or no reader left: written as before
                return
            self._send = lambda data: os.write(own, data)
        elif stat.S_ISSOCK(mode):
            sock = socket.socket(fileno=os.dup(fd))
            self._send = lambda data: sock.send(data, socket.MSG_DONTWAIT)

    def __call__(self, line: str) -> None:
        if self.quiet:
            return
        data = f"mqcli: {self.prefix}: {one_line(line)}\n".encode("utf-8", "backslashreplace")
        if self._send is None:
            try:
                sys.stderr.buffer.write(data)
                sys.stderr.flush()
            except (BrokenPipeError, AttributeError, ValueError):  # nobody reads stderr: nothing to tell
                pass
            return
        if len(data) > select.PIPE_BUF:  # a longer write could go in part: cut, so that it goes whole
            data = data[:select.PIPE_BUF - 5] + b"...\n"
        if not self._say_dropped() or not self._whole(data):
            self.dropped += 1

    def finish(self, wait: float = 1.0) -> None:
        """At the end: say how many lines were dropped, if any, waiting up to `wait` seconds
        for room (no later line would say it)."""
        if self._send is None:
            return
        deadline = time.monotonic() + wait
        while not self._say_dropped() and time.monotonic() < deadline:
            time.sleep(0.05)

    def _say_dropped(self) -> bool:
        """Say how many lines were dropped, if any; whether nothing is left unsaid."""
        if self.dropped:
            if not self._whole(f"mqcli: {self.prefix}: {self.dropped} log line{'s' if self.dropped != 1 else ''} "
                               f"dropped: stderr was not being read\n".encode()):
                return False
            self.dropped = 0
        return True

    def _whole(self, data: bytes) -> bool:
        assert self._send is not None
        try:
            return self._send(data) == len(data)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:  # nobody reads it any more (EPIPE): nothing to tell, nothing to wait for
            return True
