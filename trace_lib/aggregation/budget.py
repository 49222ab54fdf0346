"""The false-alarm budget of a reproduction campaign: family, per-test level and critical values.

A campaign makes ``m`` tests (its *family*, fixed by the plan, never by ``-k``). The user states one family-wise
false-alarm budget ``alpha`` (``--alpha``, default 0.05): the probability that a faithful re-run reports anything
FAILED. Each test gets the Šidák level ``a = 1 - (1 - alpha)^(1/m)``; Šidák is exact for independent tests and
conservative for the positively dependent ones here (seeds of one cell share its canonical mean, models share a
benchmark's pooled stddev: Šidák's inequality for two-sided tests of multivariate normal and t vectors).

Derivation of a slice band at level ``a`` (``x`` the mean of ``k`` reproduced seeds, ``mu`` the mean of ``n``
canonical seeds, both draws of one distribution with seed-to-seed stddev ``sigma``): ``D = x - mu ~
N(0, (1/k + 1/n) sigma^2)``, ``f = sqrt(1/k + 1/n)``. ``sigma`` is unknown; three models of it are available:

- binomial: a score that is a mean of per-row credits in [0, 1], independent across rows given the seed, has
  ``Var <= sum p_i(1-p_i)/N^2 <= p(1-p)/N`` (Jensen), so ``sigma <= SE_bin`` with no estimation error and
  ``P(|D| > f * z_a * SE_bin) <= a`` with ``z_a`` the normal quantile ``Phi^-1(1 - a/2)``;
- seed pool: when the seed spread of a benchmark is common to the release's models, the pooled variance
  ``s_pool^2`` (mean of the models' sample variances) has ``nu = sum(n_i - 1)`` degrees of freedom (8 models x 2 =
  16), ``D / (f s_pool) ~ t_nu`` exactly, and ``P(|D| > f * t_{nu,a} * s_pool) = a``;
- moderated (the default under a budget): the pool assumes the 8 models share a benchmark's seed spread, and
  the release says they do not (Cochran's test flags cvbench_3d and mathvista; across benchmarks p ~ 0.005; the
  observed spread reaches 6.7x the binomial error, so the binomial bound fails there too). Each cell's variance is
  instead a draw of an empirical-Bayes prior (scaled inverse chi-square, shape ``d0`` common, scale ``s0^2`` per
  benchmark, fitted by the method of moments on log variances: :mod:`trace_lib.aggregation.moderation`); given
  the cell's own ``s^2`` (2 dof), ``D / (f s_mod) ~ t_{d_eff+2}`` with ``s_mod^2 = (d_eff s0^2 + 2 s^2) /
  (d_eff + 2)``, where ``d_eff <= d0`` discounts the prior for ``s0`` being estimated from 8 cells. So
  ``P(|D| > f * t_{d_eff+2,a} * s_mod | s) ~= a`` for every cell, whatever its own spread: a noisy cell gets a
  wider band, a quiet one a narrower band than the pool gives. Category and overall scores compose their
  benchmarks' moderated variances (:meth:`~trace_lib.aggregation.tolerance.ToleranceRule.category_sigma`).

The band is ``f * max(z_a * SE_bin, t_{nu,a} * s)`` with ``s`` the pool or the moderated stddev: a faithful re-run
lands outside with probability <= ``a`` if *either* model holds (the max is wider than each single-model band, so
its exceedance is at most the smaller of the two exceedances). With the moderated term that is: the cell's
rows are independent given the seed (the binomial bound), or its variance is an ordinary draw of the benchmark's
prior; the pooled rule needed equal variances instead, which the release rejects (``benchmarks/
tolerance_power.py`` measures a faithful-campaign false-alarm rate of ~0.45 for the pooled band when the cells'
variances follow the fitted posterior, ~0.05 for the moderated one). The plug-in ``d0, s0`` are refitted from
each release, so the level is approximate, checked by that simulation, not exact. Category and overall scores use
the same form with their own binomial term and seed estimate. The TRACE validation has one canonical draw and no
seed pool: its band is ``z_a * sqrt(2) * SE_bin``.

``--tolerance-z Z`` overrides both critical values with ``Z`` (the pre-budget rule; ``alpha`` is then reported as
implied: ``1 - (1 - a_Z)^m`` with ``a_Z = P(|t_nu| > Z)``, the larger of the two single-bound levels).
Distributions come from ``scipy.stats`` (normal, Student t, binomial).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from trace_lib.errors import UsageError

#: The default family-wise false-alarm budget.
DEFAULT_ALPHA = 0.05
#: Per-test level of the "screening" band used by the campaign-level count check (a nominal 95% band).
SCREEN_ALPHA = 0.05



def normal_two_sided_quantile(a: float) -> float:
    """``z`` with ``P(|Z| > z) = a`` for a standard normal ``Z``."""
    from scipy.stats import norm

    return float(norm.isf(a / 2.0))


def t_two_sided_tail(t: float, dof: float) -> float:
    """``P(|T| > t)`` for Student's t with ``dof > 0`` degrees of freedom (``inf``: the normal tail)."""
    from scipy.stats import norm, t as student

    if not dof > 0:
        raise ValueError(f"dof must be positive, got {dof}")
    tail = norm.sf(abs(t)) if math.isinf(dof) else student.sf(abs(t), dof)
    return float(2.0 * tail)


@functools.lru_cache(maxsize=256)
def t_two_sided_quantile(a: float, dof: float) -> float:
    """``t`` with ``P(|T_dof| > t) = a``."""
    from scipy.stats import t as student

    if not 0.0 < a < 1.0:
        raise ValueError(f"level must be in (0, 1), got {a}")
    return normal_two_sided_quantile(a) if math.isinf(dof) else float(student.isf(a / 2.0, dof))


