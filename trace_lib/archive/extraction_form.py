"""What an archived ``extraction_value_json`` holds, per scoring route, and the one key extractions are compared on.

Upstream's routes archive different things as the extraction value (``trace_eval/suite.v1.json`` ``route``):

- ``official_vlmevalkit`` (``run_trace_eval_official_score_campaign.py``): the *prediction handed to VLMEvalKit's
  evaluate* (the response, or a benchmark adapter's rewrite of it), not the answer VLMEvalKit extracts from it; so
  it is not comparable with trace-repro's extracted answer (``records.jsonl`` ``extracted``);
- ``direct_score`` (``run_external_benchmark_score_queue.py``) and ``dedicated_score`` (MME-Reasoning): the
  extracted answer (``extract_answer``/``eval_pred``/``res``...), comparable.

:func:`extraction_key` is the single normalisation both the archive lane's per-row agreement and ``diagnose`` use:
canonical JSON (sorted keys, ASCII) of the value with non-JSON values as text, where a number and its decimal text
are one answer (``3``, ``3.0`` and ``"3"`` read the same: spreadsheet round trips and JSON re-encoding change the
form, not the answer).
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

from trace_lib.jsonio import canonical_json_ascii as canonical_json

#: Routes whose archived extraction value is an extracted answer (comparable with trace-repro's ``extracted``).
COMPARABLE_ROUTES = frozenset({"direct_score", "dedicated_score"})
NOT_COMPARABLE_NOTE = ("official route: the archive holds the prediction VLMEvalKit was given, not its extracted "
                       "answer; extraction not compared")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def comparable(route: str | None) -> bool:
    """Whether the archive's extraction values of a benchmark on ``route`` are extracted answers."""
    return route in COMPARABLE_ROUTES


def _number_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if not _NUMBER.fullmatch(value.strip()):
            return None
        value = float(value.strip())
    if isinstance(value, (int, float)) and math.isfinite(value):
        number = float(value)
        return repr(int(number)) if number.is_integer() and abs(number) < 2 ** 53 else repr(number)
    return None


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def extraction_key(value: Any) -> str:
    """The form-free key of an extracted answer (see the module docstring)."""
    number = _number_text(value)
    if number is not None:
        return "number:" + number
    return canonical_json(_plain(value))


def benchmark_routes(release: Any) -> dict[str, str]:
    """``benchmark -> route`` from the release's suite."""
    from trace_lib.release.suite import load_suite

    return {b.key: b.route for b in load_suite(release).benchmarks}
