"""Selector limits (store/selectors.py): AND / OR chains of any length are tested term by term,
NOTs in a row fold, parentheses nest at most MAX_DEPTH levels, and numeric literals keep to
JMS's ranges (an integer is a 64-bit long, anything else a finite double). Every limit is met
at parse time, as a SelectorError (exit 2) naming the column, never when a message is tested."""

import re
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.records import Message
from store.selectors import LONG_MAX, LONG_MIN, MAX_DEPTH, SelectorError, compile_selector
from test_selectors import as_message, comparisons, messages, reference

NOW = 1_800_000_000_000_000
M = Message(b"body", priority=3, label="a", props={"n": "1"})


def selects(expr, m=M):
    return compile_selector(expr).matches(m, NOW)


def refused(expr):
    with pytest.raises(SelectorError) as caught:
        compile_selector(expr)
    assert caught.value.exit_code == 2
    assert "\n" not in str(caught.value)
    return str(caught.value)


@pytest.mark.parametrize("n", [1000, 5000])
def test_a_long_or_chain_is_tested_term_by_term(n):
    assert selects(" OR ".join(["priority = 9"] * n)) is False
    assert selects(" OR ".join(["priority = 9"] * n + ["priority = 3"])) is True
    assert selects(" OR ".join(["priority = 9"] * n + ["props.none = 'x'"])) is False  # UNKNOWN
    assert selects("NOT (" + " OR ".join(["priority = 9"] * n + ["props.none = 'x'"]) + ")") is False


@pytest.mark.parametrize("n", [1000, 5000])
def test_a_long_and_chain_is_tested_term_by_term(n):
    assert selects(" AND ".join(["priority >= 0"] * n)) is True
    assert selects(" AND ".join(["priority >= 0"] * n + ["priority = 9"])) is False
    assert selects("NOT (" + " AND ".join(["priority >= 0"] * n + ["props.none = 'x'"]) + ")") is False


def test_a_generated_list_of_ids_selects_its_message():
    ids = [f"msg_id = '{i:032x}\\{i}'" for i in range(2000)]
    m = Message(b"x", origin=bytes.fromhex(f"{1234:032x}"), msg_n=1234)
    assert selects(" OR ".join(ids), m) == (m.msg_id in {f"{i:032x}\\{i}" for i in range(2000)})
    assert selects(" OR ".join(ids + [f"msg_id = '{m.msg_id}'"]), m) is True


def test_nots_in_a_row_fold_with_three_valued_logic():
    for n in (1, 2, 3, 1000, 1001):
        assert selects("NOT " * n + "priority = 3") is (n % 2 == 0)
        assert selects("NOT " * n + "props.none = 'x'") is False  # NOT UNKNOWN is UNKNOWN


def test_parentheses_nest_up_to_the_limit_and_no_deeper():
    assert selects("(" * MAX_DEPTH + "priority = 3" + ")" * MAX_DEPTH) is True
    alternating = "priority = 3"
    for level in range(MAX_DEPTH):
        alternating = f"(priority = 9 OR NOT NOT {alternating})" if level % 2 else f"(priority >= 0 AND {alternating})"
    assert selects(alternating) is True
    says = refused("(" * (MAX_DEPTH + 1) + "priority = 3" + ")" * (MAX_DEPTH + 1))
    assert f"column {MAX_DEPTH + 1}:" in says and f"more than {MAX_DEPTH} levels" in says
    # a depth no message could be tested at is refused just the same, however unbalanced
    assert "levels" in refused("(" * 100_000 + "priority = 3")
    assert "levels" in refused("NOT (" * 10_000 + "priority = 3" + ")" * 10_000)


@given(messages, st.lists(st.tuples(st.sampled_from(["", "NOT ", "NOT NOT "]), comparisons()),
                          min_size=2, max_size=30),
       st.lists(st.sampled_from(["AND", "OR"]), min_size=29, max_size=29))
@settings(max_examples=150, deadline=None)
def test_a_chain_selects_what_sqlite_selects(rows, terms, joins):
    expr = " ".join(f"{join} {neg}{term}" for join, (neg, term) in zip(["", *joins], terms)).strip()
    selector = compile_selector(expr)
    got = {i for i, r in enumerate(rows) if selector.matches(as_message(r), NOW)}
    assert got == reference(rows, expr), expr


@pytest.mark.parametrize("literal", [str(LONG_MAX), str(LONG_MIN), "-" + str(LONG_MAX), "+" + str(LONG_MAX),
                                     "0" * 5000 + "7", "1e308", "-1.7e308", "1" + "0" * 300 + ".5",
                                     "1e-999", "9223372036854775808.0"])
def test_numbers_in_range_are_accepted(literal):
    selector = compile_selector(f"app_specific < {literal} OR app_specific >= {literal}")
    assert selector.matches(M, NOW) is True


@pytest.mark.parametrize("literal, says", [
    ("1" + "0" * 4300, "is 64-bit"),          # past Python's int-string limit
    ("1" + "0" * 19, "is 64-bit"),
    (str(LONG_MAX + 1), "is 64-bit"),          # 2**63 is a long only after a minus sign
    ("+" + str(LONG_MAX + 1), "is 64-bit"),
    ("-" + str(LONG_MAX + 2), "is 64-bit"),
    ("1e309", "a double"),
    ("-1e999", "a double"),
    ("1" + "0" * 400 + ".5", "a double"),
    ("1e306d", "a double"),                   # a duration in seconds is a double too
])
def test_a_number_out_of_range_is_refused_naming_it(literal, says):
    message = refused(f"app_specific = {literal}")
    # the column of the literal, or of its sign
    assert re.search(r"column 1[67]:", message) and "out of range" in message and says in message
    assert literal.lstrip("+-")[:20] in message
    assert says in refused(f"app_specific IN (1, {literal})")


def test_sqlite_reads_the_chains_the_same_way():
    """The reference itself: SQLite agrees that NOT NOT folds and chains are left to right."""
    db = sqlite3.connect(":memory:")
    assert db.execute("SELECT NOT NOT NULL IS NULL, (NULL OR 1), (NULL AND 0)").fetchone() == (1, 1, 0)
