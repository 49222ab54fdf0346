"""Find the JSON answer object in a model response, exactly as TRACE's answer-only reward does (spec §4.4-4.5).

``locate_prediction(response) -> Prediction``: whether the response *ends* with an answer block whose parsed
object has exactly the key ``answer`` (the format credit), and which ``answer`` / ``annotation`` values the
reward scores. Upstream quirks reproduced on purpose (each pinned by a §4.8 vector):

- the final-fence regex is applied with ``search``: with several fenced blocks its body runs from the first
  opening fence to the last closing one, fails to parse, and the recovery path then takes the *first* object;
- the brace scanner tracks JSON strings over the whole text, so one stray ``"`` in the prose hides every
  object after it;
- blocks are parsed with ``json.loads`` and then ``ast.literal_eval`` (single-quoted dicts, ``True``, ``...``);
- a ``null`` (or missing) answer falls back to the whole raw response string.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

# The three patterns of the upstream scorer (spec §4.4): a fence that ends the text, any fence, answer tags.
_FINAL_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```\s*\Z", re.DOTALL | re.IGNORECASE)
_ANY_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)

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


def parse_json_like(value: Any) -> Any:
    """A string parsed with ``json.loads`` then ``ast.literal_eval`` (None when both fail or it is blank);
    any other value unchanged."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except Exception:  # noqa: BLE001 - upstream treats every parser failure alike
        try:
            return ast.literal_eval(text)
        except Exception:  # noqa: BLE001
            return None


def brace_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every balanced top-level ``{...}`` span; string-aware over the whole text."""
    spans: list[tuple[int, int]] = []
    depth = 0
    start = -1
    in_string = False
    escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((start, index + 1))
    return spans


def final_block(response: str) -> str | None:
    """The answer block that ends the right-stripped response (final fence body, else a trailing object)."""
    stripped = response.rstrip()
    if not stripped:
        return None
    fence = _FINAL_FENCE.search(stripped)
    if fence is not None:
        body = fence.group(1).strip()
        if body:
            return body
    spans = brace_spans(stripped)
    if spans and spans[-1][1] == len(stripped):
        start, end = spans[-1]
        return stripped[start:end].strip()
    return None


def json_candidates(text: str) -> list[str]:
    """Answer-tag bodies, fence bodies, top-level objects and the whole text (stripped, deduplicated, in order)."""
    found = [m.strip() for m in _ANSWER_TAG.findall(text)]
    found += [m.strip() for m in _ANY_FENCE.findall(text)]
    found += [text[start:end].strip() for start, end in brace_spans(text)]
    found.append(text.strip())
    seen: set[str] = set()
    out: list[str] = []
    for candidate in found:
        if candidate and candidate not in seen:
            seen.add(candidate)
            out.append(candidate)
    return out


def _has_prediction_key(obj: dict) -> bool:
    return "answer" in obj or "annotation" in obj


def _first_object(block: str) -> dict | None:
    """The block parsed directly, else the first candidate inside it that parses to an object."""
    parsed = parse_json_like(block)
    if isinstance(parsed, dict):
        return parsed
    for candidate in json_candidates(block):
        parsed = parse_json_like(candidate)
        if isinstance(parsed, dict):
            return parsed
    return None


def _recover(response: str, block: str | None) -> tuple[Any, Any, bool]:
    """(answer, annotation, found) from the block's first object, else the last object of the whole response."""
    if block is not None:
        payload = _first_object(block)
        if payload is not None and _has_prediction_key(payload):
            return payload.get("answer"), payload.get("annotation"), True
    for candidate in reversed(json_candidates(response)):
        parsed = parse_json_like(candidate)
        if isinstance(parsed, dict) and _has_prediction_key(parsed):
            return parsed.get("answer"), parsed.get("annotation"), True
    return None, None, False


def locate_prediction(response: str) -> Prediction:
    """The format verdict and the answer/annotation values of one decoded response (spec §4.4-4.5)."""
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
