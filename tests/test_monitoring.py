"""Monitoring: `stats --prometheus` read back by prometheus_client's own parser and checked
against a scripted workload; `--textfile` replaced atomically under a reader; `health` in the
Nagios plugin format at every state; the per-queue counters behind them."""

import json
import math
import re
import subprocess
import sys
import textwrap
import time

import pytest

from store import NewMessage, Store

parser = pytest.importorskip("prometheus_client.parser")

TO_B = "DIRECT=OS:qmB\\orders"


def workload(cli, clock_skew=0):
    """10 puts and 4 gets on q; 3 two-phase gets undone into the dead-letter queue at
    max-backouts 1; an expired message; an open transaction holding a put; one outgoing
    message; a held two-phase get."""
    cli.ok("queue", "set", "q", "--max-backouts", "1")
    cli.ok("queue", "create", "work", "--transactional", "--quota", "1000", "-q")
    with Store.open(cli.store) as st:
        st.put_many("q", [NewMessage(b"m%02d" % i, priority=i % 3) for i in range(10)])
        st.put("q", b"short-lived", ttl=0.05, priority=0)
        st.get_many("q", 4)
        for cid in (11, 12, 13):
            st.get("q", confirm_id=cid, wait=0)
            st.undo("q", confirm_id=cid)
        time.sleep(0.1)
        st.sweep()  # the short-lived one expires
        tx = st.tx_begin()
        st.put("work", b"x" * 100, tx=tx)
        st.put("work", b"y" * 300, tx=tx)
        st.put(TO_B, b"to B")
        st.get("q", confirm_id=21, wait=0)


def families(text):
    out = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(found, name, **labels):
    return found[(name, tuple(sorted((k, str(v)) for k, v in labels.items())))]


def test_prometheus_metrics_parse_and_agree_with_the_store(cli):
    workload(cli)
    result = cli.ok("stats", "--prometheus")
    found = families(result.out)
    assert value(found, "mqcli_queue_put_messages_total", queue="q") == 11
    assert value(found, "mqcli_queue_got_messages_total", queue="q") == 4
    assert value(found, "mqcli_queue_backouts_total", queue="q") == 3
    assert value(found, "mqcli_queue_expired_messages_total", queue="q") == 1
    assert value(found, "mqcli_queue_dead_lettered_messages_total", queue="q") == 4
    assert value(found, "mqcli_queue_dead_lettered_by_reason_total", queue="q", reason="max-backouts") == 3
    assert value(found, "mqcli_queue_dead_lettered_by_reason_total", queue="q", reason="expired") == 1
    assert value(found, "mqcli_queue_depth", queue="q", state="available") == 2
    assert value(found, "mqcli_queue_depth", queue="q", state="get-unconfirmed") == 1
    assert value(found, "mqcli_queue_depth", queue="dead-letter", state="available") == 4
    assert value(found, "mqcli_queue_depth", queue="work", state="tx-locked") == 2
    assert value(found, "mqcli_transactions_open") == 1
    assert value(found, "mqcli_queue_quota_used_ratio", queue="work") == pytest.approx(0.4)
    assert value(found, "mqcli_outgoing_messages", queue=TO_B, destination="qmB", state="waiting") == 1
    assert value(found, "mqcli_queue_oldest_in_flight_age_seconds", queue="q") >= 0
    with Store.open(cli.store) as st:
        for s in st.stats():
            assert value(found, "mqcli_queue_bytes", queue=s.name) == s.bytes
            for priority, n in s.by_priority.items():
                assert value(found, "mqcli_queue_depth_by_priority", queue=s.name, priority=priority) == n
            assert sum(value(found, "mqcli_queue_depth", queue=s.name, state=state)
                       for state in s.by_state) == s.depth  # a count adds up
        info = st.info()
    assert value(found, "mqcli_store_messages") == info.messages
    assert cli.ok("check").code == 0


