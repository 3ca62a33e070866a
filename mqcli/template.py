"""`--format TEMPLATE` (get, browse): each message written as a template fills it, as kcat's
`-f` does. Placeholders in braces name a message's fields (`{msg_id}`, `{props.region}`,
`{body}`, `{body_hex}`, the list in PLACEHOLDERS); `{{` and `}}` are literal braces; the text
between takes the escapes of `--delimiter` (`\\n`, `\\t`, `\\0`, `\\\\`, `\\xHH`, ...). The
result is bytes: `{body}` is the body's own bytes, whatever they are.

A template is compiled once, as the command line is read: an unknown placeholder is a usage
error (exit 2) naming it, before any message is taken.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Optional

from . import values

if TYPE_CHECKING:
    from store import Message


def _text(value: object) -> bytes:
    return b"" if value is None else str(value).encode("utf-8", "surrogateescape")


def _time(us: int | None) -> bytes:
    from store.records import iso_time

    return b"" if us is None else iso_time(us).encode("ascii")


# placeholder -> its bytes for a message; a field a message lacks (no correl_id) is empty
PLACEHOLDERS: dict[str, Callable[[Message], bytes]] = {
    "msg_id": lambda m: m.msg_id.encode("utf-8"),
    "priority": lambda m: _text(m.priority),
    "label": lambda m: _text(m.label),
    "correl_id": lambda m: _text(m.correl_id),
    "put_time": lambda m: _time(m.put_time),
    "size": lambda m: _text(m.size),
    "backouts": lambda m: _text(m.backouts),
    "body": lambda m: bytes(m.body),
    "body_hex": lambda m: m.body.hex().encode("ascii"),
    "queue": lambda m: _text(m.queue),
    "state": lambda m: _text(m.state),
    "expires": lambda m: _time(m.expires),
    "app_specific": lambda m: _text(m.app_specific),
    "hops": lambda m: _text(m.hops),
    "lookup_id": lambda m: _text(m.lookup_id),
    "unique_id": lambda m: _text(m.unique_id),
    "dead_letter_reason": lambda m: _text(m.dead_letter_reason),
    "original_queue": lambda m: _text(m.original_queue),
}
PROPS = "props."


class TemplateError(ValueError):
    pass


class Template:
    """A compiled template: literal byte strings and field readers, in order."""

    def __init__(self, text: str, parts: list[bytes | Callable[[Message], bytes]]) -> None:
        self.text = text
        self._parts = parts

    def render(self, m: Message) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(m) for p in self._parts)


def _prop(name: str) -> Callable[[Message], bytes]:
    return lambda m: _text(m.props.get(name))


def compile_template(text: str) -> Template:
    """Compile `text`; TemplateError names what is wrong (an unknown placeholder, a lone
    brace, a bad escape)."""
    parts: list[bytes | Callable[[Message], bytes]] = []
    literal: list[str] = []
    i = 0

    def flush() -> None:
        if literal:
            try:
                parts.append(values.parse_escapes("".join(literal)))
            except ValueError as exc:
                raise TemplateError(f"{exc} (escapes: {values.ESCAPES_HELP})") from None
            literal.clear()

    while i < len(text):
        c = text[i]
        if c in "{}" and text.startswith(c * 2, i):
            literal.append(c)
            i += 2
        elif c == "}":
            raise TemplateError(f"a lone '}}' at column {i + 1}; write '}}}}' for a brace")
        elif c == "{":
            end = text.find("}", i)
            if end < 0:
                raise TemplateError(f"the '{{' at column {i + 1} is not closed; write '{{{{' for a brace")
            name = text[i + 1:end]
            flush()
            if name.startswith(PROPS) and len(name) > len(PROPS):
                parts.append(_prop(name[len(PROPS):]))
            elif name in PLACEHOLDERS:
                parts.append(PLACEHOLDERS[name])
            else:
                raise TemplateError(f"unknown placeholder {{{name}}}; use one of "
                                    + " ".join(f"{{{p}}}" for p in PLACEHOLDERS) + " {props.NAME}")
            i = end + 1
        elif c == "\\" and text.startswith("N{", i + 1) and "}" in text[i:]:
            end = text.index("}", i)
            literal.append(text[i:end + 1])  # \N{NAME}: its braces are the escape's
            i = end + 1
        elif c == "\\" and i + 1 < len(text):
            literal.append(text[i:i + 2])  # an escape: `\{` stays with its backslash for parse_escapes
            i += 2
        else:
            literal.append(c)
            i += 1
    flush()
    return Template(text, parts)


def option(text: Optional[str]) -> Optional[Template]:
    """The callback of --format: the template is compiled as the command line is read, so an
    unknown placeholder is exit 2 naming it, before any message is taken."""
    if text is None:
        return None
    try:
        return compile_template(text)
    except TemplateError as exc:
        values.refuse(str(exc))
