"""ChartQAPro (``ChartQAPro_CoT``): TRACE's final-answer adapter, then VLMEvalKit's relaxed correctness.

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/chartqapro.py`` (``build_prompt`` with ``qa_type='CoT'``,
``get_scores``, ``report_primary_metric``), ``vlmeval/dataset/utils/chartqapro.py`` (``prompt_context``,
``fix_list_format``, ``parse_to_list``, ``evaluate_single_answer``, ``relaxed_correctness_chartqapro``,
``evaluate_predictions_chartqapro``) and ``maveryn/trace@rlvr:rlvr/evaluation/scripts/
run_official_vlmevalkit_saved_score.py`` (queue-column filter, ``_chartqapro_final_answer`` adapter
``chartqapro-official-final-answer-v2``, ``_primary_score``). No judge.

Quirks reproduced on purpose:
- the CoT templates keep the source indentation, the curly quotes and the stray ``. .``;
- the adapter needs the literal ``the answer is`` (``The final answer is 42`` stays unresolved and the raw
  response is scored); only the text up to the end of that line counts; one balanced markdown wrapper is peeled
  per pass (``**The answer is 42**`` gives ``42**``);
- more than one ``<answer>`` block leaves the row unresolved; an empty box gives unresolved;
- a marker that ends the response makes upstream raise ``IndexError`` and abort the slice (reproduced);
- the prediction passes through three workbook writes/reads (openpyxl re-save, adapter, scorer);
- ``always_use_exact_match`` is computed but never passed, so Fact Checking/Multi Choice also use the 5 %
  numeric tolerance / ANLS >= 0.5 path; only ``Year == 'YES'`` forces a case-insensitive exact match;
- list answers are compared index by index; extra or missing elements score 0 and the row gets the mean;
- the ``auto`` percent rule multiplies a reported value of at most 1 (i.e. Overall <= 1 %) by 100 again.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks._charts_text import anls_score
from trace_lib.benchmarks._math_workbook import prediction_workbook, records, reread
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError
from trace_lib.extraction.boxed import last_boxed_literal
from trace_lib.extraction.workbook import isna
from trace_lib.scoring.percent import scale_value

KEY = "chartqapro"
QUESTION_TYPES = ("Factoid", "Multi Choice", "Conversational", "Fact Checking", "Hypothetical")

# -- data and prompt -----------------------------------------------------------------------------------------


def load(path: Path) -> list[Row]:
    """The ``chartqapro.tsv`` rows (VLMEvalKit typing); columns used: question, answer (Python list literals),
    question_type, paragraph, year."""
    return load_vlmeval_tsv(path)


_INDENT = "\n" + " " * 12
_MULTI = (
    "If there are multiple final answers, put them in brackets using this format "
    "[\u2019Answer1\u2019, \u2019Answer2\u2019]."
)
_CLOSING = (
    'Remember to think step-by-step and format the final answer in a separate sentence like "The answer is',
    'X"',
)
_OPEN_ENDED = (
    "You need to think step-by-step, but your final answer should be a single word, number, or phrase. If",
    "the question is unanswerable based on the information in the provided image, your answer should be",
    "unanswerable. Do not generate units. But if numerical units such as million, m, billion, B, or K are",
    "required, use the exact notation shown in the chart.",
)
#: ``prompt_context(..., vqa_type='CoT')``: the lines before the question line, per question type.
_COT_LINES = {
    "Factoid": (
        "You are given a factoid question that you need to answer based on the provided image.",
        *_OPEN_ENDED, _MULTI + " .", *_CLOSING,
    ),
    "Multi Choice": (
        "You are given a question along with different possible answers. You need to select the correct answer",
        "from them based on the provided image.",
        "You need to think step-by-step, but your final answer should be one of the options letters only: a, b, c",
        "or d (just the letter itself without any additional text). If the question is unanswerable based on the",
        "information in the provided image, your answer should be unanswerable.",
        _MULTI + " .", *_CLOSING,
    ),
    "Conversational": (
        "You are given a multi-turn conversation, and your job is to answer the final question based on the",
        "conversation history and the information in the provided image.",
        *_OPEN_ENDED, _MULTI + " .", *_CLOSING,
    ),
    "Fact Checking": (
        "You are given a fact statement that you need to assess based on the information in the provided image.",
        "You need to think step-by-step, but your final answer should be either true or false (without any",
        "additional text). If the question is unanswerable based on the information in the provided image, your",
        "answer should be unanswerable.",
        _MULTI + " .", *_CLOSING,
    ),
    "Hypothetical": (
        "You are given a hypothetical question that you need to answer based on the provided image.",
        *_OPEN_ENDED, _MULTI, *_CLOSING,  # quirk: this template lacks the stray " ."
    ),
}


def prompt_context(question: list[Any], answer: list[Any], question_type: str) -> str:
    """``prompt_context(question, answer, question_type, 'CoT')``: the indented instruction block.

    Raises:
        InputError: an unknown question type (upstream asserts).
    """
    if question_type not in _COT_LINES:
        raise InputError("question_type outside ChartQAPro's five types (upstream asserts)",
                         field="question_type", expected=list(QUESTION_TYPES), found=question_type)
    if question_type == "Conversational":
        history = [x for qa in zip(question[:-1], answer[:-1]) for x in qa]
        last = f"Conversation: {history} Question: {question[-1]}"
    else:
        last = f"Question: {question[0]}"
    return "".join(_INDENT + line for line in (*_COT_LINES[question_type], last)) + _INDENT


def _literal(cell: Any, field: str, index: Any) -> Any:
    if not isinstance(cell, str):
        raise InputError("cell is not a Python literal string (upstream's ast.literal_eval raises)",
                         field=f"rows[{index}].{field}", found=repr(cell))
    try:
        return ast.literal_eval(cell)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise InputError(f"cell is not a Python literal ({exc.__class__.__name__})",
                         field=f"rows[{index}].{field}", found=cell[:80]) from None


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """``ChartQAPro.build_prompt`` (CoT): the one image, the paragraph (dropped when empty, as the generation
    client drops empty text parts), then the CoT instruction block."""
    images = materialize_images(row, image_dir)
    if len(images) != 1:
        raise InputError("ChartQAPro rows carry exactly one image (upstream asserts)",
                         field=f"rows[{row['index']}].image", found=len(images))
    question = _literal(row["question"], "question", row["index"])
    if not isinstance(question, list):
        raise InputError("question is not a list literal (upstream asserts)", field=f"rows[{row['index']}].question")
    answer = _literal(row["answer"], "answer", row["index"])
    paragraph = row.get("paragraph")
    paragraph_text = "" if isna(paragraph) else str(paragraph)  # NaN -> '' (then dropped by the client)
    items = [PromptItem("image", images[0])]
    if paragraph_text:
        items.append(PromptItem("text", paragraph_text))
    items.append(PromptItem("text", prompt_context(question, answer, row["question_type"])))
    return items


# -- TRACE prediction adapter (chartqapro-official-final-answer-v2) ---------------------------------------------
_FINAL_MARKER = re.compile(r"\bthe[ \t]+answer[ \t]+is\b[ \t]*:?[ \t]*", re.IGNORECASE)
_ANSWER_BLOCK = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.IGNORECASE | re.DOTALL)
_MARKDOWN = ("**", "__", "~~", "`", "*", "_")


class AdapterCrash(InputError):
    """Upstream's adapter raises here (``IndexError``) and the whole slice aborts."""


