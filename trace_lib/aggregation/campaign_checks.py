"""Campaign-level verdicts beside the per-slice ones: how many slices are out, and are a model's deltas one-sided?

Per complete (model, seed) — its slice verdicts over every suite benchmark, independent across benchmarks under
the null (each has its own canonical mean and pool) — two checks, each one member of the budget's family (so at
the Šidák per-test level ``a``):

- count: ``X`` = slices outside their nominal 95% band (:data:`~trace_lib.aggregation.budget.SCREEN_ALPHA`).
  Under the null each is out with probability <= 0.05, so ``X`` is at most ``Binomial(n, 0.05)``; the check fails
  when ``P(Binomial(n, 0.05) >= X) < a`` (many small misses that no single band flags);
- direction: each slice's two-sided p-value (the larger of the binomial-bound and seed-term t p-values, valid when
  either sigma bound holds) becomes a signed normal score ``u = sign(delta) Phi^-1(1 - p/2)``; under the null the
  ``u`` are independent, symmetric, with variance <= 1, so Stouffer's ``S = sum(u)/sqrt(n)`` is ~N(0, <=1) and the
  check fails when ``2(1 - Phi(|S|)) < a`` (a model shifted one way across benchmarks, a real regression, rather
  than scattered deltas). The count of positive deltas and its exact sign-test p-value are reported beside it.

Across the whole campaign :func:`campaign_verdict` also states the slices outside their family-wise band against
what chance allows under the budget (``n * a`` expected, binomial upper-tail p) and the same for the 95% band
(descriptive: seeds of one cell share its canonical mean, so those counts are positively dependent).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

from trace_lib.aggregation.budget import SCREEN_ALPHA, Criterion, binomial_upper_tail
from trace_lib.aggregation.tolerance import Verdict


def _two_sided_sign_p(positive: int, n: int) -> float:
    if n == 0:
        return 1.0
    extreme = max(positive, n - positive)
    return min(1.0, 2.0 * binomial_upper_tail(extreme, n, 0.5))


@dataclass(frozen=True)
class GroupCheck:
    """The count and direction checks of one (model, seed) over its slice verdicts."""

    model: str
    seed: int
    slices: int
    outside_screen: int  # slices outside their nominal 95% band
    count_p: float  # P(Binomial(slices, SCREEN_ALPHA) >= outside_screen)
    stouffer: float  # sum of signed normal scores / sqrt(slices)
    direction_p: float  # two-sided p of ``stouffer``
    positive: int  # slices with delta > 0
    sign_p: float  # exact two-sided sign-test p (reported, not a test of the family)
    mean_delta: float  # mean delta over the slices, percentage points
    per_test_alpha: float

    @property
    def expected_screen(self) -> float:
        return self.slices * SCREEN_ALPHA

    @property
    def count_ok(self) -> bool:
        return self.count_p >= self.per_test_alpha

    @property
    def direction_ok(self) -> bool:
        return self.direction_p >= self.per_test_alpha

    @property
    def ok(self) -> bool:
        return self.count_ok and self.direction_ok

    @property
    def pattern(self) -> str:
        """``within``, ``shifted up``/``shifted down`` (direction fails), ``scattered`` (only the count fails)."""
        if not self.direction_ok:
            return "shifted up" if self.stouffer > 0 else "shifted down"
        return "within" if self.count_ok else "scattered"

    def explain(self) -> str:
        return (
            f"{self.model}-seed{self.seed}-campaign: {self.outside_screen}/{self.slices} slices outside their 95% band "
            f"(chance expects {self.expected_screen:.1f}; p = {self.count_p:.2g}), direction S = {self.stouffer:+.2f} "
            f"(p = {self.direction_p:.2g}; {self.positive}/{self.slices} deltas positive, sign-test p = "
            f"{self.sign_p:.2g}; mean delta {self.mean_delta:+.2f} pp), per-test alpha {self.per_test_alpha:.2g}: "
            + ("within tolerance" if self.ok else f"FAILED ({self.pattern})")
        )

    def properties(self) -> list[tuple[str, str]]:
        return [
            ("campaign_outside_95", str(self.outside_screen)), ("campaign_expected_outside_95",
                                                                 repr(self.expected_screen)),
            ("campaign_count_p", repr(self.count_p)), ("campaign_direction_stouffer", repr(self.stouffer)),
            ("campaign_direction_p", repr(self.direction_p)), ("campaign_positive_deltas", str(self.positive)),
            ("campaign_sign_p", repr(self.sign_p)), ("campaign_pattern", self.pattern),
            ("campaign_verdict", "ok" if self.ok else "failed"),
        ]


def group_check(model: str, seed: int, verdicts: Sequence[Verdict], per_test_alpha: float) -> GroupCheck:
    """The campaign checks of one (model, seed) from its slice verdicts (one per benchmark)."""
    n = len(verdicts)
    outside = sum(1 for v in verdicts if not math.isfinite(v.delta) or abs(v.delta) > v.band_at(SCREEN_ALPHA))
    scores = [v.normal_score for v in verdicts]
    stouffer = sum(scores) / math.sqrt(n) if n else 0.0
    positive = sum(1 for v in verdicts if v.delta > 0)
    finite = [v.delta for v in verdicts if math.isfinite(v.delta)]
    return GroupCheck(
        model=model, seed=seed, slices=n, outside_screen=outside,
        count_p=binomial_upper_tail(outside, n, SCREEN_ALPHA),
        stouffer=stouffer, direction_p=2.0 * (1.0 - NormalDist().cdf(abs(stouffer))),
        positive=positive, sign_p=_two_sided_sign_p(positive, n),
        mean_delta=sum(finite) / len(finite) if finite else math.nan, per_test_alpha=per_test_alpha,
    )


@dataclass(frozen=True)
class CampaignVerdict:
    """Slices outside their bands against chance, and the per-(model, seed) checks."""

    criterion: Criterion
    slices: int
    outside: int  # outside the family-wise band (each one also a FAILED slice)
    outside_screen: int  # outside the nominal 95% band
    groups: tuple[GroupCheck, ...]

    @property
    def expected_outside(self) -> float:
        return self.slices * self.criterion.per_test_alpha

    @property
    def outside_p(self) -> float:
        return binomial_upper_tail(self.outside, self.slices, self.criterion.per_test_alpha)

    @property
    def expected_screen(self) -> float:
        return self.slices * SCREEN_ALPHA

    @property
    def screen_p(self) -> float:
        return binomial_upper_tail(self.outside_screen, self.slices, SCREEN_ALPHA)

    @property
    def failed_groups(self) -> list[GroupCheck]:
        return [g for g in self.groups if not g.ok]

    @property
    def ok(self) -> bool:
        return self.outside == 0 and not self.failed_groups

    def lines(self) -> list[str]:
        """Markdown bullet lines for the summary."""
        out = [
            f"- budget: {self.criterion.describe()}",
            f"- slices outside their family-wise band: {self.outside}/{self.slices} (chance under the budget "
            f"expects {self.expected_outside:.3f}; binomial p = {self.outside_p:.2g})",
            f"- slices outside their nominal 95% band: {self.outside_screen}/{self.slices} (chance expects "
            f"{self.expected_screen:.1f}; binomial p = {self.screen_p:.2g}, descriptive: seeds of a cell are "
            f"dependent)",
        ]
        if self.groups:
            shifted = [g for g in self.groups if not g.direction_ok]
            scattered = [g for g in self.groups if g.direction_ok and not g.count_ok]
            out.append(f"- model-seed checks: {len(self.groups) - len(self.failed_groups)}/{len(self.groups)} "
                       f"within; {len(shifted)} shifted one way, {len(scattered)} with too many scattered misses")
        return out


def campaign_verdict(
    slice_verdicts: Sequence[tuple[str, int, Verdict]],
    criterion: Criterion,
    *,
    complete_groups: Sequence[tuple[str, int]] = (),
) -> CampaignVerdict:
    """The campaign verdict of ``(model, seed, verdict)`` slice triples; the per-(model, seed) checks run for
    ``complete_groups`` (those with every suite benchmark: the groups the plan's family counts)."""
    by_group: dict[tuple[str, int], list[Verdict]] = {}
    for model, seed, verdict in slice_verdicts:
        by_group.setdefault((model, seed), []).append(verdict)
    groups = tuple(group_check(m, s, by_group[(m, s)], criterion.per_test_alpha)
                   for m, s in complete_groups if (m, s) in by_group)
    verdicts = [v for _, _, v in slice_verdicts]
    return CampaignVerdict(
        criterion=criterion, slices=len(verdicts), outside=sum(1 for v in verdicts if not v.ok),
        outside_screen=sum(1 for v in verdicts if not math.isfinite(v.delta)
                           or abs(v.delta) > v.band_at(SCREEN_ALPHA)),
        groups=groups,
    )
