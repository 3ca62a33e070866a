"""Trace report generation at the origin (docs/design.md#trace-reports), and trace show / route."""

import io
import json

import pytest

from mqcli.exits import report
from store import Message, NewMessage, Store, trace
from store.errors import QueueQuotaExceeded
from store.records import guid_text


@pytest.fixture
def traced(st):
    st.create_queue("reports")
    return st


def all_depth(st) -> int:
    return sum(s.depth for s in st.stats())


def decoded(m):
    return trace.decode_label(m.label), trace.decode_body(m.body.decode("utf-8"))


def test_a_traced_put_leaves_exactly_one_report_describing_it(traced, clock):
    m = traced.put("q", b"hello", trace=True, report_queue="reports")
    reports = traced.browse("reports")
    assert len(reports) == 1
    r = reports[0]
    label, body = decoded(r)
    info = traced.info()
    assert (label.qm_id, label.message_id, label.hops) == (guid_text(m.origin)[:4].upper(), m.msg_n, 0)
    assert label.computer == info.guid
    assert label.time.timestamp() == int(clock.now)
    assert body.message_id == m.msg_n
    assert body.queue == "DIRECT=OS:qm1\\q"
    assert r.label.endswith("\0")
    assert (r.msg_class, r.delivery, r.dead_letter) == ("report", "express", False)
    assert r.correl_id == m.msg_id
    assert r.props == {"mqcli.event": "enqueued", "mqcli.delivered": "true", "mqcli.report_qm": "qm1"}
    assert m.props == {"mqcli.report_qm": "qm1"}  # where reports made at later hops go back to
    # [MS-MQQB] 3.1.5.8.9: the destination is the report queue's public format name
    assert m.report_queue == f"PUBLIC={traced.queue_info('reports').guid}"
    assert traced.get("q", wait=0).report_queue == m.report_queue


@pytest.mark.parametrize("destination, in_body", [
    ("DIRECT=HTTP://web/msmq/q", "DIRECT=HTTP://web/msmq\\q"),
    ("DIRECT=HTTPS://web:8443/msmq/private$/q", "DIRECT=HTTPS://web:8443/msmq\\PRIVATE$\\q"),
    ("DIRECT=TCP:10.0.0.7\\q", "DIRECT=TCP:10.0.0.7\\q"),
])
def test_a_report_body_names_the_destination_in_ms_mqmq_spelling(traced, destination, in_body):
    """[MS-MQQB] 3.1.5.8.9: the body's queue is a queue-format of MS-MQMQ 2.1, whose ABNF puts "\\" after
    /msmq in HTTP names; the store prints MSMQ 3.0's URL form, which MSMQ also accepts."""
    traced.put(destination, b"x", trace=True, report_queue="reports")
    (report,) = traced.browse("reports")
    assert decoded(report)[1].queue == in_body


def test_untraced_messages_produce_no_report(traced):
    traced.put("q", b"a", report_queue="reports")
    traced.put_many("q", [NewMessage(b"b"), NewMessage(b"c")])
    assert traced.browse("reports") == []


def test_each_traced_message_of_a_batch_gets_its_own_report(traced):
    put = traced.put_many("q", [NewMessage(b"a", trace=True, report_queue="reports"), NewMessage(b"b"),
                                NewMessage(b"c", trace=True, report_queue="reports")])
    assert [r.correl_id for r in traced.browse("reports")] == [put[0].msg_id, put[2].msg_id]


@pytest.mark.parametrize("name", ["PUBLIC={guid}", "DIRECT=OS:qm1\\reports", "REPORTS"])
def test_the_report_queue_may_be_named_by_a_format_name(traced, name):
    guid = traced.queue_info("reports").guid
    traced.put("q", b"x", trace=True, report_queue=name.format(guid=guid))
    assert len(traced.browse("reports")) == 1


def test_a_missing_report_queue_drops_the_report_and_the_put_succeeds(traced):
    before = all_depth(traced)
    m = traced.put("q", b"x", trace=True, report_queue="nowhere")
    assert traced.browse("q")[0].msg_id == m.msg_id
    assert all_depth(traced) == before + 1  # the message, and no report anywhere
    assert m.report_queue == "nowhere"


def test_a_report_queue_that_refuses_the_report_drops_it(traced):
    traced.set_queue("reports", quota=10)
    traced.put("q", b"x", trace=True, report_queue="reports")
    assert traced.browse("reports") == [] and len(traced.browse("q")) == 1


