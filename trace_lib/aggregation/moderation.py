"""Moderated seed variances: an empirical-Bayes prior for the seed-to-seed variance of each (model, benchmark) cell.

Model (Smyth 2004, the limma moderated t): a cell's true seed variance ``sigma^2`` is a draw of a scaled
inverse-chi-square prior ``d0 * s0^2 / chi2_{d0}`` with one scale ``s0^2`` per *group* (a benchmark: its row count
and difficulty set the scale) and one shape ``d0`` shared by every group (how far cells of one benchmark differ);
the cell's sample variance over its ``d`` + 1 seeds is ``s^2 ~ sigma^2 chi2_d / d``. Then

- ``e = log s^2 - digamma(d/2) + log(d/2)`` has mean ``log s0^2 - digamma(d0/2) + log(d0/2)`` and variance
  ``trigamma(d/2) + trigamma(d0/2)``, so the within-group variance of ``e`` (divisor ``sum(n_g - 1)``) minus the
  mean ``trigamma(d/2)`` estimates ``trigamma(d0/2)`` (method of moments on log variances; ``d0 = inf``, no
  heterogeneity beyond chi-square noise, when the estimate is <= 0), and each group's mean of ``e`` gives ``s0^2``;
- given ``s^2``, ``sigma^2`` is scaled inverse-chi-square with ``d0 + d`` dof and scale
  ``s_mod^2 = (d0 s0^2 + d s^2) / (d0 + d)``; a new draw ``D ~ N(0, f^2 sigma^2)`` independent of ``s^2`` (a
  reproduced score minus the canonical mean: the mean of normal draws is independent of their sample variance)
  has ``D / (f s_mod) ~ t_{d0 + d}`` exactly: the posterior predictive a cell's band is built from.

One ``d0`` over every benchmark, not one per benchmark: 8 cells of 2 dof each say almost nothing about a
benchmark's own ``d0`` (``Var e`` alone is 1.64 per cell), while 24 benchmarks x 7 within-group dof estimate a
common one. Cells with a zero sample variance carry no log-scale information and are left out of the fit (their
moderated variance is then ``d0 s0^2 / (d0 + d)``). Digamma and trigamma come from ``scipy.special``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence

#: Below this many within-group degrees of freedom the shape ``d0`` is not estimated (no prior: pooled rule).
MIN_RESIDUAL_DOF = 4


def digamma(x: float) -> float:
    """``psi(x)`` for ``x > 0`` (``scipy.special.digamma``)."""
    from scipy.special import digamma as psi

    if x <= 0:
        raise ValueError(f"digamma needs x > 0, got {x}")
    return float(psi(x))


def trigamma(x: float) -> float:
    """``psi'(x)`` for ``x > 0`` (``scipy.special.polygamma(1, x)``)."""
    from scipy.special import polygamma

    if x <= 0:
        raise ValueError(f"trigamma needs x > 0, got {x}")
    return float(polygamma(1, x))


def trigamma_inverse(y: float) -> float:
    """``x > 0`` with ``trigamma(x) = y`` for ``y > 0`` (``scipy.optimize.brentq`` on ``log x``; trigamma is
    decreasing)."""
    from scipy.optimize import brentq

    if not y > 0:
        raise ValueError(f"trigamma_inverse needs y > 0, got {y}")
    return math.exp(brentq(lambda u: trigamma(math.exp(u)) - y, -30.0, 30.0, xtol=1e-14))


def _log_variance_offset(dof: float) -> float:
    """``E[log(chi2_d / d)] = digamma(d/2) - log(d/2)``."""
    return digamma(dof / 2) - math.log(dof / 2)


