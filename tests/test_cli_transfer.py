"""CLI: moving messages between queues and stores as JSONL — `get -o jsonl | put --jsonl`,
`export` / `import` (round-trips exactly, ids kept; only lookup_id is new, [MS-MQDMPR] 3.1.7.1.9)."""

import json
import stat
import time

import pytest

from cli_helpers import Cli
from store import Store
from store.records import parse_iso_time


def _fill(cli):
    """A queue with every kind of field, mixed priorities, a binary body, a props map."""
    cli.ok("queue", "create", "reports", "-q")
    cli.put("q", "burn", "--count", "3")  # move SequentialID on, so new lookup ids differ
    cli.ok("get", "q", "--all", "-q")
    cli.put("q", "plain")
    cli.put("q", "high", "--priority", "7", "--correl-id", "c-1", "--label", "L1",
            "--prop", "k=v", "--prop", "x=", "--app-specific", "-5")
    cli.put("q", bytes(range(256)), "--priority", "0", "--express", "--ttl", "2h")
    cli.put("q", "ünïcødé ✓", "--label", "ラベル", "--trace", "--report-queue", "reports")
    cli.put("q", "low", "--priority", "0", "--correl-id", "c-2")


def _without(record, *keys):
    return {k: v for k, v in record.items() if k not in keys}


def _messages(records):
    """The message records of an export (each queue's definition record left out)."""
    return [r for r in records if "queue_definition" not in r]


def test_get_jsonl_piped_to_put_jsonl_reproduces_every_field_but_queue_and_lookup_id(cli):
    _fill(cli)
    cli.ok("queue", "create", "copy", "-q")
    source = cli.json("browse", "q")
    dump = cli.ok("get", "q", "-o", "jsonl", "--all").stdout
    got = [json.loads(line) for line in dump.splitlines()]
    assert [_without(g, "state") for g in got] == [_without(s, "state") for s in source]
    put = cli.ok("put", "copy", "--jsonl", "-", input=dump)
    assert put.out.splitlines() == [g["msg_id"] for g in got]  # ids kept
    copied = cli.json("browse", "copy")
    assert len(copied) == len(got) == 5
    for old, new in zip(got, copied):
        assert new["queue"] == "copy" and old["queue"] == "q"
        assert new["lookup_id"] != old["lookup_id"]  # a new SequentialID at enqueue ([MS-MQDMPR] 3.1.7.1.9)
        assert _without(new, "queue", "lookup_id") == _without(old, "queue", "lookup_id")
        assert new["state"] == "available"
    assert cli.ok("get", "copy", "--all", "-o", "body", "--delimiter", "").stdout == b"".join(
        m["body"].encode() if "body" in m else bytes(range(256)) for m in got)


def test_put_jsonl_json_output_shows_the_new_records(cli):
    m = cli.put("q", "x")
    line = cli.ok("get", "q", "-o", "jsonl").stdout
    new = cli.jsonl("put", "q", "--jsonl", "-", input=line)
    assert len(new) == 1 and new[0]["msg_id"] == m["msg_id"] and new[0]["lookup_id"] != m["lookup_id"]


def test_put_jsonl_from_a_file(cli, tmp_path):
    cli.put("q", "a")
    cli.put("q", "b")
    f = tmp_path / "dump.jsonl"
    f.write_bytes(cli.ok("get", "q", "--all", "-o", "jsonl").stdout)
    assert len(cli.ok("put", "q", "--jsonl", f).out.splitlines()) == 2
    assert cli.ok("browse", "q", "-o", "body").stdout == b"a\nb\n"


