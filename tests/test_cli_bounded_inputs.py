"""Every stream mqcli reads or writes has a bound, and machine-readable output stays so.

Real `mqcli` processes are fed `/dev/zero`, a 100 MB line (from a file and through a pipe from
a generator process) and `/dev/full` as stdout: each ends within 5 s of CPU time (its own, from
os.wait4: what it spends does not grow with a shared machine's load; a run still going after a
minute of wall time is killed and fails) with its documented exit code, its peak RSS (os.wait4 on the one child) below 200 MB, and the store unchanged. Option
values of every command are generated with Hypothesis: never exit 1, never a traceback. And
`-o json` errors, an empty `get --all -o json`, a declined prompt and Ctrl-C out of
`stats --watch` through the CLI.
"""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import click
import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s

from cli_helpers import Cli, mqcli_command
from mqcli.app import app
from mqcli.values import parse_escapes

MB = 1000 * 1000
LINE_BYTES = 100 * MB  # "a 100 MB line"
BOUND_SECONDS = 5      # CPU seconds the command may use (user + system)
WALL_SECONDS = 60      # then it is killed: an endless read or a hang, whatever the load
MAX_RSS_MIB = 200


def new_store(tmp: Path) -> Cli:
    """A store made by `init` (the only command that makes one) with a queue of 3 messages."""
    cli = Cli(tmp / "store", tmp / "xdg")
    cli.ok("init", "-q")
    cli.ok("queue", "create", "q", "-q")
    cli.ok("put", "q", "a\nb", "--count", "3", "-q")
    return cli


# ---- the table: endless and huge inputs, a full device as output --------------------------

# Runs one `mqcli` as its only child, stdin from a file or from a generator process, stdout to
# a file; kills it after the bound; prints its exit code, whether it was killed, its max RSS
# (os.wait4: the child's own, not this launcher's) and stderr. A small parent, because a
# forked child's max RSS starts from its parent's size.
LAUNCHER = r"""
import json, os, subprocess, sys, threading, time
spec = json.loads(sys.argv[1])
gen = None
if spec["generator"]:
    gen = subprocess.Popen([sys.executable, "-c", spec["generator"]], stdout=subprocess.PIPE)
    stdin = gen.stdout
else:
    stdin = open(spec["stdin"], "rb")
with open(spec["stdout"], "wb") as out:
    start = time.monotonic()
    proc = subprocess.Popen(spec["argv"], stdin=stdin, stdout=out, stderr=subprocess.PIPE, env=spec["env"])
stdin.close()
killed = []
timer = threading.Timer(spec["bound"], lambda: (killed.append(1), proc.kill()))
timer.start()
err = proc.stderr.read()
_, status, usage = os.wait4(proc.pid, 0)
elapsed = time.monotonic() - start
timer.cancel()
if gen is not None:
    gen.kill()
    gen.wait()
print(json.dumps({"code": os.waitstatus_to_exitcode(status), "killed": bool(killed),
                  "maxrss_mib": usage.ru_maxrss / 1024, "elapsed": elapsed,
                  "cpu": usage.ru_utime + usage.ru_stime,
                  "stderr": err.decode("utf-8", "backslashreplace")}))
"""

