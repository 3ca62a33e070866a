"""What counts as an int and as a number of seconds in the values callers pass the store.

Python's bool is an int; a flag passed where a count, an id or a duration belongs is a
mistake, so neither accepts it.
"""

from __future__ import annotations


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_seconds(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
