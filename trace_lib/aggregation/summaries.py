"""Aggregates of per-seed benchmark scores, exactly as the release computes them (eval-campaign.md §6.3).

Input is a plain mapping ``{(model_id, seed, benchmark_id): score}`` (percent floats) plus the
:class:`~trace_lib.release.suite.Suite`, which names the benchmarks and their categories. Every mean is
``statistics.fmean`` and every spread the sample ``statistics.stdev`` (n-1) over seeds, 0.0 below two values; both
are exact-rounded sums, so input order never changes a result. Nothing is rounded. A (model, seed) that lacks a
suite benchmark raises :class:`MissingScoresError` naming every missing key (never a silent partial mean).

    scores = {("m", 42, "mmstar"): 51.2, ...}
    overall = overall_scores(scores, suite)              # {("m", 42): ...}
    summary = overall_summaries(overall)["m"]             # Summary(mean, stddev, count)
    delta = overall_delta(scores, "trace-m", "m", suite)  # PairedDelta(seed_values, summary)
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable, Hashable, Iterable, Mapping, Sequence, TypeVar

from trace_lib.errors import TraceReproError
from trace_lib.release.suite import Suite

#: (model_id, seed, benchmark_id)
ScoreKey = tuple[str, int, str]

#: Absolute tolerance the release's own validators use when comparing recomputed aggregates.
ABS_TOLERANCE = 1e-10

K = TypeVar("K", bound=Hashable)


class MissingScoresError(TraceReproError):
    """Scores needed for an aggregate are absent; ``missing`` lists every absent key."""

    def __init__(self, missing: Sequence[tuple[object, ...]], *, what: str) -> None:
        self.missing = tuple(missing)
        shown = ", ".join(str(k) for k in self.missing[:5]) + (" ..." if len(self.missing) > 5 else "")
        super().__init__(f"cannot compute {what}: {len(self.missing)} score(s) missing: {shown}")


@dataclass(frozen=True)
class Summary:
    """Mean and sample standard deviation of ``count`` values."""

    mean: float
    stddev: float
    count: int


@dataclass(frozen=True)
class PairedDelta:
    """Per-seed differences model - base and their summary."""

    seed_values: Mapping[int, float]
    summary: Summary


def close(a: float, b: float, *, abs_tol: float = ABS_TOLERANCE) -> bool:
    """Whether two aggregates agree within the release's absolute tolerance."""
    return math.isclose(a, b, rel_tol=0.0, abs_tol=abs_tol)


def summarize(values: Iterable[float]) -> Summary:
    """``statistics.fmean`` and sample ``statistics.stdev`` of ``values`` (stddev 0.0 for fewer than two).

    Raises:
        ValueError: ``values`` is empty.
    """
    data = list(values)
    if not data:
        raise ValueError("cannot summarize no values")
    stddev = statistics.stdev(data) if len(data) >= 2 else 0.0
    return Summary(statistics.fmean(data), stddev, len(data))


def _model_seeds(scores: Mapping[ScoreKey, float]) -> dict[str, list[int]]:
    seeds: dict[str, set[int]] = {}
    for model, seed, _ in scores:
        seeds.setdefault(model, set()).add(seed)
    return {model: sorted(found) for model, found in seeds.items()}


def _require(scores: Mapping[ScoreKey, float], keys: Iterable[ScoreKey], what: str) -> None:
    missing = [k for k in keys if k not in scores]
    if missing:
        raise MissingScoresError(missing, what=what)


def category_scores(scores: Mapping[ScoreKey, float], suite: Suite) -> dict[tuple[str, int, str], float]:
    """``(model, seed, category) -> mean`` of the seed's scores on the category's benchmarks, for every
    (model, seed) present in ``scores``, in suite category order.

    Raises:
        MissingScoresError: a present (model, seed) lacks a benchmark of some category.
    """
    out: dict[tuple[str, int, str], float] = {}
    for model, seeds in _model_seeds(scores).items():
        for seed in seeds:
            for category, members in suite.categories.items():
                keys = [(model, seed, b) for b in members]
                _require(scores, keys, f"category score {model}/{seed}/{category}")
                out[(model, seed, category)] = statistics.fmean(scores[k] for k in keys)
    return out


