"""CLI: trace decode (docs/design.md#trace-reports): fields of a label or body in text and JSON, from an argument or
stdin, and exit 12 naming the column and ABNF rule of bad input."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from cli_helpers import invoke, mqcli_command

GUID = "6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
LABEL = f"1A2B:0000002A:01 received by {GUID} at 03:15:42 PM Sun,Nov 22 26"
FIELDS = {"event": "received", "qm_id": "1A2B", "message_id": 42, "hops": 1, "computer": GUID,
          "time": "2026-11-22T15:15:42Z", "has_seconds": True, "next_hop": None}
BODY_FIELDS = {"message_id": 42, "queue": "DIRECT=OS:qm2\\orders", "next_hop": None, "hop_count": None}
DOCUMENTED = [json.loads(line) for line in
              (Path(__file__).parent / "vectors" / "trace_documented.jsonl").read_text("utf-8").splitlines()]
BODY = "<MESSAGE ID>0000002A</MESSAGE ID>\r\n<TARGET QUEUE>DIRECT=OS:qm2\\orders</TARGET QUEUE>\r\n"
HOUR_13 = ("mqcli: error: bad trace label: column 70, rule hour: 13 is not an hour of the 12-hour "
           "clock (01-12, followed by AM or PM) [MQ_ERROR_BAD_DATA]")


def test_trace_decode_prints_the_label_fields_as_text(cli):
    r = cli.ok("trace", "decode", LABEL)
    assert r.out == (f"event        received\nqm_id        1A2B\nmessage_id   42\nhops         1\n"
                     f"computer     {GUID}\ntime         2026-11-22T15:15:42Z\nhas_seconds  yes\n"
                     "next_hop     -\n")
    assert r.stderr == ""


def test_trace_decode_prints_json_and_jsonl(cli):
    assert cli.json("trace", "decode", LABEL) == FIELDS
    assert cli.jsonl("trace", "decode", LABEL.upper()) == [FIELDS]
    assert cli.ok("-o", "json", "trace", "decode", LABEL.replace(":42", "")).json() == \
        {**FIELDS, "time": "2026-11-22T15:15:00Z", "has_seconds": False}


def test_trace_decode_reads_stdin_with_dash_or_no_argument(cli):
    for args in (("-",), ()):
        for stdin in (LABEL, LABEL + "\0", LABEL + "\n", LABEL + "\0\n"):
            assert cli.json("trace", "decode", *args, input=stdin.encode()) == FIELDS, (args, stdin)


def test_trace_decode_takes_only_one_line_end_from_stdin(cli):
    r = cli.fails(12, "trace", "decode", "-", input=(LABEL + "\n\n").encode())
    assert cli.error_line(r) == ("mqcli: error: bad trace label: column 95, rule label: expected %x0000 "
                                 "(NUL) or end of label after the year, found '\\n' [MQ_ERROR_BAD_DATA]")


def test_trace_decode_takes_a_windows_line_end_from_stdin(cli):
    # a label copied from a Windows text file: one CR LF is the line end, as one LF is
    for stdin in (LABEL + "\r\n", LABEL + "\0\r\n"):
        assert cli.json("trace", "decode", "-", input=stdin.encode()) == FIELDS, stdin
    r = cli.fails(12, "trace", "decode", "-", input=(LABEL + "\r\r\n").encode())
    assert cli.error_line(r) == ("mqcli: error: bad trace label: column 95, rule label: expected %x0000 "
                                 "(NUL) or end of label after the year, found '\\r' [MQ_ERROR_BAD_DATA]")
    # a body is read exactly as given: its CR LF is its own
    assert cli.json("trace", "decode", "--body", "-", input=BODY.encode()) == BODY_FIELDS


def test_trace_decode_body_from_argument_and_stdin(cli):
    doc = BODY_FIELDS
    assert cli.json("trace", "decode", "--body", BODY) == doc
    assert cli.json("trace", "decode", "--body", "-", input=BODY.encode()) == doc
    r = cli.ok("trace", "decode", "--body", BODY)
    assert r.out == ("message_id  42\nqueue       DIRECT=OS:qm2\\orders\nnext_hop    -\n"
                     "hop_count   -\n")


def test_bad_label_exits_12_naming_column_and_rule(cli):
    r = cli.fails(12, "trace", "decode", LABEL.replace("03:15:42", "13:15:42"))
    assert r.stderr == HOUR_13 + "\n" and r.stdout == b""
    r = cli.fails(12, "trace", "decode", LABEL.replace("Nov", "Foo"))
    assert cli.error_line(r) == ("mqcli: error: bad trace label: column 87, rule month: expected a month "
                                 "(Jan, Feb, Mar, Apr, May, Jun, Jul, Aug, Sep, Oct, Nov or Dec), found 'o' "
                                 "[MQ_ERROR_BAD_DATA]")
    r = cli.fails(12, "trace", "decode", LABEL.replace("Sun", "Mon"))
    assert cli.error_line(r) == ("mqcli: error: bad trace label: column 82, rule day: Nov 22 2026 is a Sun, "
                                 "not a Mon [MQ_ERROR_BAD_DATA]")


def test_bad_label_with_json_output_prints_only_the_error_object(cli):
    r = cli.fails(12, "trace", "decode", LABEL.replace("03:15:42", "13:15:42"), "-o", "json")
    assert r.stdout == b""
    assert r.error_json() == {"error": {"status": "MQ_ERROR_BAD_DATA", "code": None, "exit": 12,
                                        "message": HOUR_13[len("mqcli: error: "):-len(" [MQ_ERROR_BAD_DATA]")]}}


def test_bad_body_exits_12_naming_column_and_rule(cli):
    r = cli.fails(12, "trace", "decode", "--body", "-", input=BODY.replace("\r\n", "\n").encode())
    assert cli.error_line(r) == ("mqcli: error: bad trace body: column 34, rule Report: expected CR LF, "
                                 "found '\\n' [MQ_ERROR_BAD_DATA]")
    r = cli.fails(12, "trace", "decode", "--body", BODY.replace("DIRECT=OS:qm2\\orders", "orders"))
    assert "column 50, rule queue-format: expected a format name" in cli.error_line(r)
    r = cli.fails(12, "trace", "decode", LABEL, "--body")  # a label is not a body
    assert "column 1, rule Report:" in cli.error_line(r)


def test_stdin_that_is_not_utf8_exits_12_at_the_bad_byte(cli):
    r = cli.fails(12, "trace", "decode", "-", input=LABEL.encode().replace(b"Sun", b"S\xffn"))
    assert cli.error_line(r) == ("mqcli: error: bad trace label: column 83, rule day: expected a day "
                                 "(Mon, Tue, Wed, Thu, Fri, Sat or Sun), found '\\udcff' [MQ_ERROR_BAD_DATA]")


def test_trace_decode_neither_opens_nor_creates_a_store(tmp_path):
    store = tmp_path / "never"
    r = invoke(["trace", "decode", LABEL, "-o", "json"], env={"MQCLI_STORE": str(store),
                                                              "XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert r.code == 0 and r.json() == FIELDS
    assert not store.exists() and not (tmp_path / "xdg").exists()


def test_a_report_body_piped_from_get_decodes_between_processes(cli):
    assert cli.subprocess("put", "q", "-", input=BODY.encode()).code == 0
    get = subprocess.Popen([*mqcli_command(), "get", "q", "-o", "body", "--delimiter", ""],
                           env={**os.environ, **cli.env}, stdout=subprocess.PIPE)
    decode = subprocess.run([*mqcli_command(), "trace", "decode", "--body", "-", "-o", "json"],
                            stdin=get.stdout, capture_output=True, check=False, env={**os.environ, **cli.env})
    get.stdout.close()
    assert get.wait(30) == 0 and decode.returncode == 0, decode.stderr
    assert json.loads(decode.stdout) == BODY_FIELDS


def test_a_label_with_its_nul_decodes_from_a_real_pipe(cli):
    r = cli.subprocess("trace", "decode", "-o", "json", input=(LABEL + "\0").encode())
    assert r.code == 0 and r.json() == FIELDS
    r = cli.subprocess("trace", "decode", "-", input=(LABEL.replace("Sun", "Sat") + "\0").encode())
    assert r.code == 12 and "column 82, rule day:" in r.stderr


@pytest.mark.parametrize("strict", [False, True])
def test_trace_decode_agrees_with_every_documented_vector(cli, strict):
    """tests/vectors/trace_documented.jsonl through the command: the fields of an accepted form,
    exit 12 naming the column and rule of any other; --strict refuses every form beyond [MS-MQQB]."""
    wrong = []
    for v in DOCUMENTED:
        args = ["trace", "decode", "-", "-o", "json", *(["--body"] if v["kind"] == "body" else []),
                *(["--strict"] if strict else [])]
        accepted = v["strict"] == "valid" if strict else v["valid"]
        r = cli(*args, input=v["text"].encode("utf-8"))
        if accepted:
            ok = r.code == 0 and r.json() == v["fields"]
        else:
            column, rule = v["strict"] if strict else (v["column"], v["rule"])
            ok = r.code == 12 and f"column {column}, rule {rule}:" in r.stderr and r.stdout == b""
        if not ok:
            wrong.append((v["note"], r.code, r.stderr))
    assert wrong == []


def test_trace_decode_reads_a_departure_and_a_conflict(cli):
    sent = "1A2B:0000002A:01 sent from SRV01 to 10.0.0.5 at 03:15 PM Sun,Nov 22 26"
    assert cli.json("trace", "decode", sent) == {**FIELDS, "event": "sent", "computer": "SRV01",
                                                 "time": "2026-11-22T15:15:00Z", "has_seconds": False,
                                                 "next_hop": "10.0.0.5"}
    assert cli.json("trace", "decode", "Report Message Conflict")["event"] == "conflict"
    r = cli.fails(12, "trace", "decode", "--strict", sent)
    assert cli.error_line(r) == ("mqcli: error: bad trace label: column 18, rule label: expected SP "
                                 "\"received by\" SP, found 's' [MQ_ERROR_BAD_DATA]")
