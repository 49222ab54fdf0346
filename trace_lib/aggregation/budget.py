"""The false-alarm budget: a family of ``m`` planned tests, one family-wise ``alpha``, Šidák per-test levels.

The user states one budget ``alpha`` (``--alpha``, default 0.05): the probability that a faithful re-run reports
anything "differs" (evaluation verdicts, :mod:`trace_lib.aggregation.verdict`, whose family is the plan's:
:class:`~trace_lib.aggregation.verdict.VerdictPlan`) or FAILED (the validation band,
:mod:`trace_lib.aggregation.tolerance`). Each test gets the Šidák level ``a = 1 - (1 - alpha)^(1/m)``: exact for
independent tests, conservative for the positively dependent ones here (the seeds and the mean of one cell share
its canonical mean; Šidák's inequality for two-sided tests of multivariate normal and t vectors). ``m`` is fixed by
the plan, never by ``-k`` or by what is on disk. Distributions come from ``scipy.stats``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from trace_lib.errors import UsageError

#: The default family-wise false-alarm budget.
DEFAULT_ALPHA = 0.05


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


def check_alpha(alpha: float) -> float:
    """``alpha`` itself when it is a number in (0, 1).

    Raises:
        UsageError: otherwise.
    """
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and 0.0 < alpha < 1.0):
        raise UsageError("alpha must be a number in (0, 1)", field="--alpha", found=alpha)
    return float(alpha)


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
    def from_alpha(cls, alpha: float, family: int) -> Criterion:
        size = int(family)
        text = f"{size} tests"
        return cls(check_alpha(alpha), size, sidak_level(alpha, size), "sidak", None, text)

    @classmethod
    def from_z(cls, z: float, family: int = 1, *, dof: int | None = None) -> Criterion:
        """The fixed-z criterion; the per-test level reported is the larger of the normal and ``t_dof`` levels."""
        if not (isinstance(z, (int, float)) and math.isfinite(z) and z > 0):
            raise UsageError("z must be a positive number", field="--tolerance-z", found=z)
        size = int(family)
        text = f"{size} tests"
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