def overall_scores(scores: Mapping[ScoreKey, float], suite: Suite) -> dict[tuple[str, int], float]:
    """``(model, seed) -> unweighted mean`` of the seed's scores on every suite benchmark (rows do not weight).

    Raises:
        MissingScoresError: a present (model, seed) lacks a suite benchmark.
    """
    out: dict[tuple[str, int], float] = {}
    for model, seeds in _model_seeds(scores).items():
        for seed in seeds:
            keys = [(model, seed, b) for b in suite.keys]
            _require(scores, keys, f"overall score {model}/{seed}")
            out[(model, seed)] = statistics.fmean(scores[k] for k in keys)
    return out


def benchmark_summaries(scores: Mapping[ScoreKey, float], suite: Suite) -> dict[tuple[str, str], Summary]:
    """``(model, benchmark) -> Summary`` over the model's seeds, for every suite benchmark.

    Raises:
        MissingScoresError: some seed of the model lacks the benchmark.
    """
    out: dict[tuple[str, str], Summary] = {}
    for model, seeds in _model_seeds(scores).items():
        for bench in suite.keys:
            keys = [(model, s, bench) for s in seeds]
            _require(scores, keys, f"benchmark summary {model}/{bench}")
            out[(model, bench)] = summarize(scores[k] for k in keys)
    return out


def _summaries_by(per_seed: Mapping[K, float], group: Callable[[K], Hashable]) -> dict[Hashable, Summary]:
    grouped: dict[Hashable, list[float]] = {}
    for key, value in per_seed.items():
        grouped.setdefault(group(key), []).append(value)
    return {name: summarize(values) for name, values in grouped.items()}


def category_summaries(categories: Mapping[tuple[str, int, str], float]) -> dict[tuple[str, str], Summary]:
    """``(model, category) -> Summary`` over seeds of :func:`category_scores` output."""
    return _summaries_by(categories, lambda k: (k[0], k[2]))


def overall_summaries(overall: Mapping[tuple[str, int], float]) -> dict[str, Summary]:
    """``model -> Summary`` over seeds of :func:`overall_scores` output."""
    return _summaries_by(overall, lambda k: k[0])


def paired_delta(per_seed: Mapping[tuple[str, int], float], model: str, base: str) -> PairedDelta:
    """Seed-paired ``value[model, s] - value[base, s]`` over the seeds both share, and their Summary.

    Raises:
        MissingScoresError: the two models were not scored on the same seeds.
    """
    model_seeds = sorted(s for m, s in per_seed if m == model)
    base_seeds = sorted(s for m, s in per_seed if m == base)
    if model_seeds != base_seeds or not model_seeds:
        wanted = {(model, x) for x in base_seeds} | {(base, x) for x in model_seeds}
        missing = sorted((k for k in wanted if k not in per_seed), key=str) or [(model,), (base,)]
        raise MissingScoresError(missing, what=f"paired delta {model} - {base}")
    deltas = {s: per_seed[(model, s)] - per_seed[(base, s)] for s in model_seeds}
    return PairedDelta(deltas, summarize(deltas.values()))


def benchmark_deltas(
    scores: Mapping[ScoreKey, float], model: str, base: str, suite: Suite
) -> dict[str, PairedDelta]:
    """``benchmark -> PairedDelta`` of ``model`` against ``base``, paired by seed, in suite order.

    Raises:
        MissingScoresError: a seed of either model lacks a suite benchmark, or their seeds differ.
    """
    out: dict[str, PairedDelta] = {}
    for bench in suite.keys:
        per_seed = {(m, s): v for (m, s, b), v in scores.items() if b == bench and m in (model, base)}
        out[bench] = paired_delta(per_seed, model, base)
    return out


def overall_delta(scores: Mapping[ScoreKey, float], model: str, base: str, suite: Suite) -> PairedDelta:
    """PairedDelta of the overall scores of ``model`` and ``base`` (= per-seed mean of benchmark deltas).

    Raises:
        MissingScoresError: see :func:`overall_scores` and :func:`paired_delta`.
    """
    subset = {k: v for k, v in scores.items() if k[0] in (model, base)}
    return paired_delta(overall_scores(subset, suite), model, base)
