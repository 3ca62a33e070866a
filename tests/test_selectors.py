"""Selectors (`--where`, store/selectors.py) against a reference: SQLite, which implements the
same SQL92 conditional expressions with three-valued logic. For generated messages and
expressions, the messages a selector selects are exactly the rows SQLite's WHERE selects."""

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.records import Message
from store.selectors import SelectorError, compile_selector

NOW = 1_800_000_000_000_000
NUMERIC = ("priority", "backouts", "hops", "app_specific", "size")
TEXT = ("label", "correl_id", "props.a", "props.b")
COLUMN = {"props.a": "p_a", "props.b": "p_b"}
CHARS = "ab%_'"


def sql_name(name):
    return COLUMN.get(name, name)


messages = st.lists(st.fixed_dictionaries({
    "priority": st.integers(0, 7),
    "backouts": st.integers(0, 5),
    "hops": st.integers(0, 3),
    "app_specific": st.integers(-3, 3),
    "body": st.binary(max_size=4),
    "label": st.text("ab'%_", max_size=3),
    "correl_id": st.none() | st.text("ab", max_size=2),
    "props": st.dictionaries(st.sampled_from(["a", "b"]), st.text("ab%_", max_size=2)),
}), min_size=1, max_size=25)


def quote(text):
    return "'" + text.replace("'", "''") + "'"


numbers = st.integers(-1, 8).map(str)
strings = st.text(CHARS, max_size=3).map(quote)


@st.composite
def comparisons(draw):
    if draw(st.booleans()):
        field, literal, op = draw(st.sampled_from(NUMERIC)), draw(numbers), draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
        kind = draw(st.sampled_from(["cmp", "cmp", "between", "in", "null"]))
        values = numbers
    else:
        field, literal, op = draw(st.sampled_from(TEXT)), draw(strings), draw(st.sampled_from(["=", "<>", "<", ">="]))
        kind = draw(st.sampled_from(["cmp", "like", "like", "between", "in", "null"]))
        values = strings
    neg = "NOT " if draw(st.booleans()) else ""
    name = field
    if kind == "cmp":
        return f"{name} {op} {literal}"
    if kind == "between":
        return f"{name} {neg}BETWEEN {draw(values)} AND {draw(values)}"
    if kind == "in":
        return f"{name} {neg}IN ({', '.join(draw(st.lists(values, min_size=1, max_size=3)))})"
    if kind == "null":
        return f"{name} IS {neg}NULL"
    pattern = draw(st.text("ab%_!", max_size=4))
    escape = " ESCAPE '!'" if "!" in pattern and not pattern.endswith("!") else ""
    if "!" in pattern and not escape:
        pattern = pattern.replace("!", "")
    return f"{name} {neg}LIKE {quote(pattern)}{escape}"


expressions = st.recursive(
    comparisons(),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        inner.map(lambda e: f"NOT ({e})"),
        st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
    ),
    max_leaves=5,
)


def to_sql(expr):
    for name, column in COLUMN.items():
        expr = expr.replace(name, column)
    return expr


def reference(rows, expr):
    db = sqlite3.connect(":memory:")
    db.execute("PRAGMA case_sensitive_like = ON")  # JMS LIKE is case-sensitive
    db.execute("CREATE TABLE m (i INTEGER, priority INTEGER, backouts INTEGER, hops INTEGER, "
               "app_specific INTEGER, size INTEGER, label TEXT, correl_id TEXT, p_a TEXT, p_b TEXT)")
    db.executemany("INSERT INTO m VALUES (?,?,?,?,?,?,?,?,?,?)", [
        (i, r["priority"], r["backouts"], r["hops"], r["app_specific"], len(r["body"]), r["label"],
         r["correl_id"], r["props"].get("a"), r["props"].get("b")) for i, r in enumerate(rows)])
    return {i for (i,) in db.execute(f"SELECT i FROM m WHERE {to_sql(expr)}")}


def as_message(r):
    return Message(r["body"], priority=r["priority"], backouts=r["backouts"], hops=r["hops"],
                   app_specific=r["app_specific"], label=r["label"], correl_id=r["correl_id"],
                   props=dict(r["props"]), put_time=NOW - 1_000_000)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages, expressions)
def test_a_selector_selects_what_sqlite_selects(rows, expr):
    selector = compile_selector(expr)
    got = {i for i, r in enumerate(rows) if selector.matches(as_message(r), NOW)}
    assert got == reference(rows, expr), expr


@pytest.mark.parametrize("expr, want", [
    ("age > 10m", {"old"}),
    ("age <= 600", {"new"}),
    ("put_time < '2027-01-15T07:30:00Z'", {"old"}),
    ("expires IS NULL", {"old"}),
    ("expires > '2020-01-01T00:00:00Z'", {"new"}),
    ("class = 'report' OR delivery = 'express'", {"new"}),
    ("state = 'available' AND dead_letter_reason IS NULL", {"old", "new"}),
    ("\"props.odd name\" = 'x y'", {"new"}),
    ("props.region LIKE 'e!_%' ESCAPE '!'", {"old"}),
    ("msg_id LIKE '%\\7'", {"old"}),
    ("TRUE", {"old", "new"}),
    ("NOT (size > 2)", {"new"}),
])
def test_header_fields_times_durations_and_quoted_properties(expr, want):
    now = 1_800_000_000_000_000
    old = Message(b"old", label="old", put_time=now - 3600_000_000, props={"region": "e_u"},
                  origin=b"\1" * 16, msg_n=7)
    new = Message(b"n", label="new", put_time=now - 60_000_000, expires=now + 1, report=True,
                  express=True, props={"odd name": "x y", "region": "eu"}, origin=b"\1" * 16, msg_n=8)
    selector = compile_selector(expr)
    assert {m.label for m in (old, new) if selector.matches(m, now)} == want


@pytest.mark.parametrize("expr, column, says", [
    ("priority >", 11, "expected a field"),
    ("props.n = 5", 11, "do not compare"),
    ("colour = 'red'", 1, "unknown field 'colour'"),
    ("label LIKE 5", 12, "a 'pattern' after LIKE"),
    ("put_time > 'yesterday'", 12, "a timestamp"),
    ("(priority = 1", 14, "expected ')'"),
    ("priority = 1 priority", 14, "expected AND, OR or the end"),
    ("label = 'unterminated", 9, "unexpected character"),
    ("priority NOT = 3", 14, "LIKE, IN or BETWEEN after NOT"),
    ("label LIKE 'a!' ESCAPE '!'", 12, "ends with its escape"),
    ("priority IN (1, 'a')", 17, "is a number"),
    ("priority", 1, "is not a condition"),
    ("priority > TRUE", 12, "do not compare"),
])
def test_a_bad_selector_names_the_column_and_what_was_expected(expr, column, says):
    with pytest.raises(SelectorError) as caught:
        compile_selector(expr)
    assert f"column {column}:" in str(caught.value) and says in str(caught.value)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("expr, index", [
    ("correl_id = 'x'", {"correl_id": "x"}),
    ("priority = 5 AND props.a = 'b'", {"priority": 5}),
    ("(correl_id = 'x') AND age > 1", {"correl_id": "x"}),
    ("correl_id = 'x' OR priority = 5", {}),
    ("NOT correl_id = 'x'", {}),
    ("priority = 9", {}),
    ("priority >= 5", {}),
])
def test_equalities_on_indexed_fields_are_offered_to_the_index(expr, index):
    assert compile_selector(expr).index == index
