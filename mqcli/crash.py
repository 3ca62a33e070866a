"""A command that dies reading a damaged store says so in one line and exits 11.

LMDB keeps no checksums and trusts its pages: a data file with a zeroed or overwritten page
(a disk's lost write, a bad copy, a forged file) makes the process that reads it abort on one
of LMDB's assertions (SIGABRT: "Assertion 'IS_LEAF(mp)' failed in mdb_cursor_next()") or fault
(SIGSEGV; SIGBUS for a file cut while mapped). `mqcli check` reads the store in a child process
and reports such a death (store/check_process.py); reading every store in a child would cost
every command a fork. So once a command has a store open, these signals end it with the store's
one-line error (exit 11, as -o asked: text or JSON) instead of a core dump and exit 134/139.

The handler is installed with the C library's signal() through ctypes: Python's own handlers
run between bytecodes, which a fault inside LMDB never returns to. It only writes the line made
beforehand and calls _exit. A fork that must die of the signal itself (check_isolated's child)
puts the default actions back first.
"""

from __future__ import annotations

import io
import os
import signal
from typing import Any

from store.environment import RESTORE
from store.errors import StoreCorrupt

from .exits import ExitCode, report

SIGNALS = (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS)
_line: list[bytes] = []  # the error to print, made when armed (nothing may be built in the handler)
_installed: list[Any] = []  # the ctypes callbacks, kept alive while installed


def arm(store_path: str | os.PathLike[str], *, json_errors: bool) -> None:
    """From now on a death by SIGNALS is the damaged-store error for `store_path` (exit 11)."""
    text = io.StringIO()
    report(StoreCorrupt(f"the store at {os.fspath(store_path)} is damaged: reading it crashed mqcli (LMDB trusts "
                        f"its pages and met one it could not read; `mqcli check` tells which); {RESTORE}"),
           json_errors=json_errors, stream=text)
    _line[:] = [text.getvalue().encode("utf-8", "backslashreplace")]
    if _installed:
        return
    import ctypes  # ~3 ms: only once a store is open

    handler = ctypes.CFUNCTYPE(None, ctypes.c_int)
    try:
        install = ctypes.CDLL(None).signal
    except (OSError, AttributeError):
        return  # no C library to ask: the signals' default actions, as before
    install.restype = ctypes.c_void_p
    install.argtypes = (ctypes.c_int, handler)
    callback = handler(_die)
    _installed.append(callback)
    for signum in SIGNALS:
        install(int(signum), callback)


def _die(signum: int) -> None:
    try:
        os.write(2, _line[0] if _line else b"")
    finally:
        os._exit(ExitCode.STORE)  # nothing buffered is flushed: a half-written output stays cut
