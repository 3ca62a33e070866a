"""Helpers for the CLI tests (tests/test_cli_*.py).

Two ways to run `mqcli`:

- `invoke(args)` runs `mqcli.app.run` in this process under click's CliRunner isolation, so the
  real error mapping (exits.report) runs and stdout/stderr are captured separately: stdout as
  bytes (data may be binary), stderr as text (diagnostics).
- `run_mqcli(args)` runs the installed entry point in a subprocess, for real pipes, binary
  stdin and process exit codes.

Every invocation checks the one rule that holds for every command: no traceback on stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from mqcli.app import run

ERROR_PREFIX = "mqcli: error: "


@dataclass
class Result:
    code: int
    stdout: bytes
    stderr: str
    args: list[str] = field(default_factory=list)

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8")

    def json(self) -> Any:
        return json.loads(self.stdout)

    def jsonl(self) -> list[Any]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]

    @property
    def err_lines(self) -> list[str]:
        return self.stderr.splitlines()

    def error_json(self) -> dict[str, Any]:
        """The `{"error": {...}}` object printed on stderr with -o json|jsonl."""
        objects = [json.loads(line) for line in self.err_lines if line.startswith("{")]
        assert len(objects) == 1, self.stderr
        return objects[0]

    def __repr__(self) -> str:  # shown by pytest when an assertion fails
        return (f"Result(args={self.args!r}, code={self.code}, stdout={self.stdout[:2000]!r}, "
                f"stderr={self.stderr[:2000]!r})")


def checked(result: Result) -> Result:
    assert "Traceback" not in result.stderr, result
    return result


_runner = CliRunner()


def invoke(args: Sequence[Any], input: bytes | str | None = None,
           env: Mapping[str, str | None] | None = None) -> Result:
    """Run `mqcli ARGS` in this process; `env` overrides the environment for the call."""
    argv = [str(a) for a in args]
    with _runner.isolation(input=input, env=env) as (out, err, _mixed):
        code = run(argv)
        sys.stdout.flush()
        sys.stderr.flush()
        stdout = out.getvalue()
        stderr = err.getvalue().decode("utf-8", "backslashreplace")
    return checked(Result(int(code), stdout, stderr, argv))


def mqcli_command() -> list[str]:
    """The installed console script (next to this interpreter, else on PATH), else -m mqcli."""
    beside = Path(sys.executable).parent / "mqcli"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("mqcli")
    return [found] if found else [sys.executable, "-m", "mqcli"]


def run_mqcli(args: Sequence[Any], input: bytes | None = None,
              env: Mapping[str, str] | None = None, timeout: float = 60) -> Result:
    """Run the installed `mqcli ARGS` in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([*mqcli_command(), *map(str, args)], input=input or b"",
                          capture_output=True, env=full_env, timeout=timeout)
    return checked(Result(proc.returncode, proc.stdout,
                         proc.stderr.decode("utf-8", "backslashreplace"), list(map(str, args))))


BROKEN_OUTPUTS = ("closed pipe", "/dev/full")


def run_into(output: str, args: Sequence[Any], env: Mapping[str, str] | None = None,
             input: bytes | None = None, timeout: float = 60) -> Result:
    """Run the installed `mqcli ARGS` with stdout one of BROKEN_OUTPUTS: a pipe nobody reads
    (its first write fails: EPIPE) or /dev/full (ENOSPC). stdout is not captured."""
    full_env = {**os.environ, **(env or {})}
    if output == "/dev/full":
        sink = os.open("/dev/full", os.O_WRONLY)
    else:
        r, sink = os.pipe()
        os.close(r)
    try:
        proc = subprocess.run([*mqcli_command(), *map(str, args)], input=input or b"", stdout=sink,
                              stderr=subprocess.PIPE, env=full_env, timeout=timeout)
    finally:
        os.close(sink)
    return checked(Result(proc.returncode, b"", proc.stderr.decode("utf-8", "backslashreplace"),
                          list(map(str, args))))


class Cli:
    """`mqcli` bound to one test store (through MQCLI_STORE) and a private XDG_DATA_HOME."""

    def __init__(self, store: Path, home: Path) -> None:
        self.store = store
        self.env = {"MQCLI_STORE": str(store), "XDG_DATA_HOME": str(home)}

    def __call__(self, *args: Any, input: bytes | str | None = None,
                 env: Mapping[str, str | None] | None = None) -> Result:
        return invoke(args, input=input, env={**self.env, **(env or {})})

    def ok(self, *args: Any, **kw: Any) -> Result:
        """Run and require exit 0."""
        result = self(*args, **kw)
        assert result.code == 0, result
        return result

    def json(self, *args: Any, **kw: Any) -> Any:
        """Run with `-o json`, require exit 0, return the parsed document."""
        return self.ok(*args, "-o", "json", **kw).json()

    def jsonl(self, *args: Any, **kw: Any) -> list[Any]:
        return self.ok(*args, "-o", "jsonl", **kw).jsonl()

    def fails(self, code: int, *args: Any, **kw: Any) -> Result:
        """Run, require exit `code` and one `mqcli: error: ... [STATUS]` line on stderr, or
        with `-o json|jsonl` only the error's JSON object, carrying the exit code."""
        result = self(*args, **kw)
        assert result.code == code, result
        if any(line.startswith('{"error"') for line in result.err_lines):
            assert not any(line.startswith(ERROR_PREFIX) for line in result.err_lines), result
            assert result.error_json()["error"]["exit"] == code, result
            return result
        errors = [line for line in result.err_lines if line.startswith(ERROR_PREFIX)]
        assert len(errors) == 1 and errors[0].endswith("]"), result
        return result

    def subprocess(self, *args: Any, input: bytes | None = None,
                   env: Mapping[str, str] | None = None, timeout: float = 60) -> Result:
        return run_mqcli(args, input=input, env={**self.env, **(env or {})}, timeout=timeout)

    def into(self, output: str, *args: Any, input: bytes | None = None) -> Result:
        """`mqcli ARGS` with stdout one of BROKEN_OUTPUTS (run_into)."""
        return run_into(output, args, env=self.env, input=input)

    def put(self, queue: str, body: str | bytes = "x", *args: Any) -> dict[str, Any]:
        """Put one message; return its record (the last one if --count)."""
        if isinstance(body, bytes):
            records = self.jsonl("put", queue, "-", *args, input=body)
        else:
            records = self.jsonl("put", queue, body, *args)
        return records[-1]

    def guid(self) -> str:
        return self.json("info")["guid"]

    def error_line(self, result: Result) -> str:
        return next(line for line in result.err_lines if line.startswith(ERROR_PREFIX))