@dataclass(frozen=True)
class VariancePrior:
    """The fitted prior: shape ``prior_dof`` (``d0``, common; ``inf``: none), scale ``prior_var[group]`` (``s0^2``)."""

    prior_dof: float
    prior_var: Mapping[str, float]
    cells: int  # cells the fit used
    residual_dof: int  # within-group degrees of freedom behind ``prior_dof``
    group_cells: Mapping[str, int] = field(default_factory=dict)  # cells behind each group's ``s0^2``
    cell_trigamma: float = 0.0  # mean trigamma(d/2) over the cells: Var(e) from chi-square noise alone

    def prior_sd(self, group: str) -> float:
        return math.sqrt(self.prior_var.get(group, 0.0))

    def effective_prior_dof(self, group: str) -> float:
        """``d0`` discounted for the estimation of the group's ``s0^2`` from its ``n`` cells: ``d_eff`` with
        ``trigamma(d_eff/2) = trigamma(d0/2) + (trigamma(d/2) + trigamma(d0/2)) / n`` (the log-scale variance of
        ``sigma^2 / s0_hat^2`` matched to a scaled inverse chi-square: the prior is only as sharp as ``s0`` is
        known; without it the plug-in band runs over its level, 8 cells per benchmark fixing ``s0^2`` to within a
        log-sd of ~0.5)."""
        n = self.group_cells.get(group, 0)
        prior_tri = 0.0 if math.isinf(self.prior_dof) else trigamma(self.prior_dof / 2)
        if n <= 0:
            return self.prior_dof
        return 2.0 * trigamma_inverse(prior_tri + (self.cell_trigamma + prior_tri) / n)

    def moderated_var(self, group: str, sample_var: float, dof: float) -> float:
        """``(d_eff s0^2 + d s^2) / (d_eff + d)`` (``s0^2`` when ``d_eff`` is infinite)."""
        s0_sq, d_eff = self.prior_var.get(group, 0.0), self.effective_prior_dof(group)
        if math.isinf(d_eff):
            return s0_sq
        return (d_eff * s0_sq + dof * sample_var) / (d_eff + dof)

    def posterior_dof(self, group: str, dof: float) -> float:
        """Degrees of freedom of the moderated t: ``d_eff + d``."""
        return self.effective_prior_dof(group) + dof

    def describe(self) -> str:
        d0 = "inf" if math.isinf(self.prior_dof) else f"{self.prior_dof:.2f}"
        return f"moderated seed variances (empirical Bayes, d0={d0} from {self.cells} cells, {self.residual_dof} dof)"


def fit_variance_prior(groups: Mapping[str, Sequence[tuple[float, float]]]) -> VariancePrior | None:
    """The prior of ``groups`` (group -> its cells' ``(sample variance, dof)``), or None when the cells leave fewer
    than :data:`MIN_RESIDUAL_DOF` within-group degrees of freedom (too few to say how much cells differ)."""
    centred_sq, residual_dof, trigamma_sum, cells = 0.0, 0, 0.0, 0
    means: dict[str, float] = {}
    for group, pairs in groups.items():
        usable = [(v, d) for v, d in pairs if v > 0 and d > 0 and math.isfinite(v)]
        if not usable:
            continue
        e = [math.log(v) - _log_variance_offset(d) for v, d in usable]
        means[group] = sum(e) / len(e)
        centred_sq += sum((x - means[group]) ** 2 for x in e)
        residual_dof += len(e) - 1
        trigamma_sum += sum(trigamma(d / 2) for _, d in usable)
        cells += len(usable)
    if residual_dof < MIN_RESIDUAL_DOF:
        return None
    excess = centred_sq / residual_dof - trigamma_sum / cells
    prior_dof = 2.0 * trigamma_inverse(excess) if excess > 0 else math.inf
    shift = 0.0 if math.isinf(prior_dof) else _log_variance_offset(prior_dof)
    prior_var = {g: math.exp(m + shift) for g, m in means.items()}
    counts = {g: sum(1 for v, d in pairs if v > 0 and d > 0 and math.isfinite(v)) for g, pairs in groups.items()}
    return VariancePrior(prior_dof, MappingProxyType(prior_var), cells, residual_dof,
                         MappingProxyType({g: c for g, c in counts.items() if c}), trigamma_sum / cells)
