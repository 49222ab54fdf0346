"""The false-alarm budget: critical values, the planned family, receipts, and the campaign-level verdict."""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import statistics

import pytest

from trace_lib import options
from trace_lib.aggregation.budget import (
    SCREEN_ALPHA,
    Criterion,
    Family,
    binomial_upper_tail,
    family_rate,
    normal_two_sided_quantile,
    sidak_level,
    t_two_sided_quantile,
    t_two_sided_tail,
)
from trace_lib.aggregation.campaign_checks import campaign_verdict
from trace_lib.aggregation.moderation import VariancePrior, digamma, fit_variance_prior, trigamma, trigamma_inverse
from trace_lib.aggregation.tolerance import CanonicalSummary, Sigma, budget_verdict, load_tolerance_rule
from trace_lib.campaign.plan import add_plan_options, build_plan, plan_from_options
from trace_lib.release import identity
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
    assert binomial_upper_tail(1, 10, 0.1) == pytest.approx(1 - 0.9**10)


def test_fixed_z_reports_the_implied_alpha():
    crit = Criterion.from_z(3.0, 984, dof=16)
    assert crit.per_test_alpha == pytest.approx(t_two_sided_tail(3.0, 16)) and crit.per_test_alpha > 0.008
    assert crit.alpha > 0.99 and crit.binomial_z() == crit.pool_t(16) == 3.0
    assert "implied family-wise alpha" in crit.describe()
    assert dict(crit.properties())["tolerance_alpha_kind"] == "implied"


# -- the family and the bands of the release ---------------------------------------------------------------------

def test_the_release_campaign_family_and_its_critical_values(release):
    rule = load_tolerance_rule(release)
    family = rule.family(seeds=3)
    assert (family.slices, family.means, family.overalls, family.categories, family.campaign_checks) == \
        (576, 192, 24, 144, 48)
    assert rule.budget.family_size == 984 and rule.budget.method == "sidak"
    verdict = rule.check_slice("qwen2.5-vl-3b-base", "phyx_mini_mc", 50.0, seed=42)
    prior = rule.variance_prior
    assert 3.0 < prior.prior_dof < 5.0 and prior.cells == 192 and prior.residual_dof == 168
    d_eff = prior.effective_prior_dof("phyx_mini_mc")
    assert verdict.sigma.method == "moderated" and verdict.sigma.pool_dof == pytest.approx(d_eff + 2)
    assert 2.0 < d_eff < prior.prior_dof and verdict.binomial_z == pytest.approx(4.0459, abs=1e-4)
    assert verdict.pool_t == pytest.approx(t_two_sided_quantile(sidak_level(0.05, 984), d_eff + 2))
    assert verdict.band == pytest.approx(math.sqrt(4 / 3) * verdict.pool_t * verdict.sigma.seed_pool)
    props = dict(verdict.properties())
    assert (props["tolerance_family_size"], props["tolerance_alpha"], props["tolerance_method"]) == \
        ("984", "0.05", "sidak")
    assert float(props["critical_pool_t"]) == verdict.pool_t and props["seed_sd_method"] == "moderated"
    assert float(props["pool_dof"]) == pytest.approx(d_eff + 2, abs=1e-3)
    assert float(props["prior_dof"]) == pytest.approx(prior.prior_dof, abs=1e-3)
    assert float(props["prior_sd"]) == pytest.approx(prior.prior_sd("phyx_mini_mc"))
    pooled = load_tolerance_rule(release, seed_sd="pooled").check_slice("qwen2.5-vl-3b-base", "phyx_mini_mc", 50.0)
    assert pooled.sigma.pool_dof == 16 and dict(pooled.properties())["pool_dof"] == "16"
    assert pooled.pool_t == pytest.approx(t_two_sided_quantile(sidak_level(0.05, 984), 16))


def test_band_is_the_wider_of_the_two_single_bound_bands(release):
    rule = load_tolerance_rule(release)
    v = rule.check_slice("qwen2.5-vl-7b-base", "mathvision", 30.0, seed=43)
    assert v.band == pytest.approx(v.factor * max(v.binomial_z * v.sigma.binomial, v.pool_t * v.sigma.seed_pool))
    # the band excludes exactly what the p-value puts below the per-test level
    inside = budget_verdict(rule.budget, subject="s", reproduced=v.canonical + 0.999 * v.band, canonical=v.canonical,
                            factor=v.factor, sigma=v.sigma)
    outside = budget_verdict(rule.budget, subject="s", reproduced=v.canonical - 1.001 * v.band,
                             canonical=v.canonical, factor=v.factor, sigma=v.sigma)
    assert inside.ok and inside.p_value >= rule.budget.per_test_alpha
    assert not outside.ok and outside.p_value < rule.budget.per_test_alpha
    assert "FAILED (p = " in outside.explain()


