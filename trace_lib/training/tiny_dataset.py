"""A tiny synthetic dataset in the exact TRACE training schema, for smoke runs and tests.

``build_tiny_trace_dataset(dest, columns, train_file, validation_file, rows=(8, 4))`` writes one train shard and one
validation file at the profile's relative paths under ``dest`` (the layout ``train smoke --dataset-dir``
reads), with the column list it is given (the profile's required columns plus the advisory column) and the
Arrow types of spec §3.4. Rows carry PNG images of several sizes (below, at and above EasyR1's pixel floor,
RGBA and palette modes), prompts starting with one ``<image>`` marker per image, and reward contracts of all
four answer types. Deterministic.
"""

from __future__ import annotations

import json
from io import BytesIO
from pathlib import Path
from typing import Any

_ANSWERS = [("integer", 7), ("number", 12.5), ("string", "blue"), ("option_letter", "B")]
_SIZES = [(64, 64, "RGB"), (400, 300, "RGBA"), (512, 512, "RGB"), (96, 160, "P")]


def _png(width: int, height: int, mode: str, seed: int) -> bytes:
    from PIL import Image

    image = Image.new("RGB", (width, height), ((seed * 53) % 256, (seed * 97) % 256, (seed * 31) % 256))
    for x in range(0, width, 8):
        for y in range(0, height, 8):
            image.putpixel((x, y), ((x * 7 + seed) % 256, (y * 5) % 256, (x + y) % 256))
    if mode == "RGBA":
        image = image.convert("RGBA")
        image.putalpha(200)
    elif mode == "P":
        image = image.convert("P")
    out = BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _row(i: int, split: str) -> dict[str, Any]:
    answer_type, value = _ANSWERS[i % len(_ANSWERS)]
    n_images = 1 + (i % 2)
    images, sizes = [], []
    for k in range(n_images):
        w, h, mode = _SIZES[(i + k) % len(_SIZES)]
        images.append({"bytes": _png(w, h, mode, i * 10 + k), "path": None})
        sizes.append({"width": w, "height": h})
    question = f"Count the blue gems in row {i % 5 + 1}.\nAnswer format: set \"answer\" to the exact value.\nExample JSON:\n{{\"answer\":4}}"
    annotation = {"type": "bbox", "value": [1, 2, 30, 40]}
    contract = {"reward_contract_version": "v0", "answer": {"id": "answer_exact_match_v0", "type": answer_type},
                "annotation": {"id": "bbox_soft_iou_v0", "type": "bbox"}}
    dumps = lambda v: json.dumps(v, ensure_ascii=False, allow_nan=False, sort_keys=True)  # noqa: E731
    return {
        "images": images,
        "image_sizes": sizes,
        "prompt_answer": "<image>" * n_images + question,
        "prompt_answer_and_annotation": "<image>" * n_images + question + "\nAlso give the bounding box.",
        "answer_gt": dumps({"type": answer_type, "value": value}),
        "annotation_gt": dumps(annotation),
        "reward_contract": dumps(contract),
        "instance_id": f"blake3:{i:064x}" if split == "train" else f"blake3:{i + 10**6:064x}",
        "domain": "games",
        "task": f"task_games__tiny__count_{i % 2}",
        "scene_id": f"scene_{i}",
        "query_id": f"query_{i}",
        "scene_variant": "",
        "trace_ref": dumps({"shard_id": "tiny", "line_index": i, "trace_record_hash": f"{i:064x}"}),
        "trace_supervision_mode": "answer" if i % 2 else "answer_and_annotation",
    }


def _schema(columns: tuple[str, ...]) -> Any:
    import pyarrow as pa

    types = {
        "images": pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        "image_sizes": pa.list_(pa.struct([("width", pa.int64()), ("height", pa.int64())])),
    }
    return pa.schema([pa.field(name, types.get(name, pa.string())) for name in columns])


def build_tiny_trace_dataset(
    dest: Path, columns: tuple[str, ...], train_file: str, validation_file: str, *, rows: tuple[int, int] = (8, 4)
) -> Path:
    """Write the tiny train and validation files under ``dest`` (their relative paths as given); return ``dest``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _schema(columns)
    for rel, count, split in ((train_file, rows[0], "train"), (validation_file, rows[1], "validation")):
        records = [_row(i, split) for i in range(count)]
        table = pa.Table.from_pylist([{c: r[c] for c in columns} for r in records], schema=schema)
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
    return dest
