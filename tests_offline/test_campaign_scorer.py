"""The campaign scorer's start order (trace_lib.campaign.scorer.judge_heavy_first): the benchmarks implying the most
judge requests per row start first, so their long ladders are not a campaign's tail; ties keep the given order."""

from __future__ import annotations

import pytest

from trace_lib.campaign.scorer import judge_heavy_first
from trace_lib.slices import Slice

pytestmark = pytest.mark.offline


def test_the_judge_heaviest_benchmarks_start_first_and_ties_keep_their_order():
    given = [Slice("m", seed, bench) for bench in ("realworldqa", "mmstar", "erqa", "mathverse", "mme_reasoning")
             for seed in (42, 43)]
    ordered = judge_heavy_first(given)
    # judge requests per row: mathverse 1.75, mme_reasoning 1.38, erqa 1.0, mmstar 0.2 (fallback), realworldqa 0
    assert [s.benchmark for s in ordered[::2]] == ["mathverse", "mme_reasoning", "erqa", "mmstar", "realworldqa"]
    assert [s.seed for s in ordered] == [42, 43] * 5
    assert sorted(ordered, key=given.index) == given  # a permutation: nothing dropped or repeated
