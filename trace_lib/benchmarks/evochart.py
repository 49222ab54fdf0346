"""EvoChart (``EvoChart``, TRACE's VLMEvalKit extension): deterministic final-answer parsing, exact or 5 % match.

Mirrors ``maveryn/trace@rlvr:rlvr/evaluation/vlmevalkit_extensions/evochart.py`` (``load_data``, ``build_prompt``,
``_extract_final_answer``, ``score_prediction``, ``evaluate``) as run by ``run_external_benchmark_score_queue.py:
_run_evochart_local_score``. No judge, despite the historical run name.

Quirks reproduced on purpose:
- the prompt is the stripped question + ``\\nPut the final answer inside \\boxed{}.``;
- extraction runs twice (``evaluate`` extracts, then ``score_prediction`` extracts again from that);
- box (literal ``\\boxed{``, last balanced, empty box skipped) -> *first* ``<answer>`` -> JSON ``"answer"`` ->
  answer marker, where ``(.+)`` under DOTALL makes the first ``answer`` word win and only its first line is
  kept -> the whole text;
- text gold: casefold equality only (``\\text{Yes}`` != ``Yes``); numeric gold: exactly one number in the
  answer, exact when ``is_clear`` (a NaN ``is_clear`` is truthy), else within 5 % (0 needs exactly 0);
- the reported ``acc`` passes through ``DataFrame.to_json``: rounded to 10 decimal places.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Sequence

from trace_lib.extraction.boxed import final_answer_cascade
from trace_lib.benchmarks._math_workbook import prediction_workbook, records, to_json_double
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError

KEY = "evochart"
#: ``BOXED_POST_PROMPT``, appended for the ``EvoChart`` dataset name.
BOXED_SUFFIX = "\nPut the final answer inside \\boxed{}."
#: The Hugging Face source ``load_data`` reads (split ``train``); the pin lives in benchmark_provenance.v1.json.
HF_DATASET = "gsarch/EvoChart-QA"

_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\d*\.\d+")
_ANSWER_MARKER = re.compile(r"\b(?:final\s+answer|answer)\b\s*(?:is|=|:|：)?\s*(.+)", flags=re.I | re.S)


def load(path: Path) -> list[Row]:
    """``<LMUData>/EvoChart.tsv`` as ``load_data`` caches it and reloads it (``pandas.read_csv`` typing):
    index, question, answer, image_path, attribute, is_clear, chart_type."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """``EvoChart.build_prompt``: the image, then the stripped question + :data:`BOXED_SUFFIX`."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", str(row["question"]).strip() + BOXED_SUFFIX)]


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def final_answer(value: Any) -> str:
    """``_extract_final_answer``: box, first ``<answer>``, JSON ``"answer"``, answer marker, else the text."""
    return final_answer_cascade(_text(value), _ANSWER_MARKER)  # NaN -> "nan"


def _whole_number(value: Any) -> float | None:
    if isinstance(value, (int, float)):
        return float(value)
    match = _NUMBER.fullmatch(_text(value))
    return float(match.group(0).replace(",", "")) if match else None


def _single_number(value: Any) -> float | None:
    if isinstance(value, (int, float)):
        return float(value)
    found = _NUMBER.findall(_text(value))
    return float(found[0].replace(",", "")) if len(found) == 1 else None


def as_bool(value: Any) -> bool:
    """``_as_bool``: bools as is, numbers by truth, true/1/yes/y and false/0/no/n/'' spellings, else ``bool()``
    (so NaN is True)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    text = str(value).strip().lower()
    if text in {"true", "1", "yes", "y"}:
        return True
    if text in {"false", "0", "no", "n", ""}:
        return False
    return bool(value)


def score_prediction(prediction: Any, answer: Any, is_clear: Any) -> float:
    """``score_prediction``: extract (again), then casefold text match or single-number match."""
    final = final_answer(prediction)
    target = _text(answer)
    target_number = _whole_number(target)
    if target_number is None:
        return float(final.casefold() == target.casefold())
    number = _single_number(final)
    if number is None:
        return 0.0
    if as_bool(is_clear):
        return float(number == target_number)
    if target_number == 0.0:
        return float(number == 0.0)
    return float(abs(number - target_number) / abs(target_number) <= 0.05)


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """``EvoChart.evaluate`` on the prediction workbook: the ``Overall`` row's ``acc``.

    Raises:
        InputError: no rows.
    """
    if not rows:
        raise InputError("no rows to score", field=KEY)
    data = records(prediction_workbook(rows, responses))
    scores: list[float] = []
    out = []
    for row in data:
        extracted = final_answer(row.get("prediction", ""))
        credit = score_prediction(extracted, row.get("answer", ""), row.get("is_clear", True))
        scores.append(credit)
        out.append(RowScore(index=str(row["index"]), extracted=extracted, score=credit,
                            detail={"final_answer": final_answer(extracted)}))
    hit = sum(scores)
    acc = hit / len(scores) * 100
    metrics: dict[str, float] = {"Overall": to_json_double(acc)}
    for field in ("chart_type", "attribute"):
        groups: dict[str, list[float]] = {}
        for row, credit in zip(data, scores):
            if field in row:
                groups.setdefault(str(row[field]), []).append(credit)
        for name, values in sorted(groups.items()):
            metrics[f"{field}:{name}"] = to_json_double(sum(values) / len(values) * 100)
    return SliceScore(
        benchmark=KEY,
        score=aggregate(int(hit), len(scores)),
        rows=len(data),
        records=tuple(out),
        metrics=metrics,
        counts={"hit": int(hit), "total": len(data)},
    )


def aggregate(hit: int, total: int) -> float:
    """The reported EvoChart score of ``hit`` correct rows out of ``total`` (float sum, to_json's 10 decimals)."""
    return to_json_double(math.fsum([1.0] * hit) / total * 100)


PROTOCOL = Protocol(
    key=KEY,
    upstream="maveryn/trace@rlvr:rlvr/evaluation/vlmevalkit_extensions/evochart.py",
    version="evochart-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="none",
    quirks=(
        "prompt: stripped question + '\\nPut the final answer inside \\boxed{}.'",
        "final-answer extraction runs twice (evaluate, then score_prediction)",
        "box -> first <answer> -> JSON 'answer' -> first 'answer' word's first line -> text; empty box skipped",
        "text gold: casefold equality only; numeric gold: exactly one number, exact if is_clear else within 5%",
        "a NaN is_clear is truthy (exact match)",
        "acc passes through DataFrame.to_json: rounded to 10 decimal places",
    ),
)
