"""CLI end to end: the installed `mqcli` in real processes — binary stdin, pipes between two
mqcli processes, process exit codes, a reader that goes away, terminals, and `bench`."""

import json
import os
import subprocess
import sys
import threading
import time
import tty

import pytest

from cli_helpers import Cli


def test_binary_body_of_every_byte_value_round_trips_through_processes(cli):
    body = bytes(range(256)) * 4
    put = cli.subprocess("put", "q", "-", input=body)
    assert put.code == 0 and put.out.count("\n") == 1
    got = cli.subprocess("get", "q", "-o", "body", "--delimiter", "")
    assert got.code == 0 and got.stdout == body and got.stderr == ""


def test_get_jsonl_piped_into_put_jsonl_between_processes(cli, spawn):
    cli.ok("queue", "create", "r", "-q")
    cli.put("q", bytes(range(256)), "--priority", "6")
    cli.put("q", "two", "--correl-id", "c", "--prop", "k=v", "--ttl", "1h")
    before = cli.json("browse", "q")
    get = spawn(cli, "get", "q", "-o", "jsonl", "--all", stdout=subprocess.PIPE)
    put = spawn(cli, "put", "r", "--jsonl", "-", stdin=get.stdout, stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE)
    get.stdout.close()
    out, err = put.communicate(timeout=60)
    assert get.wait(timeout=60) == 0 and put.returncode == 0, err
    assert out.decode().splitlines() == [m["msg_id"] for m in before]
    after = cli.json("browse", "r")
    for old, new in zip(before, after, strict=True):
        assert new["lookup_id"] != old["lookup_id"]
        assert {**new, "queue": "q", "lookup_id": 0} == {**old, "lookup_id": 0}
    assert cli.json("queue", "show", "q")["depth"] == 0


