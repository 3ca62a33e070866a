"""CLI: exit codes (README.md#exit-codes), the one-line error text, and the JSON error object."""

import json
import os
import time

import pytest

from cli_helpers import Cli
from store import Store

# ---- exact error text for bad input -------------------------------------------------------


def test_bad_duration_is_a_usage_error_with_the_accepted_forms(cli):
    r = cli("get", "q", "--wait", "5x")
    assert r.code == 2
    assert r.stderr == "mqcli: error: invalid wait '5x': use 250ms, 30s, 5m, 2h or forever [USAGE]\n"
    assert r.stdout == b""


def test_lease_cannot_be_forever(cli):
    r = cli.fails(2, "get", "q", "--confirm-id", "1", "--lease", "forever")
    assert cli.error_line(r) == "mqcli: error: lease cannot be forever [USAGE]"


def test_a_lease_without_a_confirm_id_is_a_usage_error_and_changes_nothing(cli):
    cli.put("q", "x")
    for args, said in (
        (("get", "q", "--lease", "5s"), "--lease goes with --confirm-id (how long the get may stay unconfirmed)"),
        (("put", "q", "y", "--lease", "5s"), "--lease goes with --confirm-id (how long the put may stay unconfirmed)"),
        (("put", "q", "--jsonl", "-", "--confirm-id", "3"),
         "--jsonl puts the records as they are; --confirm-id and --lease do not go with it"),
    ):
        r = cli.fails(2, *args)
        assert cli.error_line(r) == f"mqcli: error: {said} [USAGE]"
    assert [m["body"] for m in cli.json("browse", "q")] == ["x"]


def test_priority_out_of_range_is_a_usage_error_naming_the_range(cli):
    r = cli("put", "q", "x", "--priority", "8")
    assert r.code == 2
    assert r.stderr == ("mqcli: error: Invalid value for '--priority' / '-p': 8 is not in the range "
                        "0<=x<=7. (see `mqcli put --help`) [USAGE]\n")
    assert cli.json("queue", "show", "q")["depth"] == 0
    assert "0<=x<=7" in cli.fails(2, "get", "q", "--priority", "-1").stderr


def test_unknown_queue_exits_6_and_says_how_to_create_it(cli):
    for args in (("get", "nope"), ("put", "nope", "x"), ("browse", "nope"), ("queue", "show", "nope")):
        r = cli(*args)
        assert r.code == 6, r
        assert r.stderr == ("mqcli: error: queue 'nope' does not exist (create it with "
                            "`mqcli queue create nope`) [MQ_ERROR_QUEUE_NOT_AVAILABLE]\n")
        assert r.stdout == b""


def test_wrong_confirm_id_exits_4(cli):
    cli.put("q", "x", "--confirm-id", "5")
    r = cli("confirm", "q", "--confirm-id", "6")
    assert r.code == 4
    assert r.stderr == ("mqcli: error: no message of queue 'q' is pending under confirm id 6 "
                        "[MQ_ERROR_MESSAGE_NOT_FOUND]\n")


def test_malformed_jsonl_line_exits_12_naming_the_line(cli):
    r = cli("put", "q", "--jsonl", "-", input=b"\n\n{oops\n")
    assert r.code == 12
    assert r.stderr.startswith("mqcli: error: line 3: not JSON: ")
    assert r.stderr.endswith(" [MQ_ERROR_BAD_DATA]\n") and r.stderr.count("\n") == 1


def test_unknown_option_command_and_output_mode_are_usage_errors(cli):
    assert cli.error_line(cli.fails(2, "get", "q", "--bogus")) == \
        "mqcli: error: No such option '--bogus'. (see `mqcli get --help`) [USAGE]"
    assert cli.error_line(cli.fails(2, "frobnicate")) == \
        "mqcli: error: No such command 'frobnicate'. (see `mqcli --help`) [USAGE]"
    assert cli.error_line(cli.fails(2, "get")) == \
        "mqcli: error: Missing argument 'QUEUE'. (see `mqcli get --help`) [USAGE]"
    assert "'xml' is not one of text, json, jsonl, body" in cli.fails(2, "-o", "xml", "info").stderr
    assert "'xml' is not one of" in cli.fails(2, "info", "-o", "xml").stderr


@pytest.mark.parametrize("args", [(), ("queue",), ("qmgr",)])
def test_no_command_shows_help_not_an_error(cli, args):
    r = cli(*args)
    assert r.code in (0, 2)
    assert "Commands:" in r.out + r.stderr
    assert "mqcli: error: Usage:" not in r.stderr


# ---- every exit code of the README table the store can produce ----------------------------


def _held(cli):
    m = cli.put("q", "x")
    cli.ok("browse", "q", "--lock", "-q")
    return ("delete", "q", "--msg-id", m["msg_id"]), None


def _queue_quota(cli):
    cli.ok("queue", "set", "q", "--quota", "4", "-q")
    return ("put", "q", "12345"), None


