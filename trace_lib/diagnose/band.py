"""The score difference that sampling alone explains between two single-seed runs of one slice."""

from __future__ import annotations

import math
from typing import Any

from trace_lib.diagnose.views import SliceKey
from trace_lib.errors import UsageError


def sampling_band(rule: Any, key: SliceKey) -> float | None:
    """``sqrt(2) * max(z_bin * sigma_bin, t_pool * sigma_pool)`` with the critical values of the release's tolerance
    rule (its fixed ``z`` or its family-wise budget) for ``key`` (two independent single-seed runs, each with the
    slice's sigma), or ``None`` when the release has no canonical value for the model/benchmark."""
    try:
        sigma = rule.slice_sigma(key.model, key.benchmark)
    except UsageError:
        return None
    crit = rule.budget
    return math.sqrt(2.0) * max(crit.binomial_z() * sigma.binomial, crit.pool_t(sigma.pool_dof) * sigma.seed_pool)
