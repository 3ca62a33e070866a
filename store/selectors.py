"""Message selectors: the JMS / IBM MQ subset of SQL92 conditional expressions, over a message's
header fields and properties (`--where`).

    expr       = or
    or         = and *( OR and )
    and        = not *( AND not )
    not        = NOT not / test
    test       = operand [ compare operand / [NOT] LIKE string [ESCAPE string]
                 / [NOT] IN "(" literal *( "," literal ) ")" / [NOT] BETWEEN operand AND operand
                 / IS [NOT] NULL ]
    operand    = "(" expr ")" / literal / field / property
    literal    = 'string' ('' is a quote) / [+|-] number / duration (10m, 250ms, 2h, 1d) / TRUE / FALSE
    field      = priority / label / correl_id / msg_id / size / put_time / age / backouts / hops /
                 class / delivery / state / app_specific / expires / dead_letter_reason /
                 original_queue / body
    property   = props.NAME / "props.any name"

Keywords are case-insensitive; `compare` is one of = <> < <= > >=.

Values have types: numbers (int or float; `age` is seconds since the put, a float), strings,
booleans, and times (`put_time`, `expires`: compared with a timestamp string such as
'2026-11-23T10:00:00Z', read at parse time). Properties are strings. Values of different types
do not compare: `props.n = 5` is an error at parse time (write `props.n = '5'`), where JMS would
quietly select nothing. As in SQL, a comparison with NULL (a missing property, a message with no
correl_id) is UNKNOWN; NOT, AND and OR follow three-valued logic, and a selector selects a
message only when it is TRUE. LIKE is case-sensitive (`%` any run, `_` one character).

Numeric literals have JMS's ranges: an exact number (digits only) is a 64-bit signed integer
(Java's long), any other (a decimal point, an exponent, a duration) a finite double; a literal
outside its range is an error at parse time. A chain of ANDs or ORs may be as long as you like
(it is tested term by term), but parentheses nest at most 100 levels (MAX_DEPTH): a deeper one is
an error at parse time, never a failure when the first message is tested. NOTs in a row fold to
one (three-valued logic: NOT NOT x is x, UNKNOWN included).

A selector is parsed once (`compile_selector`), errors naming the column and what was expected
(InvalidArgument, exit 2), and compiled to a predicate. `Selector.index` gives the equalities on
indexed fields (`correl_id = 'x'`, `priority = 5`) that every selected message must satisfy, so
that a caller can use the index instead of scanning; `Selector.fields` names what it reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import BadData, SelectorError
from .records import Message, parse_iso_time

__all__ = ["FIELDS", "Selector", "SelectorError", "all_of", "compile_selector", "shorthand"]

NUMBER, STRING, BOOL, TIME = "number", "string", "boolean", "time"

# header fields: name -> (type, how to read it from a message and the time now in µs)
FIELDS: dict[str, tuple[str, Callable[[Message, int], Any]]] = {
    "priority": (NUMBER, lambda m, now: m.priority),
    "label": (STRING, lambda m, now: m.label),
    "correl_id": (STRING, lambda m, now: m.correl_id),
    "msg_id": (STRING, lambda m, now: m.msg_id),
    "size": (NUMBER, lambda m, now: m.size),
    "put_time": (TIME, lambda m, now: m.put_time),
    "age": (NUMBER, lambda m, now: (now - m.put_time) / 1_000_000),
    "backouts": (NUMBER, lambda m, now: m.backouts),
    "hops": (NUMBER, lambda m, now: m.hops),
    "class": (STRING, lambda m, now: m.msg_class),
    "delivery": (STRING, lambda m, now: m.delivery),
    "state": (STRING, lambda m, now: m.state),
    "app_specific": (NUMBER, lambda m, now: m.app_specific),
    "expires": (TIME, lambda m, now: m.expires),
    "dead_letter_reason": (STRING, lambda m, now: m.dead_letter_reason),
    "original_queue": (STRING, lambda m, now: m.original_queue),
    # the body as text: its bytes read as UTF-8, a byte that is not UTF-8 matching no character
    # typed (`--body-contains` is `body LIKE '%TEXT%'`); JMS selectors do not see the body
    "body": (STRING, lambda m, now: bytes(m.body).decode("utf-8", "surrogateescape")),
}
PROPERTY_PREFIX = "props."
INDEXED = ("correl_id", "priority")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_KEYWORDS = {"AND", "OR", "NOT", "LIKE", "ESCAPE", "IN", "BETWEEN", "IS", "NULL", "TRUE", "FALSE"}
_COMPARE = ("<>", "<=", ">=", "=", "<", ">")
# JMS: an exact numeric literal is a Java long, an approximate one a double
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
# parentheses nest this deep at most: the parser recurses five calls a level and the compiled
# predicate at most two, so 100 levels stay well inside Python's recursion limit (1000) from
# wherever a command or a library caller compiles and tests a selector
MAX_DEPTH = 100

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>'(?:[^']|'')*')
  | (?P<quoted>"(?:[^"]|"")*")
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?P<unit>ms|s|m|h|d)?(?![\w.]))
  | (?P<word>[A-Za-z_][\w]*(?:\.[\w-]+)?)
  | (?P<op><>|<=|>=|!=|=|<|>|\(|\)|,|[+-])
""", re.VERBOSE)


