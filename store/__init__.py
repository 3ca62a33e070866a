"""The mqcli message store: an LMDB-backed queue manager with MSMQ and MQ Everyplace semantics.

A library usable on its own (see docs/store-api.md); it never prints. The names below are
loaded on first use, so `import store.errors` does not pay for LMDB and the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Store": "engine", "NewMessage": "engine", "Imported": "engine", "QueueStats": "engine", "StoreInfo": "engine",
    "SweepResult": "engine", "Undone": "engine", "QueueInfo": "queues", "DEAD_LETTER": "queues",
    "DEAD_LETTER_TX": "queues", "Message": "records", "STATES": "records",
    "AVAILABLE": "records", "PUT_UNCONFIRMED": "records", "LOCKED_BROWSE": "records",
    "GET_UNCONFIRMED": "records", "BROWSE_GET_UNCONFIRMED": "records", "TX_LOCKED": "records",
    "StoreError": "errors", "errors": None,
    "LinkInfo": "links", "Route": "forwarding", "Taken": "forwarding", "OutgoingInfo": "forwarding",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # `X as X`: re-exported names, for type checkers and linters
    from . import errors as errors
    from .engine import Imported as Imported, NewMessage as NewMessage, QueueStats as QueueStats
    from .engine import Store as Store, StoreInfo as StoreInfo, SweepResult as SweepResult, Undone as Undone
    from .errors import StoreError as StoreError
    from .forwarding import OutgoingInfo as OutgoingInfo, Route as Route, Taken as Taken
    from .links import LinkInfo as LinkInfo
    from .queues import DEAD_LETTER as DEAD_LETTER, DEAD_LETTER_TX as DEAD_LETTER_TX, QueueInfo as QueueInfo
    from .records import AVAILABLE as AVAILABLE, BROWSE_GET_UNCONFIRMED as BROWSE_GET_UNCONFIRMED
    from .records import GET_UNCONFIRMED as GET_UNCONFIRMED, LOCKED_BROWSE as LOCKED_BROWSE
    from .records import PUT_UNCONFIRMED as PUT_UNCONFIRMED, STATES as STATES, TX_LOCKED as TX_LOCKED
    from .records import Message as Message

def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'store' has no attribute {name!r}")
    module = _EXPORTS[name]
    if module is None:
        return importlib.import_module(f".{name}", __name__)
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
