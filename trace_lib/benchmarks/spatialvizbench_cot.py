"""SpatialVizBench CoT (``spatialvizbench_cot``): think/answer-tag instruction; every row graded by the EASI judge.

Upstream:
``VLMEvalKit@a8b12bf1:vlmeval/dataset/spatialvizbench.py:SpatialVizBench`` (alias ``SpatialVizBench_CoT``:
``build_prompt`` with the CoT pre-prompt, ``evaluate``) and ``vlmeval/dataset/utils/spatial_bench/`` (the LLM grader).

Quirks reproduced on purpose:

- no space after ``Question:``; each option line ``L. text`` ends with a newline;
- no rule parsing of the ``<answer>`` tag anywhere: the Qwen3-32B grader reads the full raw response;
- the grader sees ``Options:`` from columns A-F (whitespace collapsed) and ``gold_answer = 'L. text'``;
- a reply's first line must start with capital A/B/C and a word boundary; three unusable replies -> C (wrong);
- the summary keeps ``overall`` and the listed task/category accuracies; ``overall`` is already a percent.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks._easi_grader import graded_slice, mcq_summary
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.extraction.workbook import isna
from trace_lib.scoring.percent import primary_score

KEY = "spatialvizbench_cot"
ALIAS = "SpatialVizBench_CoT"
PRE_PROMPT = (
    "You should first provide a reasoning process, "
    "then provide a single option (A, B, C or D) as the final answer. "
    "The reasoning process and the answer are enclosed within "
    "<think></think> and <answer></answer> tags, respectively, "
    "i.e., <think>reasoning process</think>, <answer>answer</answer>."
)
#: ``SpatialVizBench.category_task_order``.
CATEGORY_TASKS = {
    "MentalRotation": ("2DRotation", "3DRotation", "3ViewProjection"),
    "MentalFolding": ("PaperFolding", "CubeUnfolding", "CubeReconstruction"),
    "VisualPenetration": ("CrossSection", "CubeCounting", "CubeAssembly"),
    "MentalAnimation": ("ArrowMoving", "BlockMoving", "MechanicalSystem"),
}
#: Workbook columns the grader and the summary read.
_GRADER_COLUMNS = ("question", "answer", "options", "candidates", *"ABCDEF")


def load(path: Path) -> list[Row]:
    """The SpatialVizBench TSV rows as ``ImageBaseDataset`` reads them."""
    return load_vlmeval_tsv(path)


def build_prompt_text(row: Row) -> str:
    """CoT pre-prompt, ``Question:`` + question, then ``L. text`` lines for every non-NaN column A-Z."""
    options = "".join(f"{c}. {row[c]}\n" for c in string.ascii_uppercase if c in row and not isna(row[c]))
    return PRE_PROMPT + "\n" + "Question:" + row["question"] + "\n" + options


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """Images first, then the SpatialViz CoT text."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", build_prompt_text(row))]


def summary(hits: Sequence[float], category: Sequence[Any] | None, task: Sequence[Any] | None) -> dict[str, Any]:
    """``SpatialVizBench.evaluate``: ``eval_mcq_score`` over category and task, re-packed in the paper's order."""
    groups = {k: v for k, v in (("category", category), ("task", task)) if v is not None}
    order = {"category": list(CATEGORY_TASKS), "task": [t for ts in CATEGORY_TASKS.values() for t in ts]}
    raw = mcq_summary(hits, groups, order)
    pretty: dict[str, Any] = {"overall": raw["overall"]}
    for cat, tasks in CATEGORY_TASKS.items():
        for t in tasks:
            if f"task.{t}_accuracy" in raw:
                pretty[f"{t}_accuracy"] = raw[f"task.{t}_accuracy"]
        if f"category.{cat}_accuracy" in raw:
            pretty[f"{cat}_accuracy"] = raw[f"category.{cat}_accuracy"]
    pretty["tabulated_keys"] = ", ".join(pretty.keys())
    pretty["tabulated_results"] = ", ".join(f"{v:.3f}" for k, v in pretty.items() if k != "tabulated_keys")
    return pretty


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """Every row graded (A = correct); the reported number is ``overall``."""
    return graded_slice(rows, responses, ctx, benchmark=KEY,
                        columns=["index", *_GRADER_COLUMNS, "category", "task", "prediction"],
                        summarize=lambda hits, table: summary(hits, table.get("category"), table.get("task")),
                        aggregate=aggregate)


def aggregate(hits: Sequence[float]) -> float:
    """The reported number for per-row hits (as ``score`` computes it)."""
    return primary_score("image_mcq", summary(hits, None, None)).score


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/spatialvizbench.py:SpatialVizBench (alias SpatialVizBench_CoT)",
    version="spatialvizbench-cot-grader-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="always",
    quirks=(
        "no space after 'Question:'; option lines 'L. text' each end with a newline",
        "no rule parsing of <answer>: the grader reads the raw response",
        "grader options from columns A-F (whitespace collapsed); gold 'L. text'",
        "reply's first line must start with capital A/B/C + word boundary; 3 unusable replies -> C",
        "overall already percent; auto x100 again only if <= 1",
    ),
)
