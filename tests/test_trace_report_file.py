"""Reports files (store/reportfile.py) as `trace route --reports` reads them, without Spark: the
time of a report is its event's (the label's), not its arrival at the report queue; arrival
times outside the times a store holds, columns named twice and undecodable reports of the
traced message are errors naming the row. tests/test_analytics_report_file.py holds
`analyze routes --reports` (Spark) to the same times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import invoke
from store import reportfile
from store.errors import BadData

BODY = "<MESSAGE ID>00000001</MESSAGE ID>\r\n<TARGET QUEUE>DIRECT=OS:TGT01\\orders</TARGET QUEUE>\r\n"


def sent_body(hop: int, next_hop: str) -> str:
    return BODY + f"<NEXT HOP>{next_hop}</NEXT HOP>\r\n<HOP COUNT>{hop}</HOP COUNT>\r\n"


# SRC01 > RS01 > TGT01 with causal labels (15:15:40, 41, 42, 43); RS01's `sent` report reached
# the report queue late (held in its outgoing queue), TGT01's `received` report early
LATE_REPORT = [
    ("1A2B:00000001:00 sent from SRC01 to 10.0.0.2:1801 at 03:15:40 PM Sun,Nov 22 26",
     sent_body(0, "10.0.0.2:1801"), "2026-11-22T15:15:40.100Z"),
    ("1A2B:00000001:01 received by RS01 at 03:15:41 PM Sun,Nov 22 26", BODY, "2026-11-22T15:15:41.200Z"),
    ("1A2B:00000001:01 sent from RS01 to 10.0.0.3:1801 at 03:15:42 PM Sun,Nov 22 26",
     sent_body(1, "10.0.0.3:1801"), "2026-11-22T15:16:30.000Z"),
    ("1A2B:00000001:02 received by TGT01 at 03:15:43 PM Sun,Nov 22 26", BODY, "2026-11-22T15:15:43.500Z"),
]


def jsonl(tmp_path: Path, rows: list[tuple[str, str, str]], name: str = "r.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps({"label": label, "body": body, "arrived": arrived}) + "\n"
                            for label, body, arrived in rows), "utf-8")
    return path


def route(path: Path, msg_id: str = "1A2B:00000001", *output: str):
    return invoke(["trace", "route", msg_id, "--reports", path, *output])


@pytest.mark.parametrize("arrived", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00",
                                     "9999-12-31T23:59:59.9999999-00:01"])
def test_an_arrival_outside_the_times_a_store_holds_exits_12_naming_row_and_column(arrived, tmp_path):
    path = jsonl(tmp_path, [LATE_REPORT[1], (*LATE_REPORT[0][:2], arrived)])
    for args in (["trace", "route", "1A2B:00000001", "--reports", path], ["analyze", "routes", "--reports", path]):
        result = invoke(args)  # analyze reads the file before it starts Spark
        assert result.code == 12, (args, result)
        assert result.stderr == (f"mqcli: error: {path}: row 2, column 'arrived': {arrived!r} is outside the "
                                 "times a store holds (0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z, UTC) "
                                 "[MQ_ERROR_BAD_DATA]\n"), (args, result)


def test_the_first_and_last_times_a_store_holds_are_read(tmp_path):
    from store.records import parse_iso_time

    path = jsonl(tmp_path, [(*LATE_REPORT[0][:2], "0001-01-01T01:00:00+01:00"),
                            (*LATE_REPORT[1][:2], "9999-12-31T23:59:59.9999999Z")])
    first, last = reportfile.read(path)
    assert (first.arrived, last.arrived) == (reportfile.MIN_US, reportfile.MAX_US)
    assert reportfile.MIN_US == parse_iso_time("0001-01-01T00:00:00Z")
    assert reportfile.MAX_US == parse_iso_time("9999-12-31T23:59:59.999999Z")
    assert reportfile.parse_time("1969-12-31T23:59:59.5Z", "t") == -500_000


def test_trace_route_times_are_the_labels_not_the_arrivals(tmp_path):
    result = route(jsonl(tmp_path, LATE_REPORT), "1A2B:00000001", "-o", "json")
    assert result.code == 0, result
    steps = result.json()
    assert [(s["hops"], s["event"], s["computer"]) for s in steps] == [
        (0, "sent", "SRC01"), (1, "received", "RS01"), (1, "sent", "RS01"), (2, "received", "TGT01")]
    assert [s["time"] for s in steps] == [f"2026-11-22T15:15:4{n}.000000Z" for n in range(4)]
    assert [s["since_previous_us"] for s in steps] == [None, 1_000_000, 1_000_000, 1_000_000]
    assert [s["row"] for s in steps] == [1, 2, 3, 4]


def test_a_label_without_seconds_is_not_put_before_the_step_it_follows():
    # TGT01's label leaves the seconds out: 15:15 holds the previous step's 15:15:43
    times = reportfile.event_times([
        ("1A2B:00000001:01 sent from RS01 to 10.0.0.3 at 03:15:43 PM Sun,Nov 22 26", 2),
        ("1A2B:00000001:02 received by TGT01 at 03:15 PM Sun,Nov 22 26", 1),
        ("Report Message Conflict", 7),  # no time of its own: its arrival
        ("not a label", 9),
    ])
    at_43 = reportfile.parse_time("2026-11-22T15:15:43Z", "t")
    assert times == [at_43, at_43, 7, 9]


def test_an_arrival_and_a_departure_in_one_second_are_in_that_order_whatever_the_file_order():
    sent, received = ("1A2B:00000001:01 sent from RS01 to 10.0.0.3 at 03:15:43 PM Sun,Nov 22 26",
                      "1A2B:00000001:01 received by RS01 at 03:15 PM Sun,Nov 22 26")
    at_43 = reportfile.parse_time("2026-11-22T15:15:43Z", "t")
    at_00 = reportfile.parse_time("2026-11-22T15:15:00Z", "t")
    # received (whole minute) comes first in its hop: 15:15:00; sent then 15:15:43
    assert reportfile.event_times([(sent, 0), (received, 0)]) == [at_43, at_00]


def test_clocks_that_disagree_by_more_than_the_labels_precision_are_shown_as_they_are():
    # TGT01's clock is 5 s behind RS01's: the labels say so, whole seconds, and nothing hides it
    times = reportfile.event_times([
        ("1A2B:00000001:01 sent from RS01 to 10.0.0.3 at 03:15:43 PM Sun,Nov 22 26", 0),
        ("1A2B:00000001:02 received by TGT01 at 03:15:38 PM Sun,Nov 22 26", 0)])
    assert times[1] - times[0] == -5_000_000


def test_a_report_of_the_message_that_does_not_decode_exits_12_naming_its_row(tmp_path):
    bad = (LATE_REPORT[0][0], LATE_REPORT[0][1].replace("\r\n", "\n"), LATE_REPORT[0][2])  # LF, not CR LF
    other = ("1A2B:00000002:00 sent from SRC01 to 10.0.0.2 at 03:15:40 PM Sun,Nov 22 26", BODY, "2026-11-22T15:15:40Z")
    path = jsonl(tmp_path, [other, bad])
    result = route(path)
    assert result.code == 12, result
    assert result.stderr == (
        f"mqcli: error: 1 report(s) of message '1A2B:00000001' in '{path}' do not decode (row 2: bad trace "
        "body: column 34, rule Report: expected CR LF, found '\\n'), and no other report of it does "
        "[MQ_ERROR_BAD_DATA]\n")


def test_reports_of_the_message_that_do_not_decode_are_noted_beside_its_route(tmp_path):
    bad_label = ("1a2b:00000001:02 received by TGT01 at 03:15:43 PM Mon,Nov 22 26", BODY, "2026-11-22T15:15:44Z")
    path = jsonl(tmp_path, [*LATE_REPORT, bad_label])
    result = route(path, "1A2B:00000001", "-o", "json")
    assert result.code == 0, result
    assert len(result.json()) == 4
    assert (f"1 report(s) of message '1A2B:00000001' in '{path}' do not decode (row 5: bad trace label: "
            "column 51, rule day: Nov 22 2026 is a Sun, not a Mon); they are not steps of the route") in result.stderr
    # a row that names another message is not this one's to note
    assert "do not decode" not in route(path, "1A2B:00000002").stderr


def test_a_column_named_twice_exits_12(tmp_path):
    label, body, arrived = LATE_REPORT[1]
    csv_file = tmp_path / "r.csv"
    csv_file.write_text(f'label,body,arrived,Label\n"{label}","{body}",{arrived},zzz\n', "utf-8")
    jsonl_file = tmp_path / "r.jsonl"
    row = json.dumps({"label": label, "body": body, "arrived": arrived})
    jsonl_file.write_text(row[:-1] + ', "LABEL": "zzz"}\n', "utf-8")
    for path, error in ((csv_file, "row 0 (the header): column 'label' is named 2 times"),
                        (jsonl_file, "row 1, column 'label': named twice")):
        with pytest.raises(BadData, match="named"):
            reportfile.read(path)
        result = route(path)
        assert result.code == 12 and result.stderr == f"mqcli: error: {path}: {error} [MQ_ERROR_BAD_DATA]\n", result


def test_a_column_no_one_reads_may_be_named_twice(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text(f'Id,label,body,arrived,id\n1,"{LATE_REPORT[1][0]}","{BODY}",2026-11-22T15:15:41Z,2\n', "utf-8")
    assert [r.label for r in reportfile.read(path)] == [LATE_REPORT[1][0]]


def test_a_route_step_back_in_time_is_said_to_be_the_clocks(tmp_path):
    # RS01's clock 3 s behind SRC01's: the link took "-2 s". The step keeps its sign (the
    # table says what the reports say), and a note says what a negative step means
    skewed = [LATE_REPORT[0], ("1A2B:00000001:01 received by RS01 at 03:15:38 PM Sun,Nov 22 26", BODY,
                               "2026-11-22T15:15:41.200Z"), *LATE_REPORT[2:]]
    result = route(jsonl(tmp_path, skewed), "1A2B:00000001", "-o", "json")
    assert result.code == 0, result
    assert [s["since_previous_us"] for s in result.json()][1] == -2_000_000
    assert ("1 step(s) of the route go back in time, by up to 2000.000 ms: the queue managers' clocks differ at "
            "least that much (each stamps its reports by its own)") in result.stderr, result
    assert "go back in time" not in route(jsonl(tmp_path, LATE_REPORT, "ok.jsonl")).stderr
