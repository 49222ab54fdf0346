"""The reproduction verdict: row-level sampling variance, seed-level excess, three outcomes, the paper's claims.

Every number a reproduction reports is judged here, from per-row credits (:class:`~trace_lib.aggregation.credits.
CreditTable`), by :func:`judge_credits`; ``trace-repro score``, ``summarize``, ``verdict --credits`` and
``tests_reproduction`` all call it. The derivation is in docs/tolerance.md; in short, for a cell (model m,
benchmark b) with reproduced seeds R (k of them) and the release's canonical seeds C (3):

1. each seed's score is ``X_s = const + sum_u w_u y_u[s]`` exactly (:mod:`trace_lib.linear_aggregate`), so the
   variance of one seed's score given the items is ``V = sum_u w_u^2 sigma_u^2``, estimated without bias from the
   per-unit sample variance over the k >= 2 reproduced seeds (pooled with the archive's canonical per-row credits
   when given); with k = 1 and no archive, the Jensen bound ``sigma^2 <= m (upper - m)`` per group ("binomial
   bound"). Under the null the canonical side has the same V;
2. seed-level excess: the seed scores of both sides, each about its own mean, give ``S^2`` on ``f = k + 1`` dof;
   ``Q = f S^2 / V ~ chi2_f`` without excess, and a cell with ``p < SEED_EXCESS_LEVEL`` is *seed-unstable*: its
   variance becomes ``S^2`` (``V + tau^2``) and its critical values Student t on ``f`` dof;
3. a test of difference ``D`` (a seed minus the canonical mean: ``Var = (V + tau^2)(1 + 1/3)``; the mean of the k
   seeds: ``(V + tau^2)(1/k + 1/3)``; categories and overall sum their benchmarks' variances over ``G^2``, then
   take the same excess test on their own seed scores) is **differs** iff ``|D| > crit_a SE`` (``a`` the Šidák
   level of ``--alpha`` over the planned family), **reproduced** iff the 90% equivalence interval
   ``D +- q_0.95 SE`` lies inside ``+-margin`` (checked first), else **inconclusive**;
4. claims (the release's comparisons, model minus base): the same on the seed-paired, row-paired deltas
   ``d_u[s] = y_T,u[s] - y_B,u[s]`` (agreement with the canonical delta), plus the sign: reproduced when the
   one-sided 95% bound of the reproduced delta excludes 0 on the canonical side, differs when the reproduced delta
   is significantly (at ``a``) of the opposite sign.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from trace_lib.aggregation.budget import DEFAULT_ALPHA, check_alpha, sidak_level
from trace_lib.aggregation.canonical import Canonical, Comparison, binomial_scale, load_canonical, mean
from trace_lib.aggregation.credits import Cell, CreditTable, row_fields
from trace_lib.linear_aggregate import Linear
from trace_lib.errors import InputError, UsageError

#: Default equivalence margin, percentage points: the half-width inside which a reproduced number counts as the
#: paper's (the paper's claimed deltas are 2-6 points; a 2-point slice difference would move a claim).
DEFAULT_MARGIN = 2.0
#: Per-test level of the equivalence (TOST) interval: reproduced iff the 90% interval lies inside +-margin.
EQUIVALENCE_ALPHA = 0.05
#: A cell is seed-unstable when its seed spread exceeds the row-level variance at this p-value.
SEED_EXCESS_LEVEL = 0.01
#: A cell whose seed variance is this improbable under the prior predictive is not shrunk toward its benchmark.
OUTLIER_LEVEL = 0.1
#: Nor is a cell whose seeds vary more than its own rows allow at this p-value (the seed-excess chi-square test,
#: ``Q ~ chi2_f``): its excess is real, whatever its benchmark's prior says (docs/tolerance.md, section 2).
ROWS_OUTLIER_LEVEL = 0.05
#: Power at which the minimum detectable shift is stated.
POWER = 0.8
OUTCOMES = ("reproduced", "differs", "inconclusive")
KINDS = ("slice", "mean", "category", "overall", "claim")


def check_margin(margin: float) -> float:
    """``margin`` when it is a positive finite number of points.

    Raises:
        UsageError: otherwise.
    """
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin > 0):
        raise UsageError("margin must be a positive number of points", field="--margin", found=margin)
    return float(margin)


@dataclass(frozen=True)
class SeedExcess:
    """The seed-level excess test of one cell (or composite, or claim): pooled seed spread vs row-level."""

    spread: float  # sqrt(S^2): pooled seed stddev of both sides, points
    expected: float  # sqrt(V (+ the components' excess)): what the row-level variance explains
    p_value: float
    dof: int
    unstable: bool

    @property
    def tau2(self) -> float:
        return max(0.0, self.spread**2 - self.expected**2) if self.unstable else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"spread": self.spread, "expected_spread": self.expected, "p_value": self.p_value, "dof": self.dof,
                "seed_unstable": self.unstable}


def seed_excess(reproduced: np.ndarray, canonical: np.ndarray, reproduced_var: float,
                canonical_var: float | None = None) -> SeedExcess:
    """``Q = SS_R / V_R + SS_C / V_C`` against ``chi2_f`` (``f = (k - 1) + (n - 1)``; each side about its own
    mean, each against its own row-level variance; ``V_C`` defaults to ``V_R``)."""
    from scipy.stats import chi2

    canonical_var = reproduced_var if canonical_var is None else canonical_var
    q, ss, dof, expected = 0.0, 0.0, 0, 0.0
    for values, var in ((reproduced, reproduced_var), (canonical, canonical_var)):
        if len(values) < 2:
            continue
        part = float(np.sum((values - values.mean()) ** 2))
        ss += part
        dof += len(values) - 1
        expected += (len(values) - 1) * var
        if part > 0:
            q = math.inf if var <= 0 else q + part / var
    if dof == 0:
        return SeedExcess(0.0, math.sqrt(reproduced_var), 1.0, 0, False)
    p = 0.0 if math.isinf(q) else float(chi2.sf(q, dof))
    return SeedExcess(math.sqrt(ss / dof), math.sqrt(expected / dof), p, dof, p < SEED_EXCESS_LEVEL)


@dataclass(frozen=True)
class Verdict:
    """One test's outcome and the numbers behind it (all in points on the 0-100 scale).

    ``interval`` is the equivalence interval ``difference +- q SE``; ``band`` is ``crit * se`` (``differs`` iff
    ``|difference| > band``); ``mds`` the shift detected with probability :data:`POWER`.
    """

    test_id: str
    kind: str  # one of KINDS
    outcome: str  # one of OUTCOMES
    estimate: float  # the reproduced number (a seed's score, the k-seed mean, a claim's mean delta)
    canonical: float  # the release's number it is compared with
    difference: float
    interval: tuple[float, float]
    se: float
    band: float
    margin: float
    components: Mapping[str, Any]  # row_variance, seed_excess_variance, factor, crit, dof, variance_source ...
    seed_unstable: Mapping[str, Any] | None  # the excess evidence when the cell is seed-unstable
    mds: float
    model_id: str = ""
    benchmark_id: str | None = None  # benchmark key, "category[NAME]" or "overall"
    seed: int | None = None
    reproduced_seeds: int = 1
    per_test_alpha: float = 0.0
    family_size: int = 0
    sign: Mapping[str, Any] | None = None  # claims: the sign verdict (outcome, bound, ...)
    note: str = ""

    @property
    def ok(self) -> bool:
        """Reproduced (the only outcome that passes)."""
        return self.outcome == "reproduced"

    def explain(self) -> str:
        """One line: what was compared, the interval against the margin, the band, and the outcome."""
        what = {"slice": "seed score", "mean": f"mean of {self.reproduced_seeds} seeds",
                "category": f"category mean of {self.reproduced_seeds} seeds",
                "overall": f"overall mean of {self.reproduced_seeds} seeds",
                "claim": f"delta over {self.reproduced_seeds} seeds"}[self.kind]
        lo, hi = self.interval
        c = self.components
        text = (f"{self.test_id}: {what} {self.estimate:.3f} vs canonical {self.canonical:.3f}: difference "
                f"{self.difference:+.3f} pp, 90% interval [{lo:+.3f}, {hi:+.3f}] vs margin +-{self.margin:g}, "
                f"band +-{self.band:.3f} (SE {self.se:.3f}: row-level {math.sqrt(c['row_variance']):.3f} "
                f"[{c['variance_source']}]")
        if c.get("seed_excess_variance"):
            dof = c.get("dof")
            text += (f", seed-level excess {math.sqrt(c['seed_excess_variance']):.3f}"
                     + (f" on t{dof:.1f}" if dof else ""))
        if self.seed_unstable:
            text += (f", seed-unstable: spread {self.seed_unstable['spread']:.3f} vs expected "
                     f"{self.seed_unstable['expected_spread']:.3f}, p = {self.seed_unstable['p_value']:.2g}")
        text += f"; per-test alpha {self.per_test_alpha:.2g} over {self.family_size} tests; MDS {self.mds:.2f})"
        if self.sign is not None:
            text += f"; sign {self.sign['outcome']}"
        text += f": {self.outcome.upper() if self.outcome != 'reproduced' else 'reproduced'}"
        return text + (f" ({self.note})" if self.note else "")

    def noted(self, note: str) -> Verdict:
        """This verdict with ``note`` appended (e.g. the responses' engine differs from the paper's)."""
        if not note:
            return self
        return replace(self, note=f"{self.note}; {note}" if self.note else note)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (non-finite numbers as None)."""
        return _finite({
            "test_id": self.test_id, "kind": self.kind, "outcome": self.outcome, "model_id": self.model_id,
            "benchmark_id": self.benchmark_id, "seed": self.seed, "reproduced_seeds": self.reproduced_seeds,
            "estimate": self.estimate, "canonical": self.canonical, "difference": self.difference,
            "interval": list(self.interval), "se": self.se, "band": self.band, "margin": self.margin,
            "mds": self.mds, "per_test_alpha": self.per_test_alpha, "family_size": self.family_size,
            "components": dict(self.components), "seed_unstable": dict(self.seed_unstable) if self.seed_unstable
            else None, "sign": dict(self.sign) if self.sign else None, "note": self.note,
        })

    def properties(self) -> list[tuple[str, str]]:
        """JUnit receipt properties (``verdict`` is the outcome)."""
        props = [("verdict", self.outcome), ("verdict_kind", self.kind), ("estimate", repr(self.estimate)),
                 ("canonical_mean", repr(self.canonical)), ("difference", repr(self.difference)),
                 ("interval", f"{self.interval[0]!r} {self.interval[1]!r}"), ("se", repr(self.se)),
                 ("band", repr(self.band)), ("margin", repr(self.margin)), ("mds", repr(self.mds)),
                 ("per_test_alpha", repr(self.per_test_alpha)), ("family_size", str(self.family_size))]
        props += [(f"variance_{k}", repr(v) if isinstance(v, float) else str(v)) for k, v in self.components.items()]
        if self.seed_unstable:
            props += [(f"seed_{k}", repr(v)) for k, v in self.seed_unstable.items()]
        if self.sign:
            props.append(("sign_verdict", str(self.sign["outcome"])))
        if self.note:
            props.append(("verdict_note", self.note))
        return props


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


