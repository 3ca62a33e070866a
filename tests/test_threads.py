"""One Store shared by threads of one process: 4 producer and 4 consumer threads, 6,000
messages. Every message is delivered exactly once, each consumer sees each producer's messages
in order (FIFO within a priority), and the store checks clean. LMDB serialises the write
transactions; nothing in the Store may be left to chance between them (queue cache, waiters)."""

import threading
from collections import Counter, defaultdict

from store import NewMessage, Store, errors

PRODUCERS = 4
CONSUMERS = 4
PER_PRODUCER = 1_500


def test_threads_share_one_store_exactly_once_and_in_order(tmp_path):
    st = Store.open(tmp_path / "s", create=True)
    st.create_queue("q")
    got: list[list[tuple[int, int]]] = [[] for _ in range(CONSUMERS)]
    failures: list[BaseException] = []
    producing = threading.Event()
    producing.set()

    def produce(p: int) -> None:
        try:
            for i in range(0, PER_PRODUCER, 10):  # singles and small batches, mixed
                if i % 20:
                    st.put_many("q", [NewMessage(b"%d:%d" % (p, j)) for j in range(i, i + 10)])
                else:
                    for j in range(i, i + 10):
                        st.put("q", b"%d:%d" % (p, j))
        except BaseException as exc:  # noqa: BLE001  (reported by the main thread)
            failures.append(exc)

    def consume(c: int) -> None:
        cid = c * 1_000_000
        try:
            while True:
                try:
                    if c % 2:  # two-phase, always confirmed
                        cid += 1
                        msgs = st.get_many("q", 7, wait=0.2, confirm_id=cid)
                        st.confirm("q", cid)
                    else:
                        msgs = st.get_many("q", 5, wait=0.2)
                except errors.Timeout:
                    if not producing.is_set():
                        return
                    continue
                got[c].extend(tuple(map(int, m.body.split(b":"))) for m in msgs)
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    producers = [threading.Thread(target=produce, args=(p,)) for p in range(PRODUCERS)]
    consumers = [threading.Thread(target=consume, args=(c,)) for c in range(CONSUMERS)]
    for t in producers + consumers:
        t.start()
    for t in producers:
        t.join(timeout=300)
    producing.clear()
    for t in consumers:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in producers + consumers), "a thread hung"
    assert not failures, failures
    every = Counter(m for seen in got for m in seen)
    assert len(every) == PRODUCERS * PER_PRODUCER and set(every.values()) == {1}
    for seen in got:
        by_producer = defaultdict(list)
        for p, j in seen:
            by_producer[p].append(j)
        assert all(js == sorted(js) for js in by_producer.values())
    assert sum(map(len, got)) == PRODUCERS * PER_PRODUCER
    assert st.queue_info("q").depth == 0 and st.check() == []
    st.close()


def test_threads_opening_stores_at_once_are_not_taken_for_a_swapped_file(tmp_path):
    """Each open compares the files LMDB mapped meanwhile with the ones it checked
    (store/ownership.py): another thread's open mapping its own store's files in between is
    not a file swapped in, so threads opening stores at once are never refused."""
    paths = [tmp_path / f"s{i}" for i in range(4)]
    for path in paths:
        Store.open(path, create=True).close()
    failures: list[BaseException] = []

    def open_close(path) -> None:
        try:
            for _ in range(40):
                Store.open(path).close()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=open_close, args=(path,)) for path in paths]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_a_child_forked_while_another_thread_opens_a_store_can_open_stores(tmp_path):
    """A process forked while a thread of its parent was opening a store (holding the lock
    opens take turns by) opens stores in the child: no lock is left held by a thread the
    child does not have."""
    import os

    from store import ownership

    Store.open(tmp_path / "s", create=True).close()
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with ownership.OPENING:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(30)
    try:
        pid = os.fork()
        if pid == 0:  # the child: open, then leave at once without running the parent's cleanup
            try:
                Store.open(tmp_path / "s").close()
                os._exit(0)
            except BaseException:
                os._exit(3)
    finally:
        release.set()
        holder.join()
    deadline = 200  # 20 s, polled: a child stuck on the lock is killed and fails the test
    while deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        threading.Event().wait(0.1)
        deadline -= 1
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError("the forked child could not open a store: the open lock stayed held")
    assert os.waitstatus_to_exitcode(status) == 0
