"""EmbSpatial (``embspatial``): SiteBench-style prompt with ``A: ...`` options; the EASI rule matcher, no judge.

Upstream:
``VLMEvalKit@a8b12bf1:vlmeval/dataset/embspatialbench.py:EmbSpatialBench`` (``build_prompt``, ``evaluate``) and
``vlmeval/dataset/utils/spatial_bench/{cal_scores,matching_func}.py`` with judge kwargs ``exact_matching``.

Quirks reproduced on purpose:

- options come from the ``options`` cell (JSON, else a Python literal) and are labelled ``A: text`` (colon);
- prediction *and* ground truth both go through ``can_match_option`` (letters A-F); unparsable -> ``False``,
  compared as the string ``false``;
- a letter right before ``</think>`` beats the final sentence; the bottom-up line scan can pick an explanation line;
  the conclusion phrase takes the first match anywhere (``the answer is a lamp`` -> A);
- ``overall`` is already a percent; ``auto`` multiplies by 100 again only when it is <= 1.
"""

from __future__ import annotations

import ast
import json
import string
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks._easi_grader import mcq_summary
from trace_lib.benchmarks._easi_matching import rule_hit
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError
from trace_lib.extraction.workbook import official_workbook
from trace_lib.scoring.percent import flatten_summary_metrics, primary_score

KEY = "embspatial"
ALIAS = "EmbSpatialBench"
GROUP_COLUMN = "data_source"
GROUP_ORDER = ("mp3d", "ai2thor", "scannet")  # ``EmbSpatialBench._task_category``
INSTRUCTION = "Give me the answer letter directly. The best answer is:"


def load(path: Path) -> list[Row]:
    """The EmbSpatialBench TSV rows as ``ImageBaseDataset`` reads them."""
    return load_vlmeval_tsv(path)


def parse_options(cell: Any, *, index: Any = None) -> list[Any]:
    """The ``options`` cell: a JSON list, else a Python list literal (a list value is used as is)."""
    if not isinstance(cell, str):
        if isinstance(cell, (list, tuple)):
            return list(cell)
        raise InputError("options cell is not a list", field=f"rows[{index}].options", found=repr(cell))
    try:
        return json.loads(cell)
    except ValueError:
        try:
            return ast.literal_eval(cell)
        except (ValueError, SyntaxError):
            raise InputError("options cell is neither JSON nor a Python literal", field=f"rows[{index}].options",
                             found=cell[:80]) from None


def build_prompt_text(row: Row) -> str:
    """``Question: ...`` / ``Options:`` / ``A: ...`` lines / the answer-letter instruction."""
    if not isinstance(row["question"], str):
        raise InputError("question is not text", field=f"rows[{row.get('index')}].question", found=repr(row["question"]))
    options = parse_options(row["options"], index=row.get("index"))
    letters = string.ascii_uppercase
    option_text = "\n".join(f"{letters[i]}: {options[i]}" for i in range(len(options)))
    return "Question: " + row["question"] + "\n" + "Options:\n" + option_text + "\n" + INSTRUCTION


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """Images first, then the EmbSpatial text."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", build_prompt_text(row))]


def summary(hits: Sequence[float], groups: Sequence[Any] | None) -> dict[str, Any]:
    """``eval_mcq_score`` with ``group_col='data_source'`` and the preferred source order."""
    return mcq_summary(hits, {GROUP_COLUMN: groups} if groups is not None else {}, {GROUP_COLUMN: GROUP_ORDER})


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """``can_match_option`` on prediction and answer, ``exact_match``; the reported number is ``overall``."""
    table = official_workbook(rows, responses, ["index", "prediction", "answer", GROUP_COLUMN])
    hits, records = [], []
    for pos in range(len(rows)):
        hit, extracted = rule_hit(str(table["prediction"][pos]), table.get("answer", [""] * len(rows))[pos])
        hits.append(hit)
        records.append(RowScore(index=str(table["index"][pos]), extracted=extracted or None, score=hit,
                                detail={"matched": extracted}))
    result = summary(hits, table.get(GROUP_COLUMN))
    metrics = {k: float(v) for k, v in flatten_summary_metrics(result).items()}
    counts = {"rows": len(hits), "correct": int(sum(hits)), "unparsed": sum(1 for r in records if r.extracted is None)}
    return SliceScore(benchmark=KEY, score=aggregate(hits), rows=len(hits), records=tuple(records), metrics=metrics,
                      counts=counts)


def aggregate(hits: Sequence[float]) -> float:
    """The reported number for per-row hits (as ``score`` computes it)."""
    return primary_score("image_mcq", summary(hits, None)).score


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/embspatialbench.py:EmbSpatialBench (exact_matching)",
    version="embspatial-rule-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="none",
    quirks=(
        "options from the options cell (JSON, else Python literal), labelled 'A: text'",
        "prediction and GT both parsed by can_match_option (A-F); unparsable -> False ('false')",
        "a letter right before </think> beats the final sentence",
        "bottom-up scan of the last 6 lines can pick an explanation line",
        "conclusion phrase: first match anywhere (the answer is a lamp -> A)",
        "overall already percent; auto x100 again only if <= 1",
    ),
)
