"""MathVerse (testmini, Vision Only, CoT prompt): Qwen3-32B extraction on every row, prefetch, binary judge.

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/mathverse.py`` (extract and score prompts,
``post_check_score``, ``MathVerse_acc``) and ``vlmeval/dataset/image_vqa.py:MathVerse.build_prompt``, as driven by
``maveryn/trace@rlvr:rlvr/evaluation/vlmevalkit_extensions/batched_vlmevalkit_qwen3vl.py:run_mathverse_local_judge``,
the direct-route judge and ``_normalize_mathverse_binary_judgement_summary`` /
``_parse_mathverse_score_output`` of ``rlvr/evaluation/scripts/run_external_benchmark_score_queue.py``.

Quirks reproduced on purpose:
- the prompt is ``query_cot`` (the alias contains ``cot``);
- extraction: one temperature-0 call at 128 tokens per row, ladder only on empty output, a literal ``None`` kept;
- prefetch is exact, case-sensitive equality of the stripped answer and extraction (``c`` vs ``C`` goes to the
  judge);
- score judge: ``max_tokens`` 16 (sent as 128), ladder on empty/truncated output, and a 5-attempt schedule at
  temperatures 0, 0.5, 1.0, 1.5, 2.0 while the output is not a binary decision;
- the decision is the README normalization: the whole output ``0``/``1``, else every line-initial
  ``Judgement: X`` variant (case-sensitive spelling, digit followed by whitespace or end), all agreeing;
- the judge text is read back through the judged workbook before it is parsed;
- the reported ``Overall`` passes through ``DataFrame.to_json``: rounded to 10 decimal places.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks._math_extract import EXTRACT_MAX_TOKENS, nonempty
from trace_lib.benchmarks._math_workbook import prediction_workbook, records, to_json_double
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError, JudgeError
from trace_lib.extraction.workbook import isna
from trace_lib.extraction.workbook import roundtrip_column
from trace_lib.scoring.judge import complete_with_ladder, retry_token_limits

KEY = "mathverse"
#: ``run_mathverse_local_judge``: ``max_tokens=16`` for the score judge (the client raises it to 128).
SCORE_MAX_TOKENS = 16
#: ``persistent_text_judge``'s score schedule: attempt k runs at temperature ``k * 0.5``.
SCORE_TEMPERATURES = (0.0, 0.5, 1.0, 1.5, 2.0)
PREFETCH_LOG = "Prefetch succeed"
JUDGE_LOG_PREFIX = "Judge output:"


def load(path: Path) -> list[Row]:
    """The ``MathVerse_MINIVOnly.tsv`` rows (VLMEvalKit typing); columns used: query_cot, question_for_eval,
    answer, metadata, problem_version."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """``MathVerse.build_prompt`` for a ``cot`` alias: the image(s), then ``query_cot``."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", str(row["query_cot"]))]


# -- judge prompts ------------------------------------------------------------------------------------------------
_EXTRACT_TASK = (
    "\nI am providing you a response from a model to a math problem, termed 'Model Response'. You should extract "
    "the answer from the response as 'Extracted Answer'. Directly output the extracted answer with no "
    "explanation.\n\n\n"
)
_EXTRACT_EXAMPLES = (
    "\n1.\nModel response: 'Rounded to two decimal places, the perimeter of the sector is approximately:\n\n"
    "(-2, 1)'\nExtracted Answer: (-2, 1)\n",
    "\n2.\nModel response: 'at those points.\n\nTherefore, the correct option that represents the meaning of the "
    "intersection points of the graphs is:\n\nD. They give the solutions to the equation $f(t)=g(t)$.\",'\n"
    "Extracted Answer: D\n",
    "\n3.\nModel response: ' at 1 (there's a closed circle at y = 1), the range in interval notation is "
    "\\((-4, 1]\\).\n\nFinal values:\nDomain: \\((-3, 3]\\)\nRange: \\((-4, 1]\\)'\n"
    "Extracted Answer: Domain: \\((-3, 3]\\)\nRange: \\((-4, 1]\\)\n",
    "\n4.\nModel response: 'As it stands, I cannot provide the correct option letter because there isn't enough "
    "information to solve for 'y'.'\nExtracted Answer: null\n",
    "\n5.\nModel response: 'Given that AB = 17.6 meters, we can now substitute into the equation:\n\n"
    "d = 17.6 / cos(38\u00b0)\n\nTherefore, to one decimal place, the distance d between Ned and Bart is "
    "approximately 22.3 meters.'\nExtracted answer: 22.3\n",
    "\n6.\nModel response:  have all the coefficients for the quadratic function:\n"
    "\\( f(x) = ax^2 + bx + c \\)\n\\( f(x) = -1x^2 - 2x + 1 \\)\n\nTherefore, the equation for the graphed "
    "function \\( f \\) is:\n\\( f(x) = -x^2 - 2x + 1 \\)\"'\nExtracted answer: f(x) = -x^2 - 2x + 1\n",
)
_EXTRACT_DEMO = _EXTRACT_TASK + "".join(example + "\n\n" for example in _EXTRACT_EXAMPLES)

