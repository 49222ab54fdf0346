"""CharXiv reasoning (``CharXiv_reasoning_val``): the Qwen3-32B judge extracts and grades with the TSV's
``grading_query``.

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/dataset/charxiv.py`` (``build_prompt``, ``qid2category``) and
``maveryn/trace@rlvr:rlvr/evaluation/scripts/run_external_benchmark_score_queue.py`` (``_run_charxiv_local_judge``,
``_parse_charxiv_score_output``, ``_parse_json_object``, ``_resolve_charxiv_extracted_answer``).

Quirks reproduced on purpose:
- the judge prompt is ``str(grading_query).replace("{PREDICTION}", str(prediction))`` (every occurrence; an empty
  cell is inserted as ``nan``);
- judge: persistent client, temperature 0, 256 tokens, re-asked at 512/1024 when empty, truncated or unparsable;
- the score is the JSON ``score`` (whole output, else the first ``{...}``), else the first ``score: x`` match;
  any value in [0, 1] is accepted (fractional credit kept);
- a row whose prediction is empty (no ``extract_answer`` from the judge and nothing from the audit parser) must
  be scored 0 by the judge, or the slice fails;
- ``Overall = sum(scores) / rows`` and the reported score is ``Overall * 100`` (no percent heuristics).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Sequence

from trace_lib.benchmarks._charts_final_answer import extract_final_answer
from trace_lib.benchmarks._math_workbook import prediction_workbook, records
from trace_lib.benchmarks.protocol import PromptItem, Protocol, Row, RowScore, ScoringContext, SliceScore
from trace_lib.data.vlmeval_tsv import load_vlmeval_tsv, materialize_images
from trace_lib.errors import InputError, JudgeError
from trace_lib.extraction.workbook import isna
from trace_lib.scoring.judge import complete_with_ladder, retry_token_limits

KEY = "charxivreason"
#: ``--judge-max-tokens`` default of the direct score queue (256 -> 512 -> 1024).
JUDGE_MAX_TOKENS = 256
#: ``qid2category("reasoning")``: ``inst_category`` -> category (per-category means are not reported).
CATEGORIES = {1: "Text-in-Chart", 2: "Text-in-General", 3: "Number-in-Chart", 4: "Number-in-General"}
PLACEHOLDER = "{PREDICTION}"


def load(path: Path) -> list[Row]:
    """The ``CharXiv_reasoning_val.tsv`` rows (VLMEvalKit typing); columns used: question, grading_query,
    inst_category."""
    return load_vlmeval_tsv(path)


def build_prompt(row: Row, image_dir: Path) -> list[PromptItem]:
    """``CharXiv.build_prompt``: the first image, then the TSV ``question`` (nothing appended)."""
    images = materialize_images(row, image_dir)
    return [PromptItem("image", images[0]), PromptItem("text", str(row["question"]))]


def build_judge_prompt(row: Row) -> str:
    """The grading query with every ``{PREDICTION}`` replaced by ``str(prediction)``."""
    return str(row["grading_query"]).replace(PLACEHOLDER, str(row["prediction"]))


def parse_json_object(text: Any) -> dict[str, Any]:
    """``_parse_json_object``: the whole output as a JSON object, else the first non-greedy ``{...}``, else {}."""
    raw = str(text or "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
        if isinstance(value, dict):
            return value
    except Exception:  # noqa: BLE001 - upstream catches everything here
        pass
    match = re.search(r"\{.*?\}", raw, flags=re.S)
    if match:
        try:
            value = json.loads(match.group(0))
            if isinstance(value, dict):
                return value
        except Exception:  # noqa: BLE001
            pass
    return {}


_SCORE_FIELD = re.compile(r'"?score"?\s*[:=]\s*([01](?:\.\d+)?)', flags=re.I)


def parse_score(output: Any) -> float | None:
    """``_parse_charxiv_score_output``: the judge's score in [0, 1], or None (invalid output)."""
    text = str(output or "")
    raw = parse_json_object(text).get("score")
    if raw is None:
        match = _SCORE_FIELD.search(text)
        raw = match.group(1) if match else None
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return value if 0.0 <= value <= 1.0 else None


def resolve_extracted(parsed: dict[str, Any], prediction: Any) -> tuple[str, str]:
    """``_resolve_charxiv_extracted_answer``: the judge's ``extract_answer``, else the audit parser's answer;
    ``("", "empty_prediction")`` when there is none. (Upstream's ``runner._parse_charxiv_judge`` is missing from
    the release; :func:`parse_json_object` stands in, as the spec prescribes.)"""
    extracted = str(parsed.get("extract_answer", "")).strip()
    if extracted:
        return extracted, "judge"
    if prediction is None or (isinstance(prediction, float) and math.isnan(prediction)):
        return "", "empty_prediction"
    fallback, method = extract_final_answer(prediction)
    if fallback:
        return fallback, f"deterministic_{method}"
    return "", "empty_prediction"


