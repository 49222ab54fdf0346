"""False alarms and power of the TRACE-validation verdict (``trace_lib.validation.tolerance``), simulated per row.

The verdict: ``|reproduced - canonical| <= z_a * sqrt(2) * SE_bin(canonical)``, one test per suite model, ``z_a``
at the Šidák per-test level of ``--alpha`` over the suite's models. Simulation model:

- Each model is ``evaluated_rows`` rows with per-row success probabilities p_i: a Beta around the release's score
  whose dispersion makes the rows' mean Bernoulli variance ``rho`` times the binomial one (``rho = 1``: every row
  at the mean, the worst case for the band; smaller ``rho``: rows that are easier or harder than others, which a
  single draw cannot see), binned (``benchmarks/_rowsim.py``, 32 bins).
- A campaign draws the canonical side and the reproduced side independently from the same rows (one draw each,
  seed 42 at temperature 0.6 on both sides), and applies the band computed from the *drawn* canonical score, as the
  release's own score is one draw. Faithful campaigns give the false-alarm rate; a shift of the reproduced side's
  rows (on the logit scale, to move its mean by D points) gives the power.
- ``--check N``: N campaigns' verdicts recomputed by ``check_validation_score`` itself; any disagreement with the
  vectorised rule is printed and the script exits 1.

    PYTHONPATH=$PWD python3 benchmarks/validation_band_power.py [--campaigns 20000] [--alpha 0.05]
        [--rho 1,0.5,0.25] [--shifts 2,3,4,5,8] [--check 200] [--seed 0]

Printed: per rho, the family-wise P(any model fails) on faithful campaigns (Clopper-Pearson 95%) and each model's
own rate; per rho and model, P(fail) when that model's reproduced accuracy is D points lower or higher, and when it
scores 0.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import numpy as np
from scipy import optimize, special

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _rowsim as rs  # noqa: E402
from tolerance_power import fmt_rate as rate  # noqa: E402

from trace_lib.release.locate import locate_release  # noqa: E402
from trace_lib.release.validation_suite import ReleaseScore, load_release_scores  # noqa: E402
from trace_lib.validation.tolerance import check_validation_score, validation_criterion  # noqa: E402


def logit_shift_for(group: rs.Group, points: float) -> float:
    """The logit shift of every row that moves the group's mean by ``points`` (percentage points)."""
    base = float((group.n * group.p).sum() / group.rows)
    target = base + points / 100.0
    if not 0.0 < target < 1.0:
        raise ValueError(f"a shift of {points:+g} points leaves [0, 100] from {100 * base:.2f}")

    def mean_at(u: float) -> float:
        return float((group.n * special.expit(special.logit(group.p) + u)).sum() / group.rows) - target

    return float(optimize.brentq(mean_at, -40.0, 40.0, xtol=1e-12))


def draw(rng: np.random.Generator, group: rs.Group, campaigns: int, u: float = 0.0) -> np.ndarray:
    """(campaigns,) accuracies in percent of one draw of every row (the rows' logit moved by ``u``)."""
    p = special.expit(special.logit(group.p) + u)
    hits = rng.binomial(group.n[None, :], p[None, :], size=(campaigns, len(group.n)))
    return 100.0 * hits.sum(axis=1) / group.rows


def bands(canonical: np.ndarray, rows: int, z: float) -> np.ndarray:
    """The verdict's band at each drawn canonical accuracy (``z * sqrt(2) * SE_bin``)."""
    p = np.clip(canonical / 100.0, 0.0, 1.0)
    return z * math.sqrt(2.0) * 100.0 * np.sqrt(p * (1.0 - p) / rows)


def fails(reproduced: np.ndarray, canonical: np.ndarray, rows: int, z: float) -> np.ndarray:
    return np.abs(reproduced - canonical) > bands(canonical, rows, z)