def test_a_put_counts_when_it_is_made_visible_not_when_it_is_undone_or_aborted(cli):
    """A two-phase put counts as put when it is confirmed, a transaction's puts when it
    commits: an undone or aborted put never reached the queue (the counts add up to its depth)."""
    cli.ok("queue", "create", "work", "--transactional", "-q")

    def put_totals():
        found = families(cli.subprocess("stats", "--prometheus").out)  # another process, the store open here
        return {q: (value(found, "mqcli_queue_put_messages_total", queue=q),
                    value(found, "mqcli_queue_put_bytes_total", queue=q)) for q in ("q", "work")}

    with Store.open(cli.store) as st:
        tx = st.tx_begin()
        st.put("work", b"x" * 100, tx=tx)
        st.put("q", b"two-phase", confirm_id=5)
        assert put_totals() == {"q": (0, 0), "work": (0, 0)}  # nothing visible yet
        st.tx_abort(tx)
        st.undo("q", confirm_id=5)
        assert put_totals() == {"q": (0, 0), "work": (0, 0)}
        tx = st.tx_begin()
        st.put("work", b"y" * 300, tx=tx)
        st.put("work", b"z" * 20, tx=tx)
        st.put("q", b"kept", confirm_id=6)
        st.tx_commit(tx)
        st.confirm("q", confirm_id=6)
        st.put("q", b"plain")
    assert put_totals() == {"q": (2, 9), "work": (2, 320)}
    with Store.open(cli.store) as st:
        assert {s.name: s.depth for s in st.stats() if s.name in ("q", "work")} == {"q": 2, "work": 2}


def test_counters_survive_a_restart_and_match_the_messages(cli):
    workload(cli)
    first = families(cli.ok("stats", "--prometheus").out)
    again = families(cli.subprocess("stats", "--prometheus").out)  # another process, the store reopened
    totals = [k for k in first if k[0].endswith("_total")]
    assert totals and all(first[k] == again[k] for k in totals)
    with Store.open(cli.store) as st:
        for s in st.stats():
            walked = {}
            for m in st.browse(s.name, states="all"):
                walked[m.state] = walked.get(m.state, 0) + 1
            assert {k: v for k, v in s.by_state.items() if v} == walked, s.name


