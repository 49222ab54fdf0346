"""MathVista (testmini, ``MathVista_MINI``): official prefetch, else Qwen3-32B answer extraction; typed exact match.

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/mathvista.py`` (``build_mathvista_gpt4_prompt``,
``post_check``, ``MathVista_acc``) as driven by ``maveryn/trace@rlvr:rlvr/evaluation/vlmevalkit_extensions/
batched_vlmevalkit_qwen3vl.py:run_mathvista_local_judge`` and the direct-route judge of
``rlvr/evaluation/scripts/run_external_benchmark_score_queue.py``.

Pipeline: the prediction workbook row -> prefetch (``post_check(prefetch=True)``) -> otherwise one
temperature-0 judge call at 128 tokens (ladder only on empty output) -> judged workbook round trip ->
``post_check(prefetch=False)`` per row -> ``hit / rows * 100``, then the runner's ``auto`` percent rule (twice).

Quirks reproduced on purpose:
- multiple-choice prefetch returns ``can_infer``'s letter without checking it (a wrong letter, or ``Z``, is final);
- free-form prefetch needs ``int(prediction)``/``float(prediction)`` of the raw response to equal the answer;
- a prefetched 0 (``"0"`` answered for gold 0) is falsy, so the row goes to the judge anyway;
- ``integer`` rows compare ``int(res)``: ``14.0``, ``1,000`` and ``14 apples`` are wrong; ``float`` rows compare
  ``float(res)`` exactly;
- ``list`` (and any other non-MC type) rows are always wrong: upstream compares ``str(None)`` to the answer;
- the judge prompt has ``Model respone: `` (sic) and no separator before ``Extracted answer:``;
- judge outputs go through the judged workbook (NA tokens -> NaN -> ``"nan"``; ``=...`` -> 0);
- the runner's ``auto`` percent rule multiplies an accuracy of at most 1 % by 100.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks._math_extract import (MC_HINT, direct_percent, judge_prompt, parse_choices, render_examples,
                                                score_slice)
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError
from trace_lib.extraction.choices import can_infer

KEY = "mathvista"

# -- data and prompt -----------------------------------------------------------------------------------------


def load(path: Path) -> list[Row]:
    """The ``MathVista_MINI.tsv`` rows (VLMEvalKit typing); columns used: question, answer, question_type,
    answer_type, choices, answer_option, task, skills."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """``ImageBaseDataset.build_prompt``: the image(s), then the TSV ``question`` verbatim."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", str(row["question"]))]


# -- judge prompt (build_mathvista_gpt4_prompt) ----------------------------------------------------------------
#: The hints above the five shared in-context examples (``build_mathvista_gpt4_prompt``).
_HINTS = (
    "Hint: Please answer the question requiring an integer answer and provide the final value,\n"
    "e.g., 1, 2, 3, at the end.",
    "Hint: Please answer the question requiring a floating-point number with one decimal place and provide "
    "the final value,\ne.g., 1.2, 1.3, 1.4, at the end.",
    "Hint: Please answer the question requiring a floating-point number with two decimal places and provide "
    "the final value,\ne.g., 1.23, 1.34, 1.45, at the end.",
    "Hint: Please answer the question requiring a Python list as an answer and provide the final list,\n"
    "e.g., [1, 2, 3], [1.2, 1.3, 1.4], at the end.",
    MC_HINT,
)
_PREAMBLE = render_examples(_HINTS)


def build_judge_prompt(row: Row) -> str:
    """``build_mathvista_gpt4_prompt``: examples, the question, ``Model respone: `` + prediction +
    ``Extracted answer:`` (no separator)."""
    return judge_prompt(_PREAMBLE, row)


# -- post_check ---------------------------------------------------------------------------------------------------


def choice_map(cell: Any) -> dict[str, Any]:
    """``list_to_dict(eval(choices))``: ``{'A': c0, 'B': c1, ...}``."""
    return {chr(65 + i): value for i, value in enumerate(parse_choices(cell))}


