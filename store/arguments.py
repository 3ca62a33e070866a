"""What counts as an int and as a number of seconds in the values callers pass the store.

Python's bool is an int; a flag passed where a count, an id or a duration belongs is a
mistake, so neither accepts it.
"""

from __future__ import annotations

from typing import TypeGuard

from .errors import InvalidArgument


def is_int(value: object) -> TypeGuard[int]:  # not TypeIs: a bool is an int, yet not one of these
    return isinstance(value, int) and not isinstance(value, bool)


# The longest duration the store takes: MSMQ's INFINITE time-to-be-received, 2**32 - 1
# seconds (136 years); more would not fit the record's 64-bit microseconds after `now`.
MAX_SECONDS = (1 << 32) - 1


def is_seconds(value: object) -> bool:
    """A finite number of seconds (not NaN, not infinite, not beyond MAX_SECONDS)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and -MAX_SECONDS <= value <= MAX_SECONDS)  # False for NaN and infinities


def is_decimal(text: str) -> bool:
    """Whether `text` is a number written in ASCII digits, as ports and msg_id sequence
    numbers are (str.isdigit alone takes "²", which int() refuses, and "١", which int() reads
    as 1)."""
    return text.isascii() and text.isdigit()


def is_text(value: str) -> bool:
    """Whether a str can be stored: UTF-8 has no lone surrogates."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def control_character(text: str) -> str | None:
    """The first control character (Unicode category Cc: C0, DEL, C1) in `text`, or None.

    A name or label is shown on one line of a listing, a log or an error message: a newline or
    an escape sequence in it would forge lines or restyle a terminal."""
    for c in text:
        if c < " " or "\x7f" <= c <= "\x9f":
            return c
    return None


def refuse_control_characters(text: str, what: str) -> str:
    """`text`, or InvalidArgument (exit 2) saying which control character `what` holds."""
    c = control_character(text)
    if c is not None:
        raise InvalidArgument(f"{what} {text!r:.80} holds the control character {c!r}; "
                              f"use printable characters only")
    return text
