"""Verification phases of a TRACE-validation campaign: ``release``, ``generation-only`` and ``full``.

- ``release`` (offline): the suite's contract, the results table against its release receipt (hashes, source,
  roster, denominators, campaign counts) and, beyond upstream, that every score is a whole number of rows.
- ``generation-only``: ``release``'s suite check, the prepared dataset (pins, equivalence bridge, every row and
  image, task balance, the system prompt), and every model's generation run (metadata, run identity, every
  receipt, every request hash recomputed from the prepared bytes, byte-exact ``responses.jsonl``).
- ``full``: ``generation-only`` plus every model's scoring folder recomputed exactly (scored rows, pending rows,
  judge receipts, aggregates, ``summary.md``, provenance) and, unlike upstream, each model's reproduced accuracy
  judged against the release table with the binomial tolerance (:mod:`trace_lib.validation.tolerance`).

Each phase returns a report dict (canonical JSON on success) or raises :class:`VerificationError` naming the file,
the field and what differs. ``expected`` selects the dataset identity: the pinned reproduction dataset, or another
(tests, ``--unpinned``), in which case pins and the equivalence bridge are reported as not checked.
"""

from __future__ import annotations

import collections
import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import urlparse

from trace_lib.errors import InputError, TraceReproError, UsageError
from trace_lib.jsonio import json_object
from trace_lib.preflight import validation_release
from trace_lib.preflight.context import CheckContext
from trace_lib.preflight.registry import require_group
from trace_lib.release import identity
from trace_lib.release.load import sha256_file
from trace_lib.release.locate import ReleaseRoot
from trace_lib.validation import pins
from trace_lib.validation.canonical import canonical_bytes, h1, read_json, read_json_object, read_jsonl, read_text
from trace_lib.validation.equivalence import check_equivalence_bridge
from trace_lib.validation.extraction import ANSWER_TYPES
from trace_lib.validation.generate import GenerationTarget, check_model_marker, run_contract
from trace_lib.validation.layout import ValidationLayout
from trace_lib.validation.manifest import ValidationManifest, load_validation_manifest
from trace_lib.validation.prepare import DOWNLOAD_HINT, require_input_file
from trace_lib.validation.request import DATA_URL, MEDIA_TRANSPORTS, build_request
from trace_lib.validation.score import (
    aggregate, check_scoring_policy, code_sha256, load_generation, load_judge_results, load_scoring_manifest,
    score_rows, summary_markdown,
)
from trace_lib.release.validation_suite import (
    ValidationModel, ValidationSuite, load_release_scores, load_system_prompt, load_validation_suite,
)
from trace_lib.validation.tolerance import check_validation_score, validation_criterion

PHASES = ("release", "generation-only", "full")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_RUNTIME = re.compile(r"(?:[0-9a-f]{40}|sha256set:[0-9a-f]{64})")
_SUITE_KEYS = {
    "dataset": {"repo_id", "revision", "split", "file", "sha256", "rows", "tasks", "samples_per_task",
                "distribution", "prompt_key", "image_key"},
    "generation": {"seed", "responses_per_prompt", "temperature", "top_p", "top_k", "presence_penalty",
                   "frequency_penalty", "repetition_penalty", "max_tokens", "min_image_pixels", "max_image_pixels",
                   "server_generation_config"},
}


class VerificationError(InputError):
    """A verification check failed (one line: file, field, what differs)."""


def _object(value: Any, *, file: str, field: str) -> dict[str, Any]:
    """``value`` (a field the artifact must hold as an object) as a dict, else the finding naming the field."""
    return json_object(value, file=file, field=field, error=VerificationError)


def _require(condition: bool, message: str, *, file: str | None = None, field: str | None = None,
             **details: Any) -> None:
    if not condition:
        raise VerificationError(message, file=file, field=field, **details)


