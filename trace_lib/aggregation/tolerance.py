"""The reproduction tolerance rule: is a reproduced score an ordinary draw of the canonical seed distribution?

A reproduced score ``x`` (the mean of ``k`` reproduced seeds) passes against the canonical mean ``mu`` of ``n``
seeds iff ``|x - mu| <= sqrt(1/k + 1/n) * max(z_a * SE_bin, t_{nu,a} * s)`` (one seed: ``sqrt(4/3)``), with the
critical values ``z_a``, ``t_{nu,a}`` of the per-test level ``a`` that the campaign's false-alarm budget gives each
test (:mod:`trace_lib.aggregation.budget`, which holds the derivation), or both equal to an explicit
``--tolerance-z`` (the pre-budget rule ``z * sqrt(1/k + 1/n) * max(SE_bin, s_pool)``):

- slice (model, benchmark): ``SE_bin = 100*sqrt(p(1-p)/rows)`` at ``p = mu/100`` with the suite's row count;
  under the budget ``s`` is the cell's moderated seed stddev ``s_mod`` on ``nu = d0 + 2`` dof (an empirical-Bayes
  prior fitted to every cell of the release; :mod:`trace_lib.aggregation.moderation`), under a fixed z (or when
  the release has too few cells for a prior) the benchmark's ``s_pool`` = RMS over the release's models of the
  canonical seed stddev on ``nu = sum(seeds - 1)`` dof;
- category (model, category) and overall (model): the binomial term is ``sqrt(sum SE_bin^2) / count`` over the
  benchmarks averaged; under the budget the seed term is the composite of the benchmarks' moderated stddevs
  (``sqrt(kappa * sum s_mod^2) / count`` on the smallest benchmark dof, ``kappa`` >= 1 the release's covariance
  inflation), under a fixed z the RMS of the canonical category/overall stddevs on ``sum(seeds - 1)`` dof.

Every input (means, stddevs, seed counts, rows, categories) is read from the release at run time.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Mapping

from trace_lib.aggregation.budget import DEFAULT_ALPHA, Criterion, Family, normal_two_sided_quantile, t_two_sided_tail
from trace_lib.aggregation.moderation import VariancePrior, fit_variance_prior
from trace_lib.errors import ReleaseFileError, UsageError
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot
from trace_lib.release.suite import load_suite

#: The pre-budget z (spec §7.3: 576/576 canonical seed scores fall inside at z = 3); now only an explicit override.
DEFAULT_Z = 3.0


#: How a slice's seed stddev is estimated: the cell's moderated variance (default) or the benchmark's pool.
SEED_SD_METHODS = ("moderated", "pooled")


def format_dof(dof: float) -> str:
    """Degrees of freedom for messages and receipts: ``16``, ``5.87``, ``inf``."""
    return "inf" if math.isinf(dof) else f"{dof:.4g}" if dof != int(dof) else str(int(dof))


@dataclass(frozen=True)
class Sigma:
    """The standard deviation a band is built from, with both candidates kept for the message.

    ``seed_pool`` is the seed-spread estimate with ``pool_dof`` degrees of freedom: the benchmark's pooled stddev
    (``method`` "pooled") or the cell's moderated one (``method`` "moderated", with the prior's ``prior_dof``,
    ``prior_sd`` and the cell's own canonical ``cell_sd``; :mod:`trace_lib.aggregation.moderation`).
    """

    binomial: float
    seed_pool: float
    pool_dof: float = 0  # degrees of freedom of the seed-spread estimate (0: none)
    method: str = "pooled"
    prior_dof: float | None = None
    prior_sd: float | None = None
    cell_sd: float | None = None
    effective_prior_dof: float | None = None  # d0 discounted for the estimation of s0 (moderation module)
    covariance_inflation: float | None = None  # composite only: kappa (ToleranceRule.covariance_inflation)

    @property
    def value(self) -> float:
        return max(self.binomial, self.seed_pool)

    @property
    def seed_label(self) -> str:
        return {"moderated": "moderated seed sd", "composite": "composite moderated seed sd"}.get(self.method,
                                                                                                "seed pool")

    @property
    def source(self) -> str:
        return "binomial" if self.binomial >= self.seed_pool else self.seed_label

    def properties(self) -> list[tuple[str, str]]:
        """Receipt properties of the seed-spread estimate (method, per-test dof, prior)."""
        props = [("seed_sd_method", self.method), ("pool_dof", format_dof(self.pool_dof))]
        if self.method == "moderated":
            props += [("prior_dof", format_dof(self.prior_dof)), ("prior_sd", repr(self.prior_sd)),
                      ("effective_prior_dof", format_dof(self.effective_prior_dof)),
                      ("cell_sd", repr(self.cell_sd)), ("moderated_sd", repr(self.seed_pool))]
        elif self.method == "composite":
            props += [("prior_dof", format_dof(self.prior_dof)), ("moderated_sd", repr(self.seed_pool)),
                      ("covariance_inflation", repr(self.covariance_inflation))]
        return props


@dataclass(frozen=True)
class Verdict:
    """A reproduced score judged against its canonical mean: ``ok`` iff ``|delta| <= band`` (and rows match)."""

    subject: str  # slice id (``MODEL-seedSEED-BENCHMARK``), or a category / overall label
    reproduced: float  # percent
    canonical: float  # canonical mean over ``canonical_seeds`` seeds, percent
    delta: float  # reproduced - canonical, percentage points
    band: float  # allowed |delta|, percentage points
    z: float
    factor: float  # sqrt(1/k + 1/n)
    sigma: Sigma
    reproduced_seeds: int = 1
    canonical_seeds: int = 3
    rows: int | None = None  # rows the reproduced score was computed over
    expected_rows: int | None = None  # the suite's row count (slices only)
    criterion: Criterion | None = None  # the budget the band comes from (None: a bare fixed z)
    binomial_z: float | None = None  # critical value applied to SE_bin (None: ``z``)
    pool_t: float | None = None  # critical value applied to the seed pool (None: ``z``)
    engine_note: str = ""  # "engine differs from the paper's (...)" when the responses' engine is not the paper's

    @property
    def rows_ok(self) -> bool:
        return self.rows is None or self.expected_rows is None or self.rows == self.expected_rows

    @property
    def ok(self) -> bool:
        return math.isfinite(self.reproduced) and abs(self.delta) <= self.band and self.rows_ok

    @property
    def standardized(self) -> float:
        """``delta`` in units of ``factor * sigma`` (``ok`` on score iff its magnitude is at most ``z``)."""
        return self.delta / (self.factor * self.sigma.value)

    def band_at(self, per_test_alpha: float) -> float:
        """This verdict's band at another per-test level (e.g. the campaign checks' nominal 95% band)."""
        crit = Criterion.from_alpha(per_test_alpha, 1)
        return self.factor * max(crit.binomial_z() * self.sigma.binomial,
                                 crit.pool_t(self.sigma.pool_dof) * self.sigma.seed_pool)

    @property
    def p_value(self) -> float:
        """Two-sided p-value of ``delta`` valid when either sigma model holds: the larger of the binomial-bound
        (normal) and the seed-term (``t_nu``: pooled or moderated) p-values (the band at level ``a`` excludes
        exactly ``p_value < a``)."""
        if not math.isfinite(self.delta):
            return 0.0
        p_bin = t_two_sided_tail(abs(self.delta) / (self.factor * self.sigma.binomial), math.inf) \
            if self.sigma.binomial > 0 else 0.0
        p_pool = 0.0
        if self.sigma.seed_pool > 0:
            u = abs(self.delta) / (self.factor * self.sigma.seed_pool)
            p_pool = t_two_sided_tail(u, self.sigma.pool_dof or math.inf)
        return max(p_bin, p_pool)

    @property
    def normal_score(self) -> float:
        """``sign(delta) * Phi^-1(1 - p/2)``: ``delta`` as a signed standard-normal score (direction checks)."""
        p = min(1.0, max(self.p_value, 1e-300))
        return math.copysign(normal_two_sided_quantile(p), self.delta) if p < 1.0 else 0.0

    def _rule_text(self) -> str:
        k_n = f"sqrt(1/{self.reproduced_seeds}+1/{self.canonical_seeds})"
        if self.binomial_z is None or self.pool_t is None or self.binomial_z == self.pool_t:
            return (f"z={self.z:g} x {k_n} x sigma {self.sigma.value:.3f} [{self.sigma.source}; binomial "
                    f"{self.sigma.binomial:.3f}, seed pool {self.sigma.seed_pool:.3f}]")
        seed = f"{self.sigma.seed_label} {self.sigma.seed_pool:.3f}"
        if self.sigma.method == "moderated":
            seed += (f" [cell {self.sigma.cell_sd:.3f}, prior {self.sigma.prior_sd:.3f} on "
                     f"{format_dof(self.sigma.effective_prior_dof)} dof]")
        elif self.sigma.method == "composite":
            seed += f" [benchmarks' moderated sds, x sqrt(kappa {self.sigma.covariance_inflation:.3f})]"
        return (f"{k_n} x max(z={self.binomial_z:.3f} x binomial {self.sigma.binomial:.3f}, "
                f"t{format_dof(self.sigma.pool_dof)}={self.pool_t:.3f} x {seed})")

    def explain(self) -> str:
        """One line: reproduced, canonical, delta, allowed band, z, sigma, rows and the outcome."""
        mean_of = f"mean of {self.reproduced_seeds} seeds " if self.reproduced_seeds > 1 else ""
        text = (
            f"{self.subject}: reproduced {mean_of}{self.reproduced:.3f} vs canonical {self.canonical:.3f} "
            f"({self.canonical_seeds}-seed mean): delta {self.delta:+.3f} pp, allowed +/-{self.band:.3f} pp "
            f"({self._rule_text()})"
        )
        if self.criterion is not None and self.criterion.method == "sidak":
            text += (f" [alpha={self.criterion.alpha:g} over {self.criterion.family_size} tests, per-test "
                     f"{self.criterion.per_test_alpha:.2g}]")
        if self.rows is not None:
            text += f", rows {self.rows}"
            if not self.rows_ok:
                text += f" (expected {self.expected_rows})"
        note = f" [{self.engine_note}]" if self.engine_note else ""
        if self.ok:
            return text + ": within tolerance" + note
        if not math.isfinite(self.reproduced):
            return text + ": FAILED (reproduced score is not finite)" + note
        if not self.rows_ok:
            return text + ": FAILED (row count differs from the suite)" + note
        if self.criterion is not None and self.criterion.method == "sidak":
            return text + f": FAILED (p = {self.p_value:.2g} < per-test {self.criterion.per_test_alpha:.2g})" + note
        return text + f": FAILED (|delta| = {abs(self.standardized):.2f} x factor x sigma > z={self.z:g})" + note

    def properties(self) -> list[tuple[str, str]]:
        """JUnit receipt properties of this verdict."""
        props = [
            ("reproduced", repr(self.reproduced)),
            ("canonical_mean", repr(self.canonical)),
            ("delta", repr(self.delta)),
            ("band", repr(self.band)),
            ("z", repr(self.z)),
            ("sigma", repr(self.sigma.value)),
            ("sigma_source", self.sigma.source),
            ("verdict", "ok" if self.ok else "failed"),
        ]
        if self.binomial_z is not None and self.pool_t is not None:
            props += [("critical_binomial_z", repr(self.binomial_z)), ("critical_pool_t", repr(self.pool_t)),
                      *self.sigma.properties(), ("p_value", repr(self.p_value))]
        if self.criterion is not None:
            props += self.criterion.properties()
        if self.rows is not None:
            props.append(("rows", str(self.rows)))
        if self.engine_note:
            props.append(("engine_note", self.engine_note))
        return props

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (reports, ``trace-repro score --json``)."""
        return {
            "subject": self.subject,
            "reproduced": self.reproduced,
            "canonical": self.canonical,
            "delta": self.delta,
            "band": self.band,
            "z": self.z,
            "factor": self.factor,
            "sigma": self.sigma.value,
            "sigma_binomial": self.sigma.binomial,
            "sigma_seed_pool": self.sigma.seed_pool,
            "reproduced_seeds": self.reproduced_seeds,
            "canonical_seeds": self.canonical_seeds,
            "rows": self.rows,
            "expected_rows": self.expected_rows,
            "ok": self.ok,
            "critical_binomial_z": self.binomial_z,
            "critical_pool_t": self.pool_t,
            "pool_dof": _finite_or_none(self.sigma.pool_dof),  # None: infinite (normal critical value)
            "seed_sd_method": self.sigma.method,
            "prior_dof": _finite_or_none(self.sigma.prior_dof),
            "prior_sd": self.sigma.prior_sd,
            "cell_sd": self.sigma.cell_sd,
            "p_value": self.p_value,
            "alpha": self.criterion.alpha if self.criterion else None,
            "family_size": self.criterion.family_size if self.criterion else None,
            "per_test_alpha": self.criterion.per_test_alpha if self.criterion else None,
            "method": self.criterion.method if self.criterion else None,
        }