def test_put_jsonl_malformed_line_exits_12_naming_the_line_and_stores_nothing(cli):
    good = cli.ok("put", "q", "x", "-o", "jsonl").stdout
    cli.ok("get", "q", "-q")
    r = cli.fails(12, "put", "q", "--jsonl", "-", input=good + b'{"msg_id": \n' + good)
    assert cli.error_line(r).startswith("mqcli: error: line 2: not JSON: ")
    assert cli.error_line(r).endswith(" [MQ_ERROR_BAD_DATA]")
    r = cli.fails(12, "put", "q", "--jsonl", "-", input=good + b"\n" + b'{"body": "x", "colour": "red"}\n')
    assert cli.error_line(r).startswith("mqcli: error: line 3: field 'colour' is unknown")
    assert cli.json("queue", "show", "q")["depth"] == 0


def test_put_jsonl_record_already_expired_exits_9(cli):
    # a put of the record, as of a new message, is refused; an import dead-letters it (below)
    record = cli.ok("put", "q", "x", "--ttl", "1h", "-o", "jsonl").jsonl()[0]
    cli.ok("get", "q", "-q")
    record["expires"] = "2020-01-01T00:00:00.000000Z"
    r = cli.fails(9, "put", "q", "--jsonl", "-", input=json.dumps(record) + "\n")
    assert cli.error_line(r) == ("mqcli: error: the message expired before it could be enqueued "
                                 "[MQ_ERROR_MESSAGE_TIMED_OUT]")
    assert cli.json("queue", "show", "q")["depth"] == 0


def test_import_of_a_dump_whose_ttl_message_expired_since_stores_the_rest(cli, tmp_path):
    cli.ok("put", "q", "keep", "-q")
    cli.ok("put", "q", "short", "--ttl", "1h", "--no-dead-letter", "-q")
    dump = tmp_path / "dump.jsonl"
    cli.ok("export", "q", "--to", str(dump), "-q")
    lines = [json.loads(line) for line in dump.read_text().splitlines()]
    for d in lines:
        if d.get("expires"):
            d["expires"] = "2020-01-01T00:00:00.000000Z"  # as if the import ran after its ttl
    dump.write_text("".join(json.dumps(d) + "\n" for d in lines))
    cli.ok("queue", "purge", "q", "--yes", "-q")
    assert cli.json("import", str(dump)) == {"imported": 1, "skipped": 0, "expired": 1}
    assert [m["body"] for m in cli.jsonl("browse", "q", "-o", "jsonl")] == ["keep"]
    assert cli.jsonl("browse", "dead-letter", "-o", "jsonl") == []  # sent without dead-lettering: dropped


def test_export_then_import_into_a_fresh_store_reproduces_the_queues(cli, tmp_path):
    _fill(cli)
    cli.ok("queue", "create", "other", "--label", "second", "-q")
    cli.put("other", "o1", "--priority", "4")
    with Store.open(cli.store, clock=lambda: time.time() - 3600) as st:  # one dead-lettered
        st.put("q", b"expired", ttl=60)
    cli.ok("sweep", "-q")
    exported = cli.ok("export")
    assert exported.stderr == "exported 8 messages\n"
    records = _messages(exported.jsonl())
    # the traced put left its trace report in `reports`
    assert [r["queue"] for r in records] == ["dead-letter", "other"] + ["q"] * 5 + ["reports"]
    assert records[0]["dead_letter_reason"] == "expired"

    fresh = Cli(tmp_path / "fresh", tmp_path / "xdg")
    fresh.ok("init", "-q")
    r = fresh.ok("import", "-", "-o", "json", input=exported.stdout)
    assert r.json() == {"imported": 8, "skipped": 0}
    assert "created queue 'q'" in r.stderr and "created queue 'other'" in r.stderr
    assert fresh.json("import", "-", input=b"") == {"imported": 0, "skipped": 0}
    again = _messages(fresh.ok("export").jsonl())
    assert [_without(a, "lookup_id") for a in again] == [_without(r, "lookup_id") for r in records]
    assert fresh.ok("check").code == 0
    # and through a file, with --to
    f = tmp_path / "q.jsonl"
    assert cli.ok("export", "q", "--to", f).stdout == b""
    third = Cli(tmp_path / "third", tmp_path / "xdg")
    third.ok("init", "-q")
    assert third.json("import", f) == {"imported": 5, "skipped": 0}
    assert [_without(m, "lookup_id") for m in third.json("browse", "q")] == \
        [_without(m, "lookup_id") for m in cli.json("browse", "q")]


