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
from trace_lib.benchmarks._math_extract import (MC_HINT, direct_percent, judge_prompt, parse_choices, render_examples,
                                                score_slice)
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError
from trace_lib.extraction.choices import can_infer

KEY = "mathvision"


def load(path: Path) -> list[Row]:
    """The ``MathVision.tsv`` rows (VLMEvalKit typing); columns used: question, answer, choices, category."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """``ImageBaseDataset.build_prompt``: the image(s), then the TSV ``question`` verbatim."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", str(row["question"]))]


_HINT = "Hint: Please answer the question and provide the final answer at the end."
#: The hints above the five shared in-context examples (``build_mathv_gpt4_prompt``).
_HINTS = (_HINT, _HINT, _HINT, _HINT, MC_HINT)
_PREAMBLE = render_examples(_HINTS)


def build_judge_prompt(row: Row) -> str:
    """``build_mathv_gpt4_prompt``: examples, the question, ``Model respone: `` + prediction +
    ``Extracted answer:`` (no separator)."""
    return judge_prompt(_PREAMBLE, row)


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
    return score_slice(rows, responses, ctx, benchmark=KEY, post_check=post_check, judge_prompt=build_judge_prompt,
                       score_row=score_row, groups=lambda row: [row.get("category")], detail=lambda row: {},
                       aggregate=aggregate)


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
