"""Progress bars with totals, in a real terminal (a pty): a put from a file shows bytes read of
the file's size with a rate and the time left; get, move, export and import show messages (or
the dump's bytes) of the known total. The bar is drawn on stderr only: stdout, a file here,
holds the data and nothing else; with stderr not a terminal no bar is drawn at all, even when
stdout is one."""

from __future__ import annotations

import os
import re

import pytest
from cli_helpers import Cli, mqcli_command, run_mqcli
from terminal_helpers import Terminal

from store import NewMessage, Store

N = 2000
BAR = "━"
UNITS = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2}


@pytest.fixture
def cli(tmp_path) -> Cli:
    cli = Cli(tmp_path / "store", tmp_path / "xdg")
    cli.ok("init", "-q")
    cli.ok("queue", "create", "q", "-q")
    cli.ok("queue", "create", "r", "-q")
    with Store.open(cli.store) as st:
        st.put_many("q", [NewMessage(b"m%05d" % i + b"." * 300) for i in range(N)])
    return cli


def _in_terminal(cli: Cli, tmp_path, *args: str) -> tuple[int, str, bytes]:
    """Run with stdin and stderr on a pty, stdout to a file: exit code, the terminal's text,
    the file's bytes."""
    out_path = tmp_path / "stdout"
    with open(out_path, "wb") as out:
        term = Terminal([*mqcli_command(), *args], {**os.environ, **cli.env}, columns=120, stdout=out.fileno())
        code = term.finish()
    return code, term.text, out_path.read_bytes()


def _last_bar(text: str, description: str) -> str:
    bars = [line for line in text.splitlines() if line.startswith(description + " ") and BAR in line]
    assert bars, text[-2000:]
    return bars[-1]


def _messages_done(bar: str) -> tuple[int, int]:
    done, total = re.search(r" (\d+)/(\d+) ", bar).groups()
    return int(done), int(total)


def _bytes_done(bar: str) -> tuple[float, float, int]:
    done, total, unit = re.search(r" ([\d.]+)/([\d.]+) (B|KiB|MiB) ", bar).groups()
    return float(done), float(total), UNITS[unit]


def _no_drawing(data: bytes) -> None:
    assert BAR.encode() not in data and b"\x1b[" not in data


def test_put_from_a_file_shows_bytes_of_its_size_with_rate_and_time_left(cli, tmp_path):
    dump = tmp_path / "q.jsonl"
    dump.write_bytes(cli.ok("get", "q", "--all", "-o", "jsonl").stdout)
    code, text, out = _in_terminal(cli, tmp_path, "put", "r", "--jsonl", str(dump))
    assert code == 0, text
    bar = _last_bar(text, "put r")
    done, total, unit = _bytes_done(bar)
    assert done == total and abs(total * unit - dump.stat().st_size) <= 0.05 * unit * max(total, 1)
    assert re.search(r" [\d.]+ (B|KiB|MiB)/s ", bar), bar  # the rate
    assert re.search(r" \d+:\d\d:\d\d$", bar.rstrip()), bar  # the time left
    _no_drawing(out)
    assert len(out.splitlines()) == N  # the msg_ids, and only them


def test_put_lines_from_a_file_and_count_show_their_totals(cli, tmp_path):
    lines = tmp_path / "lines.txt"
    lines.write_bytes(b"".join(b"line %d\n" % i for i in range(N)))
    code, text, out = _in_terminal(cli, tmp_path, "put", "r", "--lines", str(lines))
    assert code == 0, text
    done, total, unit = _bytes_done(_last_bar(text, "put r"))
    assert done == total and abs(total * unit - lines.stat().st_size) <= 0.05 * unit * total
    code, text, out = _in_terminal(cli, tmp_path, "put", "r", "x", "--count", "1500")
    assert code == 0, text
    assert _messages_done(_last_bar(text, "put r")) == (1500, 1500)
    _no_drawing(out)


def test_get_move_export_import_show_messages_of_the_known_depth(cli, tmp_path):
    code, text, out = _in_terminal(cli, tmp_path, "move", "q", "r", "--count", "1000")
    assert code == 0, text
    assert _messages_done(_last_bar(text, "move q → r")) == (1000, 1000)  # --count, not the depth

    code, text, out = _in_terminal(cli, tmp_path, "move", "q", "r")
    assert code == 0, text
    bar = _last_bar(text, "move q → r")
    assert _messages_done(bar) == (N - 1000, N - 1000) and "msg/s" in bar

    dump = tmp_path / "r.jsonl"
    code, text, out = _in_terminal(cli, tmp_path, "export", "r", "--to", str(dump))
    assert code == 0, text
    assert _messages_done(_last_bar(text, "export")) == (N, N)

    code, text, out = _in_terminal(cli, tmp_path, "get", "r", "--all", "-o", "jsonl")
    assert code == 0, text
    assert _messages_done(_last_bar(text, "get r")) == (N, N)
    _no_drawing(out)
    assert len(out.splitlines()) == N

    code, text, out = _in_terminal(cli, tmp_path, "import", str(dump))
    assert code == 0, text
    done, total, unit = _bytes_done(_last_bar(text, "import"))
    assert done == total and abs(total * unit - dump.stat().st_size) <= 0.05 * unit * total
    _no_drawing(out)
    assert cli.json("queue", "show", "r")["depth"] == N


def test_no_bar_when_stderr_is_not_a_terminal_even_if_stdout_is(cli, tmp_path):
    err_path = tmp_path / "stderr"
    with open(err_path, "wb") as err:
        term = Terminal([*mqcli_command(), "get", "q", "--all", "-o", "jsonl"], {**os.environ, **cli.env},
                        columns=120, stderr=err.fileno())
        code = term.finish()
    assert code == 0
    assert err_path.read_bytes() == b""
    assert BAR not in term.text and len([x for x in term.text.splitlines() if x.startswith("{")]) == N


def test_no_bar_through_pipes(cli, tmp_path):
    dump = tmp_path / "q.jsonl"
    result = run_mqcli(["export", "q", "--to", dump], env=cli.env)
    assert result.code == 0 and result.stderr == f"exported {N} messages to {dump}\n"
    lines = tmp_path / "lines.txt"
    lines.write_bytes(b"x\n" * N)
    result = run_mqcli(["put", "r", "--lines", lines], env=cli.env)
    assert result.code == 0 and result.stderr == "" and len(result.stdout.splitlines()) == N
