"""Store.browse_pages: a browse read a page at a time (each page its own read transaction,
resuming after the last message's place) gives what one `browse` gives, in the same order, for
every kind of filter and state; `mqcli browse` prints a deep queue that way."""

from __future__ import annotations

import pytest

from cli_helpers import Cli


@pytest.fixture
def mixed(st):
    """A queue of 60 messages: priorities 0..7 interleaved, two correlation ids, a property,
    some held by a two-phase get (in flight) and some locked in place by a browse lock."""
    for i in range(60):
        st.put("q", b"%d" % i, priority=(i * 5) % 8, correl_id="even" if i % 2 == 0 else "odd",
               props={"n": str(i)})
    st.get("q", wait=0, confirm_id=7)  # the first in queue order: in flight
    st.get("q", wait=0, confirm_id=8)
    st.browse_lock("q", limit=3)
    return st


FILTERS = [
    {}, {"priority": 5}, {"correl_id": "even"}, {"correl_id": "odd", "priority": 3},
    {"where": "props.n > '3'"}, {"states": "all"}, {"states": ["get-unconfirmed", "locked-browse"]},
    {"limit": 17}, {"limit": 14, "where": "props.n < '5'"}, {"states": "all", "limit": 41},
]


@pytest.mark.parametrize("filters", FILTERS, ids=[str(f) for f in FILTERS])
@pytest.mark.parametrize("page", [1, 7, 1000])
def test_pages_give_what_one_browse_gives(mixed, filters, page):
    whole = [(m.msg_id, m.state) for m in mixed.browse("q", **filters)]
    pages = list(mixed.browse_pages("q", page=page, **filters))
    assert all(0 < len(p) <= page for p in pages)
    assert [(m.msg_id, m.state) for p in pages for m in p] == whole
    assert whole  # every filter above selects something: the comparison is not of two empties


def test_an_exact_id_is_one_page_and_a_held_one_none(mixed):
    first = mixed.browse("q", limit=1)[0]
    assert [[m.msg_id for m in p] for p in mixed.browse_pages("q", msg_id=first.msg_id, page=1)] == [[first.msg_id]]
    held = mixed.browse("q", states=["get-unconfirmed"])[0]
    assert [m for p in mixed.browse_pages("q", msg_id=held.msg_id) for m in p] == []


def test_mqcli_browse_prints_a_queue_deeper_than_a_page_in_queue_order(tmp_path):
    cli = Cli(tmp_path / "store", tmp_path / "xdg")
    cli.ok("init", "-q")
    cli.ok("queue", "create", "q", "-q")
    for priority in (1, 6, 3):
        cli.ok("put", "q", "--lines", "-", "--priority", str(priority), "-q",
               input=b"".join(b"p%d-%d\n" % (priority, i) for i in range(1100)))
    bodies = cli.ok("browse", "q", "-o", "body").stdout.split(b"\n")[:-1]
    assert bodies == [b"p%d-%d" % (p, i) for p in (6, 3, 1) for i in range(1100)]
    assert len(cli.json("browse", "q", "--limit", "2001")) == 2001
