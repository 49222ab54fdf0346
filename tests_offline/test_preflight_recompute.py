"""The aggregation formulas (eval-campaign.md §6.3) on small synthetic suites: unit cases and algebraic
properties (hypothesis), and agreement with the release's own aggregates."""

from __future__ import annotations

import statistics
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trace_lib.aggregation import (
    MissingScoresError,
    Summary,
    benchmark_deltas,
    benchmark_summaries,
    category_scores,
    category_summaries,
    close,
    overall_delta,
    overall_scores,
    overall_summaries,
    paired_delta,
    summarize,
)
from trace_lib.preflight import views
from trace_lib.preflight.context import CheckContext
from trace_lib.release.suite import Benchmark, Suite, load_suite


def make_suite(categories: dict[str, list[str]]) -> Suite:
    benches = tuple(Benchmark(k, k, k, c, "direct_score", 10, "-", "-") for c, ks in categories.items() for k in ks)
    return Suite("toy", benches, MappingProxyType({c: tuple(ks) for c, ks in categories.items()}),
                 MappingProxyType({"direct_score": tuple(b.key for b in benches)}), MappingProxyType({}), "0" * 40, "")


TOY = make_suite({"A": ["a1", "a2"], "B": ["b1", "b2"]})


def test_summarize_is_fmean_and_sample_stdev():
    assert summarize([1.0, 2.0, 4.0]) == Summary(statistics.fmean([1, 2, 4]), statistics.stdev([1, 2, 4]), 3)
    assert summarize([5.0]) == Summary(5.0, 0.0, 1)
    with pytest.raises(ValueError):
        summarize([])


def test_toy_category_overall_and_delta():
    scores = {("m", 1, "a1"): 10.0, ("m", 1, "a2"): 20.0, ("m", 1, "b1"): 30.0, ("m", 1, "b2"): 50.0,
              ("base", 1, "a1"): 0.0, ("base", 1, "a2"): 0.0, ("base", 1, "b1"): 0.0, ("base", 1, "b2"): 10.0}
    assert category_scores(scores, TOY)[("m", 1, "B")] == 40.0
    assert overall_scores(scores, TOY) == {("m", 1): 27.5, ("base", 1): 2.5}
    delta = overall_delta(scores, "m", "base", TOY)
    assert delta.seed_values == {1: 25.0} and delta.summary == Summary(25.0, 0.0, 1)
    assert benchmark_deltas(scores, "m", "base", TOY)["b2"].seed_values == {1: 40.0}


def test_missing_score_is_named_never_averaged_away():
    scores = {("m", 1, "a1"): 1.0, ("m", 1, "a2"): 1.0, ("m", 1, "b1"): 1.0}
    with pytest.raises(MissingScoresError) as info:
        overall_scores(scores, TOY)
    assert info.value.missing == (("m", 1, "b2"),)
    assert "('m', 1, 'b2')" in info.value.render()


def test_paired_delta_requires_the_same_seeds():
    with pytest.raises(MissingScoresError, match=r"\('base', 2\)"):
        paired_delta({("m", 1): 1.0, ("m", 2): 2.0, ("base", 1): 0.0}, "m", "base")


score = st.floats(min_value=0.0, max_value=100.0, allow_nan=False)


@st.composite
def campaigns(draw):
    """Random scores of two models over 1-4 seeds on a suite of equal-size categories."""
    n_categories, size = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    suite = make_suite({f"c{i}": [f"b{i}_{j}" for j in range(size)] for i in range(n_categories)})
    seeds = draw(st.lists(st.integers(0, 99), min_size=1, max_size=4, unique=True))
    scores = {(m, s, b): draw(score) for m in ("m", "base") for s in seeds for b in suite.keys}
    return suite, seeds, scores


@settings(max_examples=40, deadline=None)
@given(campaigns())
def test_overall_is_the_mean_of_category_means_for_equal_categories(campaign):
    suite, seeds, scores = campaign
    categories = category_scores(scores, suite)
    for (m, s), value in overall_scores(scores, suite).items():
        assert close(value, statistics.fmean(categories[(m, s, c)] for c in suite.categories), abs_tol=1e-9)


@settings(max_examples=40, deadline=None)
@given(campaigns())
def test_overall_delta_is_the_mean_of_benchmark_deltas_per_seed(campaign):
    suite, seeds, scores = campaign
    overall = overall_delta(scores, "m", "base", suite)
    per_benchmark = benchmark_deltas(scores, "m", "base", suite)
    for seed in seeds:
        mean = statistics.fmean(d.seed_values[seed] for d in per_benchmark.values())
        assert close(overall.seed_values[seed], mean, abs_tol=1e-9)


@settings(max_examples=40, deadline=None)
@given(campaigns(), st.floats(-50.0, 50.0))
def test_shifting_a_model_shifts_means_and_keeps_spreads(campaign, shift):
    suite, seeds, scores = campaign
    shifted = {k: v + shift if k[0] == "m" else v for k, v in scores.items()}
    before, after = overall_summaries(overall_scores(scores, suite)), overall_summaries(overall_scores(shifted, suite))
    assert close(after["m"].mean, before["m"].mean + shift, abs_tol=1e-9)
    assert close(after["m"].stddev, before["m"].stddev, abs_tol=1e-9)
    assert after["base"] == before["base"]


@settings(max_examples=40, deadline=None)
@given(campaigns(), st.randoms(use_true_random=False))
def test_results_do_not_depend_on_input_order(campaign, rnd):
    suite, seeds, scores = campaign
    items = list(scores.items())
    rnd.shuffle(items)
    shuffled = dict(items)
    assert benchmark_summaries(shuffled, suite) == benchmark_summaries(scores, suite)
    assert category_summaries(category_scores(shuffled, suite)) == category_summaries(category_scores(scores, suite))
    assert overall_delta(shuffled, "m", "base", suite) == overall_delta(scores, "m", "base", suite)


@settings(max_examples=30, deadline=None)
@given(campaigns())
def test_a_model_against_itself_has_zero_delta(campaign):
    suite, seeds, scores = campaign
    mirrored = {**scores, **{("twin", s, b): v for (m, s, b), v in scores.items() if m == "m"}}
    delta = overall_delta(mirrored, "m", "twin", suite)
    assert set(delta.seed_values.values()) == {0.0} and delta.summary.stddev == 0.0


def test_release_aggregates_equal_the_recomputed_ones(release):
    """The library reproduces the release's stored overall summaries from its 576 seed scores."""
    doc = views.results_doc(CheckContext(release))
    suite = load_suite(release)
    recomputed = overall_summaries(overall_scores(views.score_table(doc), suite))
    stored = {row["model_id"]: row for row in doc["scores"]["overall_summaries"]}
    assert set(recomputed) == set(stored)
    for model, summary in recomputed.items():
        assert close(summary.mean, stored[model]["mean"]) and close(summary.stddev, stored[model]["stddev"])
