"""The score difference that sampling alone explains between two single-seed runs of one slice."""

from __future__ import annotations

import math
from typing import Any

from trace_lib.aggregation.tolerance import budget_verdict
from trace_lib.diagnose.views import SliceKey
from trace_lib.errors import UsageError


def sampling_band(rule: Any, key: SliceKey) -> float | None:
    """The tolerance rule's band for ``key`` with factor ``sqrt(1/1 + 1/1)`` (two independent single-seed runs of
    the slice), at the rule's per-test critical values; ``None`` when the release has no canonical value for it."""
    try:
        sigma = rule.slice_sigma(key.model, key.benchmark)
    except UsageError:
        return None
    return budget_verdict(rule.budget, subject=key.id, reproduced=0.0, canonical=0.0, factor=math.sqrt(2.0),
                          sigma=sigma, canonical_seeds=1).band
