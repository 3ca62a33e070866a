"""`mqcli browse` of a queue deeper than a page (Store.browse_pages) while other processes put,
get, lock and confirm between its pages: what docs/design.md#states promises of it.

The browse is held between its pages by its reader: its output goes to a pipe that this test
reads only after the other processes are done, and a page's output (1,000 messages of 1 KB)
is far more than a pipe holds, so the browse is blocked writing page N and reads page N+1
after them. Checked: no message is shown twice, every message available from start to end is
shown, in queue order, and the others are shown exactly as their place says (before or after
the last one shown when they changed)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from cli_helpers import Cli, mqcli_command
from store import NewMessage, Store

PAGE = 1000  # Store.browse_pages's page
pytestmark = pytest.mark.slow  # 2,500 messages of 1 KB, and ten processes


def _ok(cli: Cli, *args: str) -> str:
    """Run `mqcli ARGS` in its own process; its stdout."""
    done = cli.subprocess(*args)
    assert done.code == 0, done
    return done.stdout.decode().strip()


def _read_lines(stream, n: int) -> list[dict]:
    return [json.loads(stream.readline()) for _ in range(n)]


@pytest.mark.parametrize("states", [[], ["--state", "all"]], ids=["available", "all"])
def test_a_browse_between_its_pages_shows_each_message_once_and_keeps_what_stayed(tmp_path, states):
    cli = Cli(tmp_path / "store", tmp_path / "xdg")
    cli.ok("init", "-q")
    cli.ok("queue", "create", "q", "-q")
    body = b"x" * 1000
    with Store.open(tmp_path / "store") as st:  # 2,500 at priority 3: pages of 1,000, 1,000 and 500
        st.put_many("q", [NewMessage(body, label=f"m{i}") for i in range(2500)])
        ids = [m.msg_id for m in st.browse("q")]

    errors = open(tmp_path / "browse.err", "wb")  # noqa: SIM115  # closed below
    browse = subprocess.Popen([*mqcli_command(), "browse", "q", "-o", "jsonl", *states],
                              stdout=subprocess.PIPE, stderr=errors, env={**os.environ, **cli.env})
    try:
        shown = _read_lines(browse.stdout, 1)  # page 1 is read; the browse is blocked writing it
        # between pages 1 and 2: a get of the first five (shown already), a get of one page 2
        # would show (gone before it was read), a browse lock on one page 3 would show, puts
        # before the browse's place (priority 7: not shown) and after it (priority 3, 0: shown)
        _ok(cli, "get", "q", "-n", "5", "-q")
        _ok(cli, "get", "q", "--msg-id", ids[1500], "-q")
        _ok(cli, "browse", "q", "--lock", "--msg-id", ids[2200], "-q")
        early = _ok(cli, "put", "q", "early", "-p", "7")
        late3 = _ok(cli, "put", "q", "late", "-p", "3")
        late0 = _ok(cli, "put", "q", "last", "-p", "0")
        shown += _read_lines(browse.stdout, PAGE)  # the rest of page 1, the first of page 2
        # between pages 2 and 3: a two-phase get of one page 3 would show (in flight when read:
        # shown in state get-unconfirmed with --state all, else not), a get of one shown already
        _ok(cli, "get", "q", "--msg-id", ids[2300], "--confirm-id", "9", "-q")
        _ok(cli, "get", "q", "--msg-id", ids[10], "-q")
        rest = browse.stdout.read()  # what the reader holds already, then the rest
        browse.wait(timeout=120)
    finally:
        if browse.poll() is None:
            browse.kill()
            browse.wait()
        errors.close()
    err = (tmp_path / "browse.err").read_bytes()
    assert browse.returncode == 0, err
    assert b"Traceback" not in err
    shown += [json.loads(line) for line in rest.splitlines()]
    seen = [m["msg_id"] for m in shown]
    assert len(seen) == len(set(seen)), "a message shown twice"

    every = bool(states)
    stayed = [i for n, i in enumerate(ids) if n != 1500 and (every or n not in (2200, 2300))]
    # what stayed, in queue order; then the puts that landed after the browse's place
    assert seen == stayed + [late3, late0]
    assert early not in seen
    states_of = {m["msg_id"]: m["state"] for m in shown}
    if every:
        assert states_of[ids[2200]] == "locked-browse" and states_of[ids[2300]] == "get-unconfirmed"
    assert all(states_of[i] == "available" for i in ids[:5] + [ids[10]])  # shown before they were got
