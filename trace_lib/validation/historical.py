"""The auxiliary "historical" fields of a scored row: the training reward's answer-mode scorer (not the reported number).

``historical_fields(response, answer_gt)`` returns ``historical_answer_correct`` (the ``exact_json`` answer scorer),
``historical_format_correct`` (the final block parses to an object whose keys are exactly ``{"answer"}``),
``historical_reward`` (0.95 * accuracy + 0.05 * format), ``structured_answer_found`` and ``terminal_rfc_json`` (the
final block is strict RFC JSON with exactly ``{"answer"}``), re-implementing the answer-mode path of upstream's
``src/trace_tasks/core/reward_scoring.py`` (spec §A8.2). Its parsers are deliberately looser than the validation
extractor's: plain ``json.loads`` (last duplicate wins, NaN allowed), then ``ast.literal_eval``; brace scanning
tracks only double quotes, everywhere.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from typing import Any

from trace_lib.validation.match import canonical_value

_FENCE_ANYWHERE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_FENCE_AT_END = re.compile(r"```(?:json)?\s*(.*?)\s*```\s*\Z", re.DOTALL | re.IGNORECASE)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


def _json_like(value: Any) -> Any:
    """JSON, else a Python literal, else ``None`` (non-strings pass through)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except Exception:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SyntaxWarning)
                return ast.literal_eval(text)
        except Exception:
            return None


def _brace_spans(text: str) -> list[tuple[int, int]]:
    """Balanced ``{...}`` spans; a double quote toggles string state anywhere in the text."""
    spans: list[tuple[int, int]] = []
    depth = 0
    start: int | None = None
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
            if depth == 0 and start is not None:
                spans.append((start, index + 1))
                start = None
    return spans


def _final_block(response: str) -> str | None:
    """The final structured block: a non-empty trailing code fence, else a brace object ending the text."""
    stripped = response.rstrip()
    if not stripped:
        return None
    fence = _FENCE_AT_END.search(stripped)
    if fence is not None and fence.group(1).strip():
        return fence.group(1).strip()
    for start, end in reversed(_brace_spans(stripped)):
        if end == len(stripped):
            return stripped[start:end].strip() or None
    return None


def _json_candidates(text: str) -> list[str]:
    """Answer tags, code fences, brace objects, then the whole text; first occurrence of each kept."""
    found = [m.strip() for m in _ANSWER_TAG.findall(text) if m.strip()]
    found += [m.strip() for m in _FENCE_ANYWHERE.findall(text) if m.strip()]
    found += [text[s:e].strip() for s, e in _brace_spans(text) if text[s:e].strip()]
    if text.strip():
        found.append(text.strip())
    return list(dict.fromkeys(found))


def _payload(block: str) -> dict[str, Any] | None:
    parsed = _json_like(block)
    if isinstance(parsed, dict):
        return parsed
    for candidate in _json_candidates(block):
        parsed = _json_like(candidate)
        if isinstance(parsed, dict):
            return parsed
    return None


def _prediction(response: str) -> tuple[Any, bool]:
    """``(answer value or None, structured answer found)``."""
    block = _final_block(response)
    if block:
        payload = _payload(block)
        if isinstance(payload, dict) and ("answer" in payload or "annotation" in payload):
            return payload.get("answer"), True
    for candidate in reversed(_json_candidates(response)):
        parsed = _json_like(candidate)
        if isinstance(parsed, dict) and ("answer" in parsed or "annotation" in parsed):
            return parsed.get("answer"), True
    return None, False


def _exact_json_correct(candidate: Any, answer_gt: dict[str, Any]) -> float:
    if not isinstance(answer_gt, dict) or "value" not in answer_gt:
        return 0.0
    if isinstance(candidate, str) and str(answer_gt.get("type", "")).strip() == "string":
        parsed = candidate
    elif isinstance(candidate, str):
        parsed = _json_like(candidate)
        if parsed is None:
            parsed = candidate
    else:
        parsed = candidate
    return 1.0 if canonical_value(parsed) == canonical_value(answer_gt.get("value")) else 0.0


def historical_fields(response: str, answer_gt: dict[str, Any]) -> dict[str, Any]:
    """The five historical fields of one scored row."""
    value, structured = _prediction(response)
    accuracy = _exact_json_correct(response if value is None else value, answer_gt)
    block = _final_block(response)
    payload = _json_like(block or "") if block else None
    format_score = 1.0 if isinstance(payload, dict) and set(payload) == {"answer"} else 0.0
    strict = False
    if block is not None:
        try:
            loaded = json.loads(block)
            strict = isinstance(loaded, dict) and set(loaded) == {"answer"}
        except Exception:
            strict = False
    return {
        "historical_answer_correct": int(accuracy == 1.0),
        "historical_format_correct": int(format_score == 1.0),
        "historical_reward": float(0.95 * accuracy + 0.05 * format_score),
        "structured_answer_found": bool(structured),
        "terminal_rfc_json": strict,
    }
