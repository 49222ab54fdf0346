"""False alarms and power of the three-outcome verdict, simulated at the row level from the release.

Simulation model (docs/tolerance.md, "Power and false alarms (simulation)"):

- Every cell (model x benchmark) is rows with per-row success probabilities p_i, binned (benchmarks/_rowsim.py):
  p_i follow a Beta around the release's canonical mean whose dispersion makes the rows' binomial variance
  ``rho_b`` times the plain binomial one; ``rho_b`` per benchmark is the release's pooled seed variance over the
  binomial variance of its non-overdispersed cells (8 models x 2 dof each).
  ``--truth per-model``: ``rho_b r_m`` per cell instead (alternating pooled ratios over the non-overdispersed
  cells, ``r_m`` of geometric mean 1, clipped to [2/BINS, 1]: per-row Beta spreads cannot exceed the binomial
  variance), so the models' differences in seed spread the release shows are in the truth.
- Cells whose release seed spread exceeds that (chi-square test on 2 dof, p < 0.01) get a seed-level component:
  every pass draws one logit shift N(0, eta^2) for all its rows, eta fitted so the seed-level variance is the
  release's excess (s^2 - row variance). Scenario ``all-excess`` gives every cell its observed excess (pessimistic).
- Aggregates: a mean of binary credits; tablevqabench the macro mean of its five split values (fintabnetqa's two
  values make a {0, 0.5, 1} credit); wemath the mean over its 525 composite problems of a {0, 0.5, 1} credit
  (Score (Strict) = mean of all_steps_right * (1 + multi_right) / 2); chartqapro binary (its partial credits are
  rare list answers). A credit in {0, 0.5, 1} is modelled as two Bernoulli(p_i) halves.
- Each campaign redraws the canonical side (3 seeds: only its slice scores are used, as without --archive-root)
  and the reproduced side (k seeds, per-row patterns exact), then applies the verdict rule vectorised
  (``judge``), checked against trace_lib's own verdicts on expanded campaigns (``--check``).

    PYTHONPATH=$PWD python3 benchmarks/tolerance_power.py [--campaigns 4000] [--power-campaigns 1000] [--check 4]
        [--seeds 3] [--scenario fitted|rows-only|all-excess] [--outlier-level 0.1] [--rows-outlier-level 0.05]
        [--truth per-benchmark|per-model] [--prior one-way|two-way] [--skip-power]

Printed: the fitted truth; the check against trace_lib; (a) P(any test "differs") on faithful campaigns for the full
plan and every --benchmark / --model-id plan (Clopper-Pearson); (b) outcome shares by margin 1, 2, 3, 5; (c) minimum
detectable shifts and bands over the score range; (d) the claims' MDD and P(sign reproduced); (e) a benchmark
zeroed and a 5-point shift per cell; (f) a 2-point shift of one model; (g) the seed-unstable cells zeroed with more
seeds or the archive.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy import special, stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _rowsim as rs  # noqa: E402

from trace_lib.aggregation.verdict import ALPHA_SHARES  # noqa: E402
from trace_lib.aggregation.verdict import OUTLIER_LEVEL as TRACE_OUTLIER_LEVEL  # noqa: E402
from trace_lib.aggregation.verdict import ROWS_OUTLIER_LEVEL as TRACE_ROWS_OUTLIER_LEVEL  # noqa: E402
from trace_lib.aggregation import moderation  # noqa: E402
from trace_lib.aggregation.moderation import TWO_WAY_PRIOR as TRACE_TWO_WAY_PRIOR  # noqa: E402
from trace_lib.release import identity  # noqa: E402
from trace_lib.release.locate import locate_release  # noqa: E402

CANONICAL_SEEDS = 3
UNSTABLE_P = 0.01  # seed-unstable when P(chi2_f >= Q) < UNSTABLE_P (truth classification and the rule)
EQ_ALPHA = 0.05  # one-sided level of each half of the equivalence (TOST) interval
POWER_Z = stats.norm.isf(0.2)
#: A cell whose seed variance is an outlier under the prior's predictive (q_hat / q0 ~ F(f, d_eff), upper tail <
#: OUTLIER_LEVEL) keeps its own estimate on f dof, unmoderated (trace_lib's robust EB since 21:49; 0: the rule
#: before it). Set by --outlier-level.
OUTLIER_LEVEL = 0.1
#: Nor is a cell whose seeds vary more than its own rows allow (the seed-excess chi-square test, p below this;
#: trace_lib's ROWS_OUTLIER_LEVEL; 0: the rule before it). Set by --rows-outlier-level.
ROWS_OUTLIER_LEVEL = 0.05
#: The Satterthwaite term of a cell's estimated excess: "excess" (tau^4 / dof: trace_lib's), "total" ((tau^2 +
#: V)^2 / dof: the estimated total's variance), "mixed" (tau^2 (tau^2 + V) / dof) or "truncated" (the moderated
#: posterior of the total truncated at the row-level variance, matched by its precision's two moments:
#: :func:`truncated_posterior`); candidates. --satterthwaite.
SATTERTHWAITE = "excess"

# Row structure of the benchmarks whose score is not a plain mean of binary row credits (facts: the benchmark
# modules, trace_lib/linear_aggregate.py): per unit group (units, share of the score, parts, y_scale). A unit's
# credit c is in {0, 1/parts, ..., 1}; trace_lib's linearisation holds it as y = y_scale * c in [0, y_scale].
STRUCTURE = {
    # TableVQABench: mean of 5 split values (vwtq, vwtq_syn, vtabfact, fintabnetqa relieved + exact): the
    # fintabnetqa row's y = relieved + exact in {0, 1, 2}, modelled as two Bernoulli halves
    "tablevqabench": ((750, 1 / 5, 1, 1.0), (250, 1 / 5, 1, 1.0), (250, 1 / 5, 1, 1.0), (250, 2 / 5, 2, 2.0)),
    # WeMath Score (Strict): the mean over the 525 composite problems of 1 - g, g = 0.5 [IG] + [RM] + [IK]
    "wemath": ((525, 1.0, 2, 1.0),),
}


# -- the release --------------------------------------------------------------------------------------------------

@dataclass
class Layout:
    models: list[str]
    benchmarks: list[str]
    rows: dict[str, int]
    categories: dict[str, list[int]]  # category -> benchmark indices
    seed_scores: np.ndarray  # (M, B, 3) the release's canonical per-seed scores
    claims: list[tuple[int, int]]  # (model index, base index)
    claim_ids: list[str]
    claim_overall: np.ndarray  # (6,) the release's overall deltas
    claim_benchmark: np.ndarray  # (6, B) the release's per-benchmark deltas


def load_layout(trace_root: str | None) -> Layout:
    release = locate_release(trace_root)
    suite = release.read_json(identity.SUITE)
    results = release.read_json(identity.RESULTS)
    benchmarks = [b["key"] for b in suite["benchmarks"]]
    models = [m["model_id"] for m in results["models"]]
    seeds = list(results["seeds"])
    scores = np.full((len(models), len(benchmarks), len(seeds)), np.nan)
    for e in results["scores"]["benchmark_scores"]:
        scores[models.index(e["model_id"]), benchmarks.index(e["benchmark_id"]), seeds.index(e["seed"])] = e["score"]
    assert not np.isnan(scores).any(), "results.json lacks a per-seed benchmark score"
    cats = {c: [benchmarks.index(b) for b in bs] for c, bs in suite["categories"].items()}
    claims, ids, overall, per_bench = [], [], [], []
    for c in results["comparisons"]:
        claims.append((models.index(c["model_id"]), models.index(c["base_model_id"])))
        ids.append(f"{c['model_id']}-vs-{c['base_model_id']}")
        overall.append(c["overall_delta"]["mean"])
        d = {x["benchmark_id"]: x["mean"] for x in c["benchmark_deltas"]}
        per_bench.append([d[b] for b in benchmarks])
    return Layout(models, benchmarks, {b["key"]: b["rows"] for b in suite["benchmarks"]}, cats, scores, claims, ids,
                  np.array(overall), np.array(per_bench))


def unit_groups(bench: str, rows: int) -> tuple[tuple[int, float, int, float], ...]:
    """(units, psi points per credit, parts, y_scale) of each unit group of ``bench``."""
    spec = STRUCTURE.get(bench, ((rows, 1.0, 1, 1.0),))
    return tuple((n, 100 * share / n, parts, scale) for n, share, parts, scale in spec)


def binomial_variance(bench: str, rows: int, pbar: float) -> float:
    return sum(psi**2 * n * pbar * (1 - pbar) / parts for n, psi, parts, _ in unit_groups(bench, rows))


@dataclass
class Truth:
    """The fitted cells (M x B) and what the fit found."""

    cells: list[list[rs.Cell]]
    rho: np.ndarray  # (M, B) row variance / binomial variance (per benchmark, or rho_b r_m: --truth per-model)
    release_unstable: np.ndarray  # (M, B) bool: the release's cell has a seed-level excess (truth)
    release_p: np.ndarray  # (M, B) p-value of the release's excess test against the fitted row variance
    target_row: np.ndarray  # (M, B) row variance of one seed's score (points^2)
    target_tau: np.ndarray  # (M, B) seed-level variance (points^2)


def fit_rho(s2: np.ndarray, vbin: np.ndarray, keep: np.ndarray, per_model: bool) -> np.ndarray:
    """(M, B) row variance / binomial variance: ``rho_b`` (pooled s^2 over pooled binomial variance of the kept
    cells of each benchmark), or with ``per_model`` the two-way ``rho_b r_m`` (alternating pooled ratios over the
    kept cells, ``r_m`` of geometric mean 1); clipped to what binned per-row Beta spreads give, [2/BINS, 1]."""
    m, b = s2.shape
    r = np.ones(m)
    for _ in range(50 if per_model else 1):
        rho = np.array([s2[keep[:, j], j].sum() / (r[keep[:, j]] * vbin[keep[:, j], j]).sum() for j in range(b)])
        if not per_model:
            break
        new = np.array([s2[i, keep[i]].sum() / (rho[keep[i]] * vbin[i, keep[i]]).sum() for i in range(m)])
        new = new / np.exp(np.log(new).mean())
        if np.allclose(new, r, rtol=1e-10):
            break
        r = new
    return np.clip(rho[None, :] * r[:, None], 2.0 / rs.BINS, 1.0)


def fit_truth(lay: Layout, scenario: str = "fitted", per_model: bool = False) -> Truth:
    """Per-row probabilities and seed shifts for every cell from the release's per-seed scores (module doc);
    ``per_model``: row variance ratio ``rho_b r_m`` per cell (``--truth per-model``) instead of ``rho_b``."""
    m, b = lay.seed_scores.shape[:2]
    mean = lay.seed_scores.mean(-1)
    s2 = lay.seed_scores.var(-1, ddof=1)
    vbin = np.array([[binomial_variance(lay.benchmarks[j], lay.rows[lay.benchmarks[j]], mean[i, j] / 100)
                      for j in range(b)] for i in range(m)])
    flagged = np.zeros((m, b), bool)
    for _ in range(20):
        rho = fit_rho(s2, vbin, ~flagged, per_model)
        q = (CANONICAL_SEEDS - 1) * s2 / (rho * vbin)
        p = stats.chi2.sf(q, CANONICAL_SEEDS - 1)
        new = p < UNSTABLE_P
        if (new == flagged).all():
            break
        flagged = new
    row = rho * vbin
    if scenario == "fitted":
        tau = np.where(flagged, np.maximum(s2 - row, 0), 0.0)
    elif scenario == "all-excess":
        tau = np.maximum(s2 - row, 0)
    elif scenario == "rows-only":
        tau = np.zeros_like(s2)
    else:
        raise SystemExit(f"tolerance_power: unknown scenario {scenario!r}")
    cells = []
    for i in range(m):
        line = []
        for j, bench in enumerate(lay.benchmarks):
            groups = tuple(rs.fit_group(mean[i, j] / 100, n, psi, parts, rho[i, j])
                           for n, psi, parts, _ in unit_groups(bench, lay.rows[bench]))
            cell = rs.Cell(groups, meta={"model": lay.models[i], "benchmark": bench})
            line.append(replace(cell, eta=rs.fit_eta(cell, tau[i, j])))
        cells.append(line)
    return Truth(cells, rho, flagged, p, np.array([[c.row_variance() for c in line] for line in cells]), tau)


# -- campaigns ----------------------------------------------------------------------------------------------------

GROUPS_MAX = max(len(v) for v in STRUCTURE.values())


@dataclass
class Campaigns:
    """Sufficient statistics of R simulated campaigns: everything the verdict rule reads."""

    canon: np.ndarray  # (R, M, B, 3) canonical slice scores
    repro: np.ndarray  # (R, M, B, k) reproduced slice scores
    row_var: np.ndarray  # (R, M, B) V_R: sum_u w_u^2 s_u^2 over the reproduced seeds
    group_mean: np.ndarray  # (R, M, B, G) mean unit value y per unit group over units and reproduced seeds
    pair_var: np.ndarray  # (R, 6, B) paired unit variance of each claim's benchmark (model minus base)
    canon_row_var: np.ndarray | None = None  # (R, M, B) V_C from the canonical rows (the archive)

    def copy(self) -> Campaigns:
        return Campaigns(*(None if x is None else x.copy() for x in (
            self.canon, self.repro, self.row_var, self.group_mean, self.pair_var, self.canon_row_var)))


class Simulator:
    """Draws campaigns; keeps the base models' pattern counts of the last batch so a claim's model can be
    redrawn on the same rows (the paired variance needs the joint patterns)."""

    def __init__(self, lay: Layout, truth: Truth, seeds: int, rng: np.random.Generator, archive: bool = False,
                 paired: bool = True, canonical: str = "drawn"):
        self.lay, self.truth, self.seeds, self.rng, self.archive = lay, truth, seeds, rng, archive
        self.canonical = canonical  # "release": the release's own seed scores (module doc, --canonical)
        self.paired = paired  # False: claims' paired variance = V_T + V_B (its expectation; for k > 3 seeds)
        self.bases = sorted({b for _, b in lay.claims})
        self.base_counts: dict[tuple[int, int], list[np.ndarray]] = {}

    def _u(self, cell: rs.Cell, size: int, seeds: int) -> np.ndarray:
        return cell.eta * self.rng.standard_normal((size, seeds)) if cell.eta > 0 else np.zeros((size, seeds))

    def _canonical(self, out: Campaigns, i: int, j: int) -> None:
        cell = self.truth.cells[i][j]
        size = out.canon.shape[0]
        u = self._u(cell, size, CANONICAL_SEEDS)
        out.canon[:, i, j] = 0
        if self.archive:
            out.canon_row_var[:, i, j] = 0
        for g in cell.groups:
            p = rs.seed_probs(g, u)
            if self.archive:
                d = rs.draw_patterns(self.rng, g, p)
                out.canon[:, i, j] += d.scores
                out.canon_row_var[:, i, j] += d.row_var / self._scale2(j, g)
            else:
                out.canon[:, i, j] += rs.draw_scores(self.rng, g, p)
        if self.canonical == "release":
            # the release's seeds as they are; their mean's error about the truth drawn from its posterior
            # (flat prior: N(0, (V + tau^2) / 3)), one offset for the three seeds, so their spread is the release's
            sd = math.sqrt((self.truth.target_row[i, j] + self.truth.target_tau[i, j]) / CANONICAL_SEEDS)
            out.canon[:, i, j] = self.lay.seed_scores[i, j] + sd * self.rng.standard_normal((size, 1))

    def _scale2(self, j: int, g: rs.Group) -> float:
        return 1.0  # psi^2 var(c) = w^2 var(y): the variance sums are unit-free

    def _reproduced(self, out: Campaigns, i: int, j: int, shift=None, given: list | None = None):  # noqa: ANN001
        """Draw cell (i, j)'s reproduced side; ``given``: the base's counts per group (then returns the paired
        variance), else returns the counts per group."""
        cell = self.truth.cells[i][j]
        size, seeds = out.repro.shape[0], out.repro.shape[-1]
        u = self._u(cell, size, seeds)
        out.repro[:, i, j] = 0
        out.row_var[:, i, j] = 0
        out.group_mean[:, i, j] = 0
        kept, paired = [], np.zeros(size)
        scales = [sc for *_, sc in unit_groups(self.lay.benchmarks[j], self.lay.rows[self.lay.benchmarks[j]])]
        for gi, g in enumerate(cell.groups):
            p = rs.seed_probs(g, u, shift)
            if given is None:
                counts = rs.draw_counts(self.rng, g, p)
                kept.append(counts)
            else:
                joint = rs.draw_given(self.rng, given[gi], p, g.parts)
                counts = joint.sum(-2)
                paired += rs.paired_variance(g, joint, seeds)
            d = rs.reduce(g, counts, seeds)
            out.repro[:, i, j] += d.scores
            out.row_var[:, i, j] += d.row_var
            out.group_mean[:, i, j, gi] = scales[gi] * d.credit / (g.rows * seeds)
        return kept if given is None else paired

    def _bench(self, out: Campaigns, j: int, shifts: dict[int, object]) -> None:
        """Reproduced side of benchmark j for every model (bases first, claim models on the bases' rows)."""
        if not self.paired:
            for i in range(len(self.lay.models)):
                if i in shifts or not shifts:
                    self._reproduced(out, i, j, shifts.get(i))
            for c, (t, b) in enumerate(self.lay.claims):
                out.pair_var[:, c, j] = out.row_var[:, t, j] + out.row_var[:, b, j]
            return
        for base in self.bases:
            self.base_counts[(base, j)] = self._reproduced(out, base, j, shifts.get(base))
        for c, (t, b) in enumerate(self.lay.claims):
            out.pair_var[:, c, j] = self._reproduced(out, t, j, shifts.get(t), self.base_counts[(b, j)])

    def campaigns(self, size: int) -> Campaigns:
        m, b = len(self.lay.models), len(self.lay.benchmarks)
        out = Campaigns(np.zeros((size, m, b, CANONICAL_SEEDS)), np.zeros((size, m, b, self.seeds)),
                        np.zeros((size, m, b)), np.zeros((size, m, b, GROUPS_MAX)),
                        np.zeros((size, len(self.lay.claims), b)), np.zeros((size, m, b)) if self.archive else None)
        for i in range(m):
            for j in range(b):
                self._canonical(out, i, j)
        for j in range(b):
            self._bench(out, j, {})
        return out

    def shifted(self, camp: Campaigns, cells: list[tuple[int, int]], points: float,
                direction: str = "away") -> Campaigns:
        """A copy of the last batch with ``cells``' reproduced scores moved by ``points`` (module doc: thinning;
        ``direction`` as :func:`thinning`). A claim's model is redrawn on its base's kept rows; a base is redrawn
        with every model paired to it."""
        out = camp.copy()
        by_bench: dict[int, dict[int, object]] = {}
        for i, j in cells:
            by_bench.setdefault(j, {})[i] = thinning(self.truth.cells[i][j], points, direction)
        for j, shifts in by_bench.items():
            if not self.paired:
                self._bench(out, j, shifts)
                continue
            if any(i in self.bases for i in shifts):
                saved = {key: v for key, v in self.base_counts.items() if key[1] == j}
                self._bench(out, j, shifts)
                self.base_counts.update(saved)  # the next scenario starts from the faithful batch again
                continue
            for i, fn in shifts.items():
                for c, (t, b) in enumerate(self.lay.claims):
                    if t == i:
                        out.pair_var[:, c, j] = self._reproduced(out, t, j, fn, self.base_counts[(b, j)])
        return out


def thinning(cell: rs.Cell, points: float, direction: str = "away"):  # noqa: ANN201
    """p -> p' moving the expected score by ``points``: each row loses (gains) the same share of its success
    (failure) probability. ``direction``: ``away`` (down when the score is >= 50, else up: away from the nearer
    end of the range, the one-cell shifts), ``down`` (a uniformly worse model; up only where the score is below
    ``points``)."""
    score = float(cell.expected_score())
    if (score >= 50) if direction == "away" else (score >= points):
        d = points / score
        return lambda p: p * (1 - d)
    d = points / (100 - score)
    return lambda p: 1 - (1 - p) * (1 - d)


def zeroed(camp: Campaigns, lay: Layout, i: int, j: int) -> Campaigns:
    """A copy with cell (i, j)'s reproduced rows all 0 (a broken benchmark)."""
    out = camp.copy()
    out.repro[:, i, j] = 0
    out.row_var[:, i, j] = 0
    out.group_mean[:, i, j] = 0
    for c, (t, b) in enumerate(lay.claims):  # var(0 - c_B) = V_B; var(c_T - 0) = V_T
        if t == i:
            out.pair_var[:, c, j] = camp.row_var[:, b, j]
        elif b == i:
            out.pair_var[:, c, j] = camp.row_var[:, t, j]
    return out


# -- the verdict rule, vectorised (trace_lib.aggregation.verdict; checked by --check) ------------------------------

def _jensen(lay: Layout, j: int, means: np.ndarray) -> np.ndarray:
    """sum_g (sum_u w^2) m_g (upper_g - m_g) at group means ``means`` (..., G)."""
    total = 0.0
    bench = lay.benchmarks[j]
    for gi, (n, psi, _parts, scale) in enumerate(unit_groups(bench, lay.rows[bench])):
        w = psi / scale
        m = np.clip(means[..., gi], 0.0, scale)
        total = total + n * w**2 * m * (scale - m)
    return total


def _carried(lay: Layout, camp: Campaigns, mu_c: np.ndarray) -> np.ndarray:
    """V_C without the archive: V_R * B(mu_C) / B(mu_R), B(mu_C) where B(mu_R) = 0 (trace_lib's carried_variance)."""
    v_c = np.zeros_like(camp.row_var)
    score_r = camp.repro.mean(-1)
    for j, bench in enumerate(lay.benchmarks):
        groups = unit_groups(bench, lay.rows[bench])
        g = len(groups)
        means = camp.group_mean[:, :, j, :g]
        sum_w = sum(n * psi / scale for n, psi, _, scale in groups)
        shift = (mu_c[:, :, j] - score_r[:, :, j]) / sum_w
        b_r = _jensen(lay, j, means)
        b_c = _jensen(lay, j, means + shift[..., None])
        with np.errstate(divide="ignore", invalid="ignore"):
            v_c[:, :, j] = np.where(b_r > 0, camp.row_var[:, :, j] * b_c / np.where(b_r > 0, b_r, 1.0), b_c)
    return v_c


def binomial_scale(mean_percent: np.ndarray, rows: int) -> np.ndarray:
    """``100^2 p (1 - p) / n`` at ``p = mean / 100`` kept half a row from 0 and 1 (trace_lib's binomial_scale)."""
    p = np.clip(mean_percent / 100.0, 0.5 / rows, 1.0 - 0.5 / rows)
    return 1e4 * p * (1.0 - p) / rows


def _offset(dof: np.ndarray | float) -> np.ndarray:
    """``E[log(chi2_d / d)] = digamma(d/2) - log(d/2)``."""
    return special.digamma(np.asarray(dof, float) / 2) - np.log(np.asarray(dof, float) / 2)


def trigamma_inverse(y: np.ndarray) -> np.ndarray:
    """x with trigamma(x) = y (y > 0), Newton on 1/trigamma (Smyth 2004), elementwise."""
    y = np.asarray(y, float)
    x = 0.5 + 1.0 / y
    for _ in range(100):
        tri = special.polygamma(1, x)
        step = tri * (1 - tri / y) / special.polygamma(2, x)
        x = x + step
        if np.all(np.abs(step) <= 1e-13 * x):
            break
    return x


@dataclass
class Prior:
    """The seed-variance prior fitted to each campaign's canonical side (trace_lib's Canonical.seed_prior):
    ``q0`` (R, B) per-benchmark scale on the binomial scale or (R, M, B) per cell (two-way), ``d_eff`` likewise the
    effective prior dof."""

    q0: np.ndarray
    d_eff: np.ndarray
    d0: np.ndarray  # (R,)

    def cells(self, x: np.ndarray) -> np.ndarray:
        """``x`` as (R, M, B)."""
        return x if x.ndim == 3 else x[:, None, :]


#: The prior's scale per benchmark and model (trace_lib's TWO_WAY_PRIOR; set by --prior).
TWO_WAY = TRACE_TWO_WAY_PRIOR


def fit_prior(lay: Layout, canon: np.ndarray) -> Prior:
    """fit_variance_prior over the 192 cells (q = s_C^2 / binomial_scale(mu_C), 2 dof, groups = benchmarks; with
    TWO_WAY members = models): least squares of e on the design, batched over campaigns by normal equations."""
    n = canon.shape[-1]
    dof = n - 1
    r, m, b = canon.shape[:3]
    rows = np.array([lay.rows[bb] for bb in lay.benchmarks], float)
    q = canon.var(-1, ddof=1) / binomial_scale(canon.mean(-1), rows)  # (R, M, B) (rows broadcast per benchmark)
    usable = q > 0
    e = np.where(usable, np.log(np.where(usable, q, 1.0)) - _offset(dof), 0.0)
    tri_cell = float(special.polygamma(1, dof / 2))
    cells = usable.sum(1)  # (R, B)
    if not TWO_WAY:
        means = e.sum(1) / np.maximum(cells, 1)
        fitted = np.broadcast_to(means[:, None, :], e.shape)
        residual = np.maximum(cells - 1, 0).sum(1)
        leverage = 1.0 / np.maximum(cells, 1)  # (R, B)
    else:  # columns: B benchmarks, then models 1..M-1 (model 0 the reference)
        x = np.zeros((m, b, b + m - 1))
        x[:, np.arange(b), np.arange(b)] = 1.0
        x[np.arange(1, m), :, b + np.arange(m - 1)] = 1.0
        x = x.reshape(m * b, -1)
        w = usable.reshape(r, -1).astype(float)
        xtx = np.einsum("rn,np,nq->rpq", w, x, x)
        cov = np.linalg.pinv(xtx)
        beta = np.einsum("rpq,np,rn->rq", cov, x, w * e.reshape(r, -1))
        fitted = (beta @ x.T).reshape(r, m, b)
        rank = np.linalg.matrix_rank(xtx)
        residual = usable.sum((1, 2)) - rank
        leverage = np.einsum("np,rpq,nq->rn", x, cov, x).reshape(r, m, b)
    centred = np.where(usable, (e - fitted) ** 2, 0.0).sum((1, 2))
    excess = centred / residual - tri_cell
    d0 = np.full(excess.shape, np.inf)
    pos = excess > 0
    d0[pos] = 2 * trigamma_inverse(excess[pos])
    finite = np.isfinite(d0)
    shift = np.where(finite, _offset(np.where(finite, d0, 1.0)), 0.0)
    # (R, B) one-way, (R, M, B) two-way
    q0 = np.exp((means if not TWO_WAY else fitted) + shift.reshape((r,) + (1,) * (1 if not TWO_WAY else 2)))
    prior_tri = np.where(finite, special.polygamma(1, np.where(finite, d0, 1.0) / 2), 0.0)
    prior_tri = prior_tri.reshape((r,) + (1,) * (leverage.ndim - 1))
    d_eff = 2 * trigamma_inverse(prior_tri + (tri_cell + prior_tri) * leverage)
    if not TWO_WAY:
        d_eff = np.where(cells > 0, d_eff, d0[:, None])
    return Prior(q0, d_eff, d0)


@dataclass
class Scored:
    """Arrays (leading axis R) of trace_lib's ``Scored``: seeds of both sides, row-level variances, seed excess."""

    reproduced: np.ndarray  # (..., k)
    canonical: np.ndarray  # (..., n)
    v_r: np.ndarray
    v_c: np.ndarray
    tau2: np.ndarray
    tau4: np.ndarray  # sum of tau_j^4 / dof_j (Satterthwaite)

    @property
    def k(self) -> int:
        return self.reproduced.shape[-1]

    @property
    def n(self) -> int:
        return self.canonical.shape[-1]

    def variance(self, w: float) -> np.ndarray:
        return (self.v_r + self.tau2) * w + (self.v_c + self.tau2) / self.n

    def dof(self, w: float) -> np.ndarray:
        """Satterthwaite dof of Var(D) (inf: normal)."""
        est = (self.tau2 > 0) & (self.tau4 > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            d = self.variance(w) ** 2 / (np.where(est, self.tau4, 1.0) * (w + 1 / self.n) ** 2)
        return np.where(est, d, np.inf)

    def excess_test(self, component: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """trace_lib's seed_excess against row variance + ``component``: (p, spread^2, expected^2)."""
        k, n = self.k, self.n
        f = (k - 1) + (n - 1)
        q = np.zeros(self.v_r.shape)
        ss_total = np.zeros(self.v_r.shape)
        for values, var, d in ((self.reproduced, self.v_r + component, k - 1),
                               (self.canonical, self.v_c + component, n - 1)):
            if d == 0:
                continue
            ss = ((values - values.mean(-1, keepdims=True)) ** 2).sum(-1)
            ss_total = ss_total + ss
            with np.errstate(divide="ignore", invalid="ignore"):
                part = np.where(var > 0, ss / np.where(var > 0, var, 1.0), np.inf)
            q = q + np.where(ss > 0, part, 0.0)
        p = np.where(np.isinf(q), 0.0, stats.chi2.sf(np.where(np.isinf(q), 0.0, q), f))
        expected = ((k - 1) * (self.v_r + component) + (n - 1) * (self.v_c + component)) / f
        return p, ss_total / f, expected


def moderated_cell(reproduced: np.ndarray, canonical: np.ndarray, v_r: np.ndarray, v_c: np.ndarray,
                   rows: np.ndarray, prior: Prior) -> Scored:
    """Cells (R, M, B): seed variance moderated by the prior on the binomial scale (trace_lib's moderated_excess)."""
    k, n = reproduced.shape[-1], canonical.shape[-1]
    f = (k - 1) + (n - 1)
    ss = ((reproduced - reproduced.mean(-1, keepdims=True)) ** 2).sum(-1)
    ss = ss + ((canonical - canonical.mean(-1, keepdims=True)) ** 2).sum(-1)
    wr, wc = (k - 1) / f, (n - 1) / f
    v_bar = wr * v_r + wc * v_c
    scale = wr * binomial_scale(reproduced.mean(-1), rows) + wc * binomial_scale(canonical.mean(-1), rows)
    q_hat = ss / f / scale
    d_eff = prior.cells(prior.d_eff)
    q0 = prior.cells(prior.q0)
    finite = np.isfinite(d_eff)
    de = np.where(finite, d_eff, 0.0)
    q_post = np.where(finite, (de * q0 + f * q_hat) / (de + f), q0)
    dof = d_eff + f
    if OUTLIER_LEVEL > 0 or ROWS_OUTLIER_LEVEL > 0:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = q_hat / q0
            tail = np.where(finite, stats.f.sf(ratio, f, np.where(finite, de, 1.0)), stats.chi2.sf(ratio * f, f))
        rows_p, _, _ = Scored(reproduced, canonical, v_r, v_c, 0.0, 0.0).excess_test(np.zeros_like(v_r))
        outlier = (tail < OUTLIER_LEVEL) | (rows_p < ROWS_OUTLIER_LEVEL)
        q_post = np.where(outlier, q_hat, q_post)
        dof = np.where(outlier, float(f), dof)
    if SATTERTHWAITE == "truncated":
        total, nu = truncated_posterior(q_post, dof, scale, v_bar)
        tau2 = np.maximum(0.0, total - v_bar)
        finite_nu = np.isfinite(nu) & (tau2 > 0)
        tau4 = np.where(finite_nu, total**2 / np.where(finite_nu, nu, 1.0), 0.0)
        return Scored(reproduced, canonical, v_r, v_c, tau2, tau4)
    tau2 = np.maximum(0.0, q_post * scale - v_bar)
    # Satterthwaite term of the excess: tau^4 / dof (trace_lib's), or with SATTERTHWAITE == "total" the estimated
    # total seed variance's (tau^2 + V)^2 / dof, the variance of what was estimated (a candidate, not trace_lib's)
    sq = {"total": (tau2 + v_bar) ** 2, "mixed": tau2 * (tau2 + v_bar)}.get(SATTERTHWAITE, tau2**2)
    tau4 = np.where((tau2 > 0) & np.isfinite(dof), sq / np.where(np.isfinite(dof), dof, 1.0), 0.0)
    return Scored(reproduced, canonical, v_r, v_c, tau2, tau4)


def truncated_posterior(q_post: np.ndarray, dof: np.ndarray, scale: np.ndarray,
                        v_bar: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(total, nu): the seed variance's moderated posterior ``sigma^2 = A / X`` (``X ~ chi2_dof``, ``A = dof q_post
    scale``) truncated to ``sigma^2 >= V`` (seeds cannot vary less than their rows; ``X <= A / V``), as the scaled
    inverse chi-square with the same mean and variance of the precision ``X / A``: ``total = A / E[X]``, ``nu =
    2 E[X]^2 / Var X`` (exactly ``q_post scale`` on ``dof`` when nothing is truncated; a little above ``V``,
    ``V (dof/2 + 1) / (dof/2)``, on many dof when the posterior lies far below ``V``). Infinite ``dof``:
    ``max(V, q_post scale)``, known."""
    finite = np.isfinite(dof)
    nu = np.where(finite, dof, 1.0)
    a = nu * q_post * scale
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x_max = np.where(v_bar > 0, a / np.where(v_bar > 0, v_bar, 1.0), np.inf)
        log_mass = stats.chi2.logcdf(x_max, nu)
        m1 = nu * np.exp(stats.chi2.logcdf(x_max, nu + 2) - log_mass)
        m2 = nu * (nu + 2) * np.exp(stats.chi2.logcdf(x_max, nu + 4) - log_mass)
        total = np.where(finite, np.maximum(a / m1, v_bar), np.maximum(v_bar, q_post * scale))
        eff = np.where(finite, 2 * m1**2 / np.maximum(m2 - m1**2, 1e-300), np.inf)
    return total, eff


def combine(members: Scored, reproduced: np.ndarray, canonical: np.ndarray, weight: float, axis: tuple,
            v_r: np.ndarray | None = None, v_c: np.ndarray | None = None) -> Scored:
    """trace_lib's combine: members' variances and excess summed (times ``weight``) over ``axis``, plus the
    combination's own excess when its chi-square test flags it (p < 0.01), on its own f dof."""
    tau2 = weight * members.tau2.sum(axis)
    tau4 = weight**2 * members.tau4.sum(axis)
    v_r = weight * members.v_r.sum(axis) if v_r is None else v_r
    v_c = weight * members.v_c.sum(axis) if v_c is None else v_c
    base = Scored(reproduced, canonical, v_r, v_c, tau2, tau4)
    p, spread2, expected2 = base.excess_test(tau2)
    flagged = p < UNSTABLE_P
    own = np.where(flagged, np.maximum(0.0, spread2 - expected2), 0.0)
    f = base.k - 1 + base.n - 1
    return Scored(reproduced, canonical, v_r, v_c, tau2 + own, tau4 + own**2 / f)


@dataclass
class Kind:
    """One kind of test over R campaigns: difference, SE, dof (inf: normal), claims' sign inputs."""

    d: np.ndarray
    se: np.ndarray
    dof: np.ndarray
    sign: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # claims: (toward, SE_R, dof of the sign test)
    direction: np.ndarray | None = None
    unstable: np.ndarray | None = None  # cells: the chi-square report (p < 0.01), not a switch


def _rows(lay: Layout) -> np.ndarray:
    return np.array([lay.rows[b] for b in lay.benchmarks], float)


def cell_tests(lay: Layout, camp: Campaigns, prior: Prior | None = None) -> tuple[Kind, Kind, Scored]:
    """The per-seed slice and k-seed mean tests of every cell, and the cells' Scored."""
    k = camp.repro.shape[-1]
    prior = fit_prior(lay, camp.canon) if prior is None else prior
    mu_c = camp.canon.mean(-1)
    v_c = camp.canon_row_var if camp.canon_row_var is not None else _carried(lay, camp, mu_c)
    cell = moderated_cell(camp.repro, camp.canon, camp.row_var, v_c, _rows(lay), prior)
    p, _, _ = cell.excess_test(np.zeros_like(cell.v_r))
    slice_ = Kind(camp.repro - mu_c[..., None], np.sqrt(cell.variance(1.0))[..., None].repeat(k, -1),
                  cell.dof(1.0)[..., None].repeat(k, -1), unstable=(p < UNSTABLE_P)[..., None].repeat(k, -1))
    mean_ = Kind(camp.repro.mean(-1) - mu_c, np.sqrt(cell.variance(1 / k)), cell.dof(1 / k),
                 unstable=p < UNSTABLE_P)
    return slice_, mean_, cell


def judge(lay: Layout, camp: Campaigns, prior: Prior | None = None) -> dict[str, Kind]:
    """Every test kind of trace_lib's rule (VERDICT_CHANGES.md, 20:59) from the campaigns' sufficient statistics;
    the prior is refitted to each campaign's canonical side (the release is one draw too)."""
    k = camp.repro.shape[-1]
    kinds = {}
    kinds["slice"], kinds["mean"], cell = cell_tests(lay, camp, prior)
    w = 1 / k
    levels = [idx for idx in lay.categories.values()] + [list(range(len(lay.benchmarks)))]

    def composite(sc: Scored, idx: list[int]) -> Scored:
        sub = Scored(sc.reproduced[:, :, idx], sc.canonical[:, :, idx], sc.v_r[:, :, idx], sc.v_c[:, :, idx],
                     sc.tau2[:, :, idx], sc.tau4[:, :, idx])
        return combine(sub, sub.reproduced.mean(2), sub.canonical.mean(2), 1 / len(idx) ** 2, (2,))

    comps = [composite(cell, idx) for idx in levels]
    cat, ov = comps[:-1], comps[-1]
    kinds["category"] = Kind(np.stack([c.reproduced.mean(-1) - c.canonical.mean(-1) for c in cat], 2),
                             np.stack([np.sqrt(c.variance(w)) for c in cat], 2), np.stack([c.dof(w) for c in cat], 2))
    kinds["overall"] = Kind(ov.reproduced.mean(-1) - ov.canonical.mean(-1), np.sqrt(ov.variance(w)), ov.dof(w))
    # claims: seed-paired deltas, the paired rows' variance, V_C carried by the two models' ratio, the two cells'
    # moderated excess inherited
    t_idx = np.array([t for t, _ in lay.claims], int)
    b_idx = np.array([b for _, b in lay.claims], int)
    rep = camp.repro[:, t_idx] - camp.repro[:, b_idx]
    can = camp.canon[:, t_idx] - camp.canon[:, b_idx]
    v_r = camp.pair_var
    if camp.canon_row_var is not None:
        v_cp = cell.v_c[:, t_idx] + cell.v_c[:, b_idx]  # archive: independent models' canonical rows
    else:
        den = cell.v_r[:, t_idx] + cell.v_r[:, b_idx]
        num = cell.v_c[:, t_idx] + cell.v_c[:, b_idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            v_cp = np.where(den > 0, v_r * num / np.where(den > 0, den, 1.0), num)
    pair = Scored(np.stack([camp.repro[:, t_idx], camp.repro[:, b_idx]], -2)[..., 0, :], None, None, None,
                  np.stack([cell.tau2[:, t_idx], cell.tau2[:, b_idx]], -1),
                  np.stack([cell.tau4[:, t_idx], cell.tau4[:, b_idx]], -1))
    claim = combine(pair, rep, can, 1.0, (-1,), v_r, v_cp)
    parts = [claim]
    for idx in levels:
        sub = Scored(claim.reproduced[:, :, idx], claim.canonical[:, :, idx], claim.v_r[:, :, idx],
                     claim.v_c[:, :, idx], claim.tau2[:, :, idx], claim.tau4[:, :, idx])
        parts.append(combine(sub, sub.reproduced.mean(2), sub.canonical.mean(2), 1 / len(idx) ** 2, (2,)))

    def stack(fn) -> np.ndarray:  # noqa: ANN001
        vals = [fn(x) for x in parts]
        return np.concatenate([v if v.ndim == 3 else v[..., None] for v in vals], -1)  # (R, 6, B + G + 1)

    est = stack(lambda x: x.reproduced.mean(-1))
    can_mean = stack(lambda x: x.canonical.mean(-1))
    direction = np.sign(can_mean)
    se_r = stack(lambda x: np.sqrt((x.v_r + x.tau2) / x.k))
    kinds["claim"] = Kind(est - can_mean, stack(lambda x: np.sqrt(x.variance(w))), stack(lambda x: x.dof(w)),
                          (direction * est, se_r, stack(lambda x: x.dof(w))), direction)
    return kinds


def _quantile(level: float, dof: np.ndarray) -> np.ndarray:
    finite = np.isfinite(dof)
    return np.where(finite, stats.t.isf(level, np.where(finite, dof, 1.0)), stats.norm.isf(level))


def critical(kind: Kind, per_test: float) -> tuple[np.ndarray, np.ndarray]:
    """(crit at the per-test level, equivalence quantile): normal, or Student t on the Satterthwaite dof."""
    return _quantile(per_test / 2, kind.dof), _quantile(EQ_ALPHA, kind.dof)


def outcomes(kind: Kind, per_test: float, margin: float) -> np.ndarray:
    """0 reproduced, 1 differs, 2 inconclusive, as trace_lib's Rule.judge (+ judge_sign for claims)."""
    crit, q = critical(kind, per_test)
    band = crit * kind.se
    lo, hi = kind.d - q * kind.se, kind.d + q * kind.se
    out = np.where((np.abs(lo) <= margin) & (np.abs(hi) <= margin), 0,
                   np.where((np.abs(kind.d) > band) & (band < 100.0), 1, 2))
    if kind.sign is not None:
        out = np.where(sign_outcome(kind, per_test) == 1, 1, out)
    return out


def sign_outcome(kind: Kind, per_test: float) -> np.ndarray:
    """Claims' sign verdict: 0 reproduced (one-sided 95% bound beyond 0 on the canonical side), 1 differs
    (significantly opposite at the per-test level), 2 inconclusive."""
    toward, se, dof = kind.sign
    crit, q = _quantile(per_test / 2, dof), _quantile(EQ_ALPHA, dof)
    return np.where(kind.direction == 0, 2, np.where(toward - q * se > 0, 0, np.where(toward < -crit * se, 1, 2)))


# -- plans --------------------------------------------------------------------------------------------------------

@dataclass
class Plan:
    """A planned family: which tests of each kind it holds (masks over the kind's trailing axes)."""

    name: str
    masks: dict[str, np.ndarray]

    @property
    def size(self) -> int:
        return int(sum(m.sum() * (2 if kind == "claim" else 1) for kind, m in self.masks.items()))

    def counts(self) -> dict[str, int]:
        return {kind: int(m.sum()) * (2 if kind == "claim" else 1) for kind, m in self.masks.items() if m.any()}

    def per_test(self, alpha: float, kind: str) -> float:
        """trace_lib's weighted Sidak level of a ``kind`` test: alpha's share of the kind (ALPHA_SHARES,
        renormalised over the planned kinds) over the plan's tests of that kind."""
        counts = self.counts()
        if kind not in counts:
            return min(self.per_test(alpha, k) for k in counts)
        total = sum(ALPHA_SHARES[k] for k in counts)
        return -math.expm1(math.log1p(-alpha * ALPHA_SHARES[kind] / total) / counts[kind])


def make_plans(lay: Layout, k: int) -> list[Plan]:
    """The full plan, each ``--benchmark X`` and each ``--model-id M`` (trace_lib's VerdictPlan.family)."""
    m, b, g = len(lay.models), len(lay.benchmarks), len(lay.categories)
    full = {"slice": np.ones((m, b, k), bool), "mean": np.ones((m, b), bool), "category": np.ones((m, g), bool),
            "overall": np.ones(m, bool), "claim": np.ones((len(lay.claims), b + g + 1), bool)}
    plans = [Plan("full", full)]
    for j, bench in enumerate(lay.benchmarks):
        masks = {key: np.zeros_like(v) for key, v in full.items()}
        masks["slice"][:, j] = masks["mean"][:, j] = masks["claim"][:, j] = True
        plans.append(Plan(f"--benchmark {bench}", masks))
    for i, model in enumerate(lay.models):
        masks = {key: np.zeros_like(v) for key, v in full.items()}
        for key in ("slice", "mean", "category", "overall"):
            masks[key][i] = True
        plans.append(Plan(f"--model-id {model}", masks))
    return plans


def any_differs(kinds: dict[str, Kind], plan: Plan, alpha: float, margin: float) -> np.ndarray:
    """(R,) True where any planned test says "differs"."""
    hit = None
    for name, mask in plan.masks.items():
        if not mask.any():
            continue
        out = outcomes(kinds[name], plan.per_test(alpha, name), margin) == 1
        h = (out & mask).reshape(out.shape[0], -1).any(1)
        hit = h if hit is None else hit | h
    return hit


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def fmt_rate(k: int, n: int) -> str:
    lo, hi = clopper_pearson(int(k), n)
    return f"{k / n:.4f} [{lo:.4f}, {hi:.4f}]"


# -- report -------------------------------------------------------------------------------------------------------

MARGINS = (1.0, 2.0, 3.0, 5.0)
OUTCOME_NAMES = ("reproduced", "differs", "inconclusive")
KIND_NAMES = ("slice", "mean", "category", "overall", "claim")


def table(rows: list[list[str]], head: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--campaigns", type=int, default=4000, help="faithful campaigns (default 4000)")
    parser.add_argument("--power-campaigns", type=int, default=1000,
                        help="campaigns per injected cell / model for the power tables (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace-root", default=os.environ.get("TRACE_ROOT"))
    parser.add_argument("--scenario", default="fitted", choices=("fitted", "rows-only", "all-excess"))
    parser.add_argument("--truth", default="per-benchmark", choices=("per-benchmark", "per-model"),
                        help="row variance ratio rho_b per benchmark (default) or rho_b r_m per cell (r_m fitted "
                             "on the cells without excess)")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--margin", type=float, default=2.0)
    parser.add_argument("--check", type=int, default=2, help="campaigns expanded to rows and judged by trace_lib")
    parser.add_argument("--seeds", type=int, default=3,
                        help="reproduced seeds per cell (default 3; above 3 the claims' paired variance is V_T + V_B)")
    parser.add_argument("--outlier-level", type=float, default=TRACE_OUTLIER_LEVEL,
                        help="prior-predictive tail below which a cell's seed variance is unmoderated (default: "
                             "trace_lib's OUTLIER_LEVEL; 0: the rule without it)")
    parser.add_argument("--rows-outlier-level", type=float, default=TRACE_ROWS_OUTLIER_LEVEL,
                        help="seed-excess chi-square p below which a cell's seed variance is unmoderated (default: "
                             "trace_lib's ROWS_OUTLIER_LEVEL; 0: the rule without it)")
    parser.add_argument("--prior", default="two-way" if TRACE_TWO_WAY_PRIOR else "one-way",
                        choices=("one-way", "two-way"),
                        help="the prior's scale per benchmark, or per benchmark and model (default: trace_lib's "
                             "TWO_WAY_PRIOR; set for trace_lib's side of the check too)")
    parser.add_argument("--canonical", default="drawn", choices=("drawn", "release"),
                        help="the canonical side: drawn from the truth in every campaign (a release like this "
                             "one; default), or the release's own seed scores with their mean's posterior error "
                             "(this release: the false-alarm rate conditional on it)")
    parser.add_argument("--satterthwaite", default="excess", choices=("excess", "total", "mixed", "truncated"),
                        help="the excess's Satterthwaite term: tau^4/dof (trace_lib's), (tau^2 + V)^2/dof (a "
                             "candidate: the variance of the estimated total), tau^2 (tau^2 + V)/dof (between) or "
                             "the total's posterior truncated at V (truncated_posterior)")
    parser.add_argument("--skip-power", action="store_true", help="only the faithful tables")
    parser.add_argument("--power", default="efg", help="which power tables: any of e (cells zeroed and shifted "
                        "5 points), f (a model shifted 2 points), g (seed-unstable cells zeroed); default efg")
    args = parser.parse_args(argv)
    global OUTLIER_LEVEL, ROWS_OUTLIER_LEVEL, TWO_WAY, SATTERTHWAITE
    OUTLIER_LEVEL = args.outlier_level
    ROWS_OUTLIER_LEVEL = args.rows_outlier_level
    SATTERTHWAITE = args.satterthwaite
    TWO_WAY = args.prior == "two-way"
    moderation.TWO_WAY_PRIOR = TWO_WAY  # trace_lib's side of the check fits the same prior
    own_rule = (OUTLIER_LEVEL == TRACE_OUTLIER_LEVEL and ROWS_OUTLIER_LEVEL == TRACE_ROWS_OUTLIER_LEVEL
                and SATTERTHWAITE == "excess")
    start = time.perf_counter()
    lay = load_layout(args.trace_root)
    truth = fit_truth(lay, args.scenario, per_model=args.truth == "per-model")
    rng = np.random.default_rng(args.seed)
    k = args.seeds
    m, b = len(lay.models), len(lay.benchmarks)
    print(f"tolerance_power: row-level simulation, truth {args.truth}, prior {args.prior}, scenario {args.scenario}, "
          f"canonical side {args.canonical}, {CANONICAL_SEEDS} canonical and {k} "
          f"reproduced seeds, alpha {args.alpha:g}, margin {args.margin:g}; per-row p binned ({rs.BINS} bins)")
    print("\n(0) the truth fitted to the release: row variance / binomial variance rho per benchmark; cells with "
          "seed-level excess (release chi2 on 2 dof, p < 0.01)")
    rho_b = np.median(truth.rho, 0)
    print(f"  rho{' (median over models)' if args.truth == 'per-model' else ''}: "
          + ", ".join(f"{bench} {r:.2f}" for bench, r in zip(lay.benchmarks, rho_b)))
    if args.truth == "per-model":
        print("  model factor (geometric mean of rho / median): " + ", ".join(
            f"{model} {math.exp(np.log(truth.rho[i] / rho_b).mean()):.2f}" for i, model in enumerate(lay.models)))
    for i, j in zip(*np.nonzero(truth.release_unstable)):
        print(f"  excess: {lay.models[i]} {lay.benchmarks[j]}: release seed sd {lay.seed_scores[i, j].std(ddof=1):.2f}, "
              f"row sd {math.sqrt(truth.target_row[i, j]):.2f}, seed-level sd {math.sqrt(truth.target_tau[i, j]):.2f} "
              f"(eta {truth.cells[i][j].eta:.3f} logit), release p {truth.release_p[i, j]:.2g}")
    if not own_rule:
        print(f"\nNOT trace_lib's rule: seed-variance outliers unmoderated below F tail {OUTLIER_LEVEL:g} or "
              f"seed-excess p {ROWS_OUTLIER_LEVEL:g}; the excess's Satterthwaite term: {SATTERTHWAITE}")
    if args.check and k == 3 and own_rule:
        from check_rule import check_against_trace_lib  # noqa: PLC0415

        check_against_trace_lib(lay, truth, args.check, rng, args.alpha, args.margin)

    sim = Simulator(lay, truth, k, rng, paired=k <= 3, canonical=args.canonical)
    plans = make_plans(lay, k)
    fa = np.zeros(len(plans), int)
    share = {mg: {kind: np.zeros(3) for kind in KIND_NAMES} for mg in MARGINS}
    mds_mean, mds_slice, flags, sd_sim = [], [], [], []
    sign_counts = np.zeros((len(lay.claims), b + len(lay.categories) + 1))
    mdd = []
    over_range = {kind: 0 for kind in KIND_NAMES}
    tested = {kind: 0 for kind in KIND_NAMES}
    done, batch = 0, 1000
    t0 = time.perf_counter()
    while done < args.campaigns:
        size = min(batch, args.campaigns - done)
        camp = sim.campaigns(size)
        sd_sim.append(camp.canon.var(-1, ddof=1).sum(0))
        kinds = judge(lay, camp)
        for pi, plan in enumerate(plans):
            fa[pi] += int(any_differs(kinds, plan, args.alpha, args.margin).sum())
        if True:
            a = {kind: plans[0].per_test(args.alpha, kind) for kind in KIND_NAMES}
            for mg in MARGINS:
                for kind in KIND_NAMES:
                    out = outcomes(kinds[kind], a[kind], mg)
                    share[mg][kind] += np.bincount(out.ravel(), minlength=3)
            zp = stats.norm.isf(0.2)
            for kind in KIND_NAMES:
                crit, q = critical(kinds[kind], a[kind])
                over_range[kind] += int((crit * kinds[kind].se >= 100).sum())
                tested[kind] += kinds[kind].se.size
            crit, _ = critical(kinds["mean"], a["mean"])
            mds_mean.append((crit + zp) * kinds["mean"].se)
            crit, _ = critical(kinds["slice"], a["slice"])
            mds_slice.append(((crit + zp) * kinds["slice"].se)[..., 0])
            flags.append(kinds["mean"].unstable.sum(0))
            sign_counts += (sign_outcome(kinds["claim"], a["claim"]) == 0).sum(0)
            _, q = critical(kinds["claim"], a["claim"])
            mdd.append((q + zp) * kinds["claim"].sign[1])
        done += size
    t_faithful = time.perf_counter() - t0
    n = args.campaigns
    mds_mean = np.concatenate(mds_mean)
    mds_slice = np.concatenate(mds_slice)
    flag_rate = sum(flags) / n
    sim_sd = np.sqrt(sum(sd_sim) / n)
    rel_sd = lay.seed_scores.std(-1, ddof=1)
    print(f"\n  check of the fit: simulated canonical seed sd (RMS over campaigns) / release seed sd per cell: median "
          f"{np.median(sim_sd / rel_sd):.2f}, quartiles {np.quantile(sim_sd / rel_sd, 0.25):.2f}-"
          f"{np.quantile(sim_sd / rel_sd, 0.75):.2f}; RMS sim sd / binomial sd median "
          f"{np.median(sim_sd / np.sqrt(truth.target_row / truth.rho)):.2f} (release: "
          f"{np.median(rel_sd / np.sqrt(truth.target_row / truth.rho)):.2f})")
    print(f"\n(a) faithful campaigns ({n}; {t_faithful:.0f} s for sampling and judging): P(any test \"differs\") "
          f"with 95% Clopper-Pearson intervals; target <= {args.alpha:g} for every plan")
    rows = [[p.name, str(p.size), fmt_rate(fa[pi], n)] for pi, p in enumerate(plans)]
    print(table(rows, ["plan", "tests", "P(any differs) [95% CI]"]))
    worst = 1 + int(fa[1:].argmax())
    print(f"  full {fa[0] / n:.4f}, worst narrowed {plans[worst].name} {fa[worst] / n:.4f}, plans over "
          f"{args.alpha:g}: {int((fa / n > args.alpha).sum())} of {len(plans)}")
    print(f"\n(b) faithful tests by outcome at each margin (full plan; share reproduced / inconclusive / differs)")
    rows = []
    for mg in MARGINS:
        rows.append([f"{mg:g}"] + [
            f"{s[0] / s.sum():.3f} / {s[2] / s.sum():.3f} / {s[1] / s.sum():.4f}" for s in
            (share[mg][kind] for kind in KIND_NAMES)])
    print(table(rows, ["margin"] + list(KIND_NAMES)))
    cell_mds = np.median(mds_mean, 0)
    slice_mds = np.median(mds_slice, 0)
    print(f"\n(c) minimum detectable shift at 80% power, (crit + z_0.8) SE, median over campaigns per cell: 3-seed "
          f"mean: median over the 192 cells {np.median(cell_mds):.2f} points (quartiles "
          f"{np.quantile(cell_mds, 0.25):.2f}-{np.quantile(cell_mds, 0.75):.2f}, max {cell_mds.max():.1f}); one-seed "
          f"slice: median {np.median(slice_mds):.2f}; cells with MDS <= 5: {int((cell_mds <= 5).sum())}")
    print("  bands >= 100 points (outcome inconclusive by the rule): " + ", ".join(
        f"{kind} {over_range[kind]} of {tested[kind]}" for kind in KIND_NAMES))
    print(f"  seed-unstable flag rate on faithful campaigns: median cell {np.median(flag_rate):.3f}, release-excess "
          f"cells {flag_rate[truth.release_unstable].min():.2f}-{flag_rate[truth.release_unstable].max():.2f}, "
          f"others' mean {flag_rate[~truth.release_unstable].mean():.3f}")
    # claims
    mdd = np.median(np.concatenate(mdd), 0)  # (6, levels)
    labels = lay.benchmarks + list(lay.categories) + ["overall"]
    print("\n(d) claims: minimum detectable delta of the sign test ((q_0.95 + z_0.8) SE_R, median) and P(sign "
          "reproduced) on faithful campaigns; target >= 0.9 where the claimed delta exceeds the MDD")
    rows = []
    for c, cid in enumerate(lay.claim_ids):
        over = lay.claim_overall[c]
        bench_hits = [(sign_counts[c, j] / n, abs(lay.claim_benchmark[c, j]))
                      for j in range(b) if abs(lay.claim_benchmark[c, j]) > mdd[c, j]]
        low = [p for p, _ in bench_hits if p < 0.9]
        rows.append([cid, f"{over:+.2f}", f"{mdd[c, -1]:.2f}", f"{sign_counts[c, -1] / n:.3f}",
                     f"{np.median(mdd[c, :b]):.2f}", f"{len(bench_hits)}", f"{len(low)}"])
    print(table(rows, ["claim", "overall delta", "MDD overall", "P(sign) overall", "median MDD benchmark",
                       "benchmarks delta > MDD", "of those P(sign) < 0.9"]))
    if args.skip_power:
        print(f"\n[{time.perf_counter() - start:.0f} s]")
        return 0
    power_tables(lay, truth, args, rng)
    print(f"\n[{time.perf_counter() - start:.0f} s in all]")
    return 0


def power_tables(lay: Layout, truth: Truth, args, rng: np.random.Generator) -> None:  # noqa: ANN001
    sim = Simulator(lay, truth, args.seeds, rng, paired=args.seeds <= 3, canonical=args.canonical)
    camp = sim.campaigns(args.power_campaigns)
    full = make_plans(lay, args.seeds)[0]
    if "e" in args.power:
        cell_power_table(lay, truth, args, sim, camp, full)
    if "f" in args.power:
        model_shift_table(lay, args, sim, camp, full)
    if "g" in args.power:
        unstable_seeds_table(lay, truth, args, rng)


def cell_power_table(lay: Layout, truth: Truth, args, sim: Simulator, camp: Campaigns,  # noqa: ANN001
                     full: Plan) -> None:
    """(e): each cell zeroed and shifted 5 points, P(any test differs); the oracle's ceiling beside it."""
    m, b, n, k = len(lay.models), len(lay.benchmarks), args.power_campaigns, args.seeds
    t0 = time.perf_counter()
    zero_any, zero_own, five_any, five_own = (np.zeros((m, b)) for _ in range(4))
    for i in range(m):
        for j in range(b):
            kz = judge(lay, zeroed(camp, lay, i, j))
            zero_any[i, j] = any_differs(kz, full, args.alpha, args.margin).mean()
            zero_own[i, j] = own(kz, full, args.alpha, args.margin, i, j).mean()
            k5 = judge(lay, sim.shifted(camp, [(i, j)], 5.0))
            five_any[i, j] = any_differs(k5, full, args.alpha, args.margin).mean()
            five_own[i, j] = own(k5, full, args.alpha, args.margin, i, j).mean()
    print(f"\n(e) power, {n} campaigns per injected cell ({time.perf_counter() - t0:.0f} s), rule trace_lib: "
          "P(any test of the campaign \"differs\"); a benchmark zeroed for one model (target >= 0.99 where not "
          "seed-unstable) and a 5-point shift on one benchmark of one model (target >= 0.8 in >= 150 of 192 cells)")
    rows = [[lay.benchmarks[j]] + [f"{zero_any[i, j]:.3f}/{five_any[i, j]:.2f}" for i in range(m)] for j in range(b)]
    print(table(rows, ["zeroed/5-pt"] + [x.replace("qwen2.5-vl-", "") for x in lay.models]))
    unstable = truth.release_unstable
    zero_low = [(i, j) for i in range(m) for j in range(b) if zero_any[i, j] < 0.99]
    print(f"  zeroed: min over cells without release excess {zero_any[~unstable].min():.3f} "
          f"(CP lower {clopper_pearson(int(round(zero_any[~unstable].min() * n)), n)[0]:.3f}); cells below 0.99: "
          + (", ".join(f"{lay.models[i]}/{lay.benchmarks[j]} {zero_any[i, j]:.3f}"
                       f"{' (seed-unstable)' if unstable[i, j] else ''}" for i, j in zero_low) or "none"))
    ok = five_any >= 0.8
    print(f"  5-point: {int(ok.sum())} of {m * b} cells >= 0.8 (own slice/mean tests alone: "
          f"{int((five_own >= 0.8).sum())}); below:")
    z_a = stats.norm.isf(full.per_test(args.alpha, "mean") / 2)
    for i, j in zip(*np.nonzero(~ok)):
        sd = math.sqrt((truth.target_row[i, j] + truth.target_tau[i, j]) * (1 / k + 1 / CANONICAL_SEEDS))
        why = ("seed-unstable (release excess)" if unstable[i, j] else
               f"SE of the mean {sd:.2f} (a z test at the per-test level has power {stats.norm.sf(z_a - 5 / sd):.2f}; "
               f"0.8 needs SE <= {5 / (z_a + stats.norm.isf(0.2)):.2f})")
        print(f"    {lay.models[i]} {lay.benchmarks[j]}: {five_any[i, j]:.3f} (rows {lay.rows[lay.benchmarks[j]]}, "
              f"mean {lay.seed_scores[i, j].mean():.1f}): {why}")
    oracle_ceiling(truth, full, args.alpha, k)


def model_shift_table(lay: Layout, args, sim: Simulator, camp: Campaigns, full: Plan) -> None:  # noqa: ANN001
    """(f): every benchmark of one model shifted 2 points, both directions."""
    b, n = len(lay.benchmarks), args.power_campaigns
    print("\n(f) a 2-point shift on every benchmark of one model (target >= 0.95): P(any test differs); 'down': "
          "every benchmark 2 points lower (a worse checkpoint); 'away': down where the score is >= 50, up below "
          "(the one-cell shifts' direction: the signs cancel in the category and overall means, the hard case)")
    rows = []
    for i, model in enumerate(lay.models):
        row = [model]
        for direction in ("down", "away"):
            k2 = judge(lay, sim.shifted(camp, [(i, j) for j in range(b)], 2.0, direction))
            row.append(fmt_rate(int(any_differs(k2, full, args.alpha, args.margin).sum()), n))
        rows.append(row)
    print(table(rows, ["model", "down: P(differs) [95% CI]", "away: P(differs) [95% CI]"]))


def unstable_seeds_table(lay: Layout, truth: Truth, args, rng: np.random.Generator) -> None:  # noqa: ANN001
    """(g): the seed-unstable cells zeroed with more reproduced seeds or the archive."""
    n = args.power_campaigns
    print("\n(g) the seed-unstable cells zeroed: P(own slice/mean tests differ) with more reproduced seeds or the "
          f"archive's per-row canonical credits ({2 * n} campaigns per cell; full plan's per-test level at k seeds)")
    cells = list(zip(*np.nonzero(truth.release_unstable)))
    setups = (("3 seeds", 3, False), ("3 seeds + archive", 3, True), ("5 seeds", 5, False),
              ("10 seeds", 10, False), ("10 seeds + archive", 10, True))
    power = {label: zeroed_cells_power(lay, truth, cells, seeds, archive, 2 * n, rng, args.alpha, args.margin,
                                       args.canonical) for label, seeds, archive in setups}
    rows = [[f"{lay.models[i]}/{lay.benchmarks[j]}"] + [f"{power[label][x]:.3f}" for label, *_ in setups]
            for x, (i, j) in enumerate(cells)]
    print(table(rows, ["cell"] + [label for label, *_ in setups]))


def oracle_ceiling(truth: Truth, full: Plan, alpha: float, k: int) -> None:
    """What no rule can beat: a z test of each cell's k-seed mean with the true variances known (row-level and
    seed-level, the simulation's truth), at the mean tests' per-test level, and at the level the 192 means would
    have with the whole budget; 5-point power and minimum detectable shifts."""
    zp = stats.norm.isf(0.2)
    var = truth.target_row + truth.target_tau
    sd_mean = np.sqrt(var * (1 / k + 1 / CANONICAL_SEEDS))
    sd_slice = np.sqrt(var * (1 + 1 / CANONICAL_SEEDS))
    levels = (("the mean tests' level", full.per_test(alpha, "mean")),
              (f"the 192 means alone (Sidak at {alpha:g})", 1 - (1 - alpha) ** (1 / var.size)))
    print("  oracle ceiling (true variances known, z test of the k-seed mean):")
    for label, level in levels:
        z = stats.norm.isf(level / 2)
        power = stats.norm.sf(z - 5 / sd_mean) + stats.norm.cdf(-z - 5 / sd_mean)
        print(f"    at {label}, {level:.2g} (z {z:.2f}): 5-point power >= 0.8 in {int((power >= 0.8).sum())} of "
              f"{var.size} cells; median MDS of the mean {np.median((z + zp) * sd_mean):.2f}")
    z = stats.norm.isf(full.per_test(alpha, "slice") / 2)
    print(f"    one-seed slice at the slice tests' level (z {z:.2f}): median MDS {np.median((z + zp) * sd_slice):.2f}")


def zeroed_cells_power(lay: Layout, truth: Truth, cells: list[tuple[int, int]], seeds: int, archive: bool,
                       size: int, rng: np.random.Generator, alpha: float, margin: float,
                       canonical: str = "drawn") -> list[float]:
    """P(a cell's own slice or mean tests differ) when its reproduced rows all score 0, per cell: only the
    canonical side is drawn (all cells: the prior is fitted to it); a zeroed side has scores and row variance 0."""
    m, b = len(lay.models), len(lay.benchmarks)
    sim = Simulator(lay, truth, seeds, rng, archive, canonical=canonical)
    camp = Campaigns(np.zeros((size, m, b, CANONICAL_SEEDS)), np.zeros((size, m, b, seeds)), np.zeros((size, m, b)),
                     np.zeros((size, m, b, GROUPS_MAX)), np.zeros((size, len(lay.claims), b)),
                     np.zeros((size, m, b)) if archive else None)
    for i in range(m):
        for j in range(b):
            sim._canonical(camp, i, j)
    slice_, mean_, _ = cell_tests(lay, camp)
    plan = make_plans(lay, seeds)[0]
    hit = (outcomes(slice_, plan.per_test(alpha, "slice"), margin) == 1).any(-1) | (
        outcomes(mean_, plan.per_test(alpha, "mean"), margin) == 1)
    return [float(hit[:, i, j].mean()) for i, j in cells]


def own(kinds: dict[str, Kind], plan: Plan, alpha: float, margin: float, i: int, j: int) -> np.ndarray:
    """(R,) the cell's own slice or mean tests say "differs"."""
    return (outcomes(kinds["slice"], plan.per_test(alpha, "slice"), margin)[:, i, j] == 1).any(-1) | (
        outcomes(kinds["mean"], plan.per_test(alpha, "mean"), margin)[:, i, j] == 1)


if __name__ == "__main__":
    sys.modules.setdefault("tolerance_power", sys.modules["__main__"])  # check_rule imports this module by name
    raise SystemExit(main())
