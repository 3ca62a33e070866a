"""The exit codes of `mqcli` and the statuses its error lines show: the one table.

`ExitCode` holds each exit code with its symbolic name and what it means; `Status` holds each
status an error line shows in brackets (`mqcli: error: ... [MQ_ERROR_IO_TIMEOUT]`) with the
MSMQ HRESULT where MSMQ defines one (mq.h; Microsoft's "Message Queuing Error and Information
Codes") and the exit code it ends the process with. Everything else is read from here: the
error classes of store/errors.py name a `Status` (and take their status, HRESULT and exit code
from it), `mqcli.exits.report()` turns an error into its line and exit code, and
scripts/gen_docs.py writes the EXIT STATUS section of man/mqcli.1 and the exit-code table of
README.md.

Adding one is one edit here: a member of `ExitCode` (code, meaning) for a new exit code, or of
`Status` (HRESULT or None, exit code) for a new status; an error class then names the status
(`status_entry = Status.X`) and `python scripts/gen_docs.py` carries both into the docs.
Numeric values never change: scripts test them.

This module imports nothing of the store, so every module may import it.
"""

from __future__ import annotations

from enum import Enum, IntEnum


class ExitCode(IntEnum):
    """An exit code of `mqcli`, with what it means (markdown: `code` in backticks)."""

    meaning: str

    def __new__(cls, code: int, meaning: str) -> ExitCode:
        member = int.__new__(cls, code)
        member._value_ = code
        member.meaning = meaning
        return member

    OK = 0, "Success."
    INTERNAL = 1, (
        "Internal error (a bug): one line, `--traceback` shows more. Also a question answered "
        "no (`queue purge`, `queue delete`: `not purged`): nothing was done.")
    USAGE = 2, (
        "Usage error: a bad option, argument or duration; an existing queue or link; an option "
        "value that cannot be valid (a malformed `--delimiter` escape, a unique id or an id "
        "beyond its 64 bits, a number out of its range), refused before the command runs; the "
        "`spark` extra or Java missing for the data pipeline.")
    TIMEOUT = 3, "No message within `--wait` (an empty queue with no wait too)."
    NOT_FOUND = 4, (
        "No message with that id, confirm id or lock id; or the id's lease lapsed (the message "
        "says when, and where its messages went).")
    ALREADY_RECEIVED = 5, (
        "The message is held by another lock, confirm or transaction; or a get, put or browse "
        "`--lock` named a confirm id or lock id that is pending in the queue, or that lapsed "
        "less than 24 hours ago.")
    QUEUE_NOT_AVAILABLE = 6, "The queue or link does not exist."
    QUEUE_QUOTA = 7, "Enqueue status 1: the queue quota would be exceeded."
    STORE_QUOTA = 8, (
        "Enqueue status 2: the store quota would be exceeded, the store is throttled or full, "
        "or the message is larger than max-message-size (a body from a file, stdin or a "
        "`--lines` line is refused after reading that much of it); or the disk or device "
        "written to is full (`stdout's device is full`, `the disk holding FILE is full`): a get "
        "removes only what was written whole, `export --to` leaves no file.")
    EXPIRED = 9, "Enqueue status 3: the message expired before it could be enqueued."
    TRANSACTION = 10, (
        "Transaction error: an unknown, finished or timed-out transaction, or the transaction "
        "rules of the queue broken.")
    STORE = 11, (
        "Store error: no store at the path (only `init` makes one), or the store cannot be "
        "opened, is corrupt (a command that crashed reading it says so with this code), or not "
        "permitted (owned by another user, writable by others), or was replaced or removed while a "
        "command kept it open; or a Spark task found another store (another GUID), or none, where "
        "the job planned one.")
    BAD_DATA = 12, (
        "Bad data: a malformed record, label, body, format name, JSONL line or import file (a "
        "line longer than any record of the store can be is refused before it is read whole); "
        "a key file that is not a regular file of 64 hex digits; more on `trace decode`'s stdin "
        "than any label or report body.")
    CHANNEL = 13, (
        "Channel error: a link cannot be reached or authenticated, or broke (`dispatch "
        "--once`); `listen` cannot bind.")
    ANALYSIS_FAILED = 14, (
        "Analysis failed: Spark could not start, or its job failed (the line carries Spark's "
        "cause and names Spark's log).")
    INTERRUPTED = 130, (
        "Interrupted (Ctrl-C); nothing half-done is left behind. What a command committed "
        "before the signal is printed (a put's ids, a get's messages, the counts of `move` and "
        "`import`, whose JSON then also has `\"interrupted\": true`).")
    OUTPUT_CLOSED = 141, (
        "The reader of the output went away (SIGPIPE, 128 + 13: `mqcli get q --all | head`): "
        "no error line, and a get whose messages could not be written out removes none of them.")
    TERMINATED = 143, (
        "Terminated (SIGTERM, 128 + 15), handled as Ctrl-C is: `terminated (SIGTERM)`.")