def test_textfile_is_replaced_atomically_under_a_reader(cli, tmp_path):
    workload(cli)
    target = tmp_path / "mqcli.prom"
    cli.ok("stats", "--prometheus", "--textfile", target)
    whole = target.read_text()
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import subprocess, sys
        for _ in range(25):
            subprocess.run([sys.executable, "-m", "mqcli", "stats", "--prometheus", "--textfile",
                            {str(target)!r}], check=True)
    """)], env={**__import__("os").environ, **cli.env})
    reads = 0
    try:
        while writer.poll() is None:
            text = target.read_text()
            reads += 1
            assert text.endswith("\n") and len(families(text)) == len(families(whole)), "a partial file was read"
    finally:
        writer.wait(timeout=300)
    assert writer.returncode == 0 and reads > 25
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".mqcli.prom")]  # no temporary left


def test_health_is_ok_then_warning_then_critical_with_perfdata(cli):
    with Store.open(cli.store) as st:
        st.put_many("q", [NewMessage(b"x") for _ in range(50)])
    ok = cli.subprocess("health", "--depth", "100:1000")
    assert ok.code == 0 and ok.out.startswith("MQCLI OK - ")
    assert "'q depth'=50;100;1000;0" in ok.out and "'dead letters'=0;;;0" in ok.out
    warn = cli.subprocess("health", "q", "--depth", "10:1000")
    assert warn.code == 1 and warn.out.startswith("MQCLI WARNING - q depth 50")
    crit = cli.subprocess("health", "q", "--depth", "10:20")
    assert crit.code == 2 and crit.out.startswith("MQCLI CRITICAL - q depth 50")
    assert len(crit.out.splitlines()) == 1


def test_health_takes_a_queue_by_any_of_its_format_names(cli):
    # a queue is named by a format name wherever one is named (SPEC section 3); health took
    # plain names only, and said UNKNOWN "no queue" for the rest
    with Store.open(cli.store) as st:
        st.put_many("q", [NewMessage(b"m")] * 3)
        guid, qm = st.queue_info("q").guid, st.info().guid
    for name in ("q", f"PUBLIC={guid}", "DIRECT=OS:.\\q", f"MACHINE={qm};DEADLETTER"):
        result = cli.subprocess("health", name, "--depth", "1:10")
        expected = ("MQCLI OK - 1 queue | 'dead-letter depth'=0;1;10;0" if "DEADLETTER" in name
                    else "MQCLI WARNING - q depth 3 | 'q depth'=3;1;10;0")
        assert result.code == (0 if "DEADLETTER" in name else 1) and result.out.startswith(expected), (name, result)
    missing = cli.subprocess("health", "nope", "PUBLIC=00000000-0000-0000-0000-000000000001")
    assert missing.code == 3 and missing.out.startswith(
        "MQCLI UNKNOWN - no queue 'nope', 'PUBLIC=00000000-0000-0000-0000-000000000001' in the store"), missing


@pytest.mark.parametrize("option, values, expect", [
    ("--age", ("1h:2h", "0.001:2h", "0.001:0.002"), (0, 1, 2)),
    ("--inflight-age", ("1h:2h", "0.001:2h", "0.001:0.002"), (0, 1, 2)),
    ("--dead-letters", ("5:10", "0:10", "0:0.5"), (0, 1, 2)),
    ("--quota-pct", ("50:90", "10:90", "10:20"), (0, 1, 2)),
])
def test_every_threshold_reaches_each_state(cli, option, values, expect):
    cli.ok("queue", "create", "quota", "--quota", "100", "-q")
    with Store.open(cli.store) as st:
        st.put("quota", b"x" * 30)  # 30% of its quota
        st.put("q", b"poison")
        st.get("q", confirm_id=5, wait=0)  # in flight
        st.put("q", b"dead", ttl=0.01)
        time.sleep(0.05)
        st.sweep()  # one dead letter
    time.sleep(0.05)
    for threshold, code in zip(values, expect):
        result = cli.subprocess("health", option, threshold)
        assert result.code == code, (threshold, result)
        assert result.out.startswith("MQCLI " + ["OK", "WARNING", "CRITICAL"][code])


def test_health_json_and_unknown(cli, tmp_path):
    result = cli.subprocess("health", "--depth", ":5", "-o", "json")
    doc = result.json()
    assert result.code == 0 and doc["state"] == "OK"
    assert {c["label"] for c in doc["checks"]} >= {"q depth", "q age", "q inflight age", "dead letters"}
    assert next(c for c in doc["checks"] if c["label"] == "q depth") == \
        {"label": "q depth", "value": 0, "unit": "", "warn": None, "crit": 5.0, "state": "OK"}
    missing = cli.subprocess("health", env={"MQCLI_STORE": str(tmp_path / "nowhere")})
    assert missing.code == 3 and missing.out.startswith("MQCLI UNKNOWN - ")
    assert not (tmp_path / "nowhere").exists()
    assert cli.subprocess("health", "--depth", "9:5").code == 3
    assert cli.subprocess("health", "nosuchqueue").code == 3
    assert math.isfinite(json.loads(cli.subprocess("health", "-o", "json").out)["checks"][1]["value"])


def test_a_textfile_that_is_not_a_regular_file_is_written_in_place_never_replaced(cli, tmp_path):
    # as root, a rename over /dev/zero replaced the device with a regular file (found by the
    # option fuzz): a FIFO, a device or /dev/stdout is written to, not renamed over
    import os
    import threading

    fifo = tmp_path / "metrics.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    assert cli.subprocess("stats", "--prometheus", "--textfile", fifo, timeout=60).code == 0
    reader.join(timeout=60)
    assert got and got[0].startswith("# HELP mqcli_queue_depth")
    assert fifo.is_fifo()
    assert cli.subprocess("stats", "--prometheus", "--textfile", "/dev/null").code == 0
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


@pytest.mark.parametrize("args", [
    ["health", "--bogus"], ["health", "--depth"], ["health", "-o", "yaml"], ["health", "--store", ""],
    ["health", "q", "--age", "10m:1h", "extra", "--depth", "1:2", "--quota-pct"], ["--bogus", "health"],
    ["--store", "", "health"], ["health", "--store"],
])
def test_a_health_usage_error_is_unknown_in_the_plugin_format(cli, args):
    """The Nagios plugin API: a check that cannot run is UNKNOWN (3); mqcli's usage error, exit 2,
    would page someone as CRITICAL."""
    result = cli.subprocess(*args)
    assert result.code == 3, result
    assert result.out.startswith("MQCLI UNKNOWN - ") and len(result.out.splitlines()) == 1, result
    assert result.stderr == "", result


@pytest.mark.parametrize("args", [["health", "--bogus", "-o", "json"], ["-o", "json", "health", "--depth"],
                                  ["health", "-o", "jsonl", "--store", ""]])
def test_a_health_usage_error_with_json_output_is_the_unknown_object(cli, args):
    result = cli.subprocess(*args)
    doc = result.json()
    assert result.code == 3 and doc["state"] == "UNKNOWN" and doc["exit"] == 3 and doc["checks"] == [], result
    assert result.stderr == "", result


def test_other_commands_keep_exit_2_for_usage_errors(cli):
    for args in (["stats", "--bogus"], ["queue", "list", "--bogus"], ["--bogus", "stats"], ["stats", "-o", "yaml"]):
        result = cli.subprocess(*args)
        assert result.code == 2 and result.out == "" and result.stderr.startswith("mqcli: error: "), result


def test_perfdata_numbers_are_plain_decimals_and_the_thresholds_in_force(cli):
    with Store.open(cli.store) as st:
        st.put_many("q", [NewMessage(b"x") for _ in range(3)])
    result = cli.subprocess("health", "q", "--depth", "1000000:5000000", "--dead-letters", "1234567:",
                            "--age", "0.0000001:10000000")
    assert result.code == 1, result  # every message is older than a tenth of a microsecond: WARNING
    perf = re.findall(r"'(?:[^']|'')*'=\S+", result.out.split(" | ", 1)[1])
    assert "'q depth'=3;1000000;5000000;0" in perf and "'dead letters'=0;1234567;;0" in perf
    age = next(p for p in perf if p.startswith("'q age'="))
    assert age.endswith("s;0.0000001;10000000;0"), age
    assert all(re.fullmatch(r"'[^=]+'=[-0-9.]+(s|%)?;[-0-9.]*;[-0-9.]*;0(;100)?", p) for p in perf), perf


@pytest.mark.parametrize("value, text", [
    (3, "3"), (1234567.0, "1234567"), (1e20, "100000000000000000000"), (849169123.125, "849169123.125"),
    (1e-7, "0.0000001"), (12.5, "12.5"), (0.1, "0.1"), (100.0, "100"),
])
def test_perfdata_numbers_have_no_exponent(value, text):
    from mqcli.commands.health import _num

    assert _num(value) == text


@pytest.mark.parametrize("threshold", ["inf:", ":inf", "inf:inf", "nan:", "1e999:", ":-inf", "Infinity:"])
def test_an_infinite_threshold_is_unknown(cli, threshold):
    result = cli.subprocess("health", "--depth", threshold)
    assert result.code == 3 and result.out.startswith("MQCLI UNKNOWN - --depth ") and "finite" in result.out, result


def test_perfdata_labels_are_quoted_without_equals_signs(cli):
    """The plugin guidelines: a label holds any character but `=` and `'`, a quote doubled."""
    from mqcli.commands.health import perf_label

    assert perf_label("DIRECT=OS:qmB\\orders depth") == "'DIRECT_OS:qmB\\orders depth'"
    assert perf_label("it's=") == "'it''s_'"
    with Store.open(cli.store) as st:
        st.put(TO_B, b"to B")
    result = cli.subprocess("health", TO_B, "--depth", "5:10")
    assert result.code == 0, result
    perf = result.out.split(" | ", 1)[1]
    assert "'DIRECT_OS:qmB\\orders depth'=1;5;10;0" in perf
    labels = re.findall(r"'((?:[^']|'')*)'=", perf)
    assert len(labels) == 4 and not any("=" in label for label in labels)
    assert cli.subprocess("health", TO_B, "-o", "json").json()["checks"][0]["label"] == TO_B + " depth"


@pytest.mark.parametrize("args", [["health", "no|such"], ["health", "-o", "a|b"], ["health", "no\nsuch"]])
def test_a_health_summary_has_no_bar_before_its_performance_data_and_is_one_line(cli, args):
    # the plugin format: text | perfdata; a `|` the user typed would start the perfdata
    result = cli.subprocess(*args)
    assert result.code == 3, result
    (line,) = result.out.splitlines()
    assert line.startswith("MQCLI UNKNOWN - ") and "|" not in line, result
