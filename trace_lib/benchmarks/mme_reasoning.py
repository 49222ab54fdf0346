"""MME-Reasoning: Qwen3-32B extraction on every row, official checkers, Qwen3-32B correctness for open answers.

Mirrors TRACE's dedicated scorer ``maveryn/trace@rlvr:rlvr/evaluation/scripts/run_mme_reasoning_eval.py``
(``_mme_preflight_failures``, ``_ensure_eval_prompt_function``, ``_run_score_impl``, ``_mme_reasoning_acc``) with the
prompts and functions of ``VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/mme_reasoning.py``; the generation prompt is
``MMEReasoning.build_prompt`` (image(s), then the question verbatim).

Quirks reproduced on purpose:
- extraction: temperatures 0..2, 1024 tokens first then 2048; a ``length`` finish or an invalid extraction is
  retried at the next temperature; choice extractions normalised to ``A``/``A,C`` (``None`` -> never correct);
- JSON extractions must parse, directly or from the first fenced block that matches;
- open rows: the judge must answer exactly ``0``/``1`` (16 tokens -> 128, ladder to 1024 on empty or truncated);
- choice rows: set equality of comma-split labels; structured rows: the official checker must return a bool;
- the extraction prompt shows the workbook cells (a missing prediction reads ``None``);
- any row still unresolved, a checker exception or a non-bool result fails the slice (never a silent zero).
"""

from __future__ import annotations

import ast
import json
import math
import operator
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks._mme_extraction import API_FAILURE, literal_eval_quietly, validate_extraction
from trace_lib.benchmarks._mme_functions import FUNCTIONS, NEEDS_SPECIAL_INFO
from trace_lib.benchmarks._mme_prompts import EXTRACTION_PROMPTS, OPEN_EVAL_PROMPT
from trace_lib.benchmarks._puzzle_judge import check_judged_slice, is_truncated, run_temperature_schedule
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError, JudgeError
from trace_lib.extraction.workbook import isna, roundtrip_rows
from trace_lib.scoring.judge import JudgeReply

KEY = "mme_reasoning"
#: ``--extract-max-tokens`` default; later temperature attempts ask for ``max(N, min(2N, 2048))``.
EXTRACT_MAX_TOKENS = 1024
#: ``--score-max-tokens`` default for the open-answer judgement (lifted to 128 by the client).
SCORE_MAX_TOKENS = 16
CAPABILITIES = ("planning and exploring", "calculation", "spatial-temporal", "casual chaining analysis",
                "pattern analysis")
REASONING_TYPES = ("inductive", "deductive", "abductive")
_COLUMNS = ("question", "answer", "question_type", "function_id", "prompt_id", "special_info", "capability",
            "reasoning_type")


def load(path: Path) -> list[Row]:
    """The MME-Reasoning TSV rows (``question``, ``answer``, ``question_type``, ``function_id``, ``prompt_id``, ...)."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """Every image, then the question verbatim (``MMEReasoning.build_prompt``)."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", row["question"])]


def _clean(value: Any) -> Any:
    """NaN -> None, as ``read_excel(...).replace({nan: None})`` leaves the cells."""
    return None if isna(value) else value


def route(cell: dict[str, Any]) -> tuple[str, str]:
    """``_ensure_eval_prompt_function``: (prompt id, function id) for one workbook row.

    Raises:
        InputError: a question type that needs a ``function_id``, or a ``function_id`` without ``prompt_id``.
    """
    prompt_id, function_id = _clean(cell.get("prompt_id")), _clean(cell.get("function_id"))
    if function_id is None:
        question_type = str(cell.get("question_type", "")).lower()
        if question_type == "choice":
            return "choice_prompt", "choice_function"
        if question_type == "open":
            return "open_question_prompt", "open_function"
        raise InputError("question type requires function_id", field="question_type", found=cell.get("question_type"))
    if prompt_id is None:
        raise InputError("function_id without prompt_id", field="prompt_id", found=function_id)
    return str(prompt_id), str(function_id)


def build_extraction_prompt(cell: dict[str, Any], prompt_id: str) -> str:
    """The official extraction prompt filled with the workbook's question and raw prediction."""
    if prompt_id not in EXTRACTION_PROMPTS:
        raise InputError("unknown prompt_id", field="prompt_id", expected=sorted(EXTRACTION_PROMPTS), found=prompt_id)
    return EXTRACTION_PROMPTS[prompt_id].format(question=cell["question"], response=cell["prediction"])


