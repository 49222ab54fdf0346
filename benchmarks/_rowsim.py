"""Exact row-level sampling of slice scores for the tolerance simulation (benchmarks only; numpy and scipy).

A cell (model x benchmark) is a list of row groups. A group holds ``n`` rows that each weigh ``psi`` points in
the slice score (100/n for a plain mean; the split's share for a macro mean) and earn a credit from ``parts``
independent Bernoulli halves: ``parts == 1`` is a binary credit, ``parts == 2`` a credit in {0, 0.5, 1} (the
fractional-credit model). The rows of a group fall in bins of equal success probability; within a bin the rows
are exchangeable, so the counts of the per-row credit patterns over the seeds are multinomial. That gives each
seed's score and each row's sample variance over the seeds exactly as drawing every row would (equal in
distribution), at the cost of one multinomial per bin.

Seed-level component: each pass (seed) of a cell draws one shift ``u ~ N(0, eta^2)`` on the logit scale that moves
all its rows together (every request of a pass carries the same seed).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special, stats

BINS = 32  # equal-probability bins of the per-row success probabilities
_HERMITE = np.polynomial.hermite_e.hermegauss(48)  # nodes and weights for E over u ~ N(0, 1)


@dataclass(frozen=True)
class Group:
    """``n`` rows weighing ``psi`` points each, ``parts`` Bernoulli halves per credit, binned probabilities."""

    psi: float
    parts: int
    p: np.ndarray  # (K,) success probability of each bin
    n: np.ndarray  # (K,) rows in each bin

    @property
    def rows(self) -> int:
        return int(self.n.sum())

    def row_variance(self, p: np.ndarray | None = None) -> float:
        """Variance of one seed's contribution to the score: sum psi^2 * Var(credit) (independent rows)."""
        q = self.p if p is None else p
        return float(self.psi**2 * (self.n * q * (1 - q)).sum() / self.parts)


@dataclass(frozen=True)
class Cell:
    """One model x benchmark: its row groups and the logit sd ``eta`` of its per-seed shift (0: none)."""

    groups: tuple[Group, ...]
    eta: float = 0.0
    meta: dict = field(default_factory=dict)

    def expected_score(self, u: float | np.ndarray = 0.0) -> np.ndarray:
        u = np.asarray(u, dtype=float)
        return sum(g.psi * (g.n * special.expit(special.logit(g.p) + u[..., None])).sum(-1) for g in self.groups)

    def row_variance(self) -> float:
        return sum(g.row_variance() for g in self.groups)

    def seed_variance(self, eta: float | None = None) -> float:
        """Var over u ~ N(0, eta^2) of the expected score (the seed-level component), by Gauss-Hermite."""
        eta = self.eta if eta is None else eta
        x, w = _HERMITE
        vals = self.expected_score(eta * x)
        w = w / w.sum()
        mean = (w * vals).sum()
        return float((w * (vals - mean) ** 2).sum())


# -- per-row credit patterns over the seeds ----------------------------------------------------------------------

def patterns(seeds: int, parts: int) -> np.ndarray:
    """(P, seeds) credit of every per-row pattern: each seed's credit level j / parts, j = 0..parts."""
    levels = np.arange(parts + 1) / parts
    return np.array(list(itertools.product(levels, repeat=seeds)))


def level_probs(p: np.ndarray, parts: int) -> np.ndarray:
    """(..., parts + 1) probability of credit j / parts for success probability ``p`` (binomial in halves)."""
    j = np.arange(parts + 1)
    return stats.binom.pmf(j, parts, p[..., None])


def pattern_probs(p_seeds: np.ndarray, parts: int) -> np.ndarray:
    """(..., P) probability of each pattern given per-seed probabilities ``p_seeds`` (..., seeds)."""
    seeds = p_seeds.shape[-1]
    lev = level_probs(p_seeds, parts)  # (..., seeds, L)
    idx = np.array(list(itertools.product(range(parts + 1), repeat=seeds)))  # (P, seeds)
    out = np.ones((*p_seeds.shape[:-1], len(idx)))
    for s in range(seeds):
        out = out * lev[..., s, :][..., idx[:, s]]
    return out


@dataclass(frozen=True)
class Draw:
    """Sufficient statistics of one side of a group: per-seed scores, the row-variance sum, the credit total."""

    scores: np.ndarray  # (R, seeds) the group's contribution to each seed's score (points)
    row_var: np.ndarray  # (R,) sum_i psi^2 s_i^2, s_i^2 the row's sample variance over the seeds (ddof 1)
    credit: np.ndarray  # (R,) sum of the credits over rows and seeds


def seed_probs(group: Group, u: np.ndarray, shift=None) -> np.ndarray:  # noqa: ANN001
    """(R, K, seeds) per-row success probability of each bin at each seed (logit shift ``u`` (R, seeds)); ``shift``
    maps probabilities to shifted ones (an injected difference)."""
    p = special.expit(special.logit(group.p)[None, :, None] + u[:, None, :])
    return p if shift is None else shift(p)


def draw_counts(rng: np.random.Generator, group: Group, p_seeds: np.ndarray) -> np.ndarray:
    """(R, K, P) counts of each per-row pattern in each bin (multinomial)."""
    probs = pattern_probs(p_seeds, group.parts)
    probs = probs / probs.sum(-1, keepdims=True)
    return rng.multinomial(group.n, probs)


