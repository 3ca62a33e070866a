"""A destructive get stopped while it writes to a slow reader (README.md#exit-codes: exit 130,
"nothing half-done is left behind"; SIGTERM 143; Ctrl-C ends `get --follow` with exit 0):
every message the reader got whole is removed, every other one is back in the queue, so the
next get shows again at most the one message the signal cut part way, and loses none.

A reader that takes a little at a time keeps the get blocked in its writes, so the signal and
the end of its grace (mqcli/signals.py, WritingGate) come while a batch is part written: the
count of what the pipe took must survive them. Real processes, real pipes; the pipe is made
one page small so that the get is never far ahead of what the reader has read."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import threading
import time

import pytest

from cli_helpers import Cli
from store import NewMessage, Store

pytestmark = pytest.mark.skipif(not hasattr(fcntl, "F_SETPIPE_SZ"), reason="needs Linux's F_SETPIPE_SZ")

N = 3000  # three batches of a bulk get
CODE = {signal.SIGINT: 130, signal.SIGTERM: 143}
SIGNALS = pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
# each message one line: its msg_id, or its record
FORMAT, JSONL = ["--format", "{msg_id}\\n"], ["-o", "jsonl"]
OUTPUTS = pytest.mark.parametrize("output", [FORMAT, JSONL], ids=["format", "jsonl"])


def fill(cli: Cli, body: bytes = b"m") -> set[str]:
    with Store.open(cli.store) as st:
        return {m.msg_id for m in st.put_many("q", [NewMessage(body) for _ in range(N)])}


def in_queue(cli: Cli) -> list[str]:
    """The msg_ids in the queue, in every state (none should be left held)."""
    with Store.open(cli.store) as st:
        return [m.msg_id for m in st.browse("q", states="all")]


def small_pipe() -> tuple[int, int]:
    """A pipe that holds one page: the get writes little more than the reader has read."""
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
    return r, w


class SlowReader(threading.Thread):
    """Reads the pipe a little at a time, steadily, until its end; `reached` is set once
    `lines` whole lines were read."""

    def __init__(self, fd: int, lines: int) -> None:
        super().__init__(daemon=True)
        self.fd, self.lines = fd, lines
        self.reached = threading.Event()
        self.data = bytearray()

    def run(self) -> None:
        lines = 0
        try:
            while chunk := os.read(self.fd, 512):
                self.data += chunk
                lines += chunk.count(b"\n")
                if lines >= self.lines:
                    self.reached.set()
                time.sleep(0.01)  # about 50 kB/s: a consumer doing a little work per line
        finally:
            os.close(self.fd)
            self.reached.set()  # the get ended before: the test says so


def delivery_interrupted(cli: Cli, spawn, args: list[str], signum: int, after: int) -> tuple[int, str, bytes]:
    """Run `mqcli ARGS` into a slow reader, send it `signum` once `after` lines were read;
    (exit code, stderr, everything the reader got)."""
    r, w = small_pipe()
    proc = spawn(cli, *args, stdout=w, stderr=subprocess.PIPE)
    os.close(w)
    reader = SlowReader(r, after)
    reader.start()
    assert reader.reached.wait(timeout=60), "the reader never got its lines"
    assert proc.poll() is None, "the get ended before the signal"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    reader.join(timeout=60)
    assert not reader.is_alive(), "the reader did not get to the pipe's end"
    return proc.returncode, err.decode("utf-8", "backslashreplace"), bytes(reader.data)


def msg_id(line: bytes, output: list[str]) -> str:
    return json.loads(line)["msg_id"] if output == JSONL else line.decode()


def assert_only_the_unread_went_back(cli: Cli, put: set[str], data: bytes, output: list[str]) -> None:
    # the last part, after the last line end, is what came of the one message cut part way
    # (if any): not got whole, so it must be back in the queue
    got = [msg_id(line, output) for line in data.split(b"\n")[:-1]]
    left = in_queue(cli)
    assert got and left, "the signal came too early or too late to tell anything"
    assert set(got) & set(left) == set(), "messages the reader got whole went back to the queue"
    assert sorted(got + left) == sorted(put), "a message was lost, or shown twice"
    assert cli.json("inflight") == []  # nothing is left held


@SIGNALS
@pytest.mark.parametrize(("output", "after"), [(FORMAT, 20), (JSONL, 20), (FORMAT, 1100)],
                         ids=["format", "jsonl", "format-second-batch"])
def test_an_interrupted_get_all_puts_back_only_what_its_reader_did_not_get_whole(cli, spawn, signum, output, after):
    put = fill(cli)
    code, err, data = delivery_interrupted(cli, spawn, ["get", "q", "--all", *output], signum, after)
    assert code == CODE[signum], err
    assert "Traceback" not in err
    assert_only_the_unread_went_back(cli, put, data, output)


@SIGNALS
@OUTPUTS
def test_an_interrupted_get_follow_puts_back_only_what_its_reader_did_not_get_whole(cli, spawn, signum, output):
    put = fill(cli)
    code, err, data = delivery_interrupted(cli, spawn, ["get", "q", "--follow", *output], signum, after=20)
    assert code == (0 if signum == signal.SIGINT else 143), err  # Ctrl-C is how a follow ends
    assert_only_the_unread_went_back(cli, put, data, output)


def test_a_confirm_id_auto_is_printed_before_a_cut_first_batch(cli, spawn):
    # the first batch (2 MB) is more than a pipe holds: the reader goes away while it is
    # written, and the messages the pipe took whole stay pending under the drawn id, which
    # the user must be told to confirm or undo them
    fill(cli, b"b" * 2000)
    get = spawn(cli, "get", "q", "--all", "--confirm-id", "auto", "--format", "{body}\\n",
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert os.read(get.stdout.fileno(), 10) == b"b" * 10
    get.stdout.close()
    _, err = get.communicate(timeout=60)
    assert get.returncode == 141, err
    [note] = [line for line in err.decode().splitlines() if line.startswith("confirm id: ")]
    confirm_id = note.removeprefix("confirm id: ")
    pending = cli.json("inflight")
    assert pending, "the cut came too early to tell anything"
    assert {m["confirm_id"] for m in pending} == {int(confirm_id)}
    assert cli.json("confirm", "q", "--confirm-id", confirm_id)["confirmed"] == len(pending)
    assert len(in_queue(cli)) == N - len(pending)
