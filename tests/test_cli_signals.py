"""Ctrl-C and SIGTERM against real `mqcli` processes (README.md#exit-codes: exit 130, "nothing half-done is
left behind"; SIGTERM is treated the same, exit 143): what a command committed is what it
printed, files are whole or untouched, and the error is one line with no traceback."""

import fcntl
import functools
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from cli_helpers import Cli, mqcli_command
from store import NewMessage, Store

INTERRUPTED = "mqcli: error: interrupted [INTERRUPTED]\n"
TERMINATED = "mqcli: error: terminated (SIGTERM) [INTERRUPTED]\n"
CODE = {signal.SIGINT: 130, signal.SIGTERM: 143}
MESSAGE = {signal.SIGINT: INTERRUPTED, signal.SIGTERM: TERMINATED}


def json_error(signum):
    """The one line an interrupted command prints with -o json|jsonl (instead of MESSAGE)."""
    return json.dumps({"error": {"status": "INTERRUPTED", "code": None, "exit": CODE[signum],
                                 "message": "interrupted" if signum == signal.SIGINT
                                 else "terminated (SIGTERM)"}}) + "\n"


@pytest.fixture
def spawn(spawn):
    """tests/conftest.py's `spawn`, with stderr piped: the tests read the one-line error."""
    return functools.partial(spawn, stderr=subprocess.PIPE)


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


# ---- a bulk put prints the id of every message it committed -------------------------------

BULK = 200_000
DELAYS = (0.0, 0.013, 0.05, 0.11, 0.2, 0.31)  # after the first ids: early and late in a batch


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("mode", ["lines", "jsonl", "count"])
def test_an_interrupted_bulk_put_prints_the_id_of_every_message_it_stored(cli, spawn, tmp_path, mode, signum):
    if mode == "lines":
        source = tmp_path / "bodies.txt"
        source.write_bytes(b"".join(b"line-%06d\n" % i for i in range(BULK)))
        args = ["--lines", source]
    elif mode == "jsonl":
        source = tmp_path / "records.jsonl"
        fill(cli, BULK, "src")
        with open(source, "wb") as out:  # records as `get -o jsonl` prints them, ids kept
            assert subprocess.run([*mqcli_command(), "get", "src", "--all", "-o", "jsonl"], stdout=out,
                                  env={**os.environ, **cli.env}).returncode == 0
        args = ["--jsonl", source]
    else:
        args = ["m", "--count", BULK]
    interrupted = 0
    for run, delay in enumerate(DELAYS):
        queue = f"q{run}"  # each run on its own queue, deleted after it: a msg_id is stored once
        cli.ok("queue", "create", queue, "-q")
        ids = tmp_path / "ids.txt"
        with open(ids, "wb") as out:
            proc = spawn(cli, "put", queue, *args, stdout=out)
            wait_for(lambda ids=ids: ids.stat().st_size > 0, proc)
            time.sleep(delay)
            proc.send_signal(signum)
            code, err = finish(proc)
        printed = ids.read_bytes().splitlines()
        stored = depth(cli, queue)
        assert len(printed) == stored, (delay, code, err)
        assert len(set(printed)) == len(printed)
        if code == 0:  # it finished before the signal came
            assert stored == BULK and err == ""
        else:
            assert (code, err) == (CODE[signum], MESSAGE[signum]), delay
            interrupted += 1
        cli.ok("queue", "delete", queue, "--yes", "-q")  # --jsonl would skip the ids it stored
    assert interrupted >= len(DELAYS) // 2, "too few runs were interrupted to tell anything"