_SCORE_TASK = (
    "\nBelow are two answers to a math question. Question is [Question], [Standard Answer] is the standard answer "
    "to the question, and [Model_answer] is the answer extracted from a model's output to this question.  "
    "Determine whether these two answers are consistent.\n"
    "Please note that only when the [Model_answer] completely matches the [Standard Answer] means they are "
    "consistent. For non-multiple-choice questions, if the meaning is expressed in the same way, it is also "
    "considered consistent, for example, 0.5m and 50cm.\n"
    "If they are consistent, Judement is 1; if they are different, Judement is 0.\n\n\n"
)
_CIRCLE_QUESTION = (
    "As shown in the figure, circle O has a radius 1.0, if angle BAC = 60.0, then the length of BC is ()\n"
    "Choices:\nA:2\nB:2\u221a{{3}}\nC:\u221a{{3}}\nD:2\u221a{{2}}"
)
_SCORE_EXAMPLES = (
    ("Write the set of numbers represented on the number line in interval notation.", "(-2,1]",
     "Extracted Answer: \\((-2, 1)\\)"),
    (_CIRCLE_QUESTION, "C", "B:2\u221a{{3}}"),
    ("Find the domain and range of the function f using interval notation.", "domain: [-4, 0) and range: (-3, 1]",
     "Range: \\((-4, 1]\\)"),
    (_CIRCLE_QUESTION, "C", "null"),
)
_SCORE_DEMO = _SCORE_TASK + "".join(
    f"\n[Question]: {q}\n[Standard Answer]: {a}\n[Model_answer] : {m}\nJudgement: 0\n\n\n"
    for q, a, m in _SCORE_EXAMPLES
)


def build_extract_prompt(row: Row) -> str:
    """``build_mathverse_gpt4_extract_prompt``: six examples, then ``7.`` with the quoted prediction."""
    return f"{_EXTRACT_DEMO}7.\nModel response: '{row['prediction']}'\nExtracted Answer: "


def build_score_prompt(row: Row) -> str:
    """``build_mathverse_gpt4_score_prompt``: four examples, then the indented question/answer/extract block."""
    return (
        f"{_SCORE_DEMO}\n    [Question]: {row['question_for_eval']}\n    [Standard Answer]: {row['answer']}\n"
        f"    [Model_answer] : {row['extract']}\n    Judgement:"
    )


# -- decisions ----------------------------------------------------------------------------------------------------
_DECISION = re.compile(
    r"(?m)^[ \t]*(?:"
    r"\*\*Judgement[ \t]*:[ \t]*([01])\*\*"
    r"|\*\*Judgement\*\*[ \t]*:[ \t]*(?:\*\*([01])\*\*|([01]))"
    r"|Judgement[ \t]*:[ \t]*(?:\*\*([01])\*\*|([01]))"
    r")(?=$|[ \t\r\n])"
)


