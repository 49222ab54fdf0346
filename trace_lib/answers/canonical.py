"""TRACE's canonical answer form and the "exact_json" answer rule (upstream ``_canonical_jsonable``; spec §4.6, §A8.2).

Canonical form: booleans kept; numpy scalars/arrays unwrapped; other numbers finite-or-None, integral values as
``int`` (``7.0 -> 7``, ``-0.0 -> 0``); strings stripped and lowercased; dict keys turned into canonical strings
(stable sort by key, a later duplicate wins); sets sorted by their JSON text; sequences keep their order. No numeric
tolerance, no punctuation stripping; Python's ``True == 1`` quirk is kept.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any

from trace_lib.answers.json_blocks import parse_json_like


def is_sequence(value: Any) -> bool:
    """A non-string, non-bytes sequence (list, tuple, ...)."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def scalar_number(value: Any) -> int | float | None:
    """A finite number as ``int`` when integral, else ``float``; None for booleans, non-numbers, NaN and ±inf."""
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


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _key_symbol(key: Any) -> str:
    """The canonical string of a dict key."""
    if isinstance(key, bool):
        return str(key).lower()
    if isinstance(key, Real):
        return str(scalar_number(key))
    if isinstance(key, str):
        return key.strip().lower()
    if key is Ellipsis:
        return "..."
    try:
        return _json_text(canonical(key))
    except (TypeError, ValueError):
        return str(key)


def canonical(value: Any) -> Any:
    """The canonical form compared by the exact_json rule (see the module docstring)."""
    if value is Ellipsis:
        return "..."
    if isinstance(value, bool):
        return value
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):  # numpy scalars and arrays
        return canonical(value.tolist())
    if isinstance(value, Real):
        return scalar_number(value)
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, dict):
        items = sorted(((_key_symbol(k), canonical(v)) for k, v in value.items()), key=lambda kv: kv[0])
        return dict(items)
    if isinstance(value, (set, frozenset)):
        return sorted((canonical(item) for item in value), key=_json_text)
    if is_sequence(value):
        return [canonical(item) for item in value]
    return value


def answer_matches(prediction: Any, answer_gt: Mapping[str, Any]) -> bool:
    """Whether ``prediction`` equals ``answer_gt["value"]`` under the exact_json rule for ``answer_gt["type"]``.

    A string prediction is JSON-/literal-parsed first (kept as is when that fails) unless the type is ``string``.
    """
    answer_type = str(answer_gt.get("type", "")).strip()
    if isinstance(prediction, str) and answer_type == "string":
        parsed = prediction
    elif isinstance(prediction, str):
        parsed = parse_json_like(prediction)
        if parsed is None:
            parsed = prediction
    else:
        parsed = prediction
    return canonical(parsed) == canonical(answer_gt.get("value"))
