"""Stores an older mqcli wrote, opened by this one (store/engine.py LAYOUT, environment's
STORE_FORMAT): every message and figure as it was, every in-flight message resolvable, and no
older mqcli writing a store this one opened. The older layouts are made from a store of this
version with raw py-lmdb, as those versions left them (their differences: no per-queue
counters, no `holders` and `ids` tables, the marker's format 3)."""

import json
import subprocess
import sys
from contextlib import contextmanager, nullcontext

import pytest

from cli_helpers import Cli
from older_stores import an_older_store, as_an_older_mqcli_left_it
from store import NewMessage, Store, errors
from store.environment import MARKER, STORE_FORMAT


def marker_format(path):
    return json.loads((path / MARKER).read_text())["format"]


def states(st, queue):
    return sorted((m.body, m.state) for m in st.browse(queue, states="all"))


@contextmanager
def open_in_another_process(path):
    """The store open in another process (an older mqcli's, say) for as long as the block runs."""
    code = (f"import sys, time; sys.path[:0] = {sys.path!r}; from store import Store; "
            f"st = Store.open({str(path)!r}, reading=True); st.list_queues(); print('open', flush=True); "
            f"sys.stdin.read()")
    other = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert other.stdout.readline() == b"open\n"
        yield
    finally:
        other.stdin.close()
        other.wait(timeout=60)


@pytest.mark.parametrize("alone", [True, False], ids=["alone", "open elsewhere"])
def test_in_flight_messages_of_a_store_without_counters_are_resolved_and_counted(tmp_path, alone):
    # the first write on such a queue counted its counters from its messages after moving one:
    # an unlock or a confirm exited 11 "out of range" on every try, a commit stored them one short.
    # Alone, the writer upgrades the store first; with the store open elsewhere (an older
    # mqcli's process would misread the upgrade) it counts each queue as last committed
    path = tmp_path / "s"
    with Store.open(path, create=True) as st:
        for name in ("locked", "got"):
            st.create_queue(name)
        st.create_queue("txq", transactional=True)
        st.put_many("locked", [NewMessage(b"a"), NewMessage(b"b", priority=7)])
        st.browse_lock("locked", lock_id=301)
        st.put_many("got", [NewMessage(b"g1"), NewMessage(b"g2"), NewMessage(b"g3")])
        st.get_many("got", 2, confirm_id=42)
        first = st.tx_begin()
        st.put("txq", b"x", tx=first)
        st.tx_commit(first)
        tx = st.tx_begin()
        st.get("txq", wait=0, tx=tx)
        st.put("txq", b"y", tx=tx)
    as_an_older_mqcli_left_it(path)
    with (nullcontext() if alone else open_in_another_process(path)), Store.open(path) as st:
        assert marker_format(path) == (STORE_FORMAT if alone else 3)  # format 4: older mqcli refuse it
        assert st.unlock("locked", 301) == 2
        assert st.confirm("got", 42) == 2
        st.tx_commit(tx)
        assert states(st, "locked") == [(b"a", "available"), (b"b", "available")]
        assert states(st, "got") == [(b"g3", "available")]
        assert states(st, "txq") == [(b"y", "available")]
        for name in ("locked", "got", "txq"):
            s = st.queue_stats(name)
            assert s.depth == sum(s.by_state.values()) == len(st.browse(name, states="all")), name
        assert st.check() == []


def test_a_reader_leaves_an_older_stores_format_and_a_writer_marks_it(tmp_path):
    path = tmp_path / "s"
    an_older_store(path)
    with Store.open(path, reading=True) as st:
        assert [m.body for m in st.browse("q")] == [b"m"] and st.queue_stats("q").depth == 1
    assert marker_format(path) == 3  # a look changes nothing: the older mqcli may still use it
    Store.open(path).close()
    assert marker_format(path) == STORE_FORMAT