def parse_decision(output: Any) -> int | None:
    """``_parse_mathverse_score_output``: 0/1, or None when the output is not one agreed binary decision."""
    text = str(output or "").strip()
    if text in {"0", "1"}:
        return int(text)
    decisions = {int(next(g for g in m.groups() if g is not None)) for m in _DECISION.finditer(text)}
    return decisions.pop() if len(decisions) == 1 else None


def prefetch_match(answer: Any, extract: str) -> bool:
    """``post_check_score(prefetch=True)``: the stripped answer equals the stripped extraction (and is not empty)."""
    response = str(extract).strip()
    return str(answer).strip() == response and bool(response)


# -- scoring ------------------------------------------------------------------------------------------------------


def _metadata(cell: Any, index: Any) -> dict[str, Any]:
    """``MathVerse_acc``'s metadata parse (single quotes -> double quotes, then JSON)."""
    if not isinstance(cell, str):
        raise InputError("metadata is not text; upstream's MathVerse_acc raises", field=f"rows[{index}].metadata")
    try:
        value = json.loads(cell.replace("'", '"'))
    except ValueError:
        raise InputError("metadata is not JSON after quote replacement; upstream's MathVerse_acc raises",
                         field=f"rows[{index}].metadata", found=cell[:80]) from None
    if not isinstance(value, dict) or "subject" not in value or "subfield" not in value:
        raise InputError("metadata lacks subject/subfield; upstream's MathVerse_acc raises",
                         field=f"rows[{index}].metadata", found=cell[:80])
    return value


