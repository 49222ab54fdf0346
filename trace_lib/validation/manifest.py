"""The prepared validation dataset: ``manifest.json`` plus content-addressed original image bytes.

``load_validation_manifest(path, expected=..., verify_media=...)`` reads and fully validates a manifest and returns
a :class:`ValidationManifest`. With ``expected`` the pinned reproduction identity, the dataset block and the
manifest's own sha256 must equal the pins; with any other identity (a test dataset, ``--unpinned``) the structure is checked and
the row count comes from ``expected``. Media verification re-hashes every image once per digest and re-reads its
size, format and MIME type with Pillow.

Not the evaluation suite's dataset manifest (:mod:`trace_lib.data.manifest`, one entry per benchmark file): this
one lists the 2,000 validation rows themselves with their images, in its own pinned format.
"""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

from trace_lib.errors import InputError
from trace_lib.release.load import sha256_file
from trace_lib.validation import pins
from trace_lib.validation.canonical import read_json_object

_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class ValidationManifest:
    """A validated manifest: its path and sha256, the dataset identity block and the rows in order."""

    path: Path
    sha256: str
    dataset: Mapping[str, Any]
    rows: tuple[dict[str, Any], ...]
    document: Mapping[str, Any]

    @property
    def root(self) -> Path:
        return self.path.parent

    def media_path(self, image: Mapping[str, Any]) -> Path:
        """Absolute path of one prepared image (``relative_path`` already validated as safe)."""
        return safe_media_path(self.root, image.get("relative_path"), file=str(self.path))


def safe_media_path(root: Path, relative: Any, *, file: str, field: str = "relative_path") -> Path:
    """``root / relative`` when ``relative`` is a non-empty relative POSIX path that stays inside ``root``.

    Raises:
        InputError: empty, absolute, containing ``..`` or escaping ``root``.
    """
    if not isinstance(relative, str) or not relative:
        raise InputError("image has no relative_path", file=file, field=field)
    pure = PurePosixPath(relative)
    if pure.is_absolute() or ".." in pure.parts:
        raise InputError("unsafe media path", file=file, field=field, found=relative)
    base = root.resolve()
    path = base.joinpath(*pure.parts).resolve()
    if not path.is_relative_to(base):
        raise InputError("media path escapes the manifest directory", file=file, field=field, found=relative)
    return path


def inspect_image(payload: bytes) -> dict[str, Any]:
    """Format, extension, MIME type and size of encoded image bytes (Pillow ``verify``; no decode/re-encode).

    Raises:
        ValueError: not an image Pillow can verify, or a format outside :data:`pins.IMAGE_FORMATS`.
    """
    from PIL import Image

    try:
        with Image.open(io.BytesIO(payload)) as image:
            fmt = str(image.format or "").upper()
            width, height = image.size
            image.verify()
    except Exception as exc:
        raise ValueError(f"not a valid image ({type(exc).__name__})") from None
    if fmt not in pins.IMAGE_FORMATS:
        raise ValueError(f"unsupported image format {fmt!r}")
    extension, mime = pins.IMAGE_FORMATS[fmt]
    return {"format": fmt, "extension": extension, "mime_type": mime, "width": int(width), "height": int(height)}


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _check_row(row: Any, index: int, *, file: str) -> None:
    where = f"rows[{index}]"
    if not isinstance(row, dict) or row.get("row_index") != index:
        raise InputError("row_index differs from the row's position", file=file, field=f"{where}.row_index",
                         expected=index, found=row.get("row_index") if isinstance(row, dict) else row)
    for key in ("instance_id", "prompt_answer", "task", "domain"):
        if not isinstance(row.get(key), str) or not row[key]:
            raise InputError("missing or empty", file=file, field=f"{where}.{key}")
    answer_gt = row.get("answer_gt")
    if not isinstance(answer_gt, dict) or "type" not in answer_gt or "value" not in answer_gt:
        raise InputError("answer_gt must be an object with type and value", file=file, field=f"{where}.answer_gt")
    if row.get("answer_type") != answer_gt.get("type"):
        raise InputError("answer_type differs from answer_gt.type", file=file, field=f"{where}.answer_type",
                         expected=answer_gt.get("type"), found=row.get("answer_type"))
    images = row.get("images")
    if not isinstance(images, list) or not images:
        raise InputError("row has no images", file=file, field=f"{where}.images")
    for j, image in enumerate(images):
        at = f"{where}.images[{j}]"
        if not isinstance(image, dict) or image.get("image_index") != j:
            raise InputError("image_index differs from the image's position", file=file, field=f"{at}.image_index")
        if not isinstance(image.get("sha256"), str) or not _SHA256.fullmatch(image["sha256"]):
            raise InputError("invalid image sha256", file=file, field=f"{at}.sha256")
        for key in ("size_bytes", "width", "height"):
            if not _positive_int(image.get(key)):
                raise InputError("must be a positive integer", file=file, field=f"{at}.{key}", found=image.get(key))