# -- suite (A9.1) -----------------------------------------------------------------------------------------------
def verify_suite(release: ReleaseRoot, *, pinned: bool = True) -> ValidationSuite:
    """The suite's structure and the contract values this implementation relies on (pinned: its sha256 too)."""
    rel = identity.VALIDATION_SUITE
    _require(release.exists(rel), "suite is missing", file=rel)
    if pinned:
        _require(release.sha256(rel) == identity.CANONICAL_SHA256[rel], "suite SHA-256 mismatch", file=rel,
                 expected=identity.CANONICAL_SHA256[rel], found=release.sha256(rel))
    doc = release.read_json(rel)
    _require(doc.get("schema_version") == pins.SUITE_SCHEMA, "wrong suite schema", file=rel, field="schema_version")
    _require(isinstance(doc.get("suite_id"), str) and bool(doc["suite_id"]), "no suite_id", file=rel)
    for block, keys in _SUITE_KEYS.items():
        _require(isinstance(doc.get(block), dict) and set(doc[block]) == keys, "unexpected fields", file=rel,
                 field=block, expected=sorted(keys), found=sorted(doc.get(block) or {}))
    suite = load_validation_suite(release)
    d = suite.dataset
    _require(d["split"] == "validation" and d["prompt_key"] == "prompt_answer" and d["image_key"] == "images"
             and d["distribution"] == "same_task_programs_nonoverlapping_samples", "dataset contract changed",
             file=rel, field="dataset")
    _require(d["repo_id"] == pins.REPRODUCTION_DATASET.repo_id and d["file"] == pins.REPRODUCTION_DATASET.file,
             "dataset repository/file differ from the reproduction dataset", file=rel, field="dataset")
    _require(d["rows"] == d["tasks"] * d["samples_per_task"], "rows != tasks x samples_per_task", file=rel,
             field="dataset.rows")
    p = suite.prompt
    _require(isinstance(p.get("system_prompt_sha256"), str) and _SHA256.fullmatch(p["system_prompt_sha256"]) is not None
             and p.get("chat_template") == "native_checkpoint_template" and p.get("add_generation_prompt") is True,
             "prompt contract changed", file=rel, field="prompt")
    try:
        check_scoring_policy(suite)
    except InputError as exc:
        raise VerificationError(exc.message, file=rel, field=exc.field) from None
    j = suite.judge
    _require(j.temperature == 0.0 and j.top_p == 1.0, "wrong judge decoding", file=rel, field="judge")
    _require(j.thinking is False, "judge thinking must be disabled", file=rel, field="judge.thinking")
    _require(list(j.input_fields) == ["raw_response", "answer_type"], "judge inputs changed", file=rel,
             field="judge.input_fields")
    _require(list(j.forbidden_fields) == ["image", "question", "choices", "answer_gt_value"],
             "judge forbidden-field contract changed", file=rel, field="judge.forbidden_fields")
    _require(bool(j.max_token_retries) and all(isinstance(t, int) and t > 0 for t in j.max_token_retries),
             "judge retry ladder must be positive integers", file=rel, field="judge.max_token_retries")
    slugs = list(suite.slugs)
    _require(len(set(slugs)) == len(slugs) and bool(slugs), "suite has duplicate or no model slugs", file=rel,
             field="models")
    for i, m in enumerate(suite.models):
        where = f"models[{i}]"
        _require(bool(m.label) and bool(m.repo_id), "model lacks a label or repo_id", file=rel, field=where)
        _require(_COMMIT.fullmatch(m.revision) is not None, "model revision is not an immutable commit", file=rel,
                 field=f"{where}.revision")
        _require(m.runtime_view_revision is None or _RUNTIME.fullmatch(m.runtime_view_revision) is not None,
                 "invalid runtime_view_revision", file=rel, field=f"{where}.runtime_view_revision")
    return suite


# -- release (A9.2) ---------------------------------------------------------------------------------------------
def verify_release(release: ReleaseRoot, *, pinned: bool = True) -> dict[str, Any]:
    """The ``release`` phase report (module docstring): :func:`verify_suite`, then the preflight's
    ``validation_release`` group (:mod:`trace_lib.preflight.validation_release`), its first failure raised."""
    suite = verify_suite(release, pinned=pinned)
    res_rel, rec_rel = identity.VALIDATION_RESULTS, identity.VALIDATION_RECEIPT
    if pinned and release.exists(rec_rel):
        _require(release.sha256(rec_rel) == identity.CANONICAL_SHA256[rec_rel], "release receipt SHA-256 mismatch",
                 file=rec_rel, expected=identity.CANONICAL_SHA256[rec_rel], found=release.sha256(rec_rel))
    require_group(validation_release.GROUP, CheckContext(release, pinned=pinned), error=VerificationError)
    receipt = release.read_json(rec_rel)
    return {
        "models": len(release.read_json(res_rel)["results"]),
        "phase": "release",
        "results_sha256": release.sha256(res_rel),
        "rows_per_model": suite.rows,
        "source_revision": receipt["immutable_source"]["dataset_revision"],
        "status": "ok",
    }


