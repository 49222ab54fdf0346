"""VisualPuzzles: VLMEvalKit's ``VisualPuzzles`` prompt and ``VisulPuzzles_acc`` with TRACE's A-D extraction.

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py`` (``VisualPuzzles.format_options``/``build_prompt``/
``evaluate``) and ``vlmeval/dataset/utils/visualpuzzles.py`` (``VisulPuzzles_acc``, ``extract_answer`` replaced by
``extract_unambiguous_abcd``). The judge is only pinged upstream; not called.

Quirks reproduced on purpose:
- options are every single-quoted substring of the ``options`` cell (an apostrophe inside an item splits it);
- no options -> ``Options: Choose from (A) (B) (C) (D) in the image.``;
- two result tables (category, level) are concatenated; ``group=overall|type=category|acc`` is reported;
- that percent still gets the campaign's auto x100 when <= 1.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks._puzzle_prompt import ANSWER_LETTER_TAIL, paren_letter_lines
from trace_lib.benchmarks.protocol import DataRow, PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError
from trace_lib.extraction.abcd import extract_unambiguous_abcd
from trace_lib.extraction.workbook import isna, official_workbook
from trace_lib.scoring.percent import MetricTable, primary_score

KEY = "visualpuzzles"
CATEGORIES = ("overall", "spatial", "algorithmic", "analogical", "inductive", "deductive")
LEVELS = ("easy", "medium", "hard", "overall")
NO_OPTIONS = "Options: Choose from (A) (B) (C) (D) in the image."
_QUOTED = re.compile(r"'(.*?)'")


def load(path: Path) -> list[Row]:
    """The VisualPuzzles TSV rows (``question``, ``options`` or NaN, gold letter ``answer``, category, level)."""
    return load_vlmeval_tsv(path)


def options_block(cell: Any, index: Any) -> str:
    """``Options:\\n(A) ...`` from the single-quoted items of the cell, or the in-image fallback line.

    Raises:
        InputError: a non-NaN cell that is not text, or empty text (upstream raises ``TypeError``).
    """
    if isna(cell):
        return NO_OPTIONS
    if not isinstance(cell, str) or not cell or cell == "nan":
        raise InputError("options cell is not option text", field=f"rows[{index}].options", found=repr(cell)[:80])
    return "Options:\n" + paren_letter_lines(_QUOTED.findall(cell))


def build_prompt_text(row: Row) -> str:
    """``{question}\\n{options block}`` + the answer-letter instruction."""
    return f"{row['question']}\n{options_block(row['options'], row['index'])}{ANSWER_LETTER_TAIL}"


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """Every image, then the options prompt."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", build_prompt_text(row))]


def _table(groups: Sequence[str], hit: Counter[Any], tot: Counter[Any]) -> list[tuple[Any, ...]]:
    # upstream divides by zero for a listed group with no rows; only groups present are reported here
    return [(g, tot[g], hit[g], hit[g] / tot[g] * 100) for g in groups if tot[g] > 0]


def aggregate(hits: Sequence[int]) -> float:
    """The reported number: ``group=overall|type=category|acc`` of the concatenated tables, then ``auto`` scaling."""
    hit, tot = sum(hits), len(hits)
    table = MetricTable(("group", "tot", "hit", "acc", "type"), (("overall", tot, hit, hit / tot * 100, "category"),
                                                                 ("overall", tot, hit, hit / tot * 100, "level")))
    return primary_score("image_mcq", table).score


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """``VisulPuzzles_acc`` overall accuracy (category table), in percent."""
    book = official_workbook(rows, responses, ("prediction", "answer", "category", "difficulty"))
    table = [DataRow({name: values[i] for name, values in book.items()}) for i in range(len(rows))]
    hit_cat: Counter[Any] = Counter()
    tot_cat: Counter[Any] = Counter()
    hit_level: Counter[Any] = Counter()
    tot_level: Counter[Any] = Counter()
    records = []
    for row, cell in zip(rows, table):
        index = row["index"]
        gold = cell.get("answer")
        if not isinstance(gold, str):
            raise InputError("gold answer is not a letter", field=f"rows[{index}].answer", found=repr(gold))
        extracted = extract_unambiguous_abcd(cell["prediction"])
        correct = extracted.lower() == gold.lower()
        for key in ("overall", cell.get("category")):
            tot_cat[key] += 1
            hit_cat[key] += correct
        for key in ("overall", cell.get("difficulty")):
            tot_level[key] += 1
            hit_level[key] += correct
        records.append(RowScore(str(index), extracted, float(correct), detail={"gold": gold}))
    rows_out = [(g, t, h, a, "category") for g, t, h, a in _table(CATEGORIES, hit_cat, tot_cat)]
    rows_out += [(g, t, h, a, "level") for g, t, h, a in _table(LEVELS, hit_level, tot_level)]
    result = MetricTable(("group", "tot", "hit", "acc", "type"), tuple(rows_out))
    if primary_score("image_mcq", result).key != "group=overall|type=category|acc":
        raise RuntimeError("VisualPuzzles: the key ranking no longer selects group=overall|type=category|acc")
    return SliceScore(
        benchmark=KEY,
        score=aggregate([int(r.score) for r in records]),
        rows=len(rows),
        records=tuple(records),
        metrics={f"acc/{kind}/{g}": a for g, _, _, a, kind in rows_out},
        counts={"correct": hit_cat["overall"], "total": tot_cat["overall"],
                "unresolved": sum(r.extracted == "Z" for r in records)},
    )


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/visualpuzzles.py:VisulPuzzles_acc"
             " + TRACE extract_unambiguous_abcd",
    version="visualpuzzles-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="none",
    quirks=(
        "options = every single-quoted substring of the options cell (apostrophes split items)",
        "no options -> 'Options: Choose from (A) (B) (C) (D) in the image.'",
        "extraction: explicit 'answer: X', single <answer> block, last balanced box; conflict or none -> Z; A-D only",
        "reported group=overall|type=category|acc is a percent, still x100 by auto scaling when <= 1",
    ),
)
