"""Reads do not write, snapshots, identity checked (docs/design.md#pipeline):

- `export` (JSONL and Parquet), `snapshot`, `analyze` and the `mqstore` source leave a store's
  content byte for byte as it was, expired messages and lapsed leases included, and report
  those as such;
- health from a Parquet export and from a snapshot equals health from a direct scan, empty
  queues included;
- a partition that finds another store (another GUID), or none, where the driver planned one
  fails the job at once with a one-line error naming the path, both GUIDs and the host.
"""

from __future__ import annotations

import json
import shutil
import socket
import time

import pytest

from cli_helpers import invoke
from store import NewMessage, Store
from store.analytics.locate import open_readonly
from store.errors import StoreMismatch

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark")]  # analyze run in-process uses it

HOUR_AGO = lambda: time.time() - 3600  # noqa: E731 - a store clock an hour behind


def _store_with_overdue_work(path, name="qm1"):
    """Every state, a backout, an expired message and a lapsed lease, an empty queue."""
    with Store.open(path, create=True, name=name, clock=HOUR_AGO) as st:
        st.create_queue("work", max_backouts=5)
        st.create_queue("ttl")
        st.create_queue("idle")
        st.create_queue("txq", transactional=True)
        st.put_many("work", [NewMessage(b"m" * (i + 1), priority=i % 8) for i in range(20)])
        st.get("work", wait=0, confirm_id=10)
        st.undo("work", confirm_id=10)                           # a backout
        st.get("work", wait=0, confirm_id=11, lease=60)          # lease lapsed 59 minutes ago
        st.browse_lock("work", limit=2, lock_id=6)               # locked-browse
        st.put("work", b"pending", confirm_id=9)                 # put-unconfirmed
        st.put("ttl", b"expires", ttl=60)                        # expired 59 minutes ago
        tx = st.tx_begin(timeout=None)
        st.put("txq", b"in a transaction", tx=tx)               # tx-locked


def _content(path) -> dict[str, list[tuple[bytes, bytes]]]:
    """Every key and value of every table of the store, read read-only."""
    with open_readonly(path) as (env, dbs), env.begin() as lt:
        return {name: [(bytes(k), bytes(v)) for k, v in lt.cursor(db=db)] for name, db in sorted(dbs.items())}


def _health(*args):
    result = invoke(["analyze", "health", *map(str, args), "-o", "json"])
    assert result.code == 0, result
    return {r["queue"]: {k: v for k, v in r.items() if k != "oldest_age_s"} for r in result.json()}


