"""benchmarks/mini_campaign.py: the calibration a measured run writes, read back by ``plan --estimate``.

Figures are run 33's phased design (docs/performance.md: 2,048 rows, 1,103 judge requests, answers capped at 32
tokens); with its own rates and the requests it made, the estimate's arithmetic must give back its wall clock.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import mini_campaign as mc  # noqa: E402

from trace_lib.campaign.estimate import SliceWork, estimate, load_rates, record_calibration  # noqa: E402

PHASED = {"design": "phased", "rows": 2048, "output_tokens": 462848, "engine_start_s": 36.06,
          "all_engines_up_s": 36.06, "generation_s": 42.70, "judge_scoring_s": 53.60, "judge_requests": 1103,
          "judge_answer_tokens": 32, "e2e_s": 132.36}
STAMP = {"measured_by": "test", "measured_at": "2026-12-03T16:49:06+00:00"}


def test_a_capped_judge_run_records_the_judges_rate_and_an_uncapped_one_does_not():
    capped = mc.calibration_sections({"phased": PHASED}, PHASED, "1", STAMP)
    assert set(capped) == {"mini_campaign", "generation_3b", "judge"}
    assert capped["judge"]["requests_per_s"] == pytest.approx(1103 / 53.60, abs=0.01)
    assert capped["generation_3b"]["one_engine_rows_per_s"] == pytest.approx(2048 / 42.70, abs=0.01)
    assert capped["generation_3b"]["max_tokens"] == 226
    uncapped = {**PHASED, "judge_answer_tokens": None}
    assert "judge" not in mc.calibration_sections({"phased": uncapped}, uncapped, "1", STAMP)
    two = mc.calibration_sections({"phased": PHASED}, PHASED, "2", STAMP)["generation_3b"]
    assert {"rows_per_s", "start_s"} <= set(two) and "one_engine_rows_per_s" not in two


def test_the_estimate_with_a_runs_own_rates_gives_back_its_wall_clock(tmp_path):
    path = tmp_path / "calibration.json"
    for name, values in mc.calibration_sections({"phased": PHASED}, PHASED, "1", STAMP).items():
        record_calibration(path, name, values)
    rates = load_rates(path)
    assert rates.judge_requests_per_s == pytest.approx(20.58, abs=0.01)
    assert (rates.one_engine_rows_per_s["3b"], rates.one_engine_start_s) == (47.96, 36.1)
    work = [SliceWork("mini-3b", "3b", 256, 1103 / 8) for _ in range(8)]
    est = estimate(work, rates, gpus=1, output_tokens=226, engines_per_gpu=1)
    without_judge_start = est.total_s - est.phase("judge").start_s  # the judge was up before the design started
    assert without_judge_start == pytest.approx(PHASED["e2e_s"], rel=0.01)
