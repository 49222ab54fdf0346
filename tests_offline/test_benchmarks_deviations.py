"""benchmarks/deviations.py is the one source of the deviations: every benchmark has an entry, docs are generated."""

from __future__ import annotations

from pathlib import Path

from trace_lib.benchmarks import deviations
from trace_lib.benchmarks.registry import PROTOCOLS

DOC = Path(__file__).resolve().parents[1] / "docs" / "deviations.md"


def test_every_benchmark_of_the_registry_has_an_entry_and_no_other():
    assert set(deviations.DEVIATIONS) == set(PROTOCOLS)


def test_the_docs_table_is_generated_from_the_module():
    """Fails when deviations.py changed and docs/deviations.md was not regenerated (the command is in the doc)."""
    assert DOC.read_text(encoding="utf-8") == deviations.markdown()
    for line in deviations.DEVIATIONS["mathvision"] + deviations.JUDGE_DEVIATIONS:
        assert line.replace("|", "\\|") in DOC.read_text(encoding="utf-8")


def test_a_slice_receipt_carries_its_benchmarks_lines():
    props = deviations.receipt_properties(deviations.for_benchmark("treebench"))
    assert {name for name, _ in props} == {"deviation"}
    assert [v for _, v in props][-len(deviations.DEVIATIONS["treebench"]):] == deviations.DEVIATIONS["treebench"]
    assert deviations.for_validation() == deviations.JUDGE_DEVIATIONS
