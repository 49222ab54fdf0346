"""Group ``validation_release``: the TRACE-validation suite, results, receipt and patch ledger agree.

Upstream ``verify release`` (run by the preflight as B7): suite schema and contract fields,
model roster, results schema and roster in suite order with 2,000 evaluated rows each and scores in [0, 100], the
receipt's immutable source equal to the results' source, its public-release hashes equal to the actual suite and
results files, and the campaign counts. Upstream pins roster, counts and hashes as literals (here: group
``identity``); here they must agree with each other: counts with the suite's rows, seed and model count, the
contract labels and judge with the suite's, the roster with ``results.json``'s models (same repository and
revision per slug). Stricter than upstream: each score must be a whole number of correct rows (100 x k / rows,
as the release rounds it), and the reproducibility-patch ledger is bound to the receipt and changes no result.
"""

from __future__ import annotations

import re
from typing import Any

from trace_lib.preflight import views
from trace_lib.preflight.context import CheckContext, GroupOutcome
from trace_lib.preflight.fields import MISSING, Fields, Kind, hashable, is_kind
from trace_lib.preflight.registry import CheckGroup
from trace_lib.release import identity

SUITE = identity.VALIDATION_SUITE
RESULTS = identity.VALIDATION_RESULTS
RECEIPT = identity.VALIDATION_RECEIPT
PATCHES = identity.VALIDATION_PATCHES
SUITE_SCHEMA = "trace-validation-suite-v1"
RESULTS_SCHEMA = "trace-validation-results-v1"
RECEIPT_SCHEMA = "trace-validation-release-receipt-v1"
PATCHES_SCHEMA = "trace-validation-reproducibility-patches-v1"
SCORE_UNIT = "percent"
_RUNTIME_VIEW = re.compile(r"sha256set:[0-9a-f]{64}")
#: the reported-number semantics the suite must declare: unresolved rows score 0 and stay in the denominator
SCORING_POLICY = {"unresolved_rows_score": 0, "drop_failed_rows": False}
#: a deterministic, non-thinking judge
JUDGE_POLICY = {"temperature": 0.0, "top_p": 1.0, "thinking": False}


def check_validation_release(ctx: CheckContext, out: GroupOutcome) -> None:
    suite = ctx.read_object(SUITE, out)
    results = ctx.read_object(RESULTS, out)
    receipt = ctx.read_object(RECEIPT, out)
    patches = ctx.read_object(PATCHES, out)
    roster = _check_suite(ctx, Fields(out, SUITE), suite) if suite is not None else []
    rows = views.dig(suite, "dataset.rows")
    rows = rows if is_kind(rows, Kind.COUNT) else MISSING
    if results is not None:
        _check_results(Fields(out, RESULTS), results, suite, roster, rows, out)
    if receipt is not None:
        _check_receipt(ctx, Fields(out, RECEIPT), receipt, suite, results, rows)
    if patches is not None:
        _check_patches(Fields(out, PATCHES), patches, suite, results, receipt)
    out.count("models", len(roster))
    out.count("rows_per_model", rows)
    out.count("results_sha256", ctx.sha256(RESULTS))


