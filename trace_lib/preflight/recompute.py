"""Group ``recompute``: every aggregate in ``results.json`` is recomputed from the seed benchmark scores.

Upstream recomputes category/overall scores and summaries and the overall paired delta but trusts counts,
``seed_count``/``benchmark_count``/``evaluated_rows``, which (model, base) pairs exist, the per-seed overall
deltas and all 144 benchmark deltas. Here every one of them is rebuilt with
:mod:`trace_lib.aggregation` (``statistics.fmean``, sample ``stdev``, absolute tolerance 1e-10), every collection
must hold exactly one row per identity, and every model that is not a base has exactly one comparison with a
base of the same parameter scale. When one seed score disagrees with every aggregate built from it, the finding
names that score: the summaries, category and overall scores agree on the value it should have.
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping

from trace_lib.aggregation import (
    ABS_TOLERANCE,
    PairedDelta,
    ScoreKey,
    Summary,
    category_scores,
    overall_scores,
    paired_delta,
    summarize,
)
from trace_lib.preflight import views
from trace_lib.preflight.context import CheckContext, GroupOutcome
from trace_lib.preflight.fields import Fields, Kind, hashable, is_kind
from trace_lib.preflight.registry import CheckGroup
from trace_lib.release import identity
from trace_lib.release.suite import Suite

FILE = identity.RESULTS
PAIRED_BY = "benchmark_id_and_decoding_seed"
#: tolerance for the values a stored aggregate implies for one of its inputs (products of up to ~100 x scores)
_IMPLIED_TOLERANCE = 1e-8


class _Tracker:
    """Compares stored with recomputed numbers, records mismatches, keeps the count and largest deviation."""

    def __init__(self, f: Fields) -> None:
        self.f = f
        self.compared = 0
        self.max_deviation = 0.0

    def number(self, field: str, expected: float, found: Any) -> bool:
        if not is_kind(found, Kind.NUMBER):
            self.f.fail(field, "must be a finite number", found=found)
            return False
        self.compared += 1
        deviation = abs(found - expected)
        if deviation <= ABS_TOLERANCE:
            self.max_deviation = max(self.max_deviation, deviation)
            return True
        self.f.fail(field, "differs from the value recomputed from the seed scores", expected=expected, found=found)
        return False

    def summary(self, where: str, summary: Summary, row: Mapping[str, Any]) -> None:
        self.number(f"{where}.mean", summary.mean, row.get("mean"))
        self.number(f"{where}.stddev", summary.stddev, row.get("stddev"))


def check_recompute(ctx: CheckContext, out: GroupOutcome) -> None:
    doc = ctx.read_object(FILE, out)
    suite = views.require_suite(ctx, out, FILE)
    if doc is None or suite is None:
        return
    f = Fields(out, FILE)
    track = _Tracker(f)
    models, seeds = views.model_ids(doc), views.seeds(doc)
    keys = suite.keys
    rows_of = {b.key: b.rows for b in suite.benchmarks}
    table = {k: v for k, v in views.score_table(doc).items() if k[0] in models and k[1] in seeds and k[2] in rows_of}
    complete = [m for m in models if all((m, s, b) in table for s in seeds for b in keys)]
    full = {k: v for k, v in table.items() if k[0] in complete}
    skipped = sorted(set(models) - set(complete))
    if skipped:
        out.not_checked(FILE, "their seed scores are incomplete (see group 'results')",
                        field=f"aggregates of {', '.join(skipped)}")
    categories = category_scores(full, suite)
    overall = overall_scores(full, suite)
    model_seeds = [(m, s) for m in complete for s in seeds]
    every = [(m, s) for m in models for s in seeds]
    cats = list(suite.categories)

    _compare_rows(f, doc, "category_scores", ("model_id", "seed", "category_name"),
                  {(m, s, c): {"benchmark_count": len(suite.categories[c])} for m, s in every for c in cats},
                  {(m, s, c): {"score": categories[(m, s, c)]} for m, s in model_seeds for c in cats},
                  track, "category score")
    _compare_rows(f, doc, "overall_scores", ("model_id", "seed"),
                  {(m, s): {"benchmark_count": len(keys)} for m, s in every},
                  {(m, s): {"score": overall[(m, s)]} for m, s in model_seeds}, track, "overall score")
    _compare_rows(f, doc, "benchmark_summaries", ("model_id", "benchmark_id"),
                  {(m, b): {"seed_count": len(seeds), "evaluated_rows": rows_of[b]} for m in models for b in keys},
                  {(m, b): _summary_fields(summarize(full[(m, s, b)] for s in seeds)) for m in complete
                   for b in keys}, track, "benchmark summary")
    _compare_rows(f, doc, "category_summaries", ("model_id", "category_name"),
                  {(m, c): {"seed_count": len(seeds), "benchmark_count": len(suite.categories[c])} for m in models
                   for c in cats},
                  {(m, c): _summary_fields(summarize(categories[(m, s, c)] for s in seeds)) for m in complete
                   for c in cats}, track, "category summary")
    _compare_rows(f, doc, "overall_summaries", ("model_id",),
                  {(m,): {"seed_count": len(seeds), "benchmark_count": len(keys)} for m in models},
                  {(m,): _summary_fields(summarize(overall[(m, s)] for s in seeds)) for m in complete},
                  track, "overall summary")
    _check_category_mean_overall(f, ctx, suite, categories, overall, model_seeds)
    n_comparisons = _check_comparisons(f, doc, suite, full, overall, complete, seeds, track)
    _locate_bad_scores(f, doc, suite, full, complete, seeds)
    out.count("values_recomputed", track.compared)
    out.count("max_abs_deviation", track.max_deviation)
    out.count("comparisons", n_comparisons)


def _summary_fields(summary: Summary) -> dict[str, float]:
    return {"mean": summary.mean, "stddev": summary.stddev}


def _row_key(row: Mapping[str, Any], fields: tuple[str, ...]) -> tuple[Any, ...] | None:
    key = tuple(row.get(name) for name in fields)
    for name, value in zip(fields, key):
        if not is_kind(value, Kind.NONNEG if name == "seed" else Kind.TEXT):
            return None
    return key


def _label(fields: tuple[str, ...], key: tuple[Any, ...]) -> str:
    return ", ".join(f"seed {v}" if name == "seed" else str(v) for name, v in zip(fields, key))


def _compare_rows(
    f: Fields, doc: dict[str, Any], collection: str, key_fields: tuple[str, ...],
    exact: dict[tuple[Any, ...], dict[str, Any]], recomputed: dict[tuple[Any, ...], dict[str, float]],
    track: _Tracker, what: str,
) -> None:
    """One stored row per identity of ``exact`` (whose values are the exact counts each row must carry); its
    numbers within tolerance of ``recomputed`` where that holds the identity."""
    scores = doc.get("scores")
    if not isinstance(scores, dict) or not isinstance(scores.get(collection), list):
        f.fail(f"scores.{collection}", "must be an array", found=(scores or {}).get(collection)
               if isinstance(scores, dict) else scores)
        return
    seen: set[tuple[Any, ...]] = set()
    for i, row in enumerate(scores[collection]):
        key = _row_key(row, key_fields) if isinstance(row, dict) else None
        if key is None:
            f.fail(f"scores.{collection}[{i}]", f"row identity ({', '.join(key_fields)}) is malformed", found=row)
            continue
        where = f"scores.{collection}[{_label(key_fields, key)}]"
        if key in seen:
            f.fail(where, f"duplicate {what} identity")
            continue
        seen.add(key)
        if key not in exact:
            f.fail(where, f"{what} for an unknown model, seed, benchmark or category")
            continue
        for name, value in exact[key].items():
            f.expect(f"{where}.{name}", value, row.get(name), "differs from what the suite and the release seeds imply")
        for name, value in recomputed.get(key, {}).items():
            track.number(f"{where}.{name}", value, row.get(name))
    for key in sorted(set(exact) - seen, key=str):
        f.fail(f"scores.{collection}[{_label(key_fields, key)}]", f"{what} missing")


def _check_category_mean_overall(
    f: Fields, ctx: CheckContext, suite: Suite, categories: dict, overall: dict, model_seeds: list
) -> None:
    """The suite's ``average_category_means_for_overall`` promise: mean of category means = overall."""
    aggregation = ctx.release.read_json(identity.SUITE).get("aggregation")
    if not (isinstance(aggregation, dict) and aggregation.get("average_category_means_for_overall") is True):
        return
    for m, s in model_seeds:
        from_categories = statistics.fmean(categories[(m, s, c)] for c in suite.categories)
        if abs(from_categories - overall[(m, s)]) > ABS_TOLERANCE:
            f.fail(f"scores.overall_scores[{views.score_label(m, s)}]",
                   "mean of category means differs from the benchmark mean though the suite declares them equal",
                   expected=overall[(m, s)], found=from_categories)