def _namespace(**given):
    parser = argparse.ArgumentParser()
    add_plan_options(parser.add_argument)
    options.add_to_argparse(parser, options.ALPHA, options.TOLERANCE_Z, options.CAMPAIGN_ROOT)
    ns = parser.parse_args([])
    for key, value in given.items():
        setattr(ns, key, value)
    return ns


def test_the_family_is_the_plan_not_the_k_selection(release, monkeypatch):
    """``-k`` (pytest's ``keyword``) deselects items after the plan is built; the verdict of a slice is the same
    whatever is selected. Narrowing the plan itself (``--benchmark``) is a smaller campaign: a smaller family."""
    monkeypatch.delenv("TRACE_TOLERANCE_ALPHA", raising=False)
    monkeypatch.delenv("TRACE_TOLERANCE_Z", raising=False)
    full = plan_from_options(release, _namespace(), with_judge=False)
    selected = plan_from_options(release, _namespace(keyword="qwen2.5-vl-3b-base-seed42-erqa"), with_judge=False)
    verdicts = [p.tolerance_rule(release).check_slice("qwen2.5-vl-3b-base", "erqa", 41.0, seed=42)
                for p in (full, selected)]
    assert verdicts[0] == verdicts[1] and verdicts[0].criterion.family_size == 984
    narrowed = plan_from_options(release, _namespace(benchmark=["erqa"]), with_judge=False)
    rule = narrowed.tolerance_rule(release)
    assert narrowed.family(rule) == Family(slices=24, means=8)
    assert rule.check_slice("qwen2.5-vl-3b-base", "erqa", 41.0, seed=42).band < verdicts[0].band


def test_alpha_and_z_options(release):
    plan = build_plan(release, tolerance_alpha=0.01, with_judge=False)
    assert plan.tolerance_rule(release).budget.alpha == 0.01
    fixed = build_plan(release, tolerance_z=3.0, with_judge=False).tolerance_rule(release)
    assert fixed.budget.method == "fixed-z" and fixed.check_slice("qwen2.5-vl-3b-base", "erqa", 41.0).z == 3.0
    assert "tolerance=alpha=0.01 family-wise over 984 tests" in plan.render(plan.tolerance_rule(release))
    for bad in ("0", "1", "nan", "-0.1"):
        with pytest.raises(ValueError):
            options.open_unit_number(bad)


def test_validation_budget_spreads_alpha_over_the_eight_models(release):
    crit = validation_criterion(release)
    assert crit.family_size == 8 and crit.binomial_z() == pytest.approx(normal_two_sided_quantile(sidak_level(0.05, 8)))
    assert validation_criterion(release, z=3.0).binomial_z() == 3.0


# -- the release's own seeds -------------------------------------------------------------------------------------

def test_each_canonical_seed_is_within_the_band_around_the_other_two(release):
    """Leave-one-out: each of the 576 canonical seed scores against the mean of the model's other two seeds (an
    independent 2-seed mean, factor sqrt(1/1 + 1/2)) under the default budget; the honest out-of-sample form of
    "every canonical seed passes its own band" (a seed inside its own mean has half the variance of a re-run)."""
    rule = load_tolerance_rule(release)
    doc = release.read_json(identity.RESULTS)["scores"]["benchmark_scores"]
    by_cell: dict[tuple[str, str], dict[int, float]] = {}
    for e in doc:
        by_cell.setdefault((e["model_id"], e["benchmark_id"]), {})[e["seed"]] = e["score"]
    verdicts = []
    for (model, bench), seeds in by_cell.items():
        for seed, score in seeds.items():
            others = statistics.fmean(v for s, v in seeds.items() if s != seed)
            verdicts.append(rule._verdict(f"{model}-seed{seed}-{bench}", score, CanonicalSummary(others, 0.0, 2),
                                          rule.slice_sigma(model, bench), 1))
    assert len(verdicts) == 576
    assert [v.explain() for v in verdicts if not v.ok] == []


# -- the campaign-level verdict ----------------------------------------------------------------------------------

def _campaign(rule, shift):  # noqa: ANN001, ANN202
    """Slice verdicts of every canonical model x seed 42, each delta = ``shift(model, i, verdict at 0)``."""
    out = []
    for model in rule.model_ids:
        for i, bench in enumerate(rule.rows):
            zero = rule.check_slice(model, bench, rule.benchmarks[(model, bench)].mean, seed=42)
            out.append((model, 42, rule.check_slice(model, bench, zero.canonical + shift(model, i, zero), seed=42)))
    return out


