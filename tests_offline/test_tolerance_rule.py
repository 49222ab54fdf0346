"""The reproduction tolerance rule: formula, message, and self-consistency on the real release (spec §7.3)."""

from __future__ import annotations

import math

import pytest

from trace_lib.aggregation.tolerance import (
    CanonicalSummary,
    ToleranceRule,
    binomial_se,
    canonical_seed_verdicts,
    load_tolerance_rule,
)
from trace_lib.errors import UsageError


def _rule(z: float = 3.0) -> ToleranceRule:
    """Two models, two benchmarks in one category; numbers chosen so each sigma source wins once."""
    return ToleranceRule(
        z=z,
        rows={"mcq": 100, "vqa": 400},
        categories={"Cat": ("mcq", "vqa")},
        benchmarks={
            ("m1", "mcq"): CanonicalSummary(50.0, 9.0, 3),
            ("m2", "mcq"): CanonicalSummary(60.0, 3.0, 3),
            ("m1", "vqa"): CanonicalSummary(50.0, 0.5, 3),
            ("m2", "vqa"): CanonicalSummary(50.0, 0.5, 3),
        },
        category_summaries={("m1", "Cat"): CanonicalSummary(50.0, 0.1, 3), ("m2", "Cat"): CanonicalSummary(55.0, 0.2, 3)},
        overall_summaries={"m1": CanonicalSummary(50.0, 0.3, 3), "m2": CanonicalSummary(55.0, 0.4, 3)},
    )


def test_slice_band_uses_the_seed_pool_when_it_exceeds_the_binomial_se():
    verdict = _rule().check_slice("m1", "mcq", 60.0, seed=42, rows=100)
    pool = math.sqrt((9.0**2 + 3.0**2) / 2)  # RMS over models
    assert verdict.sigma.binomial == pytest.approx(5.0)  # 100*sqrt(.25/100)
    assert verdict.sigma.value == pytest.approx(pool) and verdict.sigma.source == "seed pool"
    assert verdict.band == pytest.approx(3 * math.sqrt(4 / 3) * pool)
    assert verdict.delta == pytest.approx(10.0) and verdict.ok


def test_slice_band_uses_the_binomial_se_when_it_exceeds_the_seed_pool():
    verdict = _rule(z=2).check_slice("m1", "vqa", 56.0, seed=43)
    assert verdict.sigma.source == "binomial" and verdict.sigma.value == pytest.approx(2.5)
    assert verdict.band == pytest.approx(2 * math.sqrt(4 / 3) * 2.5)  # 5.77 < delta 6
    assert not verdict.ok
    assert verdict.subject == "m1-seed43-vqa"


def test_three_seed_mean_uses_a_narrower_factor():
    single = _rule().check_slice("m1", "vqa", 50.0)
    mean = _rule().check_slice("m1", "vqa", 50.0, reproduced_seeds=3)
    assert mean.factor == pytest.approx(math.sqrt(2 / 3)) and single.factor == pytest.approx(math.sqrt(4 / 3))
    assert mean.band == pytest.approx(single.band / math.sqrt(2))


def test_overall_and_category_sigma_combine_seed_pool_and_binomial():
    rule = _rule()
    se_mcq, se_vqa = binomial_se(50.0, 100), binomial_se(50.0, 400)
    overall = rule.check_overall("m1", 50.5, seed=44)
    assert overall.sigma.binomial == pytest.approx(math.sqrt(se_mcq**2 + se_vqa**2) / 2)
    assert overall.sigma.seed_pool == pytest.approx(math.sqrt((0.3**2 + 0.4**2) / 2))
    assert overall.subject == "m1-seed44-overall"
    category = rule.check_category("m2", "Cat", 55.0)
    assert category.sigma.seed_pool == pytest.approx(math.sqrt((0.1**2 + 0.2**2) / 2))


def test_row_count_mismatch_fails_even_inside_the_band():
    verdict = _rule().check_slice("m1", "mcq", 50.0, seed=42, rows=99)
    assert not verdict.ok
    assert verdict.explain().endswith("rows 99 (expected 100): FAILED (row count differs from the suite)")


def test_non_finite_score_fails():
    assert not _rule().check_slice("m1", "mcq", math.nan).ok


def test_explain_prints_reproduced_canonical_delta_band_and_z():
    verdict = _rule().check_slice("m2", "mcq", 45.0, seed=42, rows=100)
    assert verdict.explain() == (
        "m2-seed42-mcq: reproduced 45.000 vs canonical 60.000 (3-seed mean): delta -15.000 pp, allowed +/-23.238 pp "
        "(z=3 x sqrt(1/1+1/3) x sigma 6.708 [seed pool; binomial 4.899, seed pool 6.708]), rows 100: within tolerance"
    )
    failed = _rule(z=1).check_slice("m2", "mcq", 45.0, seed=42, rows=100)
    assert failed.explain().endswith(": FAILED (|delta| = 1.94 x factor x sigma > z=1)")
    assert dict(failed.properties())["verdict"] == "failed"


def test_unknown_model_names_the_canonical_models():
    with pytest.raises(UsageError, match=r"no canonical benchmark summary for \('m3', 'mcq'\).*canonical models: m1, m2"):
        _rule().check_slice("m3", "mcq", 50.0)


@pytest.mark.parametrize("z", [0, -1, math.inf, math.nan])
def test_z_must_be_positive_and_finite(release, z):
    with pytest.raises(UsageError, match="--tolerance-z: z must be a positive number"):
        load_tolerance_rule(release, z=z)


def test_every_canonical_seed_score_is_within_its_band_at_z3(release):
    slices, overalls = canonical_seed_verdicts(release, load_tolerance_rule(release, z=3.0))
    # one verdict per planned slice (suite models x seeds x benchmarks), each on that seed's own score
    from trace_lib.campaign.plan import build_plan

    assert sorted(v.subject for v in slices) == sorted(s.id for s in build_plan(release, with_judge=False).slices)
    assert len({v.reproduced for v in slices}) > len(slices) // 3  # seed scores, not the 3-seed means
    assert any(v.delta != 0 for v in slices) and all(v.reproduced == pytest.approx(v.canonical + v.delta) for v in slices)
    assert [v.explain() for v in slices if not v.ok] == []
    assert [v.explain() for v in overalls if not v.ok] == []


def test_at_z2_exactly_the_two_outliers_named_by_the_spec_fail(release):
    slices, overalls = canonical_seed_verdicts(release, load_tolerance_rule(release, z=2.0))
    assert sorted(v.subject for v in slices if not v.ok) == [
        "qwen2.5-vl-3b-base-seed43-cvbench_3d",
        "qwen2.5-vl-3b-base-seed43-mathvista",
    ]
    assert all(v.ok for v in overalls)
