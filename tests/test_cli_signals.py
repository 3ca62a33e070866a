"""Ctrl-C and SIGTERM against real `mqcli` processes (SPEC §6: exit 130, "nothing half-done is
left behind"; SIGTERM is treated the same, exit 143): what a command committed is what it
printed, files are whole or untouched, and the error is one line with no traceback."""

import json
import os
import signal
import subprocess
import time

import pytest

from cli_helpers import Cli, mqcli_command
from store import NewMessage, Store

INTERRUPTED = "mqcli: error: interrupted [INTERRUPTED]\n"
TERMINATED = "mqcli: error: terminated (SIGTERM) [INTERRUPTED]\n"
CODE = {signal.SIGINT: 130, signal.SIGTERM: 143}
MESSAGE = {signal.SIGINT: INTERRUPTED, signal.SIGTERM: TERMINATED}


@pytest.fixture
def spawn():
    """Start `mqcli ARGS` with Popen; whatever is still running at teardown is killed."""
    started = []

    def start(cli, *args, **kw):
        proc = subprocess.Popen([*mqcli_command(), *map(str, args)], env={**os.environ, **cli.env},
                                stderr=subprocess.PIPE, **kw)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def depth(cli: Cli, queue: str = "q") -> int:
    with Store.open(cli.store) as st:
        return st.queue_info(queue).depth


def fill(cli: Cli, n: int, queue: str = "q") -> None:
    with Store.open(cli.store) as st:
        if queue not in {q.name for q in st.list_queues()}:
            st.create_queue(queue)
        for start in range(0, n, 10_000):
            st.put_many(queue, [NewMessage(b"m-%07d" % i) for i in range(start, min(n, start + 10_000))])


def wait_for(predicate, proc, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, "the command ended before the moment to signal it"
        assert time.monotonic() < deadline, "timed out waiting for the command to get going"
        time.sleep(0.002)


def finish(proc, timeout=60):
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err.decode("utf-8", "backslashreplace")


# ---- export --to is whole or nothing ------------------------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_export_to_a_file_leaves_no_part_file_and_the_old_file_untouched(cli, spawn, tmp_path, signum):
    fill(cli, 300_000)
    target = tmp_path / "out" / "dump.jsonl"
    target.parent.mkdir()
    target.write_bytes(b"the old dump\n")
    proc = spawn(cli, "export", "q", "--to", target, stdout=subprocess.DEVNULL)
    wait_for(lambda: any(p.name.endswith(".part") and p.stat().st_size > 0 for p in target.parent.iterdir()),
             proc)
    proc.send_signal(signum)
    code, err = finish(proc)
    assert (code, err) == (CODE[signum], MESSAGE[signum])
    assert sorted(p.name for p in target.parent.iterdir()) == ["dump.jsonl"]
    assert target.read_bytes() == b"the old dump\n"
    assert depth(cli) == 300_000


# ---- start-up -----------------------------------------------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_start_up_is_one_line_and_the_documented_exit_code(cli, spawn, signum):
    # from when the interpreter is up (its own start takes ~20 ms) through the imports (~0.2 s)
    # into the wait: the old code printed a KeyboardInterrupt traceback, or died of SIGTERM
    for step in range(24):
        proc = spawn(cli, "get", "q", "--wait", "5s", stdout=subprocess.PIPE)
        time.sleep(0.06 + step * 0.015)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
        assert (proc.returncode, out, err.decode()) == (CODE[signum], b"", MESSAGE[signum]), step


def test_a_signal_while_a_get_waits_is_one_line_and_a_json_error(cli, spawn):
    proc = spawn(cli, "get", "q", "--wait", "forever", "-o", "json", stdout=subprocess.PIPE)
    time.sleep(0.8)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and out == b""
    assert err.decode().splitlines() == [TERMINATED.strip(), json.dumps(
        {"error": {"status": "INTERRUPTED", "code": None, "message": "terminated (SIGTERM)"}})]