def check_against_trace_lib(model: str, rows: int, reproduced: np.ndarray, canonical: np.ndarray, criterion,
                            expected: np.ndarray) -> int:  # noqa: ANN001
    """How many of these campaigns ``check_validation_score`` judges otherwise than the vectorised rule."""
    wrong = 0
    for rep, can, fail in zip(reproduced, canonical, expected):
        verdict = check_validation_score(ReleaseScore(model, model, rows, float(can)), float(rep), rows=rows,
                                         criterion=criterion)
        if verdict.ok == bool(fail):
            wrong += 1
            print(f"  check: {model} reproduced {rep} canonical {can}: trace_lib ok={verdict.ok}, "
                  f"simulation fail={bool(fail)}")
    return wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=20000)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--rho", default="1,0.5,0.25", help="row variance over the binomial one (comma-separated)")
    parser.add_argument("--shifts", default="2,3,4,5,8", help="points the reproduced accuracy moves (power)")
    parser.add_argument("--check", type=int, default=200, help="campaigns per model judged by trace_lib too")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace-root", default=os.environ.get("TRACE_ROOT"))
    args = parser.parse_args(argv)
    release = locate_release(args.trace_root)
    scores = load_release_scores(release)
    criterion = validation_criterion(release, alpha=args.alpha)
    z = criterion.binomial_z()
    rhos = [float(r) for r in args.rho.split(",")]
    shifts = [float(s) for s in args.shifts.split(",")]
    rng = np.random.default_rng(args.seed)
    n = args.campaigns
    print(f"release: {release.label}; {len(scores)} models; alpha {args.alpha:g} over {criterion.family_size} "
          f"tests: per-test {criterion.per_test_alpha:.4g}, z {z:.4f}; {n} campaigns per cell")
    mismatches = 0
    for rho in rhos:
        groups = {m: rs.fit_group(s.score / 100.0, s.evaluated_rows, 100.0 / s.evaluated_rows, 1, rho)
                  for m, s in scores.items()}
        any_fail = np.zeros(n, dtype=bool)
        own = {}
        for model, group in groups.items():
            rows = scores[model].evaluated_rows
            canonical, reproduced = draw(rng, group, n), draw(rng, group, n)
            failed = fails(reproduced, canonical, rows, z)
            own[model] = int(failed.sum())
            any_fail |= failed
            k = min(args.check, n)
            mismatches += check_against_trace_lib(model, rows, reproduced[:k], canonical[:k], criterion, failed[:k])
        print(f"\nrho {rho:g}: faithful campaigns, P(any of {len(groups)} fails) = {rate(int(any_fail.sum()), n)} "
              f"(budget {args.alpha:g})")
        print("| model | score | band at the release's score (pp) | P(fail), faithful | "
              + " | ".join(f"P(fail), {s:+g} / {-s:+g} pp" for s in shifts) + " | P(fail), scores 0 |")
        print("|---|---|---|---|" + "---|" * len(shifts) + "---|")
        for model, group in groups.items():
            s = scores[model]
            cells = []
            for shift in shifts:
                pair = []
                for points in (shift, -shift):
                    u = logit_shift_for(group, points)
                    canonical, reproduced = draw(rng, group, n), draw(rng, group, n, u)
                    pair.append(float(fails(reproduced, canonical, s.evaluated_rows, z).mean()))
                cells.append(f"{pair[0]:.3f} / {pair[1]:.3f}")
            zero = float(fails(np.zeros(n), draw(rng, group, n), s.evaluated_rows, z).mean())
            band = float(bands(np.array([s.score]), s.evaluated_rows, z)[0])
            print(f"| {model} | {s.score:.2f} | {band:.3f} | {own[model] / n:.4f} | " + " | ".join(cells)
                  + f" | {zero:.3f} |")
    checked = min(args.check, n) * len(scores) * len(rhos)
    print(f"\ncheck against trace_lib's check_validation_score: {checked - mismatches}/{checked} campaigns agree")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
