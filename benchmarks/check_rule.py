"""The simulation's vectorised rule against trace_lib's own verdicts, on campaigns expanded to per-row credits.

Each campaign draws every row of every cell (per-row Bernoulli credits from the fitted truth, the per-seed logit
shifts included), writes them as a :class:`~trace_lib.aggregation.credits.CreditTable` (TableVQA-Bench rows with
``split`` and ``exact_score``, WeMath rows as 2- and 3-step problems with ``key`` and ``problem_id``), judges it
with :func:`~trace_lib.aggregation.verdict.judge_credits` against a canonical side drawn the same way, and
compares every verdict (outcome, sign outcome, interval, band) with ``tolerance_power.judge`` on the sufficient
statistics of the same rows.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

import _rowsim as rs
import tolerance_power as tp

SEEDS = (42, 43, 44)
WEMATH_TWO_STEP = 360  # 360 two-step + 165 three-step problems = 525 problems, 1740 rows


def draw_rows(rng: np.random.Generator, cell: rs.Cell, seeds: int) -> list[np.ndarray]:
    """Per group, the per-unit halves ``(units, seeds, parts)`` (0/1) of one side of ``cell``."""
    u = cell.eta * rng.standard_normal(seeds) if cell.eta > 0 else np.zeros(seeds)
    out = []
    for g in cell.groups:
        p = np.repeat(g.p, g.n)  # (units,)
        ps = special.expit(special.logit(p)[:, None] + u[None, :])
        out.append((rng.random((len(p), seeds, g.parts)) < ps[..., None]).astype(float))
    return out


def stats_of(lay: tp.Layout, j: int, cell: rs.Cell, halves: list[np.ndarray]) -> tuple:
    """(scores (seeds,), row_var, group means (G,)) of one side from its drawn halves."""
    scores, var = 0.0, 0.0
    means = np.zeros(tp.GROUPS_MAX)
    groups = tp.unit_groups(lay.benchmarks[j], lay.rows[lay.benchmarks[j]])
    for gi, (g, h) in enumerate(zip(cell.groups, halves)):
        c = h.mean(-1)  # (units, seeds) credit in steps of 1/parts
        scores = scores + g.psi * c.sum(0)
        var += g.psi**2 * c.var(1, ddof=1).sum()
        means[gi] = groups[gi][3] * c.mean()
    return np.asarray(scores), var, means


def credit_rows(bench: str, halves: list[np.ndarray]) -> tuple[list[str], np.ndarray, dict[str, list]]:
    """(index, credits (rows, seeds), extra fields per row) as a harness would write them for ``bench``."""
    if bench == "wemath":
        c = halves[0].mean(-1)  # (525, seeds): 1 complete mastery, 0.5 inadequate generalisation, 0 rote memory
        index, credits, key, problem = [], [], [], []
        for u in range(len(c)):
            steps = 2 if u < WEMATH_TWO_STEP else 3
            step1 = (c[u] > 0).astype(float)  # 0: a wrong first step with a right multi-step answer (g = 1)
            multi = ((c[u] == 1.0) | (c[u] == 0.0)).astype(float)
            for label, value in [("1", step1)] + [(str(s), np.ones_like(step1)) for s in range(2, steps + 1)] + [
                    ("multi", multi)]:
                index.append(f"{len(index):05d}")
                credits.append(value)
                key.append(f"{steps}steps_{label}")
                problem.append(f"p{u:04d}")
        return index, np.array(credits), {"key": key, "problem_id": problem}
    if bench == "tablevqabench":
        splits = ("vwtq", "vwtq_syn", "vtabfact", "fintabnetqa")  # the order of tp.STRUCTURE's groups
        credits = np.concatenate([h[..., 0] for h in halves])
        split = [name for name, h in zip(splits, halves) for _ in range(len(h))]
        exact = np.full(credits.shape, None, dtype=object)
        exact[len(credits) - len(halves[-1]):] = halves[-1][..., 1]  # fintabnetqa: y = relieved + exact
        return [f"{i:05d}" for i in range(len(credits))], credits, {"split": split, "exact_score": exact}
    c = halves[0][..., 0]
    return [f"{i:05d}" for i in range(len(c))], c, {}


def expanded_campaign(lay: tp.Layout, truth: tp.Truth, rng: np.random.Generator,  # noqa: ANN201
                      zero: tuple[int, int] | None = None):
    """(CreditTable, Canonical, Campaigns of size 1) of one campaign drawn row by row; ``zero``: a cell whose
    reproduced rows all score 0."""
    from trace_lib.aggregation.canonical import Canonical, Comparison
    from trace_lib.aggregation.credits import CreditTable
    from trace_lib.release.locate import locate_release
    from trace_lib.release.suite import load_suite

    m, b = len(lay.models), len(lay.benchmarks)
    k = len(SEEDS)
    camp = tp.Campaigns(np.zeros((1, m, b, 3)), np.zeros((1, m, b, k)), np.zeros((1, m, b)),
                        np.zeros((1, m, b, tp.GROUPS_MAX)), np.zeros((1, len(lay.claims), b)))
    halves = {}
    columns: dict[str, list] = {"model_id": [], "seed": [], "benchmark_id": [], "index": [], "credit": []}
    extra_cols: dict[str, list] = {"split": [], "exact_score": [], "key": [], "problem_id": []}
    for i, model in enumerate(lay.models):
        for j, bench in enumerate(lay.benchmarks):
            cell = truth.cells[i][j]
            can = draw_rows(rng, cell, 3)
            camp.canon[0, i, j] = stats_of(lay, j, cell, can)[0]
            rep = draw_rows(rng, cell, k)
            if (i, j) == zero:
                rep = [np.zeros_like(h) for h in rep]
            halves[(i, j)] = rep
            camp.repro[0, i, j], camp.row_var[0, i, j], camp.group_mean[0, i, j] = stats_of(lay, j, cell, rep)
            index, credits, extra = credit_rows(bench, rep)
            n = len(index)
            for s, seed in enumerate(SEEDS):
                columns["model_id"] += [model] * n
                columns["seed"] += [seed] * n
                columns["benchmark_id"] += [bench] * n
                columns["index"] += index
                columns["credit"].append(credits[:, s])
                for name in extra_cols:
                    value = extra.get(name)
                    if value is None:
                        extra_cols[name] += [None] * n
                    elif isinstance(value, np.ndarray):
                        extra_cols[name] += list(value[:, s])
                    else:
                        extra_cols[name] += list(value)
    for c, (t, base) in enumerate(lay.claims):
        for j in range(b):
            cell = truth.cells[t][j]
            total = 0.0
            for g, ht, hb in zip(cell.groups, halves[(t, j)], halves[(base, j)]):
                total += g.psi**2 * (ht.mean(-1) - hb.mean(-1)).var(1, ddof=1).sum()
            camp.pair_var[0, c, j] = total
    table = CreditTable(np.array(columns["model_id"], dtype=object), np.array(columns["seed"], dtype=np.int64),
                        np.array(columns["benchmark_id"], dtype=object), np.array(columns["index"], dtype=object),
                        np.concatenate(columns["credit"]).astype(float),
                        {name: np.array(v, dtype=object) for name, v in extra_cols.items()}, "simulated")
    seeds_of = lambda values: {seed: float(v) for seed, v in zip(SEEDS, values)}  # noqa: E731
    benches = {(lay.models[i], lay.benchmarks[j]): seeds_of(camp.canon[0, i, j]) for i in range(m) for j in range(b)}
    cats = {(lay.models[i], name): seeds_of(camp.canon[0, i, idx].mean(0)) for i in range(m)
            for name, idx in lay.categories.items()}
    overall = {lay.models[i]: seeds_of(camp.canon[0, i].mean(0)) for i in range(m)}
    comps = tuple(Comparison(lay.models[t], lay.models[base],
                             {lay.benchmarks[j]: seeds_of(camp.canon[0, t, j] - camp.canon[0, base, j])
                              for j in range(b)},
                             seeds_of(camp.canon[0, t].mean(0) - camp.canon[0, base].mean(0)))
                  for t, base in lay.claims)
    canonical = Canonical(load_suite(locate_release(None)), benches, cats, overall, comps)
    return table, canonical, camp


def compare(lay: tp.Layout, verdicts, kinds: dict[str, tp.Kind], plan: tp.Plan, alpha: float,  # noqa: ANN001
            margin: float) -> tuple[int, int, float]:
    """(verdicts compared, outcome mismatches, largest |difference| of interval ends and bands)."""
    by_id = verdicts.by_id()
    seen, bad, worst = 0, 0, 0.0

    def one(test_id: str, kind: tp.Kind, at: tuple) -> None:
        nonlocal seen, bad, worst
        v = by_id.pop(test_id)
        a = plan.per_test(alpha, v.kind)
        crit, q = tp.critical(kind, a)
        out = int(tp.outcomes(kind, a, margin)[(0, *at)])
        d, se = kind.d[(0, *at)], kind.se[(0, *at)]
        mine = (d - q[(0, *at)] * se, d + q[(0, *at)] * se, crit[(0, *at)] * se)
        theirs = (v.interval[0], v.interval[1], v.band)
        worst = max(worst, max(abs(x - y) for x, y in zip(mine, theirs)))
        seen += 1
        if tp.OUTCOME_NAMES[out] != v.outcome:
            bad += 1
        if kind.sign is not None:
            sign = int(tp.sign_outcome(kind, a)[(0, *at)])
            bad += tp.OUTCOME_NAMES[sign] != v.sign["outcome"]

    for i, model in enumerate(lay.models):
        for j, bench in enumerate(lay.benchmarks):
            for s, seed in enumerate(SEEDS):
                one(f"{model}-seed{seed}-{bench}", kinds["slice"], (i, j, s))
            one(f"{model}-{bench}", kinds["mean"], (i, j))
        for g, name in enumerate(lay.categories):
            one(f"{model}-category[{name}]", kinds["category"], (i, g))
        one(f"{model}-overall", kinds["overall"], (i,))
    levels = lay.benchmarks + [f"category[{name}]" for name in lay.categories] + ["overall"]
    for c, cid in enumerate(lay.claim_ids):
        for x, label in enumerate(levels):
            one(f"{cid}-{label}", kinds["claim"], (c, x))
    if by_id:
        raise AssertionError(f"trace_lib judged tests the simulation does not know: {sorted(by_id)[:5]}")
    return seen, bad, worst


def check_against_trace_lib(lay: tp.Layout, truth: tp.Truth, campaigns: int,
                            rng: np.random.Generator, alpha: float, margin: float) -> None:
    """Print (and assert) 0 outcome mismatches and equal intervals and bands on ``campaigns`` expanded campaigns."""
    import time

    from trace_lib.aggregation.verdict import VerdictPlan, judge_credits

    plan = tp.make_plans(lay, len(SEEDS))[0]
    total, mismatches, worst = 0, 0, 0.0
    t0 = time.perf_counter()
    outcomes: dict[str, int] = {}
    zeroed = []
    for number in range(campaigns):  # every second campaign has one benchmark of one model zeroed
        zero = (int(rng.integers(len(lay.models))), int(rng.integers(len(lay.benchmarks)))) if number % 2 else None
        if zero:
            zeroed.append(f"{lay.models[zero[0]]}/{lay.benchmarks[zero[1]]}")
        table, canonical, camp = expanded_campaign(lay, truth, rng, zero)
        verdicts = judge_credits(table, None, alpha=alpha, margin=margin, canonical=canonical,
                                 plan=VerdictPlan(tuple(lay.models), SEEDS, tuple(lay.benchmarks)))
        assert verdicts.rule.family_size == plan.size, (verdicts.rule.family_size, plan.size)
        for kind, level in verdicts.rule.levels.items():
            assert math.isclose(level, plan.per_test(alpha, kind), rel_tol=1e-12), (kind, level)
        for v in verdicts.verdicts:
            outcomes[v.outcome] = outcomes.get(v.outcome, 0) + 1
        n, bad, w = compare(lay, verdicts, tp.judge(lay, camp), plan, alpha, margin)
        total, mismatches, worst = total + n, mismatches + bad, max(worst, w)
    print(f"\n(check) {campaigns} campaigns expanded to per-row credits ({len(table)} rows each) and judged by "
          f"trace_lib.aggregation.verdict.judge_credits ({time.perf_counter() - t0:.0f} s): {total} verdicts, "
          f"{mismatches} outcome mismatches (sign verdicts included), largest difference of interval ends and "
          f"bands {worst:.1e} points; trace_lib's outcomes {outcomes}; zeroed cells: {', '.join(zeroed) or 'none'}")
    if mismatches or worst > 1e-6:
        raise SystemExit("tolerance_power: the vectorised rule disagrees with trace_lib's verdicts")