def _check_comparisons(
    f: Fields, doc: dict[str, Any], suite: Suite, full: dict[ScoreKey, float], overall: dict,
    complete: list[str], seeds: list[int], track: _Tracker,
) -> int:
    comparisons = f.get(doc, "comparisons", kind=Kind.LIST)
    if comparisons is None:
        return 0
    models = {hashable(m.get("model_id")): m for m in doc.get("models", []) if isinstance(m, dict)} \
        if isinstance(doc.get("models"), list) else {}
    compared: dict[str, str] = {}
    for i, row in enumerate(comparisons):
        model, base = (row.get("model_id"), row.get("base_model_id")) if isinstance(row, dict) else (None, None)
        if not (is_kind(model, Kind.TEXT) and is_kind(base, Kind.TEXT)):
            f.fail(f"comparisons[{i}]", "comparison must name model_id and base_model_id", found=row)
            continue
        where = f"comparisons[{model} vs {base}]"
        if model in compared:
            f.fail(where, "model compared more than once", found=f"also against {compared[model]}")
            continue
        compared[model] = base
        if model == base or model not in models or base not in models:
            f.fail(where, "must compare two different models of results.json", found=[model, base])
            continue
        scale = models[model].get("parameter_scale")
        f.expect(f"{where}.parameter_scale", scale, row.get("parameter_scale"), "differs from the model's scale")
        f.expect(f"{where}.base_model_id", scale, models[base].get("parameter_scale"),
                 "base has another parameter scale than the model")
        f.expect(f"{where}.paired_by", PAIRED_BY, row.get("paired_by"), "unexpected pairing")
        if model not in complete or base not in complete:
            continue
        delta = paired_delta(overall, model, base)
        _check_delta(f, row.get("overall_delta"), f"{where}.overall_delta", delta, seeds, track)
        _check_benchmark_deltas(f, row, where, suite, full, model, base, seeds, track)
    bases = set(compared.values())
    for model in models:
        if isinstance(model, str) and model not in bases and model not in compared:
            f.fail(f"comparisons[{model}]", "model that is no base has no comparison with a base")
    for model in sorted(bases & set(compared), key=str):
        f.fail(f"comparisons[{model} vs {compared[model]}]", "a base model is itself compared to a base")
    return len(compared)