def test_export_selected_queues_in_queue_order(cli):
    cli.ok("queue", "create", "r", "-q")
    cli.put("q", "a", "--priority", "1")
    cli.put("q", "b", "--priority", "6")
    cli.put("r", "c")
    records = _messages(cli.ok("export", "q").jsonl())
    assert [r["body"] for r in records] == ["b", "a"]
    assert [r["body"] for r in _messages(cli.ok("export", "q", "r").jsonl())] == ["b", "a", "c"]
    cli.fails(6, "export", "nope")


def test_export_includes_in_flight_messages(cli):
    cli.put("q", "a")
    cli.put("q", "b")
    cli.ok("get", "q", "--confirm-id", "4")
    records = _messages(cli.ok("export", "q").jsonl())
    assert [r["state"] for r in records] == ["get-unconfirmed", "available"]
    assert records[0]["confirm_id"] == 4


def test_import_into_another_queue(cli, tmp_path):
    cli.put("q", "a")
    dump = cli.ok("export", "q").stdout
    fresh = Cli(tmp_path / "fresh", tmp_path / "xdg")
    fresh.ok("init", "-q")
    assert fresh.json("import", "-", "--queue", "elsewhere", input=dump) == {"imported": 1, "skipped": 0}
    assert [m["body"] for m in fresh.json("browse", "elsewhere")] == ["a"]
    assert fresh.ok("import", "-", "--queue", "elsewhere2", "-q", "-o", "json", input=dump).stderr == ""


def test_import_malformed_line_exits_12_and_stores_nothing(cli, tmp_path):
    cli.put("q", "a", "--count", "2")
    lines = cli.ok("export").stdout.splitlines(keepends=True)
    f = tmp_path / "bad.jsonl"
    f.write_bytes(lines[0] + b"\n" + b"[1, 2]\n" + lines[1])
    fresh = Cli(tmp_path / "fresh", tmp_path / "xdg")
    fresh.ok("init", "-q")
    r = fresh.fails(12, "import", f)
    assert fresh.error_line(r) == ("mqcli: error: line 3: a message record must be a JSON object "
                                   "[MQ_ERROR_BAD_DATA]")
    assert [q["name"] for q in fresh.json("queue", "list")] == ["dead-letter", "dead-letter-tx"]
    r = fresh.fails(12, "import", "-", input=b"{not json}\n")
    assert "line 1: not JSON" in r.stderr


def test_import_refuses_a_record_with_a_field_it_does_not_know_and_stores_nothing(cli, tmp_path):
    """A field this version does not know (a newer mqcli's, or a typo) would be dropped: the
    message stored would not be the one exported. Refused, as put --jsonl refuses it."""
    cli.put("q", "a", "--count", "2")
    lines = cli.ok("export").stdout.splitlines(keepends=True)
    record = json.loads(lines[-1])
    record["colour"] = "red"
    f = tmp_path / "extra.jsonl"
    f.write_bytes(b"".join(lines[:-1]) + json.dumps(record).encode() + b"\n")
    fresh = Cli(tmp_path / "fresh", tmp_path / "xdg")
    fresh.ok("init", "-q")
    r = fresh.fails(12, "import", f)
    assert fresh.error_line(r).startswith(f"mqcli: error: line {len(lines)}: field 'colour' is not a field "
                                          f"of a message record"), r
    assert [q["name"] for q in fresh.json("queue", "list")] == ["dead-letter", "dead-letter-tx"]
    del record["colour"]  # the same record without it imports
    f.write_bytes(b"".join(lines[:-1]) + json.dumps(record).encode() + b"\n")
    assert fresh.json("import", f) == {"imported": 2, "skipped": 0}