def full_pipe() -> tuple[int, int]:
    """A pipe whose buffer is full: a command writing to it blocks, as under a reader that
    stalled (Ctrl-Z on `| less`, a consumer that hangs)."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"x" * 65536)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)
    return r, w


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("args", [["m", "--count", BULK], ["one"]], ids=["bulk", "single"])
def test_a_put_whose_output_stalled_stops_on_a_signal_and_says_how_many_it_stored(cli, spawn, args, signum):
    # the ids of committed messages are written before a signal acts, but a reader that never
    # reads must not hold Ctrl-C or SIGTERM for ever: stderr then says how many were stored
    r, w = full_pipe()  # (the cli fixture's store has queue q)
    proc = spawn(cli, "put", "q", *args, stdout=w)
    os.close(w)
    try:
        wait_for(lambda: depth(cli) > 0, proc)
        time.sleep(0.3)  # blocked in the write of the ids by now
        proc.send_signal(signum)
        code, err = finish(proc, timeout=30)
    finally:
        os.close(r)
    stored = depth(cli)
    n = "message stored" if stored == 1 else "messages stored"
    assert (code, err) == (CODE[signum], f"{stored} {n}; the output stalled, so not all of their ids "
                                         f"were written\n" + MESSAGE[signum])


def test_a_json_put_stalled_right_after_a_whole_batch_does_not_wait_to_close_its_array(cli, spawn, tmp_path):
    # the pipe is full exactly when the first batch's records are in it: the interrupted write
    # of the second took no byte, and the "]" that closes the array must not wait for a reader
    # that never comes
    other = Cli(tmp_path / "other", tmp_path / "home")  # a store of its own: the same ids, the same sizes
    other.ok("init", "-q")
    other.ok("queue", "create", "q", "-q")
    first = len(other.ok("put", "q", "x", "--count", 1000, "-o", "json").stdout) - len(b"]\n")
    r, w = os.pipe()
    fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ: room for the first batch and more
    room = fcntl.fcntl(w, 1032)  # F_GETPIPE_SZ
    os.set_blocking(w, False)
    os.write(w, b"z" * (room - first))
    os.set_blocking(w, True)
    proc = spawn(cli, "put", "q", "x", "--count", 5000, "-o", "json", stdout=w)
    os.close(w)
    try:
        wait_for(lambda: depth(cli) >= 2000, proc)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        code, err = finish(proc, timeout=30)
    finally:
        os.close(r)
    assert code == 143, err
    assert err.startswith(f"{depth(cli)} messages stored; the output stalled"), err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_tx_begin_whose_output_stalled_names_the_transaction_on_stderr(cli, spawn, signum):
    r, w = full_pipe()
    proc = spawn(cli, "tx", "begin", stdout=w)
    os.close(w)
    try:
        time.sleep(1.5)  # started, begun, and blocked in the write of the id
        proc.send_signal(signum)
        code, err = finish(proc, timeout=30)
    finally:
        os.close(r)
    assert code == CODE[signum], err
    assert err == "transaction 1 was begun; the output stalled, so its id may not have been written\n" \
        + MESSAGE[signum]
    assert [t["tx"] for t in cli.jsonl("tx", "list")] == [1]  # there to commit or abort


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_bench_ends_its_processes_and_removes_its_queue(cli, spawn, signum):
    # Ctrl-C goes to the whole process group, the forked producers and consumers too; SIGTERM
    # to mqcli alone, which ends its children
    proc = spawn(cli, "bench", "--messages", 5_000_000, "--batch", 1000, start_new_session=True)

    def running() -> bool:
        with Store.open(cli.store) as st:
            return any(q.name.startswith("bench.") and q.depth for q in st.list_queues())

    wait_for(running, proc, timeout=60)
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    code, err = finish(proc, timeout=30)
    assert (code, err) == (CODE[signum], MESSAGE[signum])
    with Store.open(cli.store) as st:
        assert not [q.name for q in st.list_queues() if q.name.startswith("bench.")]
    left = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout.split()
    assert left == []  # no producer or consumer outlived it


# ---- a destructive get prints exactly what it removed -------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_get_all_json_printed_exactly_what_it_removed_as_a_whole_array(cli, spawn, tmp_path, signum):
    fill(cli, 400_000)
    interrupted = 0
    for delay in (0.0, 0.02, 0.07, 0.15):
        before = depth(cli)
        got = tmp_path / "got.json"
        with open(got, "wb") as out:
            proc = spawn(cli, "get", "q", "--all", "-o", "json", stdout=out)
            wait_for(lambda got=got: got.stat().st_size > 0, proc)
            time.sleep(delay)
            proc.send_signal(signum)
            code, err = finish(proc)
        array = json.loads(got.read_bytes())  # whole: the array is closed
        assert len(array) == before - depth(cli), (delay, code, err)
        if code != 0:
            assert code == CODE[signum]
            assert err.splitlines()[0] + "\n" == json_error(signum) and "Traceback" not in err
            interrupted += 1
    assert interrupted >= 2


def test_an_interrupted_move_reports_how_many_messages_it_moved(cli, spawn, tmp_path):
    fill(cli, 300_000)
    cli.ok("queue", "create", "r", "-q")
    proc = spawn(cli, "move", "q", "r", "-o", "json", stdout=subprocess.PIPE)
    wait_for(lambda: depth(cli, "r") >= 5_000, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.decode().splitlines()[0] + "\n" == json_error(signal.SIGINT)
    report = json.loads(out)
    assert report["interrupted"] is True
    assert report["moved"] == depth(cli, "r") == 300_000 - depth(cli, "q")


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

def _catches_sigterm(pid: int) -> bool:
    """Whether process `pid` has a handler for SIGTERM (/proc/PID/status SigCgt): mqcli's, set
    first thing (mqcli/signals.py install); before it the process is a bare interpreter."""
    try:
        with open(f"/proc/{pid}/status") as f:
            caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    except (FileNotFoundError, StopIteration):
        return False
    return bool(caught & (1 << (signal.SIGTERM - 1)))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux's /proc/PID/status")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_start_up_is_one_line_and_the_documented_exit_code(cli, spawn, signum):
    # from the moment mqcli's handlers are in place through the imports (~0.1-0.2 s) into the
    # wait: the old code printed a KeyboardInterrupt traceback, or died of SIGTERM. A signal
    # inside the interpreter's own start-up is CPython's to report ("Fatal Python error"), so
    # the steps count from when the process catches SIGTERM, whatever the machine's load
    for step in range(24):
        proc = spawn(cli, "get", "q", "--wait", "5s", stdout=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while not _catches_sigterm(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(step * 0.015)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
        assert (proc.returncode, out, err.decode()) == (CODE[signum], b"", MESSAGE[signum]), step


# a trace function (sys.settrace) sends the signal at the first call of importlib's module-lock
# callback once mqcli's handlers are in place again after start-up's deferral: its handler runs
# inside the callback, as a real signal's does when it comes just as an import ends
_AS_AN_IMPORT_ENDS = """\
import os, signal, sys
from mqcli import signals
from mqcli.__main__ import main

