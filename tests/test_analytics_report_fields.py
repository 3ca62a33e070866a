"""The trace columns the `mqstore` source decodes as it reads (store/analytics/report_fields.py)
give routes.py the same events as the Spark SQL decoder (labels.py) on every vector of
tests/vectors/, and bodies decoded once per distinct rest give what decoding each gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store.analytics.report_fields import body_queue, trace_values
from store.errors import BadData
from store.trace import decode_body, encode_body

VECTORS = Path(__file__).parent / "vectors"


def _lines(name):
    return [json.loads(line) for line in (VECTORS / name).read_text("utf-8").splitlines()]


LABELS = [v["label"] for v in _lines("trace_labels.jsonl")] + [
    v["text"] for v in _lines("trace_documented.jsonl") if v["kind"] == "label"]
BODIES = [v["body"] for v in _lines("trace_bodies.jsonl")] + [
    v["text"] for v in _lines("trace_documented.jsonl") if v["kind"] == "body"]


def _reference_queue(body: bytes):
    try:
        return decode_body(body.decode("utf-8", "surrogateescape")).queue
    except BadData:
        return None


def test_a_body_decoded_by_its_rest_is_what_decoding_it_whole_gives():
    good = encode_body(7, "DIRECT=OS:qm2\\orders").encode()
    same_rest = encode_body(0xABCDEF01, "DIRECT=OS:qm2\\orders").encode()
    bad_rest = good.replace(b"DIRECT=OS:", b"DIRECT=XX:")
    lowercase_head = good.replace(b"MESSAGE ID", b"message id")
    bad_id = good.replace(b"00000007", b"0000000G")
    for body in (good, same_rest, bad_rest, bad_rest.replace(b"00000007", b"00000008"),
                 lowercase_head, bad_id, b"", b"\xff\xfe", good + b"x"):
        assert body_queue(body) == _reference_queue(body), body
    assert body_queue(same_rest) == "DIRECT=OS:qm2\\orders"
    assert body_queue(bad_id) is None


@pytest.mark.parametrize("body", BODIES)
def test_every_body_vector_decodes_as_the_codec_decodes_it(body):
    raw = body.encode("utf-8", "surrogatepass")
    assert body_queue(raw) == _reference_queue(raw)
    # and again, from what was kept of its rest
    assert body_queue(raw) == _reference_queue(raw)


@pytest.mark.spark
def test_trace_columns_give_routes_the_events_spark_sql_decoding_gives(spark):
    """routes._events from the source's trace columns and from labels.py, row by row, on every
    label vector (each with a body vector, round robin) and conflict and empty labels."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

    from store.analytics.report_fields import TRACE_COLUMNS
    from store.analytics.routes import _events

    labels = [*LABELS, "Report Message Conflict\0", "report message conflict", "", "garbage"]
    bodies = [BODIES[i % len(BODIES)].encode("utf-8", "surrogatepass") for i in range(len(labels))]
    rows = [(i, f"c-{i % 5}", label, body, 1_800_000_000_000_000 + i, ("true", "false", None)[i % 3])
            for i, (label, body) in enumerate(zip(labels, bodies))]
    schema = StructType([StructField("i", LongType()), StructField("correl_id", StringType()),
                         StructField("label", StringType()), StructField("body", BinaryType()),
                         StructField("t", LongType()), StructField("delivered_text", StringType())])
    df = spark.createDataFrame(rows, schema).withColumn("put_time", F.timestamp_micros("t"))
    by_sql = _events(df.select("correl_id", "label", "body", "put_time", "delivered_text"), True)
    traced = trace_values([r[2] for r in rows], [r[3] for r in rows])
    decoded = spark.createDataFrame(
        [(r[1], r[4], r[5], *(traced[name][i] for name, _ in TRACE_COLUMNS)) for i, r in enumerate(rows)],
        "correl_id STRING, t LONG, prop_mqcli_delivered STRING, "
        + ", ".join(f"{name} {kind.upper()}" for name, kind in TRACE_COLUMNS),
    ).withColumn("put_time", F.timestamp_micros("t")).drop("t")
    by_source = _events(decoded, False)
    assert by_sql.columns == by_source.columns
    expected, got = by_sql.collect(), by_source.collect()
    assert len(expected) == len(rows) > 100
    assert [r.asDict() for r in got] == [r.asDict() for r in expected]
    assert sum(r["route"] is not None for r in got) > 50  # most vectors are valid labels