@pytest.mark.parametrize("put_time", ["9999-12-31T23:59:59.999999Z", "2200-01-01T00:00:00Z"])
@pytest.mark.parametrize("how", ["import FILE", "import -", "put --jsonl FILE", "put --jsonl -"])
def test_a_record_put_more_than_a_day_ahead_exits_12_naming_it_and_stores_nothing(cli, tmp_path, how, put_time):
    """Its put time would move this queue manager's put-time counter there (its own record),
    and every later put with it: past year 9999 no put time can be written."""
    guid = cli.json("info")["guid"]
    first = {"msg_id": f"{guid}\\90", "body": "ok", "queue": "q", "put_time": "2020-01-01T00:00:00Z"}
    late = {**first, "msg_id": f"{guid}\\91", "body": "late", "put_time": put_time}
    data = (json.dumps(first) + "\n" + json.dumps(late) + "\n").encode()
    f = tmp_path / "late.jsonl"
    f.write_bytes(data)
    command, source = how.rsplit(" ", 1)
    args = ["import"] if command == "import" else ["put", "q", "--jsonl"]
    r = cli.fails(12, *args, f if source == "FILE" else "-", input=data if source == "-" else None)
    shown = put_time.replace("00Z", "00.000000Z") if "." not in put_time else put_time
    assert cli.error_line(r).startswith(f"mqcli: error: line 2: put_time {shown} is more than 24h ahead "
                                        f"of this store's clock ("), r
    assert cli.json("browse", "q") == []  # neither line stored
    before = time.time()
    put = cli.put("q", "after")
    assert before - 1 <= parse_iso_time(put["put_time"]) / 1e6 <= time.time()  # stamped at the clock
    (row,) = [r for r in cli.json("stats") if r["queue"] == "q"]
    assert (row["oldest"], row["depth"]) == (put["put_time"], 1)
    # --new-ids gives the records new put times: nothing ahead is kept
    cli.ok(*args, f, "--new-ids", "-q")
    assert [m["body"] for m in cli.json("browse", "q")] == ["after", "ok", "late"]
    assert max(m["put_time"] for m in cli.json("browse", "q")) < "2100"


def test_the_put_time_bound_follows_the_clock_of_a_pipe_that_runs_for_days(monkeypatch):
    # `get --follow -o jsonl | put --jsonl -` reads records for days: the bound is the clock's
    # at each record, not at the start
    from mqcli import inputs
    from store import errors

    now = [1_800_000_000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    check = inputs.put_time_check()
    day = 86_400 * 1_000_000
    start = int(now[0] * 1_000_000)
    check(start + day)
    with pytest.raises(errors.BadData, match="more than 24h ahead"):
        check(start + day + 1)
    now[0] += 3 * 86_400
    check(start + 3 * day)


def test_import_a_missing_file_is_a_usage_error(cli, tmp_path):
    r = cli.fails(2, "import", tmp_path / "nope.jsonl")
    assert "cannot read" in r.stderr


def test_export_then_import_keeps_journals_and_outgoing_queues(cli, tmp_path):
    cli.ok("queue", "create", "orders", "--journal", "-q")
    cli.put("orders", "kept")
    cli.ok("get", "orders", "-q")
    cli.put("DIRECT=OS:qm2\\orders", "waiting")
    dump = cli.ok("export").stdout
    fresh = Cli(tmp_path / "fresh", tmp_path / "xdg")
    fresh.ok("init", "-q")
    r = fresh.ok("import", "-", input=dump)
    assert "created queue 'orders;journal'" in r.stderr
    assert [m["body"] for m in fresh.json("browse", "orders;journal")] == ["kept"]
    assert [o["name"] for o in fresh.json("outgoing", "list")] == ["DIRECT=OS:qm2\\orders"]
    assert [m["body"] for m in fresh.json("browse", "DIRECT=OS:qm2\\orders")] == ["waiting"]
    fresh.ok("check")


def test_export_to_a_missing_directory_is_a_usage_error(cli, tmp_path):
    cli.put("q", "x")
    target = tmp_path / "no" / "such" / "dir.jsonl"
    r = cli.fails(2, "export", "q", "--to", target)
    assert cli.error_line(r) == f"mqcli: error: cannot write {target}: No such file or directory [USAGE]"
    r = cli.fails(2, "export", "q", "--to", tmp_path)
    assert cli.error_line(r) == f"mqcli: error: cannot write {tmp_path}: it is a directory [USAGE]"


def test_a_parquet_export_to_a_missing_directory_is_a_usage_error(cli, tmp_path):
    pytest.importorskip("pyarrow")  # the spark extra (installed by the README's test command)
    target = tmp_path / "no" / "such" / "dir.parquet"
    r = cli.fails(2, "export", "--format", "parquet", "--to", target)
    assert cli.error_line(r) == f"mqcli: error: cannot write {target}: No such file or directory [USAGE]"


def test_a_failed_export_leaves_the_older_file_whole_and_no_partial_file(cli, tmp_path):
    cli.put("q", "x", "--count", "3")
    target = tmp_path / "q.jsonl"
    cli.ok("export", "q", "--to", target)
    before = target.read_bytes()
    assert len(before.splitlines()) == 4 and target.stat().st_mode & 0o777 == 0o600  # its definition and 3 messages
    cli.fails(6, "export", "q", "nosuch", "--to", target)  # q is written first, then nosuch fails
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".part")) == []


