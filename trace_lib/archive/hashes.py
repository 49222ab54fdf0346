"""Upstream's hash definitions of the public archive (``trace_eval_public_export.py`` at the pinned commit).

Every digest is lowercase hex SHA-256. ``CJ`` is canonical JSON (sorted keys, ``(",", ":")``, ASCII, no NaN):

- ``prompt_sha256`` / ``response_sha256``: the UTF-8 bytes of the text;
- ``source_row_sha256``: the dataset row's non-media fields (:func:`trace_lib.data.rowhash.source_row_hash`);
- ``media_set_sha256 = CJ([{"type": "image", "sha256": h}, ...])`` over each image file's SHA-256, in prompt order;
- ``source_record_sha256 = CJ({"source_row_hash", "media_set_sha256"})``;
- ``request_sha256 = CJ({"contract_version": "trace_eval_request_v1", "messages": [{"role": "user", "content":
  [images..., {"type": "text", "sha256": prompt_sha256}]}], "generation": settings})`` where ``settings`` is
  :func:`generation_settings` (sampling fields, ``model_id``, the media inputs);
- ``prompt_contract_sha256 = CJ({contract_version, dataset_sha256, source_row_sha256, source_record_sha256,
  media_set_sha256, prompt_sha256, request_sha256})``;
- ``sample_id``, ``response_id``, ``extraction_sha256``, ``score_id``: the public identities (same scheme).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from trace_lib.archive.schema import (
    DATASET_REVISION_PREFIX, EXTRACTION_CONTRACT_VERSION, MEDIA_SETTING_KEYS, PROMPT_CONTRACT_VERSION,
    REQUEST_CONTRACT_VERSION, SCHEMA_VERSION,
)
from trace_lib.data.rowhash import canonical_sha256, media_set_sha256, source_record_sha256, source_row_hash
from trace_lib.jsonio import canonical_json_ascii as canonical_json
from trace_lib.release.load import sha256_bytes

__all__ = [
    "canonical_json", "canonical_sha256", "dataset_revision", "extraction_sha256", "generation_settings",
    "media_set_sha256", "prompt_contract_sha256", "prompt_sha256", "request_sha256", "response_id",
    "response_sha256", "sample_id", "score_id", "source_record_sha256", "source_row_hash", "text_sha256",
]


def text_sha256(text: str) -> str:
    """SHA-256 of the UTF-8 bytes of ``text`` (``prompt_sha256``, ``response_sha256``, ``judge_output_sha256``)."""
    if not isinstance(text, str):
        raise TypeError(f"expected text, got {type(text).__name__}")
    return sha256_bytes(text.encode("utf-8"))


prompt_sha256 = text_sha256
response_sha256 = text_sha256


def _opt_float(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("boolean is not a numeric generation setting")
    result = float(value)
    if not math.isfinite(result):
        raise ValueError(f"non-finite generation setting: {value!r}")
    return result


def _opt_int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("boolean is not an integer generation setting")
    return int(value)


def generation_settings(
    sampling: Mapping[str, Any], *, model_id: str, media_inputs: Mapping[str, Any]
) -> dict[str, Any]:
    """The neutral ``generation`` block of the request hash: sampling fields as upstream normalises them
    (floats/ints, ``max_output_tokens`` from ``max_output_tokens`` or ``max_tokens``), ``model_id``, and the
    seven media inputs (:data:`~trace_lib.archive.schema.MEDIA_SETTING_KEYS`).

    Raises:
        ValueError: ``media_inputs`` does not hold exactly the seven media keys.
    """
    result: dict[str, Any] = {
        "model_id": model_id,
        "temperature": _opt_float(sampling.get("temperature")),
        "top_p": _opt_float(sampling.get("top_p")),
        "top_k": _opt_int(sampling.get("top_k")),
        "presence_penalty": _opt_float(sampling.get("presence_penalty")),
        "repetition_penalty": _opt_float(sampling.get("repetition_penalty")),
        "max_output_tokens": _opt_int(sampling.get("max_output_tokens", sampling.get("max_tokens"))),
        "seed": _opt_int(sampling.get("seed")),
    }
    if set(media_inputs) != set(MEDIA_SETTING_KEYS):
        raise ValueError(f"media inputs must hold exactly {sorted(MEDIA_SETTING_KEYS)}, got {sorted(media_inputs)}")
    result.update(dict(media_inputs))
    return result


def request_sha256(*, prompt_digest: str, ordered_media_sha256: Sequence[str],
                   settings: Mapping[str, Any]) -> str:
    """The public request hash from the prompt's hash, the ordered image hashes and :func:`generation_settings`."""
    content = [{"type": "image", "sha256": h} for h in ordered_media_sha256]
    content.append({"type": "text", "sha256": prompt_digest})
    return canonical_sha256({
        "contract_version": REQUEST_CONTRACT_VERSION,
        "messages": [{"role": "user", "content": content}],
        "generation": dict(settings),
    })


def prompt_contract_sha256(*, dataset_sha256: str, source_row_sha256: str, source_record_sha256: str,
                           media_set_sha256: str, prompt_sha256: str, request_sha256: str) -> str:
    """The hash binding a sample's dataset, row, media, prompt and request."""
    return canonical_sha256({
        "contract_version": PROMPT_CONTRACT_VERSION,
        "dataset_sha256": dataset_sha256,
        "source_row_sha256": source_row_sha256,
        "source_record_sha256": source_record_sha256,
        "media_set_sha256": media_set_sha256,
        "prompt_sha256": prompt_sha256,
        "request_sha256": request_sha256,
    })


def sample_id(*, run_id: str, model_id: str, model_revision: str, seed: int, benchmark_id: str, source_index: str,
              source_ordinal: int, source_row_sha256: str) -> str:
    """``sample-`` + CJ hash of the sample's public identity."""
    return "sample-" + canonical_sha256({
        "schema_version": SCHEMA_VERSION, "run_id": run_id, "model_id": model_id, "model_revision": model_revision,
        "seed": seed, "benchmark_id": benchmark_id, "source_index": source_index, "source_ordinal": source_ordinal,
        "source_row_sha256": source_row_sha256,
    })


def response_id(sample: str, response_digest: str) -> str:
    """``response-`` + CJ hash of (sample id, response hash)."""
    return "response-" + canonical_sha256(
        {"schema_version": SCHEMA_VERSION, "sample_id": sample, "response_sha256": response_digest})


def extraction_sha256(*, sample: str, status: str, value: Any, candidates: Sequence[Any]) -> str:
    """CJ hash of an extraction (status, value, candidates) bound to its sample."""
    return canonical_sha256({"contract_version": EXTRACTION_CONTRACT_VERSION, "sample_id": sample, "status": status,
                             "value": value, "candidates": list(candidates)})


def score_id(*, run_id: str, model_id: str, seed: int, benchmark_id: str, scope: str, sample: str | None) -> str:
    """``score-`` + CJ hash of the score's identity (``scope`` "row" or "aggregate"; ``sample`` None for aggregate)."""
    return "score-" + canonical_sha256({
        "schema_version": SCHEMA_VERSION, "run_id": run_id, "model_id": model_id, "seed": seed,
        "benchmark_id": benchmark_id, "scope": scope, "sample_id": sample,
    })


def dataset_revision(dataset_sha256: str) -> str:
    """The public ``dataset_revision`` column: ``trace-eval-datasets-v1:<dataset_sha256>``."""
    return f"{DATASET_REVISION_PREFIX}:{dataset_sha256}"