def post_check(row: dict[str, Any], *, prefetch: bool) -> Any:
    """``mathvista.post_check``: the prefetched answer (or False) when ``prefetch``; else whether ``res`` is
    right. Only ``ValueError`` from the conversions is swallowed (other exceptions propagate, as upstream's)."""
    res: Any = None
    ans = row["answer"]
    response = row["prediction"] if prefetch else row["res"]
    try:
        if row["question_type"] == "multi_choice":
            ans = row["answer_option"]
            res = can_infer(response, choice_map(row["choices"]))
            if prefetch:
                return res  # quirk: returned without checking it against the answer
        elif row["answer_type"] == "integer":
            res = int(response)
            ans = int(row["answer"])
        elif row["answer_type"] == "float":
            res = float(response)
            ans = float(row["answer"])
        else:
            res = str(res)  # quirk: res is still None here, so list rows compare 'None' with the answer
            ans = str(ans)
    except ValueError:
        pass
    if res == ans:
        return res if prefetch else True
    return False


# -- scoring ------------------------------------------------------------------------------------------------------


def score_row(row: dict[str, Any]) -> bool:
    """``post_check(prefetch=False)`` on a judged row; an exception upstream would not catch aborts the slice.

    Raises:
        InputError: the row makes upstream's ``MathVista_acc`` raise (e.g. an unparsable ``choices`` cell).
    """
    try:
        return bool(post_check(row, prefetch=False))
    except Exception as exc:  # noqa: BLE001 - upstream's MathVista_acc raises here and the slice fails
        raise InputError(
            f"upstream's MathVista_acc aborts on this row ({exc.__class__.__name__}: {exc})",
            field=f"rows[{row.get('index')}]",
        ) from None


def _skills(cell: Any) -> list[Any]:
    """``eval(skills)`` with upstream's ``SyntaxError`` fallback to ``[skills]``."""
    if not isinstance(cell, str):
        raise InputError("skills cell is not text; upstream's MathVista_acc raises", field="skills", found=repr(cell))
    try:
        value = ast.literal_eval(cell)
    except SyntaxError:
        return [cell]
    except ValueError:
        raise InputError("skills cell is not a Python literal; upstream's eval raises", field="skills",
                         found=cell[:80]) from None
    return list(value) if isinstance(value, (list, tuple)) else [value]


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """``run_mathvista_local_judge`` + ``MathVista_acc`` over the slice: ``Overall`` accuracy in percent.

    Raises:
        JudgeError: a row needs the judge and ``ctx.judge`` is None, or the judge output stays empty.
        InputError: no rows, or a row makes upstream's scorer abort.
    """
    return score_slice(
        rows, responses, ctx, benchmark=KEY, post_check=post_check, judge_prompt=build_judge_prompt,
        score_row=score_row, groups=lambda row: [row.get("task"), *_skills(row.get("skills"))],
        detail=lambda row: {"question_type": row.get("question_type"), "answer_type": row.get("answer_type")},
        aggregate=aggregate,
    )


def aggregate(hit: int, total: int) -> float:
    """The reported MathVista score of ``hit`` correct rows out of ``total``."""
    return direct_percent(hit / total * 100)


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/mathvista.py + "
    "maveryn/trace@rlvr:rlvr/evaluation/vlmevalkit_extensions/batched_vlmevalkit_qwen3vl.py:run_mathvista_local_judge",
    version="mathvista-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="fallback",
    quirks=(
        "multiple-choice prefetch returns can_infer's letter unchecked (a wrong letter or Z is final)",
        "free-form prefetch needs int()/float() of the raw response to equal the answer",
        "a prefetched 0 is falsy and goes to the judge",
        "integer rows compare int(res): '14.0', '1,000', '14 apples' are wrong; float rows compare exactly",
        "list-type rows are always wrong (str(None) is compared with the answer)",
        "judge prompt says 'Model respone: ' and has no separator before 'Extracted answer:'",
        "judge output round-trips through the judged workbook (NA tokens -> 'nan', '=...' -> 0)",
        "the runner's auto percent rule multiplies an accuracy <= 1% by 100",
    ),
)
