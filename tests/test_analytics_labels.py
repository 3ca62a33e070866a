"""The Spark SQL decoder of trace reports (store/analytics/labels.py) agrees with the Python
codec (store/trace.py) on every vector of tests/vectors/: the same fields for a valid label or
body, a rejection for an invalid one. And routes are decoded without any Python UDF."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store.trace import decode_body, decode_label

pytestmark = pytest.mark.spark

VECTORS = Path(__file__).parent / "vectors"
LABELS = [json.loads(line) for line in (VECTORS / "trace_labels.jsonl").read_text("utf-8").splitlines()]
BODIES = [json.loads(line) for line in (VECTORS / "trace_bodies.jsonl").read_text("utf-8").splitlines()]


DOCUMENTED = [json.loads(line) for line in (VECTORS / "trace_documented.jsonl").read_text("utf-8").splitlines()]


def _decoded(spark, column, texts, kind, strict=True):
    from store.analytics.labels import with_body_fields, with_label_fields

    schema = f"i INT, {column} {kind}"
    df = spark.createDataFrame(list(enumerate(texts)), schema)
    add = with_label_fields if column == "label" else with_body_fields
    return {r["i"]: r["d"].asDict() for r in add(df, column, "d", strict=strict).select("i", "d").collect()}


def test_spark_label_decoder_agrees_with_the_python_codec_on_every_vector(spark):
    decoded = _decoded(spark, "label", [v["label"] for v in LABELS], "STRING")
    assert len(decoded) == len(LABELS) > 100
    disagree = []
    for i, v in enumerate(LABELS):
        d = decoded[i]
        if not v["valid"]:
            if d["valid"]:
                disagree.append((i, v["note"], "accepted"))
            continue
        got = _as_python(d, "label")
        # the Python codec is the reference the vectors were checked against
        assert decode_label(v["label"], strict=True).to_dict() == v["fields"]
        if not d["valid"] or got != v["fields"]:
            disagree.append((i, v["note"], got))
    assert disagree == []


def test_spark_body_decoder_agrees_with_the_python_codec_on_every_vector(spark):
    bodies = [v["body"].encode("utf-8", "surrogatepass") for v in BODIES]
    decoded = _decoded(spark, "body", bodies, "BINARY")
    disagree = []
    for i, v in enumerate(BODIES):
        d = decoded[i]
        if d["valid"] != v["valid"]:
            disagree.append((i, v["note"], d))
        elif v["valid"] and _as_python(d, "body") != v["fields"]:
            disagree.append((i, v["note"], d))
        if v["valid"]:
            assert decode_body(v["body"], strict=True).to_dict() == v["fields"]
    assert disagree == []


def test_labels_made_by_the_encoder_decode_to_their_fields(spark):
    """Round trip over the encoder's output: every hour of a day (12-hour clock), both with and
    without seconds, across a leap day and a year end."""
    from datetime import datetime, timedelta, timezone

    from store.trace import encode_label

    guid = "6F1C2D3E-4A5B-4C6D-8E9F-0A1B2C3D4E5F"
    times = [datetime(2028, 2, 28, 23, 0, 0, tzinfo=timezone.utc) + timedelta(minutes=37 * i + i % 60 / 61)
             for i in range(120)] + [datetime(2099, 12, 31, 23, 59, 59, tzinfo=timezone.utc),
                                     datetime(2000, 1, 1, 0, 0, 0, tzinfo=timezone.utc)]
    labels = [encode_label("a1B2", i * 7919, i % 256, guid, t, has_seconds=i % 3 != 0, nul=i % 2 == 0)
              for i, t in enumerate(times)]
    decoded = _decoded(spark, "label", labels, "STRING")
    for i, text in enumerate(labels):
        expected = decode_label(text)
        d = decoded[i]
        assert d["valid"], text
        assert (d["qm_id"], d["message_id"], d["hops"], d["computer"], d["has_seconds"]) == (
            expected.qm_id, expected.message_id, expected.hops, expected.computer, expected.has_seconds)
        assert d["time"].timestamp() == expected.time.timestamp(), text  # naive local time from Spark


def test_routes_are_decoded_without_python_udfs(spark, tmp_path):
    from analytics_helpers import new_guid, put_reports, report, route_events

    from store import Store
    from store.analytics.routes import routes

    a, b = new_guid(), new_guid()
    with Store.open(tmp_path / "qm", create=True, name="qm") as st:
        put_reports(st, [report(a, 1, "DIRECT=OS:qm\\orders", e, n)
                         for n, e in enumerate(route_events([a, b], 1_700_000_000_000_000, [500]), 1)])
    result = routes(spark.read.format("mqstore").load(str(tmp_path / "qm")), cache=False)
    for df in (result.routes, result.links):
        plan = df._jdf.queryExecution().executedPlan().toString()
        assert "BatchScan mqstore" in plan  # the Python data source reads, and nothing else is Python
        for python_node in ("BatchEvalPython", "ArrowEvalPython", "PythonUDF", "FlatMapGroupsInPandas",
                            "MapInPandas", "MapInArrow"):
            assert python_node not in plan, python_node
    assert [r["count"] for r in result.links.collect()] == [1]


def _as_python(d, kind):
    """A Spark decoder's struct as the Python codec's to_dict (times as ISO-8601 UTC)."""
    if not d["valid"]:
        return None
    d = {k: v for k, v in d.items() if k != "valid"}
    if kind == "label":
        d["time"] = d["time"] and d["time"].strftime("%Y-%m-%dT%H:%M:%SZ")
    return d


@pytest.mark.parametrize("strict", [False, True])
def test_spark_decoders_agree_with_the_python_codec_on_every_documented_vector(spark, strict):
    disagree = []
    for kind, sql_type in (("label", "STRING"), ("body", "BINARY")):
        vectors = [v for v in DOCUMENTED if v["kind"] == kind]
        texts = [v["text"] if kind == "label" else v["text"].encode("utf-8") for v in vectors]
        decoded = _decoded(spark, kind, texts, sql_type, strict=strict)
        decode = decode_label if kind == "label" else decode_body
        for i, v in enumerate(vectors):
            accepted = v["valid"] if not strict else v["strict"] == "valid"
            want = v["fields"] if accepted else None
            if accepted:  # the Python codec is the reference the vectors were checked against
                assert decode(v["text"], strict=strict).to_dict() == want
            got = _as_python(decoded[i], kind)
            if got != want:
                disagree.append((kind, v["note"], got))
    assert disagree == []
