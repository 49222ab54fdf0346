"""The row-level simulator of benchmarks/tolerance_power.py: its building blocks give what drawing every row gives."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import _rowsim as rs  # noqa: E402

R = 20000


def _group(parts: int) -> rs.Group:
    return rs.Group(psi=100 / 60, parts=parts, p=np.array([0.02, 0.3, 0.55, 0.9]), n=np.array([20, 15, 15, 10]))


def _within(sample: np.ndarray, expected: float, se: float) -> None:
    assert abs(sample.mean() - expected) < 4.5 * se / np.sqrt(len(sample)), (sample.mean(), expected)


@pytest.mark.parametrize("parts", [1, 2])
def test_pattern_counts_match_per_row_bernoulli_draws(parts: int) -> None:
    """Multinomial pattern counts give each seed's score and the rows' sample variance with the moments of drawing
    every row (different p per seed: a seed shift)."""
    rng = np.random.default_rng(1)
    g = _group(parts)
    u = np.tile([-0.4, 0.0, 0.7], (R, 1))
    p = rs.seed_probs(g, u)  # (R, K, 3)
    d = rs.draw_patterns(rng, g, p)
    rows = np.repeat(np.arange(len(g.n)), g.n)
    direct = (rng.random((R, len(rows), 3, parts)) < p[:, rows, :, None]).mean(-1)  # (R, rows, seeds)
    want_scores = g.psi * direct.sum(1)
    want_var = g.psi**2 * direct.var(-1, ddof=1).sum(1)
    for s in range(3):
        expected = g.psi * (g.n * p[0, :, s]).sum()
        _within(d.scores[:, s], expected, want_scores[:, s].std())
        _within(want_scores[:, s], expected, want_scores[:, s].std())
        assert d.scores[:, s].var() == pytest.approx(want_scores[:, s].var(), rel=0.06)
    _within(d.row_var, want_var.mean(), want_var.std())
    assert d.row_var.var() == pytest.approx(want_var.var(), rel=0.08)
    assert np.corrcoef(d.scores[:, 0], d.row_var)[0, 1] == pytest.approx(
        np.corrcoef(want_scores[:, 0], want_var)[0, 1], abs=0.03)


def test_paired_draw_keeps_the_model_marginal_and_the_paired_variance() -> None:
    """A claim's model drawn on its base's rows: its own counts are multinomial as if drawn alone, and the paired
    variance estimates V_T + V_B (independent decoding given the items)."""
    rng = np.random.default_rng(2)
    base, model = _group(1), rs.Group(100 / 60, 1, np.array([0.05, 0.5, 0.6, 0.95]), np.array([20, 15, 15, 10]))
    u = np.zeros((R, 3))
    counts = rs.draw_counts(rng, base, rs.seed_probs(base, u))
    joint = rs.draw_given(rng, counts, rs.seed_probs(model, u), 1)
    assert (joint.sum(-1) == counts).all()
    alone = rs.reduce(model, joint.sum(-2), 3)
    assert alone.scores[:, 0].mean() == pytest.approx(model.psi * (model.n * model.p).sum(), rel=0.01)
    assert alone.scores[:, 0].var() == pytest.approx(model.row_variance(), rel=0.05)
    paired = rs.paired_variance(model, joint, 3)
    assert paired.mean() == pytest.approx(base.row_variance() + model.row_variance(), rel=0.02)


def test_paired_variance_is_the_rows_sample_variance_of_the_differences() -> None:
    """On an explicit joint table: sum over rows of psi^2 var_s(model - base), rows expanded one by one."""
    g = rs.Group(2.0, 1, np.array([0.5]), np.array([4]))
    pats = rs.patterns(3, 1)  # (8, 3)
    joint = np.zeros((1, 1, 8, 8), dtype=int)
    pairs = [(0, 7), (3, 5), (6, 6), (1, 2)]  # (base pattern, model pattern) of 4 rows
    for a, b in pairs:
        joint[0, 0, a, b] += 1
    want = sum(2.0**2 * np.var(pats[b] - pats[a], ddof=1) for a, b in pairs)
    assert rs.paired_variance(g, joint, 3)[0] == pytest.approx(want)


@pytest.mark.parametrize("rho", [0.15, 0.5, 0.95, 1.0])
def test_fitted_rows_give_the_target_row_variance(rho: float) -> None:
    g = rs.fit_group(0.37, 1000, 0.1, 1, rho)
    assert g.rows == 1000
    assert (g.n * g.p).sum() / 1000 == pytest.approx(0.37, abs=1e-6)
    assert g.row_variance() == pytest.approx(rho * 0.1**2 * 1000 * 0.37 * 0.63, rel=1e-6)


@pytest.mark.parametrize("pbar", [0.1, 0.37, 0.62, 0.66, 0.7, 0.85, 0.9])
@pytest.mark.parametrize("rho", [0.1, 0.19, 0.5])
def test_fitted_rows_keep_the_mean_where_the_beta_is_dispersed(pbar: float, rho: float) -> None:
    """The bins' mean is the target mean at high means and small rho too (the top bins computed from above; before,
    a bin whose Beta quantiles rounded to 1.0 got probability 0: 65.4 came out 62.4 for realworldqa's 7B cells)."""
    g = rs.fit_group(pbar, 765, 100 / 765, 1, rho)
    assert (g.n * g.p).sum() / 765 == pytest.approx(pbar, abs=1e-9)
    assert g.row_variance() == pytest.approx(rho * (100 / 765) ** 2 * 765 * pbar * (1 - pbar), rel=1e-4)
    assert np.all(np.diff(g.p) >= -1e-12)  # bins ordered by probability


