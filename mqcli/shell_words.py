"""A command line split into words as a POSIX shell (and `shlex.split`) splits it, in time
linear in its length: `shlex` builds each word a character at a time, so one word of a
megabyte took it minutes, and a batch line may be that long (inputs.LINE_LIMIT).

The rules are shlex's in POSIX mode: words are separated by spaces, tabs, CRs and newlines;
'...' keeps everything inside as it is; "..." too, except that a backslash before " or \\
stands for that character; outside quotes a backslash keeps the next character as it is. A
`#` that begins a word starts a comment, as in the shell (`put q order#42` puts `order#42`).
"""

from __future__ import annotations

import re

# one piece of a word: plain characters, a backslash and the character it keeps, a '...'
# string, or a "..." string (a backslash inside keeps the next character with it)
_PIECE = re.compile(r"""[^ \t\r\n'"\\]+|\\(.)|'([^']*)'|"((?:[^"\\]|\\.)*)"|(['"\\])""", re.S)
_BLANKS = re.compile(r"[ \t\r\n]*")
_DOUBLE_ESCAPE = re.compile(r'\\(["\\])')
_ESCAPES_THE_END = "No escaped character"  # shlex's words: a backslash ends the line


def split(line: str) -> list[str]:
    """The words of `line`, its comment left out. Raises ValueError for an unclosed quote
    or a backslash that ends the line, as shlex does."""
    words: list[str] = []
    at = _BLANKS.match(line).end()  # type: ignore[union-attr]  # matches the empty string
    end = len(line)
    while at < end:
        if line[at] == "#":
            break
        pieces: list[str] = []
        while at < end and line[at] not in " \t\r\n":
            m = _PIECE.match(line, at)
            assert m is not None, "every character starts a piece"
            escaped, single, double, unclosed = m.groups()
            if unclosed is not None:
                raise ValueError(_ESCAPES_THE_END if unclosed == "\\" or (
                    unclosed == '"' and _ends_in_escape(line)) else "No closing quotation")
            if escaped is not None:
                pieces.append(escaped)
            elif single is not None:
                pieces.append(single)
            elif double is not None:
                pieces.append(_DOUBLE_ESCAPE.sub(r"\1", double) if "\\" in double else double)
            else:
                pieces.append(m.group())
            at = m.end()
        words.append("".join(pieces))
        at = _BLANKS.match(line, at).end()  # type: ignore[union-attr]
    return words


def _ends_in_escape(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


# where a continued line starts, as the text its line follows leaves it (Continued)
NEW_WORD, IN_WORD, IN_DOUBLE = "", "x", '"'


def continues(line: str, after: str = NEW_WORD) -> str | None:
    """Whether `line` ends in a backslash that escapes the line end, which joins it to the
    next line in the shell (not one in a comment or inside single quotes): None if it does
    not, else where the next line starts (NEW_WORD, IN_WORD or IN_DOUBLE). `after` is where
    this line starts: a prefix that leaves the splitter in that state stands for the lines
    before, so each line is read once, whatever the length of the command."""
    if not _ends_in_escape(line):
        return None
    text = after + line
    try:
        split(text)
    except ValueError as exc:
        if str(exc) != _ESCAPES_THE_END:
            return None
    else:
        return None
    if _in_double(text):
        return IN_DOUBLE
    rest = text[:-1]  # without the escaped line end: does the next line add to its last word?
    return IN_WORD if len(split(rest + "y")) == len(split(rest)) else NEW_WORD


def _in_double(text: str) -> bool:
    """Whether `text`, whose end escapes the line end, ends inside a double-quoted string."""
    try:
        split(text + "\\")  # an escaped backslash: now the text is whole, unless a quote is open
    except ValueError:
        return True
    return False
