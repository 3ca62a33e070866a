"""The selector shorthands (SPEC section 6): on every command that takes `--where` (get, browse,
move, export, queue purge, undo, redrive, consume), `--label L`, `--prop K=V` (repeatable),
`--older-than D`, `--newer-than D` and `--body-contains TEXT` stand for the selector terms
`label = 'L'`, `props.K = 'V'`, `age > D`, `age < D` and `body LIKE '%TEXT%'`, ANDed to the
`--where` given (store/selectors.py `shorthand` writes them, so that quotes, `%` and `_` in a
value match themselves). `undo` keeps its own `--older-than` (how long a message has been in
flight) and takes the other three."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from .durations import parse_duration
from .exits import UsageError


def key_values(items: Optional[list[str]], option: str = "--prop") -> dict[str, str]:
    """`K=V` words as a dict (the last of a name given twice wins, as for a put's --prop)."""
    pairs = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{option} wants K=V, got {item!r}")
        pairs[key] = value
    return pairs


def where(where: Optional[str], *, label: Optional[str] = None, prop: Optional[list[str]] = None,
          older_than: Optional[str] = None, newer_than: Optional[str] = None,
          body_contains: Optional[str] = None) -> Optional[str]:
    """The selector the command runs with: `where` and the shorthands given (None: all messages)."""
    props = key_values(prop)
    older = None if older_than is None else parse_duration(older_than, allow_forever=False, what="--older-than")
    newer = None if newer_than is None else parse_duration(newer_than, allow_forever=False, what="--newer-than")
    if label is None and not props and older is None and newer is None and body_contains is None:
        return where
    from store.selectors import all_of, shorthand  # only a filter loads the parser

    return all_of(where, shorthand(label=label, props=props, older_than=older, newer_than=newer,
                                   body_contains=body_contains))


def selector(params: Mapping[str, Any]) -> Optional[str]:
    """`where` for a command whose parameters (its `locals()`) are `params`: its --where and
    whichever of the shorthands it takes."""
    return where(params.get("where"), label=params.get("label"), prop=params.get("prop"),
                 older_than=params.get("older_than"), newer_than=params.get("newer_than"),
                 body_contains=params.get("body_contains"))