def score(rows: Sequence[Row], responses: Sequence[str | None], ctx: ScoringContext) -> SliceScore:
    """``_run_charxiv_local_judge``: the judge's score per row; reported ``sum / rows * 100``.

    Raises:
        JudgeError: no judge; an output still invalid at 1024 tokens; an empty prediction not scored 0.
        InputError: no rows.
    """
    if not rows:
        raise InputError("no rows to score", field=KEY)
    if ctx.judge is None:
        raise JudgeError(f"{KEY} needs the Qwen3-32B judge on every row and none is configured",
                         field="--judge-url", hint="serve Qwen3-32B and pass --judge-url (TRACE_JUDGE_URL)")
    data = records(prediction_workbook(rows, responses))
    ladder = retry_token_limits(JUDGE_MAX_TOKENS)
    replies = complete_with_ladder(
        ctx.judge, [build_judge_prompt(row) for row in data], max_tokens=JUDGE_MAX_TOKENS, temperature=0.0,
        top_p=1.0, retry_on_length=True, validator=lambda output: parse_score(output) is not None,
    )
    scores: list[float] = []
    out = []
    for row, reply in zip(data, replies):
        value = parse_score(reply.text)
        if value is None:  # pragma: no cover - the ladder's validator already refused these
            raise JudgeError(f"{KEY} judge output has no score in [0, 1]", field=f"rows[{row['index']}]")
        extracted, method = resolve_extracted(parse_json_object(reply.text), row.get("prediction"))
        if method == "empty_prediction" and value != 0.0:
            raise JudgeError(
                f"{KEY} judge gave {value} to an empty prediction (upstream treats this as malformed and fails "
                "the slice)", field=f"rows[{row['index']}]",
            )
        scores.append(value)
        out.append(
            RowScore(
                index=str(row["index"]),
                extracted=extracted or None,
                score=value,
                judge_calls=ladder.index(reply.max_tokens) + 1 if reply.max_tokens in ladder else 1,
                detail={"judge_output": reply.text, "extract_answer_method": method},
            )
        )
    buckets: dict[str, list[float]] = {}
    for row, value in zip(data, scores):
        category = row.get("inst_category")
        if isna(category) or category not in CATEGORIES:
            raise InputError("inst_category outside qid2category('reasoning'); upstream's scorer raises KeyError",
                             field=f"rows[{row['index']}].inst_category", expected="1..4", found=repr(category))
        buckets.setdefault(CATEGORIES[category], []).append(value)
    overall = sum(scores) / len(scores)
    metrics = {name: sum(v) / len(v) for name, v in sorted(buckets.items())}
    metrics["Overall"] = overall
    return SliceScore(
        benchmark=KEY,
        score=aggregate(scores),
        rows=len(data),
        records=tuple(out),
        metrics=metrics,
        counts={
            "rows_scored_1": sum(1 for s in scores if s == 1.0),
            "rows_fractional": sum(1 for s in scores if 0 < s < 1),
            "total": len(data),
            "empty_predictions": sum(1 for r in out if r.detail["extract_answer_method"] == "empty_prediction"),
        },
    )


def aggregate(row_scores: Sequence[float]) -> float:
    """The reported CharXiv score of per-row judge scores (``sum / rows * 100``, left-to-right float sum)."""
    return sum(float(s) for s in row_scores) / len(row_scores) * 100.0


PROTOCOL = Protocol(
    key=KEY,
    upstream="maveryn/trace@rlvr:rlvr/evaluation/scripts/run_external_benchmark_score_queue.py:"
    "_run_charxiv_local_judge + VLMEvalKit@a8b12bf1:vlmeval/dataset/charxiv.py",
    version="charxivreason-v1",
    load=load,
    build_prompt=build_prompt,
    score=score,
    judge="always",
    quirks=(
        "judge prompt: grading_query with every {PREDICTION} replaced by str(prediction) ('nan' for an empty cell)",
        "judge re-asked at 512/1024 tokens when empty, truncated or without a parsable score",
        "score: whole-output JSON, else first {...}, else first 'score: x' match; fractional scores kept",
        "an empty prediction must be judged 0 or the slice fails",
        "reported Overall*100 with no percent heuristic",
    ),
)
