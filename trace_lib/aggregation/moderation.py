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

Two-way scale (:data:`TWO_WAY_PRIOR`): ``log s0^2 = a(group) + b(member)`` (a benchmark's and a model's effect),
fitted by least squares on ``e``; ``d0`` then comes from the residual sum of squares over ``N - rank`` dof, and the
discount of ``d0`` for the estimated scale uses each cell's leverage ``h`` (``1/n`` in the one-way fit, where the
least-squares fit is the group mean: one implementation of both).

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
#: The prior scale has a model effect as well as a benchmark one (``log s0^2 = a(benchmark) + b(model)``); off:
#: one scale per benchmark (docs/tolerance.md, candidate log: measured on the simulation, not adopted).
TWO_WAY_PRIOR = False


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
    decreasing); ``inf`` where the root lies beyond ``e**30`` (``y`` under about 9.4e-14), the limit as ``y -> 0``."""
    from scipy.optimize import brentq

    if not y > 0:
        raise ValueError(f"trigamma_inverse needs y > 0, got {y}")
    if y <= trigamma(math.exp(30.0)):
        return math.inf
    return math.exp(brentq(lambda u: trigamma(math.exp(u)) - y, -30.0, 30.0, xtol=1e-14))


def _log_variance_offset(dof: float) -> float:
    """``E[log(chi2_d / d)] = digamma(d/2) - log(d/2)``."""
    return digamma(dof / 2) - math.log(dof / 2)


@dataclass(frozen=True)
class VariancePrior:
    """The fitted prior: shape ``prior_dof`` (``d0``, common; ``inf``: none), scale ``prior_var[group]`` (``s0^2``),
    and with a two-way fit ``cell_var[(group, member)]`` with each cell's leverage ``cell_leverage``."""

    prior_dof: float
    prior_var: Mapping[str, float]
    cells: int  # cells the fit used
    residual_dof: int  # within-group degrees of freedom behind ``prior_dof``
    group_cells: Mapping[str, int] = field(default_factory=dict)  # cells behind each group's ``s0^2``
    cell_trigamma: float = 0.0  # mean trigamma(d/2) over the cells: Var(e) from chi-square noise alone
    cell_var: Mapping[tuple[str, str], float] = field(default_factory=dict)  # two-way: (group, member) -> s0^2
    cell_leverage: Mapping[tuple[str, str], float] = field(default_factory=dict)  # two-way: (group, member) -> h

    def prior_q(self, group: str, member: str | None = None) -> float:
        """``s0^2`` of a cell: the two-way ``(group, member)`` scale where fitted, else the group's (0: none)."""
        return self.cell_var.get((group, member), self.prior_var.get(group, 0.0))

    def prior_sd(self, group: str, member: str | None = None) -> float:
        return math.sqrt(self.prior_q(group, member))

    def effective_prior_dof(self, group: str, member: str | None = None) -> float:
        """``d0`` discounted for the estimation of the cell's ``s0^2`` (leverage ``h``; ``1/n`` for a group of ``n``
        cells): ``d_eff`` with ``trigamma(d_eff/2) = trigamma(d0/2) + h (trigamma(d/2) + trigamma(d0/2))`` (the
        log-scale variance of ``sigma^2 / s0_hat^2`` matched to a scaled inverse chi-square: the prior is only as
        sharp as ``s0`` is known; without it the plug-in band runs over its level, 8 cells per benchmark fixing
        ``s0^2`` to within a log-sd of ~0.5)."""
        h = self.cell_leverage.get((group, member))
        if h is None:
            n = self.group_cells.get(group, 0)
            if n <= 0:
                return self.prior_dof
            h = 1.0 / n
        prior_tri = 0.0 if math.isinf(self.prior_dof) else trigamma(self.prior_dof / 2)
        return 2.0 * trigamma_inverse(prior_tri + (self.cell_trigamma + prior_tri) * h)

    def moderated_var(self, group: str, sample_var: float, dof: float, member: str | None = None) -> float:
        """``(d_eff s0^2 + d s^2) / (d_eff + d)`` (``s0^2`` when ``d_eff`` is infinite)."""
        s0_sq, d_eff = self.prior_q(group, member), self.effective_prior_dof(group, member)
        if math.isinf(d_eff):
            return s0_sq
        return (d_eff * s0_sq + dof * sample_var) / (d_eff + dof)

    def posterior_dof(self, group: str, dof: float, member: str | None = None) -> float:
        """Degrees of freedom of the moderated t: ``d_eff + d``."""
        return self.effective_prior_dof(group, member) + dof

    def describe(self) -> str:
        d0 = "inf" if math.isinf(self.prior_dof) else f"{self.prior_dof:.2f}"
        way = ", scale per benchmark and model" if self.cell_var else ""
        return (f"moderated seed variances (empirical Bayes, d0={d0} from {self.cells} cells, {self.residual_dof} "
                f"dof{way})")


