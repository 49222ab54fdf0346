"""ERQA (``erqa``): images interleaved into the question by ``visual_indices``; every row graded by the EASI judge.

Upstream:
``VLMEvalKit@a8b12bf1:vlmeval/dataset/erqabench.py:ERQABench`` (``build_prompt``, ``evaluate``), constructed
directly (the registry's first ``ERQA`` class, ``ERQADataset``, is bypassed — TRACE's class override), with the
LLM grader of ``vlmeval/dataset/utils/spatial_bench/``.

Quirks reproduced on purpose:

- ``visual_indices``: JSON, else comma-split ints; NaN or other types -> none; a length mismatch puts every image
  first; indices beyond the question emit the image without text; the question is sent verbatim, no instruction;
- without option columns the grader's choices are parsed from the question *after the first "option(s)" word*,
  so an instruction like "... the letter of the correct option and nothing else." yields no choices, an empty
  ``options_block`` and the bare GT letter as the standard answer;
- a reply's first line must start with capital A/B/C and a word boundary; three unusable replies -> C (wrong);
- ``overall`` is already a percent (``ImageVQADataset`` generic rule); ``auto`` x100 again only if <= 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks._easi_grader import graded_slice, mcq_summary
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError
from trace_lib.scoring.percent import primary_score

KEY = "erqa"
ALIAS = "ERQA"
GROUP_COLUMN = "question_type"
#: ``ERQABench._task_category``.
GROUP_ORDER = ("Action Reasoning", "Multi-view Reasoning", "Pointing", "Spatial Reasoning", "State Estimation",
               "Task Reasoning", "Trajectory Reasoning", "Other")
_GRADER_COLUMNS = ("question", "answer", "options", "candidates", *"ABCDEF")


def load(path: Path) -> list[Row]:
    """The ERQA TSV rows as ``ImageBaseDataset`` reads them."""
    return load_vlmeval_tsv(path)


def parse_visual_indices(value: Any, *, index: Any = None) -> list[Any]:
    """``visual_indices`` as ``ERQABench.build_prompt`` parses it (JSON, else comma-split ints; NaN -> [])."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parts = [p.strip() for p in value.strip("[]").split(",") if p.strip()]
            try:
                parsed = [int(p) for p in parts] if parts else []
            except ValueError:
                raise InputError("visual_indices is neither JSON nor comma-separated integers",
                                 field=f"rows[{index}].visual_indices", found=value[:80]) from None
        if not isinstance(parsed, list):
            raise InputError("visual_indices is not a list", field=f"rows[{index}].visual_indices", found=value[:80])
        return parsed
    if isinstance(value, (list, tuple)):
        return list(value)
    return []  # NaN or any other type


def interleave(question: str, paths: Sequence[str], visual_indices: Sequence[Any]) -> list[PromptItem]:
    """Images placed at character offsets of the question (stable sort by offset), as ``ERQABench`` does."""
    indices = list(visual_indices)
    if len(indices) != len(paths):
        indices = [0] * len(paths)  # quirk: a length mismatch puts every image first
    pairs = sorted(zip(paths, indices), key=lambda pair: pair[1])
    if not indices or all(i == 0 for i in indices):
        return [*(PromptItem("image", p) for p, _ in pairs), PromptItem("text", question)]
    items: list[PromptItem] = []
    cut = 0
    for path, offset in pairs:
        if offset == 0:
            items.append(PromptItem("image", path))
        elif offset <= len(question):
            if question[cut:offset]:
                items.append(PromptItem("text", question[cut:offset]))
            items.append(PromptItem("image", path))
            cut = offset
        else:
            items.append(PromptItem("image", path))  # quirk: an offset past the text emits the image alone
    if cut < len(question) and question[cut:]:
        items.append(PromptItem("text", question[cut:]))
    return items


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """The row's images interleaved into its question by ``visual_indices``."""
    paths = materialize_images(row, image_dir)
    question = row["question"]
    if not isinstance(question, str):
        raise InputError("question is not text", field=f"rows[{row['index']}].question", found=repr(question))
    indices = parse_visual_indices(row.get("visual_indices", []), index=row["index"])
    return interleave(question, paths, indices)


def summary(hits: Sequence[float], groups: Sequence[Any] | None) -> dict[str, Any]:
    """``eval_mcq_score`` with ``group_col='question_type'`` and ERQA's category order."""
    return mcq_summary(hits, {GROUP_COLUMN: groups} if groups is not None else {}, {GROUP_COLUMN: GROUP_ORDER})


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """Every row graded (A = correct); the reported number is ``overall``."""
    return graded_slice(rows, responses, ctx, benchmark=KEY,
                        columns=["index", *_GRADER_COLUMNS, GROUP_COLUMN, "prediction"],
                        summarize=lambda hits, table: summary(hits, table.get(GROUP_COLUMN)), aggregate=aggregate)


def aggregate(hits: Sequence[float]) -> float:
    """The reported number for per-row hits (as ``score`` computes it)."""
    return primary_score("image_vqa", summary(hits, None)).score


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/erqabench.py:ERQABench (class override of the ERQA alias)",
    version="erqa-grader-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="always",
    quirks=(
        "visual_indices: JSON else comma ints; NaN -> none; length mismatch -> all images first",
        "offset past the question emits the image without text; question sent verbatim",
        "grader choices parsed after the first 'option(s)' word: an instruction sentence can leave none",
        "reply's first line must start with capital A/B/C + word boundary; 3 unusable replies -> C",
        "overall already percent (ImageVQADataset generic rule); auto x100 again only if <= 1",
    ),
)
