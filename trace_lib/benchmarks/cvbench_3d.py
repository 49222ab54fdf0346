"""CV-Bench 3D (``cvbench_3d``): the TSV's own ``prompt``; the MCQ matcher with the Qwen3-32B judge as fallback.

Upstream: ``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py:CVBench``
(``build_prompt``, ``evaluate``, ``report_accuracy``) and ``vlmeval/dataset/utils/multiple_choice.py``.

Quirks reproduced on purpose:

- the model sees only the row's ``prompt`` cell, verbatim; the judge prompt uses the ``question`` column;
- the raw response is matched by ``can_infer`` (single letter among the last four tokens, ``answer is X``, option
  text containment for short answers); the judge only when that fails; three unusable replies -> upstream's
  unseeded random letter (here deterministic, row marked fallback);
- ``report_acc`` unless every row's split is ``2D`` (then the per-source average of ``report_accuracy``);
- the reported key is ``split=<value>|Overall`` chosen by the generic ranking (a fraction, x100 by ``auto``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks import _imagemcq
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError
from trace_lib.extraction.workbook import roundtrip_column
from trace_lib.scoring.percent import MetricTable, mean, primary_score, report_acc

KEY = "cvbench_3d"
ALIAS = "CV-Bench-3D"


def load(path: Path) -> list[Row]:
    """The CV-Bench-3D TSV rows as ``ImageBaseDataset`` reads them."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """Images first, then the row's ``prompt`` cell verbatim."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", row["prompt"])]


def report_accuracy_2d(hits: Sequence[int], split: Sequence[Any], source: Sequence[Any]) -> MetricTable:
    """``CVBench.report_accuracy``: per-source accuracy per split, ``Overall`` = mean over sources."""
    splits = list(dict.fromkeys(split))
    sources = list(dict.fromkeys(source))
    table: dict[str, list[Any]] = {"split": splits}
    for src in sources:
        table[str(src)] = [mean([h for h, s, o in zip(hits, split, source) if o == src and s == sp])
                           for sp in splits]
    table["Overall"] = [sum(table[str(src)][i] for src in sources) / len(sources) for i in range(len(splits))]
    return MetricTable(columns=tuple(table), rows=tuple(zip(*table.values())))


def accuracy(hits: Sequence[int], table: dict[str, list[Any]]) -> MetricTable:
    """``report_acc`` or, when every split is ``2D``, ``report_accuracy`` (on the re-read result table)."""
    if "split" not in table:
        raise InputError("CV-Bench's evaluator reads a split column", field="split")
    split = roundtrip_column(table["split"])
    if all(s == "2D" for s in split):
        if "source" not in table:
            raise InputError("CV-Bench-2D scoring reads a source column", field="source")
        return report_accuracy_2d(hits, split, roundtrip_column(table["source"]))
    return _imagemcq.accuracy_table(hits, table)


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """Prefetch ``can_infer``, judge fallback; the reported number is the ``split=<v>|Overall`` accuracy."""
    table = _imagemcq.evaluation_table(rows, responses)
    result = _imagemcq.mcq_vanilla_eval(table, [row.get("answer") for row in rows], ctx, benchmark=KEY,
                                        dataset=ALIAS, use_judge=True)
    splits = set(roundtrip_column(table["split"])) if "split" in table else set()
    single = next(iter(splits)) if len(splits) == 1 and splits != {"2D"} else None
    return _imagemcq.slice_score(KEY, "image_mcq", table, result, accuracy=accuracy(result.hits, table),
                                 aggregate=None if single is None else lambda hits: aggregate(hits, split=single))


def aggregate(hits: Sequence[int], split: str = "3D") -> float:
    """The reported number for per-row hits of one (non-2D) split, as ``score`` computes it."""
    return primary_score("image_mcq", report_acc(hits, split=[split] * len(hits))).score


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py:CVBench (alias CV-Bench-3D)",
    version="cvbench-3d-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="fallback",
    quirks=(
        "model sees the prompt cell verbatim; the judge prompt uses the question column",
        "can_infer: one option letter counts only among the last four tokens",
        "can_infer: case-insensitive 'answer is X'",
        "three unusable judge replies: unseeded random letter upstream; deterministic stand-in, row marked fallback",
        "report_acc unless every split is '2D' (then per-source average)",
        "reported key split=<v>|Overall by the generic ranking (fraction, auto x100)",
    ),
)
