"""Prompt identity of the TRACE validation archive rows (``MODEL-validation-archive``): does trace-repro's validation
request hash, row by row, to what the paper's validation run archived?

The validation run's producer (``release_receipt.v1.json`` ``producer_code_revision``) is not in the release; its
public rows follow the same exporter definitions as the evaluation runs (:mod:`trace_lib.archive.hashes`), applied
to upstream's validation request (``trace_validation/generate.py``), so per row:

- **row**: the archived ``source_ordinal`` is the manifest's ``row_index`` (the exporter copies the producer's
  ordinal and orders rows by it; upstream's validation rows are the split's rows in order, ``row_index`` ==
  position, and the dataset-equivalence bridge requires the historical and the current split to agree in row
  order); a ``source_index`` that names a manifest row (its ``row_index`` as text or its ``instance_id``) must
  name that same row;
- ``prompt_sha256`` = SHA-256 of ``prompt_answer`` (upstream's request summary ``prompt_sha256``: the user prompt
  with its ``<image>`` markers, without the system prompt);
- ``ordered_media_sha256`` = the SHA-256 of each image's exact bytes, in prompt order (sent as data URLs);
  ``media_set_sha256`` over them; ``source_record_sha256`` over the archive's ``source_row_sha256`` and that set;
- ``request_sha256`` over the prompt, the images and the neutral settings of trace-repro's request: the suite's
  decoding, the model slug, transport ``data-url`` and the suite's pixel bounds.

Not compared (listed in the receipt, never guessed): ``source_row_sha256`` (the producer hashed the historical
parquet row, whose non-media columns trace-repro's prepared manifest does not keep) and the digest of the
producer's media-contract string inside the settings (not public: taken from the archived settings, every other
setting is trace-repro's own).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from trace_lib.archive import hashes
from trace_lib.archive.identity import (
    HASH_FIELDS, VIEW_FIELDS, IdentityReport, IdentityTally, OurIdentity, RowDifference, difference, media_inputs,
)
from trace_lib.archive.schema import ArchiveRow, SliceKey

#: The validation run's media transport (upstream's validation verifier requires ``data-url``).
VALIDATION_MEDIA_TRANSPORT = "data-url"
COMPARED_FIELDS = tuple(f for f in HASH_FIELDS if f != "source_row_sha256" and f not in VIEW_FIELDS)
NOT_COMPARED = {
    **{f: "the producer's validation dataset snapshot is built over source rows whose definition is not public"
       for f in VIEW_FIELDS},
    "source_row_sha256": "the producer's validation source-row definition (over the historical parquet row) is "
                         "not public",
    "source_media_contract_sha256": "the producer's validation media-contract string is not public; taken from "
                                    "the archived settings",
}


def row_names(manifest_rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Every name a manifest row goes by (its ``row_index`` as text, its ``instance_id``) -> its position."""
    names: dict[str, int] = {}
    for position, row in enumerate(manifest_rows):
        names[str(row.get("row_index", position))] = position
        if row.get("instance_id") is not None:
            names[str(row["instance_id"])] = position
    return names


def row_for(archived: ArchiveRow, manifest_rows: Sequence[Mapping[str, Any]],
            names: Mapping[str, int] | None = None) -> Mapping[str, Any] | None:
    """The manifest row an archived validation row stands for: the row at its ordinal (= ``row_index``), unless its
    ``source_index`` names another manifest row (then None: a ``dataset row`` difference). A ``source_index`` that
    names no row (the producer's naming is not public) does not contradict the ordinal."""
    if not 0 <= archived.source_ordinal < len(manifest_rows):
        return None
    names = row_names(manifest_rows) if names is None else names
    named = names.get(archived.source_index)
    return manifest_rows[archived.source_ordinal] if named in (None, archived.source_ordinal) else None


def _archived_contract_digest(settings_json: str) -> Any:
    try:
        return json.loads(settings_json).get("source_media_contract_sha256")
    except (TypeError, ValueError, AttributeError):
        return None


def validation_identity(row: Mapping[str, Any], *, suite: Any, model_id: str,
                        source_row_sha256: str, source_media_contract_sha256: Any) -> OurIdentity:
    """The public hashes of trace-repro's validation request of manifest ``row`` (``suite``: the release's
    :class:`~trace_lib.release.validation_suite.ValidationSuite`)."""
    from trace_lib.validation.request import request_summary, sampling_fields

    summary = request_summary(row)
    # the producer's media-contract digest is not public: the archived one replaces trace-repro's
    inputs = {**media_inputs(suite.mm_processor_kwargs(), VALIDATION_MEDIA_TRANSPORT),
              "source_media_contract_sha256": source_media_contract_sha256}
    settings = hashes.generation_settings(sampling_fields(suite), model_id=model_id, media_inputs=inputs)
    media = tuple(summary["ordered_image_sha256"])
    media_set = hashes.media_set_sha256(media)
    prompt = summary["prompt_sha256"]
    return OurIdentity(source_row_sha256, media, media_set, hashes.source_record_sha256(source_row_sha256, media_set),
                       prompt, hashes.request_sha256(prompt_digest=prompt, ordered_media_sha256=list(media),
                                                     settings=settings), settings)


def compare_validation_identity(key: SliceKey, archived: Sequence[ArchiveRow],
                                manifest_rows: Sequence[Mapping[str, Any]], *, suite: Any) -> IdentityReport:
    """Compare each archived validation row with trace-repro's request of its manifest row (see the module
    docstring); a row no manifest row matches is a ``dataset row`` difference."""
    tally = IdentityTally()
    names = row_names(manifest_rows)
    for a in archived:
        row = row_for(a, manifest_rows, names)
        if row is None:
            tally.add(RowDifference(a.source_index, ("source_index",), ("dataset row",)))
            continue
        ours = validation_identity(row, suite=suite, model_id=key.model_id, source_row_sha256=a.source_row_sha256,
                                   source_media_contract_sha256=_archived_contract_digest(a.generation_settings_json))
        tally.add(difference(a, ours, COMPARED_FIELDS))
    return tally.report(key, not_compared=NOT_COMPARED)
