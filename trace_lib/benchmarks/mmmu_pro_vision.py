"""MMMU-ProVis (``mmmu_pro_vision``): one screenshot + a fixed CoT instruction; ``cot_postproc``, then the MCQ matcher.

Upstream: ``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py``
(``MMMUProDataset`` for alias ``MMMU_Pro_V_COT``: ``__init__``, ``build_prompt``, ``cot_postproc``,
``evaluate``; ``MMMUDataset.report_primary_metric``) and ``vlmeval/dataset/utils/multiple_choice.py``
(``MMMU_preproc``, ``mcq_vanilla_eval``). Judge: Qwen3-32B, only when the prefetch fails.

Quirks reproduced on purpose:

- every ``question`` is replaced by the literal ``placeholder`` (the judge sees ``Question: placeholder?``);
- ``cot_postproc`` keeps lines that start with ``Answer:`` (case-sensitive, after stripping); on the last one, a tail
  with exactly one distinct capital letter becomes that letter, otherwise the tail itself (leading space kept);
- ``cot_postproc`` calls ``.strip()`` on the workbook cell: an empty (NaN) or all-numeric prediction crashes
  upstream, and fails the slice here with the same cause;
- the post-processed predictions go through one more workbook round trip (``_cotpost.xlsx``);
- all option columns A-J are choices, so a pronoun ``I`` counts as option I in ``can_infer``;
- ``MMMU_preproc``: a row without option A gets ``A = answer``, ``B = 'Other Answers'``; a non-letter GT becomes A;
- three unusable judge replies -> upstream's unseeded random letter (here deterministic, row marked fallback);
- reported number: ``split=test|Overall`` / ``split=validation|Overall`` / ``split=none|Overall`` x 100, then auto.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks import _imagemcq
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError
from trace_lib.scoring.percent import primary_score, report_acc

KEY = "mmmu_pro_vision"
ALIAS = "MMMU_Pro_V_COT"
#: ``MMMUProDataset.__init__`` overwrites every question of the ``MMMU_Pro_V*`` aliases with this literal.
QUESTION_PLACEHOLDER = "placeholder"
#: ``MMMUProDataset.build_prompt`` for ``MMMU_Pro_V`` + ``COT`` (trailing space included).
INSTRUCTION = (
    "Answer the following multiple-choice question in the image. "
    "The last line of your response should be of the following format: 'Answer: $LETTER' "
    "(without quotes) where LETTER is one of the options. Think step by step before answering. "
)


def load(path: Path) -> list[Row]:
    """The MMMU-Pro vision TSV rows as ``MMMUProDataset`` holds them (``question`` set to ``placeholder``)."""
    rows = load_vlmeval_tsv(path)
    for row in rows:
        row["question"] = QUESTION_PLACEHOLDER
    return rows


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """The row's single screenshot, then the fixed CoT instruction (no question or option text).

    Raises:
        InputError: the row does not have exactly one image (upstream asserts it).
    """
    paths = materialize_images(row, image_dir)
    if len(paths) != 1:
        raise InputError("MMMU-Pro vision rows carry exactly one image", field=f"rows[{row['index']}].image",
                         expected=1, found=len(paths))
    return [PromptItem("image", paths[0]), PromptItem("text", INSTRUCTION)]


def cot_postproc(response: Any) -> Any:
    """``MMMUProDataset.cot_postproc`` on one workbook cell.

    Raises:
        InputError: the cell is not text (upstream raises ``AttributeError`` on ``.strip()``).
    """
    if not isinstance(response, str):
        raise InputError("cot_postproc needs text but the workbook cell is not (an empty or numeric response "
                         "crashes the pinned evaluator)", field="prediction", found=repr(response))
    lines = [line.strip() for line in response.strip().split("\n")]
    answer_lines = [line for line in lines if line.startswith("Answer:")]
    if not answer_lines:
        return response
    tail = answer_lines[-1][len("Answer:"):]
    capitals = {ch for ch in tail if ch in string.ascii_uppercase}
    return capitals.pop() if len(capitals) == 1 else tail


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """``cot_postproc``, prefetch ``can_infer``, judge fallback, ``report_acc``; reported ``Overall Acc``."""
    posts: list[Any] = []

    def rewrite(table: dict[str, list[Any]]) -> list[Any]:
        posts.extend(cot_postproc(cell) for cell in table["prediction"])
        return list(posts)

    overrides = {"question": [QUESTION_PLACEHOLDER] * len(rows)}
    table = _imagemcq.evaluation_table(rows, responses, overrides=overrides, rewrite=rewrite)
    result = _imagemcq.mcq_vanilla_eval(table, [row.get("answer") for row in rows], ctx, benchmark=KEY,
                                        dataset=ALIAS, use_judge=True)
    return _imagemcq.slice_score(KEY, "mmmu", table, result, aggregate=aggregate,
                                 extra_detail=[{"cot_postproc": p} for p in table["prediction"]])


def aggregate(hits: Sequence[int]) -> float:
    """The reported number for per-row hits when the TSV has no split column (as ``score`` computes it)."""
    return primary_score("mmmu", report_acc(hits)).score


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py:MMMUProDataset (alias MMMU_Pro_V_COT)",
    version="mmmu-pro-vision-cot-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="fallback",
    quirks=(
        "question replaced by the literal 'placeholder' (judge sees 'Question: placeholder?')",
        "cot_postproc: last line starting with 'Answer:'; one distinct capital in its tail -> that letter, else the tail",
        "cot_postproc: an empty or numeric workbook cell crashes upstream; fails the slice here",
        "post-processed predictions take one more workbook round trip (_cotpost.xlsx)",
        "choices A-J: the pronoun 'I' is an option token for can_infer",
        "MMMU_preproc: NaN option A -> A = answer, B = 'Other Answers'; non-letter GT -> 'A'",
        "three unusable judge replies: unseeded random letter upstream; deterministic stand-in, row marked fallback",
        "reported number: split=test|validation|none Overall x 100, then auto scaling (x100 again if <= 1)",
    ),
)
