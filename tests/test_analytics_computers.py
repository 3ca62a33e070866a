"""A trace report's computer as `analyze routes` keys a step (store/analytics/computers.py): two
numbers for a GUID, in the GUID's text order, the name for anything else; the same key from
Python (the source's columns) and from Spark SQL (labels decoded by labels.py), and the name back
from the key."""

from __future__ import annotations

import random
import uuid

import pytest

from store.analytics.computers import key_of

EDGE_GUIDS = ["00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
              "7fffffff-ffff-ffff-7fff-ffffffffffff", "80000000-0000-0000-8000-000000000000",
              "00000000-0000-0001-0000-000000000001", "0000000f-ffff-fff0-0000-00000000000f"]
NAMES = ["qmA", "HOST-1.example", "0", "ABCDEF01-2345-6789-ABCD-EF0123456789",  # upper case: not a decoded GUID
         "abcdef01-2345-6789-abcd-ef012345678", "abcdef0123456789abcdef0123456789", "g0000000-0000-0000-0000-000000000000"]


def _guids(n: int) -> list[str]:
    rng = random.Random(7)
    return EDGE_GUIDS + [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(n)]


def test_a_guids_key_orders_as_its_text_and_tells_every_guid_apart():
    guids = _guids(2000)
    keys = [key_of(g) for g in guids]
    assert all(-(1 << 63) <= half < (1 << 63) for k in keys for half in k[:2]) and {k[2] for k in keys} == {None}
    assert sorted(guids) == [g for _, g in sorted(zip(keys, guids))]
    assert len(set(keys)) == len(set(guids))


def test_anything_but_a_lowercase_guid_is_keyed_by_its_name():
    assert [key_of(n) for n in [*NAMES, None]] == [(None, None, n) for n in [*NAMES, None]]


@pytest.mark.spark
def test_spark_sql_makes_the_same_key_and_gives_the_name_back(spark):
    from pyspark.sql import functions as F

    from store.analytics.computers import key, key_columns, name_of

    values = [*_guids(300), *NAMES, None]
    df = spark.createDataFrame([(v,) for v in values], "computer STRING")
    hi, lo, name = key_columns(F.col("computer"))
    rows = df.select(hi.alias("hi"), lo.alias("lo"), name.alias("name")).collect()
    assert [tuple(r) for r in rows] == [key_of(v) for v in values]
    # from the source's columns (Python's key), the name comes back
    keyed = spark.createDataFrame([(v, *key_of(v)) for v in values], "computer STRING, hi LONG, lo LONG, name STRING")
    step_key = key(F.col("hi"), F.col("lo"), F.col("name"))
    back = keyed.select(name_of(step_key).alias("name")).collect()
    assert [r["name"] for r in back] == values
    # and Spark sorts keys as the text sorts, machine names first
    ordered = keyed.orderBy(step_key).collect()
    named = sorted(v for v in values if v is not None and key_of(v)[0] is None)
    assert [r["computer"] for r in ordered] == [None, *named, *sorted(_guids(300))]
