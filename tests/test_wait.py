"""Get with a wait: sleeps on a FIFO, wakes on a put from another process, times out."""

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from store import Store, errors

WAITER = textwrap.dedent("""
    import json, resource, sys, time
    from store import Store
    st = Store.open(sys.argv[1])
    print("waiting", flush=True)
    t0 = time.monotonic()
    wait = None if sys.argv[2] == "forever" else float(sys.argv[2])
    try:
        m = st.get("q", wait=wait)
        got = m.body.decode()
    except Exception as exc:
        got = type(exc).__name__
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"got": got, "waited": time.monotonic() - t0,
                      "cpu": usage.ru_utime + usage.ru_stime}), flush=True)
""")


@pytest.fixture
def path(tmp_path):
    with Store.open(tmp_path / "s", create=True) as st:
        st.create_queue("q")
    return tmp_path / "s"


def start_waiter(path, wait):
    p = subprocess.Popen([sys.executable, "-c", WAITER, str(path), wait],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "waiting"
    return p


def result(p):
    import json
    out, _ = p.communicate(timeout=30)
    return json.loads(out)


def test_a_put_from_another_process_wakes_a_waiting_getter(path):
    p = start_waiter(path, "20")
    time.sleep(1.0)  # let it register and fall asleep
    with Store.open(path) as st:
        st.put("q", b"wake up")
    r = result(p)
    assert r["got"] == "wake up"
    assert r["waited"] < 10  # woken by the put, long before its 20 s wait ran out
    assert r["cpu"] < 0.9   # it slept; a busy loop would have burned the whole second


def test_an_unspecified_wait_is_forever(path):
    p = start_waiter(path, "forever")
    time.sleep(1.5)  # longer than the getter's re-check slice
    assert p.poll() is None
    with Store.open(path) as st:
        st.put("q", b"late")
    assert result(p)["got"] == "late"


def test_the_wait_runs_out_with_timeout(path):
    with Store.open(path) as st:
        t0 = time.monotonic()
        with pytest.raises(errors.Timeout) as info:
            st.get("q", wait=0.3)
        assert time.monotonic() - t0 >= 0.3
        assert info.value.exit_code == 3
        assert info.value.code == "0xC00E001B"


def test_no_wait_on_an_empty_queue_is_a_timeout_at_once(path):
    with Store.open(path) as st, pytest.raises(errors.Timeout):
        st.get("q", wait=0)


def test_a_waiter_in_the_same_process_is_woken_by_another_thread(path):
    with Store.open(path) as st:
        timer = threading.Timer(0.3, lambda: st.put("q", b"x"))
        timer.start()
        assert st.get("q", wait=20).body == b"x"
        timer.join()


def test_undo_wakes_a_waiting_getter(path):
    with Store.open(path) as st:
        st.put("q", b"a")
        st.get("q", wait=0, confirm_id=1)
        p = start_waiter(path, "20")
        time.sleep(0.5)
        st.undo("q", confirm_id=1)
        assert result(p)["got"] == "a"


def test_dead_waiters_leave_no_fifo_behind(path):
    p = start_waiter(path, "20")
    time.sleep(0.5)
    p.kill()
    p.wait()
    with Store.open(path) as st:
        st.put("q", b"a")  # the writer finds the dead getter's FIFO and removes it
    assert list((path / "wait").iterdir()) == []


def test_a_writer_that_kept_its_scan_of_the_wait_directory_still_wakes_a_new_getter(path):
    """A writer reads `wait/` again only when its mtime changed (store/notify.py): with the
    directory settled (its mtime set back) the scan is kept, and a getter that comes later
    changes the mtime and is woken by the next put, not by its re-check slice."""
    from store import notify

    wait_dir = path / "wait"
    old = time.time() - 60
    os.utime(wait_dir, (old, old))
    with Store.open(path) as st:
        st.put("q", b"first")
        assert notify._SCANNED[str(wait_dir)][3] == ()  # kept: nobody waits
        st.get("q", wait=0)
        waiter = notify.Waiter(path, st.queue_info("q").qid)
        try:
            st.put("q", b"second")
            assert waiter.wait(0)  # woken by the put itself
        finally:
            waiter.close()