# 100 MB of one JSON-looking line, written a MB at a time, with no line end until the last byte
GENERATOR = ("import sys\nw = sys.stdout.buffer.write\nw(b'{\"queue\": \"q\", \"body\": \"')\n"
             f"for _ in range({LINE_BYTES // MB}):\n    w(b'x' * {MB})\nw(b'\"}}\\n')\n")


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """Files: a 100 MB line (JSON-looking), and key files of 100 MB and of /dev/zero's kind."""
    root = tmp_path_factory.mktemp("bounded")
    line = root / "line.jsonl"
    with open(line, "wb") as f:
        f.write(b'{"queue": "q", "body": "')
        chunk = b"x" * MB
        for _ in range(LINE_BYTES // MB):
            f.write(chunk)
        f.write(b'"}\n')
    key = root / "big.key"
    with open(key, "wb") as f:
        f.truncate(LINE_BYTES)  # 0600 and 100 MB: refused by its size, not read
    key.chmod(0o600)
    return {"line": line, "key": key}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return new_store(tmp_path_factory.mktemp("bounded-store"))


def snapshot(cli: Cli) -> tuple[bytes, list, list]:
    """What must not change: every message with every field, the queues' depths, the links."""
    dump = cli.ok("export", "-q").stdout
    depths = [(q["name"], q["depth"], q["available"]) for q in cli.json("queue", "list")]
    return dump, depths, cli.json("link", "list")


LINE, KEY, ZERO, FULL, NULL = "{line}", "{key}", "/dev/zero", "/dev/full", "/dev/null"
PIPE = "pipe"  # stdin from the generator process

# id, arguments, stdin, stdout, exit code, what the one error line says
CASES = [
    ("import-file-zero", ["import", ZERO], NULL, NULL, 12, "line 1: longer than"),
    ("import-stdin-zero", ["import", "-"], ZERO, NULL, 12, "line 1: longer than"),
    ("import-file-line", ["import", LINE], NULL, NULL, 12, "line 1: longer than"),
    ("import-stdin-pipe", ["import", "-"], PIPE, NULL, 12, "line 1: longer than"),
    ("put-jsonl-zero", ["put", "q", "--jsonl", ZERO], NULL, NULL, 12, "line 1: longer than"),
    ("put-jsonl-stdin-zero", ["put", "q", "--jsonl", "-"], ZERO, NULL, 12, "line 1: longer than"),
    ("put-jsonl-line", ["put", "q", "--jsonl", LINE], NULL, NULL, 12, "line 1: longer than"),
    ("put-jsonl-pipe", ["put", "q", "--jsonl", "-"], PIPE, NULL, 12, "line 1: longer than"),
    ("put-lines-zero", ["put", "q", "--lines", ZERO], NULL, NULL, 8, "line 1: the message body is larger"),
    ("put-lines-line", ["put", "q", "--lines", LINE], NULL, NULL, 8, "line 1: the message body is larger"),
    ("put-lines-pipe", ["put", "q", "--lines", "-"], PIPE, NULL, 8, "line 1: the message body is larger"),
    ("put-stdin-zero", ["put", "q", "-"], ZERO, NULL, 8, "the message body is larger"),
    ("put-stdin-pipe", ["put", "q", "-"], PIPE, NULL, 8, "the message body is larger"),
    ("put-file-line", ["put", "q", "--file", LINE], NULL, NULL, 8, "the message body is 100000027 bytes"),
    ("trace-decode-zero", ["trace", "decode", "-"], ZERO, NULL, 12, "stdin holds more than 65536 bytes"),
    ("trace-decode-body-pipe", ["trace", "decode", "--body", "-"], PIPE, NULL, 12, "stdin holds more than"),
    ("listen-key-zero", ["listen", "--bind", "127.0.0.1:0", "--key-file", ZERO], NULL, NULL, 12,
     "key file /dev/zero is not a regular file"),
    ("listen-key-big", ["listen", "--bind", "127.0.0.1:0", "--key-file", KEY], NULL, NULL, 12,
     "is 100000000 bytes"),
    ("link-add-key-zero", ["link", "add", "qm2", "127.0.0.1:7000", "--key-file", ZERO], NULL, NULL, 12,
     "key file /dev/zero is not a regular file"),
    ("link-add-key-big", ["link", "add", "qm2", "127.0.0.1:7000", "--key-file", KEY], NULL, NULL, 12,
     "is 100000000 bytes"),
    ("get-full", ["get", "q"], NULL, FULL, 8, "stdout's device is full"),
    ("get-all-jsonl-full", ["get", "q", "--all", "-o", "jsonl"], NULL, FULL, 8, "stdout's device is full"),
    ("get-count-body-full", ["get", "q", "-n", "2", "-o", "body"], NULL, FULL, 8, "stdout's device is full"),
    ("get-confirm-full", ["get", "q", "--confirm-id", "77"], NULL, FULL, 8, "stdout's device is full"),
    ("browse-full", ["browse", "q"], NULL, FULL, 8, "stdout's device is full"),
    ("browse-json-full", ["browse", "q", "-o", "json"], NULL, FULL, 8, "stdout's device is full"),
    ("export-full", ["export"], NULL, FULL, 8, "stdout's device is full"),
    ("export-to-full", ["export", "--to", FULL], NULL, NULL, 8, "the disk holding /dev/full is full"),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, args, stdin, stdout, code, says", CASES, ids=[c[0] for c in CASES])
def test_an_endless_or_huge_input_or_a_full_output_ends_in_time_with_its_exit_code(
        store, big, name, args, stdin, stdout, code, says):
    before = snapshot(store)
    fill = {LINE: str(big["line"]), KEY: str(big["key"])}
    argv = [*mqcli_command(), *(fill.get(a, a) for a in args)]
    spec = {"argv": argv, "stdin": fill.get(stdin, stdin), "stdout": stdout, "bound": WALL_SECONDS,
            "generator": GENERATOR if stdin == PIPE else None, "env": {**os.environ, **store.env}}
    proc = subprocess.run([sys.executable, "-c", LAUNCHER, json.dumps(spec)], capture_output=True,
                          timeout=WALL_SECONDS + 30)
    run = json.loads(proc.stdout)
    assert not run["killed"], f"still running after {WALL_SECONDS} s: {run}"
    assert run["cpu"] < BOUND_SECONDS, f"used {run['cpu']:.1f} s of CPU: {run}"
    assert run["code"] == code, run
    [line] = run["stderr"].splitlines()  # one line, no traceback
    if "json" in args or "jsonl" in args:  # only the error's object
        error = json.loads(line)["error"]
        assert error["exit"] == code and says in error["message"], line
    else:
        assert line.startswith("mqcli: error: ") and says in line, line
    assert run["maxrss_mib"] < MAX_RSS_MIB, run
    assert snapshot(store) == before  # nothing stored, nothing taken, nothing held
    store.ok("check", "-q")


# ---- a disk that fills part way: what was written whole is removed, the rest stays -------

@pytest.fixture
def small_disk():
    """A 256 KiB tmpfs (root only; skipped where mounting is not allowed)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs root")
    where = Path(tempfile.mkdtemp(prefix="mqcli-full-"))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)],
                      capture_output=True).returncode != 0:
        where.rmdir()
        pytest.skip("mounting a tmpfs is not allowed here")
    yield where
    subprocess.run(["umount", str(where)], check=True)
    where.rmdir()


@pytest.mark.slow
def test_a_get_onto_a_disk_that_fills_removes_only_the_messages_written_whole(tmp_path, small_disk):
    cli = new_store(tmp_path)
    bodies = [f"{i:04d}" + "m" * 1000 for i in range(600)]  # ~600 KB: more than the disk holds
    cli.ok("queue", "create", "big", "-q")
    cli.ok("put", "big", "--lines", "-", "-q", input="\n".join(bodies).encode())
    with open(small_disk / "got.jsonl", "wb") as out:
        proc = subprocess.run([*mqcli_command(), "get", "big", "--all", "-o", "jsonl"], stdout=out,
                              stderr=subprocess.PIPE, env={**os.environ, **cli.env}, timeout=60)
    assert proc.returncode == 8
    assert json.loads(proc.stderr)["error"] == {
        "status": "MQ_ERROR_INSUFFICIENT_RESOURCES", "code": "0xC00E0027", "exit": 8,
        "message": "stdout's device is full: free some space on it, or send the output elsewhere"}
    written = (small_disk / "got.jsonl").read_bytes()
    whole = [json.loads(line)["body"] for line in written.split(b"\n")[:-1]]
    assert 0 < len(whole) < len(bodies)
    left = cli.jsonl("browse", "big")
    assert whole + [m["body"] for m in left] == bodies  # each exactly once, in order: the cut one is queued
    assert all(m["backouts"] == 0 for m in left)
    cli.ok("check", "-q")


@pytest.mark.slow
def test_an_export_onto_a_full_disk_is_exit_8_and_leaves_no_file(tmp_path, small_disk):
    cli = new_store(tmp_path)
    cli.ok("put", "q", "y" * 4000, "--count", "200", "-q")
    r = cli.subprocess("export", "--to", small_disk / "dump.jsonl")
    assert r.code == 8 and r.stdout == b""
    assert r.stderr == (f"mqcli: error: the disk holding {small_disk / 'dump.jsonl'} is full: free some space "
                        "on it, or write elsewhere [MQ_ERROR_INSUFFICIENT_RESOURCES]\n")
    assert list(small_disk.iterdir()) == []
    assert cli.json("queue", "show", "q")["depth"] == 203


# ---- option values: exit 2 at parse time, never 1 -----------------------------------------

@pytest.mark.parametrize("value", ["\\x", "\\", "\\N{foo}", "\\777", "\\q", "\\u12", "\\U00110000", "\\ud800",
                                   "\\N{RECORD SEPARATOR", "a\\"])
def test_a_malformed_delimiter_escape_is_a_usage_error(tmp_path, value):
    cli = new_store(tmp_path)
    for command in ("get", "browse"):
        r = cli.fails(2, command, "q", "-o", "body", "--delimiter", value)
        assert "Invalid value for '--delimiter'" in r.stderr and r.stdout == b""
    assert cli.json("queue", "show", "q")["depth"] == 3


@pytest.mark.parametrize("text, data", [
    ("\\n", b"\n"), ("", b""), ("\\0", b"\0"), ("\\x1e", b"\x1e"), ("\\377", b"\xff"), ("--\\t", b"--\t"),
    ("\\u263a", "\u263a".encode()), ("\\U0001F600", "\U0001F600".encode()), ("é", "é".encode()),
    ("\\N{RECORD SEPARATOR}", b"\x1e"), ("\\\\", b"\\"), ("\\012x", b"\nx"), ("\\8", None),
])
def test_delimiter_escapes_are_the_bytes_they_name(text, data):
    if data is None:
        with pytest.raises(ValueError):
            parse_escapes(text)
    else:
        assert parse_escapes(text) == data


def test_a_unique_id_beyond_64_bits_and_ids_out_of_range_are_usage_errors(tmp_path):
    cli = new_store(tmp_path)
    guid = cli.guid()
    for args in (("get", "q", "--unique-id", f"{guid}:999999999999999999999999"),
                 ("browse", "q", "--unique-id", f"{guid}:-1"),
                 ("get", "q", "--unique-id", f"{guid}:１２"),  # digits, but not ASCII ones
                 ("get", "q", "--confirm-id", "99999999999999999999"),
                 ("confirm", "q", "--confirm-id", "0"), ("unlock", "q", "--lock-id", str(1 << 63)),
                 ("get", "q", "--lock-id", "-4"), ("get", "q", "--tx", "0"), ("tx", "commit", str(1 << 64)),
                 ("put", "q", "x", "--app-specific", str(1 << 31)),
                 ("queue", "set", "q", "--max-backouts", "65536")):
        r = cli.fails(2, *args)
        assert "Invalid value for" in r.stderr, args
    cli.fails(2, "get", "q", "--unique-id", f"{guid}:{1 << 63}")  # put times are signed 64-bit µs
    cli.fails(4, "get", "q", "--unique-id", f"{guid}:{(1 << 63) - 1}")  # in range: no such message
    assert cli.json("queue", "show", "q")["depth"] == 3


def _leaf_commands():
    """(path, click command) of every command of the app, in the order of `mqcli --help`."""
    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, [*path, name])
        else:
            yield path, cmd
    return list(walk(typer.main.get_command(app), []))


# Commands that would serve, wait or run others' commands until stopped are run with arguments
# that end them once their values are checked: `listen` on a path that holds no store (it
# checks its values, then finds no store: exit 11, never a listener), `dispatch --once` (the
# fuzz store has no links), `consume --idle 0` on a queue nobody puts to (no --exec command
# ever runs). bench and analyze run for long or start Spark: their values are fuzzed up to the
# end of click's parsing (test_no_option_value_of_a_long_running_command_breaks_its_parsing).
ENDING = {("listen",): ("store", ["--store", str(Path(tempfile.gettempdir()) / "mqcli-fuzz-no-store")]),
          ("dispatch",): ("once", ["--once"]),
          ("consume",): ("idle", ["--idle", "0"])}
NOT_FUZZED = {("bench",), ("analyze",)}
UNTIL_STOPPED = {"store", "traceback", "watch", "follow"}  # flags that never end in-process
ALL_COMMANDS = _leaf_commands()
COMMANDS = [(p, c) for p, c in ALL_COMMANDS if tuple(p[:1]) not in NOT_FUZZED]
PARSED_ONLY = [(p, c) for p, c in ALL_COMMANDS if tuple(p[:1]) in NOT_FUZZED]

DURATIONS = ["0", "0s", "0ms", "250ms", "30s", "5m", "2h", "forever", "-1s", "1.5", "1e9", "10d", "",
             "9" * 30 + "h", "100000000h", "0x10", "\x00", "١s"]
NUMBERS = ["0", "1", "-1", "7", "8", str(1 << 31), str(1 << 32), str(1 << 63), str(1 << 64), "9" * 40,
           "0x10", "1e3", " 3", "3 ", "", "١٢", "auto", "nan"]
SIZES = ["0", "4096", "64KiB", "10MB", "1GiB", "8EiB", "9" * 30, "-1", "1.5MB", "", "16 MiB", "1tib"]
ESCAPE_TEXT = (s.sampled_from(["\\x", "\\", "\\N{foo}", "\\u263a", "\\777", "\\x1", "\\N{", "\\ud800"])
               | s.text(alphabet="\\xuUN{}0123456789abcdefn t\"'é\x00", max_size=12))
NAMES = ["q", "Q", "q2", "dead-letter", "nope", "", ".", "a" * 125, "a/b", "q;journal", "q\nx", "q\udcff",
         "DIRECT=OS:.\\q", "DIRECT=OS:qm2\\q", "DIRECT=TCP:1.2.3.4\\q", "DIRECT=IPX:x\\q",
         "PUBLIC=00000000-0000-0000-0000-000000000000", "PRIVATE=zz\\1", "MACHINE=x;JOURNAL",
         "MULTICAST=1.2.3.4:5", "DIRECT=HTTP://x/q", "qm2", "127.0.0.1:7000", "[::1]:0", "host:99999"]
MODES = ["text", "json", "jsonl", "body", "hex", "", "JSON"]


def _values(command: list[str], param: click.Parameter, safe_dir: Path):
    """A strategy of command-line values for one option or argument of `command`."""
    name = (param.name or "").lower()
    if isinstance(param.type, click.Path) or name in {"to", "file", "key_file", "textfile", "out", "plot",
                                                      "jsonl", "lines"} or command == ["import"]:
        # files are named only inside the test's directory (or the devices), never elsewhere
        return s.sampled_from(["-", "/dev/null", "/dev/zero", str(safe_dir / "f"), str(safe_dir / "d" / "x"),
                               str(safe_dir), str(safe_dir / "new.jsonl")])
    if name in {"wait", "idle"}:  # never a wait that blocks the test: a zero, or a bad one
        return s.sampled_from(["0", "0s", "0ms", "-1", "soon", ""])
    if name in {"ttl", "lease", "timeout", "older_than", "interval", "retry_max", "idle_timeout", "handshake_timeout"}:
        return s.sampled_from(DURATIONS) | s.text(max_size=8)
    if name in {"quota", "max_message_size", "max_frame"}:
        return s.sampled_from(SIZES) | s.text(max_size=8)
    if name == "delimiter":
        return ESCAPE_TEXT
    if name == "output":
        return s.sampled_from(MODES)
    if name == "unique_id":
        return s.sampled_from(["x", ":", "00000000-0000-0000-0000-000000000000:1", f"{'0' * 32}:{1 << 64}",
                               "00000000-0000-0000-0000-000000000000:-1"]) | s.text(max_size=50)
    if isinstance(param.type, (click.types.IntParamType, click.IntRange)) or name in {
            "confirm_id", "lock_id", "tx", "lookup_id", "priority", "count", "limit", "app_specific"}:
        return s.sampled_from(NUMBERS) | s.integers(-(1 << 70), 1 << 70).map(str)
    return s.sampled_from(NAMES) | s.text(max_size=20)


def _valid(command: list[str], param: click.Parameter, safe_dir: Path) -> str:
    """A value the option or argument accepts (so that the value being fuzzed is reached)."""
    name = (param.name or "").lower()
    if isinstance(param.type, click.Path) or name in {"to", "file", "key_file", "jsonl", "lines"}:
        return str(safe_dir / "f")
    if name in {"wait", "ttl", "lease", "timeout", "older_than", "interval", "retry_max", "idle_timeout",
                "handshake_timeout", "idle"}:
        return "0" if name in {"wait", "idle"} else "30s"
    if name in {"quota", "max_message_size", "max_frame"}:
        return "64KiB"
    if command == ["consume"] and name == "queue":
        return "idle"  # empty: no fuzzed --exec value is ever run
    if command == ["consume"] and name == "command":
        # a fuzzed queue name may address a queue with messages ("q", "DIRECT=OS:.\\q"): each is
        # confirmed, so --idle 0 ends the run; a failing command would undo it and take it again
        # after a backoff, forever
        return "true"
    return {"delimiter": "\\n", "output": "json", "address": "127.0.0.1:7000", "bind": "127.0.0.1:0", "name": "qm2",
            "where": "priority >= 0",
            "text": "-"}.get(name, "q" if isinstance(param.type, click.types.StringParamType) else "1")


# A put of a fuzzed --count (any number up to 2**70) has a one-byte body and a queue with a
# 4 KiB quota: it ends at the quota (exit 7) within a second, not after minutes of puts (88 s
# once) or at a full disk. Its other bodies are left out (an empty one counts nothing against a quota).
BOUNDED = {("put", "count"): ({"queue": "capped", "body": "q"}, {"file", "lines", "jsonl"})}


@s.composite
def command_lines(draw, command: list[str], fuzzed_name: str | None, safe_dir: Path):
    """`command` with its option or argument `fuzzed_name` given a fuzzed value, the others left
    out or given a value they accept: a bad value for an option parsed earlier would otherwise
    hide every later one."""
    cmd = dict((tuple(p), c) for p, c in ALL_COMMANDS)[tuple(command)]
    params = [p for p in cmd.params if p.name not in UNTIL_STOPPED]  # no endless watch or follow
    fuzzed = next((p for p in params if p.name == fuzzed_name), None)
    given, left_out = BOUNDED.get((*command, fuzzed_name), ({}, set()))
    argv = list(command)
    for param in params:
        if param.name in left_out:
            continue
        if param.name in given:
            argv += [given[param.name]] if isinstance(param, click.Argument) else [param.opts[0], given[param.name]]
            continue
        if isinstance(param, click.Argument):
            if param.required or param is fuzzed or draw(s.booleans()):
                make = _values(command, param, safe_dir) if param is fuzzed else s.just(_valid(command, param, safe_dir))
                argv += [draw(make) for _ in range(1 if param.nargs == 1 else draw(s.integers(1, 2)))]
            continue
        if param.is_flag or param.count:
            if param is fuzzed or draw(s.integers(0, 3)) == 0:
                argv.append(draw(s.sampled_from(param.opts + param.secondary_opts)))
            continue
        if param is fuzzed:
            argv += [draw(s.sampled_from(param.opts)), draw(_values(command, param, safe_dir))]
        elif param.required or draw(s.integers(0, 3)) == 0:
            argv += [param.opts[0], _valid(command, param, safe_dir)]
    ending, args = ENDING.get(tuple(command), (None, []))
    if ending != fuzzed_name and not set(args) & set(argv):
        argv += args
    return argv


SAFE_DIR = Path(tempfile.gettempdir()) / f"mqcli-fuzz-{os.getpid()}"
FUZZ_STORE: dict[str, Cli] = {}


def _fuzz_store() -> Cli:
    if "cli" not in FUZZ_STORE:
        if SAFE_DIR.exists():
            shutil.rmtree(SAFE_DIR)
        SAFE_DIR.mkdir(mode=0o700)
        FUZZ_STORE["cli"] = new_store(SAFE_DIR / "s")
        FUZZ_STORE["cli"].ok("queue", "create", "idle", "-q")
        FUZZ_STORE["cli"].ok("queue", "create", "capped", "--quota", "4KiB", "-q")
    return FUZZ_STORE["cli"]


@pytest.fixture(scope="module", autouse=False)
def fuzz_dir():
    yield SAFE_DIR
    shutil.rmtree(SAFE_DIR, ignore_errors=True)


def _fuzzed_values(commands):
    """(command, the option or argument given fuzzed values) for every command: each value
    option once per command; the options every command shares (-o, -q) with one command."""
    pairs = []
    for path, cmd in commands:
        names = [p.name for p in cmd.params if p.name not in UNTIL_STOPPED | {"quiet", "output"}
                 and not getattr(p, "is_flag", False)]
        pairs += [(path, name) for name in names] or [(path, None)]
    return [*pairs, (["get"], "output"), (["info"], "output")]


FUZZED = _fuzzed_values(COMMANDS)
PARSE_FUZZED = [(p, n) for p, n in _fuzzed_values(PARSED_ONLY) if n not in {"output"}]


@pytest.mark.slow
@pytest.mark.parametrize("command, fuzzed", FUZZED, ids=[" ".join(p) + f" {n}" for p, n in FUZZED])
def test_no_option_value_of_any_command_is_an_internal_error(fuzz_dir, command, fuzzed):
    @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(argv=command_lines(command, fuzzed, SAFE_DIR / "files"))
    def run(argv):
        cli = _fuzz_store()
        (SAFE_DIR / "files").mkdir(exist_ok=True)
        cwd = os.getcwd()
        os.chdir(SAFE_DIR / "files")  # a relative name a command writes stays in here
        try:
            r = cli(*argv)  # in-process; cli_helpers checks: no traceback
        finally:
            os.chdir(cwd)
        if command == ["health"] and r.code in (0, 1, 2, 3) and r.out.startswith(("MQCLI ", "{")):
            return  # a Nagios plugin: its own one line and exit codes (1 is WARNING)
        assert r.code != 1, r
        if r.code != 0:
            lines = r.err_lines
            if any(line.startswith('{"error"') for line in lines):
                assert json.loads(lines[-1])["error"]["exit"] == r.code, r
            else:
                assert any(line.startswith("mqcli: error: ") for line in lines), r
    run()


@pytest.mark.slow
@pytest.mark.parametrize("command, fuzzed", PARSE_FUZZED, ids=[" ".join(p) + f" {n}" for p, n in PARSE_FUZZED])
def test_no_option_value_of_a_long_running_command_breaks_its_parsing(command, fuzzed):
    """listen, dispatch, consume, bench and analyze serve, watch or start Spark, so their values
    are fuzzed through click's parsing and conversion (durations, sizes, ids, addresses, the
    selector): a value either parses or is a usage error, never another exception."""
    root = typer.main.get_command(app)
    leaf = dict((tuple(p), c) for p, c in ALL_COMMANDS)[tuple(command)]

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(argv=command_lines(command, fuzzed, SAFE_DIR / "files"))
    def parse(argv):
        with click.Context(root, info_name="mqcli", obj={}) as parent:
            try:
                leaf.make_context(command[-1], argv[len(command):], parent=parent)
            except (click.ClickException, click.exceptions.Exit):
                pass  # a usage error (exit 2) or --help: what a user sees
    parse()


# ---- machine-readable output, prompts and Ctrl-C (item 5 of the issue) ----------------------

def test_with_json_output_an_error_is_only_a_json_object_with_its_exit_code(tmp_path):
    cli = new_store(tmp_path)
    for args, code in ((["get", "nope", "-o", "json"], 6), (["-o", "jsonl", "put", "q", "x", "--priority", "9"], 2),
                       (["get", "q", "--lock-id", "5", "--output=json"], 4)):
        r = cli.subprocess(*args)
        assert r.code == code and r.stdout == b""
        error = json.loads(r.stderr)["error"]  # stderr is one JSON document, as `jq . err` reads it
        assert error["exit"] == code and set(error) == {"status", "code", "exit", "message"}
    r = cli.subprocess("get", "nope")
    assert r.stderr.startswith("mqcli: error: queue 'nope' does not exist") and r.stderr.count("\n") == 1


def test_an_empty_get_all_with_json_output_prints_an_empty_array_and_exits_3(tmp_path):
    cli = new_store(tmp_path)
    cli.ok("get", "q", "--all", "-q")
    for args in (["--all"], ["--count", "2"]):
        r = cli.subprocess("get", "q", *args, "-o", "json")
        assert (r.code, r.stdout) == (3, b"[]\n")
        assert json.loads(r.stderr)["error"]["status"] == "MQ_ERROR_IO_TIMEOUT"
        assert cli.subprocess("browse", "q", "-o", "json").stdout == b"[]\n"  # as browse prints it
    assert cli.subprocess("get", "q", "--all", "-o", "jsonl").stdout == b""


def _answer(cli: Cli, args: list[str], answer: bytes) -> tuple[int, str, str]:
    """Run `mqcli ARGS` on a terminal (a pty), answer its question, return (code, stdout, stderr)."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([*mqcli_command(), *args], stdin=secondary, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, **cli.env})
    os.close(secondary)
    try:
        os.write(primary, answer)
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(primary)
    return proc.returncode, out.decode(), err.decode()


def test_a_declined_purge_exits_1_saying_not_purged_and_a_yes_purges(tmp_path):
    cli = new_store(tmp_path)
    code, out, err = _answer(cli, ["queue", "purge", "q"], b"n\n")
    assert "purge queue 'q' and its 3 messages?" in out
    assert (code, err) == (1, "mqcli: error: queue 'q' not purged (answered no) [DECLINED]\n")
    assert cli.json("queue", "show", "q")["depth"] == 3
    code, out, err = _answer(cli, ["queue", "delete", "q", "-o", "json"], b"n\n")
    assert code == 1 and json.loads(err)["error"] == {"status": "DECLINED", "code": None, "exit": 1,
                                                      "message": "queue 'q' not deleted (answered no)"}
    code, out, err = _answer(cli, ["queue", "purge", "q"], b"y\n")
    assert code == 0 and err == "" and cli.json("queue", "show", "q")["depth"] == 0


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 0), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_ends_stats_watch_with_exit_0(tmp_path, signum, code):
    cli = new_store(tmp_path)
    primary, secondary = pty.openpty()  # a terminal: the live table is drawn as it refreshes
    proc = subprocess.Popen([*mqcli_command(), "stats", "--watch", "--interval", "100ms"], stdout=secondary,
                            stderr=subprocess.PIPE, env={**os.environ, **cli.env})
    os.close(secondary)
    try:
        seen = b""
        for _ in range(600):  # the first table is drawn: the watch runs (bounded: 60 s at most)
            if select.select([primary], [], [], 0.1)[0]:
                seen += os.read(primary, 65536)
            if b"mqcli stats" in seen:
                break
        assert b"mqcli stats" in seen, seen
        proc.send_signal(signum)
        for _ in range(300):  # drain the terminal until the process is gone, so it never blocks
            if proc.poll() is not None:
                break
            if select.select([primary], [], [], 0.1)[0]:
                try:
                    os.read(primary, 65536)
                except OSError:
                    pass
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(primary)
    assert proc.returncode == code, err
    expected = "" if signum == signal.SIGINT else "mqcli: error: terminated (SIGTERM) [INTERRUPTED]\n"
    assert err.decode() == expected
