"""MATCH (``trace-answer-exact-match-v0``): a candidate is correct iff its canonical form equals the ground truth's.

Canonical form (upstream ``_canonical_jsonable`` in ``maveryn/trace:src/trace_tasks/core/reward_scoring.py``):
bool stays bool; a real number becomes ``int`` when finite and integral, else ``float`` (non-finite: ``None``);
a string is stripped and lower-cased; mappings, sets and sequences are canonicalized recursively. So numbers
have no tolerance (``0.33 != 0.333``), option letters and strings compare case-insensitively, inner whitespace
and punctuation count (spec §A8.2, vectors §A10.3).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from numbers import Integral, Real
from typing import Any


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, Integral):
        return int(value)
    if isinstance(value, Real):
        as_float = float(value)
        if not math.isfinite(as_float):
            return None
        return int(as_float) if as_float.is_integer() else as_float
    return None


def _key_symbol(key: Any) -> str:
    if isinstance(key, bool):
        return str(key).lower()
    if isinstance(key, (Integral, Real)):
        return str(_number(key))
    if isinstance(key, str):
        return key.strip().lower()
    if key is Ellipsis:
        return "..."
    try:
        return json.dumps(canonical_value(key), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(key)


def canonical_value(value: Any) -> Any:
    """The canonical form two answers are compared in."""
    if value is Ellipsis:
        return "..."
    if isinstance(value, bool):
        return value
    if isinstance(value, (Integral, Real)):
        return _number(value)
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, dict):
        items = sorted(((_key_symbol(k), canonical_value(v)) for k, v in value.items()), key=lambda kv: kv[0])
        return dict(items)
    if isinstance(value, (set, frozenset)):
        members = [canonical_value(item) for item in value]
        return sorted(members, key=lambda m: json.dumps(m, ensure_ascii=False, sort_keys=True, separators=(",", ":")))
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [canonical_value(item) for item in value]
    return value


def semantic_correct(candidate: Any, ground_truth_value: Any) -> int:
    """1 when ``candidate`` MATCHes the ground-truth value, else 0."""
    return int(canonical_value(candidate) == canonical_value(ground_truth_value))
