"""`mqcli analyze health` gives the figures `mqcli stats` gives for the same store, counts what
is stuck, expired but not swept, and backed out, writes --out datasets that Spark and pandas
read back, draws --plot, and reads Parquet exports."""

from __future__ import annotations

import time

import pytest

from cli_helpers import invoke
from store import NewMessage, Store

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark")]  # analyze run in-process uses it

STATES = ("put-unconfirmed", "available", "locked-browse", "get-unconfirmed", "browse-get-unconfirmed", "tx-locked")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _every_state(path, clock=None):
    with Store.open(path, create=True, name="qm1", clock=clock) as st:
        st.create_queue("work", max_backouts=5)
        st.create_queue("txq", transactional=True)
        st.create_queue("idle")
        st.put_many("work", [NewMessage(b"m" * (i + 1), priority=i % 8) for i in range(30)])
        st.get_many("work", 2, confirm_id=5)                   # get-unconfirmed
        st.browse_lock("work", limit=3, lock_id=6)             # locked-browse
        st.get("work", wait=0, lock_id=6, confirm_id=8)        # browse-get-unconfirmed
        st.put("work", b"pending", confirm_id=9)               # put-unconfirmed
        st.get("work", wait=0, confirm_id=10)
        st.undo("work", confirm_id=10)                         # a backout
        tx = st.tx_begin()
        st.put("txq", b"in a transaction", tx=tx)              # tx-locked
        st.put("dead-letter", b"dl", priority=1)


def _health(*args):
    result = invoke(["analyze", "health", *map(str, args), "-o", "json"])
    assert result.code == 0, result
    return {r["queue"]: r for r in result.json()}


def test_health_equals_mqcli_stats_for_the_same_store(tmp_path):
    path = tmp_path / "qm1"
    _every_state(path)
    health = _health(path)
    stats = invoke(["--store", path, "stats", "-o", "json"])
    assert stats.code == 0, stats
    stats = {r["queue"]: r for r in stats.json()}
    assert set(health) == set(stats) == {"dead-letter", "dead-letter-tx", "work", "txq", "idle"}
    for queue, s in stats.items():
        h = health[queue]
        assert (h["depth"], h["bytes"], h["oldest"]) == (s["depth"], s["bytes"], s["oldest"]), queue
        assert {k: h[k] for k in STATES} == {k: s[k] for k in STATES}, queue
        assert h["by_priority"] == s["by_priority"], queue
        assert h["in_flight"] == sum(s[k] for k in STATES if k != "available")
        assert (h["oldest_age_s"] is None) == (s["oldest_age_s"] is None)
    assert {k for k in STATES if stats["work"][k]} == set(STATES) - {"tx-locked"}
    assert stats["txq"]["tx-locked"] == 1
    work = health["work"]
    assert (work["backouts"], work["backed_out"], work["expired"], work["stuck"]) == (1, 1, 0, 0)
    for key in ("store", "queue", "depth", "bytes", "oldest_age_s", "in_flight", "expired", "backouts"):
        assert key in work
    assert work["store"] == str(path) and work["store_name"] == "qm1"


def test_health_counts_stuck_and_expired_but_not_swept(tmp_path):
    path = tmp_path / "qm1"
    hour_ago = lambda: time.time() - 3600  # noqa: E731 - the store's clock, an hour behind
    with Store.open(path, create=True, name="qm1", clock=hour_ago) as st:
        st.create_queue("work")
        st.create_queue("ttl")
        st.put_many("work", [NewMessage(b"a"), NewMessage(b"b")])
        st.get("work", wait=0, confirm_id=3)                   # in flight since an hour ago
        st.put("ttl", b"expires", ttl=60)                      # expired 59 minutes ago
    health = _health(path, "--stuck-after", "30m")
    assert (health["work"]["in_flight"], health["work"]["stuck"]) == (1, 1)
    assert health["ttl"]["expired"] == 1 and health["ttl"]["depth"] == 1
    assert 3500 < health["work"]["oldest_age_s"] < 3700
    assert _health(path, "--stuck-after", "2h")["work"]["stuck"] == 0
    assert invoke(["--store", path, "sweep", "-q"]).code == 0
    after = _health(path)
    assert (after["ttl"]["expired"], after["ttl"]["depth"], after["dead-letter"]["depth"]) == (0, 0, 1)