def test_export_into_a_fifo_writes_in_place(cli, tmp_path):
    import os
    import threading

    cli.put("q", "x", "--count", "2")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    cli.ok("export", "q", "--to", fifo)
    reader.join(timeout=30)
    assert len(got[0].splitlines()) == 3  # the queue's definition and two messages
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # written into, not replaced by a regular file


# ---- a msg_id is stored once: import and put --jsonl skip what is stored; --new-ids copies ---


def _dump_of(tmp_path, n, name="source"):
    """A JSONL export file of `n` messages of a store of its own (queue `q`), and their ids."""
    from store import NewMessage

    with Store.open(tmp_path / name, create=True, name=name) as st:
        st.create_queue("q")
        for i in range(0, n, 1000):
            st.put_many("q", [NewMessage(b"m%d" % k, priority=k % 8) for k in range(i, min(n, i + 1000))])
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(b"".join(json.dumps(m.to_dict()).encode() + b"\n" for m in st.export_messages()))
        return path, [m.msg_id for m in st.export_messages()]


def test_importing_a_dump_again_skips_every_record_and_changes_nothing(cli, tmp_path):
    f, ids = _dump_of(tmp_path, 2500)
    assert cli.json("import", f) == {"imported": 2500, "skipped": 0}
    before = cli.ok("export").jsonl()
    with Store.open(cli.store) as st:
        seq = st.info().sequential_id
    r = cli.ok("import", f)
    assert r.out == "imported  0\nskipped   2500\n"
    assert cli.ok("export").jsonl() == before  # every field, lookup ids too
    with Store.open(cli.store) as st:  # the library sees the same: nothing added, no id used
        assert st.info().sequential_id == seq and st.info().messages == 2500
        assert sorted(m.msg_id for m in st.browse("q")) == sorted(ids)
        assert st.check() == []
    assert cli.ok("check").code == 0


def test_a_record_repeated_within_one_import_is_stored_once(cli, tmp_path):
    f, ids = _dump_of(tmp_path, 3)
    lines = f.read_bytes().splitlines(keepends=True)
    doubled = lines[0] + lines[1] + lines[0] + lines[2] + lines[1]
    assert cli.json("import", "-", input=doubled) == {"imported": 3, "skipped": 2}
    assert sorted(m["msg_id"] for m in cli.json("browse", "q")) == sorted(ids)