def _check_benchmark_deltas(
    f: Fields, row: dict[str, Any], where: str, suite: Suite, full: dict[ScoreKey, float], model: str, base: str,
    seeds: list[int], track: _Tracker,
) -> None:
    entries = row.get("benchmark_deltas")
    keys = suite.keys
    if not isinstance(entries, list):
        f.fail(f"{where}.benchmark_deltas", "must be an array", found=entries)
        return
    order: list[str] = []
    for i, entry in enumerate(entries):
        bench = entry.get("benchmark_id") if isinstance(entry, dict) else None
        if not is_kind(bench, Kind.TEXT) or bench not in keys:
            f.fail(f"{where}.benchmark_deltas[{i}]", "names no suite benchmark", found=bench)
            continue
        here = f"{where}.benchmark_deltas[{bench}]"
        if bench in order:
            f.fail(here, "duplicate benchmark delta")
            continue
        order.append(bench)
        per_seed = {(m, s): full[(m, s, bench)] for m in (model, base) for s in seeds}
        _check_delta(f, entry, here, paired_delta(per_seed, model, base), seeds, track)
    for bench in keys:
        if bench not in order:
            f.fail(f"{where}.benchmark_deltas[{bench}]", "benchmark delta missing")
    if sorted(order) == sorted(keys) and tuple(order) != keys:
        f.fail(f"{where}.benchmark_deltas", "not in suite benchmark order", expected=list(keys), found=order)