@dataclass(frozen=True)
class _Token:
    kind: str   # string, number, word, keyword, op, end
    text: str
    value: Any
    column: int  # 1-based


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    at = 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise _error(text, at + 1, f"unexpected character {text[at]!r}")
        kind = match.lastgroup
        token = match.group()
        column = at + 1
        at = match.end()
        if kind == "space":
            continue
        if kind == "string":
            out.append(_Token("string", token, token[1:-1].replace("''", "'"), column))
        elif kind == "quoted":
            out.append(_Token("word", token, token[1:-1].replace('""', '"'), column))
        elif kind == "number" or kind == "unit":
            out.append(_Token("number", token, _number(text, column, token, match.group("unit")), column))
        elif kind == "word":
            upper = token.upper()
            if upper in _KEYWORDS:
                out.append(_Token("keyword", token, upper, column))
            else:
                out.append(_Token("word", token, token, column))
        else:
            out.append(_Token("op", token, "<>" if token == "!=" else token, column))
    out.append(_Token("end", "", None, len(text) + 1))
    return out


def _number(text: str, column: int, token: str, unit: str | None) -> int | float:
    """A numeric literal's value: an int within a long's range (up to 2**63, which only a minus
    sign in front makes a long: _Parser.operand checks), else a finite float."""
    digits = token[:-len(unit)] if unit else token
    shown = token if len(token) <= 24 else token[:20] + "…"
    if not unit and digits.isdigit():
        significant = digits.lstrip("0") or "0"
        # the length first: int() of a long digit string is slow, and past 4300 digits an error
        if len(significant) > len(str(LONG_MAX)) or int(significant) > -LONG_MIN:
            raise _error(text, column, f"the number {shown} is out of range: an integer is 64-bit "
                                       f"({LONG_MIN} to {LONG_MAX}); write a decimal point for a float")
        return int(significant)
    value = float(digits) * (_DURATION_UNITS[unit] if unit else 1.0)
    if value == float("inf"):
        raise _error(text, column, f"the number {shown} is out of range: a number with a decimal point, "
                                   "an exponent or a unit is a double (up to about 1.8e308)")
    return value


def _error(text: str, column: int, what: str) -> SelectorError:
    return SelectorError(f"--where: column {column}: {what} (in {text!r})")


# ---- the tree ---------------------------------------------------------------------------
# Each node compiles to a function (message, now µs) -> value, where a condition's value is
# True, False or None (UNKNOWN) and an operand's is its value or None (NULL).

Fn = Callable[[Message, int], Any]


@dataclass
class _Operand:
    type: str | None  # None: NULL literal
    fn: Fn
    column: int
    text: str
    field: str | None = None    # a header field's name, or the property's, for `fields`
    literal: bool = False
    index: dict[str, Any] | None = None  # a parenthesised condition's equalities (Selector.index)


@dataclass
class Selector:
    """A compiled selector: `matches(m, now)` is True when the selector selects `m`."""
    text: str
    predicate: Fn
    fields: frozenset[str] = field(default_factory=frozenset)
    index: dict[str, Any] = field(default_factory=dict)

    def matches(self, m: Message, now: int) -> bool:
        return self.predicate(m, now) is True


def compile_selector(text: str) -> Selector:
    """Parse and compile a selector; SelectorError (exit 2) names the column of the mistake."""
    if not isinstance(text, str):
        raise SelectorError(f"--where must be a str, got {type(text).__name__}")
    if not text.strip():
        raise SelectorError("--where: an empty selector (give a condition, e.g. \"priority > 4\")")
    parser = _Parser(text)
    condition, index = parser.parse()
    return Selector(text, condition, frozenset(parser.fields), index)


