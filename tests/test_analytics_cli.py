"""The pipeline's command line without a Spark session: nothing of PySpark, pyarrow or
matplotlib is imported unless a pipeline command runs; without the `spark` extra, `analyze` and
`export --format parquet` say how to install it (exit 2); the spark-submit job runs the same
analyses (marked spark and slow: it starts its own JVM)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import run_mqcli
from store import Store

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("pyspark", "pyarrow", "matplotlib", "pandas", "store.analytics.source")


def _imported(code: str) -> list[str]:
    probe = (f"import sys\n{code}\n"
             f"print(sorted(m for m in sys.modules if m.startswith({HEAVY!r})))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_import_store_and_mqcli_help_do_not_import_pyspark():
    assert _imported("import store; store.Store") == []
    assert _imported("from mqcli.app import run\nrun(['--help'])") == []
    assert _imported("from mqcli.app import run\nrun(['analyze', 'routes', '--help'])") == []
    assert _imported("from mqcli.app import run\nrun(['stats', '--store', '/nonexistent/x'])") == []


@pytest.fixture
def without_extra(tmp_path):
    """An environment where the spark extra's modules fail to import, as when not installed:
    packages of those names first on the path that raise ImportError."""
    shadow = tmp_path / "shadow"
    for name in ("pyspark", "pyarrow"):
        (shadow / name).mkdir(parents=True)
        (shadow / name / "__init__.py").write_text(f'raise ImportError("No module named {name}")\n')
    return {"PYTHONPATH": str(shadow)}


def test_analyze_without_the_extra_says_how_to_install_it(tmp_path, without_extra):
    with Store.open(tmp_path / "qm", create=True, name="qm"):
        pass
    for command in (["analyze", "health", tmp_path / "qm"], ["analyze", "routes", "--store", tmp_path / "qm"]):
        result = run_mqcli(command, env=without_extra)
        assert result.code == 2, result
        assert result.err_lines == ["mqcli: error: analyze needs pyspark and pyarrow: pip install "
                                    "'mqcli[spark]' [MQ_ERROR_ANALYTICS_UNAVAILABLE]"]
        assert result.stdout == b""


def test_parquet_export_without_the_extra_says_how_to_install_it(tmp_path, without_extra):
    result = run_mqcli(["--store", tmp_path / "qm", "export", "--format", "parquet", "--to", tmp_path / "x.parquet"],
                       env=without_extra)
    assert result.code == 2, result
    assert result.err_lines == ["mqcli: error: export --format parquet needs pyarrow: pip install "
                                "'mqcli[spark]' [MQ_ERROR_ANALYTICS_UNAVAILABLE]"]
    assert not (tmp_path / "x.parquet").exists()


def test_parquet_export_holds_every_message_with_every_field(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from store import NewMessage

    with Store.open(tmp_path / "qm", create=True, name="qm") as st:
        st.create_queue("orders")
        st.put_many("orders", [NewMessage(bytes([i % 256, 255]), priority=i % 8, correl_id=f"c{i}",
                                          props={"k": str(i)}) for i in range(300)])
        st.get_many("orders", 3, confirm_id=4)
        held = {m.msg_id: m for m in st.export_messages(hidden=True)}
    result = run_mqcli(["--store", tmp_path / "qm", "export", "--format", "parquet", "--to", tmp_path / "qm.parquet"])
    assert result.code == 0, result
    assert result.err_lines == [f"exported 300 messages to {tmp_path / 'qm.parquet'}"]
    frame = pd.read_parquet(tmp_path / "qm.parquet")
    assert len(frame) == 300 and set(frame["msg_id"]) == set(held)
    for row in frame.itertuples(index=False):
        m = held[row.msg_id]
        assert (bytes(row.body), row.priority, row.correl_id, row.state, dict(row.props)) == (
            m.body, m.priority, m.correl_id, m.state, m.props)
    assert run_mqcli(["--store", tmp_path / "qm", "export", "--format", "parquet"]).code == 2
    assert run_mqcli(["--store", tmp_path / "qm", "export", "--format", "xml"]).code == 2


def test_the_job_checks_its_inputs_before_spark_starts(tmp_path):
    with Store.open(tmp_path / "qm", create=True, name="qm"):
        pass
    out = subprocess.run([sys.executable, "-m", "store.analytics.job", "health", str(tmp_path / "qm"),
                          "--queue", "nope"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 6, out.stderr
    assert out.stderr == "store.analytics.job: error: queue 'nope' does not exist in the store [MQ_ERROR_QUEUE_NOT_AVAILABLE]\n"


def test_outputs_and_stores_that_cannot_be_used_are_refused_before_spark_starts(tmp_path):
    # each was found out after the whole job: --plot into no directory exited 1 (an internal
    # error), --out onto a file 14 without the cause; and a store given with its copy (one
    # queue manager twice) had every figure counted twice
    pytest.importorskip("pyspark")
    with Store.open(tmp_path / "qm", create=True, name="qm") as st:
        st.put("dead-letter", b"x")
    subprocess.run(["cp", "-a", str(tmp_path / "qm"), str(tmp_path / "copy")], check=True)
    (tmp_path / "file").write_text("")
    for args, says in (
        (["--plot", tmp_path / "nodir" / "x.png"], f"cannot write {tmp_path / 'nodir' / 'x.png'}: "
                                                  f"{tmp_path / 'nodir'} is not a directory"),
        (["--out", tmp_path / "file"], f"cannot write into {tmp_path / 'file'}: it is not a directory"),
        ([tmp_path / "copy"], f"the stores at {tmp_path / 'qm'} and {tmp_path / 'copy'} are one queue manager"),
    ):
        for command in ("health", "routes"):
            result = run_mqcli(["analyze", command, tmp_path / "qm", *args], timeout=120)
            assert result.code == 2 and len(result.err_lines) == 1 and says in result.stderr, result


def test_a_spark_errors_line_carries_its_java_cause():
    from store.analytics.session import _first_line

    py4j = ("An error occurred while calling o794.parquet.\n: org.apache.hadoop.fs.ParentNotDirectoryException: "
            "Parent path is not a directory: file:/tmp/results\n\tat org.apache.hadoop.fs.RawLocalFileSystem.mkdirs")
    assert _first_line(RuntimeError(py4j)) == ("An error occurred while calling o794.parquet: org.apache.hadoop.fs."
                                               "ParentNotDirectoryException: Parent path is not a directory: "
                                               "file:/tmp/results")
    assert _first_line(RuntimeError("one line\nanother")) == "one line"


@pytest.mark.spark
@pytest.mark.slow
def test_spark_submit_runs_the_job(tmp_path):
    pytest.importorskip("pyspark")
    import pyspark

    from analytics_helpers import new_guid, put_reports, report, route_events

    a, b = new_guid(), new_guid()
    with Store.open(tmp_path / "qm", create=True, name="qm") as st:
        put_reports(st, [report(a, n, "DIRECT=OS:qm\\orders", e, 10 * n + i)
                         for n in (1, 2) for i, e in enumerate(route_events([a, b], 1_700_000_000_000_000 + n, [700 * n]))])
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    out = subprocess.run([str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
                          "--conf", "spark.driver.bindAddress=127.0.0.1", str(REPO / "store" / "analytics" / "job.py"),
                          "routes", str(tmp_path / "qm"), "--out", str(tmp_path / "out"), "--format", "json"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["summary"] == {"reports": 6, "invalid_reports": 0, "routes": 2, "complete": 2, "incomplete": 0,
                              "loops": 0, "conflict_reports": 0}
    assert [(link["from_qm"], link["to_qm"], link["count"], link["p50_ms"], link["max_ms"]) for link in doc["links"]] == [
        (a, b, 2, 0.7, 1.4)]
    assert (tmp_path / "out" / "routes").is_dir() and (tmp_path / "out" / "links").is_dir()
