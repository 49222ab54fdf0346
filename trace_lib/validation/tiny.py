"""A tiny validation parquet in the real schema, for tests and smoke runs (never a substitute for the real split).

``release_variant(release, dest, generation=...)`` copies the release's validation files with edited decoding
(e.g. a short ``max_tokens`` for a random tiny model), an unpinned release for tiny lanes only.
``build_tiny_parquet(release, dest)`` writes ``rows`` rows (``tasks`` x ``samples_per_task``) with the column names
and Arrow types the release records for the real file (``rlvr/dataset_equivalence.v1.json`` ``current_schema``),
one distinct PNG per row, all four answer types, and returns the file with a
:class:`~trace_lib.validation.pins.DatasetIdentity` (unpinned: no prepared-manifest hash) to prepare it with.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from trace_lib.errors import ReleaseFileError
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot
from trace_lib.validation import pins
from trace_lib.release.load import sha256_file

#: (answer type, ground-truth value) per row, cycled.
_ANSWERS: tuple[tuple[str, Any], ...] = (
    ("integer", 4), ("option_letter", "B"), ("number", 2.5), ("string", "blue"), ("integer", 12), ("option_letter", "D"),
)


def arrow_type(text: str) -> Any:
    """An Arrow type from its ``str()`` form (``string``, ``int64``, ``binary``, ``list<element: ...>``, ``struct<...>``).

    Raises:
        ValueError: a type outside that grammar.
    """
    import pyarrow as pa

    text = text.strip()
    simple = {"string": pa.string(), "int64": pa.int64(), "binary": pa.binary(), "double": pa.float64(),
              "bool": pa.bool_(), "int32": pa.int32()}
    if text in simple:
        return simple[text]
    match = re.fullmatch(r"list<\s*(?:element|item)\s*:\s*(.*)>", text)
    if match:
        return pa.list_(arrow_type(match.group(1)))
    match = re.fullmatch(r"struct<(.*)>", text)
    if match:
        fields, depth, start, body = [], 0, 0, match.group(1)
        for i, char in enumerate(body + ","):
            if char == "<":
                depth += 1
            elif char == ">":
                depth -= 1
            elif char == "," and depth == 0:
                name, _, kind = body[start:i].partition(":")
                fields.append(pa.field(name.strip(), arrow_type(kind)))
                start = i + 1
        return pa.struct(fields)
    raise ValueError(f"unsupported Arrow type {text!r}")


#: The release files the validation workflow reads (plus the evaluation suite that marks a release root).
_VARIANT_FILES = (
    identity.SUITE, identity.VALIDATION_SUITE, identity.VALIDATION_RESULTS, identity.VALIDATION_RECEIPT,
    identity.DATASET_EQUIVALENCE, identity.SYSTEM_PROMPT,
)


def release_variant(release: ReleaseRoot, dest: Path, *, generation: dict[str, Any]) -> ReleaseRoot:
    """A copy of the validation release files under ``dest`` whose suite ``generation`` block is updated."""
    import shutil

    from trace_lib.release.locate import locate_release

    for rel in _VARIANT_FILES:
        target = Path(dest) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(release.file(rel), target)
    suite_path = Path(dest) / identity.VALIDATION_SUITE
    doc = json.loads(suite_path.read_text(encoding="utf-8"))
    doc["generation"].update(generation)
    suite_path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return locate_release(dest)


def _png(index: int, size: tuple[int, int]) -> bytes:
    from PIL import Image

    color = ((index * 67) % 256, (index * 131 + 40) % 256, (index * 29 + 90) % 256)
    image = Image.new("RGB", size, color)
    image.putpixel((index % size[0], (index // size[0]) % size[1]), (255 - color[0], 255 - color[1], 255 - color[2]))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def build_tiny_parquet(
    release: ReleaseRoot, dest: Path, *, tasks: int = 3, samples_per_task: int = 2, size: tuple[int, int] = (56, 42)
) -> tuple[Path, pins.DatasetIdentity]:
    """Write the tiny parquet at ``dest`` and return it with its (unpinned) identity."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema_doc = release.read_json(identity.DATASET_EQUIVALENCE).get("current_schema")
    if not isinstance(schema_doc, list):
        raise ReleaseFileError("required field is missing", file=identity.DATASET_EQUIVALENCE, field="current_schema")
    schema = pa.schema([pa.field(c["name"], arrow_type(c["type"]), nullable=bool(c.get("nullable", True)))
                        for c in schema_doc])
    records: list[dict[str, Any]] = []
    for index in range(tasks * samples_per_task):
        task = f"tiny_task_{index // samples_per_task}"
        answer_type, value = _ANSWERS[index % len(_ANSWERS)]
        question = f"<image>Question {index}: what does the picture show? Answer type: {answer_type}."
        values = {
            "images": [{"bytes": _png(index, size), "path": None}],
            "image_sizes": [{"width": size[0], "height": size[1]}],
            "prompt_answer": question,
            "prompt_answer_and_annotation": question + " Also annotate.",
            "answer_gt": json.dumps({"type": answer_type, "value": value}),
            "annotation_gt": json.dumps(None),
            "reward_contract": json.dumps({"answer": answer_type}),
            "instance_id": f"tiny-{index:04d}",
            "domain": "tiny_domain",
            "task": task,
            "scene_id": f"scene-{index}",
            "query_id": f"query-{index}",
            "scene_variant": "v0",
            "trace_ref": f"ref-{index}",
            pins.EQUIVALENCE_ADVISORY_COLUMN: "answer",
        }
        records.append({name: values.get(name) for name in schema.names})
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(records, schema=schema), dest)
    ident = pins.DatasetIdentity(
        repo_id=pins.REPRODUCTION_DATASET.repo_id,
        revision="0" * 40,
        file=pins.REPRODUCTION_DATASET.file,
        file_sha256=sha256_file(dest),
        file_size_bytes=dest.stat().st_size,
        row_count=len(records),
        manifest_sha256=None,
    )
    return dest, ident
