"""Score one model's validation responses (``trace-validation-answer-scoring-v2``).

``run_score(release, manifest_path, generation_dir, output_dir, judge_results=None)`` validates the dataset, the
generation run (complete, same dataset/prompt/decoding/revision, intact hashes) and, when given, the judge
results; then per row: deterministic extraction; MATCH against the ground truth when ``found`` (final even if
wrong); otherwise the judge's answer when it resolved the row; otherwise 0 (``unresolved``, kept in the
denominator). It writes ``scored_rows.jsonl``, ``judge_pending.jsonl`` (the GT-blind rows the judge must see),
``summary.json``, ``by_task.jsonl`` and ``summary.md``. The first pass (no judge results) leaves pending rows at 0
(``pending:<status>`` routes); the final pass requires a judge result for exactly the pending rows.
"""

from __future__ import annotations

import collections
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from trace_lib.atomic import atomic_outputs
from trace_lib.errors import InputError
from trace_lib.jsonio import canonical_json_utf8
from trace_lib.release import identity
from trace_lib.release.load import sha256_file
from trace_lib.release.locate import ReleaseRoot
from trace_lib.scoring.score import scoring_lock
from trace_lib.validation import pins
from trace_lib.validation.canonical import (
    h1,
    read_json_object,
    read_jsonl,
    write_json,
    write_jsonl,
    write_text,
)
from trace_lib.validation.equivalence import check_equivalence_bridge
from trace_lib.validation.extraction import ANSWER_TYPES, EXTRACTION_VERSION, extract
from trace_lib.validation.historical import historical_fields
from trace_lib.validation.judge import check_receipt, request_contract
from trace_lib.validation.judge_output import JudgeOutputError
from trace_lib.validation.manifest import ValidationManifest, load_validation_manifest
from trace_lib.validation.match import semantic_correct
from trace_lib.release.validation_suite import (
    ValidationModel,
    ValidationSuite,
    load_system_prompt,
    load_validation_suite,
)

_SHA256 = re.compile(r"[0-9a-f]{64}")
_MODULES = ("score", "extraction", "judge", "judge_output", "historical", "match", "prepare", "request")
BINARY_FIELDS = (
    "historical_answer_correct", "historical_format_correct", "deterministic_found", "deterministic_semantic_correct",
    "judge_requested", "judge_resolved", "combined_semantic_correct", "unresolved",
)


@dataclass(frozen=True)
class ScoreReport:
    """One model's score: combined semantic accuracy over all rows, with the judge bookkeeping behind it."""

    model_slug: str
    rows: int
    correct: int
    deterministic_found: int
    judge_requested: int
    judge_resolved: int
    unresolved: int
    judge_finalized: bool
    output_dir: Path

    @property
    def accuracy_percent(self) -> float:
        """``round(100 * correct / rows, 2)``: the release table's unit and rounding."""
        return round(100.0 * self.correct / self.rows, 2) if self.rows else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "accuracy_percent": self.accuracy_percent,
            "correct": self.correct,
            "deterministic_found": self.deterministic_found,
            "judge_finalized": self.judge_finalized,
            "judge_requested": self.judge_requested,
            "judge_resolved": self.judge_resolved,
            "model_slug": self.model_slug,
            "output_dir": str(self.output_dir),
            "rows": self.rows,
            "unresolved": self.unresolved,
        }


def code_sha256() -> dict[str, str]:
    """sha256 of the trace_lib modules that produce a score (recorded in provenance)."""
    here = Path(__file__).resolve().parent
    hashes = {name: sha256_file(here / f"{name}.py") for name in _MODULES}
    answers = here.parent / "answers"  # the answer-JSON parsing and matching shared with the training reward
    hashes.update({f"answers.{p.stem}": sha256_file(p) for p in sorted(answers.glob("*.py")) if p.stem != "__init__"})
    return hashes


# -- inputs -----------------------------------------------------------------------------------------------------
def check_scoring_policy(suite: ValidationSuite) -> None:
    """The suite's scoring and judge blocks are the policy this module implements.

    Raises:
        InputError: a policy value differs (another extractor, judge trigger or denominator rule).
    """
    expected = {
        "deterministic_extraction": EXTRACTION_VERSION,
        "judge_only_on": ["missing", "ambiguous"],
        "unresolved_rows_score": 0,
        "drop_failed_rows": False,
    }
    for key, value in expected.items():
        if suite.scoring.get(key) != value:
            raise InputError("suite scoring policy differs from the implemented one", file="suite.v1.json",
                             field=f"scoring.{key}", expected=value, found=suite.scoring.get(key))
    judge = suite.judge
    if not judge.repo_id or not re.fullmatch(r"[0-9a-f]{40}", judge.revision) or not judge.served_model_name:
        raise InputError("suite judge block lacks an immutable pin", file="suite.v1.json", field="judge")


