"""A message's text fields come from whoever put it (`put --jsonl`, `import`, a peer, `--prop`),
and `put --jsonl` keeps them exact, control characters included. `-o text` and `-o hex` show
each of them on one line, its control characters, escape sequences and bidirectional overrides
escaped as the error line shows them (mqcli.exits.one_line), so that no field restyles the
operator's terminal or forges a message; JSON keeps the exact text."""

import json
import os

from cli_helpers import mqcli_command
from terminal_helpers import Terminal

LABEL = "L\x1b]0;pwned\x07\x1b[2J\x9b31m\x00"
CORREL = "c\r\n[2] msg_id=FAKE\\1 priority=7 size=6\u202e"
# a name that draws a whole fake hex block: a dump, a boundary and a header
NAME = ("z\n\n00000000  66 61 6b 65  |fake|\n00000004\n---- message 2 ----\n"
        "msg_id        FORGED\\1\nprops.\x1b[31mred")
VALUE = "\u2066v\x85\n[2] msg_id=FAKE\\1"
PROPS = {NAME: VALUE, "x": "\u202eevil\r"}
# the second message's property, as typed on the command line
TYPED = "v\n[2] msg_id=FAKE\\1 priority=7 size=6\nforged"

LABEL_SHOWN = r"L\x1b]0;pwned\x07\x1b[2J\x9b31m\x00"
CORREL_SHOWN = r"c\r\n[2] msg_id=FAKE\1 priority=7 size=6\u202e"
NAME_SHOWN = (r"z\n\n00000000  66 61 6b 65  |fake|\n00000004\n---- message 2 ----\n"
              r"msg_id        FORGED\1\nprops.\x1b[31mred")
VALUE_SHOWN = r"\u2066v\x85\n[2] msg_id=FAKE\1"
TYPED_SHOWN = r"v\n[2] msg_id=FAKE\1 priority=7 size=6\nforged"


def _put_hostile(cli):
    """Two messages: one with hostile fields from `put --jsonl`, one with a hostile `--prop`."""
    record = {"body": "b", "label": LABEL, "correl_id": CORREL, "props": PROPS}
    first = cli.ok("put", "q", "--jsonl", "-", input=json.dumps(record) + "\n").out.strip()
    second = cli.put("q", "plain", "--prop", f"k={TYPED}")["msg_id"]
    return first, second


def _lines(text):
    """`text`'s lines, each checked to hold only printable characters (split at LF alone:
    str.splitlines would also split at CR, NEL and U+2028, hiding them)."""
    lines = text.split("\n")
    assert lines[-1] == "", text
    for line in lines[:-1]:
        assert line.isprintable(), line
    return lines[:-1]


def test_text_shows_each_message_as_its_line_and_its_body(cli):
    first, second = _put_hostile(cli)
    props = f"props={NAME_SHOWN}={VALUE_SHOWN},x=\\u202eevil\\r"
    one = f"msg_id={first} priority=3 size=1 correl_id={CORREL_SHOWN} label={LABEL_SHOWN} {props}"
    two = f"msg_id={second} priority=3 size=5 props=k={TYPED_SHOWN}"
    assert _lines(cli.subprocess("browse", "q").out) == [f"[1] {one}", "b", f"[2] {two}", "plain"]
    assert _lines(cli.subprocess("get", "q").out) == [one, "b"]
    assert _lines(cli.subprocess("get", "q", "--count", "1").out) == [f"[1] {two}", "plain"]


def _field(lines, name):
    """The value a `-o hex` header line shows for the field `name`."""
    return next(line[len(name):].lstrip(" ") for line in lines if line.startswith(name + " "))


def test_hex_shows_each_field_and_property_name_on_one_line(cli):
    _put_hostile(cli)
    lines = _lines(cli.subprocess("browse", "q", "-o", "hex").out)
    assert [line for line in lines if line.startswith("----")] == ["---- message 1 ----", "---- message 2 ----"]
    first, second = lines[:lines.index("---- message 2 ----")], lines[lines.index("---- message 2 ----"):]
    # the title, 19 fields and 2 properties, a blank line, one line of dump and its end offset
    assert len(first) - 1 == len(second) == 24, (first, second)
    assert (_field(first, "label"), _field(first, "correl_id")) == (LABEL_SHOWN, CORREL_SHOWN)
    assert f"props.{NAME_SHOWN}  {VALUE_SHOWN}" in first  # the longest name: two blanks after it
    assert _field(first, "props.x") == r"\u202eevil\r" and _field(second, "props.k") == TYPED_SHOWN


def test_a_dead_letters_fields_are_shown_escaped(cli):
    """A record replayed through `put --jsonl` brings its own dead-letter fields."""
    record = cli.put("q", "x")
    cli.ok("get", "q", "-q")
    record.update(dead_letter_reason="r\x1b[2J\nX", original_queue="oq\x1b]0;t\x07\u202e",
                  props={"mqcli.dead_letter_time": "\x1b[2Jnow\n"})
    cli.ok("put", "q", "--jsonl", "-", input=json.dumps(record) + "\n")
    shown = (r"dead_letter_reason='r\x1b[2J\nX' status=MQ_ERROR original_queue=oq\x1b]0;t\x07\u202e"
             r" dead_lettered=\x1b[2Jnow\n")
    assert _lines(cli.subprocess("browse", "q").out) == [f"[1] msg_id={record['msg_id']} priority=3 size=1 {shown}", "x"]
    lines = _lines(cli.subprocess("browse", "q", "-o", "hex").out)
    assert _field(lines, "dead_letter_reason") == r"r\x1b[2J\nX"
    assert _field(lines, "original_queue") == r"oq\x1b]0;t\x07\u202e"
    assert _field(lines, "props.mqcli.dead_letter_time") == r"\x1b[2Jnow\n"


def test_a_replayed_report_queue_is_shown_escaped(cli):
    record = cli.put("q", "x")
    cli.ok("get", "q", "-q")
    record.update(trace=True, report_queue="rq\x1b[2J\n---- message 2 ----\u202e")
    cli.ok("put", "q", "--jsonl", "-", input=json.dumps(record) + "\n")
    lines = _lines(cli.subprocess("browse", "q", "-o", "hex").out)
    assert _field(lines, "report_queue") == r"rq\x1b[2J\n---- message 2 ----\u202e"
    assert _field(lines, "trace") == "yes"
    assert cli.json("browse", "q")[0]["report_queue"] == record["report_queue"]


def test_json_keeps_the_exact_fields(cli):
    _put_hostile(cli)
    first, second = cli.jsonl("browse", "q")
    assert (first["label"], first["correl_id"], first["props"]) == (LABEL, CORREL, PROPS)
    assert second["props"] == {"k": TYPED}


def test_a_terminal_receives_no_control_character_from_a_field(cli):
    _put_hostile(cli)
    term = Terminal([*mqcli_command(), "browse", "q"], {**os.environ, **cli.env})
    assert term.finish() == 0
    text = term.raw.decode("utf-8").replace("\r\n", "\n")  # the pty's line discipline writes CR LF
    assert len(_lines(text)) == 4 and "\\x1b]0;pwned\\x07" in text