def _check_delta(f: Fields, stored: Any, where: str, delta: PairedDelta, seeds: list[int], track: _Tracker) -> None:
    if not isinstance(stored, dict):
        f.fail(where, "must be an object", found=stored)
        return
    track.summary(where, delta.summary, stored)
    values = stored.get("seed_values")
    if not isinstance(values, list):
        f.fail(f"{where}.seed_values", "must be an array", found=values)
        return
    seen: list[int] = []
    for entry in values:
        seed = hashable(entry.get("seed")) if isinstance(entry, dict) else None
        if seed not in delta.seed_values:
            f.fail(f"{where}.seed_values", "entry for an unknown seed", found=entry)
            continue
        if seed in seen:
            f.fail(f"{where}.seed_values[seed {seed}]", "duplicate seed")
            continue
        seen.append(seed)
        track.number(f"{where}.seed_values[seed {seed}].delta", delta.seed_values[seed], entry.get("delta"))
    for seed in seeds:
        if seed not in seen:
            f.fail(f"{where}.seed_values[seed {seed}]", "seed delta missing")


def _stored(doc: dict[str, Any], collection: str, key_fields: tuple[str, ...], value: str) -> dict:
    out: dict[tuple[Any, ...], float] = {}
    for row in views.rows_of(doc, collection):
        key = _row_key(row, key_fields)
        if key is not None and key not in out and is_kind(row.get(value), Kind.NUMBER):
            out[key] = row[value]
    return out


def _locate_bad_scores(
    f: Fields, doc: dict[str, Any], suite: Suite, full: dict[ScoreKey, float], complete: list[str],
    seeds: list[int],
) -> None:
    """Name a seed score that its own benchmark summary, category score and overall score all contradict."""
    bench_means = _stored(doc, "benchmark_summaries", ("model_id", "benchmark_id"), "mean")
    category_stored = _stored(doc, "category_scores", ("model_id", "seed", "category_name"), "score")
    overall_stored = _stored(doc, "overall_scores", ("model_id", "seed"), "score")
    category_of = {b: c for c, members in suite.categories.items() for b in members}
    sizes = {c: len(members) for c, members in suite.categories.items()}
    seed_sums: dict[tuple[str, str], float] = {}
    category_sums: dict[tuple[str, int, str], float] = {}
    overall_sums: dict[tuple[str, int], float] = {}
    for (m, s, b), score in full.items():
        seed_sums[(m, b)] = seed_sums.get((m, b), 0.0) + score
        category_sums[(m, s, category_of[b])] = category_sums.get((m, s, category_of[b]), 0.0) + score
        overall_sums[(m, s)] = overall_sums.get((m, s), 0.0) + score
    n_benchmarks = len(suite.keys)
    for (m, s, b), score in full.items():
        c = category_of[b]
        values = [
            _implied(bench_means.get((m, b)), len(seeds), seed_sums[(m, b)] - score),
            _implied(category_stored.get((m, s, c)), sizes[c], category_sums[(m, s, c)] - score),
            _implied(overall_stored.get((m, s)), n_benchmarks, overall_sums[(m, s)] - score),
        ]
        if any(v is None for v in values):
            continue
        first = values[0]
        if all(abs(v - first) <= _IMPLIED_TOLERANCE for v in values) and abs(first - score) > _IMPLIED_TOLERANCE:
            f.fail(f"scores.benchmark_scores[{views.score_label(m, s, b)}].score",
                   "contradicted by its benchmark summary, category score and overall score, which agree on "
                   "another value", expected=first, found=score)


def _implied(aggregate: float | None, n: int, others_sum: float) -> float | None:
    """The value the missing member must have for ``aggregate`` to be the mean of n values summing with it."""
    if aggregate is None:
        return None
    return n * aggregate - others_sum


GROUP = CheckGroup(
    "recompute",
    "every category/overall score, summary and paired delta recomputed from the seed benchmark scores",
    check_recompute,
)
