"""WeMath (``WeMath_COT``, testmini): ``can_infer`` prefetch, else the Qwen3-32B MCQ judge; ``Score (Strict)``.

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py:WeMath`` (``build_prompt``, ``evaluate``),
``vlmeval/dataset/utils/multiple_choice.py`` (``mcq_vanilla_eval``, ``extract_answer_from_item``, via
:mod:`trace_lib.extraction.choices`) and ``vlmeval/dataset/utils/wemath.py`` (``wemath_evaluate_models``), run
by ``maveryn/trace@rlvr:rlvr/evaluation/scripts/run_official_vlmevalkit_saved_score.py`` (queue-column filter,
``_primary_score`` with ``Score (Strict)``).

Quirks reproduced on purpose:
- the prompt appends ``\\n{requirement}`` after the options (``COT`` alias); a hint comes first when present;
- the judge prompt is the *generic* MCQ template (``dataset_name == 'WeMath'`` is false for ``WeMath_COT``), or
  the Chinese one for a CJK question;
- ``<Answer>: <B>`` is one token for ``can_infer`` (no prefetch); a judge reply ``Z`` is the answer ``Z``;
- after three unusable judge replies upstream draws ``random.choice(options + ['Z'])`` unseeded: here the draw
  is seeded by (benchmark, row index, decoding seed) and the row is marked ``fallback``;
- the 525 composite problems come from left joins of the step rows on ``ID``; a problem whose multi-step row is
  missing falls in no class;
- ``Score (Strict) = "{:.2%}".format((525 - 0.5*IG - RM - IK) / 525)`` with 525 hard-coded; the reported number
  is that 2-decimal percent string read as a float;
- a slice with no correct multi-step answer makes upstream divide by zero (its RoteMemorization rate) and abort.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from trace_lib.benchmarks._math_workbook import prediction_workbook, records, reread
from trace_lib.linear_aggregate import Linear, RowAggregate, RowField, first_seed, is_text, is_text_or_number
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError
from trace_lib.extraction.choices import build_choices
from trace_lib.extraction.workbook import isna
from trace_lib.scoring.mcq_judge import McqItem, extract_options

KEY = "wemath"
#: The VLMEvalKit dataset name the matcher sees (selects the generic judge template, not the WeMath one).
DATASET_NAME = "WeMath_COT"
#: ``evaluate_update_main_results_df``: the hard-coded number of composite problems.
PROBLEMS = 525

# -- data and prompt -----------------------------------------------------------------------------------------


def load(path: Path) -> list[Row]:
    """The ``WeMath.tsv`` rows (VLMEvalKit typing); columns used: question, A..G, hint, requirement, answer,
    ID, key, knowledge concept."""
    return load_vlmeval_tsv(path)


def build_prompt_text(row: Row) -> str:
    """``WeMath.build_prompt``'s text for a ``COT`` alias: hint, question, options, then ``\\n{requirement}``."""
    options = {c: row[c] for c in string.ascii_uppercase if c in row and not isna(row[c])}
    prompt = ""
    if "hint" in row and not isna(row["hint"]):
        prompt += f"Hint: {row['hint']}\n"
    prompt += f"Question: {row['question']}\n"
    if options:
        prompt += "Options:\n" + "".join(f"{key}. {item}\n" for key, item in options.items())
    if "requirement" not in row:
        raise InputError("WeMath_COT prompts append the requirement column, which the row lacks (upstream KeyError)",
                         field=f"rows[{row.get('index')}].requirement")
    requirement = row["requirement"]
    if requirement is not None:  # quirk: a NaN requirement renders as 'nan'
        prompt += f"\n{requirement}"
    return prompt


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """``WeMath.build_prompt``: the image(s), then :func:`build_prompt_text`."""
    images = [PromptItem("image", p) for p in materialize_images(row, image_dir)]
    return [*images, PromptItem("text", build_prompt_text(row))]


