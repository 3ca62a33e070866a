"""Reports as a stream (store/analytics/stream.py): `spark.readStream.format("mqstore")` gives
each report put while the stream runs in the next micro-batch, once; a restart from the
checkpoint neither loses nor repeats one; `analyze routes --follow` prints the links again with
the new reports counted."""

from __future__ import annotations

import pytest

from analytics_helpers import new_guid, put_reports, report, route_events
from cli_helpers import invoke
from store import NewMessage, Store

pytestmark = pytest.mark.spark

START = 1_700_000_000_000_000
A, B = new_guid(), new_guid()


def _reports(first: int, n: int) -> list:
    """The reports of messages first..first+n-1 sent A -> B: 3 each (enqueued, sent, received)."""
    out = []
    for m in range(first, first + n):
        for i, ev in enumerate(route_events([A, B], START + m * 10_000, [2_000 + m])):
            out.append(report(A, m, "DIRECT=OS:qmB\\orders", ev, m * 10 + i))
    return out


def _put(path, first, n):
    with Store.open(path) as st:
        put_reports(st, _reports(first, n))
        st.put("reports", b"not a report")  # a normal message in the same queue: never streamed


def _start(spark, path, checkpoint, seen):
    def batch(df, batch_id):
        seen.append((batch_id, sorted(r["seq"] for r in df.select("seq").collect())))

    return (spark.readStream.format("mqstore").option("columns", "seq,label").load(str(path))
            .writeStream.foreachBatch(batch).option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="200 milliseconds").start())


def _seqs(path):
    with Store.open(path) as st:
        return sorted(m.seq for m in st.export_messages(hidden=True) if m.report)


def test_reports_put_while_the_stream_runs_come_once_and_a_restart_resumes(spark, tmp_path):
    path = tmp_path / "qm"
    with Store.open(path, create=True, name="qm"):
        pass
    _put(path, 0, 4)
    seen: list = []
    query = _start(spark, path, tmp_path / "ckpt", seen)
    try:
        query.processAllAvailable()
        assert [s for _, s in seen] == [_seqs(path)]  # the reports already there, in one batch
        before, batches = set(_seqs(path)), len(seen)
        _put(path, 4, 3)
        query.processAllAvailable()
        new = sorted(set(_seqs(path)) - before)
        # the batches after: the new reports only, each once. A trigger may fall between
        # _put's two commits (the reports, then a normal message), so there may be two
        # batches, the second with no report
        later = [seq for _, s in seen[batches:] for seq in s]
        assert len(new) == 9 and sorted(later) == new and len(later) == len(new)
    finally:
        query.stop()
    _put(path, 7, 2)  # while no stream runs
    again: list = []
    query = _start(spark, path, tmp_path / "ckpt", again)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    streamed = [seq for _, s in seen + again for seq in s]
    assert sorted(streamed) == _seqs(path)  # every report once: none lost, none repeated
    assert len(streamed) == len(set(streamed)) == 27


def test_follow_prints_updated_percentiles_and_resumes_from_its_checkpoint(spark, tmp_path):
    path = tmp_path / "qm"
    with Store.open(path, create=True, name="qm") as st:
        st.create_queue("other")
        st.put_many("other", [NewMessage(b"x")] * 3)
    _put(path, 0, 5)
    follow = ["analyze", "routes", str(path), "--follow", "--interval", "250ms",
              "--checkpoint", str(tmp_path / "ckpt"), "--idle", "60s", "-o", "jsonl"]
    first = invoke([*follow, "--count", "1"])
    assert first.code == 0, first
    [update] = first.jsonl()
    assert update["reports"] == 15 and update["routes"] == 5 and update["new_reports"] == 15
    [link] = update["links"]
    assert (link["from_qm"], link["to_qm"], link["count"]) == (A, B, 5)
    _put(path, 5, 5)
    second = invoke([*follow, "--count", "2"])
    assert second.code == 0, second
    resumed, grown = second.jsonl()
    assert resumed["batch"] == -1 and resumed["reports"] == 15 and resumed["links"] == update["links"]
    assert grown["new_reports"] == 15 and grown["reports"] == 30 and grown["routes"] == 10
    [link] = grown["links"]
    assert link["count"] == 10 and link["max_ms"] > update["links"][0]["max_ms"]


def test_follow_options_without_follow_and_follow_with_other_inputs_are_usage_errors(tmp_path):
    path = tmp_path / "qm"
    with Store.open(path, create=True, name="qm"):
        pass
    for args in (["--count", "2"], ["--idle", "5s"], ["--checkpoint", str(tmp_path / "c")],
                 ["--follow", "--parquet", str(tmp_path)], ["--follow", "--interval", "soon"]):
        result = invoke(["analyze", "routes", str(path), *args])
        assert result.code == 2, result
        assert len(result.err_lines) == 1 and "Traceback" not in result.stderr, result