# -- the plan's family ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class VerdictPlan:
    """What a campaign plans to judge (the family of the budget; ``-k`` or what is on disk never changes it)."""

    models: tuple[str, ...]
    seeds: tuple[int, ...]
    benchmarks: tuple[str, ...]

    @classmethod
    def of(cls, plan: Any) -> VerdictPlan:
        """From a :class:`~trace_lib.campaign.plan.Plan` (or a VerdictPlan)."""
        if isinstance(plan, VerdictPlan):
            return plan
        return cls(tuple(m.slug for m in plan.models), tuple(plan.seeds), tuple(plan.benchmarks))

    def categories(self, canonical: Canonical) -> tuple[str, ...]:
        """Categories whose every benchmark is planned."""
        chosen = set(self.benchmarks)
        return tuple(c for c, members in canonical.suite.categories.items() if set(members) <= chosen)

    def full_suite(self, canonical: Canonical) -> bool:
        return set(canonical.suite.keys) <= set(self.benchmarks)

    def comparisons(self, canonical: Canonical) -> tuple[Comparison, ...]:
        chosen = set(self.models)
        return tuple(c for c in canonical.comparisons if c.model_id in chosen and c.base_model_id in chosen)

    def family(self, canonical: Canonical) -> dict[str, int]:
        """Tests per kind: slices, means (>= 2 seeds), categories, overalls, claims (sign and agreement each)."""
        models = sum(1 for m in self.models if m in canonical.overall)
        benchmarks = len(self.benchmarks)
        levels = benchmarks + len(self.categories(canonical)) + self.full_suite(canonical)
        return {
            "slice": models * len(self.seeds) * benchmarks,
            "mean": models * benchmarks if len(self.seeds) > 1 else 0,
            "category": models * len(self.categories(canonical)),
            "overall": models * self.full_suite(canonical),
            "claim": 2 * len(self.comparisons(canonical)) * levels,
        }

    def family_size(self, canonical: Canonical) -> int:
        return max(1, sum(self.family(canonical).values()))

    def describe(self, canonical: Canonical) -> str:
        names = {"slice": "slices", "mean": "means", "category": "categories", "overall": "overall tests",
                 "claim": "claim tests"}
        parts = [f"{n} {names[k]}" for k, n in self.family(canonical).items() if n]
        return f"{self.family_size(canonical)} tests ({' + '.join(parts)})"


