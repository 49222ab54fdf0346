"""BLINK: VLMEvalKit's ImageMCQ prompt and vanilla MCQ evaluation with the BLINK judge prompt (Qwen3-32B).

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py`` (``ImageMCQDataset.build_prompt``,
``evaluate_heuristic`` non-circular path, ``report_primary_metric``) and ``vlmeval/dataset/utils/multiple_choice.py``
(``mcq_vanilla_eval``, ``extract_answer_from_item`` with ``dataset_name='BLINK'``, ``report_acc``) through the shared
:mod:`trace_lib.benchmarks._imagemcq` and :mod:`trace_lib.extraction.choices`.

Quirks reproduced on purpose:
- deterministic prefetch (``can_infer``) first; only rows it cannot read go to the judge (up to three rounds);
- the judge sees the workbook question/options/prediction in the BLINK template (``?`` always appended);
- after three unusable judge replies upstream draws an unseeded random letter (incl. Z): a seeded stand-in here;
- gold comes from the dataset TSV, not from the workbook;
- ``split=none|Overall`` is reported x100, then the campaign's auto x100 again if that is still <= 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from trace_lib.benchmarks import _imagemcq
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv

KEY = "blink"
#: The VLMEvalKit dataset name; it selects the BLINK judge prompt (``build_prompt_blink``).
ALIAS = "BLINK"


def load(path: Path) -> list[Row]:
    """The BLINK TSV rows (``question``, option columns ``A``.., ``answer`` letter, ``category``, images)."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """Every image in list order, then the ImageMCQ prompt (``... options above. \\n``)."""
    return _imagemcq.prompt_items(row, image_dir)


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """Prefetch ``can_infer``, BLINK judge rounds, ``report_acc``; the reported number is ``Overall Acc``.

    Raises:
        JudgeError: no judge configured (the official route always passes one).
        InputError: empty or misaligned slice.
    """
    return _imagemcq.vanilla_slice(rows, responses, ctx, benchmark=KEY, dataset=ALIAS, aggregate=aggregate)


def aggregate(hits: Sequence[int]) -> float:
    """The reported number for per-row hits: ``split=none|Overall`` x100, then ``auto`` scaling."""
    return _imagemcq.overall_score(hits)


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py:ImageMCQDataset (BLINK) + utils/multiple_choice.py",
    version="blink-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="fallback",
    quirks=(
        "can_infer prefetch first (tokens, 'answer is X' case-insensitive, option-text containment); judge only "
        "when it fails",
        "BLINK judge template with the workbook question + '?', option list and str(prediction) ('nan' for NA)",
        "three unusable judge replies -> upstream's unseeded random letter incl. Z; seeded stand-in, row fallback=True",
        "gold from the dataset TSV, not the workbook",
        "split=none|Overall reported x100, then auto x100 again when <= 1",
    ),
)
