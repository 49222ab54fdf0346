"""The release's canonical numbers a verdict compares against: per-seed scores and the paper's comparisons.

Read from ``results.json`` (``scores.benchmark_scores``/``category_scores``/``overall_scores`` per seed, and
``comparisons``: each claim "model minus its base", paired by benchmark and decoding seed) and ``suite.v1.json``
(benchmarks, rows, categories). Category deltas of a comparison are not in the release; they are the per-seed
differences of the two models' canonical category scores (the same pairing the release uses).
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass
from typing import Any, Mapping

from trace_lib.errors import ReleaseFileError
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot
from trace_lib.release.suite import Suite, load_suite

#: Per-seed values: ``{seed: value}``.
SeedValues = Mapping[int, float]


@dataclass(frozen=True)
class Comparison:
    """One of the paper's claims: ``model - base``, per benchmark, category and overall, per seed."""

    model_id: str
    base_model_id: str
    benchmarks: Mapping[str, SeedValues]
    overall: SeedValues

    @property
    def comparison_id(self) -> str:
        """The claim's test-id stem, e.g. ``trace-qwen2.5-vl-3b-vs-qwen2.5-vl-3b-base``."""
        return f"{self.model_id}-vs-{self.base_model_id}"


@dataclass(frozen=True, eq=False)
class Canonical:
    """The release side of every verdict."""

    suite: Suite
    benchmarks: Mapping[tuple[str, str], SeedValues]  # (model, benchmark)
    categories: Mapping[tuple[str, str], SeedValues]  # (model, category)
    overall: Mapping[str, SeedValues]
    comparisons: tuple[Comparison, ...]
    row_counts: Mapping[str, int] | None = None  # rows per benchmark when not the suite's (tiny-model lanes)

    @functools.cached_property
    def seed_prior(self) -> Any:
        """The empirical-Bayes prior of the cells' seed variance on the scale of the binomial bound (one scale per
        benchmark, or per benchmark and model with :data:`~trace_lib.aggregation.moderation.TWO_WAY_PRIOR`; a common
        shape; :func:`trace_lib.aggregation.moderation.fit_variance_prior`), fitted to the
        release's canonical seed spreads; None when the release has too few cells."""
        from trace_lib.aggregation import moderation

        groups: dict[str, list[tuple[float, float]]] = {}
        members: dict[str, list[str]] = {}
        for (model, bench), seeds in self.benchmarks.items():
            if len(seeds) > 1 and bench in self.suite.keys:
                values = list(seeds.values())
                groups.setdefault(bench, []).append(
                    (statistics.variance(values) / binomial_scale(mean(seeds), self.rows(bench)), len(values) - 1))
                members.setdefault(bench, []).append(model)
        return moderation.fit_variance_prior(groups, members if moderation.TWO_WAY_PRIOR else None)

    @property
    def model_ids(self) -> tuple[str, ...]:
        return tuple(self.overall)

    def rows(self, benchmark: str) -> int:
        """The rows every seed of ``benchmark`` must score."""
        if self.row_counts is not None and benchmark in self.row_counts:
            return self.row_counts[benchmark]
        return self.suite.benchmark(benchmark).rows

    def category_delta(self, comparison: Comparison, category: str) -> SeedValues:
        model, base = self.categories.get((comparison.model_id, category)), self.categories.get(
            (comparison.base_model_id, category))
        if not model or not base:
            return {}
        return {s: model[s] - base[s] for s in sorted(model) if s in base}


def mean(values: SeedValues) -> float:
    return statistics.fmean(values.values())


def binomial_scale(mean_percent: float, rows: int) -> float:
    """``100^2 p (1 - p) / n`` at ``p = mean / 100`` (kept above half a row from 0 and 1): the binomial variance of
    one seed's score, the scale the seed-variance prior lives on."""
    p = min(1.0 - 0.5 / rows, max(0.5 / rows, mean_percent / 100.0))
    return 1e4 * p * (1.0 - p) / rows


def _per_seed(doc: Any, name: str, keys: tuple[str, ...]) -> dict[Any, dict[int, float]]:
    where = f"scores.{name}"
    try:
        entries = doc["scores"][name]
    except (KeyError, TypeError):
        raise ReleaseFileError("required field is missing", file=identity.RESULTS, field=where) from None
    if not isinstance(entries, list):
        raise ReleaseFileError("not a list", file=identity.RESULTS, field=where, found=type(entries).__name__)
    out: dict[Any, dict[int, float]] = {}
    for i, entry in enumerate(entries):
        try:
            key = tuple(entry[k] for k in keys)
            out.setdefault(key[0] if len(key) == 1 else key, {})[int(entry["seed"])] = float(entry["score"])
        except (KeyError, TypeError, ValueError):
            raise ReleaseFileError("entry lacks a key, seed or score", file=identity.RESULTS,
                                   field=f"{where}[{i}]") from None
    return out


def _seed_values(entry: Any, where: str) -> dict[int, float]:
    try:
        return {int(v["seed"]): float(v["delta"]) for v in entry["seed_values"]}
    except (KeyError, TypeError, ValueError):
        raise ReleaseFileError("delta lacks seed_values of seed and delta", file=identity.RESULTS,
                               field=where) from None


def load_canonical(release: ReleaseRoot) -> Canonical:
    """The canonical per-seed scores and comparisons of ``release``.

    Raises:
        ReleaseFileError: the document is not an object, a list of scores or comparisons is not a list, or an entry
            lacks a field.
    """
    doc = release.read_json(identity.RESULTS)
    if not isinstance(doc, dict):
        raise ReleaseFileError("document must be a JSON object", file=identity.RESULTS, found=type(doc).__name__)
    entries = doc.get("comparisons") or []
    if not isinstance(entries, list):
        raise ReleaseFileError("not a list", file=identity.RESULTS, field="comparisons", found=type(entries).__name__)
    comparisons = []
    for i, entry in enumerate(entries):
        where = f"comparisons[{i}]"
        try:
            model, base = str(entry["model_id"]), str(entry["base_model_id"])
            benchmarks = {str(d["benchmark_id"]): _seed_values(d, f"{where}.benchmark_deltas")
                          for d in entry["benchmark_deltas"]}
            overall = _seed_values(entry["overall_delta"], f"{where}.overall_delta")
        except (KeyError, TypeError):
            raise ReleaseFileError("comparison lacks model_id, base_model_id, benchmark_deltas or overall_delta",
                                   file=identity.RESULTS, field=where) from None
        comparisons.append(Comparison(model, base, benchmarks, overall))
    return Canonical(
        suite=load_suite(release),
        benchmarks=_per_seed(doc, "benchmark_scores", ("model_id", "benchmark_id")),
        categories=_per_seed(doc, "category_scores", ("model_id", "category_name")),
        overall=_per_seed(doc, "overall_scores", ("model_id",)),
        comparisons=tuple(comparisons),
    )
