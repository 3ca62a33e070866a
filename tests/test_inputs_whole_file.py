"""A regular file given to `put --jsonl` or `import` is read and checked whole before its
first record is stored (mqcli/inputs.py WholeFile): the records of its first KEEP_READ_BYTES
are kept as read, the rest read again from where the kept ones end. Whatever the budget, the
records handed out are the ones a single read of the file gives, with their line numbers, in
order, each once; a bad line anywhere hands out none; the progress position only moves on and
ends at the file's end."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqcli import inputs
from store import errors

LIMIT = 1 << 16


def _lines(bodies: list[str | None]) -> bytes:
    """A JSONL text: a record per body, a blank line for None."""
    return b"".join(b"\n" if b is None else b'{"body":"%s","priority":%d}\n' % (b.encode(), len(b) % 8)
                    for b in bodies)


def _single_read(data: bytes) -> list[tuple[int, bytes, int]]:
    """What one read of the text gives (a pipe is read once)."""
    read = inputs.put_records(io.BytesIO(data), LIMIT, LIMIT)
    assert not isinstance(read, inputs.WholeFile)
    return [(n, m.body, m.priority) for n, m in read]


def _whole_file(path, data: bytes) -> tuple[list[tuple[int, bytes, int]], list[int]]:
    path.write_bytes(data)
    with open(path, "rb") as stream:
        read = inputs.put_records(stream, LIMIT, LIMIT)
        assert isinstance(read, inputs.WholeFile)
        out, positions = [], []
        for n, m in read:
            out.append((n, m.body, m.priority))
            positions.append(read.position())
        positions.append(read.position())
    return out, positions


@settings(max_examples=60, deadline=None)
@given(bodies=st.lists(st.one_of(st.none(), st.text("abcxyz", max_size=40)), max_size=60),
       budget=st.integers(0, 3000))
def test_the_records_handed_out_are_those_of_one_read_whatever_the_budget(tmp_path_factory, bodies, budget):
    data = _lines(bodies)
    path = tmp_path_factory.mktemp("whole") / "in.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(inputs, "KEEP_READ_BYTES", budget)
        got, positions = _whole_file(path, data)
    assert got == _single_read(data)
    assert positions == sorted(positions)
    assert positions[-1] == len(data)


@pytest.mark.parametrize("budget", [0, 200, 1 << 30])
def test_a_bad_line_past_the_kept_records_hands_out_none(tmp_path, budget, monkeypatch):
    """The bad line is the last of 300, far past a small budget: the first record is never
    handed out, and the error names the line."""
    monkeypatch.setattr(inputs, "KEEP_READ_BYTES", budget)
    path = tmp_path / "in.jsonl"
    path.write_bytes(_lines(["ok"] * 299) + b'{"body":"a","priority":9}\n')
    with open(path, "rb") as stream:
        read = iter(inputs.put_records(stream, LIMIT, LIMIT))
        with pytest.raises(errors.BadData, match="line 300: "):
            next(read)


def test_the_progress_of_the_store_phase_follows_the_records_handed_out(tmp_path, monkeypatch):
    """While kept records are handed out the position is theirs, not the end of the check
    read: a bar never says "done" before the records are."""
    monkeypatch.setattr(inputs, "KEEP_READ_BYTES", 1 << 30)
    data = _lines(["abc"] * 100)
    got, positions = _whole_file(tmp_path / "in.jsonl", data)
    line = len(data) // 100
    assert positions[:3] == [line, 2 * line, 3 * line]
    assert len(got) == 100


@pytest.mark.parametrize("budget", [0, 500, 1 << 30])
def test_lines_written_to_the_file_after_its_check_are_not_handed_out(tmp_path, budget, monkeypatch):
    """The file as it was checked is what is stored: lines appended after the check (a good
    one and a bad one) are neither stored nor a reason to fail half-way, however much of the
    file is read a second time."""
    monkeypatch.setattr(inputs, "KEEP_READ_BYTES", budget)
    data = _lines([f"m{i}" for i in range(100)])
    path = tmp_path / "in.jsonl"
    path.write_bytes(data)
    with open(path, "rb") as stream:
        read = inputs.put_records(stream, LIMIT, LIMIT)
        assert isinstance(read, inputs.WholeFile)
        read.check()
        with open(path, "ab") as writer:
            writer.write(_lines(["late"]) + b'{"body":"bad","priority":9}\n')
        got = [(n, m.body, m.priority) for n, m in read]
    assert got == _single_read(data)
