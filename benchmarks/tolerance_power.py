"""False alarms and power of the tolerance rule, simulated from the release's own dispersion.

Each simulated campaign redraws what a real one has: the canonical side (3 seeds per model x benchmark, hence new
canonical means, seed stddevs, pooled stddevs, moderated-variance prior and category/overall summaries) and the
reproduced side (3 seeds), as normal scores around the release's canonical means with a true seed-to-seed sigma
per (model, benchmark) taken from one of five assumptions:

- ``pooled``: sigma = the pooled canonical spread of the benchmark (RMS over the 8 models), common to all models;
- ``binomial``: sigma = the binomial error ``100*sqrt(p(1-p)/rows)`` of the cell;
- ``observed``: sigma = the observed canonical stddev of the cell (3 seeds, 2 dof: the noise of the estimate is
  taken for real heterogeneity, so this overstates how much the cells differ; a pessimistic bound);
- ``eb-prior``: each campaign draws every cell's sigma^2 from the empirical-Bayes prior fitted to the release
  (scaled inverse chi-square, shape d0 common, scale s0^2 per benchmark; trace_lib.aggregation.moderation);
- ``eb-posterior``: each campaign draws every cell's sigma^2 from its posterior given the release's observed
  stddev (scaled inverse chi-square on d0 + 2 dof, scale s_mod^2): the realistic heterogeneous scenario;
- ``eb-post-d0lo``: the same with d0 at the 5% point of its parametric bootstrap (more heterogeneity than fitted).

Every campaign is judged by three rules as trace-repro applies them to a full campaign (576 seed slices, 192
3-seed benchmark means, 24 overalls, 144 category scores): ``old`` = z = 3 per test on the pooled stddev, no
campaign checks; ``pooled`` = the budget (alpha 0.05 Sidak over the 984-test family) with
``max(z_a SE_bin, t16_a s_pool)`` plus the count and direction checks per model-seed (the first budgeted rule);
``moderated`` = the budget with ``max(z_a SE_bin, t_{d_eff+2,a} s_mod)`` (the default now; d0, s0 refitted from
each simulated canonical side, d_eff discounting d0 for s0's estimation; categories and overalls on the composite
of their benchmarks' moderated variances) plus the same checks. The vectorized rules are checked against
``trace_lib.aggregation`` verdict by verdict on the first campaigns before anything is counted.

Printed: (a) faithful campaigns: the fraction that report anything FAILED, with a 95% Clopper-Pearson interval;
(b) injected shifts: the fraction that report anything FAILED when one random (model, benchmark) cell is shifted
by 1, 2, 3 or 5 points, or every benchmark of one random model by 1 point; (c) Cochran's test of the per-cell
spread; (d) the fitted prior and its bootstrap. Needs numpy and scipy (benchmarks only; the product has neither).

    python benchmarks/tolerance_power.py [--campaigns 4000] [--seed 0] [--trace-root DIR] [--power-scenarios ...]
        [--scenarios ...] [--seeds 3]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special, stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trace_lib.aggregation.budget import SCREEN_ALPHA, Criterion, binomial_upper_tail  # noqa: E402
from trace_lib.aggregation.campaign_checks import group_check  # noqa: E402
from trace_lib.aggregation.tolerance import CanonicalSummary, ToleranceRule, load_tolerance_rule  # noqa: E402
from trace_lib.release.locate import locate_release  # noqa: E402

RELEASE_SEEDS = 3  # seeds per cell in the release (its fitted prior rests on RELEASE_SEEDS - 1 dof per cell)
RELEASE_DOF = RELEASE_SEEDS - 1
SEEDS = RELEASE_SEEDS  # canonical and reproduced seeds of a simulated campaign (--seeds: what more seeds buy)


# -- the moderated-variance fit, vectorized over campaigns (checked against trace_lib's in self_check) -------------

def trigamma_inverse(y: np.ndarray) -> np.ndarray:
    """x with trigamma(x) = y (Newton on 1/trigamma, Smyth 2004's iteration); y > 0."""
    x = 0.5 + 1.0 / y
    for _ in range(50):
        tri = special.polygamma(1, x)
        step = tri * (1 - tri / y) / special.polygamma(2, x)
        x = x + step
        if np.all(np.abs(step / x) < 1e-10):
            break
    return x


def fit_prior(sd: np.ndarray, dof: int) -> tuple[np.ndarray, np.ndarray]:
    """d0 (R,) and s0^2 (R, B) from cell stddevs (R, M, B) on ``dof`` each (inf d0: no excess spread)."""
    e = np.log(sd**2) - (special.digamma(dof / 2) - math.log(dof / 2))
    mean = e.mean(axis=1)  # (R, B)
    m, b = sd.shape[1:]
    excess = ((e - mean[:, None]) ** 2).sum(axis=(1, 2)) / (b * (m - 1)) - special.polygamma(1, dof / 2)
    d0 = np.full(excess.shape, np.inf)
    pos = excess > 0
    d0[pos] = 2 * trigamma_inverse(excess[pos])
    shift = np.where(np.isfinite(d0), special.digamma(np.minimum(d0, 1e300) / 2) - np.log(np.minimum(d0, 1e300) / 2),
                     0.0)
    return d0, np.exp(mean + shift[:, None])


def effective_dof(d0: np.ndarray, cells: int, dof: int) -> np.ndarray:
    """d_eff with trigamma(d_eff/2) = trigamma(d0/2) + (trigamma(1) + trigamma(d0/2)) / cells (s0 estimated)."""
    prior_tri = np.where(np.isinf(d0), 0.0, special.polygamma(1, np.minimum(d0, 1e300) / 2))
    return 2 * trigamma_inverse(prior_tri + (special.polygamma(1, dof / 2) + prior_tri) / cells)


def moderated(sd: np.ndarray, dof: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(s_mod (R, M, B), posterior dof (R,), d_eff (R,), s0^2 (R, B)) of cell stddevs on ``dof`` each."""
    d0, s0_sq = fit_prior(sd, dof)
    d0 = effective_dof(d0, sd.shape[1], dof)
    d0c = d0[:, None, None]
    with np.errstate(invalid="ignore"):
        s_mod_sq = np.where(np.isinf(d0c), s0_sq[:, None], (d0c * s0_sq[:, None] + dof * sd**2) / (d0c + dof))
    return np.sqrt(s_mod_sq), d0 + dof, d0, s0_sq


# -- the release ----------------------------------------------------------------------------------------------------

class Release:
    """Canonical means, rows, categories, the fitted prior and the sigma scenarios (model x benchmark)."""

    def __init__(self, rule: ToleranceRule, rng: np.random.Generator) -> None:
        self.rule = rule
        self.models = list(rule.model_ids)
        self.benchmarks = list(rule.rows)
        self.rows = np.array([rule.rows[b] for b in self.benchmarks], dtype=float)
        self.mu = np.array([[rule.benchmarks[(m, b)].mean for b in self.benchmarks] for m in self.models])
        self.cell_sd = np.array([[rule.benchmarks[(m, b)].stddev for b in self.benchmarks] for m in self.models])
        prior = rule.variance_prior
        self.d0 = prior.prior_dof
        self.d_eff = prior.effective_prior_dof(self.benchmarks[0])
        self.s0_sq = np.array([prior.prior_var[b] for b in self.benchmarks])
        self.d0_boot = self.bootstrap_d0(rng)
        self.d0_lo = float(np.quantile(self.d0_boot, 0.05))
        p = np.clip(self.mu / 100, 0, 1)
        self.fixed = {
            "pooled": np.broadcast_to(np.sqrt((self.cell_sd**2).mean(axis=0)), self.mu.shape).copy(),
            "binomial": 100 * np.sqrt(p * (1 - p) / self.rows),
            "observed": self.cell_sd,
        }
        self.categories = {c: [self.benchmarks.index(b) for b in bs] for c, bs in rule.categories.items()}

    def bootstrap_d0(self, rng: np.random.Generator, reps: int = 4000) -> np.ndarray:
        """Parametric bootstrap of d0: cells drawn from the fitted prior, 3 seeds each, prior refitted."""
        sigma_sq = self.d0 * self.s0_sq / rng.chisquare(self.d0, (reps, *self.mu.shape))
        sd = np.sqrt(sigma_sq * rng.chisquare(RELEASE_DOF, sigma_sq.shape) / RELEASE_DOF)
        return fit_prior(sd, RELEASE_DOF)[0]

    def posterior_sq(self, d0: float) -> np.ndarray:
        return (d0 * self.s0_sq + RELEASE_DOF * self.cell_sd**2) / (d0 + RELEASE_DOF)

    def scenario(self, name: str):  # noqa: ANN201 - size, rng -> sigma (R, M, B) or (M, B)
        if name in self.fixed:
            return lambda size, rng: self.fixed[name]
        if name == "eb-prior":
            return lambda size, rng: np.sqrt(self.d0 * self.s0_sq / rng.chisquare(self.d0, (size, *self.mu.shape)))
        d0 = self.d0 if name == "eb-posterior" else self.d0_lo
        scale_sq = self.posterior_sq(d0)
        post = d0 + RELEASE_DOF
        return lambda size, rng: np.sqrt(post * scale_sq / rng.chisquare(post, (size, *self.mu.shape)))


SCENARIOS = ("pooled", "binomial", "observed", "eb-prior", "eb-posterior", "eb-post-d0lo")


# -- one batch of simulated campaigns -----------------------------------------------------------------------------

class Rule:
    """Critical values of one rule: ``old`` (z = 3 everywhere), ``pooled`` or ``moderated`` (the budget)."""

    def __init__(self, name: str, criterion: Criterion, dof: int, checks: bool, moderated: bool = False) -> None:
        self.name, self.checks, self.dof, self.moderated = name, checks, dof, moderated
        self.criterion = criterion
        self.z, self.t = criterion.binomial_z(), criterion.pool_t(dof)
        self.per_test = criterion.per_test_alpha
        self.fixed_z = criterion.fixed_z

    def critical(self, dof: np.ndarray | float, screen: bool = False) -> tuple[float, np.ndarray | float]:
        """(z for SE_bin, t for the seed stddev on ``dof``) at the per-test (or the 95% screening) level."""
        if self.fixed_z is not None and not screen:
            return self.fixed_z, self.fixed_z
        a = SCREEN_ALPHA if screen else self.per_test
        return stats.norm.isf(a / 2), stats.t.isf(a / 2, dof)


def _band(factor: float, z: float, t: np.ndarray | float, se: np.ndarray, s: np.ndarray) -> np.ndarray:
    return factor * np.maximum(z * se, t * s)


def simulate(rel: Release, draw, rules: list[Rule], campaigns: int, rng: np.random.Generator,  # noqa: ANN001
             shift: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """For each rule: a boolean per campaign, True when anything FAILED (``NAME``), and per (campaign, model) when
    anything of that model failed (``NAME:model``) and per (campaign, model, benchmark) when that cell's own slice
    or mean failed (``NAME:cell``). ``draw(size, rng)``: the true sigmas; ``shift``: (campaigns, M, B) points
    added to the reproduced seeds."""
    m, b = rel.mu.shape
    sigma = draw(campaigns, rng)
    sigma = sigma[:, None] if sigma.ndim == 3 else sigma
    canon = rel.mu + sigma * rng.standard_normal((campaigns, SEEDS, m, b))
    repro = rel.mu + sigma * rng.standard_normal((campaigns, SEEDS, m, b))
    if shift is not None:
        repro = repro + shift[:, None]
    return judge(rel, canon, repro, rules)


def judge(rel: Release, canon: np.ndarray, repro: np.ndarray, rules: list[Rule],
          detail: bool = False) -> dict[str, np.ndarray]:
    """Apply each rule to campaigns ``canon``/``repro`` of shape (R, seeds, M, B)."""
    mu_hat = canon.mean(axis=1)  # (R, M, B)
    sd = canon.std(axis=1, ddof=1)
    pool = np.sqrt((sd**2).mean(axis=1, keepdims=True))  # (R, 1, B)
    p = np.clip(mu_hat / 100, 0, 1)
    se = 100 * np.sqrt(p * (1 - p) / rel.rows)  # (R, M, B)
    f1, f3 = math.sqrt(1 + 1 / SEEDS), math.sqrt(1 / SEEDS + 1 / SEEDS)
    delta = repro - mu_hat[:, None]  # (R, S, M, B)
    mean_delta = repro.mean(axis=1) - mu_hat
    groups = {"overall": list(range(rel.mu.shape[1])), **rel.categories}
    agg = []  # (delta per seed (R, S, M), se (R, M), pool (R, 1), canonical sd (R, M))
    for idx in groups.values():
        c_scores = canon[..., idx].mean(axis=-1)  # (R, S, M)
        r_scores = repro[..., idx].mean(axis=-1)
        c_sd = c_scores.std(axis=1, ddof=1)  # (R, M)
        agg.append((r_scores - c_scores.mean(axis=1)[:, None], np.sqrt((se[..., idx] ** 2).sum(-1)) / len(idx),
                    np.sqrt((c_sd**2).mean(axis=1, keepdims=True)), c_sd))
    s_mod, post_dof, _, _ = moderated(sd, SEEDS - 1)
    # moderated aggregates: the composite of the benchmarks' moderated variances, inflated by kappa (the canonical
    # composite variances over what independent benchmarks give, >= 1), on the benchmarks' dof
    observed = sum((a[3] ** 2).sum(axis=1) for a in agg)  # (R,)
    independent = sum(((sd[..., idx] ** 2).sum(axis=-1) / len(idx) ** 2).sum(axis=1) for idx in groups.values())
    kappa = np.maximum(1.0, observed / independent)[:, None]  # (R, 1)
    agg_mod = []
    for idx in groups.values():
        total = (s_mod[..., idx] ** 2).sum(axis=-1)  # (R, M)
        dof = np.broadcast_to(post_dof[:, None], total.shape)  # Hsu: the smallest benchmark dof (all equal here)
        agg_mod.append((np.sqrt(kappa * total) / len(idx), dof))
    out: dict[str, np.ndarray] = {"d0": fit_prior(sd, SEEDS - 1)[0]}
    for rule in rules:
        if rule.moderated:
            s, dof = s_mod, post_dof[:, None, None]  # (R, M, B), (R, 1, 1)
        else:
            s, dof = pool, np.float64(rule.dof)
        z, t = rule.critical(dof)
        cell = (np.abs(delta) > _band(f1, z, t, se, s)[:, None]).any(axis=1)  # (R, M, B)
        cell |= np.abs(mean_delta) > _band(f3, z, t, se, s)
        model = cell.any(axis=-1)  # (R, M)
        for k, (d, a_se, a_pool, _) in enumerate(agg):
            if rule.moderated:
                z_agg, t_agg = rule.critical(agg_mod[k][1])
                a_s = agg_mod[k][0]
            else:
                (z_agg, t_agg), a_s = rule.critical(rule.dof), a_pool
            band = _band(f1, z_agg, t_agg, a_se, a_s)  # (R, M)
            model |= (np.abs(d) > band[:, None]).any(axis=1)
            if detail and k < 2:
                out[rule.name + (":overall_band" if k == 0 else ":category_band")] = band
        if rule.checks:
            # per model-seed count check: slices outside their 95% band vs Binomial(B, 0.05)
            z_s, t_s = rule.critical(dof, screen=True)
            outside = (np.abs(delta) > _band(f1, z_s, t_s, se, s)[:, None]).sum(axis=-1)
            b = delta.shape[-1]
            k_crit = next(k for k in range(b + 2) if binomial_upper_tail(k, b, SCREEN_ALPHA) < rule.per_test)
            model |= (outside >= k_crit).any(axis=1)
            # per model-seed direction check: Stouffer of signed normal scores of p = max(p_bin, p_seed)
            p_seed = 2 * stats.t.sf(np.abs(delta) / (f1 * s[:, None]), dof[..., None] if np.ndim(dof) else dof)
            with np.errstate(divide="ignore"):  # SE_bin = 0 at a 0% or 100% mean: p_bin = 0, as in trace_lib
                p_bin = 2 * stats.norm.sf(np.abs(delta) / (f1 * se[:, None]))
            u = np.sign(delta) * stats.norm.isf(np.maximum(p_seed, p_bin) / 2)
            stouffer = u.sum(axis=-1) / math.sqrt(b)
            model |= (np.abs(stouffer) > stats.norm.isf(rule.per_test / 2)).any(axis=1)
            if detail:
                out[rule.name + ":stouffer"] = stouffer
                out[rule.name + ":outside"] = outside
                out[rule.name + ":band"] = _band(f1, z, t, se, s)
        out[rule.name] = model.any(axis=-1)
        out[rule.name + ":model"] = model
        out[rule.name + ":cell"] = cell
    return out


def self_check(rel: Release, rules: list[Rule], rng: np.random.Generator, campaigns: int = 2) -> None:
    """The vectorized budgeted rules must give trace_lib's verdicts on simulated campaigns (prior fit, slice bands,
    count and direction checks, overall bands)."""
    canon = rel.mu + rel.cell_sd * rng.standard_normal((campaigns, SEEDS, *rel.mu.shape))
    repro = canon[:, ::-1] + 0.8 * rel.cell_sd * rng.standard_normal(canon.shape)
    budgeted = [r for r in rules if r.checks]
    got = judge(rel, canon, repro, budgeted, detail=True)
    for r in range(campaigns):
        summaries = {}
        for i, model in enumerate(rel.models):
            for j, bench in enumerate(rel.benchmarks):
                col = canon[r, :, i, j]
                summaries[(model, bench)] = CanonicalSummary(col.mean(), col.std(ddof=1), SEEDS)
        overall, categories = {}, {}
        for i, model in enumerate(rel.models):
            scores = canon[r, :, i, :].mean(axis=-1)
            overall[model] = CanonicalSummary(scores.mean(), scores.std(ddof=1), SEEDS)
            for category, idx in rel.categories.items():
                scores = canon[r][:, i][:, idx].mean(axis=-1)
                categories[(model, category)] = CanonicalSummary(scores.mean(), scores.std(ddof=1), SEEDS)
        for new in budgeted:
            rule = ToleranceRule(z=None, rows=rel.rule.rows, categories=rel.rule.categories, benchmarks=summaries,
                                 category_summaries=categories, overall_summaries=overall,
                                 criterion=new.criterion, seed_sd="moderated" if new.moderated else "pooled")
            if new.moderated:
                assert math.isclose(rule.variance_prior.prior_dof, got["d0"][r], rel_tol=1e-6)
            for i, model in enumerate(rel.models):
                for s in range(SEEDS):
                    verdicts = [rule.check_slice(model, bench, repro[r, s, i, j])
                                for j, bench in enumerate(rel.benchmarks)]
                    check = group_check(model, s, verdicts, rule.budget.per_test_alpha)
                    assert math.isclose(check.stouffer, got[new.name + ":stouffer"][r, s, i], rel_tol=1e-6,
                                        abs_tol=1e-6), (check.stouffer, got[new.name + ":stouffer"][r, s, i])
                    assert check.outside_screen == got[new.name + ":outside"][r, s, i]
                    for j in (0, 7, 23):
                        assert math.isclose(verdicts[j].band, got[new.name + ":band"][r, i, j], rel_tol=1e-6)
                    ov = rule.check_overall(model, repro[r, s, i].mean())
                    assert math.isclose(ov.band, got[new.name + ":overall_band"][r, i], rel_tol=1e-6)
                    category = next(iter(rel.categories))
                    cat = rule.check_category(model, category, repro[r, s, i, rel.categories[category]].mean())
                    assert cat.sigma.method == ("composite" if new.moderated else "pooled")
                    assert math.isclose(cat.band, got[new.name + ":category_band"][r, i], rel_tol=1e-6), \
                        (new.name, cat.explain(), got[new.name + ":category_band"][r, i])


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval by bisection on the binomial tails (no scipy)."""
    a = (1 - level) / 2

    def solve(target, tail):  # noqa: ANN001, ANN202
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            if tail(mid) < target:
                lo, hi = (mid, hi) if tail is upper else (lo, mid)
            else:
                lo, hi = (lo, mid) if tail is upper else (mid, hi)
        return (lo + hi) / 2

    def upper(p):  # noqa: ANN001, ANN202 - P(X >= k)
        return binomial_upper_tail(k, n, p)

    def lower(p):  # noqa: ANN001, ANN202 - P(X <= k)
        return 1 - binomial_upper_tail(k + 1, n, p)

    lo = 0.0 if k == 0 else solve(a, upper)
    hi = 1.0 if k == n else solve(a, lower)
    return lo, hi


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--campaigns", type=int, default=4000, help="simulated campaigns per row (default 4000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace-root", default=os.environ.get("TRACE_ROOT"))
    parser.add_argument("--power-scenarios", default="pooled,observed,eb-posterior",
                        help="comma-separated scenarios for the power table (default: pooled,observed,eb-posterior)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help="comma-separated scenarios for the faithful table (default: all)")
    parser.add_argument("--seeds", type=int, default=RELEASE_SEEDS,
                        help="canonical and reproduced seeds per simulated cell (default 3, the release's): what "
                             "more seeds buy, the true sigmas still drawn from the release")
    args = parser.parse_args(argv)
    global SEEDS
    SEEDS = args.seeds
    release = locate_release(args.trace_root)
    rule = load_tolerance_rule(release)  # the default budget over the release's full campaign (984 tests)
    rng = np.random.default_rng(args.seed)
    rel = Release(rule, rng)
    budget = Criterion.from_alpha(rule.budget.alpha, rule.family(seeds=SEEDS))
    dof = len(rel.models) * (SEEDS - 1)
    rules = [Rule("old", Criterion.from_z(3.0, budget.family_size, dof=dof), dof, checks=False),
             Rule("pooled", budget, dof, checks=True),
             Rule("moderated", budget, dof, checks=True, moderated=True)]
    self_check(rel, rules, rng)
    n, batch = args.campaigns, 500
    print(f"tolerance_power: {n} simulated full campaigns per row, {SEEDS} canonical and {SEEDS} reproduced seeds; "
          f"old = z 3 per test (pooled sd), pooled = {budget.describe()} with t{dof} on s_pool, moderated = the "
          f"same budget with t(d_eff+{SEEDS - 1}) on s_mod; z_a = {rules[1].z:.3f}, t{dof}_a = {rules[1].t:.3f}; "
          f"the release's prior: d0 {rel.d0:.2f}, d_eff {rel.d_eff:.2f}, "
          f"t(d_eff+2)_a = {rule.budget.pool_t(rel.d_eff + RELEASE_DOF):.3f} at the release's per-test level")
    names = [r.name for r in rules]

    def rate(draw, make_shift=None) -> dict[str, int]:  # noqa: ANN001
        """Campaigns failing anything (``NAME``) and, with a shift, failing the shifted cell or model itself
        (``NAME:own``: the shifted cell's slice/mean tests, or for a whole-model shift any test of that model)."""
        counts = {k: 0 for r in names for k in (r, r + ":own")}
        done = 0
        while done < n:
            size = min(batch, n - done)
            shift = make_shift(size) if make_shift else None
            res = simulate(rel, draw, rules, size, rng, shift)
            for r in names:
                counts[r] += int(res[r].sum())
                if shift is not None:
                    shifted = shift != 0
                    whole_model = shifted.all(axis=-1)  # (R, M)
                    own_cell = (res[r + ":cell"] & shifted).any(axis=(1, 2))
                    own_model = (res[r + ":model"] & whole_model).any(axis=1)
                    counts[r + ":own"] += int(np.where(whole_model.any(axis=1), own_model, own_cell).sum())
            done += size
        return counts

    def fmt(k: int) -> str:
        lo, hi = clopper_pearson(k, n)
        return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}]"

    m, b = rel.mu.shape
    start = time.perf_counter()
    print(f"\n(a) faithful campaigns: fraction reporting anything FAILED (95% CI); target for the budget <= "
          f"{rule.budget.alpha:g}")
    print(f"| {'true sigma':<12} | {'old (z=3)':<20} | {f'pooled (t{dof})':<20} | {'moderated':<20} |")
    print(f"|{'-' * 14}|{'-' * 22}|{'-' * 22}|{'-' * 22}|")
    for name in args.scenarios.split(","):
        res = rate(rel.scenario(name))
        print(f"| {name:<12} | " + " | ".join(f"{fmt(res[r]):<20}" for r in names) + " |")

    def one_cell(points: float):  # noqa: ANN202
        def make(size: int) -> np.ndarray:
            shift = np.zeros((size, m, b))
            shift[np.arange(size), rng.integers(0, m, size), rng.integers(0, b, size)] = points
            return shift
        return make

    def one_model(size: int) -> np.ndarray:
        shift = np.zeros((size, m, b))
        shift[np.arange(size), rng.integers(0, m, size), :] = 1.0
        return shift

    print("\n(b) injected shifts (one random cell, or every benchmark of one random model): fraction of campaigns "
          "reporting anything FAILED, and in parentheses the fraction where the shifted cell's own slice/mean tests "
          "(whole-model shift: that model's tests) fail")
    print(f"| {'true sigma':<12} | {'shift':<28} | {'old: any (own)':<16} | {'pooled: any (own)':<17} | "
          f"{'moderated: any (own)':<20} |")
    print(f"|{'-' * 14}|{'-' * 30}|{'-' * 18}|{'-' * 19}|{'-' * 22}|")
    cases = [(f"{p:g} pt on one benchmark", one_cell(p)) for p in (1, 2, 3, 5)]
    cases.append(("1 pt on every bench, 1 model", one_model))
    for name in args.power_scenarios.split(","):
        for label, make in cases:
            res = rate(rel.scenario(name), make)
            cols = [f"{res[r] / n:.3f} ({res[r + ':own'] / n:.3f})" for r in names]
            print(f"| {name:<12} | {label:<28} | {cols[0]:<16} | {cols[1]:<17} | {cols[2]:<20} |")

    print("\n(c) is the per-cell spread real? Cochran's C (largest model variance / sum over the 8 models) per "
          "benchmark, p-value under equal variances (simulated); benchmarks with p < 0.05:")
    sd = rel.cell_sd
    observed = ((sd**2) / (sd**2).sum(axis=0)).max(axis=0)
    sims = rng.standard_normal((20000, RELEASE_SEEDS, m, b)).std(axis=1, ddof=1) ** 2
    simulated = (sims / sims.sum(axis=1, keepdims=True)).max(axis=1)  # (sims, B)
    pvals = (simulated >= observed).mean(axis=0)
    for j in np.argsort(pvals):
        if pvals[j] < 0.05:
            i = int(np.argmax(sd[:, j]))
            print(f"  {rel.benchmarks[j]:<16} C = {observed[j]:.2f}, p = {pvals[j]:.4f} (largest: {rel.models[i]}, "
                  f"stddev {sd[i, j]:.2f} vs pooled {rel.fixed['pooled'][0, j]:.2f})")
    print(f"  max over the 24 benchmarks: p = {(simulated.max(axis=1) >= observed.max()).mean():.4f}")

    boot = rel.d0_boot
    print(f"\n(d) empirical-Bayes prior of the cell variances: d0 = {rel.d0:.2f} (parametric bootstrap, "
          f"{boot.size} reps: median {np.median(boot):.2f}, 5%-95% {rel.d0_lo:.2f}-{np.quantile(boot, 0.95):.2f}, "
          f"inf in {np.isinf(boot).mean():.1%}); per benchmark s0 vs s_pool (mean prior variance "
          f"s0^2 d0/(d0-2) when d0 > 2):")
    s_pool = rel.fixed["pooled"][0]
    ratio = np.array([[rule.slice_sigma(mo, be).seed_pool for be in rel.benchmarks] for mo in rel.models]) / s_pool
    print(f"  s0/s_pool median {np.median(np.sqrt(rel.s0_sq) / s_pool):.2f}; s_mod/s_pool over the 192 cells: "
          f"median {np.median(ratio):.2f}, min {ratio.min():.2f}, max {ratio.max():.2f}")
    bands = np.array([[rule.check_slice(mo, be, 0.0).band for be in rel.benchmarks] for mo in rel.models])
    pooled_rule = load_tolerance_rule(release, seed_sd="pooled")
    old = np.array([[pooled_rule.check_slice(mo, be, 0.0).band for be in rel.benchmarks] for mo in rel.models])
    print(f"  one-seed slice band, moderated / pooled: median {np.median(bands / old):.2f}, "
          f"min {np.min(bands / old):.2f}, max {np.max(bands / old):.2f}; median band {np.median(bands):.2f} pp "
          f"(pooled {np.median(old):.2f} pp)")
    print(f"\n[{time.perf_counter() - start:.0f} s; vectorized rules checked against trace_lib verdicts first]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