# -- four-dimensional metrics (wemath_evaluate_models) -------------------------------------------------------------


@dataclass(frozen=True)
class Dimensions:
    """Composite-problem counts of ``evaluate_compute_final_scores``."""

    inadequate_generalization: int  # IG: every step right, multi-step wrong
    insufficient_knowledge: int  # IK: some step wrong, multi-step wrong
    complete_mastery_strict: int  # every step right, multi-step right
    rote_memorization_strict: int  # some step wrong, multi-step right
    complete_mastery_loose: int  # some step right, multi-step right
    rote_memorization_loose: int  # every step wrong, multi-step right

    def score(self, *, strict: bool = True) -> str:
        """``Score (Strict)`` / ``Score (Loose)``: a 2-decimal percent string over the hard-coded 525."""
        rote = self.rote_memorization_strict if strict else self.rote_memorization_loose
        value = (PROBLEMS - 0.5 * self.inadequate_generalization - rote - self.insufficient_knowledge) / PROBLEMS
        return "{:.2%}".format(value)


def _key(value: Any) -> Any:
    """Merge-key identity (pandas joins NaN keys with NaN keys)."""
    return "<NaN>" if isna(value) else value


def _is(value: Any, truth: bool) -> bool:
    """``column == True``/``== False`` on a merged column: a missing (NaN) cell is neither."""
    return value is not None and bool(value) is truth


def dimensions(rows: Sequence[dict[str, Any]]) -> Dimensions:
    """Classify the composite problems from rows with ``key``, ``ID`` and ``joker`` (True/False).

    Raises:
        InputError: a ``key`` cell is not text (upstream's ``str.contains`` filter fails).
    """
    counts = dict.fromkeys(("ig", "ik", "cm_s", "rm_s", "cm_l", "rm_l"), 0)
    for steps in (2, 3):
        for row in rows:
            if not isinstance(row["key"], str):
                raise InputError("key cell is not text; upstream's str.contains filter fails",
                                 field=f"rows[{row.get('index')}].key", found=repr(row["key"]))
        part = [r for r in rows if f"{steps}steps" in r["key"]]
        by_key = {label: [r for r in part if r["key"] == f"{steps}steps_{label}"]
                  for label in [*map(str, range(1, steps + 1)), "multi"]}
        merged: list[list[Any]] = [[_key(r["ID"]), r["joker"]] for r in by_key["1"]]
        for label in [*map(str, range(2, steps + 1)), "multi"]:
            grown = []
            for combo in merged:
                matches = [r["joker"] for r in by_key[label] if _key(r["ID"]) == combo[0]]
                grown.extend([*combo, joker] for joker in (matches or [None]))  # left join: NaN when unmatched
            merged = grown
        for combo in merged:
            steps_ok, multi = combo[1:-1], combo[-1]
            any_wrong = any(_is(j, False) for j in steps_ok)
            all_right = all(_is(j, True) for j in steps_ok)
            any_right = any(_is(j, True) for j in steps_ok)
            all_wrong = all(_is(j, False) for j in steps_ok)
            if _is(multi, True):
                counts["rm_s"] += any_wrong
                counts["cm_s"] += all_right
                counts["rm_l"] += all_wrong
                counts["cm_l"] += any_right
            elif _is(multi, False):
                counts["ig"] += all_right
                counts["ik"] += any_wrong
    return Dimensions(counts["ig"], counts["ik"], counts["cm_s"], counts["rm_s"], counts["cm_l"], counts["rm_l"])


def reported(dims: Dimensions) -> float:
    """``_primary_score``'s WeMath special case: ``Score (Strict)``'s percent string read as a float.

    Raises:
        InputError: no composite problem has a correct multi-step answer (upstream divides by zero).
    """
    if dims.complete_mastery_strict + dims.rote_memorization_strict == 0 or (
        dims.complete_mastery_loose + dims.rote_memorization_loose == 0
    ):
        raise InputError("no composite problem has a correct multi-step answer: upstream's WeMath scorer divides "
                         "by zero (RoteMemorization rate) and aborts the slice", field=KEY)
    text = dims.score(strict=True)
    return float(text.strip()[:-1])


