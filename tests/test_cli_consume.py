"""`mqcli consume QUEUE --exec CMD` with real commands and real processes: exit status decides
confirm or undo, a hung command is killed at its lease, parallel commands handle each message
once, Ctrl-C lets running commands finish, and a worker SIGKILLed at random moments loses
nothing and never hands a message out twice without the store knowing (a backout)."""

import hashlib
import json
import os
import random
import resource
import signal
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from channel_helpers import wait_until
from cli_helpers import mqcli_command
from mqcli.commands.consume import store_lease
from store import NewMessage, Store

# each handling leaves a file: msg_id, backouts and body, one per line
RECORD = 'printf "%s\\n%s\\n%s\\n" "$MQ_MSG_ID" "$MQ_BACKOUTS" "$(cat)" > "$OUT/$(date +%s%N)-$$"'


def fill(cli, n, **kw):
    with Store.open(cli.store) as st:
        return st.put_many("q", [NewMessage(b"b%03d" % i, **kw) for i in range(n)])


def handled(out):
    """(msg_id, backouts, body) of every handling, in no order."""
    return [tuple(p.read_text().split("\n")[:3]) for p in out.iterdir()]


def states(cli, queue="q"):
    with Store.open(cli.store) as st:
        return [m.state for m in st.browse(queue, states="all")]


def test_exit_status_confirms_or_undoes_and_max_backouts_dead_letters(cli, tmp_path):
    cli.ok("queue", "set", "q", "--max-backouts", "2")
    with Store.open(cli.store) as st:
        st.put_many("q", [NewMessage(b"good %d" % i) for i in range(4)]
                    + [NewMessage(b"bad", props={"kind": "poison"})])
    out = tmp_path / "out"
    out.mkdir()
    result = cli.subprocess("consume", "q", "--exec", f'[ "$MQ_PROP_kind" != poison ] && {RECORD}',
                            "--idle", "1s", "-o", "json", env={"OUT": str(out)}, timeout=120)
    assert result.code == 0, result
    assert result.json() == {"queue": "q", "messages": 6, "confirmed": 4, "undone": 2, "killed": 0,
                             "not_started": 0, "lapsed": 0, "returned": 0}
    assert sorted(body for _, _, body in handled(out)) == [f"good {i}" for i in range(4)]
    assert states(cli) == []
    dead = cli.jsonl("browse", "dead-letter")
    assert [(d["body"], d["backouts"], d["dead_letter_reason"]) for d in dead] == [("bad", 2, "max-backouts")]
    assert cli.ok("check").code == 0


def test_the_command_sees_the_body_and_fields(cli, tmp_path):
    with Store.open(cli.store) as st:
        st.put("q", b"payload\nwith lines", correl_id="c-1", label="the label", priority=6,
               props={"region": "eu", "odd-name": "x"})
    out = tmp_path / "env.json"
    script = ('python3 -c \'import json, os, sys; json.dump({"body": sys.stdin.read(), '
              '**{k: v for k, v in os.environ.items() if k.startswith("MQ_")}}, open(os.environ["OUT"], "w"))\'')
    assert cli.subprocess("consume", "q", "--exec", script, "--count", "1", env={"OUT": str(out)}).code == 0
    seen = json.loads(out.read_text())
    assert seen["body"] == "payload\nwith lines"
    assert (seen["MQ_QUEUE"], seen["MQ_CORREL_ID"], seen["MQ_LABEL"], seen["MQ_PRIORITY"], seen["MQ_BACKOUTS"]) == \
        ("q", "c-1", "the label", "6", "0")
    assert seen["MQ_PROP_region"] == "eu" and seen["MQ_PROP_odd_name"] == "x"
    assert seen["MQ_MSG_ID"].endswith("\\1") and seen["MQ_PUT_TIME"].endswith("Z")


def test_the_command_gets_a_large_body_whole_and_inherits_no_descriptor_or_ignored_sigpipe(cli, tmp_path):
    body = bytes(range(256)) * 4096  # 1 MiB: many times a pipe's buffer, fed while the command runs
    with Store.open(cli.store) as st:
        st.put("q", body)
    out = tmp_path / "seen"
    script = ('grep SigIgn /proc/$$/status > "$OUT.sig"; python3 -c \'import hashlib, json, os, sys; json.dump({'
              '"sha": hashlib.sha256(sys.stdin.buffer.read()).hexdigest(), '
              '"fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")), '
              '"sid": os.getsid(0) in (os.getpid(), os.getppid())}, open(os.environ["OUT"], "w"))\'')
    assert cli.subprocess("consume", "q", "--exec", script, "--count", "1", env={"OUT": str(out)}).code == 0
    seen = json.loads(out.read_text())
    assert seen["sha"] == hashlib.sha256(body).hexdigest()
    # 0-2, and the one python3 opened to list them; nothing of the worker's (store, pipes, FIFOs)
    assert len(seen["fds"]) == 4 and seen["fds"][:3] == [0, 1, 2], seen["fds"]
    assert seen["sid"]  # its own session: a Ctrl-C at the terminal is the worker's
    ignored = int((tmp_path / "seen.sig").read_text().split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1))  # Python ignores SIGPIPE; the command must not


