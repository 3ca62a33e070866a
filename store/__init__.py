"""The mqcli message store: an LMDB-backed queue manager with MSMQ and MQ Everyplace semantics.

A library usable on its own (see docs/store-api.md); it never prints. The names below are
loaded on first use, so `import store.errors` does not pay for LMDB and the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Store": "engine", "NewMessage": "engine", "Imported": "engine", "QueueStats": "engine", "StoreInfo": "engine",
    "SweepResult": "engine", "QueueInfo": "queues", "DEAD_LETTER": "queues",
    "DEAD_LETTER_TX": "queues", "Message": "records", "STATES": "records",
    "AVAILABLE": "records", "PUT_UNCONFIRMED": "records", "LOCKED_BROWSE": "records",
    "GET_UNCONFIRMED": "records", "BROWSE_GET_UNCONFIRMED": "records", "TX_LOCKED": "records",
    "StoreError": "errors", "errors": None,
    "LinkInfo": "links", "Route": "forwarding", "Taken": "forwarding", "OutgoingInfo": "forwarding",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from . import errors
    from .engine import Imported, NewMessage, QueueStats, Store, StoreInfo, SweepResult
    from .errors import StoreError
    from .forwarding import OutgoingInfo, Route, Taken
    from .links import LinkInfo
    from .queues import DEAD_LETTER, DEAD_LETTER_TX, QueueInfo
    from .records import (
        AVAILABLE, BROWSE_GET_UNCONFIRMED, GET_UNCONFIRMED, LOCKED_BROWSE, PUT_UNCONFIRMED,
        STATES, TX_LOCKED, Message,
    )


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'store' has no attribute {name!r}")
    module = _EXPORTS[name]
    if module is None:
        return importlib.import_module(f".{name}", __name__)
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
