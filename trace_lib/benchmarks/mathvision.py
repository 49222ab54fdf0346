"""MathVision (``MathVision``, test): official prefetch, else Qwen3-32B answer extraction; normalized equality.

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/mathv.py`` (``build_mathv_gpt4_prompt``, ``post_check``,
``is_equal``, ``MATH_V_acc``) as driven by ``maveryn/trace@rlvr:rlvr/evaluation/vlmevalkit_extensions/
batched_vlmevalkit_qwen3vl.py:run_mathv_local_judge`` and the direct-route judge of
``rlvr/evaluation/scripts/run_external_benchmark_score_queue.py``.

Pipeline: the prediction workbook row -> prefetch (``post_check(prefetch=True)``) -> otherwise one
temperature-0 judge call at 128 tokens (ladder only on empty output) -> judged workbook round trip ->
``post_check(prefetch=False)`` -> ``hit / rows * 100``, then the runner's ``auto`` percent rule (twice).

Quirks reproduced on purpose:
- multiple-choice prefetch returns ``can_infer``'s letter (or ``Z``) unchecked; the verbose ``answer is X`` rule
  reads ``the answer is an octagon`` as ``A``;
- free-form prefetch compares the *whole raw response* with the answer (``is_equal``), so long answers never
  prefetch; the prefetched ``res`` is that whole response;
- ``is_equal``: lower-case + strip, then Python ``eval`` (``2^3`` is XOR = 1, ``1/2`` = 0.5), then
  ``latex2sympy`` + ``eval(str(expr))``, where ``sqrt``/``pi``/symbols raise and count as unequal
  (``2 \\sqrt{3}`` vs ``2\\sqrt{3}`` is wrong);
- judge outputs go through the judged workbook (NA tokens -> NaN -> ``"nan"``; ``=...`` -> 0);
- the runner's ``auto`` percent rule multiplies an accuracy of at most 1 % by 100.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks._math_equal import is_equal
from trace_lib.benchmarks._math_extract import direct_percent, extract, judged_table, parse_choices, render_examples
from trace_lib.benchmarks._math_workbook import prediction_workbook, records
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError
from trace_lib.extraction.choices import can_infer
from trace_lib.extraction.workbook import isna

KEY = "mathvision"


def load(path: Path) -> list[Row]:
    """The ``MathVision.tsv`` rows (VLMEvalKit typing); columns used: question, answer, choices, category."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """``ImageBaseDataset.build_prompt``: the image(s), then the TSV ``question`` verbatim."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", str(row["question"]))]


_HINT = "Hint: Please answer the question and provide the final answer at the end."
_EXAMPLES = (
    (_HINT, "Which number is missing?", None, "The number missing in the sequence is 14.", "14"),
    (
        _HINT,
        "What is the fraction of females facing the camera?",
        None,
        "The fraction of females facing the camera is 0.6,\n"
        "which means that six out of ten females in the group are facing the camera.",
        "0.6",
    ),
    (
        _HINT,
        "How much money does Luca need to buy a sour apple candy and a butter-scotch candy? (Unit: $)",
        None,
        "Luca needs $1.45 to buy a sour apple candy and a butterscotch candy.",
        "1.45",
    ),
    (
        _HINT,
        "Between which two years does the line graph saw its maximum peak?",
        None,
        "The line graph saw its maximum peak between 2007 and 2008.",
        "[2007, 2008]",
    ),
    (
        "Hint: Please answer the question and provide the correct option letter, e.g., A, B, C, D, at the end.",
        "What fraction of the shape is blue?",
        "Choices: (A) 3/11 (B) 8/11 (C) 6/11 (D) 3/5",
        "The correct answer is (B) 8/11.",
        "B",
    ),
)
_PREAMBLE = render_examples(_EXAMPLES)


def build_judge_prompt(row: Row) -> str:
    """``build_mathv_gpt4_prompt``: examples, the question, ``Model respone: `` + prediction +
    ``Extracted answer:`` (no separator)."""
    question = row["question"]
    if not isinstance(question, str):
        raise TypeError(f"question is {type(question).__name__}, not text")
    return f"{_PREAMBLE}{question}\nModel respone: {row['prediction']}Extracted answer:"


