"""The design lives inside the repository: code cites docs/ or public documents by name, and
every docs/ page and anchor it cites exists (docs/design.md#sources says where each rule comes
from)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE_DIRS = ("store", "mqcli", "tests", "bench", "scripts", "docs")
TOP_FILES = ("README.md", "RELIABILITY.md")
TEXT_SUFFIXES = {".py", ".md", ".json", ".jsonl", ".txt", ".toml", ".cfg", ".sh", ".csv"}

# Citations of documents a reader of the repository does not have: the product contract's
# sections and the source summaries it was written from. Spelled in two parts so that this
# file does not cite them itself.
OUTSIDE = (re.compile(re.escape("SPEC " + "\u00a7")), re.compile("seed" + r"\s+00\d", re.IGNORECASE))

# A citation from the repository root: docs/NAME.md, README.md or RELIABILITY.md, with an
# optional #anchor (not part of a longer path such as bench/README.md).
ROOT_CITATION = re.compile(r"(?<![\w/.-])(docs/[\w.-]+\.md|README\.md|RELIABILITY\.md)(?:#([\w-]+))?")
# A Markdown link target with an anchor, relative to the page it is on: (#x), (page.md#x).
MARKDOWN_LINK = re.compile(r"\]\(([^)\s#]*)#([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def text_files(root: Path) -> list[Path]:
    files = [root / name for name in TOP_FILES if (root / name).is_file()]
    for d in CODE_DIRS:
        for path in sorted((root / d).rglob("*")):
            if path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts:
                files.append(path)
    return files


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a Markdown page (headings inside code blocks are not headings)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def outside_citations(root: Path) -> list[str]:
    """`path:line: text` of every line that cites a document outside the repository."""
    bad = []
    for path in text_files(root):
        for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if any(p.search(line) for p in OUTSIDE):
                bad.append(f"{path.relative_to(root)}:{i}: {line.strip()}")
    return bad


def broken_citations(root: Path) -> list[str]:
    """`path:line: target` of every cited page or anchor that does not exist."""
    cache: dict[Path, set[str]] = {}

    def missing(page: Path, anchor: str | None) -> bool:
        if not page.is_file():
            return True
        if anchor is None:
            return False
        if page not in cache:
            cache[page] = anchors(page)
        return anchor not in cache[page]

    bad = []
    for path in text_files(root):
        if path == Path(__file__).resolve():
            continue  # its examples of broken citations are meant to be broken
        for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for m in ROOT_CITATION.finditer(line):
                if missing(root / m.group(1), m.group(2)):
                    bad.append(f"{path.relative_to(root)}:{i}: {m.group(0)}")
            if path.suffix != ".md":
                continue
            for m in MARKDOWN_LINK.finditer(line):
                target, anchor = m.group(1), m.group(2)
                if "://" in target or not (target == "" or target.endswith(".md")):
                    continue
                if missing((path.parent / target).resolve() if target else path, anchor):
                    bad.append(f"{path.relative_to(root)}:{i}: ({target}#{anchor})")
    return bad


def test_no_file_cites_the_contract_or_the_seed_summaries():
    assert outside_citations(ROOT) == []


def test_every_cited_docs_page_and_anchor_exists():
    assert broken_citations(ROOT) == []


def test_the_design_page_exists_and_has_the_sections_code_cites():
    expected = {"sources", "store", "tables", "messages", "ids", "states", "enqueue", "dequeue",
                "leases", "holders", "transactions", "queues", "exit-codes", "trace-reports",
                "store-and-forward", "pipeline"}
    assert expected <= anchors(ROOT / "docs" / "design.md")


def test_anchors_are_the_ones_github_makes():
    assert slug("4. Who commits what, when \u2014 and why each message crosses exactly once") == \
        "4-who-commits-what-when--and-why-each-message-crosses-exactly-once"
    assert slug("The `store` library") == "the-store-library"
    assert slug("Exit codes") == "exit-codes"


def test_the_checks_find_an_outside_citation_and_a_missing_page_or_anchor(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "design.md").write_text(
        "# Design\n\n## States\n\nSee [enqueue](#enqueue) and [ok](#states).\n\n"
        "```sh\n# not a heading\n```\n", encoding="utf-8")
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "a.py").write_text(
        "# the rule (" + "SPEC " + "\u00a7" + "5)\n"
        "# as " + "Seed" + " 002 says\n"
        "# docs/design.md#states is fine, docs/design.md#not-a-heading is not\n"
        "# docs/missing.md#x and README.md#exit-codes are not there either\n", encoding="utf-8")
    assert outside_citations(tmp_path) == [
        "store/a.py:1: # the rule (" + "SPEC " + "\u00a7" + "5)",
        "store/a.py:2: # as " + "Seed" + " 002 says",
    ]
    assert broken_citations(tmp_path) == [
        "store/a.py:3: docs/design.md#not-a-heading",
        "store/a.py:4: docs/missing.md#x",
        "store/a.py:4: README.md#exit-codes",
        "docs/design.md:5: (#enqueue)",
    ]
