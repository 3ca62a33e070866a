"""The JVM options of the sessions mqcli makes: HotSpot compiles huge generated methods only in
sessions whose job decodes report labels in Spark SQL (routes over Parquet exports or a reports
file), and spark-defaults.conf's and the caller's own options are kept beside it."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from store.analytics.pipeline import Source  # noqa: E402
from store.analytics.session import JAVA_OPTION_KEYS, JIT_HUGE_METHODS, with_java_options  # noqa: E402


@pytest.fixture
def defaults(tmp_path, monkeypatch):
    (tmp_path / "spark-defaults.conf").write_text("spark.driver.extraJavaOptions -Dfrom.defaults=1\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    monkeypatch.delenv("SPARK_HOME", raising=False)


def test_huge_methods_are_compiled_only_for_labels_decoded_in_sql(defaults):
    for key in JAVA_OPTION_KEYS:
        assert JIT_HUGE_METHODS in with_java_options({}, sql_labels=True)[key].split()
        assert JIT_HUGE_METHODS not in with_java_options({}, sql_labels=False)[key].split()


def test_spark_defaults_and_the_callers_options_are_kept(defaults):
    conf = with_java_options({"spark.driver.extraJavaOptions": "-Dmine=2", "spark.app.x": "y"}, sql_labels=True)
    assert conf["spark.driver.extraJavaOptions"].split() == [JIT_HUGE_METHODS, "-Dfrom.defaults=1", "-Dmine=2"]
    assert conf["spark.app.x"] == "y"
    assert with_java_options({}, sql_labels=False)["spark.driver.extraJavaOptions"] == "-Dfrom.defaults=1"


def test_which_sources_decode_labels_in_sql():
    assert Source(parquet="exports/").sql_labels and Source(reports="reports.csv").sql_labels
    assert not Source(stores=["/var/lib/mq/qm1"]).sql_labels and not Source(snapshots="snaps/").sql_labels
