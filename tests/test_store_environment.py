"""Opening stores: layout, permissions, identity, full maps, stale readers."""

import os
import signal
import stat
import subprocess
import sys
import textwrap

import pytest

from store import NewMessage, Store, errors
from store.environment import ONE_HANDLE


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_store_is_created_0700_with_0600_files_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        Store.open(tmp_path / "s", create=True).close()
    finally:
        os.umask(old)
    root = tmp_path / "s"
    assert mode(root) == 0o700
    assert {p.name: mode(p) for p in root.iterdir() if p.is_file()} == {
        "data.mdb": 0o600, "lock.mdb": 0o600, "mqcli-store.json": 0o600, "writer.lock": 0o600}


def test_a_store_writable_by_others_is_refused(tmp_path):
    Store.open(tmp_path / "s", create=True).close()
    os.chmod(tmp_path / "s", 0o777)
    with pytest.raises(errors.StorePermission) as info:
        Store.open(tmp_path / "s")
    assert info.value.exit_code == 11
    assert "chmod 700" in str(info.value)
    Store.open(tmp_path / "s", allow_unsafe_permissions=True).close()


def test_opening_a_missing_store_says_how_to_create_one(tmp_path):
    with pytest.raises(errors.StoreUnavailable, match="mqcli init"):
        Store.open(tmp_path / "missing")


def test_a_foreign_directory_is_not_turned_into_a_store(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "notes.txt").write_text("mine")
    with pytest.raises(errors.StoreUnavailable, match="not an mqcli store"):
        Store.open(tmp_path / "d", create=True)


def test_a_corrupt_marker_is_a_store_error(tmp_path):
    Store.open(tmp_path / "s", create=True).close()
    (tmp_path / "s" / "mqcli-store.json").write_text("{garbage")
    with pytest.raises(errors.StoreCorrupt):
        Store.open(tmp_path / "s")


def test_system_queues_exist(tmp_path):
    with Store.open(tmp_path / "s", create=True) as st:
        assert {q.name for q in st.list_queues() if q.system} == {"dead-letter", "dead-letter-tx"}


def test_a_full_map_is_store_full_and_gets_still_work(tmp_path):
    with Store.open(tmp_path / "s", create=True, map_size=1 << 20) as st:
        st.create_queue("q")
        with pytest.raises(errors.StoreFull) as info:
            for _ in range(100):
                st.put_many("q", [NewMessage(b"x" * 1000) for _ in range(50)])
        assert info.value.exit_code == 8
        depth = st.queue_info("q").depth
        assert depth > 0 and depth % 50 == 0  # whole batches only
        assert st.get("q", wait=0).body == b"x" * 1000
        assert st.check() == []
    with Store.open(tmp_path / "s") as st:  # the small map was kept
        assert st.info().map_size == 1 << 20


def test_stale_readers_of_killed_processes_are_cleared(tmp_path):
    path = tmp_path / "s"
    Store.open(path, create=True).close()
    holder = textwrap.dedent(f"""
        import sys, time
        from store import Store
        st = Store.open({str(path)!r})
        txn = st._env.begin()          # a reader slot held open
        txn.get(b"x")
        print("ready", flush=True)
        time.sleep(60)
    """)
    p = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    with Store.open(path) as st:
        assert "pid" in st._env.readers() or True
        assert str(p.pid) not in st._env.readers().split()
        st.create_queue("q")
        st.put("q", b"a")
        assert st.get("q", wait=0).body == b"a"


def test_a_handle_used_after_fork_is_refused_and_the_parent_keeps_working(tmp_path):
    st = Store.open(tmp_path / "s", create=True)
    st.create_queue("q")
    st.put("q", b"before")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: every use of the inherited handle is refused, close leaves it be
        said = b"no error"
        try:
            st.put("q", b"from the child")
        except errors.StoreUnavailable as exc:
            said = str(exc).encode()
        try:  # nor can it open its own (the error advised it): it is told what to do instead
            Store.open(tmp_path / "s")
            said += b"|opened"
        except errors.StoreUnavailable as exc:
            said += b"|" + str(exc).encode()
        st.close()
        os.write(write_end, said)
        os._exit(0)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    said, reopened = os.read(read_end, 8192).decode().split("|")
    os.close(read_end)
    assert os.waitstatus_to_exitcode(status) == 0
    assert said == (f"this handle on the store at {tmp_path / 's'} was opened by process {os.getpid()}, "
                    f"before process {pid} forked from it: {ONE_HANDLE}")
    assert reopened == f"cannot open the store at {tmp_path / 's'} again in this process: {ONE_HANDLE}"
    assert [m.body for m in st.browse("q")] == [b"before"]
    st.put("q", b"after")
    assert st.check() == [] and st.queue_info("q").depth == 2
    st.close()


def test_a_closed_handle_says_so_and_closing_twice_is_harmless(tmp_path):
    st = Store.open(tmp_path / "s", create=True)
    st.create_queue("q")
    st.close()
    st.close()
    for use in (lambda: st.put("q", b"x"), lambda: st.browse("q"), lambda: st.info(), lambda: st.check()):
        with pytest.raises(errors.StoreUnavailable, match=r"this handle on the store at .* is closed; open the store again"):
            use()
    with Store.open(tmp_path / "s") as again:
        assert again.check() == [] and again.queue_info("q").depth == 0


def test_a_virtual_memory_limit_too_small_for_the_map_is_said_plainly(tmp_path):
    Store.open(tmp_path / "s", create=True).close()  # a 1 TiB map of address space
    code = textwrap.dedent("""
        import resource, sys
        from store import Store, errors
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        try:
            Store.open(sys.argv[1])
        except errors.StoreUnavailable as exc:
            print(exc.exit_code, exc)
    """)
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("11 ") and "ulimit -v" in out.stdout
