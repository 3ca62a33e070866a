"""The selector shorthands (SPEC section 6, mqcli/shorthands.py): `--label`, `--prop K=V`,
`--older-than`, `--newer-than` and `--body-contains` on every command that takes `--where`,
each ANDed to it, and values matched as written whatever characters they hold."""

import time

import pytest

from store import NewMessage, Store
from store.selectors import all_of, compile_selector, shorthand
from store.records import Message

HOUR = 3600.0


def fill(cli):
    """Six messages: three put two hours ago, three now; labels, properties and bodies with
    the characters a selector gives meaning to."""
    then = time.time() - 2 * HOUR
    with Store.open(cli.store, clock=lambda: then) as st:
        st.put_many("q", [NewMessage(b"old 100% sure", label="it's", props={"region": "eu"}),
                          NewMessage(b"old a_b", label="plain", props={"odd \"name\"": "x'y"}),
                          NewMessage(b"\xff\xfe old binary", label="bin", props={"region": "us"})])
    with Store.open(cli.store) as st:
        st.put_many("q", [NewMessage(b"new 100 sure", label="it's", props={"region": "eu", "tier": "1"}),
                          NewMessage(b"new axb!", label="plain%", props={"region": "eu", "tier": "2"}),
                          NewMessage("new caf\u00e9".encode(), label="café", props={})])


def bodies(cli, *args):
    return [m.get("body", "<binary>") for m in cli.jsonl("browse", "q", "--state", "all", *args)]


def test_each_shorthand_selects_by_what_it_names_and_they_add_up(cli):
    fill(cli)
    assert bodies(cli, "--label", "it's") == ["old 100% sure", "new 100 sure"]
    assert bodies(cli, "--label", "plain") == ["old a_b"]  # an exact label, not a LIKE pattern
    assert bodies(cli, "--prop", "region=eu") == ["old 100% sure", "new 100 sure", "new axb!"]
    assert bodies(cli, "--prop", "region=eu", "--prop", "tier=2") == ["new axb!"]
    assert bodies(cli, "--prop", "odd \"name\"=x'y") == ["old a_b"]
    assert bodies(cli, "--older-than", "1h") == ["old 100% sure", "old a_b", "<binary>"]
    assert bodies(cli, "--newer-than", "1h") == ["new 100 sure", "new axb!", "new café"]
    assert bodies(cli, "--older-than", "1h", "--newer-than", "3h") == bodies(cli, "--older-than", "1h")
    assert bodies(cli, "--older-than", "3h") == []
    # % and _ are themselves, not LIKE's wildcards; a body that is not UTF-8 is still searched
    assert bodies(cli, "--body-contains", "100%") == ["old 100% sure"]
    assert bodies(cli, "--body-contains", "a_b") == ["old a_b"]
    assert bodies(cli, "--body-contains", "b!") == ["new axb!"]
    assert bodies(cli, "--body-contains", "binary") == ["<binary>"]
    assert bodies(cli, "--body-contains", "café") == ["new café"]
    # with --where: both hold
    assert bodies(cli, "--prop", "region=eu", "--where", "label = 'it''s' OR label = 'plain%'",
                  "--newer-than", "1h") == ["new 100 sure", "new axb!"]


def test_every_command_with_where_takes_them(cli):
    fill(cli)
    cli.ok("queue", "create", "eu", "-q")
    assert cli.json("move", "q", "eu", "--prop", "region=eu", "--older-than", "1h")["moved"] == 1
    assert [m["body"] for m in cli.jsonl("browse", "eu")] == ["old 100% sure"]
    assert [m.get("body") for m in cli.jsonl("export", "q", "--label", "plain%")][1:] == ["new axb!"]
    assert cli.json("queue", "purge", "q", "--body-contains", "sure", "--dry-run")["would_remove"] == 1
    got = cli.jsonl("get", "q", "--all", "--label", "plain", "--confirm-id", "9")
    assert [m["body"] for m in got] == ["old a_b"]
    assert cli.json("undo", "--all", "--label", "nothing")["undone"] == 0
    assert cli.json("undo", "--all", "--label", "plain")["undone"] == 1
    handled = cli.store.parent / "handled"
    cli.ok("consume", "q", "--exec", f"cat >> {handled}; echo >> {handled}", "--newer-than", "1h",
           "--prop", "tier=1", "--idle", "100ms")
    assert handled.read_text() == "new 100 sure\n"
    # --body-contains of the dead letters, back to their queue
    with Store.open(cli.store) as st:
        st.put_many("dead-letter", [NewMessage(b"timeout at 3", props={"k": "v"}),
                                    NewMessage(b"refused", props={"k": "v"})])
    moved = cli.json("redrive", "--to", "eu", "--body-contains", "timeout")
    assert moved["moved"] == {"eu": 1}
    assert [m["body"] for m in cli.jsonl("browse", "dead-letter")] == ["refused"]


@pytest.mark.parametrize("args, words", [
    (("--prop", "region"), "--prop wants K=V"),
    (("--prop", "=eu"), "--prop wants K=V"),
    (("--older-than", "soon"), "--older-than"),
    (("--newer-than", "forever"), "--newer-than cannot be forever"),
])
def test_a_bad_shorthand_is_a_usage_error(cli, args, words):
    fill(cli)
    for command in (("browse", "q"), ("get", "q"), ("queue", "purge", "q", "--yes")):
        result = cli.fails(2, *command, *args)
        assert words in cli.error_line(result)
    assert len(bodies(cli)) == 6  # nothing taken


def test_undo_with_a_shorthand_needs_all_or_older_than(cli):
    fill(cli)
    cli.ok("get", "q", "--confirm-id", "5", "-q")
    result = cli.fails(2, "undo", "q", "--confirm-id", "5", "--label", "it's")
    assert "goes with --all or --older-than" in cli.error_line(result)


def test_the_terms_quote_any_value_so_it_matches_itself():
    hostile = ["'", "''", "%", "_", "!", "!%", "a'b%c_d!e", "\n", "\\", "\" OR TRUE", "' OR TRUE OR '"]
    for text in hostile:
        selector = compile_selector(all_of(None, shorthand(label=text, props={text or "k": text},
                                                           body_contains=text)))
        same = Message(body=b"<" + text.encode() + b">", label=text, props={text or "k": text})
        other = Message(body=b"<" + (text + "x").encode()[1:] + b">", label=text + "x",
                        props={text or "k": text + "x"})
        assert selector.matches(same, 0), text
        assert not selector.matches(other, 0), text


def test_all_of_keeps_the_where_whole():
    # an OR in --where stays inside its parentheses: the shorthand narrows all of it
    text = all_of("priority = 1 OR priority = 2", shorthand(label="a"))
    selector = compile_selector(text)
    assert not selector.matches(Message(body=b"", priority=1, label="b"), 0)
    assert selector.matches(Message(body=b"", priority=2, label="a"), 0)
    assert all_of("priority = 1", []) == "priority = 1"
    assert all_of(None, []) is None