def _verdict(release, shift):  # noqa: ANN001, ANN202
    rule = load_tolerance_rule(release)
    triples = _campaign(rule, shift)
    return campaign_verdict(triples, rule.budget, complete_groups=[(m, 42) for m in rule.model_ids])


def test_a_campaign_all_within(release):
    verdict = _verdict(release, lambda m, i, v: (0.3 if i % 2 else -0.3) * v.band_at(SCREEN_ALPHA))
    assert verdict.ok and verdict.outside == 0 and verdict.outside_screen == 0
    assert [g.pattern for g in verdict.groups] == ["within"] * 8


def test_a_few_scattered_misses_pass_and_many_fail_the_count(release):
    few = _verdict(release, lambda m, i, v: (1.05 if i % 2 else -1.05) * v.band_at(SCREEN_ALPHA) if i < 2 else 0.0)
    assert few.ok and few.outside == 0 and few.outside_screen == 16  # 2 per model-seed: chance expects 1.2
    assert all(g.count_ok and g.direction_ok for g in few.groups)
    many = _verdict(release, lambda m, i, v: ((1.05 if i % 2 else -1.05) * v.band_at(SCREEN_ALPHA)
                                              if m == "trace-qwen2.5-vl-3b" and i < 10 else 0.0))
    assert many.outside == 0  # no slice outside its family-wise band ...
    [group] = many.failed_groups  # ... but 10/24 outside their 95% band is not chance
    assert group.model == "trace-qwen2.5-vl-3b" and group.pattern == "scattered" and group.direction_ok
    assert "FAILED (scattered)" in group.explain()


def test_one_model_shifted_one_way_fails_the_direction_check(release):
    verdict = _verdict(release, lambda m, i, v: 0.5 * v.band_at(SCREEN_ALPHA) if m == "qwen2.5-vl-7b-base" else 0.0)
    assert verdict.outside == 0 and verdict.outside_screen == 0  # every slice well inside its own bands
    [group] = verdict.failed_groups
    assert (group.model, group.pattern, group.positive, group.count_ok) == ("qwen2.5-vl-7b-base", "shifted up", 24, True)
    assert not verdict.ok


