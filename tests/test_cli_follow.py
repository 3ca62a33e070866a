"""`browse --follow` and `get --follow` with a producer in another process: every message seen
once, in queue order; --count and --idle end a follow, Ctrl-C ends it with exit 0."""

import json
import os
import signal
import subprocess
import sys

from channel_helpers import wait_until
from cli_helpers import mqcli_command
from store import Store

N = 40
PRODUCER = """
import sys
from store import Store
with Store.open(sys.argv[1]) as st:
    for i in range(int(sys.argv[2])):
        st.put("q", b"m%03d" % i)
"""


def waiting(store, n):
    """Whether `n` followers sleep on the store's wake-up (their FIFOs are in place)."""
    wait_dir = store / "wait"
    return wait_dir.is_dir() and len([p for p in os.listdir(wait_dir) if not p.startswith("new-")]) >= n


def bodies(stdout):
    return [json.loads(line)["body"] for line in stdout.splitlines() if line.strip()]


def test_followers_see_every_message_of_a_producer_once_in_order_and_ctrl_c_exits_0(cli):
    cli.put("q", "before")
    cli.ok("queue", "create", "r", "-q")
    env = {**os.environ, **cli.env}
    follow = [*mqcli_command(), "browse", "q", "--follow", "-o", "jsonl"]
    counted = subprocess.Popen([*follow, "--count", str(N)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    endless = subprocess.Popen(follow, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    getter = subprocess.Popen([*mqcli_command(), "get", "r", "--follow", "-o", "jsonl"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    procs = [counted, endless, getter]
    try:
        wait_until(lambda: waiting(cli.store, 3), 60, "three followers to wait")
        producer = subprocess.run([sys.executable, "-c", PRODUCER, str(cli.store), str(N)], env=env, timeout=120)
        assert producer.returncode == 0
        out, err = counted.communicate(timeout=60)  # --count N: it ends by itself
        assert counted.returncode == 0, err
        expected = ["m%03d" % i for i in range(N)]
        assert bodies(out) == expected  # "before" was there already: from now on only
        # the producer's messages move on to r, where the getter takes them as they come
        with Store.open(cli.store) as st:
            for _moved in st.move("q", "r", batch=7):
                pass
        # taken and delivered: nothing in r in any state (a message being written out is held
        # in place, and hidden from a plain browse, until its delivery commits)
        wait_until(lambda: not Store.open(cli.store).browse("r", states="all"), 60, "the getter to take every message")
        for p in (endless, getter):
            p.send_signal(signal.SIGINT)
        out_endless, err_endless = endless.communicate(timeout=60)
        out_get, err_get = getter.communicate(timeout=60)
        assert endless.returncode == 0 and getter.returncode == 0, (err_endless, err_get)
        assert bodies(out_endless) == expected
        left = [m.body.decode() for m in Store.open(cli.store).browse("r", states="all")]
        assert (bodies(out_get), left) == (["before", *expected], [])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def test_browse_follow_from_start_shows_what_is_there_then_stops_when_idle(cli):
    for body in ("a", "b"):
        cli.put("q", body)
    cli.put("q", "urgent", "--priority", "6")
    result = cli.subprocess("browse", "q", "--follow", "--from-start", "--idle", "200ms", "-o", "jsonl")
    assert result.code == 0, result
    assert bodies(result.stdout) == ["urgent", "a", "b"]
    assert len(cli.jsonl("browse", "q")) == 3  # nothing taken


def test_browse_follow_shows_a_message_undone_back_to_the_queue(cli):
    cli.put("q", "held")
    got = cli.json("get", "q", "--confirm-id", "7")
    env = {**os.environ, **cli.env}
    follower = subprocess.Popen([*mqcli_command(), "browse", "q", "--follow", "--count", "2", "-o", "jsonl",
                                 "--where", "size > 0"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: waiting(cli.store, 1), 60, "the follower to wait")
        cli.ok("undo", "q", "--confirm-id", "7")
        cli.put("q", "new")
        out, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["body"] for r in records] == ["held", "new"] and records[0]["msg_id"] == got["msg_id"]


def test_get_follow_with_idle_takes_what_matches_and_exits_0(cli):
    for region in ("eu", "us", "eu"):
        cli.put("q", region, "--prop", f"region={region}")
    result = cli.subprocess("get", "q", "--follow", "--idle", "200ms", "--where", "props.region = 'eu'", "-o", "body")
    assert result.code == 0, result
    assert result.stdout == b"eu\neu\n"
    assert [m["body"] for m in cli.jsonl("browse", "q")] == ["us"]


def test_follow_options_that_do_not_go_together_are_usage_errors(cli):
    cli.fails(2, "browse", "q", "--idle", "1s")
    cli.fails(2, "browse", "q", "--follow", "--lock")
    cli.fails(2, "get", "q", "--follow", "--confirm-id", "3")
    cli.fails(2, "get", "q", "--idle", "1s")
