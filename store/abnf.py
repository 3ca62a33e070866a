"""Column-precise recursive descent by ABNF (RFC 5234), for the grammars that say where text goes
wrong: MS-MQMQ 2.1 format names (`formatnames.check_syntax`) and trace report labels and bodies
([MS-MQQB] 3.1.5.8.9, `trace.decode_label` and `decode_body`).

A grammar subclasses `Scanner`, writes one method per rule out of the primitives here, and says
in `error` which exception a failure raises. Each primitive takes the `rule` to name when it
fails, for grammars whose errors name one (the trace codec's do: [MS-MQQB]'s rule names).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

from .errors import BadData


def abnf_equal(ch: str, want: str) -> bool:
    """ABNF string matching: case-insensitive, for ASCII letters only (RFC 5234 §2.3)."""
    return ch == want or (want.isalpha() and ch == want.swapcase())


def or_list(options: tuple[str, ...]) -> str:
    """The options as an error message lists them: 'a, b or c'."""
    return ", ".join(options[:-1]) + " or " + options[-1]


class Scanner:
    """Recursive descent over text[pos:limit]; `pos` is 0-based, errors are 1-based columns.

    What an error says it found is the character of the whole text at the failing column (or
    end of input), so a grammar confined to part of a longer text reports in that text's terms.
    """

    def __init__(self, text: str, start: int = 0, stop: int | None = None) -> None:
        self.text = text
        self.pos = start
        self.limit = len(text) if stop is None else stop

    def error(self, column: int, detail: str, rule: str | None) -> BadData:
        """The exception a failure at the 1-based column raises; each grammar says which."""
        raise NotImplementedError

    def fail(self, detail: str, pos: int | None = None, *, rule: str | None = None) -> NoReturn:
        raise self.error((self.pos if pos is None else pos) + 1, detail, rule)

    def found(self, pos: int | None = None) -> str:
        pos = self.pos if pos is None else pos
        return "end of input" if pos >= len(self.text) else repr(self.text[pos])

    def peek(self, n: int = 0) -> str:
        pos = self.pos + n
        return self.text[pos] if pos < self.limit else ""

    def lookahead(self, literal: str) -> bool:
        """Whether `literal` (case-insensitively) comes next; nothing is consumed."""
        return all(abnf_equal(self.peek(i), c) for i, c in enumerate(literal))

    def literal(self, literal: str, name: str | None = None, *, rule: str | None = None) -> None:
        # the literal as written matches at once; only other cases go char by char
        if self.text.startswith(literal, self.pos, self.limit):
            self.pos += len(literal)
            return
        for i, c in enumerate(literal):
            if not abnf_equal(self.peek(i), c):
                self.fail(f"expected {name or repr(literal)}, found {self.found(self.pos + i)}",
                          self.pos + i, rule=rule)
        self.pos += len(literal)

    def choice(self, options: tuple[str, ...], what: str, *, rule: str | None = None) -> int:
        """One of several literals; on failure the column is the first character that none
        of them can continue (the longest match wins)."""
        best = 0
        for index, option in enumerate(options):
            n = 0
            while n < len(option) and abnf_equal(self.peek(n), option[n]):
                n += 1
            if n == len(option):
                self.pos += n
                return index
            best = max(best, n)
        self.fail(f"expected {what} ({or_list(options)}), found {self.found(self.pos + best)}",
                  self.pos + best, rule=rule)

    def run(self, allowed: Callable[[str], bool], least: int, most: int, what: str, *,
            rule: str | None = None, counted: bool = False) -> str:
        """least to most characters that `allowed` takes, as many as there are.

        A failure says 'expected <what>'; `counted` is for ABNF's exact count (least == most,
        `what` the element): it says 'expected 8HEXDIG (3 of them so far)'.
        """
        text = self.text
        start = pos = self.pos
        stop = min(start + most, self.limit)
        while pos < stop and allowed(text[pos]):
            pos += 1
        self.pos = pos
        if pos - start < least:
            expected = f"{least}{what} ({pos - start} of them so far)" if counted else what
            self.fail(f"expected {expected}, found {self.found()}", rule=rule)
        return text[start:pos]

    def end(self, detail: str, *, rule: str | None = None) -> None:
        if self.pos != self.limit:
            self.fail(f"{detail}, found {self.found()}", rule=rule)
