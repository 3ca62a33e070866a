"""A damaged data.mdb is a one-line error with exit 11, never a crash.

LMDB reads its pages straight from a map of data.mdb: a page past the end of a file cut short
(a copy stopped by a full disk, `truncate -s`) is a SIGBUS at whatever touches it, not an error.
So every open compares the file with what LMDB's newest meta page says it uses
(store/environment.py `verify_data_file`). Damage inside the file (pages of zeros, holes) is
LMDB's to find: the errors it returns are the same exit 11. Every command here runs as a real
process, so a crash shows as a signal death, not as a passing test.
"""

from __future__ import annotations

import json
import mmap
import os
import select
import shutil
import struct
import subprocess
import time

import lmdb
import pytest

from cli_helpers import ERROR_PREFIX, Result
from store import Store, errors
from store.environment import MetaPage, read_meta, read_marker
from store.errors import StoreCorrupt

PAGE = mmap.PAGESIZE  # LMDB's page size: the system's
CORRUPT = "[MQ_ERROR_STORE_CORRUPT]"
RESTORE = "restore the store from a backup (`mqcli backup`) or a snapshot (`mqcli snapshot`)"
FREE_LIST = "LMDB's free list (the B-tree of the pages it may reuse)"
# every kind of command: writes, destructive and browsing reads, the reading handle (stats,
# info), the check, a wait
COMMANDS = (("put", "q", "x"), ("get", "q"), ("browse", "q"), ("stats",), ("info",), ("check",),
            ("get", "q", "--wait", "1s"))
_MDB_DB = struct.Struct("=IHHQQQQQ")  # a named table's record in LMDB's main table: root last
# where a meta page's mm_last_pg and mm_txnid are (a page header of 16 bytes, MDB_meta's fields
# up to its two MDB_db, 64-bit: store/environment.py `_META`)
_LAST_PG, _TXNID = 136, 144


@pytest.fixture
def store(cli, tmp_path):
    """A store of several hundred pages: messages put, some taken, in two queues. The last
    commit took back freed pages, so the roots of its B-trees are low in the file, far from
    its last page (a cut between them passes a check of the roots alone)."""
    lines = tmp_path / "lines"
    lines.write_text("".join(f"message {i:04d} {'m' * (i % 7 * 150)}\n" for i in range(600)))
    cli.ok("queue", "create", "r", "-q")
    cli.ok("put", "q", "--lines", lines, "-q")
    cli.ok("get", "q", "--count", "100", "-o", "body")
    cli.ok("put", "r", "--lines", lines, "-q")
    cli.ok("get", "r", "--count", "5", "-o", "body")
    meta = _meta(cli)
    assert max(meta.roots) < meta.last_pg // 4
    return cli


def _data(cli):
    return cli.store / "data.mdb"


def _meta(cli) -> MetaPage:
    with open(_data(cli), "rb") as data:
        meta = read_meta(data)
    assert isinstance(meta, MetaPage), meta
    return meta


def _refused(result: Result) -> str:
    """A run that stopped at the damage: exit 11, its one line, no crash, no traceback."""
    assert result.code == 11, result
    assert result.err_lines and len(result.err_lines) == 1, result
    line = result.err_lines[0]
    assert line.startswith(ERROR_PREFIX) and line.endswith(CORRUPT), result
    return line


def _tables(cli) -> dict[str, int]:
    """Each named table's root page, from LMDB's main table."""
    env = lmdb.open(str(cli.store), readonly=True, lock=False, max_dbs=64,
                    map_size=read_marker(cli.store)["map_size"])
    try:
        with env.begin() as txn:
            return {bytes(k).decode(): _MDB_DB.unpack(bytes(v))[-1] for k, v in txn.cursor()}
    finally:
        env.close()


