"""`stats --watch` in a real terminal (a pty) at 80 and 200 columns: every queue name shown
identifies its queue (shortened in the middle, never to a text that fits two names), bytes in
binary units, put and get rates from the counters, quota use, the priorities; Ctrl-C typed at
the terminal ends it with exit 0. The layout rules themselves are checked in process."""

from __future__ import annotations

import os
import re

import pytest
from cli_helpers import Cli, mqcli_command
from terminal_helpers import Terminal

from mqcli.watch import ELLIPSIS, Rates, shorten_middle, table, unambiguous_names
from store import NewMessage, Store

TITLE = "mqcli stats —"
LONG = ["dead-letter-archive-europe-west", "dead-letter-archive-europe-east"]


def _store(tmp_path) -> Cli:
    cli = Cli(tmp_path / "store", tmp_path / "xdg")
    cli.ok("init", "-q")
    for name in ("orders", *LONG):
        cli.ok("queue", "create", name, "-q")
    cli.ok("queue", "set", "orders", "--quota", "1MiB", "-q")
    with Store.open(cli.store) as st:
        st.put_many("orders", [NewMessage(b"x" * 3000, priority=p) for p in (0, 4, 4, 7)])
        st.put(LONG[0], b"w" * 10, priority=2)
    return cli


def _frames(text: str) -> list[list[str]]:
    """Each whole table drawn: its lines after the title, up to the next title."""
    parts = text.split(TITLE)[1:-1]  # the last one may be cut short
    return [[line.rstrip() for line in part.split("\n")[1:] if line.strip()] for part in parts]


def _rows(frame: list[str]) -> dict[str, list[str]]:
    """Shown name -> the other cells split on whitespace ("3 B" is two cells)."""
    header = next(i for i, line in enumerate(frame) if line.startswith("queue"))
    return {line.split()[0]: line.split()[1:] for line in frame[header + 1:]}


def _names_identify_their_queues(shown: list[str], names: list[str]) -> None:
    assert len(shown) == len(names), (shown, names)
    for text in shown:
        pattern = re.compile(".*".join(map(re.escape, text.split(ELLIPSIS))) + r"\Z")
        matching = [n for n in names if pattern.match(n)]
        assert len(matching) == 1, (text, matching)


@pytest.mark.parametrize("columns", [80, 200])
def test_watch_in_a_terminal_names_unambiguous_rates_shown_ctrl_c_exits_0(tmp_path, columns):
    cli = _store(tmp_path)
    names = ["dead-letter", "dead-letter-tx", "orders", *LONG]
    term = Terminal([*mqcli_command(), "stats", "--watch", "--interval", "200ms"],
                    {**os.environ, **cli.env}, columns=columns)
    try:
        term.wait_for(lambda text: len(_frames(text)) >= 1)
        with Store.open(cli.store) as st:  # a producer and a consumer while it watches
            st.put_many("orders", [NewMessage(b"y" * 100) for _ in range(40)])
            st.get_many("orders", 10)

        def rates_shown(text: str) -> bool:
            frames = _frames(text)
            if not frames:
                return False
            row = _rows(frames[-1])["orders"]
            return row[3] not in ("-", "0.0") and row[4] not in ("-", "0.0")

        text = term.wait_for(rates_shown)
        term.ctrl_c()
        code = term.finish()
    finally:
        if term.proc.poll() is None:
            term.close()
    assert code == 0, text[-2000:]
    frame = _frames(text)[-1]
    assert all(len(line) <= columns for line in frame), frame
    header = next(line for line in frame if line.startswith("queue")).split()
    assert header[:7] == ["queue", "depth", "bytes", "put/s", "get/s", "quota", "in" if columns < 160 else "avail"]
    assert header[-2:] == ["by", "priority"]
    rows = _rows(frame)
    _names_identify_their_queues(list(rows), names)
    if columns >= 200:
        assert set(rows) == set(names)  # room for every name whole
    else:
        assert any(ELLIPSIS in shown for shown in rows)
    with Store.open(cli.store) as st:
        q = next(q for q in st.stats() if q.name == "orders")
    orders = rows["orders"]
    # the highest priorities were got first: p0 x 3000 and 33 x 100 bytes at p3 are left
    assert (q.depth, q.bytes) == (34, 6300)
    assert orders[0] == "34" and orders[1:3] == ["6.15", "KiB"]
    assert float(orders[3]) > 0 and float(orders[4]) > 0  # put/s, get/s
    assert orders[5] == "0.6%"  # of 1 MiB
    assert orders[-2:] == ["p0:1", "p3:33"]

def test_ctrl_c_exit_0_is_reported_nowhere(tmp_path):
    cli = _store(tmp_path)
    term = Terminal([*mqcli_command(), "stats", "--watch"], {**os.environ, **cli.env}, columns=100)
    try:
        term.wait_for(lambda text: TITLE in text)
        term.ctrl_c()
        code = term.finish()
    finally:
        if term.proc.poll() is None:
            term.close()
    assert code == 0
    assert "error" not in term.text and "Traceback" not in term.text


