"""The TRACE-validation suite views, under the import path validation modules used (defined in
:mod:`trace_lib.release.validation_suite`, beside the evaluation suite's views, so the judge pool can read them)."""

from __future__ import annotations

from trace_lib.release.validation_suite import (
    JudgeContract,
    ReleaseScore,
    ValidationModel,
    ValidationSuite,
    load_release_scores,
    load_system_prompt,
    load_validation_suite,
)

__all__ = ["JudgeContract", "ReleaseScore", "ValidationModel", "ValidationSuite", "load_release_scores",
           "load_system_prompt", "load_validation_suite"]