def _store_quota(cli):
    cli.ok("qmgr", "set", "--quota", "4", "-q")
    return ("put", "q", "12345"), None


def _throttled(cli):
    cli.ok("qmgr", "set", "--throttle", "-q")
    return ("put", "q", "x"), None


def _expired(cli):
    record = cli.ok("put", "q", "x", "-o", "jsonl").jsonl()[0]
    cli.ok("get", "q", "-q")
    record["expires"] = "2001-01-01T00:00:00.000000Z"
    return ("put", "q", "--jsonl", "-"), json.dumps(record).encode() + b"\n"


def _missing_store(cli):
    return ("--store", cli.store.parent / "missing", "check"), None


def _unsafe_store(cli):
    os.chmod(cli.store, 0o777)
    return ("info",), None


# (name, exit code, status, MQ code (None: not checked), setup -> (args, stdin))
CASES = [
    ("ok", 0, None, None, lambda cli: (("queue", "show", "q"), None)),
    ("usage", 2, "USAGE", None, lambda cli: (("get", "q", "--wait", "5x"), None)),
    ("timeout", 3, "MQ_ERROR_IO_TIMEOUT", "0xC00E001B", lambda cli: (("get", "q"), None)),
    ("not-found", 4, "MQ_ERROR_MESSAGE_NOT_FOUND", "0xC00E0088",
     lambda cli: (("confirm", "q", "--confirm-id", "9"), None)),
    ("held", 5, "MQ_ERROR_MESSAGE_ALREADY_RECEIVED", "0xC00E001D", _held),
    ("no-queue", 6, "MQ_ERROR_QUEUE_NOT_AVAILABLE", "0xC00E004B", lambda cli: (("get", "nope"), None)),
    ("queue-quota", 7, "MQ_ERROR_QUEUE_QUOTA_EXCEEDED", None, _queue_quota),
    ("store-quota", 8, "MQ_ERROR_QUOTA_EXCEEDED", None, _store_quota),
    ("throttled", 8, "MQ_ERROR_QUOTA_EXCEEDED", None, _throttled),
    ("expired", 9, "MQ_ERROR_MESSAGE_TIMED_OUT", None, _expired),
    ("missing-store", 11, "MQ_ERROR_STORE_UNAVAILABLE", None, _missing_store),
    ("unsafe-store", 11, "MQ_ERROR_ACCESS_DENIED", None, _unsafe_store),
    ("bad-data", 12, "MQ_ERROR_BAD_DATA", None, lambda cli: (("import", "-"), b'{"msg_id": 1}\n')),
]


@pytest.mark.parametrize("name, code, status, mq_code, setup", CASES, ids=[c[0] for c in CASES])
def test_exit_code(cli, name, code, status, mq_code, setup):
    args, stdin = setup(cli)
    r = cli(*args, input=stdin)
    assert r.code == code, r
    if code == 0:
        assert "error" not in r.stderr
        return
    assert r.err_lines == [cli.error_line(r)]  # exactly one line, nothing else
    assert r.err_lines[0].endswith(f" [{status}]")
    assert r.stdout == b""


@pytest.mark.parametrize("mode", ["json", "jsonl"])
@pytest.mark.parametrize("name, code, status, mq_code, setup", CASES[1:], ids=[c[0] for c in CASES[1:]])
def test_error_is_only_a_json_object_on_stderr(cli, mode, name, code, status, mq_code, setup):
    args, stdin = setup(cli)
    text = cli(*args, input=stdin)
    r = cli(*args, "-o", mode, input=stdin)
    assert r.code == code, r
    assert len(r.err_lines) == 1  # `jq . err` reads it: no text line beside the object
    error = r.error_json()["error"]
    assert set(error) == {"status", "code", "exit", "message"}
    assert (error["status"], error["exit"]) == (status, code)
    if mq_code is not None or status == "USAGE":
        assert error["code"] == mq_code
    assert cli.error_line(text) == f"mqcli: error: {error['message']} [{status}]"
    assert r.stdout == b""


def test_json_error_with_the_output_option_before_the_command(cli):
    for args in (("-o", "json", "get", "nope"), ("--output=json", "get", "nope"),
                 ("-ojsonl", "get", "nope"), ("get", "nope", "--output", "json")):
        r = cli.fails(6, *args)
        assert r.error_json() == {"error": {
            "status": "MQ_ERROR_QUEUE_NOT_AVAILABLE", "code": "0xC00E004B", "exit": 6,
            "message": "queue 'nope' does not exist (create it with `mqcli queue create nope`)"}}, args


def test_usage_error_is_a_json_object_with_a_null_code(cli):
    r = cli.fails(2, "put", "q", "x", "--priority", "8", "-o", "json")
    error = r.error_json()["error"]
    assert error["status"] == "USAGE" and error["code"] is None and "0<=x<=7" in error["message"]


def test_text_mode_prints_no_json_error(cli):
    r = cli.fails(6, "get", "nope", "-o", "body")
    assert len(r.err_lines) == 1