def test_names_shorten_in_the_middle_and_stay_distinct():
    assert shorten_middle("dead-letter-tx", 8) == "dead…-tx"
    shown = unambiguous_names(["dead-letter", "dead-letter-tx", "orders"], 8)
    assert shown == {"dead-letter": "dead…ter", "dead-letter-tx": "dead…-tx", "orders": "orders"}
    # the balanced cut shows the same text for both: another cut keeps them apart
    shown = unambiguous_names(LONG, 12)
    assert shown is not None and len(set(shown.values())) == 2
    assert all(len(v) <= 12 for v in shown.values())
    # a name shortened to another name's whole text is ambiguous too
    assert unambiguous_names(["a…c", "abXc"], 3) is None
    # no cut keeps these apart in 5 characters: the caller wraps them whole
    assert unambiguous_names(["aaaaXbbbb", "aaaaYbbbb"], 5) is None


def test_names_that_cannot_be_shortened_apart_wrap_whole():
    from io import StringIO

    from rich.console import Console

    names = ["queue-of-orders-AAAA-" + "x" * 60 + "-z", "queue-of-orders-BBBB-" + "x" * 60 + "-z"]
    cells = [{c: "0" for c in ("depth", "in_flight", "put_rate", "get_rate")} | {
        "queue": n, "bytes": "0 B", "quota": "-", "oldest": "-", "by_priority": "-", "last_put": "-",
        "last_get": "-"} for n in names]
    out = StringIO()
    Console(file=out, width=80, color_system=None).print(table(cells, 80, "t"))
    lines = out.getvalue().splitlines()
    assert ELLIPSIS not in out.getvalue() and all(len(line) <= 80 for line in lines)
    assert sum("AAAA" in line for line in lines) == 1 and sum("BBBB" in line for line in lines) == 1
    assert len(lines) > 4  # each name took more than one line


def test_rates_over_the_window_and_a_counter_that_went_down():
    rates = Rates(window=5)
    assert rates.update("q", {"put": 10}, at=100.0) == {"put": None}
    assert rates.update("q", {"put": 30}, at=102.0) == {"put": 10.0}
    assert rates.update("q", {"put": 50}, at=104.0) == {"put": 10.0}  # 40 in 4 s
    assert rates.update("q", {"put": 50}, at=110.0) == {"put": 0.0}  # older readings left the window
    # a counter that went down (a store restored from a backup) counts from zero, as rate() does
    assert rates.update("q", {"put": 5}, at=112.0) == {"put": 5 / 8}  # 5 over the window from 104
    assert rates.update("q", {"put": 7}, at=114.0) == {"put": 7 / 10}  # 5 up to 112, 2 after, from 104


def test_a_queue_deleted_and_made_again_counts_its_own_counters_from_zero():
    rates = Rates(window=5)
    rates.update("q", {"put": 10}, at=100.0, identity="old")
    assert rates.update("q", {"put": 10}, at=101.0, identity="old") == {"put": 0.0}
    # made again with the same name: its 10 puts are new ones, not the old queue's 10
    assert rates.update("q", {"put": 10}, at=102.0, identity="new") == {"put": None}
    assert rates.update("q", {"put": 20}, at=103.0, identity="new") == {"put": 10.0}


def test_stats_watch_rates_of_a_queue_made_again_with_the_same_name(cli):
    from mqcli.watch import queue_rates

    def stats_of_q():
        with Store.open(cli.store) as st:
            return st.queue_stats("q")

    rates = Rates(window=5)
    cli.put("q", "x", "--count", "10")
    q = stats_of_q()
    queue_rates(q, rates, 100.0)
    cli.ok("queue", "delete", "q", "--yes", "-q")
    cli.ok("queue", "create", "q", "-q")
    cli.put("q", "x", "--count", "10")
    again = stats_of_q()
    assert again.totals["put_messages"] == q.totals["put_messages"] == 10 and again.guid != q.guid
    assert queue_rates(again, rates, 101.0)["put"] is None  # a new queue: no earlier reading of its own


def test_a_terminal_too_narrow_for_the_table_gets_a_record_per_queue_with_every_figure():
    from io import StringIO

    from rich.console import Console

    cells = [{"queue": n, "depth": "34", "bytes": "6.15 KiB", "put_rate": "12.5", "get_rate": "3.0",
              "quota": "0.6%", "in_flight": "1", "oldest": "4m12s", "by_priority": "p0:1 p3:33"}
             for n in ["dead-letter", "dead-letter-tx", *LONG]]
    out = StringIO()
    Console(file=out, width=40, color_system=None).print(table(cells, 40, "t"))
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 40 for line in lines) and ELLIPSIS not in out.getvalue()
    names = [line for line in lines if line and not line.startswith(" ")][1:]
    assert names == ["dead-letter", "dead-letter-tx", *LONG]  # whole, each on its own line
    text = " ".join(lines)
    for item in ("depth 34", "bytes 6.15 KiB", "put/s 12.5", "get/s 3.0", "quota 0.6%", "by priority p0:1 p3:33"):
        assert text.count(item) == 4, item