# -- statistics of one test's score ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Scored:
    """A score's reproduced seeds, its canonical seeds, the row-level variance of one seed's score on each side
    (``canonical_variance``: from the archive's rows, else the reproduced one carried to the canonical mean) and
    its seed-level excess variance ``tau2`` with ``tau4_per_dof`` = sum of ``tau_j^4 / dof_j`` over its estimated
    parts (Satterthwaite; 0 when there is no excess)."""

    reproduced: np.ndarray  # (k,) per-seed values
    canonical: np.ndarray  # (n,) canonical per-seed values
    row_variance: float  # V_R
    canonical_variance: float  # V_C
    source: str  # "rows over k reproduced seeds", "... + archive", "binomial bound"
    tau2: float = 0.0
    tau4_per_dof: float = 0.0
    seeds: tuple[int, ...] = ()
    moderation: Mapping[str, Any] | None = None  # the cell's moderated seed variance (evidence)

    @property
    def excess(self) -> SeedExcess:
        """The chi-square test of the seed spread against what rows (and the components' excess) explain."""
        return seed_excess(self.reproduced, self.canonical, self.row_variance + self.component_tau2,
                           self.canonical_variance + self.component_tau2)

    @property
    def component_tau2(self) -> float:
        return float((self.moderation or {}).get("component_tau2", 0.0))

    def variance(self, reproduced_weight: float) -> float:
        """``Var(D)`` of ``D = (weighted reproduced seeds) - canonical mean``."""
        return ((self.row_variance + self.tau2) * reproduced_weight
                + (self.canonical_variance + self.tau2) / len(self.canonical))

    def dof(self, reproduced_weight: float) -> float | None:
        """Satterthwaite degrees of freedom of ``Var(D)`` (None: no estimated seed-level part, normal)."""
        if self.tau2 <= 0 or self.tau4_per_dof <= 0:
            return None
        factor = reproduced_weight + 1.0 / len(self.canonical)
        return self.variance(reproduced_weight) ** 2 / (self.tau4_per_dof * factor**2)


def moderated_excess(reproduced: np.ndarray, canonical: np.ndarray, v_r: float, v_c: float, scale_r: float,
                     scale_c: float, prior: Any, benchmark: str,
                     model: str | None = None) -> tuple[float, float, dict[str, Any]]:
    """``(tau2, dof, evidence)``: the cell's seed variance, moderated by the release's prior on the scale of the
    binomial bound (``q = S^2 / scale``; posterior ``(d_eff q0 + f q) / (d_eff + f)`` on ``d_eff + f`` dof; a cell
    whose ``q`` is an outlier of the prior predictive ``F(f, d_eff)`` at :data:`OUTLIER_LEVEL` (robust empirical
    Bayes, Phipson et al. 2016), or whose seeds vary more than its own rows allow (``Q = SS_R/V_R + SS_C/V_C``
    against ``chi2_f``) at :data:`ROWS_OUTLIER_LEVEL`, keeps its own ``q`` on ``f`` dof), minus the row-level
    variance it already explains (never below 0: seeds cannot vary less than rows allow)."""
    k, n = len(reproduced), len(canonical)
    f = max(0, k - 1) + max(0, n - 1)
    if f == 0:
        return 0.0, math.inf, {"f": 0}
    ss = float(np.sum((reproduced - reproduced.mean()) ** 2)) if k > 1 else 0.0
    ss += float(np.sum((canonical - canonical.mean()) ** 2)) if n > 1 else 0.0
    wr, wc = max(0, k - 1) / f, max(0, n - 1) / f
    v_bar, scale = wr * v_r + wc * v_c, wr * scale_r + wc * scale_c
    q_hat = ss / f / scale
    outlier_p = None
    rows_p = seed_excess(reproduced, canonical, v_r, v_c).p_value
    if prior is not None and benchmark in prior.prior_var and prior.prior_q(benchmark, model) > 0:
        prior_q, d_eff = prior.prior_q(benchmark, model), prior.effective_prior_dof(benchmark, model)
        outlier_p = prior_predictive_tail(q_hat / prior_q, f, d_eff)
        if outlier_p < OUTLIER_LEVEL or rows_p < ROWS_OUTLIER_LEVEL:  # an outlier keeps its own variance and dof
            q_post, dof = q_hat, float(f)
        else:
            q_post, dof = prior.moderated_var(benchmark, q_hat, f, model), prior.posterior_dof(benchmark, f, model)
    else:
        q_post, dof, prior_q = q_hat, float(f), None
    tau2 = max(0.0, q_post * scale - v_bar)
    return tau2, dof, {"q_hat": q_hat, "q_moderated": q_post, "prior_q": prior_q, "dof": dof, "f": f,
                       "scale": scale, "row_variance_pooled": v_bar, "prior_outlier_p": outlier_p,
                       "rows_excess_p": rows_p}


def prior_predictive_tail(ratio: float, f: int, d_eff: float) -> float:
    """``P(q / q0 >= ratio)`` under the prior predictive: ``F(f, d_eff)`` (``chi2_f / f`` when ``d_eff`` is
    infinite)."""
    from scipy.stats import chi2, f as fisher

    if math.isinf(d_eff):
        return float(chi2.sf(ratio * f, f))
    return float(fisher.sf(ratio, f, d_eff))