def trace(frame, event, arg):
    if (frame.f_code.co_qualname == "_get_module_lock.<locals>.cb"
            and signal.getsignal(signal.SIGTERM) is signals._terminate):
        sys.settrace(None)
        os.kill(os.getpid(), SIGNUM)

SIGNUM = int(sys.argv[1])
sys.argv = ["mqcli", "get", "q", "--wait", "5s"]
sys.settrace(trace)
main()
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_that_comes_as_a_module_import_ends_is_not_lost(cli, tmp_path, signum):
    # importlib frees a module's lock through a weakref callback, where Python drops an
    # exception (it prints "Exception ignored"): a handler raising there lost the signal, and
    # the get waited its 5 s for an exit 3. The store's modules are imported as the get opens
    # the store, after start-up, so every get had such moments on its way to the wait
    script = tmp_path / "signal_as_an_import_ends.py"
    script.write_text(_AS_AN_IMPORT_ENDS)
    result = subprocess.run([sys.executable, script, str(int(signum))], env={**os.environ, **cli.env},
                            capture_output=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr.decode()) == (CODE[signum], b"", MESSAGE[signum])


# the signal comes as a Deferral swaps SIGTERM's handler, SIGINT's swapped already (hold: both
# to the Deferral's; release: both back): CPython runs the handlers of signals that came before it
# changes one, and the one that runs raises, so that signal.signal never changes SIGTERM's
_AS_THE_HANDLERS_ARE_SWAPPED = """\
import os, signal, sys
from mqcli import signals

signals.install()
swap = signal.signal
armed = []

def swap_after_a_signal(signum, handler):
    if signum == signal.SIGTERM and armed:
        os.kill(os.getpid(), armed.pop())
    return swap(signum, handler)

signal.signal = swap_after_a_signal
if sys.argv[1] == "hold":
    armed.append(signal.SIGTERM)
try:
    with signals.deferred():
        if sys.argv[1] == "release":
            armed.append(signal.SIGINT)
except KeyboardInterrupt as exc:
    print(type(exc).__name__, signal.getsignal(signal.SIGINT) is signal.default_int_handler,
          signal.getsignal(signal.SIGTERM) is signals._terminate)
"""