def sidak_level(alpha: float, family_size: int) -> float:
    """Per-test level ``1 - (1 - alpha)^(1/m)`` that holds the family-wise rate at ``alpha`` (independent tests)."""
    return -math.expm1(math.log1p(-alpha) / max(1, family_size))


def family_rate(per_test: float, family_size: int) -> float:
    """The family-wise rate ``1 - (1 - a)^m`` implied by a per-test level ``a`` (inverse of :func:`sidak_level`)."""
    return -math.expm1(max(1, family_size) * math.log1p(-min(per_test, 1.0 - 1e-16)))


def binomial_upper_tail(k: int, n: int, p: float) -> float:
    """``P(X >= k)`` for ``X ~ Binomial(n, p)``."""
    from scipy.stats import binom

    return 1.0 if k <= 0 else float(binom.sf(k - 1, n, p))


def check_alpha(alpha: float) -> float:
    """``alpha`` itself when it is a number in (0, 1).

    Raises:
        UsageError: otherwise.
    """
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and 0.0 < alpha < 1.0):
        raise UsageError("alpha must be a number in (0, 1)", field="--alpha", found=alpha)
    return float(alpha)


@dataclass(frozen=True)
class Family:
    """The tests a planned campaign makes (every verdict it reports), counted from the plan's shape."""

    slices: int  # models x seeds x benchmarks
    means: int = 0  # models x benchmarks when there are >= 2 seeds (mean of the reproduced seeds)
    overalls: int = 0  # models x seeds (full suite only)
    categories: int = 0  # models x seeds x categories (full suite only)
    campaign_checks: int = 0  # models x seeds x 2: the count and direction checks (full suite only)

    @property
    def size(self) -> int:
        return self.slices + self.means + self.overalls + self.categories + self.campaign_checks

    @classmethod
    def for_campaign(cls, *, models: int, seeds: int, benchmarks: int, categories: int, full_suite: bool) -> Family:
        """The family of ``models`` (with canonical scores) x ``seeds`` x ``benchmarks``."""
        groups = models * seeds if full_suite else 0
        return cls(
            slices=models * seeds * benchmarks,
            means=models * benchmarks if seeds > 1 else 0,
            overalls=groups,
            categories=groups * categories,
            campaign_checks=2 * groups,
        )

    def describe(self) -> str:
        parts = [f"{self.slices} slices"]
        for count, name in ((self.means, "benchmark means"), (self.overalls, "overalls"),
                            (self.categories, "categories"), (self.campaign_checks, "campaign checks")):
            if count:
                parts.append(f"{count} {name}")
        return f"{self.size} tests ({' + '.join(parts)})"


@dataclass(frozen=True)
class Criterion:
    """How a family's per-test critical values follow from the budget (or from an explicit ``--tolerance-z``)."""

    alpha: float  # family-wise false-alarm budget (given, or implied by a fixed z)
    family_size: int
    per_test_alpha: float
    method: str  # "sidak" (from --alpha) or "fixed-z" (from --tolerance-z)
    fixed_z: float | None = None
    family_text: str = ""

    @classmethod
    def from_alpha(cls, alpha: float, family: Family | int) -> Criterion:
        size = family.size if isinstance(family, Family) else int(family)
        text = family.describe() if isinstance(family, Family) else f"{size} tests"
        return cls(check_alpha(alpha), size, sidak_level(alpha, size), "sidak", None, text)

    @classmethod
    def from_z(cls, z: float, family: Family | int = 1, *, dof: int | None = None) -> Criterion:
        """The fixed-z criterion; the per-test level reported is the larger of the normal and ``t_dof`` levels."""
        if not (isinstance(z, (int, float)) and math.isfinite(z) and z > 0):
            raise UsageError("z must be a positive number", field="--tolerance-z", found=z)
        size = family.size if isinstance(family, Family) else int(family)
        text = family.describe() if isinstance(family, Family) else f"{size} tests"
        per_test = t_two_sided_tail(z, dof if dof else math.inf)
        return cls(family_rate(per_test, size), size, per_test, "fixed-z", float(z), text)

    def binomial_z(self) -> float:
        """Critical value for a known-bound (binomial) sigma."""
        return self.fixed_z if self.fixed_z is not None else normal_two_sided_quantile(self.per_test_alpha)

    def pool_t(self, dof: float) -> float:
        """Critical value for a seed stddev estimate with ``dof`` degrees of freedom (normal when ``dof`` is 0 or
        infinite)."""
        if self.fixed_z is not None:
            return self.fixed_z
        return t_two_sided_quantile(self.per_test_alpha, dof) if dof > 0 else self.binomial_z()

    def describe(self) -> str:
        """One line for reports and ``--print-config``."""
        if self.method == "fixed-z":
            return (f"fixed z={self.fixed_z:g} (--tolerance-z) over {self.family_text}: implied per-test "
                    f"{self.per_test_alpha:.3g}, implied family-wise alpha {self.alpha:.4g}")
        return (f"alpha={self.alpha:g} family-wise over {self.family_text}, Sidak per-test "
                f"{self.per_test_alpha:.3g}")

    def properties(self) -> list[tuple[str, str]]:
        """JUnit receipt properties of the budget."""
        return [
            ("tolerance_method", self.method),
            ("tolerance_alpha", repr(self.alpha)),
            ("tolerance_alpha_kind", "implied" if self.method == "fixed-z" else "given"),
            ("tolerance_family_size", str(self.family_size)),
            ("tolerance_per_test_alpha", repr(self.per_test_alpha)),
        ]
