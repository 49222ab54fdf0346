"""The TRACE-validation tolerance: a binomial-only band around the release's single seed-42 score.

The release reports one draw per model (seed 42, temperature 0.6) over ``evaluated_rows`` rows, and a reproduction
is another draw, so the band is ``z_a * sqrt(1/1 + 1/1) * SE_bin`` with ``SE_bin = 100*sqrt(p(1-p)/rows)`` at the
canonical ``p`` (no seed pool: the release has no seed spread for this table; ``SE_bin`` bounds a mean of
independent row credits, so no t correction is due). ``z_a`` is the normal critical value of the Šidák per-test
level that spreads the family-wise budget ``alpha`` over the validation's planned family, one test per suite model
(8), whatever ``--model`` selects (:mod:`trace_lib.aggregation.budget`); ``--tolerance-z`` overrides it. This
composes the shared rule's pieces so the verdict reads and records exactly like an evaluation slice's. Rows and
score come from ``results.v1.json`` at run time.
"""

from __future__ import annotations

import math

from trace_lib.aggregation.budget import DEFAULT_ALPHA, Criterion
from trace_lib.aggregation.tolerance import DEFAULT_Z, Sigma, Verdict, binomial_se, budget_verdict
from trace_lib.release.locate import ReleaseRoot
from trace_lib.release.validation_suite import ReleaseScore, load_validation_suite


def validation_criterion(release: ReleaseRoot, *, alpha: float = DEFAULT_ALPHA, z: float | None = None) -> Criterion:
    """The budget over the validation plan's family: one test per model of the release's validation suite."""
    family = len(load_validation_suite(release).models)
    return Criterion.from_z(z, family) if z is not None else Criterion.from_alpha(alpha, family)


def check_validation_score(
    canonical: ReleaseScore, reproduced_percent: float, *, rows: int, z: float | None = None,
    criterion: Criterion | None = None,
) -> Verdict:
    """Judge a reproduced validation accuracy (percent over ``rows``) against the release's score, under
    ``criterion`` (or the bare fixed ``z``, default the pre-budget 3).

    Raises:
        UsageError: neither ``criterion`` nor a positive finite ``z``.
    """
    if criterion is None:
        criterion = Criterion.from_z(DEFAULT_Z if z is None else z, 1)
    sigma = Sigma(binomial=binomial_se(float(canonical.score), int(canonical.evaluated_rows)), seed_pool=0.0)
    return budget_verdict(
        criterion, subject=f"{canonical.model_id}-validation", reproduced=float(reproduced_percent),
        canonical=float(canonical.score), factor=math.sqrt(1.0 / 1 + 1.0 / 1), sigma=sigma, reproduced_seeds=1,
        canonical_seeds=1, rows=rows, expected_rows=int(canonical.evaluated_rows),
    )