def load_scoring_manifest(manifest_path: Path, expected: pins.DatasetIdentity) -> ValidationManifest:
    """The manifest (no media re-hash), with every ground truth well typed for its answer type.

    Raises:
        InputError: a row's answer type is unknown or its ground truth would not extract as ``found``.
    """
    manifest = load_validation_manifest(manifest_path, expected=expected, verify_media=False)
    for row in manifest.rows:
        where = f"rows[{row['row_index']}].answer_gt"
        if row["answer_type"] not in ANSWER_TYPES:
            raise InputError("unsupported answer_type", file=str(manifest.path), field=where, found=row["answer_type"])
        gt = extract(canonical_json_utf8({"answer": row["answer_gt"]["value"]}), row["answer_type"])
        if not gt.resolved:
            raise InputError("ground truth is not a well-typed answer", file=str(manifest.path), field=where,
                             found=row["answer_gt"])
    return manifest


def _check_metadata(meta: Mapping[str, Any], *, path: Path, model: ValidationModel, manifest: ValidationManifest,
                    suite: ValidationSuite, prompt_sha: str, lines: int, responses_sha: str) -> None:
    def need(condition: bool, field: str, message: str, expected: Any = None, found: Any = None) -> None:
        if not condition:
            raise InputError(message, file=str(path), field=field, expected=expected, found=found)

    need(meta.get("schema_version") == pins.GENERATION_RUN_SCHEMA, "schema_version", "unsupported run metadata")
    need(meta.get("status") == "complete" and meta.get("error_rows") == 0, "status",
         "generation run is not complete", found=meta.get("status"))
    need(meta.get("model_slug") == model.slug, "model_slug", "run belongs to another model", model.slug,
         meta.get("model_slug"))
    need(meta.get("model_revision") == model.inference_revision, "model_revision", "run used another revision",
         model.inference_revision, meta.get("model_revision"))
    need(meta.get("manifest_sha256") == manifest.sha256, "manifest_sha256", "run used another manifest",
         manifest.sha256, meta.get("manifest_sha256"))
    for key, dataset_key in (("dataset_repo_id", "repo_id"), ("dataset_revision", "revision"),
                             ("dataset_file", "file"), ("dataset_file_sha256", "file_sha256"),
                             ("dataset_rows", "row_count")):
        need(meta.get(key) == manifest.dataset.get(dataset_key), key, "run used another dataset",
             manifest.dataset.get(dataset_key), meta.get(key))
    need(meta.get("responses_sha256") == responses_sha, "responses_sha256", "responses.jsonl changed after the run",
         meta.get("responses_sha256"), responses_sha)
    need(meta.get("selected_rows") == lines, "selected_rows", "row count differs from responses.jsonl",
         lines, meta.get("selected_rows"))
    contract = meta.get("run_contract")
    need(isinstance(contract, dict) and h1(contract) == meta.get("run_identity_sha256"), "run_identity_sha256",
         "run identity does not hash its contract")
    expected_contract = {
        "dataset_manifest_sha256": manifest.sha256,
        "dataset_repo_id": manifest.dataset["repo_id"],
        "dataset_revision": manifest.dataset["revision"],
        "dataset_file_sha256": manifest.dataset["file_sha256"],
        "model_slug": model.slug,
        "model_revision": model.inference_revision,
        "system_prompt_file_sha256": prompt_sha,
        "decoding": suite.decoding(),
        "mm_processor_kwargs": suite.mm_processor_kwargs(),
    }
    for key, value in expected_contract.items():
        need(contract.get(key) == value, f"run_contract.{key}", "run contract differs from the suite/dataset",
             value, contract.get(key))
    for key in ("system_prompt_file_sha256", "decoding", "mm_processor_kwargs"):
        need(meta.get(key) == expected_contract[key], key, "run metadata differs from the suite",
             expected_contract[key], meta.get(key))