def test_a_command_that_hangs_past_its_lease_is_killed_and_its_message_undone(cli, tmp_path):
    fill(cli, 1)
    result = cli.subprocess("consume", "q", "--exec", "sleep 600", "--lease", "1s", "--count", "1",
                            "-o", "json", timeout=60)
    assert result.code == 0, result
    assert result.json()["killed"] == 1 and "ran past --lease" in result.stderr
    with Store.open(cli.store) as st:
        [m] = st.browse("q", states="all")
    assert (m.state, m.backouts) == ("available", 1)


def test_a_command_that_hangs_without_reading_a_large_body_is_killed_at_its_lease(cli, tmp_path):
    with Store.open(cli.store) as st:
        st.put("q", b"x" * (1 << 20))  # more than a pipe holds: writing it blocks until killed
    result = cli.subprocess("consume", "q", "--exec", "sleep 600", "--lease", "1s", "--count", "1",
                            "-o", "json", timeout=60)
    assert result.code == 0, result
    assert result.json()["killed"] == 1
    with Store.open(cli.store) as st:
        [m] = st.browse("q", states="all")
    assert (m.state, m.backouts) == ("available", 1)


def test_parallel_commands_handle_each_message_exactly_once(cli, tmp_path):
    stored = fill(cli, 60)
    out = tmp_path / "out"
    out.mkdir()
    result = cli.subprocess("consume", "q", "--exec", f"sleep 0.0$((RANDOM % 5)); {RECORD}", "--parallel", "4",
                            "--idle", "1s", "-o", "json", env={"OUT": str(out)}, timeout=180)
    assert result.code == 0, result
    assert result.json()["confirmed"] == 60
    ids = [msg_id for msg_id, _, _ in handled(out)]
    assert sorted(ids) == sorted(m.msg_id for m in stored)
    assert states(cli) == []


def test_ctrl_c_lets_running_commands_finish_and_exits_0(cli, tmp_path):
    fill(cli, 5)
    out = tmp_path / "out"
    out.mkdir()
    started = tmp_path / "started"
    started.mkdir()
    env = {**os.environ, **cli.env, "OUT": str(out)}
    worker = subprocess.Popen([*mqcli_command(), "consume", "q", "--exec", f"touch {started}/$$; sleep 2; {RECORD}",
                               "--parallel", "2"], env=env, stderr=subprocess.PIPE)
    try:  # both running (on a busy machine the second may start well after the first)
        wait_until(lambda: len(list(started.iterdir())) == 2, 30, "two commands to start")
        worker.send_signal(signal.SIGINT)
        _, err = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, err
    finished = handled(out)
    assert len(finished) == 2  # the two that were running finished, and were confirmed
    with Store.open(cli.store) as st:
        left = st.browse("q", states="all")
    assert len(left) == 3 and {m.state for m in left} == {"available"} and {m.backouts for m in left} == {0}


def _wait_for_leases_to_lapse(cli, latest):
    """Sleep until the store lease of every message the killed worker held has run out (its
    leases as stored, read without undoing them), as long as the semantics need and no longer;
    every lease ends by `latest` (twice --lease after the worker's last get, before its kill)."""
    with Store.open(cli.store) as st, st.as_is():
        leases = [m.lease_expires for m in st.browse("q", states="all") if m.state != "available"]
    assert all(lease is not None and lease / 1e6 <= latest for lease in leases), (leases, latest)
    if leases:
        time.sleep(max(0.0, max(leases) / 1e6 - time.time()) + 0.05)


@pytest.mark.slow
def test_a_worker_killed_at_random_moments_loses_nothing_and_never_hands_out_twice_unknown(cli, tmp_path):
    stored = fill(cli, 40)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, **cli.env, "OUT": str(out)}
    rng = random.Random(15)
    for _ in range(20):
        worker = subprocess.Popen([*mqcli_command(), "consume", "q", "--exec", f"sleep 0.05; {RECORD}",
                                   "--lease", "1s", "--parallel", "2"], env=env, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 1.5))
        killed_at = time.time()
        worker.kill()
        worker.wait(timeout=30)
        _wait_for_leases_to_lapse(cli, killed_at + store_lease(1.0))
        assert cli.subprocess("sweep").code == 0
        assert set(states(cli)) <= {"available"}, "a killed worker's message is still held"
    assert cli.subprocess("consume", "q", "--exec", RECORD, "--idle", "1s", env={"OUT": str(out)},
                          timeout=120).code == 0
    records = handled(out)
    by_id: dict[str, list[int]] = {}
    for msg_id, backouts, _ in records:
        by_id.setdefault(msg_id, []).append(int(backouts))
    assert sorted(by_id) == sorted(m.msg_id for m in stored)  # every message handled
    for msg_id, seen in by_id.items():
        # handled again only after the store took it back (a lapse counts a backout)
        assert len(seen) == len(set(seen)), (msg_id, seen)
    assert states(cli) == [] and cli.jsonl("browse", "dead-letter") == []
    assert cli.ok("check").code == 0