@pytest.mark.parametrize("per_model", [False, True])
def test_every_release_cell_is_simulated_at_its_release_mean(per_model: bool) -> None:
    """The fitted truth's expected score is the release's 3-seed mean in all 192 cells, under both truths (37 cells
    of the per-model truth were off, by up to 49 points, before the bins were computed from above)."""
    import tolerance_power as tp

    lay = tp.load_layout(None)
    truth = tp.fit_truth(lay, "fitted", per_model=per_model)
    expected = np.array([[float(c.expected_score()) for c in line] for line in truth.cells])
    np.testing.assert_allclose(expected, lay.seed_scores.mean(-1), atol=1e-6)


def test_the_release_canonical_side_is_the_release_s_seeds_moved_together() -> None:
    """``--canonical release``: every campaign's canonical seeds are the release's, shifted by one common offset
    per cell whose spread is the truth's (V + tau^2) / 3 (the posterior of the mean's error)."""
    import tolerance_power as tp

    lay = tp.load_layout(None)
    truth = tp.fit_truth(lay, "fitted")
    sim = tp.Simulator(lay, truth, 3, np.random.default_rng(5), canonical="release")
    m, b = lay.seed_scores.shape[:2]
    camp = tp.Campaigns(np.zeros((400, m, b, 3)), np.zeros((400, m, b, 3)), np.zeros((400, m, b)),
                        np.zeros((400, m, b, tp.GROUPS_MAX)), np.zeros((400, len(lay.claims), b)))
    for i in range(m):
        for j in range(b):
            sim._canonical(camp, i, j)  # what campaigns() draws for the canonical side
    offset = camp.canon - lay.seed_scores[None]
    np.testing.assert_allclose(offset.std(-1), 0.0, atol=1e-9)  # the release's own spread, untouched
    ratio = offset[..., 0].var(0) / ((truth.target_row + truth.target_tau) / 3)
    assert 0.75 < np.median(ratio) < 1.25


def test_seed_shift_gives_the_target_spread() -> None:
    """A cell fitted to row variance V and seed-level variance tau^2: its simulated seed scores spread by V + tau^2
    (the release's cell spread), and without the shift by V alone."""
    rng = np.random.default_rng(3)
    g = rs.fit_group(0.33, 1000, 0.1, 1, 0.8)
    cell = rs.Cell((g,))
    tau2 = 9.0
    eta = rs.fit_eta(cell, tau2)
    assert cell.seed_variance(eta) == pytest.approx(tau2, rel=1e-6)
    for shift, target in ((eta, g.row_variance() + tau2), (0.0, g.row_variance())):
        u = shift * rng.standard_normal((R, 3))
        scores = rs.draw_scores(rng, g, rs.seed_probs(g, u))
        assert scores.var(axis=1, ddof=1).mean() == pytest.approx(target, rel=0.05)


