"""Find and parse the JSON-like blocks of a model response, exactly as upstream's reward scorer does.

Upstream quirks reproduced on purpose (each pinned by a §4.8 vector):

- the final-fence regex is applied with ``search``: with several fenced blocks its body runs from the first
  opening fence to the last closing one;
- the brace scanner tracks JSON strings over the whole text, so one stray ``"`` in the prose hides every
  object after it;
- blocks are parsed with ``json.loads`` (last duplicate wins, NaN allowed) and then ``ast.literal_eval``
  (single-quoted dicts, ``True``, ``...``).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from trace_lib.jsonio import outside_strings

# The three patterns of the upstream scorer: a fence that ends the text, any fence, answer tags.
_FINAL_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```\s*\Z", re.DOTALL | re.IGNORECASE)
_ANY_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


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
    """(start, end) of every balanced top-level ``{...}`` span; a double quote toggles string state anywhere."""
    spans: list[tuple[int, int]] = []
    depth = 0
    start = -1  # always set by the '{' that opened depth 1 before a span can close
    for index, char, outside in outside_strings(text):
        if not outside:
            continue
        if char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((start, index + 1))
    return spans


def final_block(response: str) -> str | None:
    """The answer block that ends the right-stripped response (non-empty final fence body, else a trailing object)."""
    stripped = response.rstrip()
    if not stripped:
        return None
    fence = _FINAL_FENCE.search(stripped)
    if fence is not None:
        body = fence.group(1).strip()
        if body:
            return body
    spans = brace_spans(stripped)  # spans are disjoint and in order: only the last can end the text
    if spans and spans[-1][1] == len(stripped):
        start, end = spans[-1]
        return stripped[start:end].strip()
    return None


def json_candidates(text: str) -> list[str]:
    """Answer-tag bodies, fence bodies, top-level objects and the whole text (stripped, non-empty, first kept)."""
    found = [m.strip() for m in _ANSWER_TAG.findall(text)]
    found += [m.strip() for m in _ANY_FENCE.findall(text)]
    found += [text[start:end].strip() for start, end in brace_spans(text)]
    found.append(text.strip())
    return list(dict.fromkeys(candidate for candidate in found if candidate))


def first_object(block: str) -> dict | None:
    """The block parsed directly, else the first candidate inside it that parses to an object."""
    parsed = parse_json_like(block)
    if isinstance(parsed, dict):
        return parsed
    for candidate in json_candidates(block):
        parsed = parse_json_like(candidate)
        if isinstance(parsed, dict):
            return parsed
    return None
