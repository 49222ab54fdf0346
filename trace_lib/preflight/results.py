"""Group ``results``: ``results.json`` metadata, its suite block, models, source runs and the seed scores.

Upstream ``validate_results`` B3 #1-19 (schema, canonical status, seeds, suite binding, model fields, source
bundles, the complete models x seeds x benchmarks identity matrix with suite row counts and finite scores).
Stricter than upstream: the whole ``suite`` block must equal the suite file (``suite_sha256`` its actual hash,
``decoding`` its ``generation``, ``aggregation``, ``vlmevalkit``, schema, path), scores must be percentages in
[0, 100] with ``scoring_scope`` ``aggregate`` and their model's ``source_run_id``, each source run's metadata must
name the same suite and seeds, and the decoding every run recorded per model and seed must equal the suite's.
Aggregates built from these scores are group ``recompute``.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from trace_lib.preflight import views
from trace_lib.preflight.context import CheckContext, GroupOutcome
from trace_lib.preflight.fields import Fields, Kind, hashable, is_kind, json_equal
from trace_lib.preflight.registry import CheckGroup
from trace_lib.release import identity
from trace_lib.release.suite import Suite

FILE = identity.RESULTS
SCHEMA = "trace_eval_release_results_v1"
MODEL_SCHEMA = "trace_eval_model_v1"
RUN_SCHEMA = "trace_eval_run_v1"
STATUS = "canonical"
SCORE_UNIT = "percent"
SCORING_SCOPE = "aggregate"
MODEL_TEXT_FIELDS = ("display_name", "repository_id", "source_run_id", "parameter_scale")
_RUNTIME_VIEW = re.compile(r"sha256set:[0-9a-f]{64}")
#: run decoding setting -> suite ``generation`` key it must equal
DECODING_FIELDS = {
    "temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "presence_penalty": "presence_penalty",
    "repetition_penalty": "repetition_penalty", "max_output_tokens": "max_tokens",
    "media_transport": "media_transport", "min_image_pixels": "min_image_pixels",
    "max_image_pixels": "max_image_pixels",
}


def check_results(ctx: CheckContext, out: GroupOutcome) -> None:
    doc = ctx.read_object(FILE, out)
    if doc is None:
        return
    suite = views.require_suite(ctx, out, FILE)
    f = Fields(out, FILE)
    f.expect("schema_version", SCHEMA, doc.get("schema_version"), "unexpected results schema")
    f.expect("status", STATUS, doc.get("status"), "release results are not canonical")
    f.expect("score_unit", SCORE_UNIT, doc.get("score_unit"), "unexpected score unit")
    f.get(doc, "release_id", kind=Kind.TEXT)
    seeds = _check_seeds(f, doc)
    generation = f.get(doc, "generation", kind=Kind.OBJECT)
    if generation is not None:
        f.expect("generation.historical_final_answer_only_manifest_is_input", False,
                 generation.get("historical_final_answer_only_manifest_is_input"),
                 "the historical final-answer-only manifest must not be an input")
    if suite is not None:
        _check_suite_block(ctx, f, doc, suite)
    models = _check_models(f, doc)
    runs = _check_source_artifacts(ctx, f, doc, models, seeds, suite)
    for model_id, model in models.items():
        run_id = model.get("source_run_id")
        if isinstance(run_id, str) and runs and run_id not in runs:
            f.fail(f"models[{model_id}].source_run_id", "names no source artifact", expected=sorted(runs),
                   found=run_id)
    if suite is not None:
        _check_scores(f, doc, suite, models, seeds)
    out.count("models", len(models))
    out.count("seeds", len(seeds))
    out.count("benchmark_scores", len(views.rows_of(doc, "benchmark_scores")))


def _check_seeds(f: Fields, doc: dict[str, Any]) -> list[int]:
    raw = f.get(doc, "seeds", kind=Kind.LIST)
    if raw is None:
        return []
    if not raw:
        f.fail("seeds", "must list at least one decoding seed")
    seeds = []
    for seed in raw:
        if not is_kind(seed, Kind.NONNEG):
            f.fail("seeds", "seed must be a non-negative integer", found=seed)
        elif seed in seeds:
            f.fail("seeds", "duplicate seed", found=seed)
        else:
            seeds.append(seed)
    return seeds


def _check_suite_block(ctx: CheckContext, f: Fields, doc: dict[str, Any], suite: Suite) -> None:
    block = f.get(doc, "suite", kind=Kind.OBJECT)
    suite_doc = ctx.release.read_json(identity.SUITE)
    if block is None:
        return
    expected = {
        "suite_id": suite_doc.get("suite_id"),
        "suite_schema_version": suite_doc.get("schema_version"),
        "suite_path": identity.SUITE.removeprefix("rlvr/"),
        "suite_sha256": ctx.sha256(identity.SUITE),
        "benchmark_count": len(suite.keys),
        "rows_per_model_seed": suite.rows_per_model_seed,
        "aggregation": suite_doc.get("aggregation"),
        "decoding": suite_doc.get("generation"),
        "vlmevalkit": suite_doc.get("vlmevalkit"),
    }
    for name, value in expected.items():
        f.expect(f"suite.{name}", value, block.get(name), f"differs from {identity.SUITE}")


def _check_models(f: Fields, doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    models: dict[str, dict[str, Any]] = {}
    for i, model in f.items(doc, "models"):
        model_id = model.get("model_id")
        if not is_kind(model_id, Kind.TEXT):
            f.fail(f"models[{i}].model_id", "must be a non-empty string", found=model_id)
            continue
        where = f"models[{model_id}]"
        if model_id in models:
            f.fail(where, "duplicate model")
            continue
        models[model_id] = model
        f.expect(f"{where}.schema_version", MODEL_SCHEMA, model.get("schema_version"), "unexpected model schema")
        for name in MODEL_TEXT_FIELDS:
            f.get(model, name, where, Kind.TEXT)
        f.get(model, "repository_revision", where, Kind.COMMIT)
        f.get(model, "source_sha256", where, Kind.SHA256)
        revision = f.get(model, "model_revision", where, Kind.TEXT)
        if revision is not None and not (is_kind(revision, Kind.COMMIT) or _RUNTIME_VIEW.fullmatch(revision)):
            f.fail(f"{where}.model_revision", "must be immutable",
                   expected="a 40-hex commit or sha256set:<64 hex>", found=revision)
    return models


def _check_source_artifacts(
    ctx: CheckContext, f: Fields, doc: dict[str, Any], models: dict[str, dict[str, Any]], seeds: list[int],
    suite: Suite | None,
) -> dict[str, dict[str, Any]]:
    runs: dict[str, dict[str, Any]] = {}
    suite_doc = ctx.release.read_json(identity.SUITE) if suite is not None else {}
    generation = suite_doc.get("generation") if isinstance(suite_doc.get("generation"), dict) else None
    for i, artifact in f.items(doc, "source_artifacts"):
        run_id = artifact.get("run_id")
        if not is_kind(run_id, Kind.TEXT):
            f.fail(f"source_artifacts[{i}].run_id", "must be a non-empty string", found=run_id)
            continue
        where = f"source_artifacts[{run_id}]"
        if run_id in runs:
            f.fail(where, "duplicate source run")
            continue
        runs[run_id] = artifact
        f.get(artifact, "repository_id", where, Kind.TEXT)
        f.get(artifact, "repository_revision", where, Kind.COMMIT)
        f.get(artifact, "result_path", where, Kind.TEXT)
        for name in ("result_sha256", "manifest_sha256", "source_selection_sha256", "source_slice_set_sha256"):
            f.get(artifact, name, where, Kind.SHA256)
        meta = f.get(artifact, "run_metadata", where, Kind.OBJECT)
        if meta is None:
            continue
        here = f"{where}.run_metadata"
        f.expect(f"{here}.schema_version", RUN_SCHEMA, meta.get("schema_version"), "unexpected run schema")
        f.expect(f"{here}.run_id", run_id, meta.get("run_id"), "differs from the artifact's run_id")
        for name in ("source_selection_sha256", "source_slice_set_sha256"):
            f.expect(f"{here}.{name}", artifact.get(name), meta.get(name), f"differs from the artifact's {name}")
        f.expect(f"{here}.seeds", seeds, meta.get("seeds"), "differs from the release seeds")
        if suite_doc:
            f.expect(f"{here}.suite_id", suite_doc.get("suite_id"), meta.get("suite_id"), "differs from the suite")
        run_models = meta.get("model_ids")
        if not isinstance(run_models, list) or not all(isinstance(m, str) for m in run_models):
            f.fail(f"{here}.model_ids", "must be an array of model ids", found=run_models)
            continue
        expected_models = sorted(m for m, model in models.items() if model.get("source_run_id") == run_id)
        f.expect_keys(f"{here}.model_ids", expected_models, run_models, "model")
        _check_run_decoding(f, meta, here, run_models, seeds, generation)
    return runs


def _check_run_decoding(
    f: Fields, meta: dict[str, Any], where: str, run_models: list[str], seeds: list[int],
    generation: dict[str, Any] | None,
) -> None:
    settings = meta.get("generation_settings")
    if not isinstance(settings, list):
        f.fail(f"{where}.generation_settings", "must be an array", found=settings)
        return
    seen: Counter[tuple[Any, Any]] = Counter()
    for entry in settings:
        if not isinstance(entry, dict):
            f.fail(f"{where}.generation_settings", "entry must be an object", found=entry)
            continue
        key = (hashable(entry.get("model_id")), hashable(entry.get("seed")))
        seen[key] += 1
        label = f"{where}.generation_settings[{views.score_label(str(key[0]), key[1])}]"
        if generation is None:
            continue
        for run_name, suite_name in DECODING_FIELDS.items():
            if not json_equal(generation.get(suite_name), entry.get(run_name)):
                f.fail(f"{label}.{run_name}", f"decoding differs from suite generation.{suite_name}",
                       expected=generation.get(suite_name), found=entry.get(run_name))
    f.expect_keys(f"{where}.generation_settings[*]", [(m, s) for m in run_models for s in seeds], seen,
                  "(model, seed) decoding record")
    for key, n in seen.items():
        if n > 1:
            f.fail(f"{where}.generation_settings[{views.score_label(str(key[0]), key[1])}]",
                   f"recorded {n} times")


def _check_scores(
    f: Fields, doc: dict[str, Any], suite: Suite, models: dict[str, dict[str, Any]], seeds: list[int]
) -> None:
    scores = f.get(doc, "scores", kind=Kind.OBJECT)
    if scores is None:
        return
    seen: set[tuple[Any, Any, Any]] = set()
    rows_of = {b.key: b.rows for b in suite.benchmarks}
    for i, row in f.items(scores, "benchmark_scores", "scores"):
        key = (row.get("model_id"), row.get("seed"), row.get("benchmark_id"))
        if not (is_kind(key[0], Kind.TEXT) and is_kind(key[1], Kind.NONNEG) and is_kind(key[2], Kind.TEXT)):
            f.fail(f"scores.benchmark_scores[{i}]", "row identity (model_id, seed, benchmark_id) is malformed",
                   found=list(key))
            continue
        where = f"scores.benchmark_scores[{views.score_label(*key)}]"
        if key in seen:
            f.fail(where, "duplicate benchmark score identity")
            continue
        seen.add(key)
        score = f.get(row, "score", where, Kind.NUMBER)
        if score is not None and not 0.0 <= score <= 100.0:
            f.fail(f"{where}.score", "percent score outside [0, 100]", found=score)
        if key[2] in rows_of:
            f.expect(f"{where}.evaluated_rows", rows_of[key[2]], row.get("evaluated_rows"),
                     "differs from the suite's rows")
        f.expect(f"{where}.scoring_scope", SCORING_SCOPE, row.get("scoring_scope"), "unexpected scoring scope")
        model = models.get(key[0])
        if model is not None:
            f.expect(f"{where}.source_run_id", model.get("source_run_id"), row.get("source_run_id"),
                     "differs from the model's source_run_id")
    expected = {(m, s, b) for m in models for s in seeds for b in rows_of}
    for key in sorted(expected - seen, key=str):
        f.fail(f"scores.benchmark_scores[{views.score_label(*key)}]", "benchmark score missing")
    for key in sorted(seen - expected, key=str):
        f.fail(f"scores.benchmark_scores[{views.score_label(*key)}]",
               "benchmark score for an unknown model, seed or benchmark")


GROUP = CheckGroup(
    "results",
    "results.json: schema, suite block = suite file, models, source runs, the complete seed-score matrix",
    check_results,
)
