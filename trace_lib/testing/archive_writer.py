"""Write small archives in the paper archive's public schema (``trace_eval_v1``), for tests and benchmarks.

:func:`write_archive_run` lays out one run exactly as upstream's exporter does (content-addressed zstd Parquet
parts under ``data/<config>/run=/model=/seed=/benchmark=``, part manifests, ``metadata/manifest.json``,
``metadata/results/benchmark_scores.json``, run metadata), computing every hash with
:mod:`trace_lib.archive.hashes`. Samples are given as :class:`SampleSpec` (what the private source records
held: prompt text, image hashes, response, extraction, score).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from trace_lib.archive import hashes
from trace_lib.archive.identity import media_inputs
from trace_lib.archive.schema import (
    CONFIG_NAMES, EXPORT_MANIFEST_VERSION, EXTRACTION_CONTRACT_VERSION, PART_MANIFEST_VERSION,
    RESPONSE_CONTRACT_VERSION, RESULTS_VERSION, SCHEMA_VERSION, SCORE_CONTRACT_VERSION, arrow_schema,
)
from trace_lib.jsonio import canonical_json_ascii
from trace_lib.release.load import sha256_file

#: The media inputs of the paper's runs (``run_metadata.media_inputs`` in the release).
PAPER_MEDIA_INPUTS: Mapping[str, Any] = media_inputs({"min_pixels": 3136, "max_pixels": 12845056})
#: The suite's decoding (``suite.v1.json`` ``generation``), seed added per slice.
PAPER_SAMPLING: Mapping[str, Any] = {"temperature": 0.6, "top_p": 1.0, "top_k": -1, "presence_penalty": 0.0,
                                     "repetition_penalty": 1.0, "max_tokens": 4096}


@dataclass(frozen=True)
class SampleSpec:
    """One archived sample as the source records held it (``score`` is the row credit, a fraction)."""

    source_index: str
    source_ordinal: int
    source_row_sha256: str
    prompt_text: str
    response_text: str
    ordered_media_sha256: tuple[str, ...] = ()
    finish_reason: str | None = "stop"
    prompt_tokens: int | None = 100
    completion_tokens: int | None = 10
    extraction_status: str = "resolved"
    extraction_value: Any = None
    extraction_candidates: tuple[Any, ...] = ()
    extraction_method: str = "deterministic_parser"
    judge_output: str | None = None
    retry_count: int = 0
    score: float | None = 0.0
    excluded: bool = False


@dataclass(frozen=True)
class SliceSpec:
    """One (model, seed, benchmark) slice: its samples and aggregate percent (``aggregate_only``: no row scores)."""

    model_id: str
    seed: int
    benchmark_id: str
    samples: tuple[SampleSpec, ...]
    aggregate_score: float
    dataset_sha256: str = "0" * 64
    model_revision: str = "1" * 40
    aggregate_only: bool = False
    sampling: Mapping[str, Any] = field(default_factory=lambda: dict(PAPER_SAMPLING))


@dataclass(frozen=True)
class WrittenRun:
    """Where a run was written and the hashes a release would pin for it."""

    root: Path
    run_id: str
    manifest_sha256: str
    result_sha256: str


def _write_json(path: Path, value: Any) -> tuple[str, int]:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(canonical_json_ascii(value) + "\n", encoding="utf-8")
    return sha256_file(path), path.stat().st_size


def _rows(spec: SliceSpec, run_id: str, media_inputs: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    identity = {"schema_version": SCHEMA_VERSION, "run_id": run_id, "model_id": spec.model_id,
                "model_revision": spec.model_revision, "seed": spec.seed, "benchmark_id": spec.benchmark_id,
                "dataset_split": "default", "dataset_revision": hashes.dataset_revision(spec.dataset_sha256)}
    settings = hashes.generation_settings({**spec.sampling, "seed": spec.seed}, model_id=spec.model_id,
                                          media_inputs=media_inputs)
    out: dict[str, list[dict[str, Any]]] = {c: [] for c in CONFIG_NAMES}
    for s in sorted(spec.samples, key=lambda x: (x.source_ordinal, x.source_index)):
        media = list(s.ordered_media_sha256)
        media_set = hashes.media_set_sha256(media)
        record = hashes.source_record_sha256(s.source_row_sha256, media_set)
        prompt = hashes.prompt_sha256(s.prompt_text)
        request = hashes.request_sha256(prompt_digest=prompt, ordered_media_sha256=media, settings=settings)
        sample = hashes.sample_id(run_id=run_id, model_id=spec.model_id, model_revision=spec.model_revision,
                                  seed=spec.seed, benchmark_id=spec.benchmark_id, source_index=s.source_index,
                                  source_ordinal=s.source_ordinal, source_row_sha256=s.source_row_sha256)
        response = hashes.response_sha256(s.response_text)
        common = {
            **identity, "sample_id": sample, "response_id": hashes.response_id(sample, response),
            "source_index": s.source_index, "source_ordinal": s.source_ordinal, "dataset_sha256": spec.dataset_sha256,
            "source_row_sha256": s.source_row_sha256, "source_record_sha256": record, "media_set_sha256": media_set,
            "ordered_media_sha256": media, "prompt_sha256": prompt, "request_sha256": request,
            "prompt_contract_sha256": hashes.prompt_contract_sha256(
                dataset_sha256=spec.dataset_sha256, source_row_sha256=s.source_row_sha256,
                source_record_sha256=record, media_set_sha256=media_set, prompt_sha256=prompt,
                request_sha256=request),
            "response_sha256": response,
        }
        out["responses"].append({**common, "contract_version": RESPONSE_CONTRACT_VERSION,
                                 "response_text": s.response_text, "finish_reason": s.finish_reason,
                                 "generation_settings_json": canonical_json_ascii(settings),
                                 "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens})
        used_judge = s.judge_output is not None
        out["extractions"].append({
            **common, "contract_version": EXTRACTION_CONTRACT_VERSION, "extraction_status": s.extraction_status,
            "extraction_value_type": _json_type(s.extraction_value),
            "extraction_value_json": canonical_json_ascii(s.extraction_value),
            "extraction_candidates_json": canonical_json_ascii(list(s.extraction_candidates)),
            "extraction_sha256": hashes.extraction_sha256(sample=sample, status=s.extraction_status,
                                                          value=s.extraction_value,
                                                          candidates=list(s.extraction_candidates)),
            "extraction_method": "judge" if used_judge else s.extraction_method, "used_judge": used_judge,
            "judge_model_id": "Qwen/Qwen3-32B" if used_judge else None,
            "judge_model_revision": "9216db5781bf21249d130ec9da846c4624c16137" if used_judge else None,
            "judge_output": s.judge_output,
            "judge_output_sha256": hashes.text_sha256(s.judge_output) if used_judge else None,
            "retry_count": s.retry_count,
        })
        if not spec.aggregate_only:
            out["scores"].append({
                **{k: identity[k] for k in identity}, "score_id": hashes.score_id(
                    run_id=run_id, model_id=spec.model_id, seed=spec.seed, benchmark_id=spec.benchmark_id,
                    scope="row", sample=sample),
                "score_scope": "row", **{k: common[k] for k in (
                    "sample_id", "response_id", "source_index", "source_ordinal", "dataset_sha256",
                    "source_row_sha256", "source_record_sha256", "media_set_sha256", "prompt_sha256",
                    "request_sha256", "prompt_contract_sha256", "response_sha256")},
                "contract_version": SCORE_CONTRACT_VERSION, "scorer_id": f"{spec.benchmark_id}-primary-v1",
                "metric_id": "primary", "score_unit": "fraction",
                "score_value": None if s.score is None else float(s.score), "score_value_json": canonical_json_ascii(s.score),
                "excluded": s.excluded, "evaluated_rows": None,
            })
    out["scores"].append({
        **identity, "score_id": hashes.score_id(run_id=run_id, model_id=spec.model_id, seed=spec.seed,
                                                benchmark_id=spec.benchmark_id, scope="aggregate", sample=None),
        "score_scope": "aggregate", "sample_id": None, "response_id": None, "source_index": None,
        "source_ordinal": None, "dataset_sha256": spec.dataset_sha256, "source_row_sha256": None,
        "source_record_sha256": None, "media_set_sha256": None, "prompt_sha256": None, "request_sha256": None,
        "prompt_contract_sha256": None, "response_sha256": None, "contract_version": SCORE_CONTRACT_VERSION,
        "scorer_id": f"{spec.benchmark_id}-primary-v1", "metric_id": "primary", "score_unit": "percent",
        "score_value": float(spec.aggregate_score), "score_value_json": canonical_json_ascii(float(spec.aggregate_score)),
        "excluded": False, "evaluated_rows": len(spec.samples),
    })
    return out


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, (list, tuple)) else "object"


def write_archive_run(
    root: Path, run_id: str, slices: Sequence[SliceSpec], *, suite_id: str = "trace_eval_v1",
    media_inputs: Mapping[str, Any] = PAPER_MEDIA_INPUTS, view: Sequence[str] | None = None,
) -> WrittenRun:
    """Write one run under ``root`` (the run directory itself) and return its pinned hashes. ``view``: the
    benchmarks ``metadata/suites/<suite_id>.json`` lists (default: the slices' benchmarks, first-seen order)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(root)
    artifacts: list[dict[str, Any]] = []
    stats = {c: {"rows": 0, "parts": 0, "placeholder_records_removed": 0} for c in CONFIG_NAMES}
    benchmark_scores = []
    for spec in slices:
        rows = _rows(spec, run_id, media_inputs)
        partition = Path(f"run={run_id}", f"model={spec.model_id}", f"seed={spec.seed}",
                         f"benchmark={spec.benchmark_id}")
        for config in CONFIG_NAMES:
            directory = root / "data" / config / partition
            directory.mkdir(parents=True, exist_ok=True)
            pending = directory / "part.pending.parquet"
            pq.write_table(pa.Table.from_pylist(rows[config], schema=arrow_schema(config)), pending,
                           compression="zstd", compression_level=9, data_page_version="2.0", version="2.6",
                           use_dictionary=True, write_statistics=True)
            digest = sha256_file(pending)
            final = directory / f"part-{digest}.parquet"
            pending.replace(final)
            parquet_rel = final.relative_to(root).as_posix()
            identity = {"run_id": run_id, "model_id": spec.model_id, "model_revision": spec.model_revision,
                        "seed": spec.seed, "benchmark_id": spec.benchmark_id, "dataset_split": "default",
                        "dataset_revision": hashes.dataset_revision(spec.dataset_sha256)}
            scope = "aggregate_only" if spec.aggregate_only else "row_and_aggregate"
            part_manifest = {"schema_version": PART_MANIFEST_VERSION, "config_name": config,
                             "identity": identity, "rows": len(rows[config]), "parquet_path": parquet_rel,
                             "parquet_sha256": digest, "parquet_size": final.stat().st_size, "provenance": {}}
            manifest_rel = (Path("metadata", "parts", config) / partition / f"part-{digest}.manifest.json").as_posix()
            m_sha, m_size = _write_json(root / manifest_rel, part_manifest)
            entry = {"config_name": config, "run_id": run_id, "model_id": spec.model_id, "seed": spec.seed,
                     "benchmark_id": spec.benchmark_id, "rows": len(rows[config]), "parquet_path": parquet_rel,
                     "parquet_sha256": digest, "parquet_size": final.stat().st_size, "manifest_path": manifest_rel,
                     "manifest_sha256": m_sha, "manifest_size": m_size}
            if config == "scores":
                entry.update({"scoring_scope": scope, "evaluated_rows": len(spec.samples),
                              "placeholder_records_removed": 0})
            artifacts.append(entry)
            stats[config]["rows"] += len(rows[config])
            stats[config]["parts"] += 1
        benchmark_scores.append({"model_id": spec.model_id, "seed": spec.seed, "benchmark_id": spec.benchmark_id,
                                 "score": float(spec.aggregate_score), "evaluated_rows": len(spec.samples),
                                 "scoring_scope": "aggregate"})
    results = {"schema_version": RESULTS_VERSION, "suite_id": suite_id, "run_id": run_id, "score_unit": "percent",
               "aggregation": "unweighted_macro_mean", "benchmark_scores": benchmark_scores,
               "overall_scores": [{"model_id": m, "seed": sd, "score": statistics.fmean(
                   [b["score"] for b in benchmark_scores if (b["model_id"], b["seed"]) == (m, sd)])}
                   for m, sd in sorted({(b["model_id"], b["seed"]) for b in benchmark_scores})]}
    result_sha, result_size = _write_json(root / "metadata/results/benchmark_scores.json", results)
    run_meta = {"schema_version": "trace_eval_run_v1", "run_id": run_id, "suite_id": suite_id,
                "media_inputs": dict(media_inputs)}
    run_sha, run_size = _write_json(root / f"metadata/runs/{run_id}.json", run_meta)
    benchmark_ids = list(view) if view is not None else list(dict.fromkeys(s.benchmark_id for s in slices))
    suite_rel = f"metadata/suites/{suite_id}.json"
    suite_sha, suite_size = _write_json(root / suite_rel, {
        "schema_version": "trace_eval_suite_v1", "suite_id": suite_id, "benchmark_count": len(benchmark_ids),
        "benchmark_ids": benchmark_ids, "categories": []})
    manifest = {"schema_version": EXPORT_MANIFEST_VERSION, "suite_id": suite_id, "run_ids": [run_id],
                "neutralized": True,
                "configs": [{"config_name": c, "contract_version": {
                    "responses": RESPONSE_CONTRACT_VERSION, "extractions": EXTRACTION_CONTRACT_VERSION,
                    "scores": SCORE_CONTRACT_VERSION}[c], **stats[c]} for c in CONFIG_NAMES],
                "artifacts": artifacts,
                "metadata_files": [
                    {"path": "metadata/results/benchmark_scores.json", "sha256": result_sha, "size": result_size},
                    {"path": f"metadata/runs/{run_id}.json", "sha256": run_sha, "size": run_size},
                    {"path": suite_rel, "sha256": suite_sha, "size": suite_size}],
                "release_files": []}
    manifest_sha, _ = _write_json(root / "metadata/manifest.json", manifest)
    return WrittenRun(root, run_id, manifest_sha, result_sha)
