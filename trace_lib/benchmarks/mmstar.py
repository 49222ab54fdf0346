"""MMStar (``mmstar``): VLMEvalKit ``ImageMCQDataset`` as ``MMStar``; raw responses matched by the MCQ matcher.

Upstream: ``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py``
(``ImageMCQDataset.build_prompt``, ``evaluate_heuristic``, ``report_primary_metric``) and
``vlmeval/dataset/utils/multiple_choice.py``; no TRACE adapter. Judge: Qwen3-32B, only when the prefetch fails.

Quirks reproduced on purpose:

- the prediction is read back from the staged prediction workbook (empty -> ``nan``, ``=...`` -> ``nan``);
- ``can_infer``: a single option letter counts only among the last four tokens; ``answer is a...`` reads as A;
  refusal strings and a bare ``Z`` end as ``Z`` without the judge; option-text containment needs a short answer;
- the judge prompt appends ``?`` to the question and lists the options as ``There are several options:``;
- three unusable judge replies -> upstream's unseeded random letter (here deterministic, row marked fallback);
- reported number = ``split=none|Overall`` x 100 (``Overall Acc``), then ``auto`` scaling (x100 again if <= 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from trace_lib.benchmarks import _imagemcq
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv

KEY = "mmstar"
ALIAS = "MMStar"  # VLMEvalKit dataset name (also the TSV's and the images folder's name)


def load(path: Path) -> list[Row]:
    """The MMStar TSV rows as ``ImageBaseDataset`` reads them."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """Images first, then the ImageMCQ text (Question / Options / instruction line)."""
    return _imagemcq.prompt_items(row, image_dir)


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """Prefetch ``can_infer``, judge fallback, ``report_acc``; the reported number is ``Overall Acc``."""
    return _imagemcq.vanilla_slice(rows, responses, ctx, benchmark=KEY, dataset=ALIAS, aggregate=aggregate)


def aggregate(hits: Sequence[int]) -> float:
    """The reported number for per-row hits when the TSV has no split column (as ``score`` computes it)."""
    return _imagemcq.overall_score(hits)


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py:ImageMCQDataset (alias MMStar)",
    version="mmstar-imagemcq-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="fallback",
    quirks=(
        "prediction read back from the staged xlsx workbook (empty or '=...' -> 'nan')",
        "can_infer: one option letter counts only among the last four tokens",
        "can_infer: case-insensitive 'answer is X' (so 'the answer is about' reads as A)",
        "refusal strings or a bare Z token end as Z without the judge",
        "judge prompt: question + '?', options as 'There are several options:'",
        "three unusable judge replies: unseeded random letter upstream; deterministic stand-in, row marked fallback",
        "reported number: split=none|Overall x 100, then auto scaling (x100 again if <= 1)",
    ),
)
