"""The TRACE-validation tolerance: a binomial-only band around the release's single seed-42 score.

The release reports one draw per model (seed 42, temperature 0.6) over ``evaluated_rows`` rows, and a reproduction
is another draw, so the band is ``z * sqrt(1/1 + 1/1) * SE_bin`` with ``SE_bin = 100*sqrt(p(1-p)/rows)`` at the
canonical ``p`` (no seed pool: the release has no seed spread for this table). This composes the shared rule's
pieces (:func:`trace_lib.aggregation.tolerance.binomial_se`, ``Sigma``, ``Verdict``) so the verdict reads and
records exactly like an evaluation slice's. Rows and score come from ``results.v1.json`` at run time.
"""

from __future__ import annotations

import math

from trace_lib.aggregation.tolerance import DEFAULT_Z, Sigma, Verdict, binomial_se
from trace_lib.errors import UsageError
from trace_lib.validation.suite import ReleaseScore


def check_validation_score(
    canonical: ReleaseScore, reproduced_percent: float, *, rows: int, z: float = DEFAULT_Z
) -> Verdict:
    """Judge a reproduced validation accuracy (percent over ``rows``) against the release's score.

    Raises:
        UsageError: ``z`` is not a positive finite number.
    """
    if not (math.isfinite(z) and z > 0):
        raise UsageError("z must be a positive number", field="--tolerance-z", found=z)
    factor = math.sqrt(1.0 / 1 + 1.0 / 1)
    sigma = Sigma(binomial=binomial_se(float(canonical.score), int(canonical.evaluated_rows)), seed_pool=0.0)
    return Verdict(
        subject=f"{canonical.model_id}-validation",
        reproduced=float(reproduced_percent),
        canonical=float(canonical.score),
        delta=float(reproduced_percent) - float(canonical.score),
        band=z * factor * sigma.value,
        z=float(z),
        factor=factor,
        sigma=sigma,
        reproduced_seeds=1,
        canonical_seeds=1,
        rows=rows,
        expected_rows=int(canonical.evaluated_rows),
    )
