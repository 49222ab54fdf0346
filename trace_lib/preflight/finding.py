"""One preflight finding: a failed (or not checked) expectation about one release file, in one line.

The line form is the shared error form (:func:`trace_lib.errors.render_line`):
``FILE: FIELD or IDENTITY: what is wrong (expected X, found Y)``; the JSON form carries the same parts.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

from trace_lib.errors import UNSET, render_line


class Severity(str, enum.Enum):
    """FAIL: the release breaks an expectation. NOT_CHECKED: the expectation could not be evaluated here."""

    FAIL = "fail"
    NOT_CHECKED = "not_checked"


@dataclass(frozen=True)
class Finding:
    """One expectation about one release file that failed or could not be checked."""

    file: str  # release-relative path
    message: str
    field: str | None = None  # dotted field path naming the identities involved, e.g. scores.x[model, seed 42]
    expected: Any = UNSET
    found: Any = UNSET
    severity: Severity = Severity.FAIL

    def line(self) -> str:
        """``FILE: FIELD: message (expected X, found Y)``."""
        return render_line(self.message, file=self.file, field=self.field, expected=self.expected, found=self.found)

    def to_json(self) -> dict[str, Any]:
        """The finding as a JSON-safe object (``expected``/``found`` only where they apply)."""
        out: dict[str, Any] = {"severity": self.severity.value, "file": self.file, "field": self.field}
        out["message"] = self.message
        for name in ("expected", "found"):
            value = getattr(self, name)
            if value is not UNSET:
                out[name] = _json_safe(value)
        out["line"] = self.line()
        return out


def _json_safe(value: Any) -> Any:
    """``value`` with non-finite floats and non-JSON types turned into strings (the report stays strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [_json_safe(v) for v in items]
    return repr(value)