def test_put_jsonl_skips_records_already_stored_and_says_how_many_on_stderr(cli, tmp_path):
    f, ids = _dump_of(tmp_path, 3)
    lines = f.read_bytes().splitlines(keepends=True)
    assert cli.ok("put", "q", "--jsonl", "-", input=lines[0]).out == ids[0] + "\n"
    r = cli.ok("put", "q", "--jsonl", f)
    assert r.out.splitlines() == ids[1:]  # the ids printed are the ones stored
    assert r.stderr == "skipped 1 already stored (their msg_ids are in the store; --new-ids stores copies)\n"
    again = cli.ok("put", "q", "--jsonl", f, "-o", "json")
    assert again.json() == [] and again.stderr.startswith("skipped 3 already stored ")
    assert cli.ok("put", "q", "--jsonl", f, "-q").stderr == ""
    assert sorted(m["msg_id"] for m in cli.json("browse", "q")) == sorted(ids)
    assert cli.ok("check").code == 0


def test_import_and_put_jsonl_new_ids_store_copies(cli, tmp_path):
    f, ids = _dump_of(tmp_path, 2)
    cli.ok("import", f)
    guid = cli.guid()
    assert cli.json("import", f, "--new-ids") == {"imported": 2, "skipped": 0}
    printed = cli.ok("put", "q", "--jsonl", f, "--new-ids").out.splitlines()
    assert len(printed) == 2 and all(i.startswith(guid + "\\") for i in printed)
    records = cli.json("browse", "q")
    assert len(records) == 6 and len({r["msg_id"] for r in records}) == 6
    assert len({r["unique_id"] for r in records}) == 6
    originals = {r["msg_id"]: r for r in records if r["msg_id"] in ids}
    for copy in records:
        if copy["msg_id"] not in ids:
            assert copy["msg_id"].startswith(guid + "\\")
            body_twin = next(o for o in originals.values() if o["body"] == copy["body"])
            keep = ("body", "priority", "props", "label", "correl_id", "hops", "backouts", "expires")
            assert {k: copy.get(k) for k in keep} == {k: body_twin.get(k) for k in keep}
            assert copy["put_time"] > body_twin["put_time"]
    assert cli.ok("check").code == 0


def test_new_ids_without_jsonl_is_a_usage_error(cli):
    r = cli.fails(2, "put", "q", "x", "--new-ids")
    assert cli.error_line(r) == "mqcli: error: --new-ids goes with --jsonl (every other put makes new ids) [USAGE]"
    assert cli.json("queue", "show", "q")["depth"] == 0


@pytest.mark.slow
def test_two_imports_of_one_dump_at_once_store_each_message_once(cli, spawn, tmp_path):
    import subprocess

    f, ids = _dump_of(tmp_path, 20_000)
    procs = [spawn(cli, "import", f, "-o", "json", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    docs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        docs.append(json.loads(out))
    assert sum(d["imported"] for d in docs) == 20_000 and sum(d["skipped"] for d in docs) == 20_000
    with Store.open(cli.store) as st:
        stored = [m.msg_id for m in st.browse("q")]
        assert st.check() == []
    assert len(stored) == 20_000 and sorted(stored) == sorted(ids)


@pytest.mark.slow
def test_an_import_killed_and_run_again_stores_each_message_once(cli, spawn, tmp_path):
    import signal
    import subprocess

    f, ids = _dump_of(tmp_path, 20_000)
    proc = spawn(cli, "import", f, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with Store.open(cli.store) as st:
        for _ in range(100_000):  # until its first commit (or its end), bounded
            if st.queue_info("q").depth or proc.poll() is not None:
                break
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        before = st.queue_info("q").depth
    assert 0 < before <= 20_000 and before % 1000 == 0  # whole batches of 1,000 only
    assert cli.json("import", f) == {"imported": 20_000 - before, "skipped": before}
    assert cli.json("import", f) == {"imported": 0, "skipped": 20_000}
    assert sorted(m["msg_id"] for m in cli.json("browse", "q")) == sorted(ids)
    assert cli.ok("check").code == 0