def _row_identity(slug: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """Which model and which dataset row a receipt or scored row is about (its fields in their written order)."""
    return {"model_slug": slug, "row_index": data["row_index"], "instance_id": data["instance_id"],
            "task": data["task"], "domain": data["domain"], "answer_type": data["answer_type"]}


def _check_generation_row(row: Mapping[str, Any], *, path: Path, data: Mapping[str, Any], slug: str,
                          identity_sha: str) -> str:
    where = f"row {data['row_index']}"
    expected = {
        "schema_version": pins.GENERATION_RECEIPT_SCHEMA,
        "status": "complete",
        "run_identity_sha256": identity_sha,
        **_row_identity(slug, data),
    }
    for key, value in expected.items():
        if row.get(key) != value:
            raise InputError("generation row differs from its run/dataset", file=str(path), field=f"{where}.{key}",
                             expected=value, found=row.get(key))
    raw = row.get("raw_response")
    if not isinstance(raw, str) or not raw:
        raise InputError("empty raw_response", file=str(path), field=where)
    if row.get("raw_response_sha256") != hashlib.sha256(raw.encode("utf-8")).hexdigest():
        raise InputError("raw response hash mismatch", file=str(path), field=f"{where}.raw_response_sha256")
    for key in ("request_hash", "response_sha256"):
        if not isinstance(row.get(key), str) or not _SHA256.fullmatch(row[key]):
            raise InputError("not a sha256", file=str(path), field=f"{where}.{key}")
    backend_response = row.get("backend_response")
    if not isinstance(backend_response, dict) or h1(backend_response) != row["response_sha256"]:
        raise InputError("backend response hash mismatch", file=str(path), field=f"{where}.response_sha256")
    expected_request = {
        "prompt_sha256": hashlib.sha256(data["prompt_answer"].encode("utf-8")).hexdigest(),
        "ordered_image_sha256": [image["sha256"] for image in data["images"]],
    }
    if row.get("request") != expected_request:
        raise InputError("request provenance differs from the dataset row", file=str(path), field=f"{where}.request")
    if row.get("finish_reason") is not None and not isinstance(row["finish_reason"], str):
        raise InputError("invalid finish_reason", file=str(path), field=f"{where}.finish_reason")
    return raw


@dataclass(frozen=True)
class Generation:
    """A validated generation run of one model: its rows (row order) and provenance."""

    model: ValidationModel
    rows: tuple[dict[str, Any], ...]
    provenance: Mapping[str, Any]


def load_generation(generation_dir: Path, *, model: ValidationModel, manifest: ValidationManifest,
                    suite: ValidationSuite, prompt_sha: str) -> Generation:
    """``responses.jsonl`` + ``run_metadata.json`` of one model, fully checked against suite and dataset.

    Raises:
        InputError: incomplete run, another model/dataset/decoding, a broken hash, or rows missing/duplicated.
    """
    generation_dir = Path(generation_dir).expanduser().resolve()
    path, meta_path = generation_dir / "responses.jsonl", generation_dir / "run_metadata.json"
    rows = read_jsonl(path)
    if not rows:
        raise InputError("generation file is empty", file=str(path))
    meta = read_json_object(meta_path)
    responses_sha = sha256_file(path)
    _check_metadata(meta, path=meta_path, model=model, manifest=manifest, suite=suite, prompt_sha=prompt_sha,
                    lines=len(rows), responses_sha=responses_sha)
    seen: set[int] = set()
    for row in rows:
        index = row.get("row_index")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(manifest.rows):
            raise InputError("row_index out of range", file=str(path), found=index)
        if index in seen:
            raise InputError("duplicate row", file=str(path), field=f"row {index}")
        seen.add(index)
        row["raw_response"] = _check_generation_row(row, path=path, data=manifest.rows[index], slug=model.slug,
                                                    identity_sha=meta["run_identity_sha256"])
    if seen != set(range(len(manifest.rows))):
        missing = sorted(set(range(len(manifest.rows))) - seen)
        raise InputError("model lacks rows of the dataset", file=str(path), found=f"missing={missing[:10]}")
    provenance = {
        "path": str(path),
        "sha256": responses_sha,
        "run_metadata": str(meta_path),
        "run_metadata_sha256": sha256_file(meta_path),
        "run_identity_sha256": meta["run_identity_sha256"],
        "model_slug": model.slug,
        "model_revision": meta["model_revision"],
        "backend": meta.get("backend"),
        "shard_index": meta.get("shard_index"),
        "shard_count": meta.get("shard_count"),
        "rows": len(rows),
    }
    return Generation(model=model, rows=tuple(sorted(rows, key=lambda r: r["row_index"])), provenance=provenance)


def load_judge_results(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """Judge results keyed by (model_slug, row_index). Raises InputError on invalid or repeated keys."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for row in read_jsonl(path):
        slug, index = row.get("model_slug"), row.get("row_index")
        if not isinstance(slug, str) or not slug or isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise InputError("judge result lacks a valid model_slug/row_index", file=str(path))
        if (slug, index) in out:
            raise InputError("duplicate judge result", file=str(path), field=f"{slug}/{index}")
        out[(slug, index)] = row
    return out


def check_judge_result(result: Mapping[str, Any], *, pending_row: Mapping[str, Any], suite: ValidationSuite,
                       file: str) -> None:
    """A judge result is a valid receipt for ``pending_row`` under the suite's judge pins.

    Raises:
        InputError: naming the row and the violated rule.
    """
    where = f"{pending_row['model_slug']}/{pending_row['row_index']}"
    for key in ("request_hash", "rendered_prompt_sha256", "tokenizer_template_sha256"):
        if not isinstance(result.get(key), str) or not _SHA256.fullmatch(result[key]):
            raise InputError(f"judge result has an invalid {key}", file=file, field=where)
    contract = request_contract(pending_row, rendered_sha256=result["rendered_prompt_sha256"],
                                template_sha256=result["tokenizer_template_sha256"], judge=suite.judge)
    try:
        check_receipt(result, row=pending_row, contract=contract, allow_failed=True)
    except JudgeOutputError as exc:
        raise InputError(f"judge receipt provenance validation failed ({exc})", file=file, field=where) from None


# -- computation --------------------------------------------------------------------------------------------------
def _mean(rows: Sequence[Mapping[str, Any]], field: str) -> float:
    return float(sum(float(row[field]) for row in rows) / len(rows)) if rows else 0.0


def aggregate(rows: Sequence[Mapping[str, Any]], group_fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """Upstream's aggregate records, groups sorted by the string form of their key (sums in row order)."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = collections.defaultdict(list)
    for row in rows:
        groups[tuple(row[f] for f in group_fields)].append(row)
    out = []
    for key, members in sorted(groups.items(), key=lambda item: tuple(map(str, item[0]))):
        requested = sum(int(r["judge_requested"]) for r in members)
        resolved = sum(int(r["judge_resolved"]) for r in members)
        record: dict[str, Any] = dict(zip(group_fields, key))
        record.update(
            {
                "rows": len(members),
                "accuracy_denominator_rows": len(members),
                "historical_answer_accuracy": _mean(members, "historical_answer_correct"),
                "historical_format_rate": _mean(members, "historical_format_correct"),
                "terminal_rfc_json_rate": _mean(members, "terminal_rfc_json"),
                "historical_mean_reward": _mean(members, "historical_reward"),
                "deterministic_semantic_accuracy": _mean(members, "deterministic_semantic_correct"),
                "combined_semantic_accuracy": _mean(members, "combined_semantic_correct"),
                "deterministic_found_rate": _mean(members, "deterministic_found"),
                "judge_fallback_rate": _mean(members, "judge_requested"),
                "judge_requested_rows": requested,
                "judge_resolved_rows": resolved,
                "judge_resolved_overall_rate": _mean(members, "judge_resolved"),
                "judge_resolution_rate": resolved / requested if requested else 0.0,
                "unresolved_rows": sum(int(r["unresolved"]) for r in members),
                "unresolved_rate": _mean(members, "unresolved"),
                "route_counts": dict(sorted(collections.Counter(str(r["final_extraction_route"]) for r in members).items())),
            }
        )
        out.append(record)
    return out


def summary_markdown(overall: Sequence[Mapping[str, Any]], labels: Mapping[str, str], *, rows: int,
                     tasks: int) -> str:
    """Upstream's ``summary.md`` (title, one sentence, the percentage table, the closing sentence)."""
    lines = [
        "# TRACE validation results",
        "",
        f"The split contains {rows:,} unseen validation instances from the same {tasks:,} task programs used for training.",
        "",
        "| Model | Strict answer | Terminal format | Deterministic semantic | Combined semantic | Judge fallback | Unresolved |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in overall:
        label = labels.get(str(r["model_slug"]), str(r["model_slug"]))
        lines.append(
            f"| {label} | {r['historical_answer_accuracy']:.2%} | {r['historical_format_rate']:.2%} | "
            f"{r['deterministic_semantic_accuracy']:.2%} | {r['combined_semantic_accuracy']:.2%} | "
            f"{r['judge_fallback_rate']:.2%} | {r['unresolved_rate']:.2%} |"
        )
    lines += [
        "",
        "Strict answer accuracy uses the training reward scorer. Combined semantic accuracy applies the same "
        "deterministic and Qwen3 extraction policy to every model; unresolved rows remain incorrect and in the "
        "denominator.",
        "",
    ]
    return "\n".join(lines)


def pending_row(slug: str, data: Mapping[str, Any], raw: str, status: str) -> dict[str, Any]:
    """The eight GT-blind fields the judge may see for one row."""
    return {
        "model_slug": slug,
        "row_index": data["row_index"],
        "instance_id": data["instance_id"],
        "answer_type": data["answer_type"],
        "raw_response": raw,
        "raw_response_sha256": hashlib.sha256(raw.encode("utf-8")).hexdigest(),
        "deterministic_status": status,
        "deterministic_extraction_version": EXTRACTION_VERSION,
    }


def score_rows(generation: Generation, manifest: ValidationManifest,
               judge_results: Mapping[tuple[str, int], Mapping[str, Any]] | None,
               suite: ValidationSuite, *, judge_file: str = "judge_results.jsonl") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(scored rows, pending rows)`` of one model (pure; judge results re-validated per row).

    Raises:
        InputError: an invalid judge result, or (final pass) judge coverage differing from the pending rows.
    """
    slug = generation.model.slug
    results = judge_results or {}
    scored, pending = [], []
    for gen in generation.rows:
        data = manifest.rows[gen["row_index"]]
        raw = gen["raw_response"]
        gt = data["answer_gt"]
        extraction = extract(raw, data["answer_type"])
        found = extraction.resolved
        det_correct = semantic_correct(extraction.typed, gt["value"]) if found else 0
        key = (slug, data["row_index"])
        judged = results.get(key)
        if not found:
            row = pending_row(slug, data, raw, extraction.status.upstream)
            pending.append(row)
            if judged is not None:
                check_judge_result(judged, pending_row=row, suite=suite, file=judge_file)
        resolved = bool(not found and judged is not None and judged.get("judge_status") == "ok")
        if found:
            combined, route = det_correct, f"deterministic:{extraction.route}"
        elif resolved:
            combined, route = semantic_correct(judged["answer"], gt["value"]), "judge"
        elif judged is not None:
            combined, route = 0, f"judge:{judged.get('judge_status', 'failed')}"
        else:
            combined, route = 0, f"pending:{extraction.status.upstream}"
        scored.append(
            {
                "schema_version": pins.SCORED_ROW_SCHEMA,
                "scoring_contract_version": pins.SCORING_CONTRACT_VERSION,
                "deterministic_extraction_version": EXTRACTION_VERSION,
                **_row_identity(slug, data),
                "answer_gt": gt,
                "raw_response_sha256": hashlib.sha256(raw.encode("utf-8")).hexdigest(),
                **historical_fields(raw, gt),
                "deterministic_extraction": extraction.as_dict(),
                "deterministic_found": int(found),
                "deterministic_semantic_correct": int(det_correct),
                "judge_requested": int(not found),
                "judge_status": judged.get("judge_status") if judged else None,
                "judge_answer": judged.get("answer") if judged else None,
                "judge_evidence": judged.get("evidence", "") if judged else "",
                "judge_resolved": int(resolved),
                "combined_semantic_correct": int(combined),
                "unresolved": int(not found and not resolved),
                "final_extraction_route": route,
                "generation_finish_reason": gen.get("finish_reason"),
                "generation_request_hash": gen.get("request_hash"),
            }
        )
    if judge_results is not None:
        expected = {(r["model_slug"], r["row_index"]) for r in pending}
        actual = {k for k in judge_results if k[0] == slug}
        if actual != expected:
            raise InputError("judge coverage mismatch", file=judge_file,
                             found=f"missing={sorted(expected - actual)[:10]} extra={sorted(actual - expected)[:10]}")
    return scored, pending


def run_score(
    release: ReleaseRoot,
    manifest_path: Path,
    generation_dir: Path,
    output_dir: Path,
    *,
    model_slug: str,
    judge_results: Path | None = None,
    expected: pins.DatasetIdentity = pins.REPRODUCTION_DATASET,
) -> ScoreReport:
    """Score one model into ``output_dir`` (module docstring). Raises InputError for any invalid input."""
    suite = load_validation_suite(release)
    check_scoring_policy(suite)
    try:
        model = suite.model(model_slug)
    except KeyError:
        raise InputError("unknown validation model", field="--model", found=model_slug,
                         hint=f"suite models: {', '.join(suite.slugs)}") from None
    _, prompt_sha = load_system_prompt(release, suite)
    manifest = load_scoring_manifest(manifest_path, expected)
    equivalence = check_equivalence_bridge(release, suite, manifest.sha256) if expected.pinned else None
    generation = load_generation(generation_dir, model=model, manifest=manifest, suite=suite, prompt_sha=prompt_sha)
    results = load_judge_results(Path(judge_results)) if judge_results is not None else None
    scored, pending = score_rows(generation, manifest, results, suite,
                                 judge_file=str(judge_results) if judge_results else "judge_results.jsonl")
    overall = aggregate(scored, ("model_slug",))
    tasks = len({row["task"] for row in manifest.rows})
    provenance = {
        "schema_version": pins.SCORE_PROVENANCE_SCHEMA,
        "scoring_contract_version": pins.SCORING_CONTRACT_VERSION,
        "dataset_manifest": str(manifest.path),
        "dataset_manifest_sha256": manifest.sha256,
        "dataset_identity": dict(manifest.dataset),
        "dataset_equivalence": equivalence,
        "suite": str(release.file(identity.VALIDATION_SUITE)),
        "suite_sha256": suite.sha256,
        "generation_files": [dict(generation.provenance)],
        "judge_results": {"path": str(Path(judge_results).resolve()), "sha256": sha256_file(Path(judge_results))}
        if judge_results is not None else None,
        "code_sha256": code_sha256(),
        "deterministic_extraction_contract_version": EXTRACTION_VERSION,
        "judge_extraction_contract_version": pins.JUDGE_CONTRACT_VERSION,
        "judge_model": {"repo_id": suite.judge.repo_id, "revision": suite.judge.revision,
                        "served_model_name": suite.judge.served_model_name},
        "model_slugs": [model.slug],
        "models": len(overall),
        "rows_per_model": len(manifest.rows),
        "total_rows": len(scored),
        "accuracy_denominator_rows": len(scored),
        "judge_requested_rows": len(pending),
        "judge_pending_rows": len(pending),
        "judge_result_rows": len([k for k in (results or {}) if k[0] == model.slug]),
        "judge_resolved_rows": sum(r["judge_resolved"] for r in scored),
        "unresolved_rows": sum(r["unresolved"] for r in scored),
        "denominator_policy": {
            "accuracy": "all_generation_rows",
            "judge_fallback_rate": "all_generation_rows",
            "judge_resolution_rate": "judge_requested_rows",
            "unresolved_rows_score": 0,
            "drop_failed_rows": False,
        },
        "judge_finalized": judge_results is not None,
    }
    output_dir = Path(output_dir).expanduser().resolve()
    with scoring_lock(output_dir), atomic_outputs() as files:  # one scorer per directory; all five files or none
        write_jsonl(output_dir / "scored_rows.jsonl", scored, into=files)
        write_jsonl(output_dir / "judge_pending.jsonl", pending, into=files)
        write_json(output_dir / "summary.json", {
            "provenance": provenance,
            "overall": overall,
            "by_domain": aggregate(scored, ("model_slug", "domain")),
            "by_answer_type": aggregate(scored, ("model_slug", "answer_type")),
        }, into=files)
        write_jsonl(output_dir / "by_task.jsonl", aggregate(scored, ("model_slug", "task")), into=files)
        write_text(output_dir / "summary.md",
                   summary_markdown(overall, {model.slug: model.label}, rows=len(manifest.rows), tasks=tasks),
                   into=files)
    return ScoreReport(
        model_slug=model.slug,
        rows=len(scored),
        correct=sum(r["combined_semantic_correct"] for r in scored),
        deterministic_found=sum(r["deterministic_found"] for r in scored),
        judge_requested=len(pending),
        judge_resolved=provenance["judge_resolved_rows"],
        unresolved=provenance["unresolved_rows"],
        judge_finalized=judge_results is not None,
        output_dir=output_dir,
    )
