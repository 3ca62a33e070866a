"""`-o hex`: each message as a header block of its fields, then a hex dump of its body, the way
IBM MQ's `amqsbcg` prints a message descriptor and then the data, and `xxd`/`hexdump -C` print
bytes: 16 a line, the offset, the bytes in hex, then the printable ones (others as `.`).
Binary-safe: the body is shown only as hex and ASCII, whatever it holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .exits import one_line

if TYPE_CHECKING:
    from store import Message

WIDTH = 16
# bytes shown as themselves in the right column: printable ASCII; every other byte is `.`
_SHOWN = bytes(b if 0x20 <= b < 0x7F else 0x2E for b in range(256))


def dump(data: bytes) -> str:
    """The hex dump of `data`: one line per 16 bytes, e.g.
    `00000000  68 65 6c 6c 6f 00 ff 0a  ...                    |hello...|`."""
    lines = []
    for at in range(0, len(data), WIDTH):
        chunk = data[at:at + WIDTH]
        left = chunk[:8].hex(" ")
        right = chunk[8:].hex(" ")
        lines.append(f"{at:08x}  {left:<23}  {right:<23}  |{chunk.translate(_SHOWN).decode('ascii')}|\n")
    lines.append(f"{len(data):08x}\n")  # the end offset, as hexdump -C closes a dump
    return "".join(lines)


def header(m: Message) -> list[tuple[str, object]]:
    """The fields of the header block, in the order a reader looks for them."""
    fields: list[tuple[str, object]] = [
        ("msg_id", m.msg_id), ("correl_id", m.correl_id), ("priority", m.priority), ("label", m.label),
        ("put_time", _iso(m.put_time)), ("expires", _iso(m.expires)), ("size", m.size),
        ("backouts", m.backouts), ("hops", m.hops), ("app_specific", m.app_specific),
        ("class", m.msg_class), ("delivery", m.delivery), ("dead_letter", _yes(m.dead_letter)),
        ("trace", _yes(m.trace)), ("report_queue", m.report_queue), ("queue", m.queue), ("state", m.state),
    ]
    if m.in_flight:  # who holds it, as `-o json` says
        fields += [("confirm_id", m.confirm_id), ("lock_id", m.lock_id), ("tx", m.tx),
                   ("lease_expires", _iso(m.lease_expires))]
    fields += [("lookup_id", m.lookup_id), ("unique_id", m.unique_id)]
    if m.dead_letter_reason is not None:
        from store.deadletters import dead_letter_status

        fields += [("dead_letter_reason", m.dead_letter_reason),
                   ("dead_letter_status", dead_letter_status(m.dead_letter_reason)),
                   ("original_queue", m.original_queue)]
    fields += [(f"props.{k}", v) for k, v in sorted(m.props.items())]
    return fields


def message(m: Message, number: int | None = None) -> bytes:
    """One message: a title line, the header block, a blank line, the dump of the body."""
    title = f"---- message {number} ----\n" if number is not None else "---- message ----\n"
    # a text field or a property's name is whatever the message's sender chose: escaped as on
    # an error line, each stays on its line, so message boundaries stay visible
    pairs = [(one_line(k), "-" if v is None else one_line(str(v))) for k, v in header(m)]
    width = max(len(k) for k, _ in pairs)
    block = "".join(f"{k:<{width}}  {v}\n" for k, v in pairs)
    return (title + block + "\n" + dump(m.body)).encode("utf-8")


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _iso(us: int | None) -> str | None:
    from store.records import iso_time

    return None if us is None else iso_time(us)