def test_the_vectorised_cell_rule_is_trace_libs_moderated_excess():
    """tolerance_power.moderated_cell (the simulation's rule) gives trace_lib's moderated_excess on random cells that
    take every branch: shrunk, prior-predictive outlier, own rows exceeded (ROWS_OUTLIER_LEVEL), no excess at all."""
    import math

    import tolerance_power as tp

    from trace_lib.aggregation.moderation import VariancePrior, trigamma
    from trace_lib.aggregation.verdict import moderated_excess

    rng = np.random.default_rng(4)
    cells, rows = 400, np.full(400, 1000.0)
    q0 = rng.uniform(0.2, 4.0, cells)
    prior = VariancePrior(4.0, {f"b{j}": float(q0[j]) for j in range(cells)}, 192, 168,
                          {f"b{j}": 8 for j in range(cells)}, trigamma(1.0))
    d_eff = np.array([prior.effective_prior_dof(f"b{j}") for j in range(cells)])
    mu = rng.uniform(20, 80, cells)
    scale = 1e4 * (mu / 100) * (1 - mu / 100) / 1000
    sd = np.sqrt(scale * rng.choice([0.3, 1.0, 3.0, 15.0], cells))
    repro = mu[:, None] + sd[:, None] * rng.standard_normal((cells, 3))
    canon = mu[:, None] + sd[:, None] * rng.standard_normal((cells, 3))
    v_r = scale * rng.uniform(0.2, 1.0, cells)
    v_c = v_r * rng.uniform(0.8, 1.2, cells)
    sim = tp.moderated_cell(repro[None, None], canon[None, None], v_r[None, None], v_c[None, None], rows,
                            tp.Prior(q0[None], d_eff[None], np.array([4.0])))
    branches = set()
    for j in range(cells):
        tau2, dof, ev = moderated_excess(repro[j], canon[j], float(v_r[j]), float(v_c[j]),
                                         tp.binomial_scale(repro[j].mean(), 1000), tp.binomial_scale(canon[j].mean(), 1000),
                                         prior, f"b{j}")
        assert sim.tau2[0, 0, j] == pytest.approx(tau2, rel=1e-9, abs=1e-12)
        want = tau2**2 / dof if tau2 > 0 and math.isfinite(dof) else 0.0
        assert sim.tau4[0, 0, j] == pytest.approx(want, rel=1e-9, abs=1e-12)
        branches.add("none" if tau2 == 0 else "prior" if ev["prior_outlier_p"] < 0.1 else
                     "rows" if dof == ev["f"] else "shrunk")
    assert branches == {"none", "prior", "rows", "shrunk"}


def test_the_vectorised_two_way_prior_is_trace_libs_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """tolerance_power.fit_prior with TWO_WAY gives fit_variance_prior's per-cell scale and effective dof (with
    members: the models) on random canonical sides, a zero-variance cell included (left out of both fits)."""
    import tolerance_power as tp

    from trace_lib.aggregation.moderation import fit_variance_prior

    rng = np.random.default_rng(9)
    m, b = 5, 6
    names = [f"b{j}" for j in range(b)]
    lay = tp.Layout([f"m{i}" for i in range(m)], names, {f"b{j}": 500 + 100 * j for j in range(b)}, {},
                    np.zeros((m, b, 3)), [], [], np.zeros(0), np.zeros((0, b)))
    canon = rng.uniform(20, 80, (m, b))[None, :, :, None] + rng.gamma(2, 1, (2, m, 1, 1)) * rng.standard_normal(
        (2, m, b, 3))
    canon[1, 2, 3] = 50.0
    monkeypatch.setattr(tp, "TWO_WAY", True)
    prior = tp.fit_prior(lay, canon)
    for r in range(2):
        q = canon[r].var(-1, ddof=1) / tp.binomial_scale(canon[r].mean(-1), np.array([lay.rows[x] for x in names]))
        groups = {f"b{j}": [(float(q[i, j]), 2) for i in range(m)] for j in range(b)}
        fit = fit_variance_prior(groups, {f"b{j}": lay.models for j in range(b)})
        assert prior.d0[r] == pytest.approx(fit.prior_dof, rel=1e-9)
        for i in range(m):
            for j in range(b):
                assert prior.q0[r, i, j] == pytest.approx(fit.prior_q(f"b{j}", f"m{i}"), rel=1e-9)
                assert prior.d_eff[r, i, j] == pytest.approx(fit.effective_prior_dof(f"b{j}", f"m{i}"), rel=1e-9)


def test_the_truncated_candidate_is_the_moderated_t_uncut_and_the_rows_variance_below_them() -> None:
    """``--satterthwaite truncated``: nothing cut (V -> 0): exactly ``q_post scale`` on the posterior dof; a
    posterior far below V: the cut's Pareto-like tail just above V (mean V (nu/2 + 1) / (nu/2)), on many dof; in
    between the total lies above both V and ``q_post scale``."""
    import tolerance_power as tp

    q, dof, scale = np.array([0.5, 0.5, 0.5]), np.array([9.0, 9.0, 9.0]), np.array([4.0, 4.0, 4.0])
    total, nu = tp.truncated_posterior(q, dof, scale, np.array([1e-9, 200.0, 2.0]))
    assert total[0] == pytest.approx(2.0, rel=1e-9) and nu[0] == pytest.approx(9.0, rel=1e-6)
    assert total[1] == pytest.approx(200.0 * 5.5 / 4.5, rel=0.01) and nu[1] > 40
    assert total[2] > 2.0 and nu[2] > 9.0
    known, inf = tp.truncated_posterior(q[:1], np.array([np.inf]), scale[:1], np.array([3.0]))
    assert known[0] == 3.0 and np.isinf(inf[0])
