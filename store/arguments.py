"""What counts as an int and as a number of seconds in the values callers pass the store.

Python's bool is an int; a flag passed where a count, an id or a duration belongs is a
mistake, so neither accepts it.
"""

from __future__ import annotations


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# The longest duration the store takes: MSMQ's INFINITE time-to-be-received, 2**32 - 1
# seconds (136 years); more would not fit the record's 64-bit microseconds after `now`.
MAX_SECONDS = (1 << 32) - 1


def is_seconds(value: object) -> bool:
    """A finite number of seconds (not NaN, not infinite, not beyond MAX_SECONDS)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and -MAX_SECONDS <= value <= MAX_SECONDS)  # False for NaN and infinities


def is_text(value: str) -> bool:
    """Whether a str can be stored: UTF-8 has no lone surrogates."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
