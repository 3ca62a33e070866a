"""The pipeline's message table without Spark: the two Arrow builders agree (from stored records,
what the data source reads; from Message objects, what the Parquet export writes), the Arrow
schema is the one Spark derives from the Spark schema, and a store's key ranges cover each of
its messages exactly once — also while another process writes."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s

pa = pytest.importorskip("pyarrow")

from store import NewMessage, Store  # noqa: E402
from store.analytics import scan  # noqa: E402
from store.analytics.columns import (  # noqa: E402
    MESSAGE_COLUMNS, QUEUE_COLUMNS, StoreIdentity, arrow_schema, message_batch, property_column,
    record_batch, select,
)
from store.errors import BadData, InvalidArgument  # noqa: E402
from store.records import STATES, Message, decode, encode  # noqa: E402

WHERE = StoreIdentity(path="/stores/qm1", name="qm1", guid=str(uuid.UUID(int=7)))
text = s.text(s.characters(blacklist_categories=("Cs",)), max_size=20)
maybe_int = s.none() | s.integers(1, (1 << 63) - 1)

messages = s.builds(
    Message,
    body=s.binary(max_size=64),
    state=s.sampled_from(STATES),
    priority=s.integers(0, 7),
    seq=s.integers(1, (1 << 56) - 1),
    qid=s.sampled_from([3, 4]),
    origin=s.binary(min_size=16, max_size=16),
    msg_n=s.integers(0, 0xFFFFFFFF),
    lookup_hi=s.integers(0, 7),
    put_time=s.integers(0, 4_000_000_000_000_000),
    expires=s.none() | s.integers(1, 4_000_000_000_000_000),
    correl_id=s.none() | text,
    label=text,
    props=s.dictionaries(s.sampled_from(["a", "mqcli.event"]) | text, text, max_size=3),
    app_specific=s.integers(-(1 << 31), (1 << 31) - 1),  # the record holds a signed 32-bit value
    report=s.booleans(), express=s.booleans(), trace=s.booleans(), dead_letter=s.booleans(),
    report_queue=s.none() | text,
    hops=s.integers(0, 0xFFFF), backouts=s.integers(0, 0xFFFF),
    confirm_id=maybe_int, lock_id=maybe_int, tx=maybe_int,
    lease_expires=s.none() | s.integers(1, 4_000_000_000_000_000),
    since=s.none() | s.integers(1, 4_000_000_000_000_000),
    dead_letter_reason=s.none() | text, original_queue=s.none() | text,
)
NAMES = {3: "orders", 4: "reports"}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s.lists(messages, max_size=12), s.booleans())
def test_batches_from_records_equal_batches_from_messages(batch, report_only):
    raws = [encode(m) for m in batch]
    decoded = [decode(r) for r in raws]
    for m in decoded:
        m.queue = NAMES[m.qid]
    kept = [m for m in decoded if m.report or not report_only]
    columns = MESSAGE_COLUMNS + (property_column("a"), property_column("mqcli.event"))
    got = record_batch(raws, NAMES, WHERE, columns, report_only)
    if not kept:
        assert got is None
        return
    want = message_batch(kept, WHERE, columns)
    assert got.schema == want.schema == arrow_schema(columns)
    assert got.to_pylist() == want.to_pylist()
    assert got.column("prop_mqcli_event").to_pylist() == [m.props.get("mqcli.event") for m in kept]


def test_a_batch_holds_every_field_of_its_messages():
    m = Message(b"\x00\xffbody", queue="orders", state="get-unconfirmed", priority=5, seq=9, qid=3,
                origin=uuid.UUID(int=7).bytes, msg_n=42, put_time=1_800_000_000_000_001, expires=None,
                correl_id="c-1", label="L", props={"k": "v"}, app_specific=-5, report=True,
                confirm_id=77, since=1_800_000_000_000_002, hops=2, backouts=1)
    row = record_batch([encode(m)], NAMES, WHERE).to_pylist()[0]
    assert row["store"] == "/stores/qm1" and row["store_name"] == "qm1" and row["store_guid"] == WHERE.guid
    assert row["msg_id"] == m.msg_id and row["unique_id"] == m.unique_id and row["lookup_id"] == m.lookup_id
    assert (row["queue"], row["state"], row["priority"], row["seq"]) == ("orders", "get-unconfirmed", 5, 9)
    assert (row["body"], row["size"], row["props"]) == (b"\x00\xffbody", 6, [("k", "v")])
    assert (row["class"], row["delivery"], row["confirm_id"], row["lock_id"]) == ("report", "recoverable", 77, None)
    assert row["put_time"].timestamp() * 1_000_000 == pytest.approx(1_800_000_000_000_001, abs=1)
    assert row["expires"] is None and (row["hops"], row["backouts"], row["app_specific"]) == (2, 1, -5)


def test_a_malformed_record_is_bad_data_not_a_crash():
    good = encode(Message(b"x", qid=3, label="abc"))
    for broken in (good[:20], good[:-1], b"\x09" + good[1:]):
        with pytest.raises(BadData):
            record_batch([broken], NAMES, WHERE)


def test_columns_are_chosen_by_name_in_table_order():
    assert [c for c, _ in select(["label", "queue"])] == ["queue", "label"]
    assert select(None, QUEUE_COLUMNS) == QUEUE_COLUMNS
    with pytest.raises(InvalidArgument, match="unknown column 'nope'"):
        select(["nope"])


def test_the_arrow_schema_is_the_one_spark_derives():
    pytest.importorskip("pyspark")
    from pyspark.sql.pandas.types import to_arrow_schema

    from store.analytics.columns import spark_schema

    for table in (MESSAGE_COLUMNS, QUEUE_COLUMNS):
        assert to_arrow_schema(spark_schema(table), timezone="UTC").equals(arrow_schema(table))


# ---- key ranges ------------------------------------------------------------------------------

def _fill(path: Path) -> list[tuple[str, str, str, bytes]]:
    """A store with three queues (one empty), every state, binary bodies; returns what it holds."""
    with Store.open(path, create=True, name="qm") as st:
        for q in ("a", "b", "c"):
            st.create_queue(q)
        st.create_queue("t", transactional=True)
        st.put_many("a", [NewMessage(os.urandom(i % 50), priority=i % 8) for i in range(700)])
        st.put_many("b", [NewMessage(b"b%d" % i, correl_id=f"c{i}") for i in range(90)])
        st.get_many("a", 5, confirm_id=11)
        st.browse_lock("a", limit=3, lock_id=12)
        st.put("b", b"pending", confirm_id=13)
        tx = st.tx_begin()
        st.put("t", b"in tx", tx=tx)
        return sorted((m.msg_id, m.queue, m.state, m.body) for m in st.export_messages(hidden=True))


def _read_all(paths, queues=None, rows=250_000, batch_rows=8192):
    rows_out = []
    ranges = scan.plan(paths, queues, rows)
    for r in ranges:
        for b in scan.read_range(r, select(["msg_id", "queue", "state", "body"]), batch_rows):
            rows_out += [(d["msg_id"], d["queue"], d["state"], d["body"]) for d in b.to_pylist()]
    return ranges, sorted(rows_out)


def test_key_ranges_cover_every_message_once(tmp_path):
    held = _fill(tmp_path / "qm")
    assert {state for _, _, state, _ in held} == {"available", "get-unconfirmed", "locked-browse",
                                                   "put-unconfirmed", "tx-locked"}
    ranges, got = _read_all([tmp_path / "qm"], rows=100, batch_rows=64)
    assert got == held
    assert len(ranges) >= 8  # queue a cut into ranges of ~100 positions; small queues share one
    assert all(r.table in ("pos", "msg") for r in ranges)
    _, only_b = _read_all([tmp_path / "qm"], ["B"])
    assert only_b == [h for h in held if h[1] == "b"]


def test_an_unknown_queue_or_store_is_refused(tmp_path):
    from store.errors import QueueNotAvailable, StoreUnavailable

    _fill(tmp_path / "qm")
    with pytest.raises(QueueNotAvailable):
        scan.plan([tmp_path / "qm"], ["nope"])
    with pytest.raises(StoreUnavailable):
        scan.plan([tmp_path / "missing"])


WRITER = r"""
import sys, time
from store import NewMessage, Store
with Store.open(sys.argv[1]) as st:
    deadline = time.time() + float(sys.argv[2])
    n = 0
    while time.time() < deadline:
        st.put_many("a", [NewMessage(b"w%d" % (n + i)) for i in range(50)])
        got = st.get_many("a", 20, wait=0)
        n += 50
print(n)
"""


def test_reading_while_another_process_writes(tmp_path):
    """Readers are LMDB snapshots: a scan next to a busy writer never fails, never yields a
    message twice within a range, and once the writer stops it sees exactly what is there."""
    path = tmp_path / "qm"
    _fill(path)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "3"], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parent.parent)
    scans = 0
    while writer.poll() is None:
        ranges = scan.plan([path], rows_per_range=200)
        for r in ranges:
            ids = [d["msg_id"] for b in scan.read_range(r, select(["msg_id"]), 50) for d in b.to_pylist()]
            assert len(ids) == len(set(ids))
        scans += 1
    assert writer.returncode == 0 and int(writer.stdout.read()) > 0
    assert scans >= 1
    with Store.open(path) as st:
        held = sorted((m.msg_id, m.queue, m.state, m.body) for m in st.export_messages(hidden=True))
    assert _read_all([path])[1] == held
