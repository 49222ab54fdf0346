"""BLINK: VLMEvalKit's ImageMCQ prompt and vanilla MCQ evaluation with the BLINK judge prompt (Qwen3-32B).

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py`` (``ImageMCQDataset.build_prompt``,
``evaluate_heuristic`` non-circular path, ``report_primary_metric``) and ``vlmeval/dataset/utils/multiple_choice.py``
(``mcq_vanilla_eval``, ``extract_answer_from_item`` with ``dataset_name='BLINK'``, ``report_acc``) through the shared
:mod:`trace_lib.extraction.choices`; spec benchmarks-perception-puzzles §1.

Quirks reproduced on purpose:
- deterministic prefetch (``can_infer``) first; only rows it cannot read go to the judge (up to three rounds);
- the judge sees the workbook question/options/prediction in the BLINK template (``?`` always appended);
- after three unusable judge replies upstream draws an unseeded random letter (incl. Z): a seeded stand-in here;
- gold comes from the dataset TSV, not from the workbook;
- ``split=none|Overall`` is reported x100, then the campaign's auto x100 again if that is still <= 1.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import is_missing, load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError
from trace_lib.extraction.choices import McqItem, build_choices, build_imagemcq_prompt, extract_options
from trace_lib.extraction.workbook import official_workbook
from trace_lib.scoring.percent import MetricTable, mean, primary_score

KEY = "blink"
#: The VLMEvalKit dataset name that selects the BLINK judge prompt.
DATASET_NAME = "BLINK"


def load(path: Path) -> list[Row]:
    """The BLINK TSV rows (``question``, option columns ``A``.., ``answer`` letter, ``category``, images)."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """Every image in list order, then the ImageMCQ prompt (``... options above. \\n``)."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", build_imagemcq_prompt(row))]


def _report_acc(hits: Sequence[int], table: Sequence[dict[str, Any]]) -> MetricTable:
    """``report_acc``: per split (``none`` when the table has no split column), Overall then sorted categories."""
    splits = [c.get("split") for c in table] if any("split" in c for c in table) else ["none"] * len(table)
    order = list(dict.fromkeys(splits))
    columns: list[str] = ["split", "Overall"]
    categories: list[Any] = []
    if any("category" in c for c in table):
        values = [c.get("category") for c in table]
        if all(isinstance(v, str) for v in values):
            categories = sorted(set(values))
    columns += [str(c) for c in categories]
    out = []
    for split in order:
        in_split = [h for h, s in zip(hits, splits) if s == split]
        row: list[Any] = [split, mean(in_split)]
        for category in categories:
            row.append(mean([h for h, s, c in zip(hits, splits, table) if s == split and c.get("category") == category]))
        out.append(tuple(row))
    return MetricTable(tuple(columns), tuple(out))


def aggregate(hits: Sequence[int]) -> float:
    """The reported number: ``split=none|Overall`` (mean hit) x100 by ``report_primary_metric``, then ``auto``."""
    return primary_score("image_mcq", MetricTable(("split", "Overall"), (("none", mean(list(hits))),))).score


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """BLINK accuracy over all rows, in percent.

    Raises:
        JudgeError: a row needs the judge and none is configured (or the judge fails its first round entirely).
        InputError: empty or misaligned slice, or a row's gold answer is missing.
    """
    option_columns = tuple(string.ascii_uppercase)
    book = official_workbook(rows, responses, ("prediction", "question", "hint", "split", "category", *option_columns))
    table = [{name: values[i] for name, values in book.items()} for i in range(len(rows))]
    items = [
        McqItem(index=row["index"], question=cell.get("question"), prediction=str(cell["prediction"]),
                choices=build_choices(cell))
        for row, cell in zip(rows, table)
    ]
    options = extract_options(items, judge=ctx.judge, use_judge=True, benchmark=KEY, seed=ctx.seed,
                              dataset=DATASET_NAME)
    records, hits = [], []
    for row, option in zip(rows, options):
        gold = row.get("answer")
        if is_missing(gold):
            raise InputError("gold answer missing", field=f"rows[{row['index']}].answer")
        hit = int(option.option == gold)
        hits.append(hit)
        records.append(RowScore(str(row["index"]), option.option, float(hit), judge_calls=option.judge_calls,
                                fallback=option.fallback,
                                detail={"method": option.method, "judge_replies": list(option.judge_replies)}))
    result = _report_acc(hits, table)
    return SliceScore(
        benchmark=KEY,
        score=primary_score("image_mcq", result).score,  # split=none|Overall x100, then auto scaling
        rows=len(rows),
        records=tuple(records),
        metrics={f"acc/{name}": value for name, value in zip(result.columns[1:], result.rows[0][1:])},
        counts={"correct": sum(hits), "total": len(hits),
                "judged": sum(1 for o in options if o.method in ("judge", "fallback")),
                "fallbacks": sum(1 for o in options if o.fallback)},
    )


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