def test_an_expired_message_is_not_got(cli):
    with Store.open(cli.store, clock=lambda: time.time() - 3600) as st:
        st.put("q", b"old", ttl=1)
    cli.fails(3, "get", "q")
    assert [m["body"] for m in cli.json("browse", "dead-letter")] == ["old"]


def test_a_message_put_with_no_dead_letter_expires_without_dead_lettering(cli):
    with Store.open(cli.store, clock=lambda: time.time() - 3600) as st:
        st.put("q", b"old", ttl=1, dead_letter=False)
    assert cli.json("sweep")["expired"] == 1
    assert cli.json("browse", "dead-letter") == []


def test_only_init_creates_a_store(tmp_path):
    cli = Cli(tmp_path / "auto", tmp_path / "xdg")
    for args in (("check",), ("queue", "list"), ("put", "q", "x")):
        cli.fails(11, *args)
        assert not (tmp_path / "auto").exists()
    cli.ok("init", "-q")  # docs/design.md#store: only init makes one
    assert (tmp_path / "auto").is_dir()
    cli.ok("queue", "list", "-q")


@pytest.mark.parametrize("args", [("get", "q", "--all"), ("get", "q", "--count", "3"), ("get", "q")])
def test_a_failed_get_writes_no_data_but_an_empty_json_array(cli, args):
    for mode in ("json", "jsonl", "body", "text"):
        r = cli.fails(3, *args, "-o", mode)
        # a multi-message get prints an array with -o json, as browse does: [] when empty
        empty = b"[]\n" if mode == "json" and len(args) > 2 else b""
        assert r.stdout == empty, (mode, r)


# (command line, whether its error is a JSON object): the -o the command runs with, as its parser
# reads it (a cluster, the last -o given, the command's own over the root's), not a word that only
# looks like one (a body after --, an option's value)
ERROR_FORMS = [
    (("get", "nope", "-qo", "json"), True),
    (("-qojson", "get", "nope"), True),
    (("-o", "json", "get", "nope", "-o", "text"), False),
    (("-o", "text", "get", "nope", "-o", "json"), True),
    (("put", "nope", "--", "-ojson"), False),
    (("put", "nope", "-o", "json", "--", "x"), True),
    (("put", "nope", "x", "--label", "-ojson"), False),
    (("queue", "show", "nope", "-qo", "jsonl"), True),
    (("-qojson", "queue", "show", "nope"), True),
    (("-o", "json", "queue", "show", "nope", "-o", "text"), False),
    (("-o", "text", "queue", "show", "nope", "-qojsonl"), True),
]


def _error_form(r):
    """Whether `r`'s one error line is the JSON object (else the text line), checked whole."""
    [line] = r.err_lines
    if line.startswith("{"):
        assert json.loads(line)["error"]["exit"] == r.code, r
        return True
    assert line.startswith("mqcli: error: ") and line.endswith("]"), r
    return False


@pytest.mark.parametrize("args, as_json", ERROR_FORMS, ids=[" ".join(args) for args, _ in ERROR_FORMS])
def test_an_error_takes_the_form_of_the_output_the_command_runs_with(cli, args, as_json):
    # in this process through the Typer app, and as a process (put, get and browse on mqcli/fastpath.py)
    for r in (cli(*args), cli.subprocess(*args)):
        assert r.code == 6 and r.stdout == b"", r
        assert _error_form(r) == as_json, r


USAGE_ERROR_FORMS = [
    (("get", "nope", "--bogus", "-qo", "json"), True),  # click stops at --bogus; what it read after counts
    (("-qo", "json", "--bogus", "get", "nope"), True),
    (("-o", "json", "get", "nope", "-o"), True),  # the -o without a value is not read
    (("put", "q", "x", "-p", "9", "-o", "text"), False),
    (("-o", "json", "--version", "--bogus"), True),  # reading -o runs no option's callback: no version printed
    (("--version", "--bogus"), False),
]


@pytest.mark.parametrize("args, as_json", USAGE_ERROR_FORMS, ids=[" ".join(args) for args, _ in USAGE_ERROR_FORMS])
def test_a_usage_error_takes_the_form_of_the_output_click_read(cli, args, as_json):
    for r in (cli(*args), cli.subprocess(*args)):
        assert r.code == 2 and r.stdout == b"", r
        assert _error_form(r) == as_json, r


@pytest.mark.parametrize("name, hint", [
    ("nope", " (create it with `mqcli queue create nope`)"),
    ("-dash", " (create it with `mqcli queue create -- -dash`)"),  # else the name is read as an option
    ("a b", ""),  # no queue can have this name: no way to make it is offered
])
def test_a_missing_queue_is_named_with_the_command_that_makes_it_if_any(cli, name, hint):
    r = cli.fails(6, "get", "--", name)
    assert cli.error_line(r) == f"mqcli: error: queue {name!r} does not exist{hint} [MQ_ERROR_QUEUE_NOT_AVAILABLE]"