def test_health_out_datasets_read_back_in_spark_and_pandas(spark, tmp_path):
    pd = pytest.importorskip("pandas")
    path = tmp_path / "qm1"
    _every_state(path)
    want = _health(path)
    for fmt in ("parquet", "csv", "json"):
        out = tmp_path / f"out-{fmt}"
        result = invoke(["analyze", "health", path, "--out", out, "--format", fmt, "-q"])
        assert result.code == 0, result
        assert "work" in result.out  # the table still goes to stdout
        files = [f for f in (out / "health").iterdir() if f.name.startswith("part-")]
        assert len(files) == 1
        if fmt == "parquet":
            frame = pd.read_parquet(out / "health")
            back = spark.read.parquet(str(out / "health"))
        elif fmt == "csv":
            frame = pd.read_csv(files[0])
            back = spark.read.option("header", True).option("escape", '"').option("inferSchema", True).csv(str(out / "health"))
        else:
            frame = pd.read_json(files[0], lines=True)
            back = spark.read.json(str(out / "health"))
        assert sorted(frame["queue"]) == sorted(want), fmt
        assert {q: int(d) for q, d in zip(frame["queue"], frame["depth"])} == {q: r["depth"] for q, r in want.items()}
        assert {r["queue"]: int(r["get-unconfirmed"]) for r in back.collect()} == {
            q: r["get-unconfirmed"] for q, r in want.items()}, fmt


def test_health_plot_is_a_png(tmp_path):
    path = tmp_path / "qm1"
    _every_state(path)
    plot = tmp_path / "depth.png"
    result = invoke(["analyze", "health", path, "--plot", plot])
    assert result.code == 0, result
    data = plot.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 5000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= 600 and height >= 150


def test_health_of_a_parquet_export_matches_the_store(tmp_path):
    path = tmp_path / "qm1"
    _every_state(path)
    exports = tmp_path / "exports"
    exports.mkdir()
    result = invoke(["--store", path, "export", "--format", "parquet", "--to", exports / "qm1.parquet"])
    assert result.code == 0, result
    from_store = _health(path)
    from_parquet = _health("--parquet", exports)
    assert set(from_parquet) == set(from_store)  # every queue: the export's footer holds the queue table
    for queue, r in from_parquet.items():
        s = from_store[queue]
        assert {k: v for k, v in r.items() if k != "oldest_age_s"} == {k: v for k, v in s.items() if k != "oldest_age_s"}


def test_health_errors_are_one_line_with_their_exit_codes(tmp_path):
    path = tmp_path / "qm1"
    _every_state(path)
    for args, code, text in (
            ([path, "--queue", "nope"], 6, "queue 'nope' does not exist"),
            ([tmp_path / "none"], 11, "no store at"),
            ([path, "--format", "xml"], 2, "--format must be one of parquet, csv, json"),
            ([path, "--plot", tmp_path / "x.jpg"], 2, "--plot writes a PNG"),
            ([path, "--parquet", tmp_path], 2, "--snapshots DIR or --parquet DIR: one of them"),
            ([path, "--snapshots", tmp_path], 2, "--snapshots DIR or --parquet DIR: one of them"),
            (["--snapshots", tmp_path], 11, f"no snapshots in {tmp_path} (take them with `mqcli snapshot"),
            ([path, "--stuck-after", "soon"], 2, "invalid --stuck-after"),
            (["--parquet", tmp_path / "none"], 2, "no Parquet export at")):
        result = invoke(["analyze", "health", *map(str, args)])
        assert result.code == code, result
        errors = [line for line in result.err_lines if line.startswith("mqcli: error: ")]
        assert len(errors) == 1 and text in errors[0], result


def test_an_oldest_message_put_ahead_of_this_clock_is_0_seconds_old_not_negative(tmp_path):
    # a store written on a host whose clock was an hour ahead: stats says 0 (render.age_seconds)
    path = tmp_path / "qm1"
    with Store.open(path, create=True, name="qm1", clock=lambda: time.time() + 3600) as st:
        st.create_queue("work")
        st.create_queue("idle")
        st.put("work", b"from the future")
    health = _health(path)
    assert health["work"]["oldest_age_s"] == 0
    assert health["idle"]["oldest_age_s"] is None  # an empty queue has no oldest message