def carried_variance(reproduced_var: float, reproduced_bound: float, canonical_bound: float) -> float:
    """The canonical side's row-level variance when only the reproduction's rows are known: ``V_R`` scaled by the
    ratio of the one-seed bounds at the two means (equal under the null; the canonical bound when the reproduction
    has no spread to scale, e.g. a benchmark scored 0)."""
    if reproduced_bound > 0:
        return reproduced_var * canonical_bound / reproduced_bound
    return canonical_bound


def unit_variance(linear: Linear) -> float | None:
    """``V = sum_u w_u^2 var(y_u)``, the per-unit sample variance over the seeds (None below two seeds)."""
    if linear.values.shape[1] < 2:
        return None
    return float(np.sum(linear.weights**2 * linear.values.var(axis=1, ddof=1)))


def row_variances(linear: Linear, canonical_mean: float, archive: Linear | None = None) -> tuple[float, float, str]:
    """``(V_R, V_C, source)`` of one seed's score: V_R from the reproduced seeds (the one-seed bound below two),
    V_C from the archive's canonical seeds, else V_R carried to the canonical mean (:func:`carried_variance`)."""
    k = linear.values.shape[1]
    v_r = unit_variance(linear)
    bound_r, bound_c = one_seed_bound(linear), one_seed_bound(linear, shift_to=canonical_mean, only_shifted=True)
    source = f"rows over {k} reproduced seeds"
    if v_r is None:
        v_r, source = max(bound_r, bound_c), "binomial bound (one reproduced seed)"
    v_c = unit_variance(archive) if archive is not None else None
    if v_c is not None:
        source += " + the archive's canonical rows"
    elif source.startswith("binomial"):
        v_c = v_r
    else:
        v_c = carried_variance(v_r, bound_r, bound_c)
    return v_r, v_c, source


def one_seed_bound(linear: Linear, shift_to: float | None = None, *, only_shifted: bool = False) -> float:
    """``sum_g (sum w^2) m_g (upper_g - m_g)`` at each group's mean over the seeds (Jensen: the largest variance a
    [0, upper] unit of that mean can have); ``shift_to``: at means shifted so the score equals ``shift_to`` (the
    canonical mean), the larger of both unless ``only_shifted``."""
    y = linear.values.mean(axis=1)
    best = 0.0
    shifts = [] if only_shifted and shift_to is not None else [0.0]
    if shift_to is not None and np.sum(linear.weights) != 0:
        shifts.append((shift_to - (linear.const + linear.weights @ y)) / float(np.sum(linear.weights)))
    for shift in shifts:
        total = 0.0
        for g in np.unique(linear.group):
            units = linear.group == g
            upper = float(linear.upper[units].max())
            m = min(upper, max(0.0, float(y[units].mean()) + shift))
            total += float(np.sum(linear.weights[units] ** 2)) * m * (upper - m)
        best = max(best, total)
    return best


# -- the judgement ----------------------------------------------------------------------------------------------

#: Pre-specified shares of the family-wise budget by test kind (weighted Šidák/Bonferroni: a kind's share is split
#: equally over its tests by Šidák, the kinds add up by the union bound, so P(any "differs") <= alpha). The
#: per-seed slice tests nearly repeat their cell's mean test and get a small share; the mean tests, which carry the
#: per-benchmark power, half. Shares of kinds a plan does not make go to the others in proportion.
ALPHA_SHARES = {"slice": 0.15, "mean": 0.50, "category": 0.05, "overall": 0.05, "claim": 0.25}


@dataclass(frozen=True)
class Rule:
    """Critical values of one campaign: per-test level of each test kind (its share of ``alpha`` over the plan's
    tests of that kind), equivalence level and margin."""

    levels: Mapping[str, float]  # kind -> per-test level
    counts: Mapping[str, int]  # kind -> planned tests
    margin: float = DEFAULT_MARGIN
    alpha: float = DEFAULT_ALPHA
    family_text: str = ""

    @classmethod
    def for_plan(cls, canonical: Canonical, plan: VerdictPlan, *, alpha: float = DEFAULT_ALPHA,
                 margin: float = DEFAULT_MARGIN) -> Rule:
        alpha = check_alpha(alpha)
        counts = {k: n for k, n in plan.family(canonical).items() if n}
        total = sum(ALPHA_SHARES[k] for k in counts) or 1.0
        levels = {k: sidak_level(alpha * ALPHA_SHARES[k] / total, n) for k, n in counts.items()}
        return cls(levels, counts, check_margin(margin), alpha, plan.describe(canonical))

    @property
    def family_size(self) -> int:
        return max(1, sum(self.counts.values()))

    def level(self, kind: str) -> float:
        """The per-test level of a ``kind`` test (a kind the plan does not make: the smallest planned level)."""
        return self.levels.get(kind, min(self.levels.values(), default=self.alpha))

    @property
    def per_test_alpha(self) -> float:
        """The smallest per-test level of the plan (the most demanding)."""
        return min(self.levels.values(), default=self.alpha)

    def quantiles(self, dof: float | None, kind: str = "slice") -> tuple[float, float]:
        """(crit at the kind's per-test level, two-sided; equivalence quantile, one-sided): normal, or t on
        ``dof``."""
        from scipy.stats import norm, t

        a = self.level(kind)
        if dof is not None and math.isfinite(dof) and dof > 0:
            return float(t.isf(a / 2, dof)), float(t.isf(EQUIVALENCE_ALPHA, dof))
        return float(norm.isf(a / 2)), float(norm.isf(EQUIVALENCE_ALPHA))

    def describe(self) -> str:
        shares = ", ".join(f"{k} {self.levels[k]:.3g}" for k in self.levels)
        return (f"alpha={self.alpha:g} family-wise over {self.family_text or f'{self.family_size} tests'}, "
                f"weighted Sidak per-test levels ({shares}); reproduced iff the 90% interval lies inside "
                f"+-{self.margin:g} points")

    def judge(self, test_id: str, kind: str, scored: Scored, *, estimate: float, canonical: float,
              reproduced_weight: float, model_id: str, benchmark_id: str | None, seed: int | None = None) -> Verdict:
        """One test of ``difference = estimate - canonical`` (``estimate`` the reproduced seeds weighted by
        ``reproduced_weight``: 1 for one seed, 1/k for the mean)."""
        from scipy.stats import norm

        dof = scored.dof(reproduced_weight)
        crit, q = self.quantiles(dof, kind)
        se = math.sqrt(scored.variance(reproduced_weight))
        d = estimate - canonical
        band = crit * se
        interval = (d - q * se, d + q * se)
        if abs(interval[0]) <= self.margin and abs(interval[1]) <= self.margin:
            outcome = "reproduced"
        elif abs(d) > band and band < 100.0:
            outcome = "differs"
        else:
            outcome = "inconclusive"
        note = "band exceeds the score range" if band >= 100.0 and outcome != "reproduced" else ""
        excess = scored.excess
        components = {"row_variance": scored.row_variance, "canonical_row_variance": scored.canonical_variance,
                      "seed_excess_variance": scored.tau2, "dof": dof, "crit": crit, "equivalence_q": q,
                      "variance_source": scored.source, "seed_spread": excess.spread,
                      "expected_spread": excess.expected, "seed_excess_p": excess.p_value,
                      **{f"moderation_{k}": v for k, v in (scored.moderation or {}).items()}}
        return Verdict(test_id, kind, outcome, estimate, canonical, d, interval, se, band, self.margin, components,
                       excess.to_dict() if excess.unstable else None, (crit + float(norm.isf(1 - POWER))) * se,
                       model_id, benchmark_id, seed, len(scored.reproduced), self.level(kind), self.family_size,
                       note=note)

    def judge_sign(self, verdict: Verdict, scored: Scored) -> Verdict:
        """Add the sign verdict of a claim: the reproduced mean delta's sign against the canonical one."""
        k = len(scored.reproduced)
        crit, q = self.quantiles(scored.dof(1.0 / k), "claim")
        se = math.sqrt((scored.row_variance + scored.tau2) / k)
        direction = math.copysign(1.0, verdict.canonical) if verdict.canonical else 0.0
        toward = direction * verdict.estimate
        if direction == 0.0:
            outcome = "inconclusive"
        elif toward - q * se > 0:
            outcome = "reproduced"
        elif toward < -crit * se:
            outcome = "differs"
        else:
            outcome = "inconclusive"
        sign = {"outcome": outcome, "canonical_sign": int(direction), "estimate": verdict.estimate, "se": se,
                "lower_bound_toward_canonical": toward - q * se, "opposite_band": crit * se,
                "min_detectable_delta": (float(q) + _z_power()) * se}
        combined = "differs" if "differs" in (verdict.outcome, outcome) else verdict.outcome
        return replace(verdict, outcome=combined, sign=sign)