def post_check(row: dict[str, Any], *, prefetch: bool) -> Any:
    """``mathv.post_check``: the prefetched answer (or False) when ``prefetch``; else whether ``res`` is right.

    ``eval(choices)`` failures other than ValueError propagate, as upstream's do.
    """
    res: Any = None
    ans = row["answer"]
    response = row["prediction"] if prefetch else row["res"]
    try:
        options = parse_choices(row["choices"])
        if len(options) > 0:
            ans = row["answer"]
            res = can_infer(response, {chr(65 + i): v for i, v in enumerate(options)})
            if prefetch:
                return res  # quirk: returned without checking it against the answer
        else:
            res = str(response)
            ans = str(ans)
    except ValueError:
        pass
    if is_equal(res, ans):
        return res if prefetch else True
    return False


def score_row(row: dict[str, Any]) -> bool:
    """``post_check(prefetch=False)`` on a judged row.

    Raises:
        InputError: the row makes upstream's ``MATH_V_acc`` raise (an unparsable ``choices`` cell).
    """
    try:
        return bool(post_check(row, prefetch=False))
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - upstream's MATH_V_acc raises here and the slice fails
        raise InputError(
            f"upstream's MATH_V_acc aborts on this row ({exc.__class__.__name__}: {exc})",
            field=f"rows[{row.get('index')}]",
        ) from None


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """``run_mathv_local_judge`` + ``MATH_V_acc`` over the slice: ``Overall`` accuracy in percent.

    Raises:
        JudgeError: a row needs the judge and ``ctx.judge`` is None, or the judge output stays empty.
        InputError: no rows, a row makes upstream's scorer abort, or latex2sympy2_extended is missing.
    """
    if not rows:
        raise InputError("no rows to score", field=KEY)
    table = prediction_workbook(rows, responses)
    extracted = extract(records(table), prefetch=lambda r: post_check(r, prefetch=True),
                        judge_prompt=build_judge_prompt, judge=ctx.judge, benchmark=KEY)
    judged = judged_table(table, extracted, benchmark=KEY)
    hits = [score_row(row) for row in judged]
    hit = sum(hits)
    acc = hit / len(judged) * 100
    metrics: dict[str, float] = {"Overall": acc}
    tot: dict[str, int] = {}
    good: dict[str, int] = {}
    for row, ok in zip(judged, hits):
        key = str(row.get("category"))
        tot[key] = tot.get(key, 0) + 1
        good[key] = good.get(key, 0) + int(ok)
    metrics.update({name: good[name] / tot[name] * 100 for name in tot if name != "Overall"})
    out = [
        RowScore(
            index=str(row["index"]),
            extracted=None if isna(row["res"]) else row["res"],
            score=float(ok),
            judge_calls=calls,
            detail={"log": log, "res": row["res"]},
        )
        for row, ok, log, calls in zip(judged, hits, extracted.log, extracted.judge_calls)
    ]
    prefetched = sum(1 for log in extracted.log if log == "Prefetch succeed")
    return SliceScore(
        benchmark=KEY,
        score=aggregate(hit, len(judged)),
        rows=len(judged),
        records=tuple(out),
        metrics=metrics,
        counts={"hit": hit, "total": len(judged), "prefetched": prefetched, "judged": len(judged) - prefetched},
    )


def aggregate(hit: int, total: int) -> float:
    """The reported MathVision score of ``hit`` correct rows out of ``total``."""
    return direct_percent(hit / total * 100)


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/mathv.py + "
    "maveryn/trace@rlvr:rlvr/evaluation/vlmevalkit_extensions/batched_vlmevalkit_qwen3vl.py:run_mathv_local_judge",
    version="mathvision-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="fallback",
    quirks=(
        "multiple-choice prefetch returns can_infer's letter (or Z) unchecked",
        "can_infer's verbose rule reads 'the answer is an octagon' as A",
        "free-form prefetch compares the whole raw response with the answer; res is that whole response",
        "is_equal: Python eval semantics (2^3 is XOR, 1/2 is 0.5) before latex2sympy",
        "is_equal: eval(str(sympy)) raises on sqrt/pi/symbols, so equivalent symbolic forms are unequal",
        "judge output round-trips through the judged workbook (NA tokens -> 'nan', '=...' -> 0)",
        "the runner's auto percent rule multiplies an accuracy <= 1% by 100",
    ),
)