def _worker(cli, *args, env=None, **popen):
    return subprocess.Popen([*mqcli_command(), "consume", "q", *args], env={**os.environ, **cli.env, **(env or {})},
                            **popen)


def _until(path):
    """Shell: wait until `path` exists (the test says when a command may end)."""
    return f"while [ ! -e {path} ]; do sleep 0.02; done"


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


@contextmanager
def _stopped_while_its_command_ends(cli, tmp_path, out):
    """A worker of one message (--lease 1s, -o json) stopped (SIGSTOP) while its command ends
    with exit 0, recorded in `out`; the block runs while it is stopped, then it goes on, and
    its (stdout, stderr) are in `worker.said`."""
    started, go = tmp_path / "started", tmp_path / "go"
    worker = _worker(cli, "--exec", f"touch {started}; {_until(go)}; {RECORD}", "--lease", "1s", "--count", "1",
                     "-o", "json", env={"OUT": str(out)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(started.exists, 30, "the command to start")
        worker.send_signal(signal.SIGSTOP)
        go.touch()
        wait_until(lambda: list(out.iterdir()), 30, "the command to finish")
        yield worker
        worker.send_signal(signal.SIGCONT)
        worker.said = worker.communicate(timeout=60)
    finally:
        worker.kill()


def test_a_command_that_exited_0_is_confirmed_however_late_a_stalled_worker_looks(cli, tmp_path):
    # the worker is stopped past --lease (but within the store lease) while its command exits
    # 0: it ran past nothing, and is confirmed; it was reported "killed past --lease" and
    # undone (a backout, maybe a dead letter) when the lease timer ran first on resuming
    cli.ok("queue", "set", "q", "--max-backouts", "1")
    fill(cli, 1)
    out = tmp_path / "out"
    out.mkdir()
    with _stopped_while_its_command_ends(cli, tmp_path, out) as worker:
        time.sleep(1.2)  # past --lease 1s; the store lease is 2s
    stdout, err = worker.said
    assert worker.returncode == 0, err
    assert json.loads(stdout)["confirmed"] == 1 and b"ran past --lease" not in err, err
    assert len(handled(out)) == 1 and states(cli) == [] and cli.jsonl("browse", "dead-letter") == []


def test_a_killed_workers_command_is_killed_too_and_never_reads_a_cut_body(cli, tmp_path):
    # the command would otherwise run on past its lease beside the message's next delivery,
    # and one reading its body from a pipe saw the body end where the dead worker stopped
    with Store.open(cli.store) as st:
        st.put("q", b"x" * 3_000_000)
    pid_file, out = tmp_path / "pid", tmp_path / "out"
    worker = _worker(cli, "--exec", f'echo $$ > {pid_file}; sleep 1; wc -c > {out}; sleep 600', "--lease", "1s",
                     stderr=subprocess.DEVNULL)
    try:
        pid = int(wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 30, "the command"))
        worker.kill()
        worker.wait(timeout=30)
        wait_until(lambda: not _alive(pid), 30, "the killed worker's command to end")
    finally:
        worker.kill()
    time.sleep(1.2)  # when the command would have read its body
    assert not out.exists()
    time.sleep(store_lease(1.0))
    result = cli.subprocess("consume", "q", "--exec", f"wc -c > {out}", "--idle", "1s", timeout=120)
    assert result.code == 0, result
    assert out.read_text().split() == ["3000000"]


def test_a_closed_output_pipe_stops_the_worker_with_141_and_dead_letters_nothing(cli, tmp_path):
    # the commands write to the worker's stdout: once its reader is gone every one fails,
    # and each failure was a backout, taking the whole queue to the dead-letter queue; the
    # commands running when it went die of SIGPIPE: their messages go back without a backout
    # (at max-backouts 1 one was dead-lettered though no handler failed on it)
    cli.ok("queue", "set", "q", "--max-backouts", "1")
    fill(cli, 20)
    worker = _worker(cli, "--exec", "cat; echo; sleep 0.2", "-P", "2", "--idle", "2s",
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert worker.stdout.readline().startswith(b"b00")  # two commands write at once: b000b001\n too
        worker.stdout.close()
        _, err = worker.communicate(timeout=60)
    finally:
        worker.kill()
    assert worker.returncode == 141, err
    with Store.open(cli.store) as st:
        left = st.browse("q", states="all")
        got = {s.name: s.totals["got_messages"] for s in st.stats()}["q"]
    # how many handlers finished before the reader went depends on the machine's load; every
    # message is either confirmed (its output written whole) or back, as it was
    assert got >= 1 and len(left) + got == 20, (got, len(left))
    assert {m.state for m in left} == {"available"} and {m.backouts for m in left} == {0}
    assert cli.jsonl("browse", "dead-letter") == []
    assert b"back without a backout: the output closed" in err or len(left) == 19, err


def test_a_full_output_stops_the_worker_with_8_and_dead_letters_nothing(cli):
    # every command failed writing to /dev/full (or a full disk) and each failure was a
    # backout: at max-backouts 1 every message went to the dead-letter queue, exit 0
    cli.ok("queue", "set", "q", "--max-backouts", "1")
    fill(cli, 5)
    with open("/dev/full", "wb") as full:
        worker = _worker(cli, "--exec", "cat", "--idle", "2s", stdout=full, stderr=subprocess.PIPE)
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 8 and b"stdout's device is full" in err, err
    assert held(cli) == [(f"b{i:03d}", "available", 0) for i in range(5)]
    assert cli.jsonl("browse", "dead-letter") == []


def test_a_full_output_that_its_commands_do_not_write_to_stops_nothing(cli):
    # the worker stopped before its first message whenever its stdout (its log) was full,
    # though its commands never wrote there: only a command that failed meanwhile says so
    fill(cli, 5)
    with open("/dev/full", "wb") as full:
        worker = _worker(cli, "--exec", "cat >/dev/null", "--idle", "2s", "-q", stdout=full, stderr=subprocess.PIPE)
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert held(cli) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_an_output_disk_that_fills_up_returns_messages_without_a_backout(cli, tmp_path):
    # the disk fills while the worker runs: the command that fails writing its output is not
    # the message's fault, and the worker stops with exit 8 rather than fail every message
    cli.ok("queue", "set", "q", "--max-backouts", "1")
    with Store.open(cli.store) as st:
        st.put_many("q", [NewMessage(b"x" * 6000) for _ in range(6)])
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        with open(disk / "out", "wb") as out:
            worker = _worker(cli, "--exec", "cat", "--idle", "2s", stdout=out, stderr=subprocess.PIPE)
            _, err = worker.communicate(timeout=60)
    finally:
        subprocess.run(["umount", str(disk)], check=True)
    assert worker.returncode == 8 and b"back without a backout: the output is full" in err, err
    with Store.open(cli.store) as st:
        left = st.browse("q", states="all")
        got = {s.name: s.totals["got_messages"] for s in st.stats()}["q"]
    assert got == 2 and len(left) == 4, (got, left)  # 16 KiB: two bodies whole, the third cut
    assert {m.state for m in left} == {"available"} and {m.backouts for m in left} == {0}
    assert cli.jsonl("browse", "dead-letter") == []


def test_a_failing_message_is_retried_with_a_growing_pause_not_in_a_hot_loop(cli, tmp_path):
    fill(cli, 1)  # max-backouts 0: it stays at the head of the queue, failing
    worker = _worker(cli, "--exec", "cat >/dev/null; exit 1", stderr=subprocess.DEVNULL)

    def backouts() -> int:
        with Store.open(cli.store) as st:
            return sum(m.backouts for m in st.browse("q", states="all"))

    for _ in range(600):  # running (and handling Ctrl-C) once the first failure is in, however slow its start
        if backouts():
            break
        time.sleep(0.05)
    first = backouts()
    time.sleep(1.5)
    worker.send_signal(signal.SIGINT)
    assert worker.wait(timeout=60) == 0
    # pauses of 50, 100, 200, 400 and 800 ms fill 1.55 s: at most six tries more (it was hundreds)
    assert 1 <= first <= backouts() <= first + 6, (first, backouts())


@pytest.mark.parametrize("args", [["--exec", ""], ["--exec", "  "], ["--exec", "true", "--lease", "0"],
                                  ["--exec", "true", "--lease", "0ms"], ["--exec", "true", "--lease", "0.0001ms"]])
def test_an_empty_command_or_a_lease_of_nothing_is_a_usage_error(cli, args):
    fill(cli, 2)
    result = cli.subprocess("consume", "q", *args, "--idle", "1s")
    assert result.code == 2 and len(result.stderr.strip().splitlines()) == 1, result
    assert len(states(cli)) == 2


def test_every_property_reaches_the_command_unambiguously(cli, tmp_path):
    with Store.open(cli.store) as st:
        st.put("q", b"x", props={"a b": "space", "a_b": "underscore", "a-b": "dash", "é": "accent", "z\0": "n\0ul"})
    out = tmp_path / "env"
    result = cli.subprocess("consume", "q", "--exec", f"env > {out}", "--count", "1",
                            env={"MQ_PROP_stale": "from the worker's environment"})
    assert result.code == 0, result
    seen = dict(line.split("=", 1) for line in out.read_text().splitlines() if line.startswith("MQ_PROP"))
    assert json.loads(seen.pop("MQ_PROPS")) == {"a b": "space", "a_b": "underscore", "a-b": "dash", "é": "accent",
                                                 "z\0": "n\0ul"}
    assert seen.pop("MQ_PROPS_OMITTED") == ""
    # a name that needs no change has its variable; of the others, the first in order
    assert seen == {"MQ_PROP_a_b": "underscore", "MQ_PROP__": "accent", "MQ_PROP_z_": "nul"}


@contextmanager
def _two_commands_running(cli, tmp_path):
    """A worker (--parallel 2, -o json) of two messages, both commands running (`sleep 600`,
    each its pid as a file in `started`): (worker, started); killed after the block."""
    fill(cli, 2)
    started = tmp_path / "started"
    started.mkdir()
    worker = _worker(cli, "--exec", f"touch {started}/$$; exec sleep 600", "--parallel", "2", "-o", "json",
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: len(list(started.iterdir())) == 2, 30, "two commands to start")
        yield worker, started
    finally:
        worker.kill()


@pytest.mark.parametrize("signals, code", [((signal.SIGINT, signal.SIGINT), 130),
                                           ((signal.SIGTERM, signal.SIGTERM), 143)])
def test_a_second_signal_kills_the_commands_undoes_their_messages_and_exits_as_interrupted(cli, tmp_path, signals,
                                                                                           code):
    with _two_commands_running(cli, tmp_path) as (worker, started):
        worker.send_signal(signals[0])
        time.sleep(0.3)
        worker.send_signal(signals[1])
        stdout, err = worker.communicate(timeout=60)
    assert worker.returncode == code, err
    assert json.loads(stdout)["undone"] == 2
    assert not any(_alive(int(p.name)) for p in started.iterdir())
    with Store.open(cli.store) as st:
        assert [m.state for m in st.browse("q", states="all")] == ["available"] * 2


def test_a_confirm_that_comes_after_the_lease_lapsed_is_not_counted_confirmed(cli, tmp_path):
    fill(cli, 1)
    out = tmp_path / "out"
    out.mkdir()
    with _stopped_while_its_command_ends(cli, tmp_path, out) as worker:
        time.sleep(store_lease(1.0) + 0.5)  # its store lease lapses while it is stopped
        assert cli.subprocess("consume", "q", "--exec", RECORD, "--count", "1", env={"OUT": str(out)}).code == 0
    stdout, err = worker.said
    assert worker.returncode == 0, err
    summary = json.loads(stdout)
    assert (summary["messages"], summary["confirmed"], summary["lapsed"]) == (1, 0, 1), summary
    assert b"handled, but not confirmed" in err
    assert sorted(backouts for _, backouts, _ in handled(out)) == ["0", "1"] and states(cli) == []


def test_a_closed_stderr_does_not_fail_the_worker(cli, tmp_path):
    fill(cli, 2)
    worker = _worker(cli, "--exec", "exit 1", "--count", "2", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    worker.stderr.close()  # the notes of the failed commands have no reader
    assert worker.wait(timeout=60) == 0
    with Store.open(cli.store) as st:  # two failures, each a backout (the first message back at the head)
        assert sum(m.backouts for m in st.browse("q")) == 2


def test_a_worker_started_with_sigchld_ignored_still_sees_each_exit_status(cli, tmp_path):
    # with SIGCHLD ignored (as some supervisors start processes) the commands were reaped
    # unseen and Python reported their status as 0: every failing message was confirmed
    fill(cli, 2)
    worker = _worker(cli, "--exec", '[ "$(cat)" = b000 ]', "--count", "2", "-o", "json", stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, preexec_fn=lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN))
    stdout, err = worker.communicate(timeout=60)
    assert worker.returncode == 0 and b"Traceback" not in err, err
    summary = json.loads(stdout)
    assert (summary["confirmed"], summary["undone"]) == (1, 1), summary
    with Store.open(cli.store) as st:
        assert [(m.body, m.backouts) for m in st.browse("q")] == [(b"b001", 1)]


def held(cli, queue="q"):
    """(body, state, backouts) of every message of `queue`, in flight or not, sorted."""
    with Store.open(cli.store) as st:
        return sorted((m.body.decode(), m.state, m.backouts) for m in st.browse(queue, states="all"))


@pytest.mark.parametrize("stop, status", [("count", 0), ("count", 1), ("sigterm", 0)])
def test_a_stopping_worker_confirms_or_undoes_a_message_at_once_not_after_its_slowest_command(cli, tmp_path, stop,
                                                                                             status):
    # stopping (at --count, or at the first Ctrl-C or SIGTERM) the worker takes no next message,
    # whose get would carry the confirm: it was committed only when the last command ended,
    # up to twice --lease after the get, and the store lease (--lease plus up to 30s) could
    # lapse first; the message went back with a backout and was handled again
    fill(cli, 2)
    started, first_ends, second_ends = tmp_path / "started", tmp_path / "first-ends", tmp_path / "second-ends"
    started.mkdir()
    command = (f'b=$(cat); touch {started}/$b; if [ "$b" = b000 ]; then {_until(first_ends)}; exit {status}; fi; '
               f'{_until(second_ends)}')
    worker = _worker(cli, "--exec", command, "--parallel", "2", "--lease", "2m", "-o", "json",
                     *(["--count", "2"] if stop == "count" else []), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: len(list(started.iterdir())) == 2, 30, "two commands to start")
        if stop == "sigterm":
            worker.send_signal(signal.SIGTERM)
        first_ends.touch()
        # b000's command ended, b001's runs on: b000 is confirmed (gone), or undone, meanwhile
        meanwhile = [("b001", "get-unconfirmed", 0)] + ([("b000", "available", 1)] if status else [])
        wait_until(lambda: held(cli) == sorted(meanwhile), 30, "b000 settled while b001's command runs")
        second_ends.touch()
        stdout, err = worker.communicate(timeout=60)
    finally:
        worker.kill()
    assert worker.returncode == 0, err
    summary = json.loads(stdout)
    assert (summary["messages"], summary["confirmed"], summary["undone"], summary["lapsed"]) == \
        (2, 2 - status, status, 0), summary
    assert b"not confirmed" not in err, err
    assert held(cli) == ([("b000", "available", 1)] if status else [])


def test_idle_time_counts_from_when_the_last_command_ended_not_from_when_its_message_was_taken(cli, tmp_path):
    # --idle 3s and a command of 3.5s: the worker exited as soon as the command ended,
    # leaving a message put a moment later in the queue
    fill(cli, 1)
    out = tmp_path / "out"
    out.mkdir()
    worker = _worker(cli, "--exec", 'b=$(cat); [ "$b" != b000 ] || sleep 3.5; touch "$OUT/$b"', "--idle", "3s",
                     "--parallel", "2", "-o", "json", env={"OUT": str(out)}, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE)
    try:
        # b000's confirm is committed by the worker's first look for a message after its
        # command ended: from then on it is idle, and waits 3s for the next one
        wait_until(lambda: held(cli) == [], 60, "b000 to be handled and confirmed")
        with Store.open(cli.store) as st:
            st.put("q", b"b001")
        stdout, err = worker.communicate(timeout=60)
    finally:
        worker.kill()
    assert worker.returncode == 0, err
    assert (json.loads(stdout)["messages"], json.loads(stdout)["confirmed"]) == (2, 2), stdout
    assert sorted(p.name for p in out.iterdir()) == ["b000", "b001"] and held(cli) == []


def test_a_property_too_large_for_the_environment_is_left_out_and_the_command_still_runs(cli, tmp_path):
    # one environment string is at most 128 KiB on Linux: the command of a message with a
    # larger property could not start (E2BIG), which counted as its failure, a backout, and it
    # was taken again for ever (or dead-lettered), holding up the message behind it
    cli.ok("queue", "set", "q", "--max-backouts", "1")
    with Store.open(cli.store) as st:
        [big] = st.put_many("q", [NewMessage(b"big", props={"k": "a" * 140_000, "small": "s"})])
        st.put("q", b"normal", props={"k": "v"})
    out = tmp_path / "out"
    out.mkdir()
    script = ('python3 -c \'import json, os, sys; body = sys.stdin.read(); json.dump({"body": body, '
              '**{k: v for k, v in os.environ.items() if k.startswith("MQ_PROP")}}, open(os.environ["OUT"] + "/" + body, "w"))\'')
    result = cli.subprocess("consume", "q", "--exec", script, "--idle", "1s", "-o", "json", env={"OUT": str(out)})
    assert result.code == 0, result
    assert result.json() == {"queue": "q", "messages": 2, "confirmed": 2, "undone": 0, "killed": 0,
                             "not_started": 0, "lapsed": 0, "returned": 0}
    assert result.err_lines == [f"mqcli: message {big.msg_id}: properties too large for the environment left out: k"]
    seen = {p.name: json.loads(p.read_text()) for p in out.iterdir()}
    assert seen == {
        "big": {"body": "big", "MQ_PROPS": '{"small": "s"}', "MQ_PROP_small": "s", "MQ_PROPS_OMITTED": '["k"]'},
        "normal": {"body": "normal", "MQ_PROPS": '{"k": "v"}', "MQ_PROP_k": "v", "MQ_PROPS_OMITTED": ""},
    }
    assert states(cli) == [] and states(cli, "dead-letter") == []


def _children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return f.read().split()


def test_a_worker_whose_own_environment_leaves_no_room_gives_the_message_back_and_exits_2(cli, tmp_path):
    # ARG_MAX is a quarter of the stack limit: lowered under the worker's own environment once
    # it runs, no command can start. That is no fault of the message's: it goes back without a
    # backout, and the worker stops rather than taking it again for ever
    cli.ok("queue", "set", "q", "--max-backouts", "1")
    big = {f"MQCLI_TEST_BIG{i}": "x" * 100_000 for i in range(3)}  # more than ARG_MAX at a 1 MiB stack
    worker = _worker(cli, "--exec", "cat", "--idle", "5s", "-o", "json", env=big, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE)
    try:
        wait_until(lambda: _children(worker.pid), 30, "the worker's lifeline to start")  # it waits for a message
        _, hard = resource.prlimit(worker.pid, resource.RLIMIT_STACK)
        resource.prlimit(worker.pid, resource.RLIMIT_STACK, (1 << 20, hard))
        [m] = fill(cli, 1)
        stdout, err = worker.communicate(timeout=60)
    finally:
        worker.kill()
    assert worker.returncode == 2, err
    assert [json.loads(line) for line in err.splitlines()] == [{"error": {
        "status": "USAGE", "code": None, "exit": 2,
        "message": f"message {m.msg_id}: cannot run /bin/sh: Argument list too long: the worker's environment and "
                   "--exec leave no room for a message's variables (start it with a smaller environment, or a larger "
                   "stack limit: ulimit -s); the message went back without a backout"}}]
    assert json.loads(stdout) == {"queue": "q", "messages": 1, "confirmed": 0, "undone": 1, "killed": 0,
                                  "not_started": 1, "lapsed": 0, "returned": 1}
    assert held(cli) == [("b000", "available", 0)] and states(cli, "dead-letter") == []


def test_a_stopped_workers_command_is_killed_before_its_message_may_run_elsewhere(cli, tmp_path):
    # the worker kills its command at --lease with a timer of its own, which a stopped worker
    # (SIGSTOP, a debugger, a frozen cgroup) never runs: the store lease of the message lapsed
    # and another worker ran it while the first command still ran. The lifeline's watcher, a
    # process of its own, kills it between --lease and the store lease
    fill(cli, 1)
    pid_file = tmp_path / "pid"
    worker = _worker(cli, "--exec", f"echo $$ > {pid_file}; exec sleep 600", "--lease", "1s", "--count", "1",
                     "-o", "json", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        pid = int(wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 30, "the command"))
        worker.send_signal(signal.SIGSTOP)
        started = time.monotonic()
        wait_until(lambda: not _alive(pid), 30, "the stopped worker's command to be killed")
        assert time.monotonic() - started < store_lease(1.0), "killed after its message could run elsewhere"
        worker.send_signal(signal.SIGCONT)
        stdout, err = worker.communicate(timeout=60)
    finally:
        worker.kill()
    assert worker.returncode == 0, err
    summary = json.loads(stdout)
    assert (summary["confirmed"], summary["undone"]) == (0, 1), summary
    time.sleep(store_lease(1.0))  # whichever undid it, the message is back once, with one backout
    assert held(cli) == [("b000", "available", 1)]


# a worker that has started a command's shell and is SIGKILLed before it tells its watcher of
# it: the one moment of a command's start that no watcher covers
_KILLED_AT_START = """
import os, signal, sys
from mqcli.lifeline import Lifeline
body, ran, open_gate = sys.argv[1], sys.argv[2], sys.argv[3] == "open"
with open(body, "rb") as stdin, Lifeline() as line:
    proc, gate = line.spawn(f"echo ran > {ran}", stdin, dict(os.environ))
    print(proc.pid, flush=True)
    if open_gate:
        gate.open()
        proc.wait()
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("open_gate", [False, True])
def test_a_command_whose_worker_is_killed_before_it_tells_the_watcher_never_runs(tmp_path, open_gate):
    # a worker SIGKILLed between starting a command and telling its lifeline's watcher left a
    # command no one would kill: it ran on while its message, back in the queue once the lease
    # lapsed, ran again elsewhere. The command waits at a gate the worker opens only after
    body, ran = tmp_path / "body", tmp_path / "ran"
    body.write_bytes(b"m")
    worker = subprocess.run([sys.executable, "-c", _KILLED_AT_START, str(body), str(ran),
                             "open" if open_gate else "closed"], capture_output=True, timeout=60)
    assert worker.returncode == -signal.SIGKILL, worker
    shell = int(worker.stdout)
    wait_until(lambda: not _alive(shell), 30, "the command's shell to end")
    assert ran.exists() == open_gate  # opened: it ran (the test can see a run); closed: never


def test_a_shell_that_skipped_its_gate_is_told_apart_from_one_that_passed(tmp_path):
    # a shell that cannot read the worker's /proc/PID/fd (a worker that is not dumpable) ends
    # without running its command: the worker must not take that for the message failing
    from mqcli.lifeline import Gate

    for prefix, passed in ((None, True), ("exit 125; ", False)):
        gate = Gate()
        try:
            proc = subprocess.Popen(["/bin/sh", "-c", (prefix or gate.prefix) + "true"])
            gate.open()
            proc.wait(timeout=30)
            assert gate.passed() is passed
        finally:
            gate.close()


@pytest.mark.skipif(subprocess.run(["unshare", "-p", "-f", "true"], capture_output=True).returncode != 0,
                    reason="needs unshare -p (a PID namespace: root)")
def test_a_worker_in_a_pid_namespace_that_shows_the_machines_proc_runs_every_command(cli, tmp_path):
    # in `unshare -p -f` without --mount-proc, os.getpid() is the namespace's and /proc the
    # machine's: every shell read another process's /proc/PID/fd, exited 125 without running
    # its command, and each message went, backout by backout, to the dead-letter queue
    cli.ok("queue", "set", "q", "--max-backouts", "1")
    fill(cli, 5)
    out = tmp_path / "out"
    out.mkdir()
    worker = subprocess.run(["unshare", "-p", "-f", *mqcli_command(), "consume", "q", "--exec", RECORD, "--idle", "2s"],
                            env={**os.environ, **cli.env, "OUT": str(out)}, capture_output=True, timeout=120)
    assert worker.returncode == 0, worker
    assert sorted(body for _, _, body in handled(out)) == [f"b{i:03d}" for i in range(5)]
    assert held(cli) == [] and cli.jsonl("browse", "dead-letter") == []


@pytest.mark.parametrize("command, status, why", [
    ("/nonexistent/handler", 127, "not found"),
    ("{script}", 126, "found but not executable"),
])
def test_a_command_the_shell_cannot_run_stops_the_worker_and_dead_letters_nothing(cli, tmp_path, command, status, why):
    # every message failed with the shell's 127 (or 126) and went, backout by backout, to the
    # dead-letter queue, and the worker exited 0: a typo in --exec emptied the queue
    cli.ok("queue", "set", "q", "--max-backouts", "1")
    script = tmp_path / "handler.sh"
    script.write_text("#!/bin/sh\ncat\n")
    script.chmod(0o644)
    messages = fill(cli, 3)
    result = cli.subprocess("consume", "q", "--exec", command.format(script=script), "--idle", "5s", "-P", "2",
                            timeout=120)
    assert result.code == 2, result
    errors = [line for line in result.stderr.splitlines() if line.startswith("mqcli: error:")]
    ids = {m.msg_id for m in messages}
    assert len(errors) == 1 and any(errors[0].startswith(f"mqcli: error: message {i}: ") for i in ids), result
    assert (f"the shell could not run the command (exit {status}: {why}; see its stderr); the message went back "
            "without a backout [USAGE]") in errors[0], result
    assert held(cli) == [(f"b{i:03d}", "available", 0) for i in range(3)]
    assert states(cli, "dead-letter") == []


def test_a_worker_started_with_sigint_ignored_keeps_ignoring_it(cli, tmp_path):
    # a shell starts `consume ... &` with SIGINT ignored: the worker acted on it anyway, and a
    # second one killed its commands and exited 0; it stays ignored, SIGTERM still stops it
    fill(cli, 1)
    started = tmp_path / "started"
    worker = _worker(cli, "--exec", f"touch {started}; sleep 2", "--idle", "30s", "-o", "json",
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        wait_until(started.exists, 30, "the command to start")
        worker.send_signal(signal.SIGINT)
        time.sleep(0.3)
        worker.send_signal(signal.SIGINT)
        time.sleep(0.3)
        assert worker.poll() is None, "SIGINT stopped a worker that was started with it ignored"
        worker.send_signal(signal.SIGTERM)  # stop taking messages; the running command finishes
        stdout, err = worker.communicate(timeout=60)
    finally:
        worker.kill()
    assert worker.returncode == 0, err
    assert json.loads(stdout)["confirmed"] == 1, stdout


def test_a_stop_that_signals_the_commands_too_returns_their_messages_without_a_backout(cli, tmp_path):
    # systemd stops a service with SIGTERM to every process of its cgroup: the commands died of
    # the signal that stopped the worker, and each counted a backout (at max-backouts 1, a
    # dead letter) though no handler failed on its message
    cli.ok("queue", "set", "q", "--max-backouts", "1")
    with _two_commands_running(cli, tmp_path) as (worker, started):
        worker.send_signal(signal.SIGTERM)
        for p in started.iterdir():
            os.kill(int(p.name), signal.SIGTERM)
        stdout, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    summary = json.loads(stdout)
    assert (summary["undone"], summary["returned"]) == (2, 2), summary
    assert held(cli) == [("b000", "available", 0), ("b001", "available", 0)]
    assert states(cli, "dead-letter") == []


def test_an_operators_undo_or_a_purge_leaves_a_live_workers_message_and_a_dead_ones_goes_back(cli, tmp_path):
    # `undo --all` took the message a worker's command was still running on: a second worker
    # ran it at the same time, and the first one's confirm was refused. A live worker's
    # messages are its own, as a get's that is writing them out; a killed one's go back
    fill(cli, 1)
    started, go, out = tmp_path / "started", tmp_path / "go", tmp_path / "out"
    out.mkdir()
    worker = _worker(cli, "--exec", f"touch {started}; {_until(go)}; {RECORD}", "--count", "1", "--lease", "60s",
                     "-o", "json", env={"OUT": str(out)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(started.exists, 30, "the command to start")
        undo = cli.subprocess("undo", "--all", "-o", "json")
        assert undo.code == 0 and undo.json()["undone"] == 0, undo
        assert f"1 left in flight: a consumer in process {worker.pid} is delivering them" in undo.stderr, undo
        purge = cli.subprocess("queue", "purge", "q", "--yes", "-o", "json")
        assert purge.code == 0 and purge.json()["removed"] == 0, purge
        second = cli.subprocess("consume", "q", "--exec", RECORD, "--idle", "0.3s", "-o", "json",
                                env={"OUT": str(out)})
        assert second.code == 0 and second.json()["messages"] == 0, second
        go.touch()
        stdout, err = worker.communicate(timeout=60)
    finally:
        worker.kill()
    assert worker.returncode == 0 and json.loads(stdout)["confirmed"] == 1, err
    assert [body for _, _, body in handled(out)] == ["b000"] and states(cli) == []

    fill(cli, 1)
    pid_file = tmp_path / "pid"
    worker = _worker(cli, "--exec", f"echo $$ > {pid_file}; exec sleep 600", "--lease", "60s",
                     stderr=subprocess.DEVNULL)
    try:
        pid = int(wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 30, "the command"))
        worker.kill()
        worker.wait(timeout=30)
        wait_until(lambda: not _alive(pid), 30, "the killed worker's command to be killed too")
    finally:
        worker.kill()
    assert cli.json("undo", "--all")["undone"] == 1
    assert held(cli) == [("b000", "available", 1)]
