"""The public schema of the paper's evaluation archive (upstream ``trace_eval_public_export.py``, ``trace_eval_v1``).

One archive *run* is a directory (``runs/<run_id>/`` in the Hub repository) holding:

- ``data/<config>/run=<run>/model=<model>/seed=<seed>/benchmark=<benchmark>/part-<sha256>.parquet`` for the
  configs ``responses``, ``extractions`` and ``scores``; each part's name is the SHA-256 of its bytes;
- ``metadata/parts/<config>/<same partition>/part-<sha256>.manifest.json`` (one per part);
- ``metadata/manifest.json``: the allow-list (``artifacts[]``: config, model, seed, benchmark, rows, parquet
  path/sha256/size, manifest path/sha256/size; ``metadata_files[]``; ``release_files[]``);
- ``metadata/results/benchmark_scores.json`` (aggregate percent per model, seed, benchmark),
  ``metadata/runs/<run_id>.json``, ``metadata/models/<model>.json``, ``metadata/suites/<suite>.json``.

Column names below are upstream's, in upstream's order; :class:`ArchiveRow` is one sample joined across the
three configs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SCHEMA_VERSION = "trace_eval_v1"
EXPORT_MANIFEST_VERSION = "trace_eval_export_manifest_v1"
PART_MANIFEST_VERSION = "trace_eval_part_manifest_v1"
RESULTS_VERSION = "trace_eval_results_v1"
RESPONSE_CONTRACT_VERSION = "trace_eval_response_v1"
EXTRACTION_CONTRACT_VERSION = "trace_eval_extraction_v1"
SCORE_CONTRACT_VERSION = "trace_eval_score_v1"
REQUEST_CONTRACT_VERSION = "trace_eval_request_v1"
PROMPT_CONTRACT_VERSION = "trace_eval_prompt_contract_v1"
MEDIA_CONTRACT_VERSION = "trace_eval_media_v1"
DATASET_REVISION_PREFIX = "trace-eval-datasets-v1"

CONFIG_NAMES: tuple[str, ...] = ("responses", "extractions", "scores")
MANIFEST_PATH = "metadata/manifest.json"
RESULTS_PATH = "metadata/results/benchmark_scores.json"
#: Where a run lives inside the Hub repository.
RUN_ROOT_TEMPLATE = "runs/{run_id}"
#: The neutral media/request fields of ``generation_settings_json`` (beside the sampling fields).
MEDIA_SETTING_KEYS: tuple[str, ...] = (
    "media_contract_version", "source_media_contract_sha256", "media_transport", "min_image_pixels",
    "max_image_pixels", "max_image_side", "image_jpeg_quality",
)

#: Columns every sample-level row (responses, extractions) carries, in upstream's order.
COMMON_SAMPLE_COLUMNS: tuple[str, ...] = (
    "schema_version", "run_id", "model_id", "model_revision", "seed", "benchmark_id", "dataset_split",
    "dataset_revision", "sample_id", "response_id", "source_index", "source_ordinal", "dataset_sha256",
    "source_row_sha256", "source_record_sha256", "media_set_sha256", "ordered_media_sha256", "prompt_sha256",
    "request_sha256", "prompt_contract_sha256", "response_sha256",
)
RESPONSE_COLUMNS: tuple[str, ...] = COMMON_SAMPLE_COLUMNS + (
    "contract_version", "response_text", "finish_reason", "generation_settings_json", "prompt_tokens",
    "completion_tokens",
)
EXTRACTION_COLUMNS: tuple[str, ...] = COMMON_SAMPLE_COLUMNS + (
    "contract_version", "extraction_status", "extraction_value_type", "extraction_value_json",
    "extraction_candidates_json", "extraction_sha256", "extraction_method", "used_judge", "judge_model_id",
    "judge_model_revision", "judge_output", "judge_output_sha256", "retry_count",
)
SCORE_COLUMNS: tuple[str, ...] = (
    "schema_version", "run_id", "model_id", "model_revision", "seed", "benchmark_id", "dataset_split",
    "dataset_revision", "score_id", "score_scope", "sample_id", "response_id", "source_index", "source_ordinal",
    "dataset_sha256", "source_row_sha256", "source_record_sha256", "media_set_sha256", "prompt_sha256",
    "request_sha256", "prompt_contract_sha256", "response_sha256", "contract_version", "scorer_id", "metric_id",
    "score_unit", "score_value", "score_value_json", "excluded", "evaluated_rows",
)
COLUMNS: dict[str, tuple[str, ...]] = {
    "responses": RESPONSE_COLUMNS, "extractions": EXTRACTION_COLUMNS, "scores": SCORE_COLUMNS,
}
#: Columns the reader loads from each config to build an :class:`ArchiveRow` (the rest stay on disk).
READ_COLUMNS: dict[str, tuple[str, ...]] = {
    "responses": (
        "sample_id", "source_index", "source_ordinal", "dataset_sha256", "source_row_sha256",
        "source_record_sha256", "media_set_sha256", "ordered_media_sha256", "prompt_sha256", "request_sha256",
        "prompt_contract_sha256", "response_sha256", "response_text", "finish_reason", "generation_settings_json",
        "prompt_tokens", "completion_tokens",
    ),
    "extractions": (
        "sample_id", "extraction_status", "extraction_value_json", "extraction_candidates_json", "extraction_method",
        "used_judge", "judge_output", "retry_count",
    ),
    "scores": ("sample_id", "score_scope", "score_value", "excluded", "evaluated_rows"),
}


@dataclass(frozen=True)
class SliceKey:
    """One (model, seed, benchmark) slice of an archive run."""

    model_id: str
    seed: int
    benchmark_id: str

    @property
    def id(self) -> str:
        """The reproduction-lane id stem ``MODEL-seedSEED-BENCHMARK`` (``-archive`` is appended by the lane)."""
        return f"{self.model_id}-seed{self.seed}-{self.benchmark_id}"


@dataclass(frozen=True)
class PartRef:
    """One content-addressed Parquet part as the run manifest lists it (path relative to the run root)."""

    config_name: str
    key: SliceKey
    rows: int
    path: str
    sha256: str
    size: int
    manifest_path: str | None = None
    manifest_sha256: str | None = None
    manifest_size: int | None = None


@dataclass(frozen=True)
class ArchiveRow:
    """One archived sample joined across ``responses``, ``extractions`` and ``scores`` (by ``sample_id``).

    Identity: ``source_index`` (the dataset's ``index`` as text), ``source_ordinal`` (0-based row position in the
    dataset), ``sample_id``. Hashes (upstream's definitions, :mod:`trace_lib.archive.hashes`):
    ``source_row_sha256`` (the row's non-media fields), ``media_set_sha256`` (its ordered image hashes,
    ``ordered_media_sha256``: SHA-256 of each image file's bytes), ``source_record_sha256`` (row + media),
    ``prompt_sha256`` (UTF-8 prompt text), ``request_sha256`` (media hashes + prompt hash + neutral generation
    settings), ``prompt_contract_sha256`` (all of the above + ``dataset_sha256``), ``response_sha256``.
    Generation: ``response_text``, ``finish_reason`` ("stop", "length", or None), ``generation_settings_json``
    (canonical JSON), ``prompt_tokens``, ``completion_tokens`` (None when unrecorded).
    Extraction: ``extraction_status`` (resolved/ambiguous/invalid/excluded), ``extraction_value_json`` and
    ``extraction_candidates_json`` (canonical JSON), ``extraction_method`` (judge / deterministic_parser /
    benchmark_adapter / unknown), ``used_judge``, ``judge_output`` (the judge's final text, None without judge),
    ``retry_count``. Score: ``score_value`` (the row's credit, a fraction; None when excluded or when the slice
    is scored only in aggregate), ``excluded``; ``has_row_score`` says whether the archive holds a row-level score.
    """

    source_index: str
    source_ordinal: int
    sample_id: str
    dataset_sha256: str
    source_row_sha256: str
    source_record_sha256: str
    media_set_sha256: str
    ordered_media_sha256: tuple[str, ...]
    prompt_sha256: str
    request_sha256: str
    prompt_contract_sha256: str
    response_sha256: str
    response_text: str
    finish_reason: str | None
    generation_settings_json: str
    prompt_tokens: int | None
    completion_tokens: int | None
    extraction_status: str | None
    extraction_value_json: str | None
    extraction_candidates_json: str | None
    extraction_method: str | None
    used_judge: bool
    judge_output: str | None
    retry_count: int
    has_row_score: bool
    score_value: float | None
    excluded: bool

    @property
    def row_key(self) -> str:
        """trace-repro's (and upstream's) row identity ``<ordinal:08d>:<index>:<source_row_sha256[:16]>``."""
        return f"{self.source_ordinal:08d}:{self.source_index}:{self.source_row_sha256[:16]}"

    def judge_outputs(self) -> tuple[str, ...]:
        """The judge outputs this row records, one per judge call.

        Upstream's direct-route scorer (``run_external_benchmark_score_queue.py``) archives a row's judge calls as
        the canonical JSON *list* of their outputs (``"[]"`` when it called no judge, which the exporter still
        marks ``used_judge``); the official route archives none (``used_judge`` false); the dedicated and
        validation scorers archive one output as text. A list of strings is read as the calls, anything else
        as one output.
        """
        import json

        if not self.used_judge or self.judge_output is None:
            return ()
        text = self.judge_output
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return tuple(value)
        return (text,)

    def extraction_value(self) -> Any:
        """The extracted value decoded from its canonical JSON (None when absent)."""
        import json

        return None if self.extraction_value_json is None else json.loads(self.extraction_value_json)


@dataclass(frozen=True)
class SliceAggregate:
    """A slice's aggregate score row: the reported percent and the number of evaluated rows."""

    key: SliceKey
    score: float
    evaluated_rows: int
    scoring_scope: str  # "row_and_aggregate" or "aggregate_only"


def arrow_schema(config_name: str):  # noqa: ANN201 - pyarrow.Schema (pyarrow imported lazily)
    """Upstream's exact pyarrow schema of ``config_name`` (types, nullability, ``trace_eval_*`` metadata)."""
    import pyarrow as pa

    s, i, b, f = pa.string(), pa.int64(), pa.bool_(), pa.float64()
    not_null = {
        "responses": set(RESPONSE_COLUMNS) - {"finish_reason", "prompt_tokens", "completion_tokens"},
        "extractions": set(EXTRACTION_COLUMNS) - {"judge_model_id", "judge_model_revision", "judge_output",
                                                   "judge_output_sha256"},
        "scores": {"schema_version", "run_id", "model_id", "model_revision", "seed", "benchmark_id", "dataset_split",
                   "dataset_revision", "score_id", "score_scope", "dataset_sha256", "contract_version", "scorer_id",
                   "metric_id", "score_unit", "score_value_json", "excluded"},
    }[config_name]
    types = {"seed": i, "source_ordinal": i, "ordered_media_sha256": pa.list_(s), "prompt_tokens": i,
             "completion_tokens": i, "used_judge": b, "retry_count": i, "score_value": f, "excluded": b,
             "evaluated_rows": i}
    fields = [pa.field(name, types.get(name, s), nullable=name not in not_null) for name in COLUMNS[config_name]]
    return pa.schema(fields, metadata={b"trace_eval_schema": SCHEMA_VERSION.encode("ascii"),
                                       b"trace_eval_config": config_name.encode("ascii")})
