"""The one exception hierarchy of the store.

Every error carries the MQ status it stands for (MSMQ names and codes where MSMQ has one,
[MS-MQDMPR] 3.1.7.1.10 and README.md#exit-codes), and the process exit code that `mqcli` maps it to. The CLI turns these
into exit codes in one place; the store never prints.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error the store raises on purpose."""

    status: str = "MQ_ERROR"
    code: str | None = None
    exit_code: int = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(StoreError):
    """A caller passed a value the store cannot accept (bad name, priority, id)."""

    status = "MQ_ERROR_INVALID_PARAMETER"
    code = "0xC00E0006"
    exit_code = 2


class QueueExists(StoreError):
    status = "MQ_ERROR_QUEUE_EXISTS"
    code = "0xC00E0005"
    exit_code = 2


class Timeout(StoreError):
    """No message arrived within the wait ([MS-MQDMPR] 3.1.7.1.10, Wait For New Message)."""

    status = "MQ_ERROR_IO_TIMEOUT"
    code = "0xC00E001B"
    exit_code = 3


class MessageNotFound(StoreError):
    status = "MQ_ERROR_MESSAGE_NOT_FOUND"
    code = "0xC00E0088"
    exit_code = 4


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

    status = "MQ_ERROR_MESSAGE_ALREADY_RECEIVED"
    code = "0xC00E001D"
    exit_code = 5


class IdInUse(AlreadyReceived):
    """A get, put or browse with lock named a confirm id or lock id that some in-flight message
    of the queue holds, or one whose lease lapsed less than a day ago (store/ids.py): an id has
    one holder, so the call changes nothing."""


class QueueNotAvailable(StoreError):
    status = "MQ_ERROR_QUEUE_NOT_AVAILABLE"
    code = "0xC00E004B"
    exit_code = 6


class QueueQuotaExceeded(StoreError):
    """Enqueue status 1 ([MS-MQDMPR] 3.1.7.1.9)."""

    status = "MQ_ERROR_QUEUE_QUOTA_EXCEEDED"
    code = "0xC00E0080"
    exit_code = 7


class StoreQuotaExceeded(StoreError):
    """Enqueue status 2 ([MS-MQDMPR] 3.1.7.1.9): the queue manager quota would be exceeded."""

    status = "MQ_ERROR_QUOTA_EXCEEDED"
    code = "0xC00E0079"
    exit_code = 8


class Throttled(StoreQuotaExceeded):
    """Enqueue status 2 ([MS-MQDMPR] 3.1.7.1.9): the queue manager is throttled."""


class MessageTooLarge(StoreQuotaExceeded):
    """The message is larger than the store's max-message-size (MSMQ's MaxMessageSize, 4 MB by
    default, refused with MQ_ERROR_INSUFFICIENT_RESOURCES like an exceeded machine quota)."""

    status = "MQ_ERROR_INSUFFICIENT_RESOURCES"
    code = "0xC00E0027"


class StoreFull(StoreQuotaExceeded):
    """The LMDB map is full; the store still serves gets."""

    status = "MQ_ERROR_STORE_FULL"
    code = None


class DiskFull(StoreQuotaExceeded):
    """A write found no room on its disk or device (ENOSPC, EDQUOT): a file the command line
    writes, or its stdout. Exit 8, like a full store: MSMQ reports a full disk as
    MQ_ERROR_INSUFFICIENT_RESOURCES."""

    status = "MQ_ERROR_INSUFFICIENT_RESOURCES"
    code = "0xC00E0027"


class MessageExpired(StoreError):
    """Enqueue status 3 ([MS-MQDMPR] 3.1.7.1.9): the message timed out before it could be enqueued."""

    status = "MQ_ERROR_MESSAGE_TIMED_OUT"
    code = None
    exit_code = 9


class TransactionError(StoreError):
    status = "MQ_ERROR_TRANSACTION_USAGE"
    code = "0xC00E0050"
    exit_code = 10


class StoreUnavailable(StoreError):
    """The store cannot be opened (missing, not a store, locked out)."""

    status = "MQ_ERROR_STORE_UNAVAILABLE"
    code = None
    exit_code = 11


class StoreCorrupt(StoreUnavailable):
    status = "MQ_ERROR_STORE_CORRUPT"


class StorePermission(StoreUnavailable):
    status = "MQ_ERROR_ACCESS_DENIED"
    code = "0xC00E0025"


class ForeignOwner(StorePermission):
    """A store, key file or temporary folder belongs to another user than the one running
    (store/ownership.py); the message names the owner."""


class BadData(StoreError):
    """Malformed record, label, body, format name or import line."""

    status = "MQ_ERROR_BAD_DATA"
    code = None
    exit_code = 12


class ChannelError(StoreError):
    status = "MQ_ERROR_CHANNEL"
    code = None
    exit_code = 13