def test_the_report_shares_the_commit_of_the_enqueue(traced):
    traced.set_queue("q", quota=3)
    with pytest.raises(QueueQuotaExceeded):
        traced.put("q", b"toolong", trace=True, report_queue="reports")
    assert traced.browse("reports") == []


def test_a_report_of_a_put_into_a_transaction_is_written_with_the_put(traced):
    traced.create_queue("tq", transactional=True)
    tx = traced.tx_begin()
    traced.put("tq", b"x", tx=tx, trace=True, report_queue="reports")
    assert len(traced.browse("reports")) == 1  # reports are express and outside the transaction
    traced.tx_abort(tx)
    assert len(traced.browse("reports")) == 1


# ---- the commands ------------------------------------------------------------------------------

def traced_cli(cli):
    cli.ok("queue", "create", "reports", "-q")
    return [cli.put("q", f"m{i}", "--trace", "--report-queue", "reports") for i in range(2)]


def test_trace_show_lists_the_reports_decoded_without_consuming_them(cli):
    put = traced_cli(cli)
    rows = cli.json("trace", "show", "reports")
    assert [r["msg_id"] for r in rows] == [p["msg_id"] for p in put]
    assert {(r["hops"], r["event"], r["computer"], r["target"]) for r in rows} == \
        {(0, "enqueued", cli.guid(), f"DIRECT=OS:{cli.json('info')['name']}\\q")}
    assert len(cli.json("browse", "reports")) == 2
    assert "enqueued" in cli.ok("trace", "show", "reports").out


def test_trace_show_lists_an_undecodable_report_with_its_error(cli):
    cli.ok("queue", "create", "reports", "-q")
    with Store.open(cli.store) as st:
        st.import_messages("reports", [Message(b"x", report=True, label="not a label")])
    (row,) = cli.json("trace", "show", "reports")
    assert "rule qm-id" in row["error"]
    assert "undecodable" in cli.ok("trace", "show", "reports").out


def test_trace_route_prints_one_messages_reports_in_hop_order(cli):
    put = traced_cli(cli)
    (step,) = cli.json("trace", "route", put[1]["msg_id"], "--report-queue", "reports")
    assert (step["msg_id"], step["hops"], step["since_previous_us"]) == (put[1]["msg_id"], 0, None)


def test_trace_route_of_a_message_without_reports_exits_4(cli):
    traced_cli(cli)
    r = cli.fails(4, "trace", "route", "6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f\\9", "-r", "reports")
    assert "no trace report" in r.stderr


def test_trace_route_notes_a_report_of_the_message_that_does_not_decode(cli):
    put = traced_cli(cli)
    msg_id = put[1]["msg_id"]
    with Store.open(cli.store) as st:
        st.import_messages("reports", [Message(b"x", report=True, label="not a label", correl_id=msg_id)])
        bad = next(m.msg_id for m in st.browse("reports") if m.label == "not a label")
    r = cli.ok("-o", "json", "trace", "route", msg_id, "--report-queue", "reports")
    assert len(r.json()) == 1
    assert (f"1 report(s) of message {msg_id!r} in 'reports' do not decode (report {bad}: bad trace label: "
            "column 1, rule qm-id:") in r.stderr
    # with no other report of the message: exit 12 naming the report, not "no trace report" (exit 4)
    with Store.open(cli.store) as st:
        st.import_messages("reports", [Message(b"x", report=True, label="not a label", correl_id=put[0]["msg_id"])],
                           new_ids=True)
        for m in st.browse("reports", correl_id=put[0]["msg_id"]):
            if m.label != "not a label":
                st.delete("reports", m.msg_id)
    r = cli.fails(12, "trace", "route", put[0]["msg_id"], "--report-queue", "reports")
    assert "do not decode" in r.stderr and "and no other report of it does" in r.stderr


def test_an_unexpected_error_is_one_line_with_exit_1():
    stream = io.StringIO()
    assert report(ValueError("boom"), json_errors=False, stream=stream) == 1
    [line] = stream.getvalue().splitlines()
    assert line.startswith("mqcli: error: internal error: ValueError: boom") and "INTERNAL" in line
    stream = io.StringIO()
    assert report(ValueError("boom"), json_errors=True, stream=stream) == 1
    [obj] = stream.getvalue().splitlines()
    assert json.loads(obj)["error"]["status"] == "INTERNAL" and json.loads(obj)["error"]["exit"] == 1


def test_the_report_events_are_the_label_events_of_trace():
    """store/reports.py names the events without loading trace.py (start-up cost): the same words."""
    from store import reports

    assert (reports.RECEIVED, reports.SENT, reports.CONFLICT) == (trace.RECEIVED, trace.SENT, trace.CONFLICT)
