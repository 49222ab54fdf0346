"""CountBenchQA: VLMEvalKit's ``CountBenchQA`` prompt and its substring "accuracy" (judge-free).

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_vqa.py`` (``CountBenchQA.build_prompt``/``evaluate``) as the
official route runs it on the prediction workbook.

Quirks reproduced on purpose:
- a row is correct iff ``str(answer)`` is a *substring* of ``str(prediction)`` ("13" is right for 3);
- both cells pass the workbook round trip first (empty/NA response -> "nan"; an all-numeric column -> "3.0");
- the reported number is ``accuracy`` picked by the generic key ranking, then ``auto`` percent scaling.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.extraction.workbook import official_workbook
from trace_lib.scoring.percent import primary_score

KEY = "countbenchqa"
#: Appended to the question after one space (``CountBenchQA.build_prompt``).
NUMBER_INSTRUCTION = " Note that: answer with a number directly e.g. 3. Do not include any additional text."


def load(path: Path) -> list[Row]:
    """The CountBenchQA TSV rows (``index``, ``image``, ``question``, ``answer``), typed as VLMEvalKit reads them."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """Every image, then ``{question} Note that: ...`` (no trailing newline)."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", f"{row['question']}{NUMBER_INSTRUCTION}")]


def aggregate(hits: Sequence[int]) -> float:
    """The reported number for per-row hits: ``{"accuracy": correct / total * 100}`` through the key ranking."""
    accuracy = sum(hits) / len(hits)
    return primary_score("image_vqa", {"accuracy": accuracy * 100}).score  # quirk: `accuracy` key, auto scaling


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """Substring accuracy over all rows, in percent, as ``CountBenchQA.evaluate`` reports it."""
    book = official_workbook(rows, responses, ("prediction", "answer"))
    records = []
    correct = 0
    for position, row in enumerate(rows):
        prediction, answer = str(book["prediction"][position]), str(book["answer"][position])
        hit = answer in prediction  # quirk: substring containment, no numeric parse
        correct += hit
        records.append(RowScore(str(row["index"]), prediction, float(hit), detail={"gold": answer}))
    total = len(rows)
    return SliceScore(
        benchmark=KEY,
        score=aggregate([int(r.score) for r in records]),
        rows=total,
        records=tuple(records),
        metrics={"accuracy": correct / total * 100},
        counts={"correct": correct, "total": total},
    )


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/image_vqa.py:CountBenchQA",
    version="countbenchqa-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="none",
    quirks=(
        "correct iff str(answer) is a substring of str(prediction) (no numeric parse, '13' matches 3)",
        "prediction and answer pass the official xlsx round trip (NA response -> 'nan'; all-numeric column with "
        "a NaN -> floats; '=' formula re-saved by openpyxl -> 'nan')",
        "reported value is 'accuracy' (generic key ranking) with auto x100 scaling when <= 1",
    ),
)
