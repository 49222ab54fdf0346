"""The TRACE-validation verdict (trace_lib.validation.tolerance): the binomial band around the release's single draw,
one draw on each side, the budget over the suite's models or a bare z."""

from __future__ import annotations

import math

import pytest

from trace_lib.release.validation_suite import ReleaseScore
from trace_lib.validation.tolerance import check_validation_score, validation_criterion

CANONICAL = ReleaseScore("trace-qwen2.5-vl-3b", "TRACE Qwen2.5-VL-3B", 2000, 41.05)
SE = 100 * math.sqrt(0.4105 * 0.5895 / 2000)


def test_a_bare_z_is_one_test_at_that_z_with_one_draw_on_each_side():
    verdict = check_validation_score(CANONICAL, 45.0, rows=2000)
    assert (verdict.z, verdict.criterion.family_size, verdict.criterion.method) == (3.0, 1, "fixed-z")
    assert verdict.band == pytest.approx(3.0 * math.sqrt(2) * SE, rel=1e-12)
    assert (verdict.reproduced_seeds, verdict.canonical_seeds, verdict.sigma.seed_pool) == (1, 1, 0.0)
    assert dict(verdict.properties())["sigma_source"] == "binomial"
    assert "(z=3.000 x sqrt(1/1+1/1) x binomial " in verdict.explain()
    assert check_validation_score(CANONICAL, 45.0, rows=2000, z=2.0).band == pytest.approx(2 * math.sqrt(2) * SE)


def test_the_budget_spreads_alpha_over_the_suites_models(release):
    criterion = validation_criterion(release)
    verdict = check_validation_score(CANONICAL, 41.05 + 4.0, rows=2000, criterion=criterion)
    assert criterion.family_size == 8 and verdict.criterion is criterion
    assert verdict.ok and not check_validation_score(CANONICAL, 41.05 + 4.5, rows=2000, criterion=criterion).ok
    assert not check_validation_score(CANONICAL, 41.05, rows=1999, criterion=criterion).ok  # rows must match
