"""Making a store: nothing is changed where a store is refused, and a creation stopped at any
point (killed, a full disk) leaves nothing that a later `init` cannot finish or that `check`
calls sound while it is not (docs/design.md#store; system queues are created with the store,
docs/design.md#queues)."""

from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from store import Store, errors
from store.environment import prepare_directory, write_marker

SYSTEM = {"dead-letter", "dead-letter-tx"}


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def system_queues(st):
    return {q.name for q in st.list_queues() if q.system}


def test_a_refused_directory_keeps_its_mode_and_contents(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "f").write_text("mine")
    os.chmod(shared, 0o1777)
    with pytest.raises(errors.StoreUnavailable, match="not an mqcli store"):
        Store.open(shared, create=True)
    assert mode(shared) == 0o1777 and sorted(os.listdir(shared)) == ["f"]


def test_an_empty_path_is_refused_not_taken_for_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(errors.InvalidArgument, match="empty"):
        Store.open("", create=True)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("kind", ["file", "fifo", "loop", "under-a-file"])
def test_a_path_that_cannot_be_a_store_directory_is_a_store_error(tmp_path, kind):
    path = tmp_path / "s"
    if kind == "file":
        path.write_text("x")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "loop":
        path.symlink_to(path)
    else:
        (tmp_path / "f").write_text("x")
        path = tmp_path / "f" / "s"
    with pytest.raises(errors.StoreError) as info:
        Store.open(path, create=True)
    assert info.value.exit_code == 11 and str(path) in str(info.value)


def test_a_store_whose_marker_was_lost_keeps_its_identity(tmp_path):
    path = tmp_path / "s"
    with Store.open(path, create=True, name="orig") as st:
        st.create_queue("q")
        st.put("q", b"hello")
        guid = st.info().guid
    marker = (path / "mqcli-store.json").read_bytes()
    (path / "mqcli-store.json").unlink()
    with pytest.raises(errors.StoreCorrupt, match="restore the marker") as info:
        Store.open(path, create=True)
    assert info.value.exit_code == 11
    (path / "mqcli-store.json").write_bytes(marker)
    with Store.open(path) as st:
        assert (st.info().guid, st.info().name) == (guid, "orig")
        assert [m.body for m in st.browse("q")] == [b"hello"]


@pytest.mark.parametrize("map_size", ["18446744073709551616", "true", "1", "-4096", "4096.0"])
def test_a_marker_whose_map_size_is_no_size_mqcli_chose_is_corrupt(tmp_path, map_size):
    # 2**64 was exit 1 (OverflowError in LMDB's open); true and 1 made every write "full" (exit 8)
    path = tmp_path / "s"
    Store.open(path, create=True).close()
    (path / "mqcli-store.json").write_text('{"format": 3, "map_size": %s}' % map_size)
    with pytest.raises(errors.StoreCorrupt, match="unreadable: no map size") as info:
        Store.open(path)
    assert info.value.exit_code == 11


def test_a_store_left_unfinished_is_finished_by_the_next_init_only(tmp_path):
    path = tmp_path / "s"
    prepare_directory(path)  # what an `init` killed after writing its first marker leaves,
    write_marker(path, 1 << 30, creating=True)
    (path / "data.mdb").write_bytes(bytes(4096))  # with LMDB's file cut short by a full disk
    with pytest.raises(errors.StoreUnavailable, match="never finished"):
        Store.open(path)
    with Store.open(path, create=True, name="qm") as st:
        assert system_queues(st) == SYSTEM and st.info().name == "qm" and st.check() == []
        guid = st.info().guid
    with Store.open(path) as st:
        assert st.info().guid == guid


def test_a_finished_store_whose_data_file_was_lost_is_corrupt_not_made_anew(tmp_path):
    path = tmp_path / "s"
    Store.open(path, create=True).close()
    (path / "data.mdb").unlink()
    with pytest.raises(errors.StoreCorrupt, match="no queue manager identity"):
        Store.open(path, create=True)


def test_check_reports_a_missing_system_queue(tmp_path):
    with Store.open(tmp_path / "s", create=True) as st:
        with st._env.begin(write=True) as lt:  # damage: what an old half-made store could hold
            from store.keys import queue_key
            raw = lt.get(queue_key("dead-letter-tx"), db=st._dbs["queues"])
            assert raw is not None
            lt.delete(queue_key("dead-letter-tx"), db=st._dbs["queues"])
        st._queue_cache.clear()
        assert any("system queue 'dead-letter-tx' is missing" in p for p in st.check())


_CREATOR = textwrap.dedent("""
    import sys
    from store import Store
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    sys.stdin.readline()
    Store.open(sys.argv[1], create=True, name="killed").close()
    sys.stdout.write("made\\n"); sys.stdout.flush()
""")


@pytest.mark.slow
def test_an_init_killed_at_random_moments_is_finished_by_the_next(tmp_path):
    rng = random.Random(int(os.environ.get("MQCLI_TEST_SEED", "0")) or None)
    made_whole = killed_inside = 0
    for trial in range(25):
        path = tmp_path / f"s{trial}"
        child = subprocess.Popen([sys.executable, "-c", _CREATOR, str(path)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline() == "ready\n"
        child.stdin.write("go\n")
        child.stdin.flush()
        time.sleep(rng.uniform(0, 0.006))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
        made_whole += out == "made\n"
        killed_inside += out == "" and path.exists()
        with Store.open(path, create=True, name="next") as st:
            assert system_queues(st) == SYSTEM
            assert st.check() == []
            guid = st.info().guid
        with Store.open(path) as st:
            assert st.info().guid == guid
    assert killed_inside > 0, "no kill landed inside a creation"


def test_mqcli_init_finishes_an_unfinished_store_and_says_so(tmp_path):
    path = tmp_path / "s"
    prepare_directory(path)
    write_marker(path, 1 << 30, creating=True)
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "xdg")}
    get = subprocess.run([sys.executable, "-m", "mqcli", "--store", str(path), "info"],
                         capture_output=True, text=True, env=env, timeout=60, check=False)
    # only init makes (or finishes) a store; the others say so
    assert get.returncode == 11 and "run `mqcli init` again" in get.stderr, get.stderr
    first = subprocess.run([sys.executable, "-m", "mqcli", "--store", str(path), "init"],
                           capture_output=True, text=True, env=env, timeout=60, check=False)
    assert first.returncode == 0 and "left unfinished" in first.stderr, first.stderr
    again = subprocess.run([sys.executable, "-m", "mqcli", "--store", str(path), "init"],
                           capture_output=True, text=True, env=env, timeout=60, check=False)
    assert again.returncode == 0 and "already exists" in again.stderr
    path2 = tmp_path / "s2"
    prepare_directory(path2)
    write_marker(path2, 1 << 30, creating=True)
    init = subprocess.run([sys.executable, "-m", "mqcli", "--store", str(path2), "init"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert init.returncode == 0 and "left unfinished" in init.stderr, init.stderr
    with Store.open(path2) as st:
        assert system_queues(st) == SYSTEM and st.check() == []
