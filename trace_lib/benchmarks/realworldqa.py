"""RealWorldQA (``realworldqa``): ImageMCQ prompt; TRACE's explicit-final-option adapter, then exact matching.

Upstream:
``maveryn/trace@rlvr:rlvr/evaluation/scripts/run_official_vlmevalkit_saved_score.py:_adapt_explicit_mcq_prediction``
(``trace_eval_answer_parsing.extract_unambiguous_abcd`` then
``run_external_benchmark_score_queue._extract_final_mcq_option``), then
``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py:ImageMCQDataset.evaluate_heuristic`` with ``exact_matching``.
No judge.

Quirks reproduced on purpose:

- the adapter reads the staged workbook (an empty response is NaN: stage 1 sees ``''``, stage 2 ``'nan'``);
- stage 1 only knows A-D; a letter that is not one of the row's options falls through to stage 2;
- stage 2 takes the *last* answer marker by position; M3 has no word boundary ("... which is red." -> D);
- echoed option lists win ("A. Yes / B. No / so the answer is yes" -> B, the last ``L.`` line);
- the short-option and last-line rules are case-sensitive, the marker and tail-line rules are not;
- an unresolved row keeps its raw text for VLMEvalKit's ``can_infer``; nothing inferred -> Z (wrong);
- the adapted workbook is written and read again before evaluation.
"""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks import _imagemcq
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.extraction.abcd import extract_unambiguous_abcd
from trace_lib.extraction.choices import build_imagemcq_prompt
from trace_lib.extraction.workbook import isna
from trace_lib.scoring.percent import primary_score, report_acc

KEY = "realworldqa"
ALIAS = "RealWorldQA"


def load(path: Path) -> list[Row]:
    """The RealWorldQA TSV rows as ``ImageBaseDataset`` reads them."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """Images first, then the ImageMCQ text (Hint / Question / Options / instruction line)."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", build_imagemcq_prompt(row))]


def _marker_patterns(labels: str) -> tuple[re.Pattern[str], ...]:
    return (
        re.compile(
            rf"(?is)(?:\*\*)?\s*(?:final\s+answer|correct\s+answer|answer)"
            rf"\s*(?:is)?\s*:?\s*(?:\*\*)?\s*:?\s*"
            rf"(?:\*\*)?\(?([{labels}])\)?(?:\*\*)?\s*(?:[\.\):\-]|$)"
        ),
        re.compile(
            rf"(?is)(?:therefore|thus|so),?\s*(?:the\s+)?(?:\*\*)?\s*"
            rf"(?:final\s+)?(?:correct\s+)?answer\s*(?:is)?\s*:?\s*(?:\*\*)?\s*:?\s*"
            rf"(?:\*\*)?\(?([{labels}])\)?(?:\*\*)?\s*(?:[\.\):\-]|$)"
        ),
        re.compile(
            rf"(?is)(?:final\s+answer|correct\s+answer|answer)[\s\S]{{0,160}}?"
            rf"(?:\*\*)?\(?([{labels}])\)?(?:\*\*)?\s*[\.\)]"
        ),
    )


def extract_final_mcq_option(text: Any, choices: Sequence[str]) -> tuple[str, str]:
    """P2 stage 2 (``_extract_final_mcq_option``): ``(letter, method)``; ``('Z', ...)`` when unresolved."""
    if not choices:
        return "Z", "no_choices"
    value = str(text or "").replace("\r", "\n")
    labels = "".join(re.escape(label) for label in choices)
    matches = [m for pattern in _marker_patterns(labels) for m in pattern.finditer(value)]
    if matches:
        matches.sort(key=lambda m: m.start())  # quirk: the last marker by position wins, across all three
        return matches[-1].group(1).upper(), "answer_marker"
    tail_lines = list(re.finditer(rf"(?im)^\s*(?:[-*]\s*)?(?:\*\*)?([{labels}])(?:\*\*)?\s*[\.\):]\s+",
                                  value[-1600:]))
    if tail_lines:
        return tail_lines[-1].group(1).upper(), "tail_line_start"
    if len(re.findall(r"\S+", value)) <= 40:
        short = re.search(rf"(?<![A-Za-z])([{labels}])\s*[\.\):]\s+", value)
        if short:
            return short.group(1).upper(), "short_option"
    lines = [line.strip() for line in value.splitlines() if line.strip()]
    for line in reversed(lines[-8:]):
        hit = re.search(rf"^(?:\*\*)?([{labels}])(?:\*\*)?(?:\s*[\.\):]|\s*$)", line)
        if hit:
            return hit.group(1).upper(), "last_line"
    return "Z", "unparsed"


def adapt_prediction(raw: Any, choices: Sequence[str]) -> tuple[Any, str]:
    """The TRACE adapter for one row: ``('Answer: L', method)`` or the raw cell and ``official_matcher_fallback``."""
    option = extract_unambiguous_abcd(raw)
    method = "explicit_wrapper"
    if option == "Z" or option not in choices:
        option, method = extract_final_mcq_option(raw, choices)
    if option != "Z" and option in choices:
        return f"Answer: {option}", method
    return raw, "official_matcher_fallback"


def _row_choices(table: dict[str, list[Any]], pos: int) -> list[str]:
    return [label for label in string.ascii_uppercase if label in table and not isna(table[label][pos])]


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """Adapter, then ``can_infer`` only (``exact_matching``); the reported number is ``Overall Acc``."""
    methods: list[str] = []

    def rewrite(table: dict[str, list[Any]]) -> list[Any]:
        adapted = []
        for pos, raw in enumerate(table["prediction"]):
            value, method = adapt_prediction(raw, _row_choices(table, pos))
            adapted.append(value)
            methods.append(method)
        return adapted

    table = _imagemcq.evaluation_table(rows, responses, rewrite=rewrite)
    result = _imagemcq.mcq_vanilla_eval(table, [row["answer"] for row in rows], ctx, benchmark=KEY, dataset=ALIAS,
                                        use_judge=False)
    return _imagemcq.slice_score(KEY, "image_mcq", table, result, aggregate=aggregate,
                                 extra_detail=[{"adapter": m, "adapted": p} for m, p in zip(methods,
                                                                                             table["prediction"])])


def aggregate(hits: Sequence[int]) -> float:
    """The reported number for per-row hits when the TSV has no split column (as ``score`` computes it)."""
    return primary_score("image_mcq", report_acc(hits)).score


PROTOCOL = Protocol(
    key=KEY,
    upstream=("maveryn/trace@rlvr:rlvr/evaluation/scripts/run_official_vlmevalkit_saved_score.py:"
              "_adapt_explicit_mcq_prediction + VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py:ImageMCQDataset"),
    version="realworldqa-final-option-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="none",
    quirks=(
        "adapter reads the staged workbook: empty response -> NaN ('' for stage 1, 'nan' for stage 2)",
        "stage 1 (extract_unambiguous_abcd) knows only A-D; a non-option letter falls through to stage 2",
        "stage 2: last answer marker by position; M3 has no word boundary ('which is red.' -> D)",
        "stage 2: echoed option list lines win (last 'L.' line in the final 1600 characters)",
        "stage 2: short-option and last-line rules are case-sensitive",
        "unresolved rows keep raw text; VLMEvalKit can_infer or Z (exact_matching, no judge)",
        "adapted workbook is written and read again before evaluation",
        "reported number: split=none|Overall x 100, then auto scaling (x100 again if <= 1)",
    ),
)
