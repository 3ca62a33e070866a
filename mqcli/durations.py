"""Durations (SPEC §6): `250ms`, `30s`, `5m`, `2h`, `forever`; a bare number is seconds."""

from __future__ import annotations

import re

from .exits import UsageError

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "": 1.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)?")
FOREVER = "forever"


def parse_duration(text: str, *, allow_forever: bool = True, what: str = "duration") -> float | None:
    """Seconds, or None for `forever`."""
    text = text.strip().lower()
    if text == FOREVER:
        if allow_forever:
            return None
        raise UsageError(f"{what} cannot be forever")
    match = _DURATION.fullmatch(text)
    if not match:
        raise UsageError(f"invalid {what} {text!r}: use 250ms, 30s, 5m, 2h" + (" or forever" if allow_forever else ""))
    return float(match.group(1)) * _UNITS[match.group(2) or ""]


_SIZE = re.compile(r"(\d+)\s*(b|kb|mb|gb|tb|kib|mib|gib|tib)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
               "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}


def parse_size(text: str, what: str = "size") -> int:
    """Bytes from `4096`, `64KiB`, `10MB`, `1GiB`."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise UsageError(f"invalid {what} {text!r}: use a byte count like 4096, 64KiB, 10MB or 1GiB")
    return int(match.group(1)) * _SIZE_UNITS[(match.group(2) or "").lower()]
