"""`--where SELECTOR` through the command line (get, browse, browse --lock, move), and the
store's use of the index for the selector's equalities (a count of records decoded)."""

import pytest

from store import NewMessage, Store, records, write

REGIONS = ["eu", "us", "ap"]


def fill(cli, n=30):
    with Store.open(cli.store) as st:
        st.put_many("q", [NewMessage(f"m{i:02d}".encode(), priority=i % 8, correl_id=f"c{i % 3}",
                                     label="urgent" if i % 5 == 0 else "routine",
                                     props={"region": REGIONS[i % 3]} if i % 4 else {})
                          for i in range(n)])


def bodies(result):
    return sorted(r["body"] for r in result.jsonl())


def expected(n, keep):
    return sorted(f"m{i:02d}" for i in range(n) if keep(i))


def test_browse_where_selects_by_property_label_and_priority(cli):
    fill(cli)
    got = bodies(cli.ok("browse", "q", "--where", "props.region = 'eu' AND priority >= 4", "-o", "jsonl"))
    assert got == expected(30, lambda i: i % 4 and REGIONS[i % 3] == "eu" and i % 8 >= 4)
    got = bodies(cli.ok("browse", "q", "--where", "label LIKE 'urg%' OR props.region IS NULL", "-o", "jsonl"))
    assert got == expected(30, lambda i: i % 5 == 0 or i % 4 == 0)
    # NULL is not 'eu', and not not-'eu' either
    got = bodies(cli.ok("browse", "q", "--where", "NOT props.region = 'eu'", "-o", "jsonl"))
    assert got == expected(30, lambda i: i % 4 and REGIONS[i % 3] != "eu")


def test_get_where_takes_only_the_selected_messages(cli):
    fill(cli)
    got = bodies(cli.ok("get", "q", "--all", "--where", "correl_id = 'c1' AND priority IN (1, 2, 3)", "-o", "jsonl"))
    assert got == expected(30, lambda i: i % 3 == 1 and i % 8 in (1, 2, 3))
    left = bodies(cli.ok("browse", "q", "-o", "jsonl"))
    assert left == sorted(set(expected(30, lambda i: True)) - set(got))
    cli.fails(3, "get", "q", "--where", "correl_id = 'c1' AND priority IN (1, 2, 3)")
    assert cli.ok("check").code == 0


def test_move_and_browse_lock_take_a_selector(cli):
    fill(cli)
    cli.ok("queue", "create", "eu", "-q")
    moved = cli.json("move", "q", "eu", "--where", "props.region = 'eu'")
    want = expected(30, lambda i: i % 4 and REGIONS[i % 3] == "eu")
    assert moved["moved"] == len(want)
    assert bodies(cli.ok("browse", "eu", "-o", "jsonl")) == want
    lock = cli.ok("browse", "q", "--lock", "--where", "label = 'urgent'").out.strip()
    locked = [m for m in cli.jsonl("browse", "q", "--state", "locked-browse") if m["lock_id"] == int(lock)]
    assert sorted(m["body"] for m in locked) == sorted(
        b for b in expected(30, lambda i: i % 5 == 0) if b not in want)


@pytest.mark.parametrize("selector, column", [
    ("priority >", 11), ("props.n = 5", 11), ("colour = 'red'", 1), ("label LIKE", 11)])
def test_a_bad_selector_is_a_usage_error_naming_the_column(cli, selector, column):
    for command in (["browse", "q"], ["get", "q"], ["move", "q", "dead-letter"]):
        result = cli.fails(2, *command, "--where", selector)
        assert f"column {column}:" in cli.error_line(result)


def test_an_indexed_selector_reads_the_index_not_the_queue(tmp_path, monkeypatch):
    st = Store.open(tmp_path / "qm", create=True)
    st.create_queue("q")
    st.put_many("q", [NewMessage(b"%d" % i, correl_id="rare" if i % 1000 == 0 else "common",
                                 props={"n": str(i)}) for i in range(5000)])
    calls = {"decode": 0, "RecordView": 0}

    def counting(name):
        real = getattr(records, name)

        def count(*args, **kw):
            calls[name] += 1
            return real(*args, **kw)
        return count

    for name in calls:
        monkeypatch.setattr(write, name, counting(name))
    assert len(st.browse("q", where="correl_id = 'rare' AND props.n <> '0'")) == 4
    # the five messages the correl_id index names, and no other
    assert calls == {"decode": 5, "RecordView": 0}
    calls.update(decode=0)
    assert len(st.browse("q", where="props.n = '1000'")) == 1
    # a property has no index: every record of the queue is read, through a lazy view, and
    # only the match is decoded
    assert calls == {"decode": 1, "RecordView": 5000}
    st.close()


def test_a_long_chain_selects_on_an_empty_and_a_full_queue_alike(cli):
    """An AND / OR chain of any length is tested term by term: a selector that parses works
    whatever messages arrive (it failed with exit 1 once a message was tested)."""
    cli.ok("queue", "create", "empty", "-q")
    fill(cli)
    any_of = " OR ".join(["priority = 9"] * 1000 + ["label = 'urgent'"])
    all_of = " AND ".join(["priority >= 0"] * 1000 + ["label = 'urgent'"])
    assert cli.ok("browse", "empty", "--where", any_of, "-o", "jsonl").out == ""
    assert bodies(cli.ok("browse", "q", "--where", any_of, "-o", "jsonl")) == expected(30, lambda i: i % 5 == 0)
    got = bodies(cli.ok("get", "q", "--all", "--where", all_of, "-o", "jsonl"))
    assert got == expected(30, lambda i: i % 5 == 0)
    negated = "NOT " * 1001 + "label = 'urgent'"
    assert bodies(cli.ok("browse", "q", "--where", negated, "-o", "jsonl")) == expected(30, lambda i: i % 5)


@pytest.mark.parametrize("selector, says", [
    ("(" * 101 + "priority = 3" + ")" * 101, "column 101: parentheses nest more than 100 levels deep"),
    ("(" * 10_000 + "priority = 3" + ")" * 10_000, "column 101: parentheses nest more than 100 levels deep"),
    ("priority = 1" + "0" * 4300, "column 12: the number 10000000000000000000… is out of range: an integer is 64-bit"),
    ("priority = 9223372036854775808", "column 12: the number 9223372036854775808 is out of range"),
    ("age > 1e999", "column 7: the number 1e999 is out of range"),
], ids=["101-parentheses", "10000-parentheses", "4301-digits", "2**63", "1e999"])
def test_a_selector_past_the_limits_is_a_usage_error_before_any_message_is_read(cli, selector, says):
    cli.ok("queue", "create", "empty", "-q")
    fill(cli)
    for command in (["browse", "empty"], ["browse", "q"], ["get", "q", "--all"], ["move", "q", "dead-letter"]):
        line = cli.error_line(cli.fails(2, *command, "--where", selector))
        assert says in line and line.endswith("[USAGE]"), line
    assert len(cli.jsonl("browse", "q")) == 30  # nothing was taken