# where a file is cut: each leaves the B-trees' roots and takes pages in use
CUTS = {
    "right after its roots": lambda meta: (max(meta.roots) + 1) * PAGE,
    "100 bytes into the page after its roots": lambda meta: (max(meta.roots) + 1) * PAGE + 100,
    "in half": lambda meta: (meta.last_pg + 1) // 2 * PAGE,
}


@pytest.mark.parametrize("cut", CUTS)
def test_a_data_file_cut_short_is_refused_by_every_command(store, cut):
    meta = _meta(store)
    needed = (meta.last_pg + 1) * meta.psize
    assert _data(store).stat().st_size == needed  # each page this store uses was written
    size = CUTS[cut](meta)
    os.truncate(_data(store), size)
    for args in COMMANDS:
        line = _refused(store.subprocess(*args))
        assert line == (
            f"{ERROR_PREFIX}the store at {store.store} is damaged: {_data(store)} is truncated: "
            f"{size} bytes, but LMDB's meta page says it uses {needed} ({meta.last_pg + 1} pages of "
            f"{meta.psize} bytes); restore the store from a backup (`mqcli backup`) or a snapshot "
            f"(`mqcli snapshot`) {CORRUPT}")


def test_a_cut_short_store_is_refused_in_json_too(store):
    os.truncate(_data(store), _data(store).stat().st_size // 2)
    result = store.subprocess("get", "q", "-o", "json")
    assert result.code == 11 and len(result.err_lines) == 1, result
    error = result.error_json()["error"]
    assert (error["exit"], error["status"]) == (11, "MQ_ERROR_STORE_CORRUPT")
    assert "is truncated" in error["message"]


def test_every_open_refuses_a_cut_short_store(store):
    """The library's opens too: writable, reading (stats, browse), and the read-only open of
    the Spark source and of completion (store/analytics/locate.py, store/names.py)."""
    from store.analytics.locate import open_readonly
    from store.names import Names, read_names

    os.truncate(_data(store), _data(store).stat().st_size // 2)
    for open_it in (lambda: Store.open(store.store), lambda: Store.open(store.store, reading=True)):
        with pytest.raises(StoreCorrupt, match="is truncated"):
            open_it()
    with pytest.raises(StoreCorrupt, match="is truncated"), open_readonly(store.store):
        pass
    assert read_names(store.store) == Names()  # completion offers nothing, and does not crash


def test_a_free_tail_lmdb_never_wrote_is_no_damage(store):
    """LMDB may end the file before its last page: a value put and deleted in one transaction
    takes pages at the end that are freed before they are written. They are in the free
    list, so nothing reads them: such a store opens, reads and writes as any other."""
    env = lmdb.open(str(store.store), map_size=read_marker(store.store)["map_size"], max_dbs=64)
    try:
        with env.begin(write=True) as txn:
            meta_table = env.open_db(b"meta", txn=txn, create=False)
            txn.put(b"scratch", b"z" * 100_000, db=meta_table)
            txn.delete(b"scratch", db=meta_table)
    finally:
        env.close()
    meta = _meta(store)
    assert _data(store).stat().st_size < (meta.last_pg + 1) * meta.psize
    for args in (("stats",), ("browse", "q"), ("check",)):
        assert store.subprocess(*args).code == 0
    assert store.ok("get", "q", "-o", "body").out == "message 0100 " + "m" * 300 + "\n"
    store.ok("put", "q", "y" * 60_000)
    assert store.subprocess("check").code == 0


@pytest.mark.parametrize("fill", ["zeros", "random bytes"])
def test_a_data_file_replaced_by_garbage_of_its_size_is_refused(store, fill):
    size = _data(store).stat().st_size
    _data(store).write_bytes(bytes(size) if fill == "zeros" else os.urandom(size))
    for args in (("put", "q", "x"), ("get", "q"), ("stats",), ("check",)):
        line = _refused(store.subprocess(*args))
        assert (f"{_data(store)} is not a sound LMDB data file: meta page 0 is not an LMDB meta page "
                f"({size} bytes); restore the store from a backup") in line


def _patch(cli, at: int, data: bytes) -> None:
    with open(_data(cli), "r+b") as f:
        f.seek(at)
        f.write(data)


def test_damaged_meta_pages_are_refused(store):
    _patch(store, PAGE + 16, b"\xff" * 8)  # the second meta page's magic
    assert "meta page 1 is not an LMDB meta page" in _refused(store.subprocess("get", "q"))


def test_a_meta_page_claiming_pages_the_file_lacks_is_refused(store):
    """The newest meta page names a last page past the end of the file, and the free list
    does not hold the pages between: the file lost them."""
    meta = _meta(store)
    newest = 0 if struct.unpack_from("=Q", _data(store).read_bytes(), _TXNID)[0] == meta.txnid else 1
    _patch(store, newest * meta.psize + _LAST_PG, struct.pack("=Q", meta.last_pg + 1000))
    size = _data(store).stat().st_size
    line = _refused(store.subprocess("browse", "q"))
    assert f"is truncated: {size} bytes, but LMDB's meta page says it uses {(meta.last_pg + 1001) * PAGE}" in line


@pytest.mark.parametrize("table", ["pos", "meta", "queues"])
def test_a_zeroed_table_root_is_exit_11_for_every_command(store, table):
    """Damage the size cannot show: a table's root page of zeros. LMDB says MDB_CORRUPTED
    (it keeps no checksums: what it meets is a page of the wrong type), and the line says
    which store is damaged and how to restore it (store/environment.py `lmdb_failed`)."""
    _patch(store, _tables(store)[table] * PAGE, bytes(PAGE))
    for args in (("put", "q", "x"), ("get", "q"), ("browse", "q"), ("stats",)):
        line = _refused(store.subprocess(*args))
        assert line.startswith(f"{ERROR_PREFIX}the store at {store.store} is damaged: LMDB: mdb_"), line
        assert line.endswith(f": MDB_CORRUPTED: Located page was wrong type; {RESTORE} {CORRUPT}"), line
    check = store.subprocess("check")
    assert check.code == 11 and check.err_lines[-1].endswith(CORRUPT), check


def test_a_hole_over_a_table_root_is_exit_11(store):
    """A sparse data.mdb whose hole lies where a page should be reads as zeros there."""
    root = _tables(store)["pos"]
    try:
        subprocess.run(["fallocate", "--punch-hole", "--offset", str(root * PAGE), "--length", str(PAGE),
                        str(_data(store))], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot punch a hole here: {exc}")
    _refused(store.subprocess("get", "q"))


def test_a_sparse_copy_and_a_hole_past_the_end_are_no_damage(store):
    """Holes where the file holds zeros anyway, or past its last page, change nothing read."""
    copy = store.store.parent / "data.copy"
    subprocess.run(["cp", "--sparse=always", str(_data(store)), str(copy)], check=True)
    os.replace(copy, _data(store))
    os.truncate(_data(store), _data(store).stat().st_size + (1 << 20))
    for args in (("browse", "q"), ("check",)):
        assert store.subprocess(*args).code == 0


def _first_listed_free_page(cli) -> int:
    """Where in data.mdb the first page number LMDB's free list lists is: its root is one leaf
    page in these stores, whose nodes map a transaction id to a count and that many pages
    (store/environment.py: LMDB's page layout)."""
    meta = _meta(cli)
    assert meta.free_root is not None
    page = _data(cli).read_bytes()[meta.free_root * PAGE:(meta.free_root + 1) * PAGE]
    _, _, flags, lower, _ = struct.unpack_from("=QHHHH", page)
    assert flags & 0x02, "the free list's root is a leaf"
    for i in range((lower - 16) // 2):
        (at,) = struct.unpack_from("=H", page, 16 + 2 * i)
        _, _, node_flags, key_size = struct.unpack_from("=HHHH", page, at)
        value = at + 8 + key_size
        if not node_flags & 0x01 and struct.unpack_from("=Q", page, value)[0]:  # inline, not empty
            return meta.free_root * PAGE + value + 8
    pytest.fail("no page number listed in the free list's root page")


def _check_found(cli, problem: str) -> None:
    """`mqcli check` says the store is damaged: the problem, then exit 11's one line."""
    check = cli.subprocess("check")
    assert check.code == 11, check
    assert check.err_lines == [
        f"mqcli: check: {problem}",
        f"{ERROR_PREFIX}the store at {cli.store} is inconsistent: 1 problem(s) found {CORRUPT}"], check
    assert "consistent" not in check.out


def test_check_finds_a_zeroed_free_list(store):
    """LMDB reads its free list only to take pages for a write, and no table walk reads it:
    with its root page zeroed, every put fails while every read works. `mqcli check` reads
    it too (store/environment.py `free_list_problems`)."""
    meta = _meta(store)
    _patch(store, meta.free_root * PAGE, bytes(PAGE))
    _check_found(store, f"{FREE_LIST} does not read as a B-tree from its root, page {meta.free_root}: "
                        f"a damaged page (every write would fail)")
    assert store.subprocess("browse", "q", "--count", "1").code == 0
    line = _refused(store.subprocess("put", "q", "x"))
    assert line == (f"{ERROR_PREFIX}the store at {store.store} is damaged: LMDB: mdb_put: MDB_CORRUPTED: "
                    f"Located page was wrong type; {RESTORE} {CORRUPT}")


def test_check_finds_a_free_list_that_lists_a_page_in_use(store):
    """A page number in the free list changed to a table's page: LMDB would hand that page to
    the next write, which would overwrite the table's. No read notices."""
    root = _tables(store)["pos"]
    _patch(store, _first_listed_free_page(store), struct.pack("=Q", root))
    _check_found(store, f"{FREE_LIST} lists page {root}, which table pos uses: a write would take it and "
                        f"overwrite it")


def test_check_finds_a_free_list_that_lists_a_page_past_the_file(store):
    """A page number in the free list changed to one past the store's last page."""
    meta = _meta(store)
    _patch(store, _first_listed_free_page(store), struct.pack("=Q", meta.last_pg + 7))
    _check_found(store, f"{FREE_LIST} lists page {meta.last_pg + 7}, which the store does not have (it "
                        f"has pages 2 to {meta.last_pg})")


def test_an_lmdb_error_that_reaches_the_cli_names_the_store(tmp_path, monkeypatch):
    """An LMDB error no store method turned into its own (a read outside the store's
    transactions) is said as the store says it (mqcli/exits.py `_store_error`)."""
    import io

    from mqcli.exits import report
    from store import environment

    monkeypatch.setattr(environment, "_opened", {str(tmp_path)})
    said = io.StringIO()
    code = report(lmdb.CorruptedError("mdb_get: MDB_CORRUPTED: Located page was wrong type"),
                  json_errors=False, stream=said)
    assert code == 11
    assert said.getvalue() == (f"{ERROR_PREFIX}the store at {tmp_path} is damaged: LMDB: mdb_get: MDB_CORRUPTED: "
                               f"Located page was wrong type; {RESTORE} {CORRUPT}\n")


def _waiting(cli) -> bool:
    return any(not f.name.startswith("new-") for f in (cli.store / "wait").iterdir())


@pytest.mark.parametrize("args", [("get", "q", "--wait", "30s"), ("browse", "q", "--follow", "--idle", "30s"),
                                  ("stats", "--watch", "--interval", "0.2s", "-o", "jsonl")])
def test_a_data_file_cut_while_a_command_waits_is_exit_11(store, spawn, args):
    """A command that has the store mapped and waits (for a message, for the next interval)
    checks the data file again before it reads after the wait: cut meanwhile, it ends with
    exit 11 and one line, not SIGBUS at its next read of a lost page (Store._env)."""
    store.ok("get", "q", "--all", "-o", "body")  # empty: get and browse wait
    meta = _meta(store)
    needed = (meta.last_pg + 1) * meta.psize
    proc = spawn(store, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if args[0] == "stats":
        assert select.select([proc.stdout], [], [], 30)[0], "no snapshot within 30 s"
        assert proc.stdout.readline()  # a snapshot shown: the next comes after a wait
    else:
        for _ in range(400):  # its FIFO in the store's wait/ directory: it waits
            if _waiting(store) or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert _waiting(store), proc.poll()
    os.truncate(_data(store), 2 * PAGE)  # its meta pages left: every table's pages lost
    proc.wait(timeout=30)
    err = proc.stderr.read().decode()
    assert proc.returncode == 11, (proc.returncode, err)
    assert err.count("\n") == 1, err
    message = (f"the store at {store.store} is damaged: {_data(store)} is truncated: {2 * PAGE} bytes, "
               f"but LMDB's meta page says it uses {needed} ({meta.last_pg + 1} pages of {PAGE} bytes); {RESTORE}")
    if args[0] == "stats":
        assert json.loads(err)["error"]["message"] == message
    else:
        assert err == f"{ERROR_PREFIX}{message} {CORRUPT}\n"


def test_a_handle_whose_store_was_replaced_says_so_instead_of_writing_into_the_old_file(tmp_path):
    # a store restored in place (moved away, the backup copied there) while a command kept it
    # open (stats --watch, a listener): it went on reading, and writing, the old file, which
    # nobody sees again
    path = tmp_path / "s"
    with Store.open(path, create=True) as st:
        st.create_queue("q")
        st.put("q", b"kept")
        st.backup(tmp_path / "b")
        os.rename(path, tmp_path / "old")
        shutil.copytree(tmp_path / "b", path)
        time.sleep(0.2)  # the handle looks again after 0.1 s unused (Store._env)
        with pytest.raises(errors.StoreUnavailable, match="was replaced or removed while this command had it open"):
            st.put("q", b"lost")
    with Store.open(path) as st:
        assert [m.body for m in st.browse("q")] == [b"kept"]


def test_a_zeroed_leaf_that_makes_lmdb_abort_is_exit_11_with_the_stores_line(store):
    """A zeroed leaf page deeper than a root: LMDB walks onto it and aborts on an assertion
    ('IS_LEAF(mp)' failed in mdb_cursor_next), a death by SIGABRT (exit 134, a core dump).
    mqcli/crash.py turns it into the store's one line and exit 11, in text and in JSON; LMDB's
    own line stays before it (printed before abort, out of mqcli's hands)."""
    pristine = _data(store).read_bytes()
    aborted = 0
    for page in range(2, len(pristine) // PAGE):
        _data(store).write_bytes(pristine[:page * PAGE] + bytes(PAGE) + pristine[(page + 1) * PAGE:])
        result = store.subprocess("browse", "q", "-o", "body")
        if result.code == 0 or "Assertion" not in result.stderr:
            continue  # not in the queue's tree, or LMDB says MDB_CORRUPTED itself (tested above)
        aborted += 1
        assert result.code == 11, result
        assert result.err_lines[-1] == (f"{ERROR_PREFIX}the store at {store.store} is damaged: reading it crashed "
                                        f"mqcli (LMDB trusts its pages and met one it could not read; `mqcli check` "
                                        f"tells which); {RESTORE} {CORRUPT}"), result
        as_json = store.subprocess("browse", "q", "-o", "json")
        assert as_json.code == 11 and json.loads(as_json.err_lines[-1])["error"]["exit"] == 11, as_json
        check = store.subprocess("check")  # its child still dies of the signal, and says so
        assert check.code == 11 and "reading it killed the check (SIGABRT" in check.err_lines[-1], check
        if aborted == 3:
            break
    assert aborted == 3, "no zeroed page made LMDB abort: the store's layout changed; pick another damage"