def fit_variance_prior(groups: Mapping[str, Sequence[tuple[float, float]]],
                       members: Mapping[str, Sequence[str]] | None = None) -> VariancePrior | None:
    """The prior of ``groups`` (group -> its cells' ``(sample variance, dof)``; ``members``: group -> each cell's
    member, for the two-way scale ``a(group) + b(member)``), or None when the cells leave fewer than
    :data:`MIN_RESIDUAL_DOF` residual degrees of freedom (too few to say how much cells differ)."""
    import numpy as np

    keys, e, tri = [], [], []
    for group, pairs in groups.items():
        names = members[group] if members is not None else [None] * len(pairs)
        for (v, d), member in zip(pairs, names):
            if v > 0 and d > 0 and math.isfinite(v):
                keys.append((group, member))
                e.append(math.log(v) - _log_variance_offset(d))
                tri.append(trigamma(d / 2))
    group_names = list(dict.fromkeys(g for g, _ in keys))
    member_names = list(dict.fromkeys(m for _, m in keys))[1:] if members is not None else []  # first: reference

    def row(group: str, member: str | None) -> np.ndarray:
        x = np.zeros(len(group_names) + len(member_names))
        x[group_names.index(group)] = 1.0
        if member in member_names:
            x[len(group_names) + member_names.index(member)] = 1.0
        return x

    if not keys:
        return None
    design, y = np.array([row(g, m) for g, m in keys]), np.array(e)
    beta, _, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    residual_dof = len(keys) - int(rank)
    if residual_dof < MIN_RESIDUAL_DOF:
        return None
    cells = len(keys)
    excess = float(((y - design @ beta) ** 2).sum()) / residual_dof - sum(tri) / cells
    prior_dof = 2.0 * trigamma_inverse(excess) if excess > 0 else math.inf
    shift = 0.0 if math.isinf(prior_dof) else _log_variance_offset(prior_dof)
    counts = {g: sum(1 for gg, _ in keys if gg == g) for g in group_names}
    if members is None:
        prior_var = {g: math.exp(beta[k] + shift) for k, g in enumerate(group_names)}
        return VariancePrior(prior_dof, MappingProxyType(prior_var), cells, residual_dof, MappingProxyType(counts),
                             sum(tri) / cells)
    cov = np.linalg.pinv(design.T @ design)
    effects = np.r_[0.0, beta[len(group_names):]]  # the members' effects, the reference's 0
    prior_var = {g: math.exp(beta[k] + effects.mean() + shift) for k, g in enumerate(group_names)}
    every = [(g, m) for g in group_names for m in dict.fromkeys(mm for _, mm in keys)]
    xs = {gm: row(*gm) for gm in every}
    cell_var = {gm: math.exp(float(x @ beta) + shift) for gm, x in xs.items()}
    leverage = {gm: float(x @ cov @ x) for gm, x in xs.items()}
    return VariancePrior(prior_dof, MappingProxyType(prior_var), cells, residual_dof, MappingProxyType(counts),
                         sum(tri) / cells, MappingProxyType(cell_var), MappingProxyType(leverage))