def _score_judge(ctx: ScoringContext, prompts: list[str]) -> tuple[list[str], list[int]]:
    """The score judge's outputs and request counts: ladder per attempt, temperature schedule across attempts.

    Raises:
        JudgeError: an output stays empty/truncated through the ladder, or is no decision after 5 attempts.
    """
    outputs = [""] * len(prompts)
    calls = [0] * len(prompts)
    pending = list(range(len(prompts)))
    ladder = retry_token_limits(SCORE_MAX_TOKENS)
    for temperature in SCORE_TEMPERATURES:
        if not pending:
            break
        replies = complete_with_ladder(
            ctx.judge,  # type: ignore[arg-type]
            [prompts[i] for i in pending],
            max_tokens=SCORE_MAX_TOKENS,
            temperature=temperature,
            top_p=1.0,
            retry_on_length=True,
            validator=nonempty,
        )
        still = []
        for i, reply in zip(pending, replies):
            outputs[i] = str(reply.text).strip()
            calls[i] += ladder.index(reply.max_tokens) + 1 if reply.max_tokens in ladder else 1
            if parse_decision(outputs[i]) is None:
                still.append(i)
        pending = still
    if pending:
        raise JudgeError(
            f"{KEY}: score judge produced no 0/1 decision after {len(SCORE_TEMPERATURES)} attempts for "
            f"{len(pending)} row(s)", found=outputs[pending[0]][:80], hint="upstream fails the slice here",
        )
    return outputs, calls


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """``run_mathverse_local_judge`` + the binary-decision normalization + ``MathVerse_acc``: ``Overall``.

    Raises:
        JudgeError: no judge, or the judge keeps answering outside its contract.
        InputError: no rows, metadata upstream cannot parse, or more than one ``problem_version``.
    """
    if not rows:
        raise InputError("no rows to score", field=KEY)
    if ctx.judge is None:
        raise JudgeError(f"{KEY} needs the Qwen3-32B judge on every row and none is configured",
                         field="--judge-url", hint="serve Qwen3-32B and pass --judge-url (TRACE_JUDGE_URL)")
    table = prediction_workbook(rows, responses)
    data = records(table)
    ladder = retry_token_limits(EXTRACT_MAX_TOKENS)
    extract_replies = complete_with_ladder(
        ctx.judge, [build_extract_prompt(row) for row in data], max_tokens=EXTRACT_MAX_TOKENS, temperature=0.0,
        top_p=1.0, retry_on_length=False, validator=nonempty,
    )
    calls = [ladder.index(r.max_tokens) + 1 if r.max_tokens in ladder else 1 for r in extract_replies]
    for row, reply in zip(data, extract_replies):
        row["extract"] = str(reply.text).strip()
    prefetched = [prefetch_match(row["answer"], row["extract"]) for row in data]
    pending = [i for i, hit in enumerate(prefetched) if not hit]
    outputs, score_calls = _score_judge(ctx, [build_score_prompt(data[i]) for i in pending])
    log_score = [PREFETCH_LOG] * len(data)
    for i, output, n in zip(pending, outputs, score_calls):
        log_score[i] = f"{JUDGE_LOG_PREFIX} {output}"
        calls[i] += n
    # the normalization re-reads the judged workbook with keep_default_na=False before parsing
    extracts = roundtrip_column([row["extract"] for row in data], keep_default_na=False)
    empty = [i for i, cell in enumerate(extracts) if isna(cell) or not str(cell).strip()]
    if empty:
        raise JudgeError(f"{KEY} judge produced {len(empty)} empty extractions",
                         field=f"rows[{data[empty[0]]['index']}]", hint="upstream fails the slice here")
    logs = roundtrip_column(log_score, keep_default_na=False)
    decisions: list[bool] = []
    for i, log in enumerate(logs):
        log = str(log)
        if log == PREFETCH_LOG:
            decisions.append(True)
            continue
        raw = log[len(JUDGE_LOG_PREFIX):].strip() if log.startswith(JUDGE_LOG_PREFIX) else ""
        decision = parse_decision(raw)
        if decision is None:
            raise JudgeError(f"{KEY} judge decision malformed after the workbook round trip",
                             field=f"rows[{data[i]['index']}]", found=raw[:80], hint="upstream fails the slice here")
        decisions.append(decision == 1)
    versions = {str(row.get("problem_version")) for row in data}
    if len(versions) != 1:
        raise InputError("more than one problem_version: upstream reports the first of a set-ordered table",
                         field="problem_version", found=sorted(versions))
    meta = [_metadata(row.get("metadata"), row["index"]) for row in data]
    hit = sum(decisions)
    overall = hit / len(decisions) * 100
    metrics: dict[str, float] = {"Overall": to_json_double(overall)}
    for field in ("subject", "subfield"):
        for name in sorted({str(m[field]) for m in meta}):
            picked = [d for d, m in zip(decisions, meta) if str(m[field]) == name]
            metrics[f"{field}:{name}"] = to_json_double(sum(picked) / len(picked) * 100)
    out = [
        RowScore(
            index=str(row["index"]),
            extracted=row["extract"],
            score=float(ok),
            judge_calls=n,
            detail={"log_score": log, "prefetch": pre},
        )
        for row, ok, n, log, pre in zip(data, decisions, calls, log_score, prefetched)
    ]
    return SliceScore(
        benchmark=KEY,
        score=aggregate(hit, len(decisions)),
        rows=len(data),
        records=tuple(out),
        metrics=metrics,
        counts={"hit": hit, "total": len(data), "prefetched": sum(prefetched), "judged": len(pending)},
    )


def aggregate(hit: int, total: int) -> float:
    """The reported MathVerse score of ``hit`` correct rows out of ``total`` (to_json's 10 decimals)."""
    return to_json_double(hit / total * 100)


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/mathverse.py + "
    "maveryn/trace@rlvr:rlvr/evaluation/scripts/run_external_benchmark_score_queue.py (mathverse route)",
    version="mathverse-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="always",
    quirks=(
        "prompt is query_cot because the alias contains 'cot'",
        "extraction: one temperature-0 call at 128 tokens, ladder only on empty output; literal 'None' kept",
        "prefetch is exact, case-sensitive equality of stripped answer and extraction",
        "score judge: max_tokens 16 sent as 128, ladder on empty/truncated output, temperatures 0..2.0 by 0.5",
        "decision: whole output 0/1, else all line-initial 'Judgement: X' variants agreeing (README normalization)",
        "the judge text is parsed after the judged-workbook round trip",
        "Overall passes through DataFrame.to_json: rounded to 10 decimal places",
    ),
)