def _z_power() -> float:
    from scipy.stats import norm

    return float(norm.isf(1 - POWER))


# -- judge a table of credits -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class VerdictSet:
    """Every verdict of a campaign and the rule they were made under."""

    verdicts: tuple[Verdict, ...]
    rule: Rule
    plan: VerdictPlan
    cells: Mapping[tuple[str, str], SeedExcess] = field(default_factory=dict)  # (model, benchmark) excess

    def counts(self) -> dict[str, int]:
        return {o: sum(1 for v in self.verdicts if v.outcome == o) for o in OUTCOMES}

    @property
    def nothing_verified(self) -> bool:
        return not self.verdicts

    @property
    def status(self) -> str:
        """``differs`` if any test differs, ``nothing verified`` without tests, ``inconclusive`` if any is,
        else ``reproduced``."""
        counts = self.counts()
        if counts["differs"]:
            return "differs"
        if not self.verdicts:
            return "nothing verified"
        return "inconclusive" if counts["inconclusive"] else "reproduced"

    def by_id(self) -> dict[str, Verdict]:
        return {v.test_id: v for v in self.verdicts}

    def summary_line(self) -> str:
        c = self.counts()
        return (f"{len(self.verdicts)} test(s): {c['reproduced']} reproduced, {c['differs']} differs, "
                f"{c['inconclusive']} inconclusive; verdict: {self.status}")


def slice_id(model: str, seed: int, benchmark: str) -> str:
    return f"{model}-seed{seed}-{benchmark}"


def cell_linear(cell: Cell, *, source: str | None = None) -> Linear:
    """The cell's scores as a linear function of its rows (its benchmark's aggregate).

    Raises:
        InputError: a per-row field the aggregate needs is missing, or holds what it cannot read (a string or a
            list where a number belongs, a non-finite number); ``source`` (the credits file) is named.
    """
    from trace_lib.benchmarks.registry import get_protocol

    aggregate = get_protocol(cell.benchmark_id).row_aggregate
    missing = [f for f in aggregate.fields if f not in cell.extra]
    if missing:
        raise InputError(f"benchmark {cell.benchmark_id}'s aggregate needs the per-row field {missing[0]!r}",
                         file=source, field=missing[0], hint=f"fields: {', '.join(['credit', *aggregate.fields])}")
    try:
        return aggregate.linearize(cell.credits, cell.extra)
    except (TypeError, ValueError) as exc:
        raise InputError(f"benchmark {cell.benchmark_id}'s per-row fields do not aggregate ({exc})", file=source,
                         field=", ".join(aggregate.fields) or "credit") from None


def judge_credits(credits: CreditTable, release: Any, *, alpha: float = DEFAULT_ALPHA,
                  margin: float = DEFAULT_MARGIN, archive_credits: CreditTable | None = None,
                  plan: Any = None, canonical: Canonical | None = None) -> VerdictSet:
    """Every verdict the credits support: per-seed slices, k-seed means, categories, overall, the claims.

    ``plan`` (a campaign Plan or :class:`VerdictPlan`) fixes the family; without it, the models, seeds and
    benchmarks present in ``credits``. ``archive_credits``: the paper's own per-row canonical credits.

    Raises:
        InputError: an unknown benchmark or model, a row count that is not the suite's, a missing field.
        UsageError: ``alpha`` or ``margin`` out of range.
    """
    canonical = canonical or load_canonical(release)
    suite = canonical.suite
    cells = credits.cells()
    for (model, bench), cell in cells.items():
        if bench not in suite.keys:
            raise InputError(f"unknown benchmark {bench!r}", file=credits.source, field="benchmark_id",
                             hint=f"suite benchmarks: {', '.join(suite.keys)}")
        rows = canonical.rows(bench)
        if len(cell.index) != rows:
            raise InputError(f"{model}/{bench} has {len(cell.index)} rows per seed, the suite has {rows}",
                             file=credits.source, field="index")
    if plan is None:
        present = {m for m, _ in cells}
        plan = VerdictPlan(tuple(sorted(present)), tuple(sorted({int(s) for s in credits.seed})),
                           tuple(b for b in suite.keys if any(b == bb for _, bb in cells)))
    plan = VerdictPlan.of(plan)
    rule = Rule.for_plan(canonical, plan, alpha=alpha, margin=margin)
    archive = archive_credits.cells() if archive_credits is not None else {}
    return _judge_cells(canonical, plan, rule, cells, archive, credits_file=credits.source)


