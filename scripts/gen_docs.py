#!/usr/bin/env python3
"""Generate the shell completions (completions/), the man pages (man/), README.md's
exit-code table and the help of the commands mqcli/fastpath.py runs (mqcli/help_text.py) from
the mqcli app and store/exit_codes.py.

    python scripts/gen_docs.py            write every generated file (and remove stale ones)
    python scripts/gen_docs.py --check    change nothing; exit 1 naming each file that would change

Everything comes from one walk of the whole click command tree (`mqcli.app.full_command()`:
every command of mqcli/registry.py, built by Typer): commands in the order `mqcli --help` lists them, each option with
its names, metavar, help (with click's `[default: …]` notes), choices and whether it takes a
value. Nothing else is read, so a new command or option reaches the completions and man pages
on the next run, and tests/test_generated_docs.py fails until that run is committed.

Completions are scripts of each shell's own, not click's `_MQCLI_COMPLETE=bash_source`
callbacks: commands, options and option values with fixed choices are completed by the script
alone, so a TAB there never starts Python (where a click callback imports typer, rich and the
command tree, about a quarter of a second) and the scripts can be read and reviewed like any
other file. Values that live in a store (queue names, outgoing queues' format names,
transaction ids, link names) are asked of `mqcli __complete KIND [--store PATH] -- WORD`,
which loads none of the app (mqcli/complete.py, whose table says which parameter names what);
file names are left to the shell where the parameter is a path or its metavar names a FILE,
directories for a store path.

Man pages are plain man(7) troff that must render with `groff -man -ww -z` silently
(scripts/gendocs/man.py says how help text is escaped).

The exit codes (man/mqcli.1's EXIT STATUS and README.md's exit-code table, between its marker
lines) come from the table of store/exit_codes.py.

Each job is a module of scripts/gendocs/: tree.py reads the app; man.py, bash.py, zsh.py,
fish.py and readme.py each make their files; this script writes them, or with --check compares
them.

Output is deterministic: no dates, no absolute paths, the version only from mqcli.__version__.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "scripts"):  # the checkout's mqcli, whatever is installed; gendocs
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from gendocs import PROG, REGENERATE  # noqa: E402
from gendocs.bash import bash  # noqa: E402
from gendocs.fish import fish  # noqa: E402
from gendocs.helptext import help_module  # noqa: E402
from gendocs.man import command_page, main_page  # noqa: E402
from gendocs.readme import readme  # noqa: E402
from gendocs.tree import command_tree  # noqa: E402
from gendocs.zsh import zsh  # noqa: E402


# ---- files ------------------------------------------------------------------------------

def generate() -> dict[str, str]:
    """Every generated file: path relative to the repository -> content."""
    root = command_tree()
    files = {
        "completions/mqcli.bash": bash(root),
        "completions/_mqcli": zsh(root),
        "completions/mqcli.fish": fish(root),
        "man/mqcli.1": main_page(root),
    }
    for cmd in root.walk()[1:]:
        files[f"man/{cmd.page}.1"] = command_page(cmd, root)
    from mqcli.fastpath import COMMANDS  # the commands it runs without Typer, their help too

    files["mqcli/help_text.py"] = help_module(ROOT, list(COMMANDS))
    current = ROOT / "README.md"
    if current.exists():  # its exit-code table; the rest of it is written by hand
        files["README.md"] = readme(current.read_text(encoding="utf-8"))
    return files


def _existing() -> set[str]:
    """Generated files now in the tree (so a removed command's page counts as stale)."""
    found = {f"man/{p.name}" for p in (ROOT / "man").glob(f"{PROG}*.1")}
    found |= {f"completions/{p.name}" for p in (ROOT / "completions").glob("*") if p.is_file()}
    return found


def check(files: dict[str, str]) -> list[str]:
    """A line (and a short diff) for each file that generating would change."""
    problems = []
    for rel, content in sorted(files.items()):
        path = ROOT / rel
        if not path.exists():
            problems.append(f"missing: {rel}")
            continue
        current = path.read_text(encoding="utf-8")
        if current != content:
            diff = list(difflib.unified_diff(current.splitlines(), content.splitlines(),
                                             f"{rel} (in the tree)", f"{rel} (generated)", lineterm="", n=1))
            shown = diff[:24] + ([f"... {len(diff) - 24} more diff lines"] if len(diff) > 24 else [])
            problems.append(f"stale: {rel}\n" + textwrap.indent("\n".join(shown), "    "))
    for rel in sorted(_existing() - set(files)):
        problems.append(f"not generated (remove it): {rel}")
    return problems


def write(files: dict[str, str]) -> list[str]:
    changed = []
    for rel, content in sorted(files.items()):
        path = ROOT / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != content:
            path.write_text(content, encoding="utf-8", newline="\n")
            changed.append(f"wrote {rel}")
    for rel in sorted(_existing() - set(files)):
        (ROOT / rel).unlink()
        changed.append(f"removed {rel}")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Generate completions/, man/ and README.md's exit codes from the mqcli app.")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a generated file is missing or stale")
    args = parser.parse_args(argv)
    files = generate()
    if args.check:
        problems = check(files)
        if problems:
            print("\n".join(problems), file=sys.stderr)
            print(f"{len(problems)} generated file(s) out of date: run `{REGENERATE}` and commit the result",
                  file=sys.stderr)
            return 1
        print(f"{len(files)} generated files up to date")
        return 0
    changed = write(files)
    print("\n".join(changed) if changed else f"{len(files)} generated files already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
