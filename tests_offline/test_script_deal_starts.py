"""benchmarks/deal_starts.py: the deal counting engine starts against the deal by rows alone, by the estimate's
arithmetic on the pinned release (docs/performance.md: 39.7 against 41.4 min on 8 GPUs)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import deal_starts as ds  # noqa: E402

from trace_lib.campaign.estimate import DEFAULT_RATES  # noqa: E402

pytestmark = pytest.mark.offline


def test_counting_starts_shortens_the_8_gpu_paper_campaign_and_leaves_one_gpu_alone(release):
    one, eight = ds.rows_for(release, None, [42, 43, 44], [1, 8], os.devnull, "new-model")
    assert one["ratio"] == pytest.approx(1.0) and one["start_s"]["counted"] == one["start_s"]["by_rows"]
    warm_two = DEFAULT_RATES.engine_start_s + DEFAULT_RATES.start_extra("new-model")
    assert eight["start_s"]["counted"] == pytest.approx(warm_two)  # one start: each worker holds one model
    assert eight["start_s"]["by_rows"] > 2 * warm_two  # the engine that finishes last starts three models
    assert (round(eight["generation_s"]["by_rows"] / 60, 1), round(eight["generation_s"]["counted"] / 60, 1)) == (
        41.4, 39.7)
    assert round(eight["ratio"], 2) == 1.04


def test_bad_gpu_counts_are_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        ds.main(["--gpus", "0"])
    assert exit_.value.code == 2 and "--gpus: each count at least 1" in capsys.readouterr().err