def test_summary_shows_the_campaign_verdict_and_the_plot_marks_both_bands(release, tmp_path):
    from trace_lib.release.suite import load_suite
    from trace_lib.reports.summarize import CampaignSummary, SeedScore, render_markdown, write_plot

    suite, rule = load_suite(release), load_tolerance_rule(release)
    triples = _campaign(rule, lambda m, i, v: 0.5 * v.band_at(SCREEN_ALPHA) if m == "qwen2.5-vl-7b-base" else 0.0)
    seed_scores = tuple(SeedScore(suite.benchmark(v.subject.split("-seed42-")[1]).category,
                                  v.subject.split("-seed42-")[1], "", m, s, 0, v.reproduced, v, "")
                        for m, s, v in triples)
    verdict = campaign_verdict(triples, rule.budget, complete_groups=[(m, 42) for m in rule.model_ids])
    summary = CampaignSummary("c", suite.suite_id, suite.sha256, math.nan, rule.model_ids, {}, (42,), suite.keys,
                              seed_scores, (), (), (), campaign=verdict)
    text = render_markdown(summary)
    assert "## Campaign verdict\n\n**FAILED**" in text and "**SHIFTED UP**" in text
    assert "- slices outside their family-wise band: 0/192 (chance under the budget expects 0.010" in text
    assert f"- {verdict.failed_groups[0].explain()}" in text and not summary.ok
    pytest.importorskip("matplotlib", reason="the 'report' extra (matplotlib) draws the plot")
    one = dataclasses.replace(summary, models=("qwen2.5-vl-7b-base",))
    assert write_plot(one, tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


# -- moderated seed variances ------------------------------------------------------------------------------------

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


def test_moderated_band_at_known_values_and_the_noisy_cell_gets_a_wider_band():
    prior = VariancePrior(4.0, {"b": 1.0}, 8, 7, {"b": 8}, trigamma(1.0))
    d_eff = prior.effective_prior_dof("b")
    assert 2.0 < d_eff < 4.0  # s0 estimated from 8 cells: a weaker prior than d0
    assert trigamma(d_eff / 2) == pytest.approx(trigamma(2.0) + (trigamma(1.0) + trigamma(2.0)) / 8)
    assert prior.moderated_var("b", 9.0, 2) == pytest.approx((d_eff * 1.0 + 2 * 9.0) / (d_eff + 2))
    criterion = Criterion.from_alpha(0.05, 984)
    rule_sigma = {}
    for name, sd in (("quiet", 0.5), ("noisy", 3.0)):
        sigma = Sigma(0.1, math.sqrt(prior.moderated_var("b", sd**2, 2)), prior.posterior_dof("b", 2), "moderated",
                      4.0, 1.0, sd, d_eff)
        rule_sigma[name] = budget_verdict(criterion, subject=name, reproduced=0.0, canonical=0.0,
                                          factor=math.sqrt(4 / 3), sigma=sigma)
    quiet, noisy = rule_sigma["quiet"], rule_sigma["noisy"]
    assert noisy.band > 2 * quiet.band
    t = t_two_sided_quantile(criterion.per_test_alpha, d_eff + 2)
    assert noisy.band == pytest.approx(math.sqrt(4 / 3) * t * noisy.sigma.seed_pool)
    props = dict(noisy.properties())
    assert props["seed_sd_method"] == "moderated" and props["prior_dof"] == "4"
    assert float(props["pool_dof"]) == pytest.approx(d_eff + 2, abs=1e-3)


def test_the_release_noisy_cell_gets_the_wider_band(release):
    rule, pooled = load_tolerance_rule(release), load_tolerance_rule(release, seed_sd="pooled")
    noisy = rule.check_slice("qwen2.5-vl-3b-base", "cvbench_3d", 50.0)  # stddev 8.3 vs pooled 3.3 (Cochran p~3e-4)
    calm = [rule.check_slice(m, "cvbench_3d", 50.0) for m in rule.model_ids if m != "qwen2.5-vl-3b-base"]
    assert all(noisy.band > v.band for v in calm)
    assert noisy.band > pooled.check_slice("qwen2.5-vl-3b-base", "cvbench_3d", 50.0).band
    assert "moderated seed sd" in noisy.explain()


def test_category_and_overall_bands_compose_the_benchmarks_moderated_variances(release):
    rule, model = load_tolerance_rule(release), "qwen2.5-vl-3b-base"
    benchmarks = rule.categories["Spatial Reasoning"]  # holds the noisy cvbench_3d cell
    cells = [rule.slice_sigma(model, b) for b in benchmarks]
    kappa = rule.covariance_inflation
    assert 1.0 <= kappa < 1.5  # the release's composites vs independent benchmarks: ~1.11
    sigma = rule.category_sigma(model, "Spatial Reasoning")
    assert sigma.method == "composite" and sigma.covariance_inflation == kappa
    assert sigma.seed_pool == pytest.approx(math.sqrt(kappa * sum(c.seed_pool**2 for c in cells)) / 4)
    assert sigma.pool_dof == min(c.pool_dof for c in cells)  # Hsu: the worst-known part's dof
    assert rule.overall_sigma(model).method == "composite"
    assert dict(rule.check_overall(model, 40.0).properties())["covariance_inflation"] == repr(kappa)
    assert load_tolerance_rule(release, z=3.0).check_slice("qwen2.5-vl-3b-base", "cvbench_3d", 50.0).sigma.method \
        == "pooled"  # --tolerance-z is the pre-budget rule


def test_the_moderated_band_holds_its_level_on_a_constructed_heterogeneous_benchmark():
    """Cells with variances from a known prior (d0 = 4): the per-test exceedance of the moderated band for a fresh
    draw stays near its level ``a`` (the pooled band's runs several times over it)."""
    rng = random.Random(11)
    a, cells, d0, reps = 0.01, 8, 4.0, 300
    out_mod = out_pool = trials = 0
    for _ in range(reps):
        sigmas = [math.sqrt(d0 / rng.gammavariate(d0 / 2, 2)) for _ in range(cells)]
        seeds = [[rng.gauss(0, s) for _ in range(3)] for s in sigmas]
        sds = [statistics.stdev(x) for x in seeds]
        prior = fit_variance_prior({"b": [(v * v, 2) for v in sds]})
        pool = math.sqrt(statistics.fmean(v * v for v in sds))
        for s, x, sd in zip(sigmas, seeds, sds):
            delta = rng.gauss(0, s) - statistics.fmean(x)
            f = math.sqrt(4 / 3)
            s_mod = math.sqrt(prior.moderated_var("b", sd * sd, 2))
            out_mod += abs(delta) > f * t_two_sided_quantile(a, prior.posterior_dof("b", 2)) * s_mod
            out_pool += abs(delta) > f * t_two_sided_quantile(a, 16) * pool
            trials += 1
    assert out_mod / trials < 1.5 * a and out_pool > 1.5 * out_mod  # 24 vs 42 of 2400 at a = 0.01
