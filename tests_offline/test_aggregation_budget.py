"""The false-alarm budget: critical values (scipy), the validation's family, options, the moderation prior fit."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from trace_lib import options
from trace_lib.aggregation.budget import (
    Criterion,
    check_alpha,
    family_rate,
    normal_two_sided_quantile,
    sidak_level,
    t_two_sided_quantile,
    t_two_sided_tail,
)
from trace_lib.aggregation.moderation import digamma, fit_variance_prior, trigamma, trigamma_inverse
from trace_lib.campaign.plan import build_plan
from trace_lib.errors import UsageError
from trace_lib.validation.tolerance import validation_criterion

pytestmark = pytest.mark.offline


# -- critical values ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("a", "dof", "expected"), [
    (0.05, 1, 12.706204736),  # textbook t tables (two-sided)
    (0.05, 2, 4.302652730),
    (0.01, 2, 9.924843201),
    (0.05, 16, 2.119905299),
    (0.001, 16, 4.014996327),
    (0.01, 17, 2.898230519),
    (0.05, 30, 2.042272456),
])
def test_t_quantiles_match_the_tables(a, dof, expected):
    assert t_two_sided_quantile(a, dof) == pytest.approx(expected, abs=1e-8)
    assert t_two_sided_tail(expected, dof) == pytest.approx(a, rel=1e-7)


def test_t_tends_to_the_normal_and_sidak_inverts():
    assert normal_two_sided_quantile(0.05) == pytest.approx(1.959963985, abs=1e-8)
    assert t_two_sided_quantile(1e-4, 20000) == pytest.approx(normal_two_sided_quantile(1e-4), rel=1e-3)
    assert sidak_level(0.05, 1) == pytest.approx(0.05)
    assert sidak_level(0.05, 984) == pytest.approx(5.2126e-5, rel=1e-4)
    assert family_rate(sidak_level(0.05, 984), 984) == pytest.approx(0.05)


def test_fixed_z_reports_the_implied_alpha():
    crit = Criterion.from_z(3.0, 984, dof=16)
    assert crit.per_test_alpha == pytest.approx(t_two_sided_tail(3.0, 16)) and crit.per_test_alpha > 0.008
    assert crit.alpha > 0.99 and crit.binomial_z() == crit.pool_t(16) == 3.0
    assert "implied family-wise alpha" in crit.describe()
    assert dict(crit.properties())["tolerance_alpha_kind"] == "implied"


def test_alpha_and_margin_reach_the_plan(release):
    plan = build_plan(release, tolerance_alpha=0.01, margin=1.5, with_judge=False)
    rule_line, tests = plan.power(release)
    # 576 slices + 192 means + 48 categories + 8 overall + 6 claims x (24 + 6 + 1) levels, sign and agreement each
    assert rule_line.startswith("alpha=0.01 family-wise over 1196 tests ") and "inside +-1.5 points" in rule_line
    assert len(tests) == 576 + 192 + 48 + 8 + 6 * 31  # one line per planned test id
    for bad in ("0", "1", "nan", "-0.1"):
        with pytest.raises(ValueError):
            options.open_unit_number(bad)


def test_validation_budget_spreads_alpha_over_the_eight_models(release):
    crit = validation_criterion(release)
    assert crit.family_size == 8 and crit.binomial_z() == pytest.approx(normal_two_sided_quantile(sidak_level(0.05, 8)))
    assert validation_criterion(release, z=3.0).binomial_z() == 3.0


@pytest.mark.parametrize("dof", [0, -1.0, math.nan])
def test_a_t_tail_needs_a_positive_dof(dof):
    with pytest.raises(ValueError, match=rf"^dof must be positive, got {dof}$"):
        t_two_sided_tail(2.0, dof)


@pytest.mark.parametrize("a", [0.0, 1.0, -0.1])
def test_a_t_quantile_needs_a_level_strictly_inside_zero_and_one(a):
    with pytest.raises(ValueError, match=rf"^level must be in \(0, 1\), got {a}$"):
        t_two_sided_quantile(a, 5)


@pytest.mark.parametrize("alpha", [0.0, 1.0, 1.5, -0.05, math.nan, math.inf, "0.05", None])
def test_alpha_outside_the_open_unit_interval_is_a_usage_error_of_the_alpha_flag(alpha):
    with pytest.raises(UsageError) as info:
        check_alpha(alpha)
    assert info.value.message == "alpha must be a number in (0, 1)"
    assert info.value.field == "--alpha" and info.value.found is alpha
    with pytest.raises(UsageError):
        Criterion.from_alpha(alpha, 3)


def test_alpha_inside_the_unit_interval_is_returned_as_a_float():
    assert check_alpha(0.05) == 0.05 and type(check_alpha(0.05)) is float


@pytest.mark.parametrize("z", [0, 0.0, -1.0, math.nan, math.inf, "3"])
def test_a_fixed_z_that_is_not_a_positive_number_is_a_usage_error_of_the_z_flag(z):
    with pytest.raises(UsageError) as info:
        Criterion.from_z(z, 3)
    assert (info.value.message, info.value.field) == ("z must be a positive number", "--tolerance-z")


def test_a_fixed_z_is_one_test_unless_a_family_is_given():
    crit = Criterion.from_z(2.0)
    assert crit.family_size == 1 and crit.family_text == "1 tests" and crit.alpha == pytest.approx(crit.per_test_alpha)


def test_a_family_of_zero_counts_as_one_test_and_a_sure_test_gives_a_sure_family():
    assert family_rate(0.05, 0) == pytest.approx(0.05) and sidak_level(0.05, 0) == pytest.approx(0.05)
    assert family_rate(1.0, 5) == 1.0  # the level is clipped below 1 before its log


def test_pool_t_is_the_t_quantile_with_dof_and_the_normal_one_without():
    crit = Criterion.from_alpha(0.05, 8)
    normal = normal_two_sided_quantile(sidak_level(0.05, 8))
    assert crit.pool_t(16) == t_two_sided_quantile(sidak_level(0.05, 8), 16) > normal
    assert crit.pool_t(0) == crit.pool_t(math.inf) == crit.binomial_z() == normal


# -- the moderation prior (trace_lib.aggregation.moderation, on scipy) ------------------------------------------

def _prior_table(d0, s0_sq, groups=40, cells=8, dof=2, seed=7):  # noqa: ANN001, ANN202
    """Cells whose true variance is a draw of ``d0 s0^2 / chi2_d0`` (s0^2 per group), each seen through ``dof``."""
    rng = random.Random(seed)
    table = {}
    for g in range(groups):
        scale = s0_sq * (1 + g % 5)
        table[f"g{g}"] = [(scale * d0 / rng.gammavariate(d0 / 2, 2) * rng.gammavariate(dof / 2, 2) / dof, dof)
                          for _ in range(cells)]
    return table


def test_digamma_trigamma_and_the_inverse():
    assert digamma(1.0) == pytest.approx(-0.5772156649015329, abs=1e-10)
    assert digamma(0.5) == pytest.approx(-1.9635100260214235, abs=1e-10)
    assert trigamma(1.0) == pytest.approx(math.pi**2 / 6, abs=1e-10)
    assert trigamma(2.0) == pytest.approx(math.pi**2 / 6 - 1, abs=1e-10)
    assert trigamma_inverse(trigamma(1.95)) == pytest.approx(1.95, rel=1e-9)
    assert t_two_sided_tail(2.0, 5.5) == pytest.approx(0.0967543902, rel=1e-7)  # fractional dof: incomplete beta
    assert t_two_sided_quantile(0.05, 5.0) == pytest.approx(t_two_sided_quantile(0.05, 5.0 + 1e-9), rel=1e-6)
    assert t_two_sided_quantile(1e-3, math.inf) == pytest.approx(normal_two_sided_quantile(1e-3))


def test_the_prior_fit_recovers_a_known_d0_and_s0():
    prior = fit_variance_prior(_prior_table(4.0, 2.0))
    assert prior.residual_dof == 40 * 7 and prior.cells == 320
    assert 2.8 < prior.prior_dof < 6.0
    ratios = [prior.prior_var[f"g{g}"] / (2.0 * (1 + g % 5)) for g in range(40)]
    assert 0.8 < statistics.geometric_mean(ratios) < 1.25
    homogeneous = fit_variance_prior(_prior_table(1e6, 2.0))  # no spread beyond chi-square noise
    assert homogeneous.prior_dof > 8
    assert fit_variance_prior({"a": [(1.0, 2), (2.0, 2)]}) is None  # 1 within-group dof: nothing to fit


def test_the_two_way_prior_gives_an_unstable_model_its_own_higher_scale():
    """With a model effect (one model's seed variance 6x the others' on every benchmark) the two-way fit
    (``members``) recovers the effect on ``log s0^2``, raises that model's cells' scale above its benchmark's
    one-way scale, sees less spread beyond chi-square noise (higher ``d0``), and discounts ``d0`` by each cell's
    leverage (more parameters: lower ``d_eff`` at a given ``d0`` than the one-way ``1/n``)."""
    rng = random.Random(7)
    groups: dict[str, list[tuple[float, float]]] = {}
    members: dict[str, list[str]] = {}
    for g in range(30):
        for m in range(8):
            sigma_sq = 2.0 * (1 + g % 4) * (6.0 if m == 0 else 1.0) * 20 / rng.gammavariate(10, 2)
            groups.setdefault(f"g{g}", []).append((sigma_sq * rng.gammavariate(1, 2) / 2, 2))
            members.setdefault(f"g{g}", []).append(f"m{m}")
    one, two = fit_variance_prior(groups), fit_variance_prior(groups, members)
    assert not one.cell_var and two.residual_dof == 240 - (30 + 8 - 1)
    assert two.prior_dof > one.prior_dof
    effect = statistics.fmean(math.log(two.prior_q(f"g{g}", "m0") / two.prior_q(f"g{g}", "m1")) for g in range(30))
    assert math.log(6.0) - 0.6 < effect < math.log(6.0) + 0.6
    assert all(two.prior_q(f"g{g}", "m0") > one.prior_q(f"g{g}", "m0") for g in range(30))
    assert one.prior_q("g0", "m0") == one.prior_var["g0"]  # one-way: the member is ignored
    h = two.cell_leverage[("g0", "m3")]
    assert 1 / 8 < h < 1 / 8 + 1 / 30  # a complete 30 x 8 design: 1/8 + 1/30 - 1/240
    assert two.effective_prior_dof("g0", "m3") < two.effective_prior_dof("g0")
