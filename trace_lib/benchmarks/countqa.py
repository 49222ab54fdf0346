"""CountQA: TRACE's VLMEvalKit extension (boxed-answer prompt, last-integer exact match; judge-free).

Mirrors ``maveryn/trace@rlvr:rlvr/evaluation/vlmevalkit_extensions/trace_eval_local_vqa.py`` (``CountQA``:
cached-TSV loading, ``build_prompt``, ``_extract_final_text``, ``_extract_last_int``, ``evaluate``).
Its ``\\boxed{`` scanner (literal opener, stops at the first unbalanced box, stripped content)
is deliberately different from PuzzleVQA's and TreeBench's; do not merge them.

Quirks reproduced on purpose:
- the same integer extraction runs on the prediction *and* on the gold answer;
- ``str(value or "")``: a cell holding 0 (numeric column, or an ``=`` formula) reads as "" -> no integer;
- the first ``answer``/``option``/``choice`` marker swallows the rest of the text, so the first marker wins;
- the *last* integer of the chosen text counts ("1,234" -> 234, "3-4" -> -4, "3.5" -> 5);
- without digits, the largest number word zero..twenty present wins, not the last one in the text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.extraction.boxed import final_answer_cascade
from trace_lib.extraction.workbook import isna, official_workbook
from trace_lib.scoring.percent import MetricTable, primary_score

KEY = "countqa"
#: ``COUNTQA_BOXED_POST_PROMPT``: appended to the stripped question.
BOXED_SUFFIX = "\nPut the final answer inside \\boxed{}."

_ANSWER_MARKER = re.compile(r"\b(?:final\s+answer|answer|choice|option)\b\s*[:：]?\s*(.+)", flags=re.I | re.S)
_INTEGER = re.compile(r"[-+]?\d+")
#: Number words in ascending order; the scan keeps the last (largest) one present.
_NUMBER_WORDS = tuple(
    (re.compile(rf"\b{word}\b"), value)
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
)


def load(path: Path) -> list[Row]:
    """The TRACE-built ``CountQA.tsv`` rows, ``answer`` re-normalised to text as the cached loader does."""
    rows = load_vlmeval_tsv(path)
    for row in rows:
        # post-run patch countqa-cached-answer-normalization: "" for a missing answer, else str(value).strip()
        row["answer"] = "" if isna(row.get("answer")) else str(row["answer"]).strip()
    return rows


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """The image, then the stripped question and ``\\nPut the final answer inside \\boxed{}.``."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", str(row["question"]).strip() + BOXED_SUFFIX)]


def final_text(value: Any) -> str:
    """The part of a cell that carries the final answer: box, then ``<answer>``, JSON ``answer``, marker, all."""
    text = str(value or "").strip()  # quirk: 0 -> "", NaN -> "nan"
    return final_answer_cascade(text, _ANSWER_MARKER)  # upstream copies this cascade verbatim into EvoChart


def extract_last_int(value: Any) -> int | None:
    """The last integer of the final text, else the largest number word zero..twenty in it, else None."""
    text = final_text(value).lower()
    integers = _INTEGER.findall(text)
    if integers:
        return int(integers[-1])
    found = None
    for pattern, number in _NUMBER_WORDS:
        if pattern.search(text):
            found = number  # quirk: ascending scan keeps the largest word present
    return found


def aggregate(hits: Sequence[float]) -> float:
    """The reported number: ``split=Overall|acc`` of ``[{split: Overall, tot, hit, acc}]`` (ties break to acc)."""
    total = float(sum(hits))
    table = MetricTable(("split", "tot", "hit", "acc"), (("Overall", len(hits), total, total / len(hits) * 100),))
    return primary_score("image_base", table).score


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """Exact integer match of prediction and gold over all rows, in percent (``split=Overall|acc``)."""
    book = official_workbook(rows, responses, ("prediction", "answer"))
    golds = book.get("answer", [""] * len(rows))
    records = []
    correct: list[float] = []
    for row, prediction, answer in zip(rows, book["prediction"], golds):
        predicted = extract_last_int(prediction)
        gold = extract_last_int(answer)
        hit = float(predicted is not None and gold is not None and predicted == gold)
        correct.append(hit)
        records.append(RowScore(str(row["index"]), predicted, hit, detail={"gold": gold}))
    hits = sum(correct)
    acc = hits / len(correct) * 100
    return SliceScore(
        benchmark=KEY,
        score=aggregate(correct),
        rows=len(rows),
        records=tuple(records),
        metrics={"acc": acc},
        counts={"correct": int(hits), "total": len(rows),
                "unparsed_predictions": sum(r.extracted is None for r in records)},
    )


PROTOCOL = Protocol(
    key=KEY,
    upstream="maveryn/trace@rlvr:rlvr/evaluation/vlmevalkit_extensions/trace_eval_local_vqa.py:CountQA",
    version="countqa-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="none",
    quirks=(
        "the same last-integer extraction runs on prediction and gold answer",
        "str(value or ''): a 0 cell (all-numeric column) reads as '' and yields no integer",
        "final text: last literal \\boxed{ (stops at an unbalanced box), then first <answer>, JSON answer, "
        "first answer/option/choice marker (swallows the rest), else the whole text",
        "the last integer counts ('1,234' -> 234, '3-4' -> -4, '3.5' -> 5)",
        "without digits the largest number word zero..twenty present wins",
        "prediction and answer pass the xlsx round trip (an all-numeric column with a NaN becomes floats: '12.0' -> 0)",
    ),
)
