"""Every trace_eval_v1 number of the release, reproduced: one test per slice, mean, category, overall and claim.

Run (one 8-GPU host: generation on every GPU, then the judge pool on the same GPUs; see README "Reproducing the
evaluation campaign")::

    TRACE_ROOT=<release> pytest tests_reproduction -m reproduction -n 8 --dist loadgroup \\
        --gpu-groups '0 1 2 3 4 5 6 7' --model-root <models> --data-root <data> \\
        --campaign-root <campaign> --judge-serve --phase all --junitxml receipts.xml
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.reproduction


def test_slice(eval_slice, run_slice, verdict_outcome):
    """A seed's score against the canonical mean, from the row-level variance of every planned seed of its cell."""
    verdict_outcome(run_slice(eval_slice).verdict)


def test_planned(planned_test, judge_planned, verdict_outcome):
    """A model-benchmark mean, a category, the overall score or one of the paper's claims (model minus base, paired
    by row and seed)."""
    verdict_outcome(judge_planned(planned_test))