@dataclass(frozen=True)
class CanonicalSummary:
    """A canonical mean and sample stddev over ``seeds`` seeds (one ``*_summaries`` entry of results.json)."""

    mean: float
    stddev: float
    seeds: int


def binomial_se(mean_percent: float, rows: int) -> float:
    """``100*sqrt(p(1-p)/rows)`` at ``p = mean_percent/100`` (clamped into [0, 1])."""
    p = min(1.0, max(0.0, mean_percent / 100.0))
    return 100.0 * math.sqrt(p * (1.0 - p) / rows)


def _finite_or_none(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _rms(values: list[float]) -> float:
    return math.sqrt(sum(v * v for v in values) / len(values)) if values else 0.0


def budget_verdict(criterion: Criterion, *, subject: str, reproduced: float, canonical: float, factor: float,
                   sigma: Sigma, reproduced_seeds: int = 1, canonical_seeds: int = 3, rows: int | None = None,
                   expected_rows: int | None = None) -> Verdict:
    """A verdict with band ``factor * max(z_a * SE_bin, t_{nu,a} * s_pool)`` under ``criterion``."""
    z_bin, t_pool = criterion.binomial_z(), criterion.pool_t(sigma.pool_dof)
    band = factor * max(z_bin * sigma.binomial, t_pool * sigma.seed_pool)
    effective = band / (factor * sigma.value) if sigma.value > 0 else z_bin
    return Verdict(
        subject=subject, reproduced=float(reproduced), canonical=float(canonical),
        delta=float(reproduced) - float(canonical), band=band, z=effective, factor=factor, sigma=sigma,
        reproduced_seeds=reproduced_seeds, canonical_seeds=canonical_seeds, rows=rows, expected_rows=expected_rows,
        criterion=criterion, binomial_z=z_bin, pool_t=t_pool,
    )


@dataclass(frozen=True)
class ToleranceRule:
    """The tolerance bands of one release (build with :func:`load_tolerance_rule`).

    ``z`` is an explicit fixed critical value (``--tolerance-z``); with ``z=None`` the critical values follow from
    ``criterion`` (the family-wise budget over the planned family; :mod:`trace_lib.aggregation.budget`).
    ``seed_sd`` says how a slice's seed stddev is estimated (:data:`SEED_SD_METHODS`): "moderated" (the budgeted
    default: the cell's empirical-Bayes variance, t on ``d0 + 2`` dof) or "pooled" (the benchmark's pool, t on
    ``sum(seeds - 1)`` dof; the pre-budget ``--tolerance-z`` rule, and the fallback when the release has too few
    cells to fit a prior).
    """

    z: float | None
    rows: Mapping[str, int]  # benchmark -> suite rows
    categories: Mapping[str, tuple[str, ...]]  # category -> benchmarks
    benchmarks: Mapping[tuple[str, str], CanonicalSummary]  # (model_id, benchmark)
    category_summaries: Mapping[tuple[str, str], CanonicalSummary]  # (model_id, category)
    overall_summaries: Mapping[str, CanonicalSummary]  # model_id
    criterion: Criterion | None = None
    seed_sd: str = "pooled"

    def __post_init__(self) -> None:
        if self.seed_sd not in SEED_SD_METHODS:
            raise ValueError(f"seed_sd must be one of {SEED_SD_METHODS}, got {self.seed_sd!r}")
        if self.criterion is None:
            if self.z is None:
                raise ValueError("ToleranceRule needs z or a criterion")
            object.__setattr__(self, "criterion", Criterion.from_z(self.z, 1, dof=self._max_dof()))

    def _max_dof(self) -> float:
        """The slices' seed-spread dof for the implied level of a fixed z (the pooled ``sum(seeds - 1)``, or the
        moderated ``d0 + 2``)."""
        dofs = [self.slice_sigma(m, b).pool_dof for m, b in self.benchmarks if b in self.rows]
        return max(dofs, default=0)

    @property
    def budget(self) -> Criterion:
        assert self.criterion is not None
        return self.criterion

    def family(self, *, models: int | None = None, seeds: int = 3, benchmarks: int | None = None,
               full_suite: bool = True) -> Family:
        """The family of a campaign of ``models`` canonical models (default: all) x ``seeds`` x ``benchmarks``."""
        return Family.for_campaign(
            models=len(self.model_ids) if models is None else models, seeds=seeds,
            benchmarks=len(self.rows) if benchmarks is None else benchmarks,
            categories=len(self.categories), full_suite=full_suite,
        )

    def with_budget(self, *, alpha: float = DEFAULT_ALPHA, z: float | None = None, family: Family | int,
                    seed_sd: str | None = None) -> ToleranceRule:
        """This rule's bands for ``family`` at budget ``alpha`` (or at the fixed ``z``, alpha implied), with slice
        seed stddevs by ``seed_sd`` (default: "moderated" under a budget, "pooled" under a fixed ``z``)."""
        if z is not None:
            rule = replace(self, seed_sd=seed_sd or "pooled")
            return replace(rule, z=float(z), criterion=Criterion.from_z(z, family, dof=rule._max_dof()))
        return replace(self, z=None, criterion=Criterion.from_alpha(alpha, family), seed_sd=seed_sd or "moderated")

    # -- the moderated seed variances --------------------------------------------------------------------------
    @functools.cached_property
    def variance_prior(self) -> VariancePrior | None:
        """The empirical-Bayes prior of the cells' seed variances, one scale per benchmark (None: too few cells)."""
        groups: dict[str, list[tuple[float, float]]] = {}
        for (_, bench), summary in self.benchmarks.items():
            if summary.seeds > 1:
                groups.setdefault(bench, []).append((summary.stddev**2, summary.seeds - 1))
        return fit_variance_prior(groups)

    @functools.cached_property
    def covariance_inflation(self) -> float:
        """``kappa >= 1``: the release's composite seed variances (category and overall stddevs squared, summed over
        every model) over what independent benchmarks would give (``sum_b stddev_b^2 / n^2``, summed likewise);
        > 1 when a seed moves a model's benchmarks together. Composite bands scale their variance by it."""
        composites = [(self.category_summaries.get((m, c)), m, bs) for m in self.model_ids
                      for c, bs in self.categories.items()]
        composites += [(self.overall_summaries.get(m), m, tuple(self.rows)) for m in self.model_ids]
        observed = independent = 0.0
        for summary, model, benchmarks in composites:
            cells = [self.benchmarks.get((model, b)) for b in benchmarks]
            if summary is None or not cells or any(c is None for c in cells):
                continue
            observed += summary.stddev**2
            independent += sum(c.stddev**2 for c in cells) / len(cells) ** 2
        return max(1.0, observed / independent) if independent > 0 else 1.0

    def _composite(self, model_id: str, benchmarks: tuple[str, ...], binomial: float) -> Sigma:
        """The moderated Sigma of a mean over ``benchmarks``: ``s^2 = kappa * sum(s_mod_b^2) / n^2`` on the smallest
        of the benchmarks' dof (Hsu's conservative choice: a positive combination of variance estimates is known at
        least as well as its worst-known part; Welch-Satterthwaite's larger dof ran over the level in
        ``benchmarks/tolerance_power.py``); benchmarks independent given the seed, up to
        :attr:`covariance_inflation`."""
        cells = [self.slice_sigma(model_id, b) for b in benchmarks]
        total = sum(c.seed_pool**2 for c in cells)
        dof = min(c.pool_dof for c in cells)
        kappa = self.covariance_inflation
        return Sigma(binomial, math.sqrt(kappa * total) / len(cells), dof, "composite", cells[0].prior_dof,
                     None, None, None, kappa)

    def _moderated(self, prior: VariancePrior | None, group: str, canonical: CanonicalSummary, binomial: float,
                   pool: float, pool_dof: int) -> Sigma:
        """The moderated Sigma of one cell (the pooled one when not moderated or no prior could be fitted)."""
        if self.seed_sd != "moderated" or prior is None or group not in prior.prior_var or canonical.seeds < 2:
            return Sigma(binomial, pool, pool_dof)
        dof = canonical.seeds - 1
        moderated = math.sqrt(prior.moderated_var(group, canonical.stddev**2, dof))
        return Sigma(binomial, moderated, prior.posterior_dof(group, dof), "moderated", prior.prior_dof,
                     prior.prior_sd(group), canonical.stddev, prior.effective_prior_dof(group))

    def describe_seed_sd(self) -> str:
        """One line: how slice seed stddevs are estimated (``--print-config``, reports)."""
        prior = self.variance_prior if self.seed_sd == "moderated" else None
        return prior.describe() if prior is not None else "pooled seed stddev per benchmark"

    # -- pooled degrees of freedom -----------------------------------------------------------------------------
    def benchmark_pool_dof(self, benchmark: str) -> int:
        return sum(s.seeds - 1 for (_, b), s in self.benchmarks.items() if b == benchmark)

    def category_pool_dof(self, category: str) -> int:
        return sum(s.seeds - 1 for (_, c), s in self.category_summaries.items() if c == category)

    def overall_pool_dof(self) -> int:
        return sum(s.seeds - 1 for s in self.overall_summaries.values())

    # -- pooled seed stddevs -----------------------------------------------------------------------------------
    def seed_pool(self, benchmark: str) -> float:
        """RMS over the release's models of the canonical seed stddev of ``benchmark``."""
        return _rms([s.stddev for (_, b), s in self.benchmarks.items() if b == benchmark])

    def category_pool(self, category: str) -> float:
        return _rms([s.stddev for (_, c), s in self.category_summaries.items() if c == category])

    def overall_pool(self) -> float:
        return _rms([s.stddev for s in self.overall_summaries.values()])

    # -- lookups -----------------------------------------------------------------------------------------------
    @property
    def model_ids(self) -> tuple[str, ...]:
        return tuple(self.overall_summaries)

    def _summary(self, table: Mapping[Any, CanonicalSummary], key: Any, what: str) -> CanonicalSummary:
        try:
            return table[key]
        except KeyError:
            raise UsageError(
                f"no canonical {what} for {key!r} in the release",
                file=identity.RESULTS,
                hint=f"canonical models: {', '.join(self.model_ids)}",
            ) from None

    def _benchmark_rows(self, benchmark: str) -> int:
        if benchmark not in self.rows:
            raise UsageError(f"unknown benchmark {benchmark!r}", file=identity.SUITE, field="benchmarks")
        return self.rows[benchmark]

    # -- sigmas ------------------------------------------------------------------------------------------------
    def slice_sigma(self, model_id: str, benchmark: str) -> Sigma:
        canonical = self._summary(self.benchmarks, (model_id, benchmark), "benchmark summary")
        binomial = binomial_se(canonical.mean, self._benchmark_rows(benchmark))
        prior = self.variance_prior if self.seed_sd == "moderated" else None
        return self._moderated(prior, benchmark, canonical, binomial, self.seed_pool(benchmark),
                               self.benchmark_pool_dof(benchmark))

    def _binomial_of_mean(self, model_id: str, benchmarks: tuple[str, ...]) -> float:
        total = sum(self.slice_sigma(model_id, b).binomial ** 2 for b in benchmarks)
        return math.sqrt(total) / len(benchmarks)

    def category_sigma(self, model_id: str, category: str) -> Sigma:
        if category not in self.categories:
            raise UsageError(f"unknown category {category!r}", file=identity.SUITE, field="categories")
        binomial = self._binomial_of_mean(model_id, self.categories[category])
        if self.seed_sd == "moderated" and self.variance_prior is not None:
            return self._composite(model_id, self.categories[category], binomial)
        return Sigma(binomial, self.category_pool(category), self.category_pool_dof(category))

    def overall_sigma(self, model_id: str) -> Sigma:
        binomial = self._binomial_of_mean(model_id, tuple(self.rows))
        if self.seed_sd == "moderated" and self.variance_prior is not None:
            return self._composite(model_id, tuple(self.rows), binomial)
        return Sigma(binomial, self.overall_pool(), self.overall_pool_dof())

    # -- verdicts ----------------------------------------------------------------------------------------------
    def _verdict(
        self,
        subject: str,
        reproduced: float,
        canonical: CanonicalSummary,
        sigma: Sigma,
        reproduced_seeds: int,
        rows: int | None = None,
        expected_rows: int | None = None,
    ) -> Verdict:
        if reproduced_seeds < 1:
            raise ValueError(f"{subject}: reproduced_seeds must be >= 1, got {reproduced_seeds}")
        factor = math.sqrt(1.0 / reproduced_seeds + 1.0 / canonical.seeds)
        return budget_verdict(
            self.budget, subject=subject, reproduced=reproduced, canonical=canonical.mean, factor=factor,
            sigma=sigma, reproduced_seeds=reproduced_seeds, canonical_seeds=canonical.seeds, rows=rows,
            expected_rows=expected_rows,
        )

    def check_slice(
        self,
        model_id: str,
        benchmark: str,
        reproduced: float,
        *,
        seed: int | None = None,
        rows: int | None = None,
        reproduced_seeds: int = 1,
        subject: str | None = None,
    ) -> Verdict:
        """Judge one reproduced benchmark score of ``model_id`` (one seed, or the mean of ``reproduced_seeds``).

        Raises:
            UsageError: ``model_id`` or ``benchmark`` has no canonical summary in the release.
        """
        canonical = self._summary(self.benchmarks, (model_id, benchmark), "benchmark summary")
        if subject is None:
            subject = f"{model_id}-seed{seed}-{benchmark}" if seed is not None else f"{model_id}-{benchmark}"
        return self._verdict(
            subject,
            reproduced,
            canonical,
            self.slice_sigma(model_id, benchmark),
            reproduced_seeds,
            rows,
            self._benchmark_rows(benchmark),
        )

    def check_category(
        self, model_id: str, category: str, reproduced: float, *, seed: int | None = None, reproduced_seeds: int = 1
    ) -> Verdict:
        """Judge a reproduced category score (mean of the category's benchmarks) of ``model_id``."""
        canonical = self._summary(self.category_summaries, (model_id, category), "category summary")
        where = f"-seed{seed}" if seed is not None else ""
        return self._verdict(
            f"{model_id}{where}-category[{category}]",
            reproduced,
            canonical,
            self.category_sigma(model_id, category),
            reproduced_seeds,
        )

    def check_overall(
        self, model_id: str, reproduced: float, *, seed: int | None = None, reproduced_seeds: int = 1
    ) -> Verdict:
        """Judge a reproduced overall score (unweighted mean of every benchmark) of ``model_id``."""
        canonical = self._summary(self.overall_summaries, model_id, "overall summary")
        where = f"-seed{seed}" if seed is not None else ""
        return self._verdict(
            f"{model_id}{where}-overall", reproduced, canonical, self.overall_sigma(model_id), reproduced_seeds
        )


def _summaries(doc: Any, name: str, key_fields: tuple[str, ...]) -> dict[Any, CanonicalSummary]:
    where = f"scores.{name}"
    try:
        entries = doc["scores"][name]
    except (KeyError, TypeError):
        raise ReleaseFileError("required field is missing", file=identity.RESULTS, field=where) from None
    out: dict[Any, CanonicalSummary] = {}
    for i, entry in enumerate(entries):
        try:
            key = tuple(entry[f] for f in key_fields)
            summary = CanonicalSummary(float(entry["mean"]), float(entry["stddev"]), int(entry["seed_count"]))
        except (KeyError, TypeError, ValueError):
            raise ReleaseFileError(
                "entry lacks a key, mean, stddev or seed_count", file=identity.RESULTS, field=f"{where}[{i}]"
            ) from None
        out[key[0] if len(key) == 1 else key] = summary
    return out


def load_tolerance_rule(
    release: ReleaseRoot,
    *,
    z: float | None = None,
    alpha: float = DEFAULT_ALPHA,
    family: Family | int | None = None,
    seed_sd: str = "moderated",
) -> ToleranceRule:
    """The tolerance rule of ``release`` from ``results.json`` summaries and the suite's rows.

    Critical values follow from the family-wise budget ``alpha`` over ``family`` (default: the release's whole
    campaign, every canonical model x seed x benchmark), or are the explicit ``z`` (alpha then implied, slices on
    the pooled seed stddev: the pre-budget rule). ``seed_sd`` picks the slices' seed-spread estimate under the
    budget (:data:`SEED_SD_METHODS`).

    Raises:
        UsageError: ``z`` is not a positive finite number or ``alpha`` is not in (0, 1).
        ReleaseFileError: a summary entry lacks a field.
    """
    if z is not None and not (isinstance(z, (int, float)) and math.isfinite(z) and z > 0):
        raise UsageError("z must be a positive number", field="--tolerance-z", found=z)
    suite = load_suite(release)
    doc = release.read_json(identity.RESULTS)
    base = ToleranceRule(
        z=DEFAULT_Z,
        rows=MappingProxyType({b.key: b.rows for b in suite.benchmarks}),
        categories=MappingProxyType(dict(suite.categories)),
        benchmarks=MappingProxyType(_summaries(doc, "benchmark_summaries", ("model_id", "benchmark_id"))),
        category_summaries=MappingProxyType(_summaries(doc, "category_summaries", ("model_id", "category_name"))),
        overall_summaries=MappingProxyType(_summaries(doc, "overall_summaries", ("model_id",))),
        seed_sd=seed_sd,
    )
    if family is None:
        family = base.family(seeds=_release_seed_count(base))
    return base.with_budget(alpha=alpha, z=z, family=family, seed_sd=None if z is not None else seed_sd)


def _release_seed_count(rule: ToleranceRule) -> int:
    return max((s.seeds for s in rule.overall_summaries.values()), default=1)


def canonical_seed_verdicts(release: ReleaseRoot, rule: ToleranceRule) -> tuple[list[Verdict], list[Verdict]]:
    """The rule applied to the release's own seed scores (spec §7.3 self-consistency): every canonical benchmark
    score and every canonical overall score against its 3-seed mean. Returns (slice verdicts, overall verdicts)."""
    doc = release.read_json(identity.RESULTS)
    try:
        benchmark_scores = doc["scores"]["benchmark_scores"]
        overall_scores = doc["scores"]["overall_scores"]
        slices = [
            rule.check_slice(e["model_id"], e["benchmark_id"], e["score"], seed=e["seed"], rows=e["evaluated_rows"])
            for e in benchmark_scores
        ]
        overalls = [rule.check_overall(e["model_id"], e["score"], seed=e["seed"]) for e in overall_scores]
    except (KeyError, TypeError):
        raise ReleaseFileError(
            "score entries lack model_id, benchmark_id, seed, score or evaluated_rows", file=identity.RESULTS
        ) from None
    return slices, overalls