def load_validation_manifest(
    path: Path, *, expected: pins.DatasetIdentity = pins.REPRODUCTION_DATASET, verify_media: bool = True
) -> ValidationManifest:
    """Read and validate a prepared manifest against ``expected`` (see module docstring).

    Raises:
        InputError: one line naming the manifest, the field and what differs.
    """
    path = Path(path).expanduser().resolve()
    file = str(path)
    doc = read_json_object(path)
    if doc.get("schema_version") != pins.MANIFEST_SCHEMA:
        raise InputError("unsupported manifest schema", file=file, field="schema_version",
                         expected=pins.MANIFEST_SCHEMA, found=doc.get("schema_version"))
    dataset = doc.get("dataset")
    if not isinstance(dataset, dict):
        raise InputError("manifest has no dataset identity", file=file, field="dataset")
    digest = sha256_file(path)
    if expected.pinned:
        block = expected.manifest_block()
        for key, value in block.items():
            if dataset.get(key) != value:
                raise InputError("dataset identity differs from the pin", file=file, field=f"dataset.{key}",
                                 expected=value, found=dataset.get(key))
        if digest != expected.manifest_sha256:
            raise InputError("prepared manifest differs from the pinned one", file=file, field="sha256",
                             expected=expected.manifest_sha256, found=digest,
                             hint="re-run 'trace-repro validation prepare' on the pinned parquet")
    if dataset.get("row_count") != expected.row_count:
        raise InputError("unexpected row_count", file=file, field="dataset.row_count",
                         expected=expected.row_count, found=dataset.get("row_count"))
    rows = doc.get("rows")
    if not isinstance(rows, list) or len(rows) != expected.row_count:
        raise InputError("wrong number of rows", file=file, field="rows", expected=expected.row_count,
                         found=len(rows) if isinstance(rows, list) else rows)
    seen: set[str] = set()
    verified: dict[str, dict[str, Any]] = {}
    for index, row in enumerate(rows):
        _check_row(row, index, file=file)
        if row["instance_id"] in seen:
            raise InputError("duplicate instance_id", file=file, field=f"rows[{index}].instance_id",
                             found=row["instance_id"])
        seen.add(row["instance_id"])
        for j, image in enumerate(row["images"]):
            at = f"rows[{index}].images[{j}]"
            media = safe_media_path(path.parent, image.get("relative_path"), file=file, field=f"{at}.relative_path")
            if not verify_media:
                continue
            first = verified.get(image["sha256"])
            if first is None:
                _verify_media_file(media, image, file=file, field=at)
                verified[image["sha256"]] = image
            else:
                for key in ("size_bytes", "width", "height", "format", "mime_type", "relative_path"):
                    if image.get(key) != first.get(key):
                        raise InputError("repeated image digest with different metadata", file=file,
                                         field=f"{at}.{key}", expected=first.get(key), found=image.get(key))
    return ValidationManifest(path=path, sha256=digest, dataset=dataset, rows=tuple(rows), document=doc)


def _verify_media_file(media: Path, image: Mapping[str, Any], *, file: str, field: str) -> None:
    if not media.is_file():
        raise InputError("prepared image is missing", file=file, field=field, found=str(media),
                         hint="re-run 'trace-repro validation prepare'")
    if media.stat().st_size != image["size_bytes"]:
        raise InputError("prepared image size changed", file=file, field=f"{field}.size_bytes",
                         expected=image["size_bytes"], found=media.stat().st_size)
    payload = media.read_bytes()
    if hashlib.sha256(payload).hexdigest() != image["sha256"]:
        raise InputError("prepared image content changed", file=file, field=f"{field}.sha256", found=str(media))
    try:
        seen = inspect_image(payload)
    except ValueError as exc:
        raise InputError(str(exc), file=file, field=field, found=str(media)) from None
    for key in ("width", "height", "format", "mime_type"):
        if seen[key] != image.get(key):
            raise InputError("prepared image metadata changed", file=file, field=f"{field}.{key}",
                             expected=image.get(key), found=seen[key])
