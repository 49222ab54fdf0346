"""trace_lib's package import graph, read with ``ast`` (module-level, function-level and ``TYPE_CHECKING``
imports alike), for the test that keeps it free of circles (docs/architecture.md lists the layer order)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

#: (importing module, imported package) -> the importing modules' names.
Edges = dict[tuple[str, str], set[str]]


@functools.lru_cache(maxsize=4)
def package_edges(root: Path) -> Edges:
    """Every arrow ``package -> package`` of the ``trace_lib`` tree at ``root``; a root module (``options``,
    ``errors``, ``pytest_plugin`` ...) counts as the unit ``trace_lib``. Cached per root: do not mutate."""
    edges: Edges = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        unit = parts[1] if len(parts) > 1 else "trace_lib"
        module = ".".join(parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(node, parts, is_package):
                pieces = target.split(".")
                if pieces[0] == "trace_lib" and len(pieces) > 1 and pieces[1] != unit:
                    edges.setdefault((unit, pieces[1]), set()).add(module)
    return edges


def module_edges(root: Path, package: str) -> Edges:
    """Every arrow ``module -> module`` between the modules of ``trace_lib.<package>`` (all imports, as
    :func:`package_edges`), in the same form, so that :func:`circles` finds a circle among them."""
    edges: Edges = {}
    for path in sorted((root / package).glob("*.py")):
        parts = ["trace_lib", package, path.stem]
        module = ".".join(parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(node, parts, False):
                pieces = target.split(".")
                if pieces[:2] == ["trace_lib", package] and len(pieces) > 2 and pieces[2] != path.stem:
                    edges.setdefault((path.stem, pieces[2]), set()).add(module)
    return edges


def _targets(node: ast.AST, parts: list[str], is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = parts if is_package else parts[:-1]
        base = base[: len(base) - node.level + 1]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    if module == "trace_lib":  # ``from trace_lib import options``; ``__version__`` is the root's own
        return [f"trace_lib.{alias.name}" for alias in node.names if not alias.name.startswith("__")]
    return [module]


def circles(edges: Edges) -> list[list[str]]:
    """The strongly connected components of more than one package, each sorted."""
    units = sorted({unit for edge in edges for unit in edge})
    reach = {u: {b for (a, b) in edges if a == u} for u in units}
    changed = True
    while changed:
        changed = False
        for u in units:
            wider = reach[u].union(*(reach[v] for v in reach[u]))
            if wider != reach[u]:
                reach[u], changed = wider, True
    found = {tuple(sorted({u, *(v for v in units if v in reach[u] and u in reach[v])})) for u in units if u in reach[u]}
    return sorted(list(c) for c in found)


def arrows_in_circles(edges: Edges) -> list[str]:
    """``a -> b (modules)`` for every arrow inside a circle."""
    members = {u: set(c) for c in circles(edges) for u in c}
    return [f"{a} -> {b} ({', '.join(sorted(mods))})" for (a, b), mods in sorted(edges.items())
            if b in members.get(a, ())]
