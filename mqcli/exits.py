"""Exit codes (README.md#exit-codes) and the one place where an exception becomes one.

Every expected error prints one line on stderr, `mqcli: error: <what, and what to do> [STATUS]`,
or with `-o json|jsonl` instead only a JSON object with the same status, message and exit code.
No command calls sys.exit.
"""

from __future__ import annotations

import json
import sys
from enum import IntEnum
from typing import Any, TextIO

from store.errors import StoreError


class ExitCode(IntEnum):
    OK = 0
    INTERNAL = 1
    DECLINED = 1             # a question answered no: nothing done (not a bug, but not success)
    USAGE = 2
    TIMEOUT = 3              # MQ_ERROR_IO_TIMEOUT
    NOT_FOUND = 4            # MQ_ERROR_MESSAGE_NOT_FOUND
    ALREADY_RECEIVED = 5     # MQ_ERROR_MESSAGE_ALREADY_RECEIVED
    QUEUE_NOT_AVAILABLE = 6  # MQ_ERROR_QUEUE_NOT_AVAILABLE
    QUEUE_QUOTA = 7          # enqueue status 1
    STORE_QUOTA = 8          # enqueue status 2, or the store is full
    EXPIRED = 9              # enqueue status 3
    TRANSACTION = 10
    STORE = 11
    BAD_DATA = 12
    CHANNEL = 13
    INTERRUPTED = 130
    TERMINATED = 143         # SIGTERM (128 + 15), handled as Ctrl-C is


class UsageError(Exception):
    """A command line that cannot be run as written (exit 2)."""


class Declined(Exception):
    """The user answered no to the command's question (`queue purge`): nothing was done
    (exit 1). Not an interruption (exit 130): the user did not stop mqcli, mqcli asked."""


class Failed(Exception):
    """A command whose parts failed with their own codes, each already shown (a `batch` line):
    the one-line error names the first, and its code is the command's."""

    def __init__(self, code: int, status: str, message: str) -> None:
        super().__init__(message)
        self.code, self.status = code, status


def _store_error(exc: Exception, lmdb: Any) -> StoreError:
    """An LMDB error the store let through: what LMDB met reading the store's pages (a damaged
    data file) is exit 11, never an internal error."""
    from store.errors import StoreCorrupt, StoreUnavailable

    damaged = (lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.InvalidError)
    cls = StoreCorrupt if isinstance(exc, damaged) else StoreUnavailable
    return cls(f"LMDB failed: {exc} (`mqcli check` tells whether the store is damaged)")


def _one_line(text: str) -> str:
    """Errors are one line: a newline or other control character that came in with the
    user's text (a queue name, a file's line) is shown escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def wants_json(argv: list[str]) -> bool:
    """Whether the command line asks for `-o json|jsonl` (its errors are JSON objects too)."""
    for i, arg in enumerate(argv):
        if arg in ("-o", "--output") and i + 1 < len(argv):
            return argv[i + 1] in ("json", "jsonl")
        if arg.startswith("--output=") or (arg.startswith("-o") and len(arg) > 2):
            return arg.split("=", 1)[-1].lstrip("-o") in ("json", "jsonl")
    return False


def report(exc: BaseException, *, json_errors: bool, stream: TextIO | None = None) -> int:
    """Print the one-line error for `exc` and return its exit code."""
    stream = stream or sys.stderr
    lmdb = sys.modules.get("lmdb")  # only a process that opened a store can meet an LMDB error
    if lmdb is not None and isinstance(exc, lmdb.Error):
        exc = _store_error(exc, lmdb)
    if isinstance(exc, UnicodeEncodeError) and "surrogates" in exc.reason:
        # an argument's bytes that are not UTF-8 (Python keeps them as surrogates): usable as
        # a body, not as a queue name, label, id or option
        text = exc.object if isinstance(exc.object, str) else ""
        shown = repr(text if len(text) <= 60 else text[:60] + "…")
        exc = UsageError(f"{shown} is not valid UTF-8 (only a message body may hold any bytes)")
    if isinstance(exc, StoreError):
        code, status, mq_code, message = ExitCode(exc.exit_code), exc.status, exc.code, exc.message
    elif isinstance(exc, UsageError):
        code, status, mq_code, message = ExitCode.USAGE, "USAGE", None, str(exc)
    elif isinstance(exc, Declined):
        code, status, mq_code, message = ExitCode.DECLINED, "DECLINED", None, str(exc)
    elif isinstance(exc, Failed):
        code, status, mq_code, message = exc.code, exc.status, None, str(exc)  # type: ignore[assignment]
    elif isinstance(exc, KeyboardInterrupt):
        from .signals import Terminated

        if isinstance(exc, Terminated):
            code, status, mq_code, message = ExitCode.TERMINATED, "INTERRUPTED", None, "terminated (SIGTERM)"
        else:
            code, status, mq_code, message = ExitCode.INTERRUPTED, "INTERRUPTED", None, "interrupted"
    else:
        code, status, mq_code = ExitCode.INTERNAL, "INTERNAL", None
        message = f"internal error: {type(exc).__name__}: {exc} (a bug; rerun with --traceback and report it)"
    message = _one_line(message)
    if json_errors:  # only the object: a script reads stderr with `jq` as it reads stdout
        stream.write(json.dumps({"error": {"status": status, "code": mq_code, "exit": int(code),
                                           "message": message}}) + "\n")
    else:
        stream.write(f"mqcli: error: {message} [{status}]\n")
    stream.flush()
    return int(code)
