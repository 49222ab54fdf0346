"""What a response yields to TRACE's answer-only scorer: the format verdict and the answer/annotation values.

``locate_prediction(response) -> Prediction`` reproduces upstream's ``evaluate_trace_response_format`` (answer
mode) followed by ``score_trace_response``'s prediction step: the response must *end* with an answer block whose
parsed object has exactly the key ``answer`` (the format credit); the values come from that object when it has an
``answer``/``annotation`` key, else from the block's first object, else from the last such object of the whole
response (``extract_trace_prediction``). A ``null`` (or missing) answer falls back to the whole raw response string.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trace_lib.answers.json_blocks import (
    final_block,
    first_object,
    json_candidates,
    parse_json_like,
)

#: The key set a format-valid answer object has in answer-only mode.
ANSWER_ONLY_KEYS = frozenset({"answer"})


@dataclass(frozen=True)
class Prediction:
    """What a response yields: the format verdict and the values the reward compares.

    ``answer`` is already the raw response when no usable answer was found (never None);
    ``annotation`` is None when the response carries none.
    """

    format_ok: bool
    block_found: bool  # a final answer block was located (fence or trailing object)
    block_is_object: bool  # ... and it parsed to an object
    json_found: bool  # some candidate object with an answer/annotation key was found
    answer: Any
    annotation: Any


def _has_prediction_key(obj: dict) -> bool:
    return "answer" in obj or "annotation" in obj


def _recover(response: str, block: str | None) -> tuple[Any, Any, bool]:
    """(answer, annotation, found) from the block's first object, else the last object of the whole response."""
    if block is not None:
        payload = first_object(block)
        if payload is not None and _has_prediction_key(payload):
            return payload.get("answer"), payload.get("annotation"), True
    for candidate in reversed(json_candidates(response)):
        parsed = parse_json_like(candidate)
        if isinstance(parsed, dict) and _has_prediction_key(parsed):
            return parsed.get("answer"), parsed.get("annotation"), True
    return None, None, False


def locate_prediction(response: str) -> Prediction:
    """The format verdict and the answer/annotation values of one decoded response."""
    block = final_block(response)
    payload = parse_json_like(block) if block else None
    is_object = isinstance(payload, dict)
    format_ok = is_object and set(payload.keys()) == ANSWER_ONLY_KEYS
    if is_object and _has_prediction_key(payload):
        answer, annotation, found = payload.get("answer"), payload.get("annotation"), True
    else:
        answer, annotation, found = _recover(response, block)
    if answer is None:
        answer = response
    return Prediction(
        format_ok=format_ok,
        block_found=block is not None,
        block_is_object=is_object,
        json_found=found,
        answer=answer,
        annotation=annotation,
    )
