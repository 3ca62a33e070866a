"""The mqcli message store: an LMDB-backed queue manager with MSMQ and MQ Everyplace semantics.

A library usable on its own (see docs/store-api.md); it never prints.
"""

from . import errors
from .engine import NewMessage, QueueStats, Store, StoreInfo, SweepResult
from .errors import StoreError
from .queues import DEAD_LETTER, DEAD_LETTER_TX, QueueInfo
from .records import (
    AVAILABLE, BROWSE_GET_UNCONFIRMED, GET_UNCONFIRMED, LOCKED_BROWSE, PUT_UNCONFIRMED, STATES,
    TX_LOCKED, Message,
)

__all__ = [
    "Store", "NewMessage", "QueueStats", "StoreInfo", "SweepResult", "QueueInfo", "Message", "StoreError",
    "errors", "DEAD_LETTER", "DEAD_LETTER_TX", "STATES", "AVAILABLE", "PUT_UNCONFIRMED",
    "LOCKED_BROWSE", "GET_UNCONFIRMED", "BROWSE_GET_UNCONFIRMED", "TX_LOCKED",
]
