"""A ratio target judged on paired runs: the median of the run-by-run ratios with a distribution-free interval.

Two paths timed in alternation (baseline, candidate, baseline, ...) give one ratio per pair, and a quiet machine is
not assumed: the pairs' median, with the order-statistic interval for a median (the sign test's; it holds for any
continuous distribution of the ratios), says whether a target such as ">= 0.97 of the baseline" is met, missed, or
not resolved by the runs made.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class MedianInterval:
    """The median of ``n`` paired ratios and the order-statistic interval ``[low, high]`` that holds the true
    median with probability ``coverage`` (the widest, ``[min, max]``, when ``n`` is too small for the asked one)."""

    median: float
    low: float
    high: float
    coverage: float
    n: int

    def verdict(self, target: float, confidence: float) -> str:
        """``met`` (the interval is at or above ``target``), ``missed`` (below it), else ``unresolved``; also
        ``unresolved`` when the runs cannot reach ``confidence``."""
        if self.coverage < confidence:
            return "unresolved"
        if self.low >= target:
            return "met"
        if self.high < target:
            return "missed"
        return "unresolved"

    def summary(self, target: float, confidence: float) -> str:
        """``median 0.982, 93% interval [0.950, 1.031]: unresolved (target >= 0.97)``: how the scripts print it."""
        return (f"median {self.median:.3f}, {self.coverage:.0%} interval [{self.low:.3f}, {self.high:.3f}]: "
                f"{self.verdict(target, confidence)} (target >= {target})")


def sign_coverage(n: int, k: int) -> float:
    """P(the k-th smallest and k-th largest of n draws bracket their distribution's median)."""
    below = sum(math.comb(n, i) for i in range(k)) / 2**n
    return 1.0 - 2.0 * below


def median_interval(ratios: Sequence[float], confidence: float = 0.9) -> MedianInterval:
    """The narrowest order-statistic interval for the median of ``ratios`` with coverage >= ``confidence``."""
    if not ratios:
        raise ValueError("no ratios")
    ordered = sorted(ratios)
    n = len(ordered)
    k = 1
    while k + 1 <= n // 2 and sign_coverage(n, k + 1) >= confidence:
        k += 1
    return MedianInterval(statistics.median(ordered), ordered[k - 1], ordered[n - k], sign_coverage(n, k), n)


def pairs_needed(confidence: float) -> int:
    """The fewest pairs whose ``[min, max]`` reaches ``confidence``."""
    n = 1
    while sign_coverage(n, 1) < confidence:
        n += 1
    return n
