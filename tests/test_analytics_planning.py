"""Planning a read (store/analytics/planning.py, pushdown.py) without starting Spark: the key
ranges follow the cores a job has, and pushed filters narrow them. The reader is plain Python
here, as Spark's planning worker runs it."""

from __future__ import annotations

import pytest

from store import NewMessage, Store

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from datetime import datetime, timezone  # noqa: E402

from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan, Not  # noqa: E402

from store.analytics import planning, pushdown  # noqa: E402
from store.analytics.columns import MESSAGE_COLUMNS  # noqa: E402
from store.analytics.source import MqStorePushdownReader  # noqa: E402


def _reader(path, cores=0, rows=250_000):
    return MqStorePushdownReader(table="messages", columns=MESSAGE_COLUMNS, paths=[str(path)], queues=None,
                                 report_only=False, rows_per_partition=rows, batch_rows=100, partitions=cores)


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "qm", create=True, name="qm") as st:
        for name in ("a", "b", "c"):
            st.create_queue(name)
            st.put_many(name, [NewMessage(b"x", priority=i % 8) for i in range(400)])
        st.get_many("a", 3, confirm_id=4)
    return tmp_path / "qm"


def test_ranges_follow_the_cores_and_stay_under_the_ceiling(store):
    # the queues' counters (in-flight messages included) plus the in-flight table, read whole
    assert planning.rows_in([store]) == 1200 + 3
    assert planning.rows_per_range(1200, 8, 250_000) == 150
    assert planning.rows_per_range(1200, 8, 100) == 100
    assert planning.rows_per_range(0, 8, 100) == 100
    one = _reader(store).partitions()
    eight = _reader(store, cores=8).partitions()
    assert len(one) == 2  # the three small queues in one range, and the in-flight table
    assert len(eight) >= 8
    assert planning.shuffle_partitions(1) == 4 and planning.shuffle_partitions(8) == 16


def test_pushed_filters_are_taken_or_handed_back(store):
    reader = _reader(store)
    taken = [EqualTo(("queue",), "b"), In(("priority",), (6, 7)), EqualTo(("state",), "available"),
             GreaterThanOrEqual(("put_time",), datetime(2020, 1, 1, tzinfo=timezone.utc))]
    kept = [Not(EqualTo(("queue",), "a")), LessThan(("label",), "z"), In(("priority",), (1, 5)),
            EqualTo(("priority",), "7")]
    assert reader.pushFilters(taken + kept) == kept
    assert reader.pushed.sets == {"queue": frozenset({"b"}), "state": frozenset({"available"})}
    assert reader.pushed.priority == (6, 7)
    ranges = [p.value for p in reader.partitions()]
    assert ranges and all(r.table == "pos" and list(r.queues.values()) == ["b"] for r in ranges)
    # priorities 7 and 6 are the bytes 0 and 1 after the queue id: one key range
    assert all(r.start[5:6] == b"\x00" and r.end[5:6] == b"\x02" for r in ranges)


def test_a_filter_no_row_can_pass_plans_nothing(store):
    reader = _reader(store)
    reader.pushFilters([EqualTo(("queue",), "a"), EqualTo(("queue",), "b")])
    assert reader.pushed.empty() and reader.partitions() == []
    reader = _reader(store)
    reader.pushFilters([EqualTo(("queue",), "nowhere")])
    assert reader.partitions() == []
    assert pushdown.Pushed().any() is False


def test_a_queue_is_split_at_every_nth_key_of_its_own(tmp_path):
    from store import keys
    from store.analytics.locate import open_readonly
    from store.analytics.scan import _split

    with Store.open(tmp_path / "qm", create=True, name="qm") as st:
        for name, n in (("empty", 0), ("one", 1), ("seven", 7), ("many", 400)):
            st.create_queue(name)
            if n:
                st.put_many(name, [NewMessage(b"x", priority=i % 8) for i in range(n)])
        qids = {q.name: q.qid for q in st.list_queues()}
    with open_readonly(tmp_path / "qm") as (env, dbs), env.begin() as lt:
        for name, qid in qids.items():
            prefix = keys.queue_prefix(qid)
            own = [bytes(k) for k in lt.cursor(db=dbs["pos"]).iternext(values=False) if bytes(k).startswith(prefix)]
            for rows in (1, 2, 3, 7, 50, 399, 400, 1000):
                assert _split(lt, dbs["pos"], prefix, rows) == own[rows::rows], (name, rows)


def test_a_queue_in_one_band_is_cut_evenly_by_seq_and_read_once(tmp_path):
    """No walk: a queue whose positions are all in one priority band is cut at even seqs, here
    with the seqs of another queue between its own, and every message is read once."""
    from store.analytics import scan
    from store.analytics.columns import select

    with Store.open(tmp_path / "qm", create=True, name="qm") as st:
        st.create_queue("reports")
        st.create_queue("other")
        for i in range(40):
            st.put_many("reports", [NewMessage(b"r%d" % (i * 25 + j)) for j in range(25)])
            st.put_many("other", [NewMessage(b"o")] * (i % 3))
    ranges = [r for r in scan.plan([tmp_path / "qm"], ["reports"], rows_per_range=100)]
    sizes = [sum(b.num_rows for b in scan.read_range(r, select(["body"]))) for r in ranges]
    bodies = [row["body"] for r in ranges for b in scan.read_range(r, select(["body"])) for row in b.to_pylist()]
    assert sorted(bodies) == sorted(b"r%d" % i for i in range(1000))
    cut = [size for r, size in zip(ranges, sizes) if r.table == scan.POS_TABLE]  # and one of the in-flight table
    assert len(cut) == 10 and min(cut) >= 80 and max(cut) <= 120, sizes
    # in batches of any size, a range gives the same messages in the same order: a batch that
    # ends on the range's end, one key before it, or past it
    for r, size in zip(ranges, sizes):
        whole = [row["body"] for b in scan.read_range(r, select(["body"])) for row in b.to_pylist()]
        for rows in {1, 7, max(1, size - 1), max(1, size), size + 1}:
            batches = list(scan.read_range(r, select(["body"]), rows))
            assert all(0 < b.num_rows <= rows for b in batches)
            assert [row["body"] for b in batches for row in b.to_pylist()] == whole, (rows, size)


def test_a_store_an_older_mqcli_wrote_without_the_holders_table_is_read(tmp_path):
    from older_stores import as_an_older_mqcli_left_it
    from store.analytics import scan
    from store.analytics.columns import select

    with Store.open(tmp_path / "qm", create=True, name="qm") as st:
        st.create_queue("q")
        st.put_many("q", [NewMessage(b"m%d" % i) for i in range(5)])
    as_an_older_mqcli_left_it(tmp_path / "qm", tables=False)
    bodies = [row["body"] for r in scan.plan([tmp_path / "qm"], ["q"])
              for b in scan.read_range(r, select(["body"])) for row in b.to_pylist()]
    assert sorted(bodies) == [b"m%d" % i for i in range(5)]