@pytest.mark.parametrize("moment", ["hold", "release"])
def test_a_signal_as_a_deferral_swaps_the_handlers_leaves_both_of_the_commands_in_place(tmp_path, moment):
    # a handler left as the Deferral's only notes its signal, for as long as the process runs
    # (a `batch` after a follow that Ctrl-C ended): nothing acts on it
    script = tmp_path / "signal_as_the_handlers_are_swapped.py"
    script.write_text(_AS_THE_HANDLERS_ARE_SWAPPED)
    result = subprocess.run([sys.executable, script, moment], capture_output=True, timeout=60)
    raised = "Terminated" if moment == "hold" else "KeyboardInterrupt"
    assert (result.returncode, result.stdout.decode(), result.stderr) == (0, f"{raised} True True\n", b"")


def test_a_signal_while_a_get_waits_is_only_a_json_error(cli, spawn):
    proc = spawn(cli, "get", "q", "--wait", "forever", "-o", "json", stdout=subprocess.PIPE)
    time.sleep(0.8)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and out == b""
    assert err.decode() == json_error(signal.SIGTERM)


def test_a_ctrl_c_that_python_wrapped_while_a_module_imported_is_an_interruption(capsys):
    """A SIGINT landing while a command's module builds a dataclass comes out of Python 3.11 as
    "RuntimeError: Error calling __set_name__" caused by the KeyboardInterrupt: it is exit 130
    and the one interruption line, not an internal error (seen in CI under load)."""
    import click

    from mqcli.app import run

    class Field:
        def __set_name__(self, owner, name):
            raise KeyboardInterrupt

    def import_a_module():
        type("Filter", (), {"msg_id_parts": Field()})

    code = run([], command=click.Command("x", callback=import_a_module))
    assert code == 130
    assert capsys.readouterr().err == "mqcli: error: interrupted [INTERRUPTED]\n"


def test_an_interrupt_caught_after_it_left_an_exec_still_exits_with_the_code_under_python_m(cli, tmp_path):
    # CPython ends a `python -m` process by SIGINT (-2 to a Python caller, where bash shows 130
    # either way) when a KeyboardInterrupt once left an exec of a string, as one landing while
    # a dataclass is made does, even after mqcli caught it and chose its exit code
    (tmp_path / "interrupted_once.py").write_text(
        "import sys\n"
        "from mqcli import fastpath\n"
        "from mqcli.__main__ import main\n"
        "prepared = fastpath.prepared\n"
        "def interrupted_at_the_end(argv):\n"
        "    command = prepared(argv)\n"
        "    def run():\n"
        "        code = command()\n"
        "        try:\n"
        "            exec('raise KeyboardInterrupt', {})\n"
        "        except KeyboardInterrupt:\n"
        "            pass\n"
        "        return code\n"
        "    return run\n"
        "fastpath.prepared = interrupted_at_the_end\n"
        "sys.argv = ['mqcli', 'get', 'q']\n"
        "main()\n")
    env = {**os.environ, **cli.env,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    result = subprocess.run([sys.executable, "-m", "interrupted_once"], env=env, capture_output=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert result.returncode == 3, result  # the empty queue's exit code, not death by SIGINT