def shorthand(*, label: str | None = None, props: dict[str, str] | None = None,
              older_than: float | None = None, newer_than: float | None = None,
              body_contains: str | None = None) -> list[str]:
    """The selector terms the command line's shorthands stand for (SPEC section 6): `label =`,
    `props.K =` for each property, `age >` / `age <` in seconds, and `body LIKE '%TEXT%'`,
    each written so that any text (quotes, `%`, `_`) is matched as itself."""
    terms = []
    if label is not None:
        terms.append(f"label = {_quoted(label)}")
    for name, value in (props or {}).items():
        terms.append(f'"{PROPERTY_PREFIX}{name.replace(chr(34), chr(34) * 2)}" = {_quoted(value)}')
    if older_than is not None:
        terms.append(f"age > {older_than!r}")
    if newer_than is not None:
        terms.append(f"age < {newer_than!r}")
    if body_contains is not None:
        escaped = "".join("!" + ch if ch in "!%_" else ch for ch in body_contains)
        terms.append(f"body LIKE {_quoted('%' + escaped + '%')} ESCAPE '!'")
    return terms


def all_of(where: str | None, terms: list[str]) -> str | None:
    """`where` and every one of `terms`, as one selector (None: no condition at all)."""
    if not terms:
        return where
    return " AND ".join(([f"({where})"] if where is not None else []) + terms)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.at = 0
        self.depth = 0  # parentheses open around the token being read
        self.fields: set[str] = set()

    # ---- token helpers -------------------------------------------------------------

    @property
    def token(self) -> _Token:
        return self.tokens[self.at]

    def take(self) -> _Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def keyword(self, *words: str) -> bool:
        token = self.token
        if token.kind == "keyword" and token.value in words:
            self.at += 1
            return True
        return False

    def op(self, *ops: str) -> str | None:
        token = self.token
        if token.kind == "op" and token.value in ops:
            self.at += 1
            matched: str = token.value  # an op token's value is its text (`!=` spelt `<>`)
            return matched
        return None

    def expected(self, what: str) -> SelectorError:
        token = self.token
        found = "the end" if token.kind == "end" else repr(token.text)
        return _error(self.text, token.column, f"expected {what}, found {found}")

    # ---- grammar -------------------------------------------------------------------

    def parse(self) -> tuple[Fn, dict[str, Any]]:
        condition, index = self.or_()
        if self.token.kind != "end":
            raise self.expected("AND, OR or the end of the selector")
        return condition, index

    def or_(self) -> tuple[Fn, dict[str, Any]]:
        term, index = self.and_()
        terms = [term]
        while self.keyword("OR"):
            term, _ = self.and_()
            terms.append(term)
        if len(terms) == 1:
            return term, index
        return _any(terms), {}  # either side may select: no index applies

    def and_(self) -> tuple[Fn, dict[str, Any]]:
        term, index = self.not_()
        terms = [term]
        while self.keyword("AND"):
            term, more = self.not_()
            terms.append(term)
            index = {**more, **index}
        return (terms[0] if len(terms) == 1 else _all(terms)), index

    def not_(self) -> tuple[Fn, dict[str, Any]]:
        negations = 0
        while self.keyword("NOT"):  # a loop, not a recursion: NOT NOT … NOT x is x or NOT x
            negations += 1
        if not negations:
            return self.test()
        inner, _ = self.test()
        return (_not(inner) if negations % 2 else inner), {}

    def test(self) -> tuple[Fn, dict[str, Any]]:
        start = self.token
        left = self.operand()
        negated = self.keyword("NOT")
        if self.keyword("LIKE"):
            return self.like(left, negated), {}
        if self.keyword("IN"):
            return self.in_(left, negated), {}
        if self.keyword("BETWEEN"):
            low = self.operand()
            if not self.keyword("AND"):
                raise self.expected("AND of BETWEEN … AND …")
            high = self.operand()
            both = _all([self.compare(left, ">=", low), self.compare(left, "<=", high)])
            return (_not(both) if negated else both), {}
        if negated:
            raise self.expected("LIKE, IN or BETWEEN after NOT")
        if self.keyword("IS"):
            negated = self.keyword("NOT")
            if not self.keyword("NULL"):
                raise self.expected("NULL after IS")
            fn = left.fn
            if negated:
                return (lambda m, now: fn(m, now) is not None), {}
            return (lambda m, now: fn(m, now) is None), {}
        op = self.op(*_COMPARE)
        if op is None:
            if left.type == BOOL:  # TRUE, FALSE, or a parenthesised condition
                return left.fn, left.index or {}
            raise _error(self.text, start.column, f"{left.text!r} is not a condition: compare it "
                                                  "(= <> < <= > >=), or use LIKE, IN, BETWEEN or IS NULL")
        right = self.operand()
        index: dict[str, Any] = {}
        if op == "=" and left.field in INDEXED and right.literal and right.type == FIELDS[left.field][0]:
            value = right.fn(None, 0)  # type: ignore[arg-type]  # a literal reads no message
            if left.field != "priority" or (type(value) is int and 0 <= value <= 7):
                index = {left.field: value}
        return self.compare(left, op, right), index

    def operand(self) -> _Operand:
        token = self.token
        if self.op("("):
            if self.depth == MAX_DEPTH:
                raise _error(self.text, token.column, f"parentheses nest more than {MAX_DEPTH} levels deep "
                                                      "(write a long condition as a chain of AND or OR)")
            self.depth += 1
            inner, index = self.or_()
            if not self.op(")"):
                raise self.expected("')'")
            self.depth -= 1
            operand = _Operand(BOOL, inner, token.column, "(…)")
            operand.index = index
            return operand
        self.at += 1
        if token.kind == "op" and token.value in "+-" and self.token.kind == "number":
            number = self.take()
            value = self.long(-number.value if token.value == "-" else number.value, token, token.text + number.text)
            return _Operand(NUMBER, lambda m, now: value, token.column, token.text + number.text, literal=True)
        if token.kind == "string":
            value = token.value
            return _Operand(STRING, lambda m, now: value, token.column, token.text, literal=True)
        if token.kind == "number":
            value = self.long(token.value, token, token.text)
            return _Operand(NUMBER, lambda m, now: value, token.column, token.text, literal=True)
        if token.kind == "keyword" and token.value in ("TRUE", "FALSE"):
            value = token.value == "TRUE"
            return _Operand(BOOL, lambda m, now: value, token.column, token.text, literal=True)
        if token.kind == "keyword" and token.value == "NULL":
            return _Operand(None, lambda m, now: None, token.column, token.text, literal=True)
        if token.kind == "word":
            name = token.value
            if name.startswith(PROPERTY_PREFIX) and len(name) > len(PROPERTY_PREFIX):
                prop = name[len(PROPERTY_PREFIX):]
                self.fields.add(name)
                return _Operand(STRING, lambda m, now: m.props.get(prop), token.column, token.text, field=name)
            known = FIELDS.get(name.lower())
            if known is not None:
                self.fields.add(name.lower())
                return _Operand(known[0], known[1], token.column, token.text, field=name.lower())
            raise _error(self.text, token.column, f"unknown field {name!r}: use one of "
                                                  f"{', '.join(FIELDS)}, or props.NAME for a property")
        self.at -= 1
        raise self.expected("a field, props.NAME, a 'string', a number, TRUE, FALSE, NULL or '('")

    def long(self, value: int | float, token: _Token, text: str) -> int | float:
        """A number literal's value, with its sign: 2**63 fits a long only negated (_number)."""
        if type(value) is int and value > LONG_MAX:
            raise _error(self.text, token.column, f"the number {text} is out of range: "
                                                  f"an integer is 64-bit ({LONG_MIN} to {LONG_MAX})")
        return value

    def literal(self) -> _Operand:
        token = self.token
        operand = self.operand()
        if not operand.literal:
            raise _error(self.text, token.column, "expected a literal ('string' or number)")
        return operand

    def compare(self, left: _Operand, op: str, right: _Operand) -> Fn:
        left, right = self.times(left, right), self.times(right, left)
        if left.type is not None and right.type is not None and left.type != right.type:
            raise _error(self.text, right.column,
                         f"{left.text} is a {left.type} and {right.text} a {right.type}: they do not compare")
        if BOOL in (left.type, right.type) and op not in ("=", "<>"):
            raise _error(self.text, right.column, "booleans compare only with = and <>")
        return _COMPARATORS[op](left.fn, right.fn)

    def times(self, operand: _Operand, other: _Operand) -> _Operand:
        """A string literal compared with a time (put_time, expires) is a timestamp."""
        if not (operand.literal and operand.type == STRING and other.type == TIME):
            return operand
        try:
            us = parse_iso_time(operand.fn(None, 0))  # type: ignore[arg-type]  # a literal reads no message
        except BadData:
            raise _error(self.text, operand.column, f"{other.text} compares with a timestamp such as "
                                                    f"'2026-11-23T10:00:00Z', not {operand.text}") from None
        return _Operand(TIME, lambda m, now: us, operand.column, operand.text, literal=True)

    def like(self, left: _Operand, negated: bool) -> Fn:
        if left.type not in (STRING, None):
            raise _error(self.text, left.column, f"LIKE matches strings; {left.text} is a {left.type}")
        pattern = self.take()
        if pattern.kind != "string":
            self.at -= 1
            raise self.expected("a 'pattern' after LIKE")
        escape = None
        if self.keyword("ESCAPE"):
            token = self.take()
            if token.kind != "string" or len(token.value) != 1:
                self.at -= 1
                raise self.expected("one character in quotes after ESCAPE")
            escape = token.value
        regex = _like_regex(pattern.value, escape, lambda what: _error(self.text, pattern.column, what))
        fn = left.fn

        def like(m: Message, now: int) -> bool | None:
            value = fn(m, now)
            if value is None:
                return None
            return (regex.fullmatch(value) is None) if negated else (regex.fullmatch(value) is not None)
        return like

    def in_(self, left: _Operand, negated: bool) -> Fn:
        if not self.op("("):
            raise self.expected("'(' after IN")
        values = []
        while True:
            item = self.literal()
            if item.type is None:
                raise _error(self.text, item.column, "IN lists values, not NULL")
            if left.type is not None and item.type != left.type:
                raise _error(self.text, item.column, f"{left.text} is a {left.type}; {item.text} is a {item.type}")
            values.append(item.fn(None, 0))  # type: ignore[arg-type]  # a literal reads no message
            if self.op(")"):
                break
            if not self.op(","):
                raise self.expected("',' or ')' in the IN list")
        members = set(values)
        fn = left.fn

        def in_list(m: Message, now: int) -> bool | None:
            value = fn(m, now)
            if value is None:
                return None
            return (value not in members) if negated else (value in members)
        return in_list