def aggregate(complete_mastery: int, inadequate_generalization: int, rote_memorization: int,
              insufficient_knowledge: int) -> float:
    """The reported WeMath score from strict class counts (as ``Score (Strict)`` formats it)."""
    dims = Dimensions(inadequate_generalization, insufficient_knowledge, complete_mastery, rote_memorization,
                      complete_mastery, rote_memorization)
    return reported(dims)


# -- scoring ------------------------------------------------------------------------------------------------------


def _lower_columns(table: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """``evaluate``: every column name lower-cased except single capital letters (later names win)."""
    out: dict[str, list[Any]] = {}
    for name, values in table.items():
        out[name if name in string.ascii_uppercase else name.lower()] = values
    return out


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """``WeMath.evaluate`` with the Qwen3-32B judge: ``Score (Strict)`` in percent.

    Raises:
        JudgeError: a row needs the judge and none is configured, or every first-round judge request failed.
        InputError: no rows, missing columns, or a slice upstream's scorer cannot finish.
    """
    if not rows:
        raise InputError("no rows to score", field=KEY)
    table = _lower_columns(prediction_workbook(rows, responses, resaved=True))
    for needed in ("index", "question", "key", "id", "knowledge concept"):
        if needed not in table:
            raise InputError("column missing from the WeMath evaluation table", field=needed)
    table["prediction"] = [str(x) for x in table["prediction"]]
    order = sorted(range(len(table["index"])), key=lambda i: table["index"][i])  # data.sort_values(by='index')
    unsorted = records(table)
    data = [unsorted[i] for i in order]
    gold = {row["index"]: row["answer"] for row in rows}
    for row in data:
        if row["index"] not in gold:
            raise InputError("evaluation row missing from the dataset", field=f"rows[{row['index']}]")
    items = [McqItem(row["index"], row["question"], row["prediction"], build_choices(row)) for row in data]
    options = extract_options(items, judge=ctx.judge, use_judge=True, benchmark=KEY, seed=ctx.seed,
                              dataset=DATASET_NAME)
    hits = [int(opt.option == gold[row["index"]]) for row, opt in zip(data, options)]
    storage = reread({"index": [r["index"] for r in data], "hit": hits, "key": [r["key"] for r in data],
                      "ID": [r["id"] for r in data]})
    joined = [{"index": i, "key": k, "ID": g, "joker": bool(h)}
              for i, k, g, h in zip(storage["index"], storage["key"], storage["ID"], storage["hit"])]
    dims = dimensions(joined)
    out = [
        RowScore(index=str(row["index"]), extracted=opt.option, score=float(hit), judge_calls=opt.judge_calls,
                 fallback=opt.fallback, detail={"method": opt.method, "judge_replies": list(opt.judge_replies),
                                                "key": row["key"], "problem_id": _key(row["id"])})
        for row, opt, hit in zip(data, options, hits)
    ]
    by_index = {r.index: r for r in out}
    ordered = tuple(by_index[str(row["index"])] for row in rows)
    return SliceScore(
        benchmark=KEY,
        score=aggregate(dims.complete_mastery_strict, dims.inadequate_generalization, dims.rote_memorization_strict,
                        dims.insufficient_knowledge),
        rows=len(data),
        records=ordered,
        metrics={"Score (Strict)": float(dims.score(strict=True)[:-1]),
                 "Score (Loose)": float(dims.score(strict=False)[:-1])},
        counts={
            "hit": sum(hits), "total": len(data), "fallbacks": sum(1 for o in options if o.fallback),
            "prefetched": sum(1 for o in options if o.method == "prefetch"),
            "inadequate_generalization": dims.inadequate_generalization,
            "insufficient_knowledge": dims.insufficient_knowledge,
            "complete_mastery_strict": dims.complete_mastery_strict,
            "rote_memorization_strict": dims.rote_memorization_strict,
        },
    )


def _problem_penalty(steps_ok: list[float | None], multi: float | None) -> float:
    """``g = 0.5 [IG] + [RM strict] + [IK]`` of one composite problem (as :func:`dimensions` classifies it)."""
    if multi is None:
        return 0.0
    all_right = all(j is not None and j == 1.0 for j in steps_ok)
    any_wrong = any(j is not None and j == 0.0 for j in steps_ok)
    if multi == 1.0:
        return float(any_wrong)  # rote memorization (strict)
    return 0.5 * all_right + any_wrong  # inadequate generalization / insufficient knowledge


def linearize(credits: np.ndarray, extra: dict[str, np.ndarray]) -> Linear:
    """``Score (Strict)`` as ``100 - (100/525) * sum_p g_p`` over composite problems (rows need ``key`` and
    ``problem_id``); rows outside a 2- or 3-step problem carry no weight."""
    keys, ids = first_seed(extra["key"]).astype(str), first_seed(extra["problem_id"]).astype(str)
    problems: dict[tuple[int, str], dict[str, int]] = {}
    for pos, (key, problem) in enumerate(zip(keys, ids)):
        for steps in (2, 3):
            if key.startswith(f"{steps}steps_"):
                problems.setdefault((steps, problem), {})[key.split("_", 1)[1]] = pos
    order = sorted(problems, key=lambda p: (p[0], p[1]))
    seeds = credits.shape[1]
    values = np.zeros((len(order), seeds))
    for u, (steps, problem) in enumerate(order):
        parts = problems[(steps, problem)]
        if "1" not in parts:
            continue  # the left join starts from step 1: no step-1 row, no problem
        for s in range(seeds):
            steps_ok = [credits[parts[str(j)], s] if str(j) in parts else None for j in range(1, steps + 1)]
            multi = credits[parts["multi"], s] if "multi" in parts else None
            values[u, s] = _problem_penalty(steps_ok, multi)
    count = len(order)
    return Linear(100.0, np.full(count, -100.0 / PROBLEMS), values, np.ones(count), np.zeros(count, dtype=int))


ROW_AGGREGATE = RowAggregate(
    "composite-problems", (
        RowField("key", "a string", is_text, per_row=True),  # dimensions() refuses a key that is not text
        RowField("problem_id", "a string or a finite number", is_text_or_number, per_row=True),  # _key(ID)
    ),
    "Score (Strict) = 100 x (525 - 0.5 IG - RM - IK) / 525 over 2- and 3-step composite problems", linearize)


PROTOCOL = Protocol(
    key=KEY,
    upstream="VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py:WeMath + vlmeval/dataset/utils/wemath.py + "
    "vlmeval/dataset/utils/multiple_choice.py:mcq_vanilla_eval",
    version="wemath-v2",  # v2: records carry problem_id (the row-level variance needs the composite problems)
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="fallback",
    quirks=(
        "prompt appends '\\n{requirement}' after the options (COT alias); a NaN requirement renders 'nan'",
        "judge prompt is the generic MCQ template ('WeMath_COT' != 'WeMath'), Chinese for CJK questions",
        "'<Answer>: <B>' is one can_infer token (no prefetch); a judge reply 'Z' is the answer Z",
        "after 3 unusable judge replies: seeded stand-in for upstream's unseeded random choice (fallback=True)",
        "composite problems from left joins on ID; a problem without its multi-step row is in no class",
        "Score (Strict) = '{:.2%}' of (525 - 0.5*IG - RM - IK)/525 with 525 hard-coded, read back as a float",
        "no correct multi-step answer in the slice: upstream divides by zero and aborts",
    ),
    row_aggregate=ROW_AGGREGATE,
)
