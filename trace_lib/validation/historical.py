"""The auxiliary "historical" fields of a scored row: the training reward's answer-mode scorer (not the reported number).

``historical_fields(response, answer_gt)`` returns ``historical_answer_correct`` (the ``exact_json`` answer scorer),
``historical_format_correct`` (the final block parses to an object whose keys are exactly ``{"answer"}``),
``historical_reward`` (0.95 * accuracy + 0.05 * format), ``structured_answer_found`` and ``terminal_rfc_json`` (the
final block is strict RFC JSON with exactly ``{"answer"}``), as upstream's ``score.py:_historical_scores`` does on top
of ``reward_scoring.py``; the shared machinery is :mod:`trace_lib.answers`. Its parsers are deliberately
looser than the validation extractor's: plain ``json.loads`` (last duplicate wins, NaN allowed), then
``ast.literal_eval``; brace scanning tracks only double quotes, everywhere.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

from trace_lib.answers.canonical import answer_matches
from trace_lib.answers.json_blocks import final_block
from trace_lib.answers.prediction import ANSWER_ONLY_KEYS, locate_prediction


def _strict_answer_json(block: str | None) -> bool:
    """The final block is RFC JSON (``json.loads``) for an object with exactly the key ``answer``."""
    if block is None:
        return False
    try:
        loaded = json.loads(block)
    except Exception:  # noqa: BLE001 - any parser failure means "not strict JSON"
        return False
    return isinstance(loaded, dict) and set(loaded) == ANSWER_ONLY_KEYS


def historical_fields(response: str, answer_gt: dict[str, Any]) -> dict[str, Any]:
    """The five historical fields of one scored row."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # validation keeps literal_eval quiet; the reward does not
        prediction = locate_prediction(response)
        scorable = isinstance(answer_gt, dict) and "value" in answer_gt  # upstream's _score_trace_answer guard
        accuracy = 1.0 if scorable and answer_matches(prediction.answer, answer_gt) else 0.0
    format_score = 1.0 if prediction.format_ok else 0.0
    return {
        "historical_answer_correct": int(accuracy == 1.0),
        "historical_format_correct": int(format_score == 1.0),
        "historical_reward": float(0.95 * accuracy + 0.05 * format_score),
        "structured_answer_found": bool(prediction.json_found),
        "terminal_rfc_json": _strict_answer_json(final_block(response)),
    }
