"""``ImageMCQDataset.evaluate_heuristic`` / ``CVBench.evaluate`` on an official-route slice, as pure functions.

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py`` (evaluation table: staged workbook, ``prediction``
-> ``str``, column names lower-cased except single capital letters) and
``vlmeval/dataset/utils/multiple_choice.py:mcq_vanilla_eval`` (GT from the *dataset* table, ``MMMU_preproc`` and
non-letter GT -> ``A`` for MMMU aliases, ``hit = option == GT``), then ``report_acc`` on the result table (one
more workbook round trip) and the dataset class's primary metric.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from trace_lib.benchmarks.protocol import PromptItem, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import materialize_images
from trace_lib.errors import InputError, JudgeError
from trace_lib.extraction.choices import build_imagemcq_prompt
from trace_lib.scoring.mcq_judge import McqItem, McqOption, extract_options
from trace_lib.extraction.workbook import isna, official_workbook, roundtrip_column, roundtrip_table
from trace_lib.scoring.percent import MetricTable, Reporter, flatten_summary_metrics, primary_score, report_acc

_LETTERS = tuple(string.ascii_uppercase)
#: Evaluation-table columns the matcher and ``report_acc`` read (after lower-casing).
_READ = ("index", "question", "prediction", "answer", "split", "category", "l2-category", "source")


def dataset_columns(rows: Sequence[Row]) -> list[str]:
    """Column names of a dataset table in first-seen order."""
    return list(dict.fromkeys(name for row in rows for name in row))


def evaluation_table(
    rows: Sequence[Row],
    predictions: Sequence[str | None],
    *,
    overrides: Mapping[str, Sequence[Any]] | None = None,
    rewrite: Callable[[dict[str, list[Any]]], list[Any]] | None = None,
) -> dict[str, list[Any]]:
    """The evaluation table ``evaluate_heuristic`` builds from the staged workbook (names lower-cased).

    ``rewrite`` is a TRACE adapter or dataset post-processor: it maps the staged table to new ``prediction``
    cells, which are written to a workbook and read back once more (every column takes that extra round trip).
    """
    wanted = [
        name for name in dataset_columns(rows)
        if (name in _LETTERS) or name.lower() in _READ
    ]
    table = official_workbook(rows, predictions, ["index", *wanted, "prediction"], overrides=overrides)
    if rewrite is not None:
        table["prediction"] = rewrite(table)
        table = roundtrip_table(table)
    out: dict[str, list[Any]] = {}
    for name, values in table.items():
        out[name if name in _LETTERS else name.lower()] = values
    out["prediction"] = [str(v) for v in out["prediction"]]
    return out


def mmmu_preproc(table: dict[str, list[Any]], answers: Sequence[Any]) -> None:
    """``MMMU_preproc``: a row without option ``A`` becomes ``A = answer``, ``B = 'Other Answers'`` (in place)."""
    for pos, value in enumerate(table["A"]):
        if isna(value):
            table["A"][pos] = answers[pos]
            table["B"][pos] = "Other Answers"


@dataclass(frozen=True)
class McqSlice:
    """Per-row options and hits of an ImageMCQ evaluation, with the ground truth compared against."""

    options: list[McqOption]
    gt: list[Any]
    hits: list[int]


def mcq_vanilla_eval(
    table: dict[str, list[Any]],
    dataset_answers: Sequence[Any],
    ctx: ScoringContext,
    *,
    benchmark: str,
    dataset: str,
    use_judge: bool,
) -> McqSlice:
    """Options and hits for every row (``mcq_vanilla_eval``; rows are independent, so table order is kept)."""
    if use_judge and ctx.judge is None:
        raise JudgeError(f"{benchmark}: this route uses the Qwen3-32B judge and none is configured",
                         field="--judge-url", hint="start the judge and pass --judge-url")
    gt = list(dataset_answers)
    if "MMMU" in dataset:
        if not all(name in table for name in ("A", "B", "answer")):
            raise InputError("MMMU_preproc needs option columns A and B and an answer column", field="columns")
        mmmu_preproc(table, table["answer"])
        gt = [v if isinstance(v, str) and v in _LETTERS else "A" for v in gt]
    letters = [ch for ch in _LETTERS if ch in table]
    items = [
        McqItem(
            index=table["index"][pos],
            question=table["question"][pos] if "question" in table else math.nan,
            prediction=table["prediction"][pos],
            choices={ch: table[ch][pos] for ch in letters if not isna(table[ch][pos])},
        )
        for pos in range(len(table["index"]))
    ]
    options = extract_options(items, judge=ctx.judge, use_judge=use_judge, benchmark=benchmark, seed=ctx.seed,
                              dataset=dataset)
    hits = [int(opt.option == answer) for opt, answer in zip(options, gt)]
    return McqSlice(options=options, gt=gt, hits=hits)


def accuracy_table(hits: Sequence[int], table: Mapping[str, list[Any]]):
    """``report_acc`` on the result table, after its own workbook round trip (split / category columns)."""
    groups = {name: roundtrip_column(table[name]) for name in ("split", "l2-category", "category") if name in table}
    return report_acc(hits, split=groups.get("split"), l2_category=groups.get("l2-category"),
                      category=groups.get("category"))


def slice_score(
    benchmark: str,
    reporter: Reporter,
    table: Mapping[str, list[Any]],
    result: McqSlice,
    *,
    extra_detail: Sequence[Mapping[str, Any]] | None = None,
    accuracy: MetricTable | None = None,
    aggregate: Callable[[Sequence[int]], float] | None = None,
) -> SliceScore:
    """The SliceScore of an ImageMCQ evaluation: primary metric in percent, sub-metrics, counts, row records.
    ``aggregate(hits)`` (the benchmark module's own) gives the reported number when passed."""
    if accuracy is None:
        accuracy = accuracy_table(result.hits, table)
    primary = primary_score(reporter, accuracy)
    records = []
    for pos, (opt, hit) in enumerate(zip(result.options, result.hits)):
        detail: dict[str, Any] = {"method": opt.method, "gt": result.gt[pos]}
        if opt.judge_replies:
            detail["judge_replies"] = list(opt.judge_replies)
        if extra_detail is not None:
            detail.update(extra_detail[pos])
        records.append(RowScore(index=str(table["index"][pos]), extracted=opt.option, score=float(hit),
                                judge_calls=opt.judge_calls, fallback=opt.fallback, detail=detail))
    metrics = {k: float(v) for k, v in flatten_summary_metrics(accuracy).items()}
    counts = {
        "rows": len(result.hits),
        "correct": sum(result.hits),
        "judge_rows": sum(1 for o in result.options if o.judge_calls),
        "fallbacks": sum(1 for o in result.options if o.fallback),
    }
    reported = aggregate(result.hits) if aggregate is not None else primary.score
    return SliceScore(benchmark=benchmark, score=reported, rows=len(result.hits), records=tuple(records),
                      metrics=metrics, counts=counts)


def prompt_items(row: Row, image_dir: Path) -> list[PromptItem]:
    """Every image of the row in list order, then the ImageMCQ text (``build_imagemcq_prompt``)."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", build_imagemcq_prompt(row))]


def vanilla_slice(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext, *, benchmark: str,
                  dataset: str, aggregate: Callable[[Sequence[int]], float]) -> SliceScore:
    """The judge-fallback ImageMCQ route: evaluation table, ``mcq_vanilla_eval`` against the dataset's ``answer``
    column, the ``image_mcq`` slice score with ``aggregate(hits)`` as the reported number."""
    table = evaluation_table(rows, responses)
    result = mcq_vanilla_eval(table, [row["answer"] for row in rows], ctx, benchmark=benchmark, dataset=dataset,
                              use_judge=True)
    return slice_score(benchmark, "image_mcq", table, result, aggregate=aggregate)


def overall_score(hits: Sequence[int]) -> float:
    """The ``image_mcq`` reported number of per-row hits without a split column: ``split=none|Overall`` x100,
    then ``auto`` scaling."""
    return primary_score("image_mcq", report_acc(hits)).score