def _check_suite(ctx: CheckContext, f: Fields, suite: dict[str, Any]) -> list[dict[str, Any]]:
    f.expect("schema_version", SUITE_SCHEMA, suite.get("schema_version"), "unexpected validation suite schema")
    f.get(suite, "suite_id", kind=Kind.TEXT)
    dataset = f.get(suite, "dataset", kind=Kind.OBJECT)
    if dataset is not None:
        f.expect("dataset.split", "validation", dataset.get("split"), "must be the validation split")
        for name in ("prompt_key", "image_key", "distribution", "file"):
            f.get(dataset, name, "dataset", Kind.TEXT)
        f.get(dataset, "revision", "dataset", Kind.COMMIT)
        f.get(dataset, "sha256", "dataset", Kind.SHA256)
        rows, tasks, per_task = (f.get(dataset, n, "dataset", Kind.COUNT)
                                 for n in ("rows", "tasks", "samples_per_task"))
        if None not in (rows, tasks, per_task) and rows != tasks * per_task:
            f.fail("dataset.rows", "differs from tasks x samples_per_task", expected=tasks * per_task, found=rows)
    prompt = f.get(suite, "prompt", kind=Kind.OBJECT)
    if prompt is not None:
        f.expect("prompt.system_prompt_file", identity.SYSTEM_PROMPT, prompt.get("system_prompt_file"),
                 "does not name the release's system prompt")
        f.get(prompt, "system_prompt_sha256", "prompt", Kind.SHA256)
        f.get(prompt, "chat_template", "prompt", Kind.TEXT)
        f.get(prompt, "add_generation_prompt", "prompt", Kind.BOOL)
    generation = f.get(suite, "generation", kind=Kind.OBJECT)
    if generation is not None:
        f.get(generation, "seed", "generation", Kind.NONNEG)
        f.get(generation, "responses_per_prompt", "generation", Kind.COUNT)
        for name in ("temperature", "top_p"):
            f.get(generation, name, "generation", Kind.NUMBER)
        f.get(generation, "max_tokens", "generation", Kind.COUNT)
        low = f.get(generation, "min_image_pixels", "generation", Kind.COUNT)
        high = f.get(generation, "max_image_pixels", "generation", Kind.COUNT)
        if low is not None and high is not None and low > high:
            f.fail("generation.min_image_pixels", "exceeds max_image_pixels", expected=f"<= {high}", found=low)
    scoring = f.get(suite, "scoring", kind=Kind.OBJECT)
    if scoring is not None:
        f.get(scoring, "deterministic_extraction", "scoring", Kind.TEXT)
        f.get(scoring, "judge_only_on", "scoring", Kind.LIST)
        for name, value in SCORING_POLICY.items():
            f.expect(f"scoring.{name}", value, scoring.get(name), "unresolved rows must score 0 and stay counted")
    judge = f.get(suite, "judge", kind=Kind.OBJECT)
    if judge is not None:
        f.get(judge, "repo_id", "judge", Kind.TEXT)
        f.get(judge, "revision", "judge", Kind.COMMIT)
        for name, value in JUDGE_POLICY.items():
            f.expect(f"judge.{name}", value, judge.get(name), "the judge must decode deterministically, no thinking")
        inputs = f.get(judge, "input_fields", "judge", Kind.LIST) or []
        forbidden = f.get(judge, "forbidden_fields", "judge", Kind.LIST) or []
        leaked = sorted(set(map(str, inputs)) & set(map(str, forbidden)))
        if leaked:
            f.fail("judge.input_fields", "the judge would see forbidden fields", found=leaked)
        _check_judge_pin(ctx, f, judge)
    return _check_roster(ctx, f, suite)


def _check_judge_pin(ctx: CheckContext, f: Fields, judge: dict[str, Any]) -> None:
    receipts = views.document(ctx, identity.RELEASE_RECEIPTS)
    pinned = views.dig(receipts, "evaluation_environment.judge")
    if isinstance(pinned, dict):
        f.expect("judge", [pinned.get("model_id"), pinned.get("revision")],
                 [judge.get("repo_id"), judge.get("revision")],
                 f"differs from the judge of {identity.RELEASE_RECEIPTS}")


def _check_roster(ctx: CheckContext, f: Fields, suite: dict[str, Any]) -> list[dict[str, Any]]:
    roster: list[dict[str, Any]] = []
    for i, model in f.items(suite, "models"):
        slug = model.get("slug")
        if not is_kind(slug, Kind.TEXT):
            f.fail(f"models[{i}].slug", "must be a non-empty string", found=slug)
            continue
        where = f"models[{slug}]"
        if any(m["slug"] == slug for m in roster):
            f.fail(where, "duplicate model")
            continue
        roster.append(model)
        f.get(model, "label", where, Kind.TEXT)
        f.get(model, "repo_id", where, Kind.TEXT)
        f.get(model, "revision", where, Kind.COMMIT)
        view = model.get("runtime_view_revision")
        if "runtime_view_revision" in model and not (isinstance(view, str) and _RUNTIME_VIEW.fullmatch(view)):
            f.fail(f"{where}.runtime_view_revision", "must be immutable", expected="sha256set:<64 hex>", found=view)
    results = views.results_doc(ctx)
    if results is None or not isinstance(results.get("models"), list):
        return roster
    evaluated = {hashable(m.get("model_id")): m for m in results["models"] if isinstance(m, dict)}
    f.expect_keys("models[*].slug", [k for k in evaluated if isinstance(k, str)], [m["slug"] for m in roster],
                  f"model of {identity.RESULTS}")
    for model in roster:
        other = evaluated.get(model["slug"])
        if other is not None:
            f.expect(f"models[{model['slug']}]", [other.get("repository_id"), other.get("repository_revision")],
                     [model.get("repo_id"), model.get("revision")],
                     f"repository@revision differs from {identity.RESULTS}")
    return roster