# -- dataset ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VerifiedDataset:
    manifest: ValidationManifest
    system_prompt: str
    prompt_sha: str
    equivalence: Mapping[str, Any] | None


def _gt_ok(answer_type: str, value: Any) -> bool:
    if answer_type == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if answer_type == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))
    if answer_type == "option_letter":
        return isinstance(value, str) and re.fullmatch(r"[A-Z]", value) is not None
    return isinstance(value, str) and bool(value.strip())


def verify_dataset(release: ReleaseRoot, suite: ValidationSuite, manifest_path: Path, *,
                   parquet: Path | None, expected: pins.DatasetIdentity) -> VerifiedDataset:
    """The prepared dataset: pins, bridge, rows, images, task balance and the generation system prompt.

    Raises:
        UsageError: the parquet (needed when given or pinned) or the manifest is missing or not a regular file: an
            input the phase cannot run without (exit 2), checked before anything is hashed.
        VerificationError: what the dataset holds differs from what it must (a finding).
    """
    if parquet is None and expected.pinned:
        raise UsageError("the pinned dataset is verified against its parquet; none was given", field="--parquet",
                         hint=DOWNLOAD_HINT)
    if parquet is not None:
        parquet = require_input_file(parquet, what="validation parquet", field="--parquet", hint=DOWNLOAD_HINT)
    require_input_file(manifest_path, what="prepared manifest", hint="run 'trace-repro validation prepare' first")
    try:
        manifest = load_validation_manifest(manifest_path, expected=expected, verify_media=True)
    except InputError as exc:
        raise VerificationError(exc.message, file=exc.file, field=exc.field) from None
    file = str(manifest.path)
    if parquet is not None:
        digest = sha256_file(Path(parquet))
        _require(digest == manifest.dataset["file_sha256"], "dataset parquet SHA mismatch", file=str(parquet),
                 expected=manifest.dataset["file_sha256"], found=digest)
        _require(Path(parquet).stat().st_size == manifest.dataset["file_size_bytes"], "dataset parquet size mismatch",
                 file=str(parquet))
    equivalence = None
    if expected.pinned:
        try:
            equivalence = check_equivalence_bridge(release, suite, manifest.sha256)
        except InputError as exc:
            raise VerificationError(f"dataset equivalence failed: {exc.message}", file=exc.file) from None
    media = _object(manifest.document.get("media"), file=file, field="media")
    _require(media.get("reencoded") is False and media.get("resized") is False, "media were re-encoded or resized",
             file=file, field="media")
    tasks: collections.Counter[str] = collections.Counter()
    images: set[str] = set()
    for row in manifest.rows:
        where = f"rows[{row['row_index']}]"
        _require(row["answer_type"] in ANSWER_TYPES, "invalid answer type", file=file, field=f"{where}.answer_type")
        _require(_gt_ok(row["answer_type"], row["answer_gt"]["value"]), "ground truth is not well typed", file=file,
                 field=f"{where}.answer_gt")
        _require(row["prompt_answer"].count(pins.IMAGE_MARKER) == len(row["images"]), "image marker mismatch",
                 file=file, field=f"{where}.prompt_answer")
        tasks[row["task"]] += 1
        images.update(image["sha256"] for image in row["images"])
    if expected.pinned:
        d = suite.dataset
        _require(len(tasks) == d["tasks"], "dataset task count mismatch", file=file, expected=d["tasks"],
                 found=len(tasks))
        _require(set(tasks.values()) == {d["samples_per_task"]}, "not an equal samples-per-task split", file=file)
        _require(len(images) == d["rows"], "dataset images are not unique per row", file=file)
    try:
        system_prompt, prompt_sha = load_system_prompt(release, suite)
    except TraceReproError as exc:
        raise VerificationError(exc.message, file=exc.file) from None
    return VerifiedDataset(manifest, system_prompt, prompt_sha, equivalence)


