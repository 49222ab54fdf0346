"""Every trace_eval_v1 number of the release, reproduced: one test per slice, one overall test per model-seed.

Run (one H200 host, 8 GPU groups, a judge on :18100; see README "Reproducing the campaign")::

    TRACE_ROOT=<release> pytest tests_reproduction -m reproduction -n 8 --dist loadgroup \\
        --gpu-groups '0 1 2 3 4 5 6 7' --model-root <models> --data-root <data> \\
        --campaign-root <campaign> --judge-url http://127.0.0.1:18100/v1 --junitxml receipts.xml
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.reproduction


def test_slice(eval_slice, run_slice):
    verdict = run_slice(eval_slice).verdict
    assert verdict.ok, verdict.explain()


def test_overall(model_seed, overall):
    """The model-seed's overall and category scores, and its campaign checks (slices outside their 95% band vs
    chance; deltas shifted one way across benchmarks), each within the budget."""
    outcome = overall(*model_seed)
    assert not outcome.failures, "\n".join(outcome.failures)