def _judge_cells(canonical: Canonical, plan: VerdictPlan, rule: Rule, cells: Mapping[tuple[str, str], Cell],
                 archive: Mapping[tuple[str, str], Cell], *, credits_file: str | None = None) -> VerdictSet:
    """The verdicts of ``cells`` (read from ``credits_file``, which errors name)."""
    verdicts: list[Verdict] = []
    scored: dict[tuple[str, str], Scored] = {}
    linears: dict[tuple[str, str], Linear] = {}
    judged: dict[tuple[str, str], Cell] = {}
    seeds_wanted = set(plan.seeds)
    for model in plan.models:
        for bench in plan.benchmarks:
            cell = cells.get((model, bench))
            if cell is None:
                continue
            cell = cell.select([s for s in cell.seeds if s in seeds_wanted])
            if not cell.seeds:
                continue
            linear = cell_linear(cell, source=credits_file)
            linears[(model, bench)] = linear
            judged[(model, bench)] = cell
            can_seeds = canonical.benchmarks.get((model, bench))
            if not can_seeds:
                continue  # no canonical score: scored, not judged
            arch = archive.get((model, bench))
            mu = mean(can_seeds)
            v_r, v_c, source = row_variances(linear, mu, cell_linear(arch) if arch is not None else None)
            x = linear.scores()
            can_x = np.array(list(can_seeds.values()))
            rows = canonical.rows(bench)
            tau2, dof, evidence = moderated_excess(x, can_x, v_r, v_c, binomial_scale(float(x.mean()), rows),
                                                   binomial_scale(mu, rows), canonical.seed_prior, bench, model)
            sc = Scored(x, can_x, v_r, v_c, source, tau2, tau2**2 / dof if tau2 > 0 and math.isfinite(dof) else 0.0,
                        cell.seeds, evidence)
            scored[(model, bench)] = sc
            for seed, value in zip(cell.seeds, x):
                verdicts.append(rule.judge(slice_id(model, seed, bench), "slice", sc, estimate=float(value),
                                           canonical=mu, reproduced_weight=1.0, model_id=model,
                                           benchmark_id=bench, seed=seed))
            if len(plan.seeds) > 1:
                verdicts.append(rule.judge(f"{model}-{bench}", "mean", sc, estimate=float(x.mean()), canonical=mu,
                                           reproduced_weight=1.0 / len(x), model_id=model, benchmark_id=bench))
    verdicts += _composites(canonical, plan, rule, scored)
    verdicts += _claims(canonical, plan, rule, linears, scored, archive, judged, credits_file)
    return VerdictSet(tuple(verdicts), rule, plan, {k: v.excess for k, v in scored.items()})


def _composite(members: Sequence[Scored], canonical: Mapping[int, float]) -> Scored | None:
    """The mean of ``members`` (seed-aligned): variances sum over ``G^2``; None when their seeds differ."""
    seeds = members[0].seeds
    if any(m.seeds != seeds for m in members):
        return None
    return combine(members, np.mean([m.reproduced for m in members], axis=0), canonical, seeds,
                   1.0 / len(members) ** 2)


def combine(members: Sequence[Scored], reproduced: np.ndarray, canonical: Mapping[int, float],
            seeds: tuple[int, ...], weight: float, *, row_variance: float | None = None,
            canonical_variance: float | None = None, source: str | None = None) -> Scored:
    """A score that is a sum of ``members`` times ``weight`` each (independent rows; a composite: ``1/G^2``; a
    claim: the two models, ``1``): row-level variances and seed excess add (their own ``row_variance`` etc. when
    given: a claim's paired rows); the combination's own seed spread beyond them is added when its chi-square test
    flags it (p < SEED_EXCESS_LEVEL: a seed moving several benchmarks together), on its own dof."""
    bound = any(m.source.startswith("binomial") for m in members)
    tau2 = weight * sum(m.tau2 for m in members)
    tau4 = weight**2 * sum(m.tau4_per_dof for m in members)
    can = np.array(list(canonical.values()))
    v_r = weight * sum(m.row_variance for m in members) if row_variance is None else row_variance
    v_c = weight * sum(m.canonical_variance for m in members) if canonical_variance is None else canonical_variance
    base = Scored(reproduced, can, v_r, v_c, source or ("binomial bound (one reproduced seed)" if bound else
                                                        "sum of the benchmarks' row-level variances"),
                  tau2, tau4, seeds, {"component_tau2": tau2})
    excess = base.excess
    if excess.unstable and excess.dof:
        own = max(0.0, excess.spread**2 - excess.expected**2)
        return replace(base, tau2=tau2 + own, tau4_per_dof=tau4 + own**2 / excess.dof,
                       moderation={"component_tau2": tau2, "own_tau2": own})
    return base


def _composites(canonical: Canonical, plan: VerdictPlan, rule: Rule,
                scored: Mapping[tuple[str, str], Scored]) -> list[Verdict]:
    out = []
    levels = [(f"category[{c}]", canonical.suite.categories[c], "category") for c in plan.categories(canonical)]
    if plan.full_suite(canonical):
        levels.append(("overall", canonical.suite.keys, "overall"))
    for model in plan.models:
        for label, members, kind in levels:
            cells = [scored.get((model, b)) for b in members]
            can = (canonical.overall.get(model) if kind == "overall"
                   else canonical.categories.get((model, label[9:-1])))
            if any(c is None for c in cells) or not can:
                continue
            comp = _composite(cells, can)  # type: ignore[arg-type]
            if comp is None:
                continue
            out.append(rule.judge(f"{model}-{label}", kind, comp, estimate=float(comp.reproduced.mean()),
                                  canonical=mean(can), reproduced_weight=1.0 / len(comp.reproduced),
                                  model_id=model, benchmark_id=label))
    return out


