"""The TRACE validation's single-draw band (``aggregation.tolerance``): ``ok`` iff ``|delta| <= band`` and the rows
match, one explanation line per outcome, the receipt's properties and the JSON form."""

from __future__ import annotations

import math

import pytest

from trace_lib.aggregation.budget import Criterion
from trace_lib.aggregation.tolerance import Sigma, binomial_se, budget_verdict

pytestmark = pytest.mark.offline

SIGMA = Sigma(binomial=1.0)


def _verdict(reproduced: float, *, criterion: Criterion | None = None, rows: int | None = None,
             expected_rows: int | None = None):  # noqa: ANN202
    return budget_verdict(criterion or Criterion.from_z(2.0), subject="m/validation", reproduced=reproduced,
                          canonical=50.0, factor=math.sqrt(2), sigma=SIGMA, rows=rows, expected_rows=expected_rows)


def test_the_band_is_factor_z_sigma_and_its_edge_is_inside():
    def at(reproduced: float):  # noqa: ANN202 - band 2 x 1.5 x 1 = 3 pp, exact in binary
        return budget_verdict(Criterion.from_z(1.5), subject="s", reproduced=reproduced, canonical=50.0,
                              factor=2.0, sigma=SIGMA)

    assert _verdict(50.0).band == pytest.approx(2.0 * math.sqrt(2))
    assert at(53.0).band == 3.0 and at(53.0).ok and at(47.0).ok
    assert not at(53.0 + 1e-9).ok and not at(47.0 - 1e-9).ok


def test_rows_fail_the_verdict_only_when_both_counts_are_known_and_differ():
    assert _verdict(50.0, rows=2000, expected_rows=2000).ok
    assert _verdict(50.0, rows=None, expected_rows=2000).ok and _verdict(50.0, rows=1999).ok
    short = _verdict(50.0, rows=1999, expected_rows=2000)
    assert not short.rows_ok and not short.ok
    assert short.explain().endswith(", rows 1999 (expected 2000): FAILED (row count differs from the suite)")
    assert _verdict(50.0, rows=2000, expected_rows=2000).explain().endswith(", rows 2000: within tolerance")


def test_a_score_that_is_not_finite_fails_with_a_p_value_of_zero():
    for bad in (math.nan, math.inf):
        verdict = _verdict(bad)
        assert not verdict.ok and verdict.p_value == 0.0
        assert verdict.explain().endswith(": FAILED (reproduced score is not finite)")


def test_the_p_value_is_the_two_sided_normal_tail_of_delta_over_factor_sigma():
    verdict = _verdict(50.0 + 1.96 * math.sqrt(2), criterion=Criterion.from_z(1.5))
    assert verdict.p_value == pytest.approx(0.05, abs=1e-3)
    assert verdict.explain().endswith(f": FAILED (p = {verdict.p_value:.2g})")
    flat = budget_verdict(Criterion.from_z(2.0), subject="s", reproduced=51.0, canonical=50.0, factor=1.0,
                          sigma=Sigma(0.0))
    assert flat.p_value == 0.0 and not flat.ok  # no spread: any difference is significant


def test_the_explanation_states_the_rule_and_a_sidak_budget():
    line = _verdict(50.5).explain()
    assert line == ("m/validation: reproduced 50.500 vs canonical 50.000: delta +0.500 pp, allowed +/-2.828 pp "
                    "(z=2.000 x sqrt(1/1+1/1) x binomial 1.000): within tolerance")
    sidak = _verdict(50.5, criterion=Criterion.from_alpha(0.05, 8)).explain()
    assert "[alpha=0.05 over 8 tests, per-test 0.0064]" in sidak and sidak.endswith(": within tolerance")
    noted = budget_verdict(Criterion.from_z(2.0), subject="s", reproduced=50.0, canonical=50.0, factor=1.0,
                           sigma=SIGMA)
    assert "[engine" not in noted.explain()


def test_properties_and_json_carry_the_verdict_and_its_budget():
    verdict = _verdict(49.0, criterion=Criterion.from_alpha(0.05, 8), rows=2000, expected_rows=2000)
    props = dict(verdict.properties())
    assert props["verdict"] == "ok" and props["rows"] == "2000" and props["sigma_source"] == "binomial"
    assert float(props["delta"]) == -1.0 and float(props["band"]) == verdict.band and "engine_note" not in props
    assert props["tolerance_method"] == "sidak"
    data = verdict.to_dict()
    assert (data["ok"], data["alpha"], data["family_size"], data["method"]) == (True, 0.05, 8, "sidak")
    assert data["per_test_alpha"] == pytest.approx(1 - 0.95 ** (1 / 8)) and data["sigma_binomial"] == 1.0
    failed = dict(_verdict(60.0).properties())
    assert failed["verdict"] == "failed" and "rows" not in failed


def test_sigma_is_the_larger_of_binomial_and_seed_pool_and_names_it():
    assert (Sigma(1.0, 2.0).value, Sigma(1.0, 2.0).source) == (2.0, "seed pool")
    assert (Sigma(2.0, 1.0).value, Sigma(2.0, 1.0).source) == (2.0, "binomial")
    assert Sigma(1.0, 1.0).source == "binomial"


def test_the_binomial_se_clamps_the_mean_into_zero_to_a_hundred():
    assert binomial_se(50.0, 100) == pytest.approx(5.0)
    assert binomial_se(0.0, 100) == binomial_se(-3.0, 100) == 0.0
    assert binomial_se(100.0, 100) == binomial_se(104.0, 100) == 0.0
    assert binomial_se(10.0, 400) == pytest.approx(1.5)
