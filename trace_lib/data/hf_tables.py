"""Tables TRACE builds from Hugging Face datasets (EvoChart, CountQA) instead of downloading a VLMEvalKit TSV.

Mirrors ``maveryn/trace@rlvr:rlvr/evaluation/vlmevalkit_extensions/evochart.py`` (``EvoChart.load_data``) and
``trace_eval_local_vqa.py`` (``CountQA.load_data``), except that the dataset is read from a snapshot at the
revision the release pins (upstream calls ``load_dataset`` without a revision). Each example's image is saved
as RGB under ``<data_root>/images/<alias>/`` (EvoChart ``<idx>.png``; CountQA ``<source_idx>.jpg``, a PIL-default
lossy JPEG that the model then sees; an existing file is kept), and the rows are written to
``<data_root>/<alias>.tsv`` the way VLMEvalKit's ``dump`` writes a TSV (tab-separated, every field quoted,
no index column), atomically. ``datasets`` and PIL are imported lazily.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Callable, Iterable

from trace_lib.atomic import atomic_output
from trace_lib.data.vlmeval_tsv import save_image_atomic
from trace_lib.errors import InputError


def _save_image(image: Any, path: Path) -> None:
    if path.exists():
        return
    if hasattr(image, "convert"):
        image = image.convert("RGB")
    save_image_atomic(image, path)


def evochart_rows(examples: Iterable[Any], image_root: Path) -> list[dict[str, Any]]:
    """EvoChart: one row per example, ``index = str(idx)``, image ``<idx>.png``."""
    rows = []
    for idx, example in enumerate(examples):
        image_path = image_root / f"{idx}.png"
        _save_image(example["image"], image_path)
        rows.append({
            "index": str(idx),
            "question": str(example.get("question", "")).strip(),
            "answer": str(example.get("answer", "")).strip(),
            "image_path": str(image_path),
            "attribute": str(example.get("attribute", "")),
            "is_clear": bool(example.get("is_clear", True)),
            "chart_type": str(example.get("chart_type", "")),
        })
    return rows


def countqa_rows(examples: Iterable[Any], image_root: Path) -> list[dict[str, Any]]:
    """CountQA: every question of every image is a row, ``index = "<source_idx>_<qa_idx>"``."""
    rows = []
    for source_idx, example in enumerate(examples):
        image_path = image_root / f"{source_idx}.jpg"
        _save_image(example["image"], image_path)
        questions = example.get("questions") or []
        answers = example.get("answers") or []
        for qa_idx, question in enumerate(questions):
            rows.append({
                "index": f"{source_idx}_{qa_idx}",
                "question": str(question).strip(),
                "answer": str(answers[qa_idx] if qa_idx < len(answers) else "").strip(),
                "image_path": str(image_path),
                "objects": str(example.get("objects", "")),
                "categories": str(example.get("categories", "")),
                "is_focused": bool(example.get("is_focused", False)),
                "full_config": str(example.get("full_config", "")),
            })
    return rows


#: Suite key -> row builder, for the benchmarks whose release artifact is a whole Hugging Face dataset.
TABLE_BUILDERS: dict[str, Callable[[Iterable[Any], Path], list[dict[str, Any]]]] = {
    "evochart": evochart_rows,
    "countqa": countqa_rows,
}


def write_tsv(rows: list[dict[str, Any]], path: Path) -> None:
    """Write rows as VLMEvalKit's ``dump`` does for ``.tsv`` (all fields quoted), atomically."""
    import pandas as pd

    with atomic_output(path) as handle:
        pd.DataFrame(rows).to_csv(handle, sep="\t", index=False, encoding="utf-8", quoting=csv.QUOTE_ALL)


def build_table(key: str, snapshot_dir: Path, split: str, table_path: Path, image_root: Path,
                *, examples: Iterable[Any] | None = None) -> int:
    """Build ``table_path`` for ``key`` from a dataset snapshot (``examples`` overrides loading, for tests).

    Returns the number of rows written.

    Raises:
        InputError: no builder for ``key``, or the snapshot cannot be read as a dataset split.
    """
    if key not in TABLE_BUILDERS:
        raise InputError("no table builder for this benchmark", field=key, hint=f"known: {', '.join(TABLE_BUILDERS)}")
    if examples is None:
        try:
            from datasets import load_dataset
        except ImportError as exc:
            raise InputError(f"the datasets library is not importable ({exc})", field=key,
                             hint="install the 'eval' extra") from None
        except ValueError as exc:  # a variable it parses at import (HF_DATASETS_IN_MEMORY_MAX_SIZE=abc)
            raise InputError(f"the datasets library cannot be imported in this environment ({exc})", field=key,
                             hint="check the HF_DATASETS_* variables") from None
        try:
            examples = load_dataset(str(snapshot_dir), split=split)
        except Exception as exc:  # datasets raises many types for unreadable repositories
            raise InputError(f"cannot read the dataset snapshot ({type(exc).__name__}: {exc})", file=str(snapshot_dir),
                             field=f"{key}.{split}") from None
    rows = TABLE_BUILDERS[key](examples, image_root)
    table_path.parent.mkdir(parents=True, exist_ok=True)
    write_tsv(rows, table_path)
    return len(rows)
