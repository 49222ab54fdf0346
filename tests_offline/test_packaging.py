"""What the wheel ships: trace_lib without its test support (trace_lib.testing stays importable from a checkout)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

from trace_lib.testing.import_graph import package_edges

REPO = Path(__file__).resolve().parents[1]


def test_the_distribution_leaves_out_trace_lib_testing():
    """The packages setuptools' ``packages.find`` config selects (what ``pip wheel .`` builds) hold no test support."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    shipped = set(find_packages(str(REPO), include=config["find"]["include"], exclude=config["find"]["exclude"]))
    assert not {p for p in shipped if p == "trace_lib.testing" or p.startswith("trace_lib.testing.")}
    assert {"trace_lib", "trace_lib.scoring", "trace_lib.generation.backends", "trace_lib.validation"} <= shipped
    assert (REPO / "trace_lib" / "testing" / "__init__.py").is_file()  # still there for the tests


def test_no_shipped_module_imports_the_test_support():
    """Every import of trace_lib.testing (module- or function-level) comes from trace_lib.testing itself."""
    edges = package_edges(REPO / "trace_lib")
    assert {a: sorted(m) for (a, b), m in edges.items() if b == "testing"} == {}
