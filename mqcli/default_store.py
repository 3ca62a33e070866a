"""Where the store is when no --store is given: the one rule, for the commands
(mqcli/options.py) and for completion (mqcli/complete.py, which must not import Typer)."""

from __future__ import annotations

import os
from pathlib import Path


def from_environment() -> Path | None:
    """$MQCLI_STORE, else $XDG_DATA_HOME/mqcli/store, else ~/.local/share/mqcli/store; None for
    an empty MQCLI_STORE, which would name the current directory."""
    if "MQCLI_STORE" in os.environ:
        return Path(os.environ["MQCLI_STORE"]) if os.environ["MQCLI_STORE"] else None
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data) / "mqcli" / "store"
