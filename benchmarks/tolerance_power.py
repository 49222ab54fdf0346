"""False alarms and power of the tolerance rule, simulated from the release's own dispersion.

Each simulated campaign redraws what a real one has: the canonical side (3 seeds per model x benchmark, hence new
canonical means, seed stddevs, pooled stddevs and category/overall summaries) and the reproduced side (3 seeds), as
normal scores around the release's canonical means with a true seed-to-seed sigma per (model, benchmark) taken
from one of three assumptions:

- ``pooled``: sigma = the pooled canonical spread of the benchmark (RMS over the 8 models), common to all models;
- ``binomial``: sigma = the binomial error ``100*sqrt(p(1-p)/rows)`` of the cell;
- ``per-cell``: sigma = the observed canonical stddev of the cell (3 seeds; heterogeneous, up to 6.7x binomial:
  a pessimistic case, since the 2-dof estimates overstate how much the cells really differ).

Every campaign is judged by both rules as trace-repro applies them to a full campaign (576 seed slices, 192
3-seed benchmark means, 24 overalls, 144 category scores): ``old`` = z = 3 per test, no campaign checks;
``new`` = the default budget (alpha 0.05 Sidak over the 984-test family, ``max(z_a SE_bin, t16_a s_pool)``) plus
the count and direction checks per model-seed. The vectorized rule here is checked against
``trace_lib.aggregation`` verdict by verdict on the first campaigns before anything is counted.

Printed: (a) faithful campaigns: the fraction that report anything FAILED, with a 95% Clopper-Pearson interval;
(b) injected shifts: the fraction that report anything FAILED when one random (model, benchmark) cell is shifted
by 1, 2, 3 or 5 points, or every benchmark of one random model by 1 point; old and new side by side.

    python benchmarks/tolerance_power.py [--campaigns 4000] [--seed 0] [--trace-root DIR]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trace_lib.aggregation.budget import SCREEN_ALPHA, Criterion, binomial_upper_tail  # noqa: E402
from trace_lib.aggregation.campaign_checks import group_check  # noqa: E402
from trace_lib.aggregation.tolerance import CanonicalSummary, ToleranceRule, load_tolerance_rule  # noqa: E402
from trace_lib.release.locate import locate_release  # noqa: E402

SEEDS = 3  # canonical and reproduced


# -- vectorized distribution functions (checked against trace_lib's scalar ones in self_check) -----------------------

def t_tail(x: np.ndarray, dof: int) -> np.ndarray:
    """P(|T_dof| > x), A&S 26.7.3-4, vectorized (even and odd dof)."""
    theta = np.arctan(np.abs(x) / math.sqrt(dof))
    s, c = np.sin(theta), np.cos(theta)
    if dof % 2 == 0:
        term, total = np.ones_like(c), np.ones_like(c)
        for j in range(1, dof // 2):
            term = term * (2 * j - 1) / (2 * j) * c * c
            total = total + term
        inside = s * total
    else:
        term, total = c.copy(), c.copy()
        for j in range(1, (dof - 1) // 2):
            term = term * (2 * j) / (2 * j + 1) * c * c
            total = total + term
        inside = 2 / math.pi * (theta + s * total) if dof > 1 else 2 * theta / math.pi
    return np.clip(1.0 - inside, 0.0, 1.0)


def normal_upper_quantile(q: np.ndarray) -> np.ndarray:
    """x with P(Z > x) = q for q in (0, 0.5] (Acklam's rational approximation, relative error < 1.2e-9)."""
    a = [-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
         -3.066479806614716e01, 2.506628277459239e00]
    b = [-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
         -1.328068155288572e01]
    c = [-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549732539343734e00,
         4.374664141464968e00, 2.938163982698783e00]
    d = [7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00]
    p = np.clip(q, 1e-300, 0.5)
    out = np.empty_like(p)
    low = p < 0.02425
    r = np.sqrt(-2 * np.log(p[low]))
    out[low] = -(((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) / \
        ((((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1)
    mid = ~low
    u = p[mid] - 0.5
    r2 = u * u
    out[mid] = -(((((a[0] * r2 + a[1]) * r2 + a[2]) * r2 + a[3]) * r2 + a[4]) * r2 + a[5]) * u / \
        (((((b[0] * r2 + b[1]) * r2 + b[2]) * r2 + b[3]) * r2 + b[4]) * r2 + 1)
    return out


# -- the release ----------------------------------------------------------------------------------------------------

class Release:
    """Canonical means, rows, categories and the three sigma assumptions, as arrays (model x benchmark)."""

    def __init__(self, rule: ToleranceRule) -> None:
        self.rule = rule
        self.models = list(rule.model_ids)
        self.benchmarks = list(rule.rows)
        self.rows = np.array([rule.rows[b] for b in self.benchmarks], dtype=float)
        self.mu = np.array([[rule.benchmarks[(m, b)].mean for b in self.benchmarks] for m in self.models])
        cell_sd = np.array([[rule.benchmarks[(m, b)].stddev for b in self.benchmarks] for m in self.models])
        p = np.clip(self.mu / 100, 0, 1)
        self.sigmas = {
            "pooled": np.broadcast_to(np.sqrt((cell_sd**2).mean(axis=0)), self.mu.shape).copy(),
            "binomial": 100 * np.sqrt(p * (1 - p) / self.rows),
            "per-cell": cell_sd,
        }
        self.categories = {c: [self.benchmarks.index(b) for b in bs] for c, bs in rule.categories.items()}


# -- one batch of simulated campaigns -----------------------------------------------------------------------------

class Rule:
    """Critical values of one rule: ``old`` (z = 3 everywhere) or ``new`` (the default budget)."""

    def __init__(self, name: str, criterion: Criterion, dof: int, checks: bool) -> None:
        self.name, self.checks, self.dof = name, checks, dof
        self.z, self.t = criterion.binomial_z(), criterion.pool_t(dof)
        self.per_test = criterion.per_test_alpha
        screen = Criterion.from_alpha(SCREEN_ALPHA, 1)
        self.z_screen, self.t_screen = screen.binomial_z(), screen.pool_t(dof)


def _band(rule: Rule, factor: float, se: np.ndarray, pool: np.ndarray, screen: bool = False) -> np.ndarray:
    z, t = (rule.z_screen, rule.t_screen) if screen else (rule.z, rule.t)
    return factor * np.maximum(z * se, t * pool)


def simulate(rel: Release, sigma: np.ndarray, rules: list[Rule], campaigns: int, rng: np.random.Generator,
             shift: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """For each rule: a boolean per campaign, True when anything FAILED (``NAME``), and per (campaign, model) when
    anything of that model failed (``NAME:model``) and per (campaign, model, benchmark) when that cell's own slice
    or mean failed (``NAME:cell``). ``shift``: (campaigns, M, B) points added to the reproduced seeds."""
    m, b = rel.mu.shape
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
    agg = []  # (delta per seed (R, S, M), se (R, M), pool (R, 1))
    for idx in groups.values():
        c_scores = canon[..., idx].mean(axis=-1)  # (R, S, M)
        r_scores = repro[..., idx].mean(axis=-1)
        c_sd = c_scores.std(axis=1, ddof=1)  # (R, M)
        agg.append((r_scores - c_scores.mean(axis=1)[:, None], np.sqrt((se[..., idx] ** 2).sum(-1)) / len(idx),
                    np.sqrt((c_sd**2).mean(axis=1, keepdims=True))))
    out: dict[str, np.ndarray] = {}
    for rule in rules:
        cell = (np.abs(delta) > _band(rule, f1, se, pool)[:, None]).any(axis=1)  # (R, M, B)
        cell |= np.abs(mean_delta) > _band(rule, f3, se, pool)
        model = cell.any(axis=-1)  # (R, M)
        for d, a_se, a_pool in agg:
            model |= (np.abs(d) > _band(rule, f1, a_se, a_pool)[:, None]).any(axis=1)
        if rule.checks:
            # per model-seed count check: slices outside their 95% band vs Binomial(B, 0.05)
            outside = (np.abs(delta) > _band(rule, f1, se, pool, screen=True)[:, None]).sum(axis=-1)
            b = delta.shape[-1]
            k_crit = next(k for k in range(b + 2) if binomial_upper_tail(k, b, SCREEN_ALPHA) < rule.per_test)
            model |= (outside >= k_crit).any(axis=1)
            # per model-seed direction check: Stouffer of signed normal scores u = min(u_bin, u_pool)
            x_pool = np.abs(delta) / (f1 * pool[:, None])
            u_pool = normal_upper_quantile(t_tail(x_pool, rule.dof) / 2)
            u_bin = np.abs(delta) / (f1 * se[:, None])
            u = np.sign(delta) * np.minimum(u_bin, u_pool)
            stouffer = u.sum(axis=-1) / math.sqrt(b)
            model |= (np.abs(stouffer) > normal_upper_quantile(np.array([rule.per_test / 2]))[0]).any(axis=1)
            if detail:
                out[rule.name + ":stouffer"] = stouffer
                out[rule.name + ":outside"] = outside
        out[rule.name] = model.any(axis=-1)
        out[rule.name + ":model"] = model
        out[rule.name + ":cell"] = cell
    return out


def self_check(rel: Release, rules: list[Rule], rng: np.random.Generator, campaigns: int = 3) -> None:
    """The vectorized ``new`` rule must give trace_lib's verdicts on simulated campaigns (slices, overalls, checks)."""
    new = next(r for r in rules if r.checks)
    canon = rel.mu + rel.sigmas["per-cell"] * rng.standard_normal((campaigns, SEEDS, *rel.mu.shape))
    repro = canon[:, ::-1] + 0.8 * rel.sigmas["per-cell"] * rng.standard_normal(canon.shape)
    got = judge(rel, canon, repro, [new], detail=True)
    for r in range(campaigns):
        summaries = {}
        for i, model in enumerate(rel.models):
            for j, bench in enumerate(rel.benchmarks):
                col = canon[r, :, i, j]
                summaries[(model, bench)] = CanonicalSummary(col.mean(), col.std(ddof=1), SEEDS)
        overall = {}
        for i, model in enumerate(rel.models):
            scores = canon[r, :, i, :].mean(axis=-1)
            overall[model] = CanonicalSummary(scores.mean(), scores.std(ddof=1), SEEDS)
        rule = ToleranceRule(z=None, rows=rel.rule.rows, categories=rel.rule.categories, benchmarks=summaries,
                             category_summaries=rel.rule.category_summaries, overall_summaries=overall,
                             criterion=rel.rule.budget)
        for i, model in enumerate(rel.models):
            for s in range(SEEDS):
                verdicts = [rule.check_slice(model, bench, repro[r, s, i, j]) for j, bench in enumerate(rel.benchmarks)]
                check = group_check(model, s, verdicts, rule.budget.per_test_alpha)
                assert math.isclose(check.stouffer, got["new:stouffer"][r, s, i], rel_tol=1e-6, abs_tol=1e-6), \
                    (check.stouffer, got["new:stouffer"][r, s, i])
                assert check.outside_screen == got["new:outside"][r, s, i]
                band = _band(new, math.sqrt(4 / 3), *_sigma_arrays(canon[r:r + 1], rel))[0, i, 0]
                assert math.isclose(verdicts[0].band, band, rel_tol=1e-9)
                ov = rule.check_overall(model, repro[r, s, i].mean())
                assert math.isclose(ov.band, _overall_band(new, canon[r], rel, i), rel_tol=1e-9)


def _sigma_arrays(canon: np.ndarray, rel: Release) -> tuple[np.ndarray, np.ndarray]:
    mu_hat, sd = canon.mean(axis=1), canon.std(axis=1, ddof=1)
    p = np.clip(mu_hat / 100, 0, 1)
    return 100 * np.sqrt(p * (1 - p) / rel.rows), np.sqrt((sd**2).mean(axis=1, keepdims=True))


def _overall_band(rule: Rule, canon_one: np.ndarray, rel: Release, i: int) -> float:
    se, _ = _sigma_arrays(canon_one[None], rel)
    scores = canon_one.mean(axis=-1)  # (S, M)
    pool = math.sqrt((scores.std(axis=0, ddof=1) ** 2).mean())
    binom = math.sqrt((se[0, i] ** 2).sum()) / se.shape[-1]
    return math.sqrt(4 / 3) * max(rule.z * binom, rule.t * pool)


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
    args = parser.parse_args(argv)
    release = locate_release(args.trace_root)
    rule = load_tolerance_rule(release)  # the default budget over the release's full campaign (984 tests)
    rel = Release(rule)
    dof = rule.benchmark_pool_dof(rel.benchmarks[0])
    rules = [Rule("old", Criterion.from_z(3.0, rule.budget.family_size, dof=dof), dof, checks=False),
             Rule("new", rule.budget, dof, checks=True)]
    rng = np.random.default_rng(args.seed)
    self_check(rel, rules, rng)
    n, batch = args.campaigns, 500
    print(f"tolerance_power: {n} simulated full campaigns per row; old = z 3 per test, new = "
          f"{rule.budget.describe()}; z_a = {rules[1].z:.3f}, t16_a = {rules[1].t:.3f}")

    def rate(sigma: np.ndarray, make_shift=None) -> dict[str, tuple[int, int]]:  # noqa: ANN001
        """Campaigns failing anything (``NAME``) and, with a shift, failing the shifted cell or model itself
        (``NAME:own``: the shifted cell's slice/mean tests, or for a whole-model shift any test of that model)."""
        counts = {k: 0 for r in rules for k in (r.name, r.name + ":own")}
        done = 0
        while done < n:
            size = min(batch, n - done)
            shift = make_shift(size) if make_shift else None
            res = simulate(rel, sigma, rules, size, rng, shift)
            for r in rules:
                counts[r.name] += int(res[r.name].sum())
                if shift is not None:
                    shifted = shift != 0
                    whole_model = shifted.all(axis=-1)  # (R, M)
                    own_cell = (res[r.name + ":cell"] & shifted).any(axis=(1, 2))
                    own_model = (res[r.name + ":model"] & whole_model).any(axis=1)
                    counts[r.name + ":own"] += int(np.where(whole_model.any(axis=1), own_model, own_cell).sum())
            done += size
        return {k: (v, n) for k, v in counts.items()}

    def fmt(k: int, total: int) -> str:
        lo, hi = clopper_pearson(k, total)
        return f"{k / total:6.3f} [{lo:.3f}, {hi:.3f}]"

    m, b = rel.mu.shape
    start = time.perf_counter()
    print("\n(a) faithful campaigns: fraction reporting anything FAILED (95% CI); target for new <= 0.05")
    print(f"{'true sigma':<10} | {'old (z=3)':<22} | {'new (alpha 0.05)':<22}")
    for name, sigma in rel.sigmas.items():
        res = rate(sigma)
        print(f"{name:<10} | {fmt(*res['old']):<22} | {fmt(*res['new']):<22}")

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
    print(f"{'true sigma':<10} | {'shift':<33} | {'old (z=3): any (own)':<22} | {'new (alpha 0.05): any (own)':<22}")
    cases = [(f"{p:g} pt on one benchmark", one_cell(p)) for p in (1, 2, 3, 5)]
    cases.append(("1 pt on every benchmark, 1 model", one_model))
    for name in ("pooled", "binomial", "per-cell"):
        for label, make in cases:
            res = rate(rel.sigmas[name], make)
            cols = [f"{res[r][0] / n:5.3f} ({res[r + ':own'][0] / n:5.3f})" for r in ("old", "new")]
            print(f"{name:<10} | {label:<33} | {cols[0]:<22} | {cols[1]:<22}")
    print("\n(c) is the per-cell spread real? Cochran's C (largest model variance / sum over the 8 models) per "
          "benchmark, p-value under equal variances (simulated); benchmarks with p < 0.05:")
    sd = rel.sigmas["per-cell"]
    observed = ((sd**2) / (sd**2).sum(axis=0)).max(axis=0)
    sims = rng.standard_normal((20000, SEEDS, m, b)).std(axis=1, ddof=1) ** 2
    simulated = (sims / sims.sum(axis=1, keepdims=True)).max(axis=1)  # (sims, B)
    pvals = (simulated >= observed).mean(axis=0)
    for j in np.argsort(pvals):
        if pvals[j] < 0.05:
            i = int(np.argmax(sd[:, j]))
            print(f"  {rel.benchmarks[j]:<16} C = {observed[j]:.2f}, p = {pvals[j]:.4f} (largest: {rel.models[i]}, "
                  f"stddev {sd[i, j]:.2f} vs pooled {rel.sigmas['pooled'][0, j]:.2f})")
    print(f"  max over the 24 benchmarks: p = {(simulated.max(axis=1) >= observed.max()).mean():.4f}")
    print(f"\n[{time.perf_counter() - start:.0f} s; vectorized rule checked against trace_lib verdicts first]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
