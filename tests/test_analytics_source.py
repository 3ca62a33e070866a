"""The `mqstore` Spark data source returns exactly what the stores hold: every message (any
state) once, with its id, queue, state and body, across several partitions and stores; and the
queue table, the options, and the errors."""

from __future__ import annotations

import os

import pytest

from store import NewMessage, Store

pytestmark = pytest.mark.spark


def _store(path, name, n):
    with Store.open(path, create=True, name=name) as st:
        st.create_queue("orders")
        st.create_queue("reports")
        st.create_queue("empty")
        st.put_many("orders", [NewMessage(os.urandom(i % 40), priority=i % 8, props={"i": str(i)},
                                          correl_id=f"c{i % 5}") for i in range(n)])
        st.put_many("reports", [NewMessage(b"r%d" % i) for i in range(n // 10)])
        st.get_many("orders", 7, confirm_id=5)          # get-unconfirmed: the in-flight table
        st.browse_lock("reports", limit=2, lock_id=6)   # locked-browse
        st.put("orders", b"\x00pending\xff", confirm_id=7)  # put-unconfirmed, hidden from gets
        return st.info().guid, sorted((m.msg_id, m.queue, m.state, m.body) for m in st.export_messages(hidden=True))


def _rows(df):
    return sorted((r["msg_id"], r["queue"], r["state"], bytes(r["body"])) for r in df.select(
        "msg_id", "queue", "state", "body").collect())


def test_mqstore_returns_exactly_the_messages_the_store_holds(spark, tmp_path):
    _, held = _store(tmp_path / "qm1", "qm1", 900)
    df = spark.read.format("mqstore").option("rowsPerPartition", "150").option("batchRows", "64").load(
        str(tmp_path / "qm1"))
    assert df.rdd.getNumPartitions() >= 7  # orders cut into ~150-position ranges, plus the rest
    got = _rows(df)
    assert len(got) == len(held) == 900 + 90 + 1
    assert got == held
    assert df.count() == len(held)


def test_mqstore_reads_several_stores_each_row_naming_its_store(spark, tmp_path):
    g1, held1 = _store(tmp_path / "qm1", "qm1", 300)
    g2, held2 = _store(tmp_path / "qm2", "qm2", 200)
    df = spark.read.format("mqstore").load([str(tmp_path / "qm1"), str(tmp_path / "qm2"), str(tmp_path / "qm1")])
    assert _rows(df) == sorted(held1 + held2)  # a store named twice is read once
    by_store = {r["store_guid"]: (r["store_name"], r["count"]) for r in df.groupBy("store_guid", "store_name").count().collect()}
    assert by_store == {g1: ("qm1", len(held1)), g2: ("qm2", len(held2))}
    paths = {r["store"] for r in df.select("store").distinct().collect()}
    assert paths == {str(tmp_path / "qm1"), str(tmp_path / "qm2")}


def test_mqstore_options_choose_queues_columns_and_reports(spark, tmp_path):
    from store.records import Message

    _, held = _store(tmp_path / "qm1", "qm1", 100)
    with Store.open(tmp_path / "qm1") as st:
        st.import_messages("reports", [Message(b"rep", report=True, express=True, label="a report")])
    def reader():  # DataFrameReader.option changes the reader: one each
        return spark.read.format("mqstore")

    only = reader().option("queues", "REPORTS").load(str(tmp_path / "qm1"))
    assert {r["queue"] for r in only.select("queue").distinct().collect()} == {"reports"}
    assert only.count() == 11
    narrow = reader().option("columns", "queue,msg_id").load(str(tmp_path / "qm1"))
    assert narrow.columns == ["queue", "msg_id"]  # table order
    reports = reader().option("class", "report").load(str(tmp_path / "qm1")).collect()
    assert [(r["class"], r["label"], bytes(r["body"]), r["delivery"]) for r in reports] == [
        ("report", "a report", b"rep", "express")]
    props = reader().option("queues", "orders").option("columns", "msg_id").option("properties", "i,none").load(
        str(tmp_path / "qm1"))
    assert props.columns == ["msg_id", "prop_i", "prop_none"]
    got = {r["prop_i"] for r in props.collect() if r["prop_none"] is None}
    assert got == {str(i) for i in range(100)} | {None}  # the put-unconfirmed message has no props


def test_the_queue_table_has_every_queue_with_its_counters(spark, tmp_path):
    _store(tmp_path / "qm1", "qm1", 50)
    with Store.open(tmp_path / "qm1") as st:
        want = {q.name: (q.depth, q.bytes, q.system) for q in st.list_queues()}
    rows = spark.read.format("mqstore").option("table", "queues").load(str(tmp_path / "qm1")).collect()
    assert {r["queue"]: (r["depth"], r["bytes"], r["system"]) for r in rows} == want
    assert want["empty"] == (0, 0, False)


def test_mqstore_errors_name_the_problem(spark, tmp_path):
    _store(tmp_path / "qm1", "qm1", 10)
    for option, value, text in (("queues", "nope", "queue 'nope' does not exist"),
                                ("table", "nope", "option table must be messages or queues"),
                                ("columns", "nope", "unknown column 'nope'")):
        with pytest.raises(Exception, match=text):
            spark.read.format("mqstore").option(option, value).load(str(tmp_path / "qm1")).count()
    with pytest.raises(Exception, match="no store at"):
        spark.read.format("mqstore").load(str(tmp_path / "missing")).count()