def _claims(canonical: Canonical, plan: VerdictPlan, rule: Rule, linears: Mapping[tuple[str, str], Linear],
            scored: Mapping[tuple[str, str], Scored], archive: Mapping[tuple[str, str], Cell],
            cells: Mapping[tuple[str, str], Cell], credits_file: str | None) -> list[Verdict]:
    out = []
    for comp in plan.comparisons(canonical):
        per_bench: dict[str, Scored] = {}
        for bench in plan.benchmarks:
            t, b = scored.get((comp.model_id, bench)), scored.get((comp.base_model_id, bench))
            can = comp.benchmarks.get(bench)
            if t is None or b is None or not can or t.seeds != b.seeds:
                continue
            check_paired_rows(cells[(comp.model_id, bench)], cells[(comp.base_model_id, bench)], source=credits_file)
            paired = linears[(comp.model_id, bench)].paired(linears[(comp.base_model_id, bench)])
            arch_t, arch_b = archive.get((comp.model_id, bench)), archive.get((comp.base_model_id, bench))
            v_r = unit_variance(paired)
            source = f"paired rows over {len(t.seeds)} reproduced seeds"
            if v_r is None:
                v_r, source = t.row_variance + b.row_variance, "binomial bound (one reproduced seed)"
            v_c = None
            if (arch_t is not None and arch_b is not None and arch_t.seeds == arch_b.seeds
                    and arch_t.index == arch_b.index):  # the archive's rows pair only where both hold the same
                v_c = unit_variance(cell_linear(arch_t).paired(cell_linear(arch_b)))
            if v_c is None:  # carried to the canonical means like each model's own
                v_c = carried_variance(v_r, t.row_variance + b.row_variance, t.canonical_variance + b.canonical_variance)
            else:
                source += " + the archive's canonical rows"
            s = combine((t, b), paired.scores(), can, t.seeds, 1.0, row_variance=v_r, canonical_variance=v_c,
                        source=source)
            per_bench[bench] = s
            out.append(_claim(rule, f"{comp.comparison_id}-{bench}", s, can, comp, bench))
        levels = [(f"category[{c}]", canonical.suite.categories[c], canonical.category_delta(comp, c))
                  for c in plan.categories(canonical)]
        if plan.full_suite(canonical):
            levels.append(("overall", canonical.suite.keys, comp.overall))
        for label, members, can in levels:
            cells = [per_bench.get(b) for b in members]
            if any(c is None for c in cells) or not can:
                continue
            s = _composite(cells, can)  # type: ignore[arg-type]
            if s is not None:
                out.append(_claim(rule, f"{comp.comparison_id}-{label}", s, can, comp, label))
    return out


def check_paired_rows(model: Cell, base: Cell, *, source: str | None = None) -> None:
    """A claim pairs its two models' rows unit by unit (``d_u[s] = y_T,u[s] - y_B,u[s]``): both cells must hold the
    same dataset rows, and each field of the dataset row their benchmark's aggregate reads (a TableVQA-Bench split, a
    WeMath key or problem id) the same value in both.

    Raises:
        InputError: the first row index or dataset-row field that differs (``source``, the credits file, named).
    """
    why = "(a claim pairs the two models' rows one by one)"
    if model.index != base.index:
        at = next((i for i, (a, b) in enumerate(zip(model.index, base.index)) if a != b), None)
        expected, found = ((model.index[at], base.index[at]) if at is not None
                           else (f"{len(model.index)} rows", f"{len(base.index)} rows"))
        raise InputError(f"{base.model_id} scores other rows than {model.model_id} {why}", file=source,
                         field=f"{base.model_id}/{base.benchmark_id}.index", expected=expected, found=found)
    for spec in row_fields(model.benchmark_id):
        if spec.per_row and spec.name in model.extra and spec.name in base.extra:
            ours, theirs = model.extra[spec.name][:, 0], base.extra[spec.name][:, 0]
            differ = [i for i, (a, b) in enumerate(zip(ours.tolist(), theirs.tolist())) if a != b]
            if differ:
                at = differ[0]
                raise InputError(f"a field of the dataset row differs between {model.model_id} and "
                                 f"{base.model_id} {why}", file=source,
                                 field=f"{base.model_id}/{base.benchmark_id} index {base.index[at]}.{spec.name}",
                                 expected=ours[at], found=theirs[at])


def _claim(rule: Rule, test_id: str, s: Scored, can: Mapping[int, float], comp: Comparison, level: str) -> Verdict:
    verdict = rule.judge(test_id, "claim", s, estimate=float(s.reproduced.mean()), canonical=mean(can),
                         reproduced_weight=1.0 / len(s.reproduced), model_id=comp.model_id,
                         benchmark_id=level)
    return rule.judge_sign(verdict, s)


# -- the planned tests ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PlannedSpec:
    """A planned test: its id, kind and the (model, benchmark) cells whose credits it needs."""

    test_id: str
    kind: str
    cells: tuple[tuple[str, str], ...]


def planned_tests(canonical: Canonical, plan: Any) -> list[PlannedSpec]:
    """Every test the plan makes, in report order (slices, means, categories and overall, claims); the ids are
    those :func:`judge_credits` gives its verdicts (``tests_reproduction`` parametrizes over them)."""
    plan = VerdictPlan.of(plan)
    models = [m for m in plan.models if m in canonical.overall]
    out = []
    for model in models:
        for bench in plan.benchmarks:
            if (model, bench) not in canonical.benchmarks:
                continue
            out += [PlannedSpec(slice_id(model, seed, bench), "slice", ((model, bench),)) for seed in plan.seeds]
            if len(plan.seeds) > 1:
                out.append(PlannedSpec(f"{model}-{bench}", "mean", ((model, bench),)))
    levels = [(f"category[{c}]", canonical.suite.categories[c], "category") for c in plan.categories(canonical)]
    if plan.full_suite(canonical):
        levels.append(("overall", canonical.suite.keys, "overall"))
    for model in models:
        out += [PlannedSpec(f"{model}-{label}", kind, tuple((model, b) for b in members))
                for label, members, kind in levels]
    for comp in plan.comparisons(canonical):
        pair = (comp.model_id, comp.base_model_id)
        out += [PlannedSpec(f"{comp.comparison_id}-{bench}", "claim", tuple((m, bench) for m in pair))
                for bench in plan.benchmarks if bench in comp.benchmarks]
        out += [PlannedSpec(f"{comp.comparison_id}-{label}", "claim", tuple((m, b) for m in pair for b in members))
                for label, members, _ in levels]
    return out


