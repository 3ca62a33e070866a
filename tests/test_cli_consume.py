"""`mqcli consume QUEUE --exec CMD` with real commands and real processes: exit status decides
confirm or undo, a hung command is killed at its lease, parallel commands handle each message
once, Ctrl-C lets running commands finish, and a worker SIGKILLed at random moments loses
nothing and never hands a message out twice without the store knowing (a backout)."""

import hashlib
import json
import os
import random
import signal
import subprocess
import time

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
                             "not_started": 0, "lapsed": 0}
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
