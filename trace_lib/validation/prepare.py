"""Prepare the validation parquet: original image bytes to content-addressed files, rows to ``manifest.json``.

``prepare_dataset(parquet, output_root, expected=...)`` checks the parquet's sha256 *before* reading it, reads the
seven required columns in row order, writes every embedded image unchanged (no decode/re-encode, no resize) to
``media/sha256/<2 hex>/<sha256>.<ext>``, writes the manifest as canonical JSON (atomically, last) and re-loads it
with full media verification; with the pinned identity the manifest must hash to upstream's prepared manifest.
``download_parquet`` fetches the pinned file through ``huggingface_hub`` (kept when a copy with its sha256 is
there).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from trace_lib.data.hub_access import EndpointCheck, hub_access
from trace_lib.errors import InputError, UsageError
from trace_lib.jsonio import NonFinite, loads_strict, strict_error
from trace_lib.outputs import NewFiles, no_empty_tree_left
from trace_lib.release.load import sha256_file
from trace_lib.validation import pins
from trace_lib.validation.canonical import canonical_bytes, write_bytes, write_json
from trace_lib.validation.manifest import ValidationManifest, inspect_image, load_validation_manifest


@dataclass(frozen=True)
class PreparedDataset:
    """What ``prepare`` reports: the manifest, its sha256, row count and the dataset identity it binds."""

    manifest: Path
    manifest_sha256: str
    rows: int
    dataset_revision: str
    dataset_file_sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset_file_sha256": self.dataset_file_sha256,
            "dataset_revision": self.dataset_revision,
            "manifest": str(self.manifest),
            "manifest_sha256": self.manifest_sha256,
            "rows": self.rows,
        }


#: What to do about a validation parquet that is not there.
DOWNLOAD_HINT = "download it with 'trace-repro validation prepare --download'"


def require_input_file(path: Path | str, *, what: str, field: str | None = None, hint: str | None = None) -> Path:
    """``path`` as a regular file a stage reads (``what`` names it in the line). A missing one, or one that is not a
    regular file, is an input the stage cannot run without: :class:`UsageError` (exit 2), never a finding.

    Raises:
        UsageError: ``FILE: FIELD: <what> is missing; <hint>``, or ``FILE: is a FIFO, not a regular file; ...``.
    """
    from trace_lib.decoding import check_input_file

    path = Path(path).expanduser()
    try:
        return check_input_file(path, error=UsageError)
    except (FileNotFoundError, NotADirectoryError):
        raise UsageError(f"{what} is missing", file=str(path), field=field, hint=hint) from None


def download_parquet(dest_root: Path, *, expected: pins.DatasetIdentity = pins.REPRODUCTION_DATASET,
                     check: EndpointCheck | None = None) -> Path:
    """The pinned validation parquet in ``dest_root``: a copy already there with the pinned sha256 is kept (no
    request), else it is downloaded (huggingface_hub) after ``check`` (default: a new
    :class:`~trace_lib.data.hub_access.EndpointCheck`) has reached the endpoint, and its sha256 checked.

    Raises:
        InputError: the endpoint refused or accepted no connection, the download failed (one line; nothing this call
            created is left), or the downloaded file's sha256 differs from the pin.
    """
    import shutil

    target = Path(dest_root) / expected.file
    if target.is_file() and sha256_file(target) == expected.file_sha256:
        return target
    check = check or EndpointCheck()
    hub = check.api()
    created = next((d for d in reversed((Path(dest_root), *Path(dest_root).parents)) if not d.exists()), None)
    try:
        with hub_access(f"{expected.repo_id}@{expected.revision}:{expected.file}"):
            check.ensure()
            path = Path(hub.hf_hub_download(repo_id=expected.repo_id, filename=expected.file, repo_type="dataset",
                                            revision=expected.revision, local_dir=str(dest_root)))
    except InputError:  # nothing half-written: drop the download directory this call created
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise
    digest = sha256_file(path)
    if digest != expected.file_sha256:
        raise InputError("downloaded parquet differs from the pin", file=str(path), field="sha256",
                         expected=expected.file_sha256, found=digest)
    return path


def _answer_gt(raw: Any, *, file: str, field: str) -> dict[str, Any]:
    if not isinstance(raw, str):
        raise InputError("answer_gt is not JSON-encoded text", file=file, field=field)
    try:
        answer = loads_strict(raw)
    except NonFinite:
        raise InputError("answer_gt holds a non-finite number", file=file, field=field) from None
    except ValueError as exc:  # not JSON, a repeated key, nested too deeply
        raise InputError(f"answer_gt is not valid JSON ({strict_error(exc)})", file=file, field=field) from None
    if not isinstance(answer, dict):
        raise InputError("answer_gt must decode to an object", file=file, field=field)
    if not isinstance(answer.get("type"), str) or not answer["type"]:
        raise InputError("answer_gt has no type", file=file, field=f"{field}.type")
    if "value" not in answer:
        raise InputError("answer_gt has no value", file=file, field=f"{field}.value")
    try:
        canonical_bytes(answer)
    except ValueError:
        raise InputError("answer_gt holds a non-finite number", file=file, field=field) from None
    return answer


def _store_image(output_root: Path, payload: bytes, new: NewFiles, *, file: str, field: str) -> dict[str, Any]:
    import hashlib

    try:
        seen = inspect_image(payload)
    except ValueError as exc:
        raise InputError(str(exc), file=file, field=field) from None
    digest = hashlib.sha256(payload).hexdigest()
    relative = PurePosixPath("media", "sha256", digest[:2], f"{digest}.{seen['extension']}")
    target = output_root.joinpath(*relative.parts)
    if target.exists():
        if target.stat().st_size != len(payload) or sha256_file(target) != digest:
            raise InputError("a corrupt content-addressed image is in the way", file=str(target),
                             hint="delete it and prepare again")
    else:
        write_bytes(new.add(target), payload)  # taken away again if a later row is refused
    return {
        "sha256": digest,
        "size_bytes": len(payload),
        "width": seen["width"],
        "height": seen["height"],
        "format": seen["format"],
        "mime_type": seen["mime_type"],
        "relative_path": relative.as_posix(),
    }


def _declared_size(declared: Any, *, file: str, field: str) -> tuple[int, int]:
    """``(width, height)`` of an ``image_sizes`` entry: two integers (a null or text one is this line, not a
    ``TypeError``)."""
    if not isinstance(declared, dict):
        raise InputError("invalid declared size", file=file, field=field)
    size = (declared.get("width"), declared.get("height"))
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in size):
        raise InputError("declared image size is not two integers (width, height)", file=file, field=field,
                         found=size)
    return size


def _rows(parquet: Path, output_root: Path, expected_rows: int, new: NewFiles) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    file = str(parquet)
    source = pq.ParquetFile(parquet)
    missing = sorted(set(pins.REQUIRED_COLUMNS) - set(source.schema_arrow.names))
    if missing:
        raise InputError("parquet lacks required columns", file=file, field="schema", found=missing)
    if source.metadata.num_rows != expected_rows:
        raise InputError("unexpected row count", file=file, field="num_rows", expected=expected_rows,
                         found=source.metadata.num_rows)
    rows: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    for batch in source.iter_batches(columns=list(pins.REQUIRED_COLUMNS), batch_size=128):
        for record in batch.to_pylist():
            index = len(rows)
            where = f"row {index}"
            instance_id = record.get("instance_id")
            if not isinstance(instance_id, str) or not instance_id:
                raise InputError("no instance_id", file=file, field=f"{where}.instance_id")
            if instance_id in seen_ids:
                raise InputError("duplicate instance_id", file=file, field=f"{where}.instance_id", found=instance_id)
            seen_ids.add(instance_id)
            for key in ("prompt_answer", "domain", "task"):
                if not isinstance(record.get(key), str) or not record[key]:
                    raise InputError("missing or empty", file=file, field=f"{where}.{key}")
            answer_gt = _answer_gt(record.get("answer_gt"), file=file, field=f"{where}.answer_gt")
            images, sizes = record.get("images"), record.get("image_sizes")
            if not isinstance(images, list) or not images:
                raise InputError("row has no embedded images", file=file, field=f"{where}.images")
            if not isinstance(sizes, list) or len(sizes) != len(images):
                raise InputError("image_sizes do not match images", file=file, field=f"{where}.image_sizes")
            stored = []
            for j, (embedded, declared) in enumerate(zip(images, sizes)):
                at = f"{where}.images[{j}]"
                payload = embedded.get("bytes") if isinstance(embedded, dict) else None
                if not isinstance(payload, bytes) or not payload:
                    raise InputError("image has no embedded bytes", file=file, field=f"{at}.bytes")
                image = _store_image(output_root, payload, new, file=file, field=at)
                declared_size = _declared_size(declared, file=file, field=f"{where}.image_sizes[{j}]")
                if declared_size != (image["width"], image["height"]):
                    raise InputError("declared image size differs from the decoded size", file=file,
                                     field=f"{where}.image_sizes[{j}]", expected=(image["width"], image["height"]),
                                     found=declared_size)
                image["image_index"] = j
                stored.append(image)
            rows.append(
                {
                    "row_index": index,
                    "instance_id": instance_id,
                    "task": record["task"],
                    "domain": record["domain"],
                    "answer_type": answer_gt["type"],
                    "prompt_answer": record["prompt_answer"],
                    "answer_gt": answer_gt,
                    "images": stored,
                }
            )
    if len(rows) != expected_rows:
        raise InputError("parquet did not yield the expected rows", file=file, expected=expected_rows, found=len(rows))
    return rows


def prepare_dataset(
    parquet: Path, output_root: Path, *, expected: pins.DatasetIdentity = pins.REPRODUCTION_DATASET
) -> PreparedDataset:
    """Prepare ``parquet`` into ``output_root`` (see module docstring) and return what was written.

    Raises:
        UsageError: the parquet is missing or not a regular file (:func:`require_input_file`).
        InputError: hash mismatch (nothing written), or any row/image/manifest violation.
    """
    parquet = require_input_file(Path(parquet).expanduser().resolve(), what="validation parquet",
                                 hint=DOWNLOAD_HINT)
    output_root = Path(output_root).expanduser().resolve()
    digest = sha256_file(parquet)
    if digest != expected.file_sha256:
        raise InputError("parquet differs from the pinned dataset", file=str(parquet), field="sha256",
                         expected=expected.file_sha256, found=digest)
    with no_empty_tree_left(output_root) as new:  # a refused row leaves no image of the rows before it
        rows = _rows(parquet, output_root, expected.row_count, new)
        return _write_manifest(output_root, parquet, digest, rows, expected, new)


def _write_manifest(output_root: Path, parquet: Path, digest: str, rows: list[dict[str, Any]],
                    expected: pins.DatasetIdentity, new: NewFiles) -> PreparedDataset:
    """Write the manifest of ``rows`` last (recorded in ``new``), re-load it with every image verified."""
    manifest = {
        "schema_version": pins.MANIFEST_SCHEMA,
        "dataset": {
            "repo_id": expected.repo_id,
            "revision": expected.revision,
            "config": "default",
            "split": "validation",
            "file": expected.file,
            "file_sha256": digest,
            "file_size_bytes": parquet.stat().st_size,
            "row_count": expected.row_count,
        },
        "media": {
            "storage": pins.MEDIA_STORAGE,
            "paths_relative_to": pins.MANIFEST_NAME,
            "reencoded": False,
            "resized": False,
        },
        "rows": rows,
    }
    path = new.add(output_root / pins.MANIFEST_NAME)
    write_json(path, manifest)
    loaded = load_validation_manifest(path, expected=expected, verify_media=True)
    return _report(loaded)


def verify_prepared(output_root: Path, *, expected: pins.DatasetIdentity = pins.REPRODUCTION_DATASET) -> PreparedDataset:
    """Re-verify an existing ``output_root/manifest.json`` (and every image) without reading the parquet."""
    return _report(load_validation_manifest(Path(output_root) / pins.MANIFEST_NAME, expected=expected,
                                            verify_media=True))


def _report(manifest: ValidationManifest) -> PreparedDataset:
    return PreparedDataset(
        manifest=manifest.path,
        manifest_sha256=manifest.sha256,
        rows=len(manifest.rows),
        dataset_revision=manifest.dataset["revision"],
        dataset_file_sha256=manifest.dataset["file_sha256"],
    )
