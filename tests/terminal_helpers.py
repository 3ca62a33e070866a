"""A real terminal for the CLI tests: a pty of a chosen size that becomes the child's controlling
terminal, so that writing ^C to it is a real Ctrl-C (the line discipline sends SIGINT to the
foreground process group), and what the child drew is read back with the escape sequences
stripped."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Mapping, Sequence

_ESCAPE = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|[=>78])")


def plain(raw: bytes) -> str:
    """The text of terminal output: escape sequences removed, CR LF as LF."""
    return _ESCAPE.sub("", raw.decode("utf-8", "replace")).replace("\r\n", "\n").replace("\r", "\n")


class Terminal:
    """`argv` running with its stdin, stdout and stderr on a pty of `columns` x `rows`, but
    stdout or stderr where given (a file descriptor)."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], columns: int = 80, rows: int = 40,
                 stdout: int | None = None, stderr: int | None = None) -> None:
        self.primary, secondary = pty.openpty()
        fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        name = os.ttyname(secondary)
        full_env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
        full_env.setdefault("TERM", "xterm-256color")

        def controlling() -> None:  # runs after setsid: opening the tty makes it the session's
            os.close(os.open(name, os.O_RDWR))

        self.proc = subprocess.Popen(list(argv), stdin=secondary, stdout=secondary if stdout is None else stdout,
                                     stderr=secondary if stderr is None else stderr, env=full_env, start_new_session=True,
                                     preexec_fn=controlling)
        os.close(secondary)
        self.raw = b""

    def read(self, timeout: float = 0.1) -> bool:
        """Read what is there within `timeout`; False once the terminal is closed."""
        if select.select([self.primary], [], [], timeout)[0]:
            try:
                chunk = os.read(self.primary, 65536)
            except OSError:  # EIO: every process holding the secondary side is gone
                return False
            if not chunk:
                return False
            self.raw += chunk
        return True

    @property
    def text(self) -> str:
        return plain(self.raw)

    def wait_for(self, seen: Callable[[str], bool], timeout: float = 60) -> str:
        """Read until `seen(text)` holds (bounded by `timeout`, never a pass condition)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if seen(self.text):
                return self.text
            if not self.read() and self.proc.poll() is not None:
                break
        assert seen(self.text), self.text[-3000:]
        return self.text

    def ctrl_c(self) -> None:
        os.write(self.primary, b"\x03")

    def finish(self, timeout: float = 60) -> int:
        """Drain the terminal until the process ends (so it never blocks on a full pty)."""
        end = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < end:
            self.read()
        while self.read(0):
            if not select.select([self.primary], [], [], 0)[0]:
                break
        return self.close()

    def close(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        code = self.proc.wait()
        os.close(self.primary)
        return code