class Status(Enum):
    """A status an error line shows, as `NAME = HRESULT or None, exit codes`.

    The first exit code is the one an error of this status exits with; INTERRUPTED is also the
    status of SIGTERM's 143, and BATCH has none of its own (the code of the batch line that
    failed). An HRESULT is MSMQ's where MSMQ defines the status (mq.h), else None: the quota,
    expiry, store and channel statuses are this store's own words.
    """

    hresult: int | None
    exits: tuple[ExitCode, ...]

    def __new__(cls, hresult: int | None, *exits: ExitCode) -> Status:
        member = object.__new__(cls)
        member._value_ = len(cls.__members__)  # values are positions: no two statuses alias
        member.hresult = hresult
        member.exits = exits
        return member

    MQ_OK = 0x00000000, ExitCode.OK
    INTERNAL = None, ExitCode.INTERNAL
    DECLINED = None, ExitCode.INTERNAL
    MQ_ERROR = 0xC00E0001, ExitCode.INTERNAL
    USAGE = None, ExitCode.USAGE
    MQ_ERROR_INVALID_PARAMETER = 0xC00E0006, ExitCode.USAGE
    MQ_ERROR_QUEUE_EXISTS = 0xC00E0005, ExitCode.USAGE
    MQ_ERROR_ANALYTICS_UNAVAILABLE = None, ExitCode.USAGE
    MQ_ERROR_IO_TIMEOUT = 0xC00E001B, ExitCode.TIMEOUT
    MQ_ERROR_MESSAGE_NOT_FOUND = 0xC00E0088, ExitCode.NOT_FOUND
    MQ_ERROR_MESSAGE_ALREADY_RECEIVED = 0xC00E001D, ExitCode.ALREADY_RECEIVED
    MQ_ERROR_QUEUE_NOT_AVAILABLE = 0xC00E004B, ExitCode.QUEUE_NOT_AVAILABLE
    MQ_ERROR_QUEUE_QUOTA_EXCEEDED = None, ExitCode.QUEUE_QUOTA
    MQ_ERROR_QUOTA_EXCEEDED = None, ExitCode.STORE_QUOTA
    MQ_ERROR_INSUFFICIENT_RESOURCES = 0xC00E0027, ExitCode.STORE_QUOTA
    MQ_ERROR_STORE_FULL = None, ExitCode.STORE_QUOTA
    MQ_ERROR_MESSAGE_TIMED_OUT = None, ExitCode.EXPIRED
    MQ_ERROR_TRANSACTION_USAGE = 0xC00E0050, ExitCode.TRANSACTION
    MQ_ERROR_STORE_UNAVAILABLE = None, ExitCode.STORE
    MQ_ERROR_STORE_CORRUPT = None, ExitCode.STORE
    MQ_ERROR_STORE_MISMATCH = None, ExitCode.STORE
    MQ_ERROR_ACCESS_DENIED = 0xC00E0025, ExitCode.STORE
    MQ_ERROR_BAD_DATA = None, ExitCode.BAD_DATA
    MQ_ERROR_CHANNEL = None, ExitCode.CHANNEL
    MQ_ERROR_ANALYTICS_FAILED = None, ExitCode.ANALYSIS_FAILED
    INTERRUPTED = None, ExitCode.INTERRUPTED, ExitCode.TERMINATED
    BATCH = None

    @property
    def exit(self) -> ExitCode | None:
        """The exit code of an error with this status (None: the batch line's)."""
        return self.exits[0] if self.exits else None

    @property
    def code(self) -> str | None:
        """The HRESULT as error lines and JSON show it ("0xC00E001B"), or None."""
        return None if self.hresult is None else f"0x{self.hresult:08X}"

    @property
    def shown(self) -> str:
        """The status with its HRESULT, as the docs list it: MQ_ERROR_IO_TIMEOUT (0xC00E001B)."""
        return self.name if self.hresult is None else f"{self.name} ({self.code})"


def statuses(code: ExitCode) -> list[Status]:
    """The statuses an error line that ends with `code` may show, in the table's order."""
    return [status for status in Status if code in status.exits]
