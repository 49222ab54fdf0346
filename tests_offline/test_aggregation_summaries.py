"""Score aggregates (``aggregation.summaries``): the sample stddev from two values on, the absolute-only tolerance,
per-(model, benchmark) and per-(model, category) summaries over seeds, and the missing-score messages (five keys
shown, then `` ...``)."""

from __future__ import annotations

import math
from types import MappingProxyType

import pytest

from trace_lib.aggregation.summaries import (
    MissingScoresError,
    Summary,
    benchmark_summaries,
    category_scores,
    category_summaries,
    close,
    paired_delta,
    summarize,
)
from trace_lib.release.suite import Benchmark, Suite

pytestmark = pytest.mark.offline


def _suite(categories: dict[str, list[str]]) -> Suite:
    benches = tuple(Benchmark(k, k, k, c, "direct_score", 10, "-", "-") for c, ks in categories.items() for k in ks)
    return Suite("toy", benches, MappingProxyType({c: tuple(ks) for c, ks in categories.items()}),
                 MappingProxyType({"direct_score": tuple(b.key for b in benches)}), MappingProxyType({}), "0" * 40, "")


def test_two_values_have_the_sample_stddev_and_no_values_raise():
    assert summarize([1.0, 3.0]) == Summary(2.0, math.sqrt(2.0), 2)
    with pytest.raises(ValueError, match=r"^cannot summarize no values$"):
        summarize([])


def test_close_is_an_absolute_tolerance_of_1e_10_with_no_relative_part():
    assert close(100.0, 100.0 + 5e-11) and not close(0.0, 2e-10)
    assert not close(100.0, 150.0) and not close(1e12, 1e12 + 1.0)


def test_a_missing_scores_message_shows_five_keys_and_marks_more_with_dots():
    five = MissingScoresError([("k", i) for i in range(5)], what="x")
    assert str(five) == "cannot compute x: 5 score(s) missing: ('k', 0), ('k', 1), ('k', 2), ('k', 3), ('k', 4)"
    six = MissingScoresError([("k", i) for i in range(6)], what="x")
    assert str(six) == "cannot compute x: 6 score(s) missing: ('k', 0), ('k', 1), ('k', 2), ('k', 3), ('k', 4) ..."
    assert six.missing == tuple(("k", i) for i in range(6))


def test_benchmark_summaries_are_per_model_and_benchmark_over_the_seeds():
    suite = _suite({"A": ["a1", "a2"]})
    scores = {("m", 1, "a1"): 10.0, ("m", 2, "a1"): 20.0, ("m", 1, "a2"): 5.0, ("m", 2, "a2"): 5.0}
    assert benchmark_summaries(scores, suite) == {("m", "a1"): Summary(15.0, math.sqrt(50.0), 2),
                                                  ("m", "a2"): Summary(5.0, 0.0, 2)}


def test_a_seed_lacking_a_benchmark_names_it_in_benchmark_summaries():
    scores = {("m", 1, "a1"): 10.0, ("m", 2, "a1"): 20.0, ("m", 1, "a2"): 5.0}
    with pytest.raises(MissingScoresError, match=r"^cannot compute benchmark summary m/a2: 1 score\(s\) missing: "):
        benchmark_summaries(scores, _suite({"A": ["a1", "a2"]}))


def test_category_summaries_group_the_seeds_of_one_model_and_category():
    categories = {("m", 1, "A"): 10.0, ("m", 2, "A"): 20.0, ("m", 1, "B"): 1.0, ("m", 2, "B"): 3.0,
                  ("n", 1, "A"): 7.0}
    assert category_summaries(categories) == {("m", "A"): Summary(15.0, math.sqrt(50.0), 2),
                                              ("m", "B"): Summary(2.0, math.sqrt(2.0), 2),
                                              ("n", "A"): Summary(7.0, 0.0, 1)}


def test_a_category_score_lacking_a_benchmark_raises_missing_scores_naming_it():
    scores = {("m", 1, "a1"): 1.0, ("m", 1, "b1"): 2.0}
    with pytest.raises(MissingScoresError, match=r"^cannot compute category score m/1/A: ") as info:
        category_scores(scores, _suite({"A": ["a1", "a2"], "B": ["b1"]}))
    assert info.value.missing == (("m", 1, "a2"),)


def test_a_paired_delta_over_different_or_no_seeds_names_the_pair():
    with pytest.raises(MissingScoresError) as info:
        paired_delta({("m", 1): 1.0, ("m", 2): 2.0, ("base", 1): 0.0}, "m", "base")
    assert str(info.value) == "cannot compute paired delta m - base: 1 score(s) missing: ('base', 2)"
    with pytest.raises(MissingScoresError) as info:
        paired_delta({("other", 1): 1.0}, "m", "base")
    assert info.value.missing == (("m",), ("base",))