# -- generation (A9.3) ----------------------------------------------------------------------------------------
def _has_gt_key(value: Any) -> bool:
    if isinstance(value, dict):
        return bool(pins.GROUND_TRUTH_KEYS.intersection(value)) or any(_has_gt_key(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_gt_key(v) for v in value)
    return False


def verify_generation_model(release: ReleaseRoot, suite: ValidationSuite, data: VerifiedDataset,
                            model: ValidationModel, generation_dir: Path, *, pinned: bool = True) -> list[dict[str, Any]]:
    """One model's generation run; returns its records in row order (pinned: images must have gone as data URLs,
    as upstream's verifier requires; unpinned tiny lanes may use file URLs)."""
    slug, manifest = model.slug, data.manifest
    generation_dir = Path(generation_dir).expanduser().resolve()
    meta_path, responses, receipts = (generation_dir / "run_metadata.json", generation_dir / "responses.jsonl",
                                      generation_dir / "receipts")
    meta = read_json_object(meta_path)
    mf, rows = str(meta_path), len(manifest.rows)
    checks = {
        "schema_version": pins.GENERATION_RUN_SCHEMA, "status": "complete", "model_slug": slug, "served_model": slug,
        "model_revision": model.inference_revision, "manifest_sha256": manifest.sha256, "dataset_rows": rows,
        "dataset_repo_id": manifest.dataset["repo_id"], "dataset_revision": manifest.dataset["revision"],
        "dataset_file": manifest.dataset["file"], "dataset_file_sha256": manifest.dataset["file_sha256"],
        "decoding": suite.decoding(), "mm_processor_kwargs": suite.mm_processor_kwargs(),
        "system_prompt_file_sha256": data.prompt_sha, "allowed_local_media_root": None, "shard_index": 0, "shard_count": 1, "selected_rows": rows,
        "completed_rows": rows, "error_rows": 0,
    }
    for key, value in checks.items():
        _require(meta.get(key) == value, "run metadata differs", file=mf, field=key, expected=value, found=meta.get(key))
    _require(meta.get("media_transport") == DATA_URL or (not pinned and meta.get("media_transport") in MEDIA_TRANSPORTS),
             "media transport is not data-url", file=mf, field="media_transport", found=meta.get("media_transport"))
    _require(_RUNTIME.fullmatch(str(meta["model_revision"])) is not None, "mutable model revision", file=mf)
    _require(Path(str(meta.get("manifest_path"))).resolve() == manifest.path, "manifest path differs", file=mf,
             field="manifest_path")
    _require(Path(str(meta.get("responses_path"))).resolve() == responses, "responses path differs", file=mf)
    _require(Path(str(meta.get("receipts_path"))).resolve() == receipts, "receipts path differs", file=mf)
    if meta.get("backend") == "openai":
        endpoint = urlparse(str(meta.get("endpoint_url") or ""))
        _require(endpoint.scheme in ("http", "https") and endpoint.hostname is not None, "bad endpoint", file=mf,
                 field="endpoint_url")
    model_path = Path(str(meta.get("model_path")))
    _require(model_path.is_dir(), "model directory is missing", file=mf, field="model_path", found=str(model_path))
    try:
        check_model_marker(model_path, model)
    except InputError as exc:
        raise VerificationError(exc.message, file=exc.file, field=exc.field) from None
    target = GenerationTarget(model=model, model_path=model_path, backend=str(meta.get("backend")), served_model=slug,
                              endpoint_url=meta.get("endpoint_url"), media_transport=str(meta.get("media_transport")))
    contract = run_contract(manifest, system_prompt=data.system_prompt, prompt_file_sha256=data.prompt_sha,
                            target=target, decoding=suite.decoding(), mm_processor_kwargs=suite.mm_processor_kwargs())
    _require(meta.get("run_contract") == contract, "run contract differs from the recomputed one", file=mf,
             field="run_contract")
    run_identity = h1(contract)
    _require(meta.get("run_identity_sha256") == run_identity, "run identity hash mismatch", file=mf)
    _require(responses.is_file() and meta.get("responses_sha256") == sha256_file(responses),
             "responses.jsonl differs from its recorded sha256", file=str(responses))
    records = read_jsonl(responses, allow_blank=False)
    _require(len(records) == rows, "responses row count mismatch", file=str(responses), expected=rows,
             found=len(records))
    names = {p.name for p in receipts.glob("*.json")}
    _require(names == {f"{i:06d}.json" for i in range(rows)}, "receipt file set mismatch", file=str(receipts))
    hashes: set[str] = set()
    for index, (record, row) in enumerate(zip(records, manifest.rows)):
        where, rf = f"line {index + 1}", str(responses)
        for key, value in {"schema_version": pins.GENERATION_RECEIPT_SCHEMA, "status": "complete", "row_index": index,
                           "instance_id": row["instance_id"], "model_slug": slug, "task": row["task"],
                           "domain": row["domain"], "answer_type": row["answer_type"],
                           "run_identity_sha256": run_identity, "error": None}.items():
            _require(record.get(key) == value, "receipt differs", file=rf, field=f"{where}.{key}", expected=value,
                     found=record.get(key))
        _require(not _has_gt_key(record), "ground truth leaked into generation", file=rf, field=where)
        raw = record.get("raw_response")
        _require(isinstance(raw, str) and bool(raw), "empty raw response", file=rf, field=where)
        _require(record.get("raw_response_sha256") == hashlib.sha256(raw.encode("utf-8")).hexdigest(),
                 "raw response hash mismatch", file=rf, field=where)
        backend_response = record.get("backend_response")
        _require(isinstance(backend_response, dict) and record.get("response_sha256") == h1(backend_response),
                 "backend response hash mismatch", file=rf, field=where)
        _require(backend_response.get("text") == raw and backend_response.get("finish_reason") == record.get(
            "finish_reason") and backend_response.get("served_model") == slug, "raw/backend response mismatch",
                 file=rf, field=where)
        expected_hash = build_request(row, manifest, system_prompt=data.system_prompt, suite=suite,
                                      served_model=slug).request_hash
        _require(record.get("request_hash") == expected_hash, "request hash mismatch", file=rf, field=where)
        _require(expected_hash not in hashes, "duplicate request hash", file=rf, field=where)
        hashes.add(expected_hash)
        summary = {"prompt_sha256": hashlib.sha256(row["prompt_answer"].encode("utf-8")).hexdigest(),
                   "ordered_image_sha256": [i["sha256"] for i in row["images"]]}
        _require(record.get("request") == summary, "request summary mismatch", file=rf, field=where)
        _require(isinstance(record.get("attempt_count"), int) and record["attempt_count"] >= 1, "bad attempt count",
                 file=rf, field=where)
        _require(read_json(receipts / f"{index:06d}.json") == record, "receipt differs from responses.jsonl",
                 file=str(receipts / f"{index:06d}.json"))
    _require(responses.read_bytes() == b"".join(canonical_bytes(r) for r in records),
             "responses.jsonl is not the byte-exact ordered receipt concatenation", file=str(responses))
    return records


def _models(suite: ValidationSuite, slugs: Sequence[str] | None) -> list[ValidationModel]:
    if not slugs:
        return list(suite.models)
    out = []
    for slug in slugs:
        try:
            out.append(suite.model(slug))
        except KeyError:
            raise VerificationError("unknown validation model", field="--model", found=slug,
                                    hint=f"suite models: {', '.join(suite.slugs)}") from None
    return out


def verify_generation(release: ReleaseRoot, layout: ValidationLayout, *, parquet: Path | None,
                      expected: pins.DatasetIdentity = pins.REPRODUCTION_DATASET,
                      models: Sequence[str] | None = None) -> tuple[dict[str, Any], ValidationSuite, VerifiedDataset]:
    """The ``generation-only`` phase (all suite models unless ``models`` names a subset)."""
    suite = verify_suite(release, pinned=expected.pinned)
    data = verify_dataset(release, suite, layout.manifest, parquet=parquet, expected=expected)
    chosen = _models(suite, models)
    if not models:
        root = layout.root / "generation"
        present = {p.name for p in root.iterdir() if (p / "run_metadata.json").exists()} if root.is_dir() else set()
        _require(present == set(suite.slugs), "generation roster differs from the suite", file=str(root),
                 expected=sorted(suite.slugs), found=sorted(present))
    total = 0
    for model in chosen:
        total += len(verify_generation_model(release, suite, data, model, layout.generation_dir(model.slug),
                                             pinned=expected.pinned))
    report = {
        "dataset_equivalence_receipt_sha256": data.equivalence["receipt_sha256"] if data.equivalence else "not checked",
        "dataset_manifest_sha256": data.manifest.sha256,
        "generation_rows": total,
        "models": len(chosen),
        "phase": "generation-only",
        "rows_per_model": len(data.manifest.rows),
        "status": "ok",
        "suite_sha256": suite.sha256,
    }
    return report, suite, data


# -- full (A9.4) ----------------------------------------------------------------------------------------------
def verify_scoring_model(release: ReleaseRoot, suite: ValidationSuite, data: VerifiedDataset, model: ValidationModel,
                         layout: ValidationLayout, *, expected: pins.DatasetIdentity) -> dict[str, Any]:
    """One model's final scoring folder recomputed exactly; returns its overall record."""
    score_dir, judge_path = layout.scoring_dir(model.slug), layout.judge_results(model.slug)
    for name in ("scored_rows.jsonl", "judge_pending.jsonl", "summary.json", "by_task.jsonl", "summary.md"):
        _require((score_dir / name).is_file(), "scoring output is missing", file=str(score_dir / name),
                 hint="run 'trace-repro validation score' after the judge")
    _require(judge_path.is_file(), "judge results are missing", file=str(judge_path))
    try:
        manifest = load_scoring_manifest(data.manifest.path, expected)
        generation = load_generation(layout.generation_dir(model.slug), model=model, manifest=manifest, suite=suite,
                                     prompt_sha=data.prompt_sha)
        results = load_judge_results(judge_path)
        scored, pending = score_rows(generation, manifest, results, suite, judge_file=str(judge_path))
    except InputError as exc:
        raise VerificationError(exc.message, file=exc.file, field=exc.field) from None
    stored = read_jsonl(score_dir / "scored_rows.jsonl", allow_blank=False)
    _require(len(stored) == len(scored), "scored row count mismatch", file=str(score_dir / "scored_rows.jsonl"),
             expected=len(scored), found=len(stored))
    for mine, theirs in zip(scored, stored):
        _require(theirs == mine, "scored row differs from its recomputation", file=str(score_dir / "scored_rows.jsonl"),
                 field=f"row {mine['row_index']}")
        for key in ("historical_answer_correct", "historical_format_correct", "deterministic_found",
                    "deterministic_semantic_correct", "judge_requested", "judge_resolved", "combined_semantic_correct",
                    "unresolved"):
            _require(theirs[key] in (0, 1), "flag is not 0/1", file=str(score_dir / "scored_rows.jsonl"),
                     field=f"row {mine['row_index']}.{key}")
    _require(read_jsonl(score_dir / "judge_pending.jsonl") == pending, "judge_pending.jsonl differs",
             file=str(score_dir / "judge_pending.jsonl"))
    receipt_dir = layout.judge_dir(model.slug) / "receipts"
    names = {p.name for p in receipt_dir.glob("*.json")} if receipt_dir.is_dir() else set()
    _require(names == {f"{r['request_hash']}.json" for r in results.values()}, "judge receipt file set mismatch",
             file=str(receipt_dir))
    for result in results.values():
        _require(read_json(receipt_dir / f"{result['request_hash']}.json") == result,
                 "judge receipt differs from judge_results.jsonl", file=str(receipt_dir))
    summary = read_json_object(score_dir / "summary.json")
    overall = aggregate(scored, ("model_slug",))
    for key, fields in (("overall", ("model_slug",)), ("by_domain", ("model_slug", "domain")),
                        ("by_answer_type", ("model_slug", "answer_type"))):
        _require(summary.get(key) == aggregate(scored, fields), "summary differs from recomputed aggregates",
                 file=str(score_dir / "summary.json"), field=key)
    _require(read_jsonl(score_dir / "by_task.jsonl") == aggregate(scored, ("model_slug", "task")),
             "by_task.jsonl differs", file=str(score_dir / "by_task.jsonl"))
    tasks = len({row["task"] for row in manifest.rows})
    markdown = summary_markdown(overall, {model.slug: model.label}, rows=len(manifest.rows), tasks=tasks)
    _require(read_text(score_dir / "summary.md") == markdown, "summary.md differs",
             file=str(score_dir / "summary.md"))
    pf = str(score_dir / "summary.json")
    prov = _object(summary.get("provenance"), file=pf, field="provenance")
    expected_prov = {
        "schema_version": pins.SCORE_PROVENANCE_SCHEMA, "scoring_contract_version": pins.SCORING_CONTRACT_VERSION,
        "dataset_manifest": str(manifest.path), "dataset_manifest_sha256": manifest.sha256,
        "dataset_identity": dict(manifest.dataset), "dataset_equivalence": data.equivalence,
        "suite_sha256": suite.sha256, "code_sha256": code_sha256(),
        "judge_results": {"path": str(judge_path.resolve()), "sha256": sha256_file(judge_path)},
        "model_slugs": [model.slug], "models": 1, "rows_per_model": len(manifest.rows), "total_rows": len(scored),
        "accuracy_denominator_rows": len(scored), "judge_requested_rows": len(pending),
        "judge_pending_rows": len(pending), "judge_result_rows": len(results),
        "judge_resolved_rows": sum(r["judge_resolved"] for r in scored),
        "unresolved_rows": sum(r["unresolved"] for r in scored), "judge_finalized": True,
        "judge_model": {"repo_id": suite.judge.repo_id, "revision": suite.judge.revision,
                        "served_model_name": suite.judge.served_model_name},
    }
    for key, value in expected_prov.items():
        _require(prov.get(key) == value, "provenance differs", file=pf, field=f"provenance.{key}", expected=value,
                 found=prov.get(key))
    files = prov.get("generation_files")
    first = files[0] if isinstance(files, list) and files and isinstance(files[0], dict) else {}
    _require(first.get("sha256") == sha256_file(layout.responses(model.slug)), "generation file hash differs",
             file=pf, field="provenance.generation_files")
    return overall[0]


def verify_full(release: ReleaseRoot, layout: ValidationLayout, *, parquet: Path | None,
                expected: pins.DatasetIdentity = pins.REPRODUCTION_DATASET, models: Sequence[str] | None = None,
                z: float | None = None, alpha: float = 0.05) -> dict[str, Any]:
    """The ``full`` phase: generation-only, every scoring folder recomputed, accuracies vs the release table.

    Artifact problems raise :class:`VerificationError`; accuracies outside the band give ``status: failed`` with
    one ``failures`` line per model (the tolerance verdict's explanation).
    """
    report, suite, data = verify_generation(release, layout, parquet=parquet, expected=expected, models=models)
    canonical = load_release_scores(release)
    chosen = _models(suite, models)
    criterion = validation_criterion(release, alpha=alpha, z=z)
    verdicts, totals = [], collections.Counter()
    for model in chosen:
        overall = verify_scoring_model(release, suite, data, model, layout, expected=expected)
        correct = round(overall["combined_semantic_accuracy"] * overall["rows"])
        verdict = check_validation_score(canonical[model.slug], round(100.0 * correct / overall["rows"], 2),
                                         rows=overall["rows"], criterion=criterion)
        verdicts.append(verdict)
        totals["scored_rows"] += overall["rows"]
        totals["judge_pending_rows"] += overall["judge_requested_rows"]
        totals["judge_result_rows"] += overall["judge_requested_rows"]
        totals["unresolved_rows"] += overall["unresolved_rows"]
    failed = [v for v in verdicts if not v.ok]
    report.update(totals)
    report["phase"] = "full"
    report["accuracy"] = [v.to_dict() for v in verdicts]
    report["failures"] = [v.explain() for v in failed]
    report["status"] = "ok" if not failed else "failed"
    return report