def test_reads_leave_the_store_unchanged_and_report_expired_and_lapsed(spark, tmp_path):
    path = tmp_path / "qm1"
    _store_with_overdue_work(path)
    before = _content(path)
    assert invoke(["--store", path, "export", "--to", tmp_path / "all.jsonl", "-q"]).code == 0
    exports = tmp_path / "exports"
    exports.mkdir()
    assert invoke(["--store", path, "export", "--format", "parquet", "--to", exports / "qm1.parquet", "-q"]).code == 0
    snap = invoke(["--store", path, "snapshot", tmp_path / "snaps", "-o", "json"])
    assert snap.code == 0, snap
    direct = _health(path)
    assert invoke(["analyze", "routes", path, "-o", "json"]).code == 0
    rows = spark.read.format("mqstore").load(str(path)).select("queue", "state", "backouts").collect()
    assert _content(path) == before  # nothing above changed a byte of the store's content

    work, ttl = direct["work"], direct["ttl"]
    assert (work["lapsed"], work["backouts"], work["backed_out"], direct["txq"]["tx-locked"]) == (1, 1, 1, 1)
    assert (ttl["expired"], ttl["depth"]) == (1, 1)
    assert direct["idle"]["depth"] == 0 and direct["dead-letter"]["depth"] == 0
    assert len(rows) == 23 and sum(r["backouts"] for r in rows) == 1
    jsonl = [json.loads(line) for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert sum(1 for r in jsonl if r.get("queue") == "ttl") == 1  # the expired message, not swept

    manifest = json.loads(snap.out)
    assert manifest["guid"] == direct["work"]["store_guid"] and manifest["name"] == "qm1"
    assert set(manifest["files"]) == {"data.mdb", "mqcli-store.json"}
    assert [p.name for p in (tmp_path / "snaps").iterdir()] == [manifest["snapshot"].rsplit("/", 1)[1]]
    assert _health("--parquet", exports) == direct  # every queue, empty ones too
    assert _health("--snapshots", tmp_path / "snaps") == direct
    assert _content(path) == before


def test_snapshots_of_many_stores_read_the_newest_of_each(tmp_path):
    snaps = tmp_path / "snaps"
    for name in ("qm1", "qm2"):
        with Store.open(tmp_path / name, create=True, name=name) as st:
            st.create_queue("orders")
            st.put("orders", b"one")
        assert invoke(["--store", tmp_path / name, "snapshot", snaps, "-q"]).code == 0
    with Store.open(tmp_path / "qm1") as st:
        st.put("orders", b"two")
    assert invoke(["--store", tmp_path / "qm1", "snapshot", snaps, "-q"]).code == 0
    assert len([p for p in snaps.iterdir()]) == 3
    result = invoke(["analyze", "health", "--snapshots", snaps, "--queue", "orders", "-o", "json"])
    assert result.code == 0, result
    assert {(r["store_name"], r["depth"]) for r in result.json()} == {("qm1", 2), ("qm2", 1)}
    assert {r["store"] for r in result.json()} == {str(tmp_path / "qm1"), str(tmp_path / "qm2")}


def test_a_damaged_snapshot_is_refused_by_its_checksum(tmp_path):
    with Store.open(tmp_path / "qm1", create=True, name="qm1") as st:
        st.create_queue("orders")
    made = invoke(["--store", tmp_path / "qm1", "snapshot", tmp_path / "snaps", "-o", "json"])
    data = tmp_path / "snaps" / json.loads(made.out)["snapshot"].rsplit("/", 1)[1] / "store" / "data.mdb"
    raw = bytearray(data.read_bytes())
    raw[-1] ^= 0xFF
    data.write_bytes(bytes(raw))
    result = invoke(["analyze", "health", "--snapshots", tmp_path / "snaps"])
    assert result.code == 11, result
    assert len(result.err_lines) == 1 and "does not match its manifest's checksum" in result.err_lines[0]


def _planned_then(spark, tmp_path, change):
    """Read a store through the source once (so the driver has planned it), `change` the
    store's path, then read it again with the same plan."""
    from store.analytics.session import spark_session

    path = tmp_path / "qm1"
    with Store.open(path, create=True, name="qm1") as st:
        st.create_queue("orders")
        st.put("orders", b"x")
        guid = st.info().guid
    df = spark.read.format("mqstore").option("columns", "queue,state").load(str(path))
    assert len(df.collect()) == 1
    change(path)
    with pytest.raises(StoreMismatch) as caught, spark_session():
        df.collect()  # the same query execution: the partitions planned above
    return guid, caught.value


def test_another_store_at_the_planned_path_is_refused_by_guid(spark, tmp_path):
    def plant(path):
        shutil.move(path, tmp_path / "moved")
        with Store.open(path, create=True, name="intruder") as st:
            st.create_queue("orders")
            st.put("orders", b"not this one")
            plant.guid = st.info().guid

    guid, exc = _planned_then(spark, tmp_path, plant)
    assert exc.exit_code == 11 and "\n" not in exc.message
    assert exc.message == (f"the store {tmp_path / 'qm1'} on executor host {socket.gethostname()} is another "
                           f"store (expected GUID {guid}, found {plant.guid}); the job reads nothing of it")


def test_a_store_missing_where_it_was_planned_fails_the_job(spark, tmp_path):
    guid, exc = _planned_then(spark, tmp_path, shutil.rmtree)
    assert exc.exit_code == 11
    assert exc.message == (f"the store {tmp_path / 'qm1'} is missing on executor host {socket.gethostname()} "
                           f"(expected store GUID {guid}, found none); the job reads nothing of it")


def test_a_snapshot_into_a_file_is_refused_in_one_line(tmp_path):
    with Store.open(tmp_path / "qm1", create=True, name="qm1"):
        pass
    (tmp_path / "file").write_bytes(b"")
    result = invoke(["--store", tmp_path / "qm1", "snapshot", tmp_path / "file" / "snaps"])
    assert result.code == 11, result
    assert result.err_lines == [f"mqcli: error: cannot write a snapshot into {tmp_path / 'file' / 'snaps'}: "
                                f"Not a directory [MQ_ERROR_STORE_UNAVAILABLE]"]
    assert invoke(["--store", tmp_path / "none", "snapshot", tmp_path / "snaps"]).code == 11
    assert not (tmp_path / "snaps").exists() or not list((tmp_path / "snaps").iterdir())


@pytest.mark.parametrize("damage", ["huge", "truncated"])
def test_an_oversized_or_cut_manifest_is_refused_in_one_line(tmp_path, damage):
    from store.analytics.locate import MANIFEST, MANIFEST_LIMIT

    with Store.open(tmp_path / "qm1", create=True, name="qm1") as st:
        st.create_queue("orders")
    made = invoke(["--store", tmp_path / "qm1", "snapshot", tmp_path / "snaps", "-o", "json"])
    manifest = tmp_path / "snaps" / json.loads(made.out)["snapshot"].rsplit("/", 1)[1] / MANIFEST
    text = manifest.read_text()
    if damage == "huge":  # still valid JSON, padded past the bound
        manifest.write_text(text[:-1] + " " * MANIFEST_LIMIT + "}")
        why = "over 16 MiB"
    else:
        manifest.write_text(text[: len(text) // 2])
        why = "is unreadable"
    result = invoke(["analyze", "health", "--snapshots", tmp_path / "snaps"])
    assert result.code == 11, result
    assert len(result.err_lines) == 1 and why in result.err_lines[0], result
