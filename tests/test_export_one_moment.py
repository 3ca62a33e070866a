"""export reads one moment of the store (Store.view, store/view.py) and spools its output
(mqcli/spool.py): every message once while other processes move messages between queues, and a
reader of the output that stalls does not hold the store's read snapshot."""

import io
import json
import os
import subprocess
import sys
import tempfile
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


def test_spool_without_a_usable_temporary_directory_waits_for_its_sink(monkeypatch, tmp_path):
    # no TMPDIR (or a read-only one, a full one): the export was an internal error, exit 1,
    # after part of its output; now the writer waits for the sink, as without a spool
    monkeypatch.setattr(spool, "MEMORY", 20_000)
    monkeypatch.setattr(spool, "CHUNK", 1000)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    sink = _Sink(step=500)
    want = b"".join(b"%05d" % i * 20 for i in range(2000))
    with spool.spooled(sink) as out:
        for i in range(2000):
            out.write(b"%05d" % i * 20)
        assert out._file is None and out._file_failed
        assert out._in_memory <= spool.MEMORY + spool.CHUNK
    assert bytes(sink.data) == want


def test_spool_file_starts_afresh_once_its_sink_caught_up(monkeypatch):
    monkeypatch.setattr(spool, "MEMORY", 5_000)
    monkeypatch.setattr(spool, "CHUNK", 1000)
    sink = _Sink(step=100_000)
    with spool.spooled(sink) as out:
        for round_ in range(3):
            for i in range(50):
                out.write(b"%d:%04d|" % (round_, i) * 125)  # 1,000-byte chunks, most to the file
            deadline = time.monotonic() + 30
            while out._waiting and time.monotonic() < deadline:  # the sink catches up
                time.sleep(0.01)
        ends = out._end
    assert ends <= 50 * 1000  # one round's worth, not three
    assert bytes(sink.data) == b"".join(b"%d:%04d|" % (r, i) * 125 for r in range(3) for i in range(50))


def test_export_to_a_link_writes_the_file_it_leads_to_and_keeps_the_link(cli, tmp_path):
    # renamed over, the link became a file: `--to /dev/stdout` with stdout a file, as root,
    # replaced /dev/stdout itself and left the redirected file empty
    cli.put("q", "hello")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "real.jsonl")
    cli.ok("export", "q", "--to", tmp_path / "link.jsonl")
    assert (tmp_path / "link.jsonl").is_symlink() and len(_ids((tmp_path / "real.jsonl").read_bytes())) == 1
    with open(tmp_path / "redirected.jsonl", "wb") as f:
        proc = subprocess.run([*mqcli_command(), "export", "q", "--to", "/dev/stdout"], stdout=f,
                              stderr=subprocess.PIPE, env={**os.environ, **cli.env}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert os.path.islink("/dev/stdout") and len(_ids((tmp_path / "redirected.jsonl").read_bytes())) == 1


def test_export_names_a_queue_named_twice_once(cli):
    cli.put("q", "hello")
    r = cli.ok("export", "q", "Q", "q")
    assert len(_ids(r.stdout)) == 1 and r.stdout.count(b"queue_definition") == 1, r


def test_a_parquet_export_to_a_fifo_is_a_usage_error(cli, tmp_path):
    # it opened the view, then waited on the FIFO's open with the snapshot held (deaf to
    # Ctrl-C), and failed on a seek anyway
    fifo = tmp_path / "f.parquet"
    os.mkfifo(fifo)
    r = cli.fails(2, "export", "--format", "parquet", "--to", fifo)
    assert "writes a regular file" in cli.error_line(r)
