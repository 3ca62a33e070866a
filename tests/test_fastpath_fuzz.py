"""Differential fuzzing of mqcli/fastpath.py against the Typer app: command lines drawn from the
real option tables of put, get and browse (`--name=VALUE` forms, `--`, repeated options, flags
given values, empty values, `-` and `--` as values, bytes that are not UTF-8, huge and negative
numbers, option-like queue names, short-option clusters) run as real processes on both paths,
each on its own copy of one store, and must give the same stdout, stderr and exit code, with
no traceback and no exit 1. Fixed examples (derandomized, no example database); a case found
here goes into the table of tests/test_fastpath.py.

MQCLI_FUZZ_EXAMPLES=N runs more of them (by hand; CI runs the default)."""

from __future__ import annotations

import itertools
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import test_fastpath as fp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s

from mqcli import fastpath

EXAMPLES = int(os.environ.get("MQCLI_FUZZ_EXAMPLES", "8"))
LINES_PER_EXAMPLE = 4

# options that would wait: get/browse --follow (-f), long --wait; left out of get and browse
_WAITING = {"--follow", "-f"}
_NAMES = sorted({*fastpath.ROOT, "--help", "-h", "--traceback", "--version", "--",
                 *(o for c in fastpath.COMMANDS.values() for o in (*c.options, *c.fallback))} - _WAITING)
_VALUES = ["", "-", "--", "0", "1", "3", "7", "8", "-1", "-0", "+2", " 4", "4 ", "1_0", "0x10", "٣", "3.0",
           "9" * 25, "-" + "9" * 25, "1" * 5000, str((1 << 63) - 1), str(1 << 63), str(1 << 31), str(-(1 << 31) - 1),
           "auto", "AUTO", "q", "empty", "nope", "q\udcff", "b\udcff", "é", "\u202e", "a\nb", "a=1", "=",
           "json", "jsonl", "text", "body", "hex", "yaml", "all", "available", "locked-browse", "bogus",
           "0", "1ms", "soon", "5m", "\\0", "\\x", "\\N{BOGUS}", "{body}", "{nope}", "{{", "}",
           "priority > 4", "priority >", "props.a = 'x'", "-q", "-p", "-n", "-o", "--express", "--label",
           "--store", "-qp", "-qn", "-oq", "-w0", "-p5", "-n2", "put", "get", "browse",
           "0e0f1d0c-0000-0000-0000-000000000000:1", fp.STORE, fp.STORE + "-missing"]
# any character an argv can hold: no NUL, and surrogates only as os.fsdecode makes them of bytes
_CHARS = s.one_of(s.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
                  s.integers(0x80, 0xFF).map(lambda b: chr(0xDC00 + b)))
_SHORT = sorted(n[1] for n in _NAMES if len(n) == 2 and n[0] == "-" and n != "--")


def _token() -> s.SearchStrategy[str]:
    value = s.one_of(s.sampled_from(_VALUES), s.text(_CHARS, max_size=6))
    return s.one_of(
        s.sampled_from(_NAMES),
        value,
        s.tuples(s.sampled_from([n for n in _NAMES if n.startswith("--")]), value).map("=".join),
        s.lists(s.sampled_from(_SHORT), min_size=2, max_size=3).map(lambda cs: "-" + "".join(cs)),
    )


def _pairs(name: str) -> s.SearchStrategy[list[str]]:
    """Options of the command, each with a value drawn for it (or none, for a flag), written
    `--name VALUE` or `--name=VALUE`: mostly lines the fast path takes."""
    table = fastpath.COMMANDS[name].options
    value = s.one_of(s.sampled_from(_VALUES), s.text(_CHARS, max_size=6))

    def written(opt: str, v: str, attached: bool) -> list[str]:
        if table[opt].convert is None:
            return [opt]
        return [f"{opt}={v}"] if attached and opt.startswith("--") else [opt, v]

    one = s.builds(written, s.sampled_from(sorted(set(table) - _WAITING)), value, s.booleans())
    return s.lists(one, max_size=4).map(lambda xs: [a for x in xs for a in x])


def _argv() -> s.SearchStrategy[tuple[str, ...]]:
    root = s.lists(s.one_of(s.sampled_from(sorted(fastpath.ROOT)), s.sampled_from(_VALUES)), max_size=3)
    queue = s.one_of(s.sampled_from(["q", "q", "q", "empty", "nope", "-q", "--", "-", "q\udcff", ""]),
                     s.text(_CHARS, max_size=4))
    body = s.one_of(s.just([]), s.sampled_from(_VALUES).map(lambda v: [v]))

    @s.composite
    def line(draw: s.DrawFn) -> tuple[str, ...]:
        name = draw(s.sampled_from(sorted(fastpath.COMMANDS)))
        head = draw(root) if draw(s.integers(0, 3)) == 0 else []
        args = [draw(queue), *(draw(body) if name == "put" else [])]
        rest = draw(_pairs(name))
        if draw(s.integers(0, 2)) == 0:  # and something else anywhere
            rest.insert(draw(s.integers(0, len(rest))), draw(_token()))
        at = draw(s.integers(0, len(rest)))
        return (*head, name, *rest[:at], *args, *rest[at:])

    return line()


def _safe(argv: tuple[str, ...]) -> tuple[str, ...]:
    """Nothing that waits: --follow dropped, --wait only 0 (what a line does, not how long)."""
    out: list[str] = []
    for arg in argv:
        if arg in _WAITING or arg.startswith("--follow=") or arg.startswith("-w") and len(arg) > 2:
            continue
        if arg.startswith("--wait="):
            arg = "--wait=0"
        if out and out[-1] in ("--wait", "-w"):
            arg = "0" if arg in ("5m",) or arg[:1].isdigit() else arg
        if len(arg) == 3 and arg[0] == "-" and arg[1] != "-" and "f" in arg:  # -qf: follow in a cluster
            continue
        out.append(arg)
    return tuple(out)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return fp.make_template(tmp_path_factory.mktemp("fuzz") / "template")


_counter = itertools.count()
_DRAWN = re.compile(r"\b[0-9]{6,}\b")


@pytest.mark.slow
@settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(lines=s.lists(_argv(), min_size=1, max_size=LINES_PER_EXAMPLE))
def test_random_command_lines_give_the_same_on_both_paths(template, tmp_path, lines):
    lines = [_safe(argv) for argv in lines]
    with ThreadPoolExecutor(4) as pool:
        futures = []
        for argv in lines:
            where = tmp_path / str(next(_counter))
            where.mkdir()
            futures.append([pool.submit(fp._run, fast, {}, argv, template, where) for fast in (True, False)])
        results = [(argv, f.result(), t.result()) for argv, (f, t) in zip(lines, futures)]
    for argv, fast, typer in results:
        if any(arg.endswith("auto") for arg in argv):  # a fresh confirm or lock id, drawn at random
            fast, typer = (tuple(_DRAWN.sub("ID", x) if isinstance(x, str) else x for x in r) for r in (fast, typer))
        assert fast == typer, argv
        code, _, err = fast
        assert "Traceback" not in err, (argv, err)
        assert code != 1 or "--traceback" in argv, (argv, err)
