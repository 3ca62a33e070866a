"""Durations: `250ms`, `30s`, `5m`, `2h`, `forever`; a bare number is seconds."""

from __future__ import annotations

import re
from typing import Literal, overload

from .exits import UsageError

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "": 1.0}
# the longest finite duration: leases, ttls and timeouts become µs deadlines in 64 bits
MAX_SECONDS = 100 * 365 * 86400.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)?")
FOREVER = "forever"


@overload
def parse_duration(text: str, *, allow_forever: Literal[False], what: str = "duration") -> float: ...
@overload
def parse_duration(text: str, *, allow_forever: bool = True, what: str = "duration") -> float | None: ...


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
    seconds = float(match.group(1)) * _UNITS[match.group(2) or ""]
    if seconds > MAX_SECONDS:
        raise UsageError(f"invalid {what} {text!r}: at most 100 years" + ("; or forever" if allow_forever else ""))
    return seconds


_SIZE = re.compile(r"(\d+)\s*(b|kb|mb|gb|tb|kib|mib|gib|tib)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
               "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}


def parse_size(text: str, what: str = "size") -> int:
    """Bytes from `4096`, `64KiB`, `10MB`, `1GiB`."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise UsageError(f"invalid {what} {text!r}: use a byte count like 4096, 64KiB, 10MB or 1GiB")
    digits = match.group(1).lstrip("0")
    size = int(digits or "0") * _SIZE_UNITS[(match.group(2) or "").lower()] if len(digits) <= 20 else 1 << 63
    if size >= 1 << 63:
        raise UsageError(f"invalid {what} {text!r}: at most 8 EiB")
    return size