def test_a_store_of_a_format_this_mqcli_does_not_know_is_refused_naming_the_formats_it_reads(tmp_path):
    path = tmp_path / "s"
    Store.open(path, create=True).close()
    marker = json.loads((path / MARKER).read_text())
    (path / MARKER).write_text(json.dumps({**marker, "format": STORE_FORMAT + 1}))
    with pytest.raises(errors.StoreUnavailable, match=f"has format {STORE_FORMAT + 1}; this mqcli reads formats "
                                                      f"3 and {STORE_FORMAT} \\(export it"):
        Store.open(path)


def test_reading_commands_work_on_a_store_from_before_the_holders_and_ids_tables(tmp_path):
    # check, stats, browse, export said "lacks its tables ... MQ_ERROR_STORE_CORRUPT" (exit 11)
    # on a healthy store until a write made the tables
    path = tmp_path / "s"
    an_older_store(path, b"hello", tables=False)
    cli = Cli(path, tmp_path / "home")
    assert cli.ok("check").code == 0
    assert [r["queue"] for r in cli.json("stats")][-1] == "q"
    assert [r["body"] for r in cli.jsonl("browse", "q")] == ["hello"]
    assert cli.ok("export", "q", "-o", "jsonl").stdout.count(b'"msg_id"') == 1
    assert cli.ok("get", "q", "-o", "body").stdout == b"hello\n"


def test_an_older_exports_puts_awaiting_their_confirm_are_not_imported_as_messages(cli, tmp_path):
    # an older mqcli's export wrote them with their state; the import made each an available
    # message that was never put
    with Store.open(cli.store) as st:
        st.put("q", b"real")
        st.put("q", b"never confirmed", confirm_id=101)
        (real,) = st.browse("q")
    dump = [real.to_dict(), {**real.to_dict(), "msg_id": real.msg_id[:-1] + "9", "body": "never confirmed",
                                "state": "put-unconfirmed"}]
    source = tmp_path / "old.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in dump))
    other = Cli(tmp_path / "other", tmp_path / "home2")
    other.ok("init")
    result = other.ok("import", source, "-o", "json")
    assert result.json() == {"imported": 1, "skipped": 0, "unconfirmed": 1}
    assert "1 record was a put awaiting its confirm when exported" in result.stderr
    assert [r["body"] for r in other.jsonl("browse", "q")] == ["real"]
    refused = other.fails(12, "put", "q", "--jsonl", source)
    assert "line 2: a record in state put-unconfirmed" in refused.stderr


def test_a_marker_another_process_upgrades_while_this_one_opens_is_no_swapped_file(tmp_path, monkeypatch):
    # the open checked the marker's inode, another process's upgrade replaced it by rename, and
    # the open then said "the store changed while it was being opened (a file or the directory
    # was replaced)" (exit 11): 1 put in 30 of 10 at once on a format-3 store
    import store.engine as engine
    from store.environment import write_marker

    path = tmp_path / "s"
    an_older_store(path, b"first")
    checked = engine.check_store

    def and_meanwhile_upgraded(where, **kw):
        found = checked(where, **kw)
        write_marker(path, json.loads((path / MARKER).read_text())["map_size"])  # as _mark_current does
        return found
    monkeypatch.setattr(engine, "check_store", and_meanwhile_upgraded)
    with Store.open(path) as st:
        st.put("q", b"m")
        assert [m.body for m in st.browse("q")] == [b"first", b"m"]


def test_a_backup_of_a_store_not_yet_upgraded_keeps_its_format(tmp_path):
    # its copy said format 4 while its tables were an older mqcli's: refused by that mqcli
    path = tmp_path / "s"
    an_older_store(path)
    with Store.open(path, reading=True) as st:  # a reader upgrades nothing
        copy = st.backup(tmp_path / "copy")
    assert marker_format(path) == marker_format(copy) == 3
    with Store.open(copy) as st:  # opened to write, alone: upgraded as any
        assert [m.body for m in st.browse("q")] == [b"m"]
    assert marker_format(copy) == STORE_FORMAT
