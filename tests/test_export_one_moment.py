"""export reads one moment of the store (Store.view, store/view.py) and spools its output
(mqcli/spool.py): every message once while other processes move messages between queues, and a
reader of the output that stalls does not hold the store's read snapshot."""

import io
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import lmdb
import pytest

from cli_helpers import mqcli_command
from mqcli import spool

MOVER = textwrap.dedent("""
    import os, sys
    from store import Store
    st = Store.open(sys.argv[1])
    stop = sys.argv[2]
    for i in range(100_000):  # bounded: stops by itself if the test dies
        if os.path.exists(stop):
            break
        for source, target in (("a", "b"), ("b", "a")):
            for _ in st.move(source, target, count=37, batch=37):
                pass
        if i == 0:
            print("moving", flush=True)
""")


def _ids(out: bytes) -> list[str]:
    return [r["msg_id"] for r in map(json.loads, out.splitlines()) if "queue_definition" not in r]


@pytest.mark.slow
def test_export_while_another_process_moves_messages_shows_each_once(cli, tmp_path):
    # read in pages of 1,000, a message moved from a queue not read yet into one read already
    # was in no page, one moved the other way in two (a hunt: 3 duplicates among 283)
    cli.ok("queue", "create", "a", "-q")
    cli.ok("queue", "create", "b", "-q")
    cli.ok("put", "a", "x" * 100, "--count", "2500", "-q")
    cli.ok("put", "b", "y" * 100, "--count", "2500", "-q")
    every = sorted(_ids(cli.ok("export", "a", "b").stdout))
    assert len(every) == len(set(every)) == 5000
    stop = tmp_path / "stop"
    mover = subprocess.Popen([sys.executable, "-c", MOVER, str(cli.store), str(stop)],
                             stdout=subprocess.PIPE, env={**os.environ, **cli.env})
    try:
        assert mover.stdout.readline() == b"moving\n"
        for _ in range(4):
            ids = _ids(cli.ok("export", "a", "b").stdout)
            assert sorted(ids) == every, (len(ids), len(set(ids)))
        assert mover.poll() is None  # it moved all along
    finally:
        stop.touch()
        assert mover.wait(timeout=60) == 0


def _holds_snapshot(store, pid: int) -> bool:
    """Whether process `pid` has a read transaction open on the store (LMDB's reader table)."""
    env = lmdb.open(str(store), readonly=True, lock=True, max_dbs=0, subdir=True)
    try:
        rows = [line.split() for line in env.readers().splitlines()[1:]]
    finally:
        env.close()
    return any(int(row[0]) == pid and row[2] != "-" for row in rows if len(row) == 3)


def _writing_into_a_full_pipe(pid: int) -> bool:
    """Whether a thread of process `pid` waits in the kernel for room in a pipe."""
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/wchan") as f:
                if "pipe_write" in f.read():
                    return True
        except FileNotFoundError:
            pass
    return False


@pytest.mark.slow
def test_export_into_a_pipe_nobody_reads_does_not_hold_the_store_snapshot(cli):
    # LMDB cannot reuse pages freed after the oldest open read transaction: an export writing
    # straight into a stalled pipe held its snapshot while the data file grew under writers
    cli.ok("put", "q", "z" * 1000, "--count", "3000", "-q")  # ~3.5 MB of JSONL: far more than a pipe holds
    export = subprocess.Popen([*mqcli_command(), "export", "q"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env={**os.environ, **cli.env})
    try:
        deadline = time.monotonic() + 30
        while not _writing_into_a_full_pipe(export.pid):
            assert export.poll() is None and time.monotonic() < deadline, "the export never filled its pipe"
            time.sleep(0.05)
        while _holds_snapshot(cli.store, export.pid):  # until it has read everything into its spool
            assert time.monotonic() < deadline, "export held its read snapshot while its pipe was full"
            time.sleep(0.05)
        assert export.poll() is None  # still writing into the full pipe
        cli.ok("put", "q", "after", "-q")  # writers go on
        out, err = export.communicate(timeout=60)
    finally:
        if export.poll() is None:
            export.kill()
    assert export.returncode == 0, err
    assert len(_ids(out)) == 3000


class _Sink(io.RawIOBase):
    """A sink that takes at most `step` bytes a write, slowly, and can break."""

    def __init__(self, step: int = 7000, broken: bool = False) -> None:
        self.data = bytearray()
        self.step = step
        self.broken = broken
        self.started = threading.Event()

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        self.started.set()
        if self.broken:
            raise BrokenPipeError(32, "Broken pipe")
        time.sleep(0.0005)
        n = min(len(b), self.step)
        self.data += bytes(b[:n])
        return n


def test_spool_keeps_the_order_across_memory_and_its_file(monkeypatch):
    monkeypatch.setattr(spool, "MEMORY", 50_000)
    monkeypatch.setattr(spool, "CHUNK", 1000)
    sink = _Sink()
    want = b"".join(b"%06d:" % i + bytes([i % 251]) * (i % 300) for i in range(3000))
    with spool.spooled(sink) as out:
        for i in range(3000):
            out.write(b"%06d:" % i + bytes([i % 251]) * (i % 300))
        assert out._file is not None  # more waited than MEMORY: the rest went to the file
    assert bytes(sink.data) == want


def test_spool_raises_the_sinks_failure_and_drops_the_rest():
    sink = _Sink(broken=True)
    with pytest.raises(BrokenPipeError):
        with spool.spooled(sink) as out:
            out.write(b"x" * spool.CHUNK)  # handed over: the thread meets the broken sink
            assert sink.started.wait(10)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                out.write(b"y" * spool.CHUNK)  # raises once the thread's failure is known
                time.sleep(0.01)
    assert sink.data == b""
