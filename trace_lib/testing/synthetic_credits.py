"""Row-level synthetic campaigns for the verdict tests: per-row success probabilities drawn around each cell's
canonical mean, Bernoulli credits per seed, optional zeroed cells, shifts and seed-level shocks."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np

from trace_lib.aggregation.canonical import Canonical, mean
from trace_lib.aggregation.credits import CreditTable

#: Per-row probabilities are Beta(c * m, c * (1 - m)) around the cell mean m: c = 2 gives the release's typical
#: row-level variance (about 0.4 of the binomial bound).
CONCENTRATION = 2.0


def row_probabilities(m: float, rows: int, rng: np.random.Generator, concentration: float = CONCENTRATION) -> np.ndarray:
    """Per-row probabilities whose mean is ``m`` itself (the items are the paper's: no item-sampling error), 0 or 1
    everywhere at the ends."""
    if m <= 0.0 or m >= 1.0:
        return np.full(rows, min(max(m, 0.0), 1.0))
    p = rng.beta(concentration * m, concentration * (1 - m), rows)
    for _ in range(20):  # shift to the exact mean, staying inside [0, 1]
        p = np.clip(p + (m - p.mean()), 0.0, 1.0)
    return p


def synthetic_credits(
    canonical: Canonical,
    cells: Iterable[tuple[str, str]],
    *,
    seeds: Sequence[int] = (42, 43, 44),
    rng: np.random.Generator,
    means: Mapping[tuple[str, str], float] | None = None,
    shock: Mapping[tuple[str, str], float] | None = None,
    probabilities: Mapping[tuple[str, str], np.ndarray] | None = None,
) -> CreditTable:
    """Credits of ``cells`` (mean-aggregate benchmarks) over ``seeds``: each row's probability drawn around the cell's
    ``means`` entry (percent; default the canonical mean) or taken from ``probabilities``; ``shock[cell]``: a
    seed-level shift of every row's probability (normal, that stddev in probability units) shared by the rows of a
    seed (overdispersion)."""
    columns: dict[str, list[np.ndarray]] = {k: [] for k in ("model_id", "seed", "benchmark_id", "index", "credit")}
    for model, bench in cells:
        n = canonical.rows(bench)
        given = (probabilities or {}).get((model, bench))
        if given is None:
            m = (means or {}).get((model, bench), mean(canonical.benchmarks[(model, bench)])) / 100.0
            given = row_probabilities(m, n, rng)
        for seed in seeds:
            p = given + ((rng.normal(0.0, (shock or {})[(model, bench)])) if (model, bench) in (shock or {}) else 0.0)
            credit = (rng.random(n) < np.clip(p, 0.0, 1.0)).astype(float)
            columns["model_id"].append(np.full(n, model, dtype=object))
            columns["seed"].append(np.full(n, seed))
            columns["benchmark_id"].append(np.full(n, bench, dtype=object))
            columns["index"].append(np.array([str(i) for i in range(n)], dtype=object))
            columns["credit"].append(credit)
    cat = {k: np.concatenate(v) for k, v in columns.items()}
    return CreditTable(cat["model_id"], cat["seed"].astype(np.int64), cat["benchmark_id"], cat["index"], cat["credit"])