def final_sentence(text: str) -> str | None:
    """``_chartqapro_final_sentence``: the rest of the line after the last ``the answer is``, cleaned.

    Raises:
        AdapterCrash: the last marker ends the text (upstream's ``.splitlines()[0]`` raises IndexError).
    """
    matches = list(_FINAL_MARKER.finditer(text))
    if not matches:
        return None
    rest = text[matches[-1].end():].splitlines()
    if not rest:
        raise AdapterCrash("the response ends with 'the answer is'; upstream's ChartQAPro adapter raises "
                           "IndexError and the slice aborts", field="prediction")
    answer = rest[0].strip()
    if not answer:
        return None
    previous = None
    while answer and answer != previous:
        previous = answer
        answer = answer.strip().rstrip(".?!。！？").strip()
        for marker in _MARKDOWN:
            if answer.startswith(marker) and answer.endswith(marker) and len(answer) > 2 * len(marker):
                answer = answer[len(marker):-len(marker)].strip()
                break  # one wrapper per pass
    return answer or None


def final_answer(value: Any) -> str | None:
    """``_chartqapro_final_answer``: the adapted prediction, or None (unresolved: the raw cell is kept)."""
    text = str(value or "")  # quirk: NaN is truthy ("nan"); a 0 cell reads as ""
    blocks = list(_ANSWER_BLOCK.finditer(text))
    if blocks:
        if len(blocks) != 1:
            return None
        inner = blocks[0].group(1).strip()
        if not inner:
            return None
        boxed = last_boxed_literal(inner)
        if boxed is not None:
            return boxed or None
        marked = final_sentence(inner)
        return marked if marked is not None else inner
    return final_sentence(text)


