"""A write starts from what this process's last commit left in meta (store/write.py `Carry`)
only when no other write came between. Another process's write in between must be seen: its
messages counted, its settings obeyed; and a commit that changed nothing (which leaves its
LMDB transaction id to the next writer) must leave nothing to start from."""

import subprocess
import sys

import pytest

from store import Store, errors


def _in_another_process(path, code: str) -> None:
    """Run `code` with `st` open on the store at `path`, in a process of its own."""
    program = f"from store import Store\nst = Store.open({str(path)!r})\n{code}\nst.close()\n"
    subprocess.run([sys.executable, "-c", program], check=True, capture_output=True, timeout=60)


def test_another_process_write_between_two_puts_is_counted(tmp_path):
    st = Store.open(tmp_path / "s", create=True)
    st.create_queue("q")
    st.put("q", b"mine")
    _in_another_process(tmp_path / "s", "for i in range(3): st.put('q', b'theirs')")
    st.put("q", b"mine again")
    assert st.queue_info("q").depth == 5
    assert st.info().messages == 5
    assert st.queue_stats("q").totals["put_messages"] == 5
    assert st.check() == []
    st.close()


def test_a_setting_changed_by_another_process_is_obeyed(tmp_path):
    st = Store.open(tmp_path / "s", create=True)
    st.create_queue("q")
    st.put("q", b"read the settings")  # the store's quota, throttle and max size, now carried
    _in_another_process(tmp_path / "s", "st.set_qmgr(throttled=True)")
    with pytest.raises(errors.Throttled):
        st.put("q", b"refused")
    assert st.queue_info("q").depth == 1
    st.close()


def test_a_write_that_changed_nothing_leaves_nothing_to_start_from(tmp_path):
    st = Store.open(tmp_path / "s", create=True)
    st.create_queue("q")
    st.create_queue("empty")
    st.put("q", b"mine")
    with pytest.raises(errors.Timeout):
        st.get("empty", wait=0)  # a write that changes nothing: its transaction id is not used up
    # one commit, which takes that id
    _in_another_process(tmp_path / "s", "from store import NewMessage\n"
                                        "st.put_many('q', [NewMessage(b'theirs') for _ in range(3)])")
    st.put("q", b"mine again")
    assert st.queue_info("q").depth == 5
    assert st.info().messages == 5
    assert st.check() == []
    st.close()


def test_consumer_after_another_process_put_and_confirm(tmp_path):
    st = Store.open(tmp_path / "s", create=True)
    st.create_queue("q")
    for i in range(4):
        st.put("q", b"%d" % i)
    with st.consumer("q") as c:
        first = c.next(wait=0)
        c.confirm(first)
        _in_another_process(tmp_path / "s", "st.put('q', b'theirs')\nst.get('q', wait=0)")
        second = c.next(wait=0)  # confirms the first, in the commit that gets this one
        c.confirm(second)
    assert [first.body, second.body] == [b"0", b"2"]  # the other process got "1"
    stats = st.queue_stats("q")
    assert (stats.depth, stats.totals["got_messages"], stats.totals["put_messages"]) == (2, 3, 5)
    assert st.check() == []
    st.close()