def draw_given(rng: np.random.Generator, base: np.ndarray, p_seeds: np.ndarray, parts: int) -> np.ndarray:
    """(R, K, P_base, P) joint pattern counts of a second model on the same rows: the rows of each base pattern
    draw their own patterns (independent decoding given the items; bin j pairs with bin j)."""
    probs = pattern_probs(p_seeds, parts)
    probs = probs / probs.sum(-1, keepdims=True)
    return rng.multinomial(base, probs[:, :, None, :])


def reduce(group: Group, counts: np.ndarray, seeds: int) -> Draw:
    """Per-seed scores, row-variance sum and credit total from pattern counts (R, K, P)."""
    credit = patterns(seeds, group.parts)  # (P, seeds)
    var = credit.var(axis=1, ddof=1) if seeds > 1 else np.zeros(len(credit))
    total = counts.sum(axis=1)  # (R, P)
    return Draw(group.psi * total @ credit, group.psi**2 * total @ var, total @ credit.sum(1))


def paired_variance(group: Group, joint: np.ndarray, seeds: int) -> np.ndarray:
    """(R,) sum_i psi^2 var_s(c_T[i,s] - c_B[i,s]) from joint counts (R, K, P_base, P_model)."""
    credit = patterns(seeds, group.parts)
    diff = credit[None, :, :] - credit[:, None, :]  # (P_base, P_model, seeds): model minus base
    var = diff.var(axis=-1, ddof=1)
    return group.psi**2 * np.einsum("rkab,ab->r", joint, var)


def draw_patterns(rng: np.random.Generator, group: Group, p_seeds: np.ndarray) -> Draw:
    """Pattern counts per bin (multinomial), reduced to per-seed scores and the row-variance sum."""
    return reduce(group, draw_counts(rng, group, p_seeds), p_seeds.shape[-1])


def draw_scores(rng: np.random.Generator, group: Group, p_seeds: np.ndarray) -> np.ndarray:
    """(R, seeds) per-seed scores only (the rows' patterns are not needed): one binomial per bin and seed."""
    hits = rng.binomial(group.n[None, :, None] * group.parts, p_seeds)  # (R, K, seeds)
    return group.psi * hits.sum(axis=1) / group.parts


# -- fitting a cell to the release -------------------------------------------------------------------------------

def _lower_bins(pbar: float, nu: float, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bin means computed from below and each bin's upper edge (a value of X)."""
    a, b = pbar * nu, (1 - pbar) * nu
    share = rows / rows.sum()
    edges = stats.beta.ppf(np.r_[0.0, np.cumsum(share)].clip(0, 1), a, b)
    upper = stats.beta.cdf(edges, a + 1, b)  # E[X 1{X <= x}] = pbar * F_{a+1,b}(x)
    return pbar * np.diff(upper) / share, edges[1:]


def beta_bins(pbar: float, nu: float, rows: np.ndarray) -> np.ndarray:
    """(K,) mean success probability of each bin of Beta(pbar nu, (1 - pbar) nu), bin j holding the quantile range
    of its ``rows[j]`` rows (so the rows' mean probability is ``pbar`` exactly). The upper half is computed as the
    mirror image's lower half (1 - X ~ Beta(b, a)): near 1 the quantiles of a dispersed Beta round to 1.0 and the
    bins there would lose their mass (the top bin came out 0 instead of ~1 for means above ~0.62 at rho 0.19), so a
    bin whose upper edge lies above 1/2 is computed from above."""
    low, top = _lower_bins(pbar, nu, rows)
    mirror, _ = _lower_bins(1 - pbar, nu, rows[::-1])
    high = 1 - mirror[::-1]
    return np.clip(np.where(top <= 0.5, low, high), 1e-12, 1 - 1e-12)  # a bin reaching above 1/2: from above


def split_rows(n: int, bins: int = BINS) -> np.ndarray:
    return np.full(bins, n // bins) + (np.arange(bins) < n % bins)


def fit_group(pbar: float, n: int, psi: float, parts: int, rho: float, bins: int = BINS) -> Group:
    """A group whose row variance is ``rho`` times the binomial one at mean ``pbar`` (rho in (0, 1]):
    per-row probabilities from the Beta with that dispersion, binned; rho >= 1 gives every row ``pbar``."""
    pbar = float(np.clip(pbar, 1e-6, 1 - 1e-6))
    rows = split_rows(n, bins)
    if rho >= 1 - 1e-9:
        return Group(psi, parts, np.full(bins, pbar), rows)
    target = rho * pbar * (1 - pbar)

    def excess(log_nu: float) -> float:
        q = beta_bins(pbar, np.exp(log_nu), rows)
        return float((rows * q * (1 - q)).sum() / n - target)

    lo, hi = np.log(1e-4), np.log(1e7)
    if excess(lo) >= 0:  # the bins cannot be more dispersed than this: take the most dispersed
        return Group(psi, parts, beta_bins(pbar, np.exp(lo), rows), rows)
    log_nu = optimize.brentq(excess, lo, hi, xtol=1e-10)
    return Group(psi, parts, beta_bins(pbar, np.exp(log_nu), rows), rows)


def fit_eta(cell: Cell, tau_sq: float) -> float:
    """Logit sd of the per-seed shift whose seed-level variance of the expected score is ``tau_sq`` (0: none)."""
    if tau_sq <= 0:
        return 0.0
    f = lambda eta: cell.seed_variance(eta) - tau_sq  # noqa: E731
    hi = 0.5
    while f(hi) < 0 and hi < 40:
        hi *= 2
    if f(hi) < 0:
        return hi
    return float(optimize.brentq(f, 1e-8, hi, xtol=1e-10))