# -- relaxed correctness ------------------------------------------------------------------------------------------
_LIST_BODY = re.compile(r"^\[(.*)\]$")
_BARE_ITEM = re.compile(r"(?<!['\w])(\w[^,]*?)(?!['\w])")


def fix_list_format(item: Any) -> Any:
    """Quote bare list elements and ``literal_eval`` the list; the input when that fails."""
    if not isinstance(item, str):
        return item
    match = _LIST_BODY.match(item.strip())
    if not match:
        return item
    corrected = _BARE_ITEM.sub(r"'\1'", match.group(1))
    try:
        return ast.literal_eval(f"[{corrected}]")
    except (SyntaxError, ValueError):
        return item


def parse_to_list(text: Any) -> list[str] | None:
    """A Python list literal as stripped strings, else None."""
    if not isinstance(text, str):
        return None
    try:
        parsed = ast.literal_eval(text)
    except Exception:  # noqa: BLE001 - upstream catches everything
        return None
    if isinstance(parsed, list):
        return [str(x).strip(" '") for x in parsed]
    return None


def _to_float(text: str) -> float | None:
    try:
        return float(text.strip().strip("%"))
    except ValueError:
        return None


def single_answer_score(target: str, prediction: str, max_relative_change: float = 0.05) -> float:
    """``evaluate_single_answer``: 5 % relative tolerance when both parse as numbers (``%`` stripped), else ANLS."""
    t = target.strip().strip("%").strip()
    p = prediction.strip().strip("%").strip()
    t_f, p_f = _to_float(t), _to_float(p)
    if t_f is not None and p_f is not None:
        if t_f == 0.0:
            return 1.0 if p_f == 0.0 else 0.0
        return 1.0 if abs(p_f - t_f) / abs(t_f) <= max_relative_change else 0.0
    return anls_score(p.lower(), [t.lower()], threshold=0.5)


def relaxed_correctness(target: str, prediction: str, year_flags: list[Any] | None) -> float:
    """``relaxed_correctness_chartqapro`` (``always_use_exact_match`` never set): mean element score."""
    t_list = parse_to_list(str(fix_list_format(target))) or [str(target)]
    p_list = parse_to_list(str(prediction)) or [str(prediction)]
    if year_flags is not None and len(year_flags) < len(t_list):
        year_flags = year_flags * len(t_list)
    scores: list[float] = []
    for idx in range(max(len(t_list), len(p_list))):
        if idx >= len(t_list) or idx >= len(p_list):
            scores.append(0.0)  # more or fewer elements than the gold list
            continue
        flag = year_flags[idx]  # type: ignore[index]
        if flag.upper() == "YES":
            scores.append(1.0 if t_list[idx].strip().lower() == p_list[idx].strip().lower() else 0.0)
        else:
            scores.append(single_answer_score(t_list[idx], p_list[idx]))
    return sum(scores) / len(scores) if scores else 0.0


