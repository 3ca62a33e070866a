"""The library's modules form layers: no import cycle in store/, counting the imports made
inside functions (which hide a cycle from Python but not from a reader), and a function-level
import only where loading the module at start-up would cost what the caller may never need.

Imports under `if TYPE_CHECKING:` are left out: they run only for a type checker (annotations
are strings here, `from __future__ import annotations`), so they order nothing at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "store"

#: Function-level imports of store/ modules, each with why it is not at the top of its module.
#: A new one needs a reason here; "a cycle" is not one.
LAZY = {
    ("store.analytics.job", "store.analytics"): "the job runs under spark-submit: Spark loads first",
    ("store.analytics.job", "store.analytics.outputs"): "the job runs under spark-submit: Spark loads first",
    ("store.analytics.job", "store.analytics.pipeline"): "the job runs under spark-submit: Spark loads first",
    ("store.analytics.job", "store.analytics.session"): "the job runs under spark-submit: Spark loads first",
    ("store.analytics.session", "store.analytics.source"): "the data source imports pyspark",
    ("store.analytics.pipeline", "store.reportfile"): "only `--reports FILE` reads a report file",
    ("store.analytics.routes", "store.analytics.columns"): "columns imports pyspark; the pure-Python pass does not need it",
    ("store.engine", "store.check"): "start-up cost: only `mqcli check` runs the consistency check",
    ("store.engine", "store.reports"): "start-up cost: only a traced put sends reports (reports loads the trace grammar's users)",
    ("store.forwarding", "store.outgoing"): "start-up cost: only the dispatcher, listener and `outgoing` commands use outgoing queues",
    ("store.reports", "store.trace"): "start-up cost: only a traced message makes a label and body (trace.py compiles its grammar)",
    ("store.filters", "store.selectors"): "start-up cost: only a --where selector needs its parser and regexes",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, bool]]:
    """(imported store module, made inside a function) for each import of `name`'s source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, bool]] = []

    def target(base: str, alias: str | None) -> str:
        sub = f"{base}.{alias}" if alias else base
        return sub if sub in modules else base

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other, in_function)
                continue
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package
                    for _ in range(child.level - 1):
                        base = base.rpartition(".")[0]
                    base = f"{base}.{child.module}" if child.module else base
                else:
                    base = child.module or ""
                if base == "store" or base.startswith("store."):
                    for alias in child.names:
                        found.append((target(base, alias.name), in_function))
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name == "store" or alias.name.startswith("store."):
                        found.append((alias.name, in_function))
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def _graph() -> tuple[dict[str, set[str]], set[tuple[str, str]]]:
    modules = _modules()
    edges: dict[str, set[str]] = {m: set() for m in modules}
    lazy: set[tuple[str, str]] = set()
    for name, path in modules.items():
        for imported, in_function in _imports(name, path, modules):
            if imported == name:
                continue
            edges[name].add(imported)
            if in_function:
                lazy.add((name, imported))
            # importing store.a.b runs store/a/__init__.py first
            parent = imported.rpartition(".")[0]
            while parent and parent != name and not name.startswith(parent + "."):
                edges[name].add(parent)
                parent = parent.rpartition(".")[0]
    return edges, lazy


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


def test_store_has_no_import_cycle_even_counting_imports_inside_functions():
    edges, _ = _graph()
    assert _cycles(edges) == []


def test_every_function_level_import_in_store_has_a_reason_other_than_a_cycle():
    _, lazy = _graph()
    assert sorted(lazy - set(LAZY)) == []
    assert sorted(set(LAZY) - lazy) == []  # a reason for an import that is gone goes too


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function():
    """The finder itself: a two-module loop and a three-module loop are found, a chain is not."""
    edges = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"g"}, "g": set()}
    assert sorted(_cycles(edges)) == [["a", "b"], ["c", "d", "e"]]
    source = ROOT / "store" / "write.py"
    modules = _modules()
    found = _imports("store.write", source, modules)
    assert ("store.keys", False) in found