def _check_results(
    f: Fields, results: dict[str, Any], suite: dict[str, Any] | None, roster: list[dict[str, Any]], rows: Any,
    out: GroupOutcome,
) -> None:
    f.expect("schema_version", RESULTS_SCHEMA, results.get("schema_version"), "unexpected validation results schema")
    evaluation = f.get(results, "evaluation", kind=Kind.OBJECT)
    if evaluation is not None:
        f.expect("evaluation.rows_per_model", rows, evaluation.get("rows_per_model"),
                 f"differs from {SUITE} dataset.rows")
        f.expect("evaluation.task_programs", views.dig(suite, "dataset.tasks"), evaluation.get("task_programs"),
                 f"differs from {SUITE} dataset.tasks")
        f.expect("evaluation.seed", views.dig(suite, "generation.seed"), evaluation.get("seed"),
                 f"differs from {SUITE} generation.seed")
        f.expect("evaluation.score_unit", SCORE_UNIT, evaluation.get("score_unit"), "unexpected score unit")
    source = f.get(results, "source", kind=Kind.OBJECT)
    if source is not None:
        for name in ("dataset_repo_id", "run_id", "benchmark_id", "results_path"):
            f.get(source, name, "source", Kind.TEXT)
        f.get(source, "dataset_revision", "source", Kind.COMMIT)
        f.get(source, "results_sha256", "source", Kind.SHA256)
    labels = {m["slug"]: m.get("label") for m in roster}
    ids: list[str] = []
    correct: dict[str, int] = {}
    for i, row in f.items(results, "results"):
        model_id = row.get("model_id")
        if not is_kind(model_id, Kind.TEXT):
            f.fail(f"results[{i}].model_id", "must be a non-empty string", found=model_id)
            continue
        where = f"results[{model_id}]"
        if model_id in ids:
            f.fail(where, "duplicate model")
            continue
        ids.append(model_id)
        if model_id in labels:
            f.expect(f"{where}.label", labels[model_id], row.get("label"), f"differs from {SUITE} models label")
        f.expect(f"{where}.evaluated_rows", rows, row.get("evaluated_rows"), f"differs from {SUITE} dataset.rows")
        score = f.get(row, "score", where, Kind.NUMBER)
        if score is None:
            continue
        if not 0.0 <= score <= 100.0:
            f.fail(f"{where}.score", "percent score outside [0, 100]", found=score)
        elif rows is not MISSING:
            k = _correct_rows(score, rows)
            if k is None:
                f.fail(f"{where}.score", f"is not a whole number of correct rows out of {rows}",
                       expected=f"round(100 * k / {rows}, 2) for an integer k", found=score)
            else:
                correct[model_id] = k
    slugs = [m["slug"] for m in roster]
    if roster and set(ids) == set(slugs) and len(ids) == len(slugs) and ids != slugs:
        f.fail("results", "model order differs from the suite's", expected=slugs, found=ids)
    elif roster:
        f.expect_keys("results[*].model_id", slugs, ids, "suite model")
    out.count("correct_rows", correct)


def _correct_rows(score: float, rows: int) -> int | None:
    """The integer k with round(100 * k / rows, 2) == score, if any."""
    guess = round(score * rows / 100.0)
    for k in (guess - 1, guess, guess + 1):
        if 0 <= k <= rows and abs(round(100.0 * k / rows, 2) - score) < 1e-9:
            return k
    return None


