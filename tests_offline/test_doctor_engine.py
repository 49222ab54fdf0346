"""The doctor's engine-drift check (module ``trace_lib.doctor.engine``; the registry lands with ``trace-repro
doctor``): reported as info, naming each package that differs from the paper's pins and the fix."""

from __future__ import annotations

import pytest

pytest.importorskip("trace_lib.doctor.registry", reason="trace-repro doctor's registry (branch 'bundle') not merged")


def _ctx(release):
    from trace_lib.doctor.context import DoctorContext

    return DoctorContext(trace_root=str(release.path))


def test_engine_check_reports_drift_without_blocking(release, monkeypatch):
    from trace_lib.doctor.context import Status
    from trace_lib.doctor.engine import CHECKS, check_engine
    from trace_lib.environment import engine as engine_module

    paper = engine_module.paper_engine(release)
    drifted = engine_module.EngineVersions({**paper.packages, "vllm": "0.24.0"})
    monkeypatch.setattr(engine_module, "engine_versions", lambda probe=False: drifted)
    result = check_engine(_ctx(release))
    assert result.status is Status.INFO and result.ok
    assert result.detail.startswith(f"engine differs from the paper's (vllm 0.24.0 vs {paper.packages['vllm']})")
    assert "trace-repro env constraints" in result.detail
    same = engine_module.EngineVersions(dict(paper.packages))
    monkeypatch.setattr(engine_module, "engine_versions", lambda probe=False: same)
    assert check_engine(_ctx(release)).detail.startswith(f"the paper's engine: vllm {paper.packages['vllm']}")
    assert [c.name for c in CHECKS] == ["engine", "workbook"]


def test_engine_check_is_registered_and_always_reported():
    from trace_lib.doctor.registry import ALWAYS, CHECK_MODULES

    assert "trace_lib.doctor.engine" in CHECK_MODULES and "engine" in ALWAYS


def test_workbook_libraries_are_compared_with_the_paper_pins(monkeypatch):
    """pandas 3 reads some workbook columns differently: doctor names each library that is not the paper's."""
    import importlib.metadata

    from trace_lib.doctor.context import DoctorContext, Status
    from trace_lib.doctor.engine import check_workbook

    paper = {"pandas": "2.3.3", "xlsxwriter": "3.2.9", "openpyxl": "3.1.5"}
    monkeypatch.setattr(importlib.metadata, "version", lambda name: paper[name])
    assert "the paper's workbook libraries: pandas 2.3.3" in check_workbook(DoctorContext()).detail
    monkeypatch.setattr(importlib.metadata, "version", lambda name: {**paper, "pandas": "3.1.1"}[name])
    result = check_workbook(DoctorContext())
    assert result.status is Status.INFO and "pandas 3.1.1 vs 2.3.3" in result.detail
    assert "xlsxwriter" not in result.detail.split("(")[1].split(")")[0]