def _like_regex(pattern: str, escape: str | None, error: Callable[[str], SelectorError]) -> re.Pattern[str]:
    out = []
    chars = iter(pattern)
    for ch in chars:
        if escape is not None and ch == escape:
            nxt = next(chars, None)
            if nxt is None:
                raise error("the LIKE pattern ends with its escape character")
            out.append(re.escape(nxt))
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out), re.DOTALL)


def _not(fn: Fn) -> Fn:
    def not_(m: Message, now: int) -> bool | None:
        value = fn(m, now)
        return None if value is None else not value
    return not_


def _chain(terms: list[Fn], decisive: bool) -> Fn:
    """A chain of terms in three-valued logic, tested in a loop (a closure per pair would
    recurse once a term): `decisive` if any term is (FALSE for AND, TRUE for OR), else UNKNOWN
    if any is UNKNOWN, else the other truth value."""
    def chain(m: Message, now: int) -> bool | None:
        unknown = False
        for term in terms:
            value: bool | None = term(m, now)
            if value is decisive:
                return decisive
            if value is None:
                unknown = True
        return None if unknown else not decisive
    return chain


def _all(terms: list[Fn]) -> Fn:
    """AND: FALSE if any term is FALSE, else UNKNOWN if any is UNKNOWN, else TRUE."""
    return _chain(terms, False)


def _any(terms: list[Fn]) -> Fn:
    """OR: TRUE if any term is TRUE, else UNKNOWN if any is UNKNOWN, else FALSE."""
    return _chain(terms, True)


def _comparator(test: Callable[[Any, Any], bool]) -> Callable[[Fn, Fn], Fn]:
    def make(left: Fn, right: Fn) -> Fn:
        def compare(m: Message, now: int) -> bool | None:
            a = left(m, now)
            if a is None:
                return None
            b = right(m, now)
            if b is None:
                return None
            return test(a, b)
        return compare
    return make


_COMPARATORS = {
    "=": _comparator(lambda a, b: a == b),
    "<>": _comparator(lambda a, b: a != b),
    "<": _comparator(lambda a, b: a < b),
    "<=": _comparator(lambda a, b: a <= b),
    ">": _comparator(lambda a, b: a > b),
    ">=": _comparator(lambda a, b: a >= b),
}