def _check_receipt(
    ctx: CheckContext, f: Fields, receipt: dict[str, Any], suite: dict[str, Any] | None,
    results: dict[str, Any] | None, rows: Any,
) -> None:
    f.expect("schema_version", RECEIPT_SCHEMA, receipt.get("schema_version"), "unexpected release receipt schema")
    immutable = f.get(receipt, "immutable_source", kind=Kind.OBJECT)
    if immutable is not None:
        for name in ("dataset_repo_id", "dataset_revision", "run_id"):
            f.expect(f"immutable_source.{name}", views.dig(results, f"source.{name}"), immutable.get(name),
                     f"differs from {RESULTS} source.{name}")
        run_root = f.get(immutable, "run_root", "immutable_source", Kind.TEXT)
        files = f.get(immutable, "files", "immutable_source", Kind.OBJECT) or {}
        for name, entry in files.items():
            f.get(entry, "path", f"immutable_source.files.{name}", Kind.TEXT)
            f.get(entry, "sha256", f"immutable_source.files.{name}", Kind.SHA256)
        scores = files.get("benchmark_scores") if isinstance(files.get("benchmark_scores"), dict) else None
        if scores is None:
            f.fail("immutable_source.files.benchmark_scores", "required field is missing")
        else:
            f.expect("immutable_source.files.benchmark_scores.sha256", views.dig(results, "source.results_sha256"),
                     scores.get("sha256"), f"differs from {RESULTS} source.results_sha256")
            if run_root is not None:
                f.expect("immutable_source.files.benchmark_scores.path", views.dig(results, "source.results_path"),
                         f"{run_root}/{scores.get('path')}",
                         f"run_root/path differs from {RESULTS} source.results_path")
    execution = f.get(receipt, "source_execution", kind=Kind.OBJECT)
    if execution is not None:
        for name in ("evaluation_harness_revision", "producer_code_revision"):
            f.get(execution, name, "source_execution", Kind.COMMIT)
        f.expect("source_execution.contracts.deterministic_extraction",
                 views.dig(suite, "scoring.deterministic_extraction"),
                 views.dig(execution, "contracts.deterministic_extraction"),
                 f"differs from {SUITE} scoring.deterministic_extraction")
        f.expect("source_execution.judge", {"repo_id": views.dig(suite, "judge.repo_id"),
                                            "revision": views.dig(suite, "judge.revision")},
                 execution.get("judge"), f"differs from {SUITE} judge")
    n_models = views.count(views.dig(suite, "models"))
    campaign = f.get(receipt, "campaign_verification", kind=Kind.OBJECT)
    if campaign is not None:
        c = "campaign_verification"
        f.expect(f"{c}.status", "ok", campaign.get("status"), "the archived campaign did not verify")
        f.expect(f"{c}.models", n_models, campaign.get("models"), f"differs from the {SUITE} roster")
        f.expect(f"{c}.seed", views.dig(suite, "generation.seed"), campaign.get("seed"), f"differs from {SUITE}")
        f.expect(f"{c}.rows_per_model", rows, campaign.get("rows_per_model"), f"differs from {SUITE} dataset.rows")
        total = MISSING if MISSING in (n_models, rows) else n_models * rows
        for name in ("generation_rows", "scored_rows"):
            f.expect(f"{c}.{name}", total, campaign.get(name), "differs from models x rows_per_model")
        pending = f.get(campaign, "judge_pending_rows", c, Kind.NONNEG)
        f.expect(f"{c}.judge_result_rows", pending, campaign.get("judge_result_rows"),
                 "every row sent to the judge must have a judge result")
        unresolved = f.get(campaign, "unresolved_rows", c, Kind.NONNEG)
        if pending is not None and unresolved is not None and unresolved > pending:
            f.fail(f"{c}.unresolved_rows", "more unresolved rows than rows sent to the judge",
                   expected=f"<= {pending}", found=unresolved)
        artifacts = receipt.get("source_artifacts")
        if isinstance(artifacts, dict):
            for part, count_key in (("responses", "rows"), ("extractions", "rows"), ("scores", "row_records")):
                f.expect(f"source_artifacts.{part}.{count_key}", total, views.dig(artifacts, f"{part}.{count_key}"),
                         "differs from models x rows_per_model")
            f.expect("source_artifacts.scores.aggregate_records", n_models,
                     views.dig(artifacts, "scores.aggregate_records"), "one aggregate record per model")
    public = f.get(receipt, "public_release", kind=Kind.OBJECT)
    if public is not None:
        for name, path in (("suite", SUITE), ("results", RESULTS)):
            f.expect(f"public_release.{name}_path", path, public.get(f"{name}_path"), "names another file")
            f.expect(f"public_release.{name}_sha256", views.digest(ctx, path), public.get(f"{name}_sha256"),
                     f"differs from the SHA-256 of {path}")
        f.expect("public_release.result_rows", views.count(views.dig(results, "results")),
                 public.get("result_rows"), f"differs from the rows of {RESULTS}")


def _check_patches(
    f: Fields, patches: dict[str, Any], suite: dict[str, Any] | None, results: dict[str, Any] | None,
    receipt: dict[str, Any] | None,
) -> None:
    f.expect("schema_version", PATCHES_SCHEMA, patches.get("schema_version"), "unexpected patch ledger schema")
    f.expect("suite_id", views.dig(suite, "suite_id"), patches.get("suite_id"), f"differs from {SUITE} suite_id")
    f.expect("historical_evaluation_harness_revision",
             views.dig(receipt, "source_execution.evaluation_harness_revision"),
             patches.get("historical_evaluation_harness_revision"),
             f"differs from {RECEIPT} source_execution.evaluation_harness_revision")
    f.expect("canonical_result_source_revision", views.dig(results, "source.dataset_revision"),
             patches.get("canonical_result_source_revision"), f"differs from {RESULTS} source.dataset_revision")
    seen: list[str] = []
    for i, patch in f.items(patches, "patches"):
        patch_id = patch.get("id")
        if not is_kind(patch_id, Kind.TEXT) or patch_id in seen:
            f.fail(f"patches[{i}].id", "must be a unique non-empty string", found=patch_id)
            continue
        seen.append(patch_id)
        where = f"patches[{patch_id}]"
        for name in ("classification", "historical_behavior", "public_behavior"):
            f.get(patch, name, where, Kind.TEXT)
        f.expect(f"{where}.canonical_results_changed", False, patch.get("canonical_results_changed"),
                 "a reproducibility patch must not change canonical results")


GROUP = CheckGroup(
    "validation_release",
    "TRACE validation: suite, results, receipt and patch ledger agree; hashes, counts, roster, whole-row scores",
    check_validation_release,
)