def is_open_row(cell: dict[str, Any]) -> bool:
    """Rows whose correctness the judge decides: open questions without a checker, or ``open_function``."""
    function_id = _clean(cell.get("function_id"))
    return (str(cell.get("question_type")).lower() == "open" and function_id is None) or function_id == "open_function"


def _literal(value: Any, field: str) -> Any:
    """``_safe_literal_eval``: None stays None, non-text as is, text as a Python literal (arithmetic allowed)."""
    if value is None:
        return None
    if not isinstance(value, str):
        return value
    try:
        return literal_eval_quietly(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    try:
        return _restricted_eval(ast.parse(value, mode="eval").body)
    except (ValueError, SyntaxError, TypeError, ZeroDivisionError, OverflowError, RecursionError):
        raise InputError("not a Python literal", field=field, found=value[:80]) from None


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.USub: operator.neg, ast.UAdd: operator.pos}


def _restricted_eval(node: ast.AST) -> Any:
    """``eval(value, {"__builtins__": {}}, {})`` for containers of literals and + - * / arithmetic only."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_restricted_eval(e) for e in node.elts]
        return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_restricted_eval(k): _restricted_eval(v) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_restricted_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_restricted_eval(node.left), _restricted_eval(node.right))
    raise ValueError(f"unsupported expression {type(node).__name__}")


def check_row(cell: dict[str, Any], res: str, index: str) -> bool:
    """The official checker's verdict for a non-open row.

    Raises:
        InputError: the checker raised, returned a non-bool, or the row lacks what it needs (upstream fails the job).
    """
    function_id = _clean(cell.get("function_id"))
    where = f"rows[{index}]"
    if API_FAILURE in str(res):
        raise InputError("extracted response contains the API failure sentinel", field=where)
    if function_id is None:
        if str(cell.get("question_type")).lower() != "choice":
            raise InputError("unexpected non-choice deterministic row", field=where, found=cell.get("question_type"))
        function_id = "choice_function"
    function = FUNCTIONS.get(str(function_id))
    if function is None:
        raise InputError("unknown official function_id", field=f"{where}.function_id", found=function_id)
    try:
        if function_id in ("open_function", "choice_function"):
            verdict = function(str(res), _clean(cell.get("answer")))
        else:
            response = str(res) if function_id == "judge_24points_function" else json.loads(str(res))
            answer = _literal(_clean(cell.get("answer")), f"{where}.answer")
            if function_id in NEEDS_SPECIAL_INFO:
                raw = _clean(cell.get("special_info"))
                if raw is None:
                    raise InputError(f"official evaluator {function_id} requires special_info", field=where)
                verdict = function(response, answer, _literal(raw, f"{where}.special_info"))
            else:
                verdict = function(response, answer)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - upstream turns any checker exception into a failed slice
        raise InputError(f"official evaluator {function_id} raised {type(exc).__name__}: {str(exc)[:120]}",
                         field=where, hint="upstream fails the MME-Reasoning slice on this row") from None
    if type(verdict) is not bool:
        raise InputError(f"official evaluator {function_id} returned {type(verdict).__name__}, not bool", field=where)
    return verdict


def _extract_budget(attempt: int) -> int:
    """1024 tokens on the first attempt, ``max(N, min(2N, 2048))`` on later ones."""
    return EXTRACT_MAX_TOKENS if attempt == 0 else max(EXTRACT_MAX_TOKENS, min(EXTRACT_MAX_TOKENS * 2, 2048))


def _mean_percent(scores: Sequence[bool]) -> float:
    return sum(scores) / len(scores) * 100 if scores else math.nan


def aggregate(hits: Sequence[int]) -> float:
    """The reported ``accuracy``: ``Overall = mean(score) * 100`` over all rows (bool scores)."""
    return float(_mean_percent([bool(h) for h in hits]))


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """MME-Reasoning ``accuracy`` (``Overall``), in percent.

    Raises:
        JudgeError: no judge, or extraction/open judgement still invalid after five temperatures.
        InputError: empty slice, duplicate indices, an API-failure response, or an official checker failure.
    """
    check_judged_slice(rows, responses, ctx.judge, benchmark=KEY, name="MME-Reasoning")
    table = [{k: _clean(v) for k, v in cell.items()} for cell in roundtrip_rows(rows, responses, _COLUMNS)]
    indices = [str(row["index"]) for row in rows]
    duplicates = sorted({i for i in indices if indices.count(i) > 1}) if len(set(indices)) != len(indices) else []
    if duplicates:
        raise InputError("source indices must be unique", field="index", found=duplicates[:5])
    failed = [i for i, cell in zip(indices, table) if API_FAILURE in str(cell["prediction"] or "")]
    if failed:
        raise InputError("generation failed for some rows", field=f"rows {failed[:5]}", found=API_FAILURE)

    routes = {}
    for index, cell in zip(indices, table):
        try:
            routes[index] = route(cell)
        except InputError as exc:
            raise InputError(exc.message, field=f"rows[{index}].{exc.field}", found=exc.found) from None
    prompts = {index: build_extraction_prompt(cell, routes[index][0]) for index, cell in zip(indices, table)}
    kept: dict[str, str] = {}

    def accept_extraction(key: Any, reply: JudgeReply) -> bool:
        ok, value = validate_extraction(routes[key][0], reply.text)
        if ok and not is_truncated(reply):
            kept[key] = value
            return True
        return False

    extraction = run_temperature_schedule(ctx.judge, prompts, accept=accept_extraction, max_tokens=_extract_budget)
    if extraction.unresolved:
        first = sorted(extraction.unresolved)[:10]
        raise JudgeError(f"MME-Reasoning judge failed to produce parseable extractions for "
                         f"{len(extraction.unresolved)} rows", field=f"rows {first}",
                         found=repr(extraction.unresolved[first[0]].text[:80]))

    open_prompts = {}
    for index, cell in zip(indices, table):
        if is_open_row(cell):
            if API_FAILURE in kept[index]:
                raise InputError("open-answer extraction is invalid", field=f"rows[{index}]", found=kept[index][:80])
            open_prompts[index] = OPEN_EVAL_PROMPT.format(question=cell["question"], answer=cell["answer"],
                                                          response=kept[index])

    def accept_judgement(key: Any, reply: JudgeReply) -> bool:
        return reply.text in ("0", "1") and not is_truncated(reply)

    judged = run_temperature_schedule(ctx.judge, open_prompts, accept=accept_judgement,
                                      max_tokens=lambda attempt: SCORE_MAX_TOKENS)
    if judged.unresolved:
        first = sorted(judged.unresolved)[:10]
        raise JudgeError(f"MME-Reasoning judge failed to produce binary decisions for {len(judged.unresolved)} "
                         "open-answer rows", field=f"rows {first}", found=repr(judged.unresolved[first[0]].text[:80]))

    records, verdicts = [], []
    for index, cell in zip(indices, table):
        calls = extraction.requests[index] + judged.requests.get(index, 0)
        if index in judged.accepted:
            verdict = judged.accepted[index][0].text == "1"
            method = "open_judgement"
        else:
            verdict = check_row(cell, kept[index], index)
            method = str(_clean(cell.get("function_id")) or "choice_function")
        verdicts.append(verdict)
        records.append(RowScore(index, kept[index], float(verdict), judge_calls=calls,
                                detail={"method": method, "extraction_attempt": extraction.accepted[index][1]}))
    metrics = {"Overall": _mean_percent(verdicts)}
    for name, column in [*((c, "capability") for c in CAPABILITIES), *((t, "reasoning_type") for t in REASONING_TYPES)]:
        subset = [v for v, cell in zip(verdicts, table) if name in str(cell.get(column))]
        metrics[name] = _mean_percent(subset)
    return SliceScore(
        benchmark=KEY,
        score=aggregate(verdicts),
        rows=len(rows),
        records=tuple(records),
        metrics={k: v for k, v in metrics.items() if not math.isnan(v)},
        counts={"correct": sum(verdicts), "total": len(verdicts), "open_rows": len(open_prompts),
                "extraction_retries": sum(1 for _, a in extraction.accepted.values() if a > 0)},
    )


PROTOCOL = Protocol(
    key=KEY,
    upstream="maveryn/trace@rlvr:rlvr/evaluation/scripts/run_mme_reasoning_eval.py + "
             "VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/mme_reasoning.py",
    version="mme_reasoning-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="always",
    quirks=(
        "extraction: temperatures 0,0.5,1,1.5,2; 1024 then 2048 tokens; length finish or invalid -> next temperature",
        "choice extraction normalised to 'A'/'A,C'; 'None'/'?' -> __MME_NO_CHOICE__; conflicting labels kept raw",
        "JSON extraction must parse directly or from the first matching ``` fence",
        "open rows: judgement must be exactly '0'/'1' (16 -> 128 tokens, empty/length re-asked up to 1024)",
        "choice rows: set equality of comma-split labels (order free); structured rows: official checker, bool only",
        "workbook cells shown to the judge (missing prediction -> 'None'); Overall = mean(bool) x 100",
        "unresolved extraction/judgement, checker exception or non-bool result fails the slice",
    ),
)
