"""PuzzleVQA: VLMEvalKit's ``PuzzleVQA`` prompt and ``PuzzleVQA_acc`` with TRACE's unambiguous A-D extraction.

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py`` (``PuzzleVQA.build_prompt``/``evaluate``) and
``vlmeval/dataset/utils/puzzlevqa.py`` (``to_choice_letter``, ``PuzzleVQA_acc``) with ``extract_answer`` replaced by
``extract_unambiguous_abcd`` (``apply_vlmevalkit_trace_extensions.py``).
The judge is only pinged upstream and never affects a score, so it is not called here.

Quirks reproduced on purpose:
- gold is a letter derived from the option *text*: the first option whose stripped text equals the answer;
- extraction returns Z on no or conflicting explicit candidates; E-Z are never accepted;
- the reported ``category=overall|acc`` is already a percent but still gets the campaign's auto x100 when <= 1.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks._puzzle_prompt import ANSWER_LETTER_TAIL, paren_letter_lines
from trace_lib.benchmarks.protocol import DataRow, PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError
from trace_lib.extraction.abcd import extract_unambiguous_abcd
from trace_lib.extraction.workbook import official_workbook
from trace_lib.scoring.percent import MetricTable, primary_score

KEY = "puzzlevqa"
#: The categories ``PuzzleVQA_acc`` reports, in its order.
CATEGORIES = (
    "overall", "grid_number", "size_grid", "rectangle_height_color", "shape_size_hexagon", "rectangle_height_number",
    "shape_reflect", "circle_size_number", "polygon_sides_color", "color_overlap_squares", "color_size_circle",
    "venn", "size_cycle", "polygon_sides_number", "shape_size_grid", "color_hexagon", "grid_number_color",
    "color_grid", "shape_morph", "triangle", "color_number_hexagon",
)


def load(path: Path) -> list[Row]:
    """The PuzzleVQA TSV rows (``question``, ``options`` list literal, ``answer`` option text, ``category``)."""
    return load_vlmeval_tsv(path)


def parse_options(cell: Any, index: Any) -> list[Any]:
    """The ``options`` cell as a list (upstream ``eval``; here a literal only).

    Raises:
        InputError: the cell is not a Python list literal.
    """
    try:
        value = ast.literal_eval(cell) if isinstance(cell, str) else None
    except (ValueError, SyntaxError):
        value = None
    if not isinstance(value, (list, tuple)):
        raise InputError("options is not a list literal", field=f"rows[{index}].options", found=str(cell)[:80])
    if len(value) > 26:
        raise InputError("more options than letters A-Z", field=f"rows[{index}].options", found=len(value))
    return list(value)


def build_prompt_text(row: Row) -> str:
    """``{question}\\nOptions:\\n(A) ...`` + the answer-letter instruction."""
    options = paren_letter_lines(parse_options(row["options"], row["index"]))
    return f"{row['question']}\nOptions:\n{options}{ANSWER_LETTER_TAIL}"


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """Every image, then the lettered options prompt."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", build_prompt_text(row))]


def gold_letter(options: Sequence[Any], answer: Any, index: Any) -> str:
    """``to_choice_letter``: the letter of the first option whose stripped text equals the stripped answer.

    Raises:
        InputError: no option matches (upstream raises ``ValueError``).
    """
    wanted = str(answer).strip()
    for position, option in enumerate(options):
        if str(option).strip() == wanted:
            return chr(ord("A") + position)
    raise InputError("answer not found among the options", field=f"rows[{index}].answer", found=wanted[:80])


def aggregate(hits: Sequence[int]) -> float:
    """The reported number: ``category=overall|acc`` of the ``PuzzleVQA_acc`` table, then ``auto`` scaling."""
    hit, tot = sum(hits), len(hits)
    return primary_score("image_mcq", MetricTable(("category", "tot", "hit", "acc"),
                                                  (("overall", tot, hit, hit / tot * 100),))).score


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """``PuzzleVQA_acc`` overall accuracy, in percent."""
    book = official_workbook(rows, responses, ("prediction", "options", "answer", "category"))
    table = [DataRow({name: values[i] for name, values in book.items()}) for i in range(len(rows))]
    hit: Counter[Any] = Counter()
    tot: Counter[Any] = Counter()
    records = []
    for row, cell in zip(rows, table):
        index = row["index"]
        extracted = extract_unambiguous_abcd(cell["prediction"])
        gold = gold_letter(parse_options(cell["options"], index), cell["answer"], index)
        correct = extracted.lower() == gold.lower()
        category = cell.get("category")
        for key in ("overall", category):
            tot[key] += 1
            hit[key] += correct
        records.append(RowScore(str(index), extracted, float(correct), detail={"gold": gold}))
    # upstream divides by zero for a listed category with no rows; only categories present are reported here
    listed = [c for c in CATEGORIES if tot[c] > 0]
    result = MetricTable(("category", "tot", "hit", "acc"),
                         tuple((c, tot[c], hit[c], hit[c] / tot[c] * 100) for c in listed))
    if primary_score("image_mcq", result).key != "category=overall|acc":
        raise RuntimeError("PuzzleVQA: the key ranking no longer selects category=overall|acc")
    return SliceScore(
        benchmark=KEY,
        score=aggregate([int(r.score) for r in records]),
        rows=len(rows),
        records=tuple(records),
        metrics={f"acc/{c}": hit[c] / tot[c] * 100 for c in listed},
        counts={"correct": hit["overall"], "total": tot["overall"],
                "unresolved": sum(r.extracted == "Z" for r in records)},
    )


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/puzzlevqa.py:PuzzleVQA_acc + TRACE extract_unambiguous_abcd",
    version="puzzlevqa-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="none",
    quirks=(
        "gold letter = first option whose stripped text equals the stripped answer (to_choice_letter)",
        "extraction: explicit 'answer: X', single <answer> block, last balanced box; conflict or none -> Z; A-D only",
        "prediction, options and answer pass the xlsx round trip before scoring",
        "reported category=overall|acc is a percent, still x100 by auto scaling when <= 1",
    ),
)
