"""benchmarks/validation_band_power.py: its vectorised rule is trace_lib's validation verdict, its shift moves the
mean by what it says, and a homogeneous truth gives the budget's false-alarm rate."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import _rowsim as rs  # noqa: E402
import validation_band_power as vbp  # noqa: E402


def test_the_vectorised_rule_is_check_validation_score_at_and_around_the_band_edge(release):
    from trace_lib.release.validation_suite import ReleaseScore
    from trace_lib.validation.tolerance import check_validation_score, validation_criterion

    criterion = validation_criterion(release)
    z, rows, canonical = criterion.binomial_z(), 2000, 41.05
    band = float(vbp.bands(np.array([canonical]), rows, z)[0])
    assert band == pytest.approx(check_validation_score(ReleaseScore("m", "m", rows, canonical), canonical,
                                                        rows=rows, criterion=criterion).band, rel=1e-12)
    reproduced = canonical + np.array([-band * 1.001, -band * 0.999, 0.0, band * 0.999, band * 1.001])
    simulated = vbp.fails(reproduced, np.full(5, canonical), rows, z)
    assert simulated.tolist() == [True, False, False, False, True]
    assert vbp.check_against_trace_lib("m", rows, reproduced, np.full(5, canonical), criterion, simulated) == 0
    assert vbp.check_against_trace_lib("m", rows, reproduced, np.full(5, canonical), criterion, ~simulated) == 5


@pytest.mark.parametrize("rho", [1.0, 0.3])
def test_the_shift_moves_the_rows_mean_by_the_points_asked(rho):
    group = rs.fit_group(0.4105, 2000, 100 / 2000, 1, rho)
    for points in (-5.0, 3.0):
        u = vbp.logit_shift_for(group, points)
        shifted = (group.n * vbp.special.expit(vbp.special.logit(group.p) + u)).sum() / group.rows
        assert 100 * shifted == pytest.approx(41.05 + points, abs=1e-8)
    with pytest.raises(ValueError, match="leaves"):
        vbp.logit_shift_for(group, -45.0)


def test_a_homogeneous_truth_spends_the_budget_and_the_script_checks_itself(release, capsys):
    code = vbp.main(["--campaigns", "4000", "--rho", "1", "--shifts", "5", "--check", "20", "--seed", "3",
                     "--trace-root", str(release.path)])
    out = capsys.readouterr().out
    assert code == 0 and "check against trace_lib's check_validation_score: 160/160 campaigns agree" in out
    line = next(x for x in out.splitlines() if x.startswith("rho 1: faithful campaigns"))
    rate = float(line.split("= ")[1].split()[0])
    assert 0.035 < rate < 0.065, line  # 4,000 campaigns: the budget 0.05 +- 4.3 standard errors