def row_score(answer: list[Any], prediction: Any, question_type: Any, year: list[Any]) -> float:
    """``evaluate_predictions_chartqapro`` for one row (gold = the last answer; Conversational keeps the last
    Year flag)."""
    gt = answer[-1].strip(".").strip("\n")
    pred = str(prediction).strip(".").strip("\n")
    flags = year[-1:] if question_type == "Conversational" else year
    return relaxed_correctness(gt, pred, flags)


# -- scoring ------------------------------------------------------------------------------------------------------


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """Adapter + ``get_scores`` over the slice; the reported ``Overall Acc`` (percent).

    Raises:
        AdapterCrash: a response ends with ``the answer is`` (upstream aborts the slice).
        InputError: no rows, or an answer/year cell upstream cannot parse.
    """
    if not rows:
        raise InputError("no rows to score", field=KEY)
    table = prediction_workbook(rows, responses, resaved=True)
    raw = list(table["prediction"])
    adapted: list[Any] = []
    extracted: list[str | None] = []
    for index, cell in zip(table["index"], raw):
        try:
            value = final_answer(cell)
        except AdapterCrash as exc:
            raise AdapterCrash(exc.message, field=f"rows[{index}].prediction", hint=exc.hint) from None
        extracted.append(value)
        adapted.append(cell if value is None else value)
    scored_table = dict(table)
    scored_table["prediction"] = adapted
    scored_table["raw_prediction"] = raw
    data = records(reread(scored_table))
    scores: list[float] = []
    per_type: dict[str, list[float]] = {}
    out = []
    for row, value in zip(data, extracted):
        answer = _literal(row["answer"], "answer", row["index"])
        year = _literal(row["year"], "year", row["index"])
        try:
            credit = row_score(answer, row["prediction"], row["question_type"], year)
        except (AttributeError, IndexError, TypeError, KeyError) as exc:
            raise InputError(f"upstream's ChartQAPro scorer raises {exc.__class__.__name__} on this row ({exc})",
                             field=f"rows[{row['index']}]") from None
        scores.append(credit)
        per_type.setdefault(str(row["question_type"]), []).append(credit)
        adapter = "unresolved" if value is None else "extracted"
        out.append(RowScore(index=str(row["index"]), extracted=value, score=credit,
                            detail={"scored_prediction": row["prediction"], "adapter": adapter}))
    overall = sum(scores) / len(scores)
    metrics = {name: sum(v) / len(v) for name, v in per_type.items()}
    metrics["Overall"] = overall
    return SliceScore(
        benchmark=KEY,
        score=aggregate(overall),
        rows=len(data),
        records=tuple(out),
        metrics=metrics,
        counts={"total": len(data), "unresolved": sum(1 for v in extracted if v is None),
                "full_credit": sum(1 for s in scores if s == 1.0),
                "partial_credit": sum(1 for s in scores if 0 < s < 1)},
    )


def aggregate(overall: float) -> float:
    """``report_primary_metric`` (``Overall * 100``) then ``_primary_score``'s ``auto`` rule."""
    return scale_value(overall * 100, "auto")


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/chartqapro.py + vlmeval/dataset/utils/chartqapro.py + "
    "maveryn/trace@rlvr:rlvr/evaluation/scripts/run_official_vlmevalkit_saved_score.py (final-answer adapter v2)",
    version="chartqapro-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="none",
    quirks=(
        "CoT templates keep source indentation, curly quotes and the stray '. .' (Hypothetical lacks it)",
        "adapter needs the literal 'the answer is'; 'The final answer is 42' stays unresolved (raw text scored)",
        "adapter keeps the marker's line only and peels one balanced markdown wrapper per pass ('42**' survives)",
        "more than one <answer> block, or an empty box, leaves the row unresolved",
        "a response ending with 'the answer is' aborts the slice (upstream IndexError)",
        "predictions pass three workbook round trips (openpyxl re-save, adapter, scorer)",
        "always_use_exact_match is never passed: only Year=='YES' forces exact match",
        "list answers compared by position; extra/missing elements score 0; the row gets the mean",
        "the auto percent rule re-multiplies a reported value <= 1 by 100",
    ),
)
