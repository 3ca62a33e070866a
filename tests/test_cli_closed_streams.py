"""mqcli started with stdin, stdout or stderr closed (`>&-`, as a careless daemon or cron line
starts it): no internal error (it was exit 1 on an AttributeError), no file of the store takes
the closed descriptor's number, and a destructive get whose output cannot be written takes
nothing (mqcli/__main__.py). Real processes through sh's redirections."""

from __future__ import annotations

import os
import subprocess

from cli_helpers import Cli, mqcli_command


def _run(cli: Cli, redirect: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    script = f'exec "$@" {redirect}'
    return subprocess.run(["sh", "-c", script, "sh", *mqcli_command(), *args], capture_output="2>&-" not in redirect,
                          stdin=subprocess.DEVNULL if "<&-" not in redirect else None,
                          env={**os.environ, **cli.env}, timeout=60)


def test_closed_standard_streams(tmp_path):
    cli = Cli(tmp_path / "store", tmp_path / "xdg")
    cli.ok("init", "-q")
    cli.ok("queue", "create", "q", "-q")
    cli.ok("put", "q", "kept", "-q")

    for command in (["get", "q"], ["get", "q", "-o", "json"], ["stats"]):  # the fast path, and Typer's
        done = _run(cli, ">&-", *command)
        assert done.returncode == 141, done  # the output closed, as `| true` gives
        assert b"Traceback" not in done.stderr and b"internal error" not in done.stderr, done

    done = _run(cli, "<&- >/dev/null", "put", "q", "-")  # a closed stdin reads as empty
    assert done.returncode == 0, done

    done = subprocess.run(["sh", "-c", 'exec "$@" 2>&-', "sh", *mqcli_command(), "get", "nope"],
                          capture_output=False, stdout=subprocess.DEVNULL, env={**os.environ, **cli.env}, timeout=60)
    assert done.returncode == 6  # the error line went nowhere; the exit code still says it

    assert [m["body"] for m in cli.jsonl("browse", "q", "-o", "jsonl")] == ["kept", ""]
    assert cli.ok("check").code == 0
