"""The generated parts of README.md: the exit-code table, from store/exit_codes.py.

The table stands between two marker lines (HTML comments, which markdown does not show); the
rest of the README is written by hand and left as it is.
"""

from __future__ import annotations

from collections.abc import Iterable

from store.exit_codes import ExitCode, statuses

from . import REGENERATE

BEGIN = f"<!-- exit codes: generated from store/exit_codes.py by `{REGENERATE}`; do not edit -->"
END = "<!-- end of the generated exit codes -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def exit_code_table(table: Iterable[ExitCode] = ExitCode) -> str:
    """The markdown table: code, name, the statuses its error lines show, meaning."""
    rows = ["| code | name | status | meaning |", "| --- | --- | --- | --- |"]
    for code in table:
        shown = ", ".join(status.shown for status in statuses(code)) or "—"
        rows.append(f"| {int(code)} | {code.name} | {_cell(shown)} | {_cell(code.meaning)} |")
    return "\n".join(rows) + "\n"


def readme(current: str, table: Iterable[ExitCode] = ExitCode) -> str:
    """`current` (the README's text) with the exit-code table between its markers regenerated."""
    head, begin, rest = current.partition(BEGIN + "\n")
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise SystemExit(f"gen_docs: README.md lacks the marker lines of the exit-code table:\n"
                         f"{BEGIN}\n{END}")
    return head + begin + exit_code_table(table) + end + tail
