"""benchmarks/_paired_ratio.py: the median of paired ratios, its distribution-free interval, the target's verdict."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import _paired_ratio as pr  # noqa: E402


@pytest.mark.parametrize(("n", "k", "expected"), [(3, 1, 0.75), (5, 1, 0.9375), (10, 2, 1 - 2 * 11 / 1024),
                                                  (9, 2, 1 - 2 * 10 / 512)])
def test_sign_coverage_is_the_binomial_probability(n: int, k: int, expected: float) -> None:
    assert pr.sign_coverage(n, k) == pytest.approx(expected)


def test_the_interval_is_the_narrowest_that_reaches_the_confidence() -> None:
    ratios = [1.05, 0.91, 0.99, 1.02, 0.97, 1.10, 0.95, 1.00, 0.98, 1.01]
    interval = pr.median_interval(ratios, 0.9)
    ordered = sorted(ratios)
    # k = 2 covers 97.9%, k = 3 only 89.1%: the 2nd smallest and 2nd largest
    assert (interval.low, interval.high, interval.n) == (ordered[1], ordered[-2], 10)
    assert interval.coverage == pytest.approx(1 - 2 * 11 / 1024)
    assert interval.median == pytest.approx((0.99 + 1.00) / 2)


@pytest.mark.parametrize(("ratios", "verdict"), [
    ([1.01, 0.99, 1.03, 0.98, 1.00], "met"),
    ([0.90, 0.95, 0.96, 0.93, 0.94], "missed"),
    ([0.96, 0.99, 1.03, 0.98, 1.00], "unresolved"),  # the smallest is below 0.97
    ([1.01, 0.99, 1.03], "unresolved"),  # all above, but three pairs cover only 75%
])
def test_verdicts(ratios: list[float], verdict: str) -> None:
    assert pr.median_interval(ratios, 0.9).verdict(0.97, 0.9) == verdict


def test_too_few_pairs_are_named() -> None:
    assert pr.pairs_needed(0.9) == 5
    assert pr.pairs_needed(0.75) == 3
    with pytest.raises(ValueError):
        pr.median_interval([])


@pytest.mark.parametrize(("true_median", "n"), [(0.97, 5), (0.97, 9), (1.0, 9), (0.95, 15)])
def test_simulated_verdicts_match_the_binomial_rates(true_median: float, n: int) -> None:
    """The code's own verdicts on simulated noisy pairs (log-normal, 10% spread, skewed by a one-sided stall
    component) occur at the rates the sign test implies: 'met' when at least n-k+1 ratios reach the target, 'missed'
    when at least n-k+1 fall below it. At a true median on the target both are false alarms, each at most
    (1 - coverage) / 2."""
    rng = np.random.default_rng(7)
    trials, target = 20000, 0.97
    noise = rng.normal(0, 0.1, (trials, n)) - rng.exponential(0.03, (trials, n))
    ratios = true_median * np.exp(noise - np.median(noise))  # the median of the noise distribution is 0 (~)
    verdicts = [pr.median_interval(list(row), 0.9).verdict(target, 0.9) for row in ratios]
    interval = pr.median_interval([1.0] * n, 0.9)
    k = next(k for k in range(1, n + 1) if pr.sign_coverage(n, k) == interval.coverage)
    q = float(np.mean(ratios >= target))  # P(one ratio reaches the target), as drawn

    def tail(p: float) -> float:  # P(Binomial(n, p) >= n - k + 1)
        return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(n - k + 1, n + 1))

    se = math.sqrt(0.25 / trials)
    assert abs(verdicts.count("met") / trials - tail(q)) < 5 * se
    assert abs(verdicts.count("missed") / trials - tail(1 - q)) < 5 * se
    if true_median == target:
        alpha = (1 - interval.coverage) / 2
        assert verdicts.count("met") / trials < alpha + 5 * se
        assert verdicts.count("missed") / trials < alpha + 5 * se
