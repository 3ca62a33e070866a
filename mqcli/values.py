"""Option values that cannot be valid are refused while the command line is parsed (exit 2).

A malformed escape in `--delimiter`, a unique id whose put time does not fit its signed 64 bits, or
an id beyond the range the store keeps would otherwise reach the codec or struct that cannot
hold it and surface as an internal error (exit 1), or as bad data (exit 12) after the store
was opened. These are typer callbacks: the value is checked, and converted, before the
command runs. They import neither Typer nor click until a value is refused: the start-up path
of put, get and browse (mqcli/fastpath.py) calls them too, and hands a refused value to Typer.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable
from typing import NoReturn, Optional

_SIMPLE_ESCAPES = {"\\": b"\\", "'": b"'", '"': b'"', "a": b"\a", "b": b"\b", "f": b"\f",
                   "n": b"\n", "r": b"\r", "t": b"\t", "v": b"\v"}
_OCTAL, _HEX = "01234567", "0123456789abcdefABCDEF"
ESCAPES_HELP = "\\n \\t \\r \\0, \\\\, \\xHH, octal \\NNN up to \\377, \\uXXXX, \\UXXXXXXXX, \\N{NAME}"


def parse_escapes(text: str) -> bytes:
    """The bytes a delimiter like `\\n`, `\\0`, `\\x1e`, `--\\t` stands for: Python's string
    escapes, a code point written as its UTF-8 bytes, other characters as their own bytes
    (also those of an argument that is not UTF-8). ValueError for a malformed escape."""
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            j = text.find("\\", i)
            j = len(text) if j < 0 else j
            out += os.fsencode(text[i:j])
            i = j
            continue
        if i + 1 == len(text):
            raise ValueError("a lone \\ at the end")
        e = text[i + 1]
        i += 2
        if e in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[e]
        elif e in _OCTAL:
            digits = e
            while len(digits) < 3 and i < len(text) and text[i] in _OCTAL:
                digits += text[i]
                i += 1
            if int(digits, 8) > 0o377:
                raise ValueError(f"\\{digits} is above \\377, the largest byte")
            out.append(int(digits, 8))
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            digits = text[i:i + width]
            if len(digits) != width or not all(d in _HEX for d in digits):
                raise ValueError(f"\\{e} needs {width} hex digits")
            i += width
            if e == "x":
                out.append(int(digits, 16))
            else:
                out += _utf8(int(digits, 16), f"\\{e}{digits}")
        elif e == "N":
            end = text.find("}", i)
            if not text.startswith("{", i) or end < 0:
                raise ValueError("\\N needs a character name in braces, like \\N{RECORD SEPARATOR}")
            name = text[i + 1:end]
            try:
                out += unicodedata.lookup(name).encode("utf-8")
            except KeyError:
                raise ValueError(f"no character is named {name!r}") from None
            i = end + 1
        else:
            raise ValueError(f"\\{e} is not an escape")
    return bytes(out)


def _utf8(code: int, shown: str) -> bytes:
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        raise ValueError(f"{shown} is not a Unicode character")
    return chr(code).encode("utf-8")


def refuse(message: str) -> NoReturn:
    """Refuse an option's value: click's BadParameter, which it reports as exit 2 naming the option."""
    import click

    raise click.BadParameter(message)


def delimiter(value: Optional[str]) -> Optional[bytes]:
    """The callback of `--delimiter`."""
    if value is None:
        return None
    try:
        return parse_escapes(value)
    except ValueError as exc:
        refuse(f"'{value}': {exc} (escapes: {ESCAPES_HELP})")


def unique_id(value: Optional[str]) -> Optional[str]:
    """The callback of `--unique-id`: `<guid>:<put time µs>`, the time a 64-bit count."""
    if value is None:
        return None
    from store.errors import BadData
    from store.records import parse_unique_id

    try:
        parse_unique_id(value)
    except BadData as exc:
        refuse(exc.message)
    return value


def in_range(low: int, high: int, what: str) -> Callable[[Optional[int]], Optional[int]]:
    """A callback refusing an integer outside low..high, whose help stays free of the bounds
    (an id's upper bound is 19 digits no reader needs in `--help`)."""
    def check(value: Optional[int]) -> Optional[int]:
        if value is not None and not low <= value <= high:
            refuse(f"{value} is not {what} ({low}..{high})")
        return value
    return check


MAX_ID = (1 << 63) - 1
positive_id = in_range(1, MAX_ID, "a positive 63-bit integer")
app_specific = in_range(-(1 << 31), (1 << 31) - 1, "a signed 32-bit integer")  # MSMQ PROPID_M_APPSPECIFIC


AUTO = "auto"


def id_or_auto(value: Optional[str]) -> Optional[int | str]:
    """A confirm id or lock id a new holder names: a positive 63-bit integer, or `auto` for a
    fresh one the store draws (and the command prints)."""
    if value is None or value == AUTO:
        return value
    try:
        number = int(value, 10)
    except ValueError:
        number = 0
    if not 0 < number <= MAX_ID:
        refuse(f"{value!r} is not a positive 63-bit integer or auto")
    return number


def output_mode(value: Optional[str]) -> Optional[str]:
    """The callback of `-o/--output`."""
    from .render import MODES

    if value is not None and value not in MODES:
        refuse(f"{value!r} is not one of {', '.join(MODES)}")
    return value


def printable_label(value: str) -> str:
    """A label typed on the command line is shown on one line: no control characters. (The
    store itself keeps any label: a trace report's ends in NUL, and imports keep theirs.)"""
    from store.arguments import control_character

    c = control_character(value or "")
    if c is not None:
        refuse(f"the label {value!r:.80} holds the control character {c!r}; use printable characters only")
    return value


def selector(text: Optional[str]) -> Optional[str]:
    """A --where selector is checked as the command line is read (exit 2, naming the column)."""
    if text is not None:
        from store.selectors import SelectorError, compile_selector  # only a --where loads the parser

        try:
            compile_selector(text)
        except SelectorError as exc:
            refuse(str(exc).removeprefix("--where: "))
    return text