def test_export_piped_into_import_of_another_store(cli, spawn, tmp_path):
    cli.put("q", "a", "--count", "3")
    other = Cli(tmp_path / "other", tmp_path / "xdg")
    other.ok("init", "-q")
    export = spawn(cli, "export", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    imp = spawn(cli, "--store", other.store, "-o", "json", "import", "-", stdin=export.stdout,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    export.stdout.close()
    out, err = imp.communicate(timeout=60)
    assert export.wait(timeout=60) == 0 and imp.returncode == 0, err
    assert json.loads(out) == {"imported": 3, "skipped": 0}
    assert [m["msg_id"] for m in other.json("browse", "q")] == [m["msg_id"] for m in cli.json("browse", "q")]


@pytest.mark.parametrize("args, code, status", [
    (("get", "q"), 3, "MQ_ERROR_IO_TIMEOUT"),
    (("get", "nope"), 6, "MQ_ERROR_QUEUE_NOT_AVAILABLE"),
    (("get", "q", "--wait", "5x"), 2, "USAGE"),
    (("put", "q", "--jsonl", "-"), 12, "MQ_ERROR_BAD_DATA"),
], ids=["timeout", "no-queue", "usage", "bad-data"])
def test_process_exit_code_and_one_error_line(cli, args, code, status):
    r = cli.subprocess(*args, input=b"not json\n")
    assert r.code == code
    assert r.stdout == b""
    assert r.err_lines == [r.err_lines[0]] and r.err_lines[0].startswith("mqcli: error: ")
    assert r.err_lines[0].endswith(f"[{status}]")


def test_python_dash_m_mqcli_runs(cli):
    proc = subprocess.run([sys.executable, "-m", "mqcli", "-o", "json", "info"], capture_output=True,
                          env={**os.environ, **cli.env}, timeout=60)
    assert proc.returncode == 0 and json.loads(proc.stdout)["path"] == str(cli.store)


def test_a_waiting_get_is_woken_by_a_put_from_another_process(cli, spawn):
    waiting = spawn(cli, "get", "q", "--wait", "20s", "-o", "body", stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE)
    time.sleep(0.3)
    t0 = time.monotonic()
    assert cli.subprocess("put", "q", "wake").code == 0
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 0, err
    assert out == b"wake\n"
    assert time.monotonic() - t0 < 10


def _pipe_capacity() -> int:
    import fcntl

    r, w = os.pipe()
    try:
        return fcntl.fcntl(w, 1032)  # F_GETPIPE_SZ
    finally:
        os.close(r)
        os.close(w)


def _reader_goes_away(cli, spawn):
    """`get q --all -o body` to a reader that takes 10 bytes and closes the pipe."""
    cli.put("q", "x" * 99, "--count", "3000")
    # 1,000 bodies of 100 bytes are one batch of 100 kB, more than a pipe holds, so a write
    # fails once the reader has gone
    get = spawn(cli, "get", "q", "--all", "-o", "body", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # os.read, not the BufferedReader's read, which takes 8 KiB from the pipe to return 10 bytes:
    # the get then writes past a full pipe's worth, and more than the bound below leaves the queue
    assert os.read(get.stdout.fileno(), 10) == b"x" * 10
    get.stdout.close()
    code = get.wait(timeout=60)
    return code, get.stderr.read().decode()


@pytest.mark.parametrize("unbuffered", ["", "1"], ids=["buffered", "PYTHONUNBUFFERED=1"])
def test_a_reader_that_goes_away_leaves_the_undelivered_messages(cli, spawn, monkeypatch, unbuffered):
    # PYTHONUNBUFFERED makes stdout a raw stream, which takes only part of a large write when
    # the reader goes; that part once counted as written, and the first batch committed
    monkeypatch.setenv("PYTHONUNBUFFERED", unbuffered)
    code, err = _reader_goes_away(cli, spawn)
    assert code == 141
    assert err == ""  # no traceback, no "Exception ignored"
    # each message is removed once the pipe took all of it, and none after the write that
    # failed: at most what the pipe holds left the queue (its capacity in pages, the last of
    # which the kernel may fill past the nominal size)
    removed = 3000 - cli.json("queue", "show", "q")["depth"]
    assert 0 <= removed <= (_pipe_capacity() + 4096) // 100
    assert cli.json("inflight") == []  # the rest went back: none is left held
    assert cli.ok("check").code == 0


def test_an_export_to_a_reader_that_goes_away_exits_141(cli, spawn):
    cli.put("q", "x" * 99, "--count", "3000")
    export = spawn(cli, "export", "q", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert len(export.stdout.read(10)) == 10
    export.stdout.close()
    assert export.wait(timeout=60) == 141 and export.stderr.read() == b"" 


def test_a_reader_that_goes_away_exits_141(cli, spawn):
    code, err = _reader_goes_away(cli, spawn)
    assert code == 141


def _pty_run(cli, spawn, *args, stdout_tty, stderr_tty, input=b""):
    """Run mqcli with stdout and/or stderr on a raw pseudo-terminal; return (stdout, stderr)."""
    master, slave = os.openpty()
    tty.setraw(slave)  # no \n -> \r\n translation, so bytes compare as they were written
    proc = spawn(cli, *args, stdin=subprocess.PIPE,
                  stdout=slave if stdout_tty else subprocess.PIPE,
                  stderr=slave if stderr_tty else subprocess.PIPE)
    os.close(slave)
    chunks = []

    def drain():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer has closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    piped_out, piped_err = proc.communicate(input, timeout=60)
    reader.join(timeout=60)
    os.close(master)
    assert proc.returncode == 0, piped_err
    on_tty = b"".join(chunks)
    return (on_tty if stdout_tty else piped_out), (on_tty if stderr_tty else piped_err)


@pytest.mark.parametrize("mode", ["json", "jsonl", "body"])
def test_data_output_is_the_same_on_a_terminal_and_a_pipe(cli, spawn, mode):
    cli.put("q", "a", "--label", "l")
    cli.put("q", "b", "--priority", "5")
    piped = cli.subprocess("browse", "q", "-o", mode)
    on_tty, _ = _pty_run(cli, spawn, "browse", "q", "-o", mode, stdout_tty=True, stderr_tty=False)
    assert on_tty == piped.stdout


def test_progress_on_a_terminal_never_goes_into_stdout(cli, spawn):
    lines = b"".join(b"line %d\n" % i for i in range(2500))
    out, err = _pty_run(cli, spawn, "put", "q", "--lines", "-", stdout_tty=False, stderr_tty=True, input=lines)
    ids = out.decode().splitlines()
    assert len(ids) == 2500 and all("\\" in i for i in ids)
    assert b"\x1b" not in out


# ---- bench --------------------------------------------------------------------------------


def test_bench_with_tiny_numbers_in_the_store_leaves_no_queue_behind(cli):
    before = [q["name"] for q in cli.json("queue", "list")]
    r = cli.subprocess("bench", "--messages", "200", "--batch", "50", "-o", "json", timeout=30)
    assert r.code == 0, r
    doc = r.json()
    assert doc["messages"] == 200 and doc["received"] == 200 and doc["batch"] == 50
    assert doc["msgs_per_s"] > 0 and doc["store"] == str(cli.store)
    assert set(doc["latency_ms"]) == {"p50", "p90", "p99", "max", "mean"}
    assert [q["name"] for q in cli.json("queue", "list")] == before
    text = cli.subprocess("bench", "--messages", "200", "--batch", "50", timeout=30)
    assert text.code == 0 and "throughput" in text.out and "msg/s" in text.out


def test_bench_in_a_scratch_store_two_phase(cli):
    r = cli.subprocess("bench", "--messages", "200", "--batch", "50", "--scratch", "--two-phase",
                       "--express", "-o", "json", timeout=30)
    assert r.code == 0, r
    doc = r.json()
    assert doc["received"] == 200 and doc["two_phase"] is True and doc["express"] is True
    assert doc["store"] == "scratch"
    assert cli.json("info")["sequential_id"] == 0  # the test store was not touched


def test_bench_two_phase_with_several_consumers(cli):
    # each consumer needs its own confirm ids: a shared one lets one consumer's confirm take
    # another's messages
    r = cli.subprocess("bench", "--messages", "2000", "--batch", "10", "--two-phase", "--producers", "2",
                       "--consumers", "4", "-o", "json", timeout=60)
    assert r.code == 0, r
    assert r.json()["received"] == 2000


def test_bench_with_consumers_only(cli):
    r = cli.subprocess("bench", "--messages", "200", "--producers", "0", "-o", "json", timeout=30)
    assert r.code == 0, r
    assert r.json()["received"] == 200


def test_bench_needs_a_producer_or_a_consumer(cli):
    r = cli.fails(2, "bench", "--producers", "0", "--consumers", "0")
    assert "need at least one producer or consumer" in r.stderr


def test_run_returns_an_exit_code_when_stdout_is_a_closed_pipe(cli):
    import io

    from click.testing import CliRunner

    from mqcli.app import run

    class ClosedPipe(io.RawIOBase):
        def writable(self):
            return True

        def write(self, b):
            raise BrokenPipeError(32, "Broken pipe")

    cli.put("q", "x")
    with CliRunner().isolation(env=cli.env):
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(ClosedPipe()))
        try:
            code = run(["get", "q"])
        except SystemExit as exc:
            code = f"SystemExit({exc.code})"
        finally:
            sys.stdout = sys.__stdout__
    assert code == 141
    assert cli.json("queue", "show", "q")["depth"] == 1
