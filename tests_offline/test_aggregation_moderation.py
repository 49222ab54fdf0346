"""Moderated seed variances (``aggregation.moderation``): the special functions' domains, which cells the prior fit
uses, its residual-dof floor and no-heterogeneity case, and a fitted prior's discounted ``d0``, moderated variance,
posterior dof and description."""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType

import pytest

from trace_lib.aggregation.moderation import VariancePrior, digamma, fit_variance_prior, trigamma, trigamma_inverse

pytestmark = pytest.mark.offline

SPREAD = [(1.0, 2), (2.0, 2), (4.0, 2), (8.0, 2), (16.0, 2)]


def _prior(prior_dof: float, group_cells: dict[str, int]) -> VariancePrior:
    return VariancePrior(prior_dof, MappingProxyType({"b": 2.0}), 8, 7, MappingProxyType(group_cells), trigamma(1.0))


@pytest.mark.parametrize("x", [0.0, -1.0])
def test_digamma_and_trigamma_need_a_positive_argument(x):
    with pytest.raises(ValueError, match=rf"^digamma needs x > 0, got {x}$"):
        digamma(x)
    with pytest.raises(ValueError, match=rf"^trigamma needs x > 0, got {x}$"):
        trigamma(x)


def test_trigamma_inverse_of_a_value_below_its_bracket_is_infinite_not_a_root_finding_error():
    """An excess of the fit in (0, trigamma(e**30)) means no spread between the cells' variances: d0 = inf."""
    edge = trigamma(math.exp(30.0))
    assert trigamma_inverse(5e-14) == trigamma_inverse(edge) == math.inf
    assert math.isclose(trigamma_inverse(2.0 * edge), math.exp(29.3), rel_tol=0.01)


@pytest.mark.parametrize("y", [0.0, -0.5, math.nan])
def test_trigamma_inverse_needs_a_positive_value(y):
    with pytest.raises(ValueError, match=rf"^trigamma_inverse needs y > 0, got {y}$"):
        trigamma_inverse(y)


def test_the_fit_drops_zero_infinite_and_zero_dof_cells_and_counts_the_rest_per_group():
    prior = fit_variance_prior({"g": [*SPREAD, (0.0, 2), (3.0, 0), (math.inf, 2)]})
    assert prior == fit_variance_prior({"g": SPREAD})
    assert prior.cells == 5 and prior.residual_dof == 4 and dict(prior.group_cells) == {"g": 5}


def test_cells_of_one_dof_are_fitted():
    prior = fit_variance_prior({"g": [(v, 1) for v, _ in SPREAD]})
    assert prior.cells == 5 and prior.cell_trigamma == pytest.approx(trigamma(0.5))


def test_the_fit_needs_four_residual_dof():
    assert fit_variance_prior({"g": SPREAD}).residual_dof == 4
    assert fit_variance_prior({"g": SPREAD[:4]}) is None
    assert fit_variance_prior({"g": [(0.0, 2)] * 6}) is None  # no usable cell


def test_equal_sample_variances_give_an_infinite_d0_and_the_unshifted_scale():
    prior = fit_variance_prior({"g": [(2.0, 2)] * 5})
    assert math.isinf(prior.prior_dof)
    assert prior.prior_var["g"] == pytest.approx(2.0 / math.exp(digamma(1.0)))  # exp(E[log s^2] - offset(d = 2))
    assert prior.describe() == "moderated seed variances (empirical Bayes, d0=inf from 5 cells, 4 dof)"


def test_a_groups_d0_is_discounted_by_one_over_its_cell_count_and_an_unknown_group_keeps_d0():
    prior = _prior(4.0, {"b": 8})
    d_eff = 2.0 * trigamma_inverse(trigamma(2.0) + (trigamma(1.0) + trigamma(2.0)) / 8)
    assert prior.effective_prior_dof("b") == pytest.approx(d_eff) and d_eff < 4.0
    assert prior.effective_prior_dof("unknown") == 4.0 and prior.prior_q("unknown") == 0.0
    assert prior.moderated_var("b", 5.0, 2) == pytest.approx((d_eff * 2.0 + 2 * 5.0) / (d_eff + 2))
    assert prior.posterior_dof("b", 2) == pytest.approx(d_eff + 2) and prior.prior_sd("b") == math.sqrt(2.0)


def test_an_infinite_d0_for_a_group_of_unknown_size_moderates_to_the_prior_scale():
    prior = _prior(math.inf, {})
    assert math.isinf(prior.effective_prior_dof("b")) and math.isinf(prior.posterior_dof("b", 2))
    assert prior.moderated_var("b", 5.0, 2) == 2.0


def test_the_description_gives_d0_cells_dof_and_a_two_way_scale():
    prior = _prior(4.0, {"b": 8})
    assert prior.describe() == "moderated seed variances (empirical Bayes, d0=4.00 from 8 cells, 7 dof)"
    two_way = dataclasses.replace(prior, cell_var=MappingProxyType({("b", "m"): 1.0}))
    assert two_way.describe() == ("moderated seed variances (empirical Bayes, d0=4.00 from 8 cells, 7 dof, scale per "
                                  "benchmark and model)")
