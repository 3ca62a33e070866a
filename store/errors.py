"""The one exception hierarchy of the store: every `StoreError` subclass is defined here.

Every error names its entry of the exit-code table (store/exit_codes.py, `entry`), and takes
from it the MQ status it stands for (`status`, MSMQ's name where MSMQ has one), the MSMQ HRESULT
(`code`, as "0xC00E001B", or None) and the process exit code that `mqcli` ends with
(`exit_code`). The CLI turns these into exit codes in one place; the store never prints.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from .exit_codes import ExitCode, Status


class StoreError(Exception):
    """Base of every error the store raises on purpose."""

    entry: ClassVar[Status] = Status.MQ_ERROR
    status: ClassVar[str]
    code: ClassVar[str | None]
    exit_code: ClassVar[ExitCode]

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls._take_entry()

    @classmethod
    def _take_entry(cls) -> None:
        exit_code = cls.entry.exit
        if exit_code is None:
            raise TypeError(f"{cls.__name__}: status {cls.entry.name} has no exit code of its own")
        cls.status, cls.code, cls.exit_code = cls.entry.name, cls.entry.code, exit_code

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


StoreError._take_entry()


class InvalidArgument(StoreError):
    """A caller passed a value the store cannot accept (bad name, priority, id)."""

    entry = Status.MQ_ERROR_INVALID_PARAMETER


class QueueExists(StoreError):
    entry = Status.MQ_ERROR_QUEUE_EXISTS


class Timeout(StoreError):
    """No message arrived within the wait ([MS-MQDMPR] Wait For New Message)."""

    entry = Status.MQ_ERROR_IO_TIMEOUT


class MessageNotFound(StoreError):
    entry = Status.MQ_ERROR_MESSAGE_NOT_FOUND


class UnknownConfirmId(MessageNotFound):
    """No message of the queue is pending under this confirm id."""


class UnknownLockId(MessageNotFound):
    """No message of the queue is locked under this lock id."""


class LeaseLapsed(MessageNotFound):
    """Nothing is pending under the id because its lease lapsed: the messages went back to
    their queue (or to a dead-letter queue) and may have a new holder. A late confirm or undo
    is told so rather than that the id is unknown (store/ids.py keeps the record)."""


class ConfirmIdLapsed(LeaseLapsed, UnknownConfirmId):
    """The lease of the confirm id lapsed; the confirm or undo changes nothing."""


class LockIdLapsed(LeaseLapsed, UnknownLockId):
    """The lease of the lock id lapsed; the unlock, undo, get or delete changes nothing."""


class AlreadyReceived(StoreError):
    """The message is held by another lock, confirm id or transaction."""

    entry = Status.MQ_ERROR_MESSAGE_ALREADY_RECEIVED


class IdInUse(AlreadyReceived):
    """A get, put or browse with lock named a confirm id or lock id that some in-flight message
    of the queue holds, or one whose lease lapsed less than a day ago (store/ids.py): an id has
    one holder, so the call changes nothing."""


class QueueNotAvailable(StoreError):
    entry = Status.MQ_ERROR_QUEUE_NOT_AVAILABLE


class QueueQuotaExceeded(StoreError):
    """Enqueue status 1 ([MS-MQDMPR] 3.1.7.1.9 Enqueue Message)."""

    entry = Status.MQ_ERROR_QUEUE_QUOTA_EXCEEDED


class StoreQuotaExceeded(StoreError):
    """Enqueue status 2 ([MS-MQDMPR] 3.1.7.1.9 Enqueue Message): the queue manager quota would
    be exceeded."""

    entry = Status.MQ_ERROR_QUOTA_EXCEEDED


class Throttled(StoreQuotaExceeded):
    """Enqueue status 2 ([MS-MQDMPR] 3.1.7.1.9 Enqueue Message): the queue manager is throttled."""


class MessageTooLarge(StoreQuotaExceeded):
    """The message is larger than the store's max-message-size (MSMQ's MaxMessageSize, 4 MB by
    default, refused with MQ_ERROR_INSUFFICIENT_RESOURCES like an exceeded machine quota)."""

    entry = Status.MQ_ERROR_INSUFFICIENT_RESOURCES


class StoreFull(StoreQuotaExceeded):
    """The LMDB map is full; the store still serves gets."""

    entry = Status.MQ_ERROR_STORE_FULL


class DiskFull(StoreQuotaExceeded):
    """A write found no room on its disk or device (ENOSPC, EDQUOT): a file the command line
    writes, or its stdout. Exit 8, like a full store: MSMQ reports a full disk as
    MQ_ERROR_INSUFFICIENT_RESOURCES."""

    entry = Status.MQ_ERROR_INSUFFICIENT_RESOURCES


class MessageExpired(StoreError):
    """Enqueue status 3 ([MS-MQDMPR] 3.1.7.1.9 Enqueue Message): the message timed out before it
    could be enqueued."""

    entry = Status.MQ_ERROR_MESSAGE_TIMED_OUT


class TransactionError(StoreError):
    entry = Status.MQ_ERROR_TRANSACTION_USAGE


class StoreUnavailable(StoreError):
    """The store cannot be opened (missing, not a store, locked out)."""

    entry = Status.MQ_ERROR_STORE_UNAVAILABLE


class StoreCorrupt(StoreUnavailable):
    entry = Status.MQ_ERROR_STORE_CORRUPT


class StoreMismatch(StoreUnavailable):
    """A Spark task found another store (another GUID), or none, where the driver planned one
    (docs/design.md#pipeline); the message names the path, both GUIDs and the executor host."""

    entry = Status.MQ_ERROR_STORE_MISMATCH


class StorePermission(StoreUnavailable):
    entry = Status.MQ_ERROR_ACCESS_DENIED


class ForeignOwner(StorePermission):
    """A store, key file or temporary folder belongs to another user than the one running
    (store/ownership.py); the message names the owner."""


class BadData(StoreError):
    """Malformed record, label, body, format name or import line."""

    entry = Status.MQ_ERROR_BAD_DATA


class ChannelError(StoreError):
    entry = Status.MQ_ERROR_CHANNEL


class Interrupted(StoreError):
    """Ctrl-C where a KeyboardInterrupt cannot carry it: `listen` and `dispatch` stop on the
    signal and raise this, since Typer turns a KeyboardInterrupt into a plain exit that
    `mqcli.app.run` does not report."""

    entry = Status.INTERRUPTED

    def __init__(self) -> None:
        super().__init__("interrupted")


# ---- queue names, selectors, links --------------------------------------------------------

class SelectorError(InvalidArgument):
    """A selector that does not parse, or compares what cannot be compared (exit 2)."""


def shown(text: str, limit: int = 200) -> str:
    """Quote user text for an error message: as typed when printable, else repr-escaped."""
    if len(text) > limit:
        text = text[:limit] + "..."
    return f"'{text}'" if text.isprintable() and "'" not in text else repr(text)


class FormatNameSyntaxError(BadData):
    """Text that is not a format name by MS-MQMQ 2.1's ABNF. `column` is 1-based in the text
    given to `check_syntax` (one past the end of the name when it stops short); `detail` says
    what was expected there and what was found."""

    def __init__(self, text: str, column: int, detail: str) -> None:
        super().__init__(f"format name {shown(text)}: column {column}: {detail}")
        self.column = column
        self.detail = detail


class LinkNotFound(StoreError):
    entry = Status.MQ_ERROR_QUEUE_NOT_AVAILABLE


class LinkExists(QueueExists):
    """A link of that name is already registered."""


# ---- trace reports -------------------------------------------------------------------------

class TraceFormatError(BadData):
    """A trace label or body that breaks [MS-MQQB]'s ABNF: where (1-based column) and which rule."""

    def __init__(self, kind: str, column: int, rule: str, detail: str) -> None:
        super().__init__(f"bad trace {kind}: column {column}, rule {rule}: {detail}")
        self.kind = kind
        self.column = column
        self.rule = rule
        self.detail = detail


# ---- the channel (store/channel/) ------------------------------------------------------------

class ProtocolError(ChannelError):
    """The peer sent something that is not the protocol: the connection is closed."""


class UnknownFrameType(ProtocolError):
    pass


class FrameTooLarge(ProtocolError):
    pass


class TruncatedFrame(ProtocolError):
    """The stream ended inside a frame."""


class MalformedBatch(ProtocolError):
    pass


class ChannelErrorCode(IntEnum):
    """The code an ERROR frame carries (docs/protocol.md; store/channel/frames.py encodes it)."""

    PROTOCOL = 1        # not a frame, unexpected frame, bad field
    AUTHENTICATION = 2  # a proof or seal did not verify
    VERSION = 3         # no protocol version in common
    TOO_LARGE = 4       # a frame over the receiver's limit
    BAD_DATA = 5        # a message record the receiving store refuses (nothing stored)
    STORE = 6           # the receiving store cannot take the batch now (full, quota); retry later
    SHUTTING_DOWN = 7   # the listener is stopping; retry later
    BUSY = 8            # too many connections; retry later


class PeerError(ChannelError):
    """The peer sent an ERROR frame."""

    when = ""

    def __init__(self, code: int, text: str) -> None:
        try:
            name = ChannelErrorCode(code).name.lower().replace("_", " ")
        except ValueError:
            name = f"error {code}"
        super().__init__(f"the peer refused: {name}: {text}{self.when}")
        self.peer_code = code
        self.text = text


class UnprovenPeerError(PeerError):
    """An ERROR frame sent before the peer proved it holds the link's key. Anyone who answers
    at the link's address can send one, so it is a failure to retry, never a reason to lock
    the link's queues."""

    when = " (before it proved it holds the link's key)"


class AuthenticationFailed(ChannelError):
    """A proof or a sealed frame did not verify: the peer does not hold the key (or the
    bytes were changed on the way)."""


class VersionMismatch(ChannelError):
    """No protocol version in common."""


class ChannelTimeout(ChannelError):
    pass


class ConnectionLost(ChannelError):
    pass


class ListenerBusy(ChannelError):
    """The listener has as many authenticated peers as it serves at once."""


class ChannelMessageTooLarge(ChannelError):
    """The next message of an outgoing queue is larger than the listener accepts: the queue
    stops until it is moved out."""


class SelfLink(ChannelError):
    """A link that reaches this queue manager itself."""


# ---- the data pipeline (store/analytics/) --------------------------------------------------

class AnalyticsUnavailable(StoreError):
    """The pipeline cannot run here: the `spark` extra or Java is missing (exit 2, with what
    to install)."""

    entry = Status.MQ_ERROR_ANALYTICS_UNAVAILABLE


class AnalyticsFailed(StoreError):
    """Spark could not start or its job failed (exit 1); the message names Spark's log."""

    entry = Status.MQ_ERROR_ANALYTICS_FAILED
