"""The dataset-equivalence bridge: the paper's validation parquet (suite identity) == the one new runs download.

``check_equivalence_bridge(release, suite, reproduction_manifest_sha256)`` validates
``rlvr/dataset_equivalence.v1.json`` between the suite's historical identity and
:data:`~trace_lib.validation.pins.REPRODUCTION_DATASET`, and returns upstream's provenance dict (what score summaries
embed). The receipt itself (fields, version, flags, schemas, inventory, splits) is validated by the one validator of
that file, the preflight's ``equivalence`` group (:mod:`trace_lib.preflight.equivalence`); this module adds only the
binding to the validation pins. Any failure raises :class:`EquivalenceError` with the failing check's message.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from trace_lib.errors import InputError
from trace_lib.preflight import equivalence
from trace_lib.preflight.context import CheckContext
from trace_lib.preflight.registry import require_group
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot
from trace_lib.validation import pins
from trace_lib.release.validation_suite import ValidationSuite

_SHA256 = re.compile(r"[0-9a-f]{64}")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_IDENTITY_KEYS = frozenset({"repo_id", "revision", "split", "file", "file_sha256", "file_size_bytes", "row_count"})


class EquivalenceError(InputError):
    """The historical-to-reproduction bridge is not exact."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise EquivalenceError(message, file=identity.DATASET_EQUIVALENCE)


def historical_identity(suite: ValidationSuite) -> dict[str, Any]:
    """The suite's dataset block in the bridge's normalized form (file size from the pins)."""
    d = suite.dataset
    return {
        "repo_id": d.get("repo_id"),
        "revision": d.get("revision"),
        "split": d.get("split"),
        "file": d.get("file"),
        "file_sha256": d.get("sha256"),
        "file_size_bytes": pins.HISTORICAL_FILE_SIZE_BYTES,
        "row_count": d.get("rows"),
    }


def _check_identity(value: Mapping[str, Any], label: str) -> dict[str, Any]:
    _require(set(value) == _IDENTITY_KEYS, f"{label} dataset identity has unexpected fields")
    v = dict(value)
    _require(isinstance(v["repo_id"], str) and bool(v["repo_id"]), f"{label} dataset repository is invalid")
    _require(isinstance(v["revision"], str) and _COMMIT.fullmatch(v["revision"]) is not None,
             f"{label} dataset revision is not immutable")
    _require(v["split"] == "validation", f"{label} dataset split changed")
    _require(isinstance(v["file"], str) and bool(v["file"]), f"{label} dataset file is invalid")
    _require(isinstance(v["file_sha256"], str) and _SHA256.fullmatch(v["file_sha256"]) is not None,
             f"{label} dataset file SHA-256 is invalid")
    for key, what in (("file_size_bytes", "file size"), ("row_count", "row count")):
        _require(isinstance(v[key], int) and not isinstance(v[key], bool) and v[key] > 0,
                 f"{label} dataset {what} is invalid")
    return v


def check_equivalence_bridge(
    release: ReleaseRoot, suite: ValidationSuite, reproduction_manifest_sha256: str
) -> dict[str, Any]:
    """Validate the bridge and return its provenance dict. Raises EquivalenceError (or ReleaseFileError)."""
    rel = identity.DATASET_EQUIVALENCE
    _require(release.exists(rel), "missing dataset-equivalence receipt")
    receipt_sha = release.sha256(rel)
    _require(receipt_sha == identity.CANONICAL_SHA256[rel], "dataset-equivalence receipt SHA-256 mismatch")
    historical = _check_identity(historical_identity(suite), "historical")
    reproduction = _check_identity(pins.REPRODUCTION_DATASET.normalized(), "reproduction")
    for key in ("repo_id", "split", "file", "row_count"):
        _require(historical[key] == reproduction[key], f"historical/reproduction dataset {key} mismatch")
    _require(_SHA256.fullmatch(pins.HISTORICAL_MANIFEST_SHA256) is not None,
             "historical prepared-manifest SHA-256 is invalid")
    _require(isinstance(reproduction_manifest_sha256, str) and _SHA256.fullmatch(reproduction_manifest_sha256)
             is not None, "reproduction prepared-manifest SHA-256 is invalid")
    _require(_COMMIT.fullmatch(pins.EQUIVALENCE_COMPARED_REVISION) is not None,
             "compared dataset revision is not immutable")
    require_group(equivalence.GROUP, CheckContext(release, pinned=True), error=EquivalenceError)
    receipt = release.read_json(rel)
    # The receipt is well formed and passes (the preflight's group); here it must bridge exactly these pins.
    _require(receipt.get("repository") == historical["repo_id"], "receipt repository does not match the suite dataset")
    _require(receipt.get("original_training_revision") == historical["revision"],
             "receipt historical revision does not match the suite")
    _require(receipt.get("compared_current_revision") == pins.EQUIVALENCE_COMPARED_REVISION,
             "receipt compared revision mismatch")
    _require(receipt.get("added_advisory_column") == pins.EQUIVALENCE_ADVISORY_COLUMN,
             "receipt advisory-column contract changed")
    _require(receipt.get("compared_columns") == list(pins.EQUIVALENCE_COMPARED_COLUMNS),
             "receipt compared-column contract changed")
    matching = [f for f in receipt["parquet_files"] if isinstance(f, dict) and f.get("path") == historical["file"]]
    _require(len(matching) == 1, "receipt does not identify one validation Parquet")
    entry = matching[0]
    _require(entry.get("split") == "validation" and entry.get("rows") == historical["row_count"],
             "receipt validation-file shape changed")
    for label, ident in (("original", historical), ("current", reproduction)):
        block = entry.get(label)
        _require(isinstance(block, dict), f"receipt {label} file identity is missing")
        _require(
            block.get("bytes") == ident["file_size_bytes"]
            and block.get("sha256") == ident["file_sha256"]
            and block.get("lfs_sha256") == ident["file_sha256"]
            and block.get("lfs_oid_matches_sha256") is True,
            f"receipt {label} validation-file identity mismatch",
        )
    inventory = receipt["compared_current_inventory"]
    _require(inventory.get("revision") == pins.EQUIVALENCE_COMPARED_REVISION, "receipt inventory revision mismatch")
    hits = [f for f in inventory.get("files") or [] if isinstance(f, dict) and f.get("path") == reproduction["file"]]
    _require(len(hits) == 1, "receipt inventory does not identify one validation Parquet")
    _require(hits[0].get("size") == reproduction["file_size_bytes"]
             and hits[0].get("lfs_sha256") == reproduction["file_sha256"],
             "receipt inventory validation-file identity mismatch")
    split = receipt["splits"].get("validation")
    _require(isinstance(split, dict) and split.get("rows") == historical["row_count"]
             and split.get("unique_instance_ids") == historical["row_count"],
             "receipt validation split is not equivalent")
    return {
        "schema_version": pins.EQUIVALENCE_PROVENANCE_SCHEMA,
        "receipt_sha256": receipt_sha,
        "historical_dataset": historical,
        "historical_prepared_manifest_sha256": pins.HISTORICAL_MANIFEST_SHA256,
        "compared_current_revision": pins.EQUIVALENCE_COMPARED_REVISION,
        "reproduction_dataset": reproduction,
        "reproduction_prepared_manifest_sha256": reproduction_manifest_sha256,
        "equivalence": "exact_existing_columns_in_row_order",
        "added_advisory_column": pins.EQUIVALENCE_ADVISORY_COLUMN,
    }
