"""The score difference that sampling alone explains between two single-seed runs of one slice."""

from __future__ import annotations

from typing import Any

from trace_lib.aggregation.verdict import sampling_band as _band
from trace_lib.diagnose.views import SliceKey


def sampling_band(verdicts: Any, key: SliceKey) -> float | None:
    """``verdicts`` = (canonical, rule): the verdict rule's band for ``key`` between two independent single-seed
    runs (:func:`trace_lib.aggregation.verdict.sampling_band`); ``None`` when the release has no canonical value."""
    canonical, rule = verdicts
    return _band(canonical, rule, key.model, key.benchmark)
