"""The README's pipelines, run as a user runs them: two mqcli processes joined by a real pipe
on one store, each bounded by a timeout. The get holds no write lock while it writes into the
pipe, so the put on the other end is never stuck behind it (it once hung in 6 of 6 trials)."""

import hashlib
import os
import subprocess

import pytest

from cli_helpers import mqcli_command
from store import NewMessage, Store

# 20,000 jsonl lines of ~530 bytes are some 160 times what a pipe holds and 20 of put --jsonl's
# batches of 1,000: a get that held the write lock while blocked in a write would hang each trial
N = 20_000
TRIALS = 20


def sh(cli, script, timeout):
    mq = " ".join(mqcli_command())
    proc = subprocess.run(["bash", "-c", f"set -euo pipefail; mq() {{ {mq} \"$@\"; }}; {script}"],
                          env={**os.environ, **cli.env}, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


@pytest.mark.slow
def test_get_all_jsonl_into_put_jsonl_moves_every_message_exactly_once(cli):
    cli.ok("queue", "create", "a", "-q")
    cli.ok("queue", "create", "b", "-q")
    with Store.open(cli.store) as st:
        for at in range(0, N, 1000):
            st.put_many("a", [NewMessage(b"%0100d" % i) for i in range(at, at + 1000)])
        everything = sorted(m.msg_id for m in st.browse("a"))
    source, target = "a", "b"
    for trial in range(TRIALS):  # there and back again: each trial moves all of them
        sh(cli, f"mq get {source} --all -o jsonl | mq put {target} --jsonl - -q", timeout=300)
        with Store.open(cli.store) as st:
            arrived = st.browse(target, states="all")
            assert st.browse(source, states="all") == [], trial
            assert sorted(m.msg_id for m in arrived) == everything, trial  # each once, none lost
            assert {m.state for m in arrived} == {"available"}
            assert st.check() == []
        source, target = target, source


@pytest.mark.slow
def test_the_tours_transactional_pipeline_carries_a_1mb_body(cli, tmp_path):
    body = os.urandom(1 << 20)
    payload = tmp_path / "payload.bin"
    payload.write_bytes(body)
    cli.ok("queue", "create", "work", "--transactional", "-q")
    cli.ok("queue", "create", "done", "--transactional", "-q")
    sh(cli, f'T=$(mq tx begin --timeout 5m); mq put work --file {payload} --tx "$T" -q; mq tx commit "$T" -q',
       timeout=120)
    source, target = "work", "done"
    for trial in range(TRIALS):
        sh(cli, f'T=$(mq tx begin --timeout 5m)\n'
                f'mq get {source} --tx "$T" -o body --delimiter "" | cat | mq put {target} - --tx "$T" -q\n'
                f'mq tx commit "$T" -q', timeout=120)
        with Store.open(cli.store) as st:
            assert st.browse(source, states="all") == [], trial
            [m] = st.browse(target, states="all")
            assert hashlib.sha256(m.body).digest() == hashlib.sha256(body).digest(), trial
            assert st.tx_list() == [] and st.check() == []
        source, target = target, source
