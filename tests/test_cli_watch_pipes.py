"""`stats --watch` to a pipe or a file (real processes): a snapshot is written and flushed each
interval while it runs, `-o jsonl` gives one object per queue per interval, text gives a table
per interval, `| head -1` ends it with exit 141, Ctrl-C with exit 0, SIGTERM with 143 and no
line cut in two. The live display on a terminal is tests/test_cli_watch.py's."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

from store import Store

WAIT = 10.0  # seconds any one thing may take at most; each normally comes within an interval
QUEUES = ["dead-letter", "dead-letter-tx", "q"]


class Pipe:
    """What a process wrote to its stdout pipe so far, read until a condition holds."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.proc, self.fd, self.data = proc, proc.stdout.fileno(), b""

    def until(self, done: Callable[[bytes], bool]) -> bytes:
        deadline = time.monotonic() + WAIT
        while not done(self.data):
            left = deadline - time.monotonic()
            assert left > 0, f"not written within {WAIT} s: {self.data[-2000:]!r}"
            if select.select([self.fd], [], [], left)[0]:
                chunk = os.read(self.fd, 1 << 16)
                assert chunk, f"stdout ended (exit {self.proc.wait()}): {self.data[-2000:]!r}"
                self.data += chunk
        return self.data

    def objects(self, n: int) -> list[dict[str, Any]]:
        """The first `n` JSON lines, each parsed."""
        lines = self.until(lambda data: data.count(b"\n") >= n).split(b"\n")[:n]
        return [json.loads(line) for line in lines]


def _watch(spawn, cli, *args: str, **kw: Any) -> subprocess.Popen[bytes]:
    return spawn(cli, "stats", "--watch", *args, stdout=kw.pop("stdout", subprocess.PIPE),
                 stderr=subprocess.PIPE, bufsize=0, **kw)


def _finish(proc: subprocess.Popen[bytes]) -> tuple[int, str]:
    code = proc.wait(timeout=WAIT)
    assert proc.stderr is not None
    return code, proc.stderr.read().decode()


def _depths(cli) -> dict[str, int]:
    with Store.open(cli.store) as st:
        return {q.name: q.depth for q in st.stats()}


def test_jsonl_to_a_pipe_one_object_per_queue_per_interval_as_stats_prints_them(cli, spawn):
    cli.ok("put", "q", "x", "--count", "3", "-q")
    proc = _watch(spawn, cli, "--interval", "0.2s", "-o", "jsonl")
    pipe = Pipe(proc)
    objects = pipe.objects(3 * len(QUEUES))  # three intervals, while it runs
    depths = _depths(cli)
    once = cli.jsonl("stats")  # what `stats -o jsonl` prints, one object a queue
    times = sorted({o["time"] for o in objects})
    assert len(times) == 3
    for at in times:  # each interval: every queue once, in the order `stats` lists them
        assert [o["queue"] for o in objects if o["time"] == at] == QUEUES
    for o in objects:
        assert set(o) == set(once[0]) | {"time", "put_rate", "get_rate"}
        assert o["depth"] == depths[o["queue"]]
    assert [o["put_rate"] for o in objects[:3]] == [None] * 3  # one reading: no rate yet

    # the rates are taken from the counters as on the terminal: a put is seen as a put rate
    cli.ok("put", "q", "y", "--count", "5", "-q")
    pipe.until(lambda data: any(o["queue"] == "q" and o["depth"] == 8 and o["put_rate"] > 0
                                for o in map(json.loads, data.split(b"\n")[:-1])))  # whole lines
    proc.send_signal(signal.SIGINT)  # Ctrl-C ends a watch with exit 0 (README.md)
    code, err = _finish(proc)
    assert (code, err) == (0, "")
    rest = os.read(pipe.fd, 1 << 20)
    assert (pipe.data + rest).endswith(b"\n")  # no line cut in two


def test_text_to_a_pipe_prints_a_table_per_interval(cli, spawn):
    cli.ok("queue", "create", "dead-letter-archive-europe-west", "-q")
    cli.ok("put", "q", "x", "--count", "2", "-q")
    proc = _watch(spawn, cli, "--interval", "0.2s")
    pipe = Pipe(proc)
    text = pipe.until(lambda data: data.count(b"\nmqcli stats ") >= 3).decode()
    proc.send_signal(signal.SIGINT)
    assert _finish(proc) == (0, "")
    assert "\x1b" not in text  # no colour, no cursor movement into a file
    frames = text.split("mqcli stats ")[1:4]
    for frame in frames:
        title, header, *rows = frame.rstrip("\n").split("\n")
        assert title.startswith("— ") and title.endswith("Z — every 0.2s"), title
        assert header.split()[:3] == ["queue", "depth", "bytes"]
        cells = {row.split()[0]: row.split()[1:] for row in rows}
        # every name whole (no terminal to fit), and the depth
        assert list(cells) == ["dead-letter", "dead-letter-archive-europe-west", "dead-letter-tx", "q"]
        assert cells["q"][0] == "2"


def test_head_1_ends_the_watch_with_exit_141(cli, spawn):
    proc = _watch(spawn, cli, "--interval", "0.2s")
    Pipe(proc).until(lambda data: b"\n" in data)
    assert proc.stdout is not None
    proc.stdout.close()  # head took its line and went away
    assert _finish(proc) == (141, "")  # SPEC: output closed, and no error line


def test_head_1_ends_a_long_interval_at_once(cli, spawn):
    # the reader's going is seen while waiting for the next interval, not only at its write
    proc = _watch(spawn, cli, "--interval", "1h", "-o", "jsonl")
    Pipe(proc).objects(1)
    assert proc.stdout is not None
    proc.stdout.close()
    assert _finish(proc) == (141, "")


def test_to_a_file_written_while_it_runs_and_sigterm_leaves_whole_lines(cli, spawn, tmp_path):
    path = tmp_path / "stats.jsonl"
    with path.open("wb") as file:
        proc = _watch(spawn, cli, "--interval", "0.2s", "-o", "jsonl", stdout=file)
    deadline = time.monotonic() + WAIT
    while path.read_bytes().count(b"\n") < 2 * len(QUEUES):
        assert time.monotonic() < deadline and proc.poll() is None, path.read_bytes()
        time.sleep(0.05)
    proc.terminate()
    code, err = _finish(proc)
    assert code == 143 and "terminated" in err, err
    data = path.read_bytes()
    assert data.endswith(b"\n")
    assert all(json.loads(line)["queue"] in QUEUES for line in data.splitlines())


def test_json_with_watch_is_refused_as_no_one_document(cli):
    # -o json is one document, and a watch never ends: refused before anything is written
    result = cli.subprocess("stats", "--watch", "-o", "json", timeout=WAIT)
    assert (result.code, result.stdout) == (2, b""), result
    assert "use -o jsonl" in result.error_json()["error"]["message"]