# -- power before any reproduction (plan --print-config) ----------------------------------------------------------

@dataclass(frozen=True)
class PlannedTest:
    """A planned test's predicted SE, band and minimum detectable shift (80% power)."""

    test_id: str
    kind: str
    se: float
    band: float
    mds: float


def predicted_seed_variance(canonical: Canonical, model: str, benchmark: str) -> float:
    """One seed's score variance predicted from the release alone: the cell's canonical seed variance moderated
    by the release prior (``(d_eff q0 + d q) / (d_eff + d)`` on the binomial scale, i.e. row-level plus seed-level
    variance as the release's seeds show it); the binomial bound when no prior can be fitted."""
    seeds = canonical.benchmarks[(model, benchmark)]
    scale = binomial_scale(mean(seeds), canonical.rows(benchmark))
    prior = canonical.seed_prior
    if prior is None or benchmark not in prior.prior_var or len(seeds) < 2:
        return scale
    values = np.array(list(seeds.values()))
    return prior.moderated_var(benchmark, float(values.var(ddof=1)) / scale, len(values) - 1, model) * scale


def planned_power(canonical: Canonical, plan: Any, *, alpha: float = DEFAULT_ALPHA) -> list[PlannedTest]:
    """Each planned test's predicted SE, band and 80%-power minimum detectable shift before any reproduction: one
    seed's variance from :func:`predicted_seed_variance` on both sides, the planned number of seeds, composites and
    claims summing their cells, normal critical values at each kind's per-test level (a seed-unstable cell's
    Student t would widen its band further)."""
    from scipy.stats import norm

    plan = VerdictPlan.of(plan)
    rule = Rule.for_plan(canonical, plan, alpha=alpha)
    k = len(plan.seeds)
    v: dict[tuple[str, str], float] = {}
    out = []

    def add(test_id: str, kind: str, variance: float) -> None:
        se = math.sqrt(variance)
        crit = float(norm.isf(rule.level(kind) / 2))
        out.append(PlannedTest(test_id, kind, se, crit * se, (crit + _z_power()) * se))

    for model in plan.models:
        for bench in plan.benchmarks:
            seeds = canonical.benchmarks.get((model, bench))
            if not seeds:
                continue
            v[(model, bench)] = predicted_seed_variance(canonical, model, bench)
            n = len(seeds)
            for seed in plan.seeds:
                add(slice_id(model, seed, bench), "slice", v[(model, bench)] * (1 + 1 / n))
            if k > 1:
                add(f"{model}-{bench}", "mean", v[(model, bench)] * (1 / k + 1 / n))
    levels = [(f"category[{c}]", canonical.suite.categories[c], "category") for c in plan.categories(canonical)]
    if plan.full_suite(canonical):
        levels.append(("overall", canonical.suite.keys, "overall"))
    for model in plan.models:
        for label, members, kind in levels:
            if all((model, b) in v for b in members):
                add(f"{model}-{label}", kind, sum(v[(model, b)] for b in members) / len(members) ** 2 * (1 / k + 1 / 3))
    for comp in plan.comparisons(canonical):
        for bench in plan.benchmarks:
            if (comp.model_id, bench) in v and (comp.base_model_id, bench) in v:
                add(f"{comp.comparison_id}-{bench}", "claim",
                    (v[(comp.model_id, bench)] + v[(comp.base_model_id, bench)]) * (1 / k + 1 / 3))
        for label, members, _ in levels:
            if all((m, b) in v for m in (comp.model_id, comp.base_model_id) for b in members):
                total = sum(v[(m, b)] for m in (comp.model_id, comp.base_model_id) for b in members)
                add(f"{comp.comparison_id}-{label}", "claim", total / len(members) ** 2 * (1 / k + 1 / 3))
    return out


def release_seed_excess(canonical: Canonical) -> list[tuple[str, str, SeedExcess]]:
    """The release's own cells: canonical seed spread against the binomial bound of one seed's score at the
    canonical mean (``(model, benchmark, excess)``, worst first). Without per-row canonical credits the bound
    stands in for V, so a flag here is a lower bound on the cells with excess."""
    out = []
    for (model, bench), seeds in canonical.benchmarks.items():
        if bench not in canonical.suite.keys:
            continue
        p = min(1.0, max(0.0, mean(seeds) / 100.0))
        bound = 1e4 * p * (1 - p) / canonical.rows(bench)
        out.append((model, bench, seed_excess(np.array([]), np.array(list(seeds.values())), bound)))
    return sorted(out, key=lambda item: item[2].p_value)


def judged_outcomes(verdicts: Iterable[Verdict]) -> dict[str, int]:
    """Outcome counts of ``verdicts`` (every outcome present, 0 when absent)."""
    found = list(verdicts)
    return {o: sum(1 for v in found if v.outcome == o) for o in OUTCOMES}


def sampling_band(canonical: Canonical, rule: Rule, model: str, benchmark: str) -> float | None:
    """The |difference| sampling alone explains between two single-seed runs of one slice, at ``rule``'s per-test
    level: ``crit * sqrt(2 (V + tau^2))`` with V the binomial bound at the canonical mean and tau^2 the release
    prior's seed-level excess for the benchmark (``trace-repro diagnose``); None without a canonical value."""
    seeds = canonical.benchmarks.get((model, benchmark))
    if not seeds or benchmark not in canonical.suite.keys:
        return None
    scale = binomial_scale(mean(seeds), canonical.rows(benchmark))
    prior = canonical.seed_prior
    dof = None
    tau2 = 0.0
    if prior is not None and benchmark in prior.prior_var:
        tau2 = max(0.0, prior.prior_q(benchmark, model) * scale - scale)
        dof = prior.effective_prior_dof(benchmark, model) if tau2 > 0 else None
    crit, _ = rule.quantiles(dof)
    return crit * math.sqrt(2.0 * (scale + tau2))
