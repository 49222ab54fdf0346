"""The lead's foundation pieces: registry, deterministic fallback, workbook round trip, CLI root, judge stub."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from trace_lib.benchmarks import registry
from trace_lib.errors import ProtocolNotImplementedError, UsageError
from trace_lib.extraction import workbook
from trace_lib.release.suite import load_suite
from trace_lib.scoring.fallback import deterministic_choice


def test_registry_keys_equal_suite_keys(release):
    assert list(registry.PROTOCOLS) == list(load_suite(release).keys)


def test_registry_unknown_key_names_close_matches():
    with pytest.raises(UsageError, match="did you mean mathvista"):
        registry.get_protocol("mathvistaa")


def test_registry_missing_module_is_not_implemented(monkeypatch):
    monkeypatch.setitem(registry.PROTOCOLS, "mmstar", "trace_lib.benchmarks._no_such_module:PROTOCOL")
    with pytest.raises(ProtocolNotImplementedError, match="mmstar: evaluation protocol not implemented"):
        registry.get_protocol("mmstar")


def test_deterministic_choice_is_repeatable_and_seed_dependent():
    options = list("ABCDEFGH")
    first = [deterministic_choice(options, benchmark="blink", index=i, seed=42) for i in range(64)]
    again = [deterministic_choice(options, benchmark="blink", index=i, seed=42) for i in range(64)]
    other = [deterministic_choice(options, benchmark="blink", index=i, seed=43) for i in range(64)]
    assert first == again
    assert first != other
    assert set(first) <= set(options)


@pytest.mark.parametrize(
    ("cell", "expected"),
    [("", math.nan), ("None", math.nan), ("N/A", math.nan), ("nan", math.nan), ("=1+1", 0), ("B", "B"), (" NA", " NA")],
)
def test_workbook_roundtrip_cell(cell, expected):
    got = workbook.roundtrip_cell(cell)
    if isinstance(expected, float) and math.isnan(expected):
        assert isinstance(got, float) and math.isnan(got)
    else:
        assert got == expected


def test_workbook_truncates_to_excel_cell_limit():
    assert len(workbook.roundtrip_cell("x" * 40000)) == workbook.EXCEL_CELL_LIMIT
    assert workbook.roundtrip_text(None) == "nan"


def _is_nan(value):
    """True for the float NaN a round-tripped cell can hold (not None)."""
    return isinstance(value, float) and math.isnan(value)


def test_workbook_random_cells_read_back_as_pandas_reads_a_file(tmp_path):
    """Random text cells through the in-memory round trip equal ``to_excel`` + ``read_excel`` on a real file."""
    import random

    import pandas as pd

    pieces = ["", "A", " ", "=", "{=", "}", "nan", "None", "N/A", "\r", "\n", "\t", "\x01", "\x1f", "http://",
              "mailto:", "é", "The answer is (B).", "42", "-", "#N/A", "null", "_x0041_", "x" * 900]
    rng = random.Random(0)
    values = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 4))) for _ in range(400)]
    # A link or formula holding a control character makes XlsxWriter emit XML that openpyxl cannot read (upstream
    # crashes there; trace-repro raises a one-line error, tested in test_extraction_workbook.py).
    values = [v for v in values if not (v.startswith(("http://", "mailto:", "=", "{=")) and any(
        c in v for c in "\x01\x1f\r"))]
    path = tmp_path / "t.xlsx"
    pd.DataFrame({"index": range(len(values)), "prediction": values}).to_excel(path, index=False, engine="xlsxwriter")
    back = [v.item() if hasattr(v, "item") else v for v in pd.read_excel(path)["prediction"].tolist()]
    got = workbook.roundtrip_column(values)
    assert [i for i, (a, b) in enumerate(zip(back, got)) if not (a == b or (_is_nan(a) and _is_nan(b)))] == []




def test_cli_without_command_prints_help_and_exits_usage():
    proc = subprocess.run([sys.executable, "-m", "trace_lib"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "usage: trace-repro" in proc.stderr


def test_cli_version():
    proc = subprocess.run([sys.executable, "-m", "trace_lib", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("trace-repro ")


def test_cli_table_help_matches_each_module(monkeypatch):
    """The lazy command table lists the same help its module registers (one text, checked here)."""
    import argparse
    import importlib

    from trace_lib.cli.main import COMMANDS

    for name, (module_name, help_text) in COMMANDS.items():
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(module_name).add_parser(sub)
        assert name in sub.choices, f"{module_name} does not register {name!r}"
        listed = {action.dest: action.help for action in sub._choices_actions}
        assert listed[name] == help_text, name


def test_cli_imports_only_the_chosen_command():
    code = (
        "import sys; from trace_lib.cli.main import main; main(['benchmarks', '--json']);"
        "print(sorted(m for m in sys.modules if m.startswith('trace_lib.cli.')), file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "trace_lib.cli.benchmarks" in proc.stderr and "trace_lib.cli.train" not in proc.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"x \boxed{ 3 } y", "3"),
        (r"\boxed{1} then \boxed{{2}}", "{2}"),
        (r"\boxed{1} then \boxed{2", "1"),  # an unbalanced box ends the scan, keeping the previous one
        (r"\boxed {4}", None),  # literal opener only: no whitespace before the brace
        ("no box", None),
    ],
)
def test_literal_box_scanner(text, expected):
    from trace_lib.extraction.boxed import last_boxed_literal

    assert last_boxed_literal(text) == expected
