"""Typed field reads for check groups: a missing or mistyped field becomes a finding, never an exception.

``Fields(out, file)`` is bound to one document; ``get(obj, key, where, kind)`` returns the value, or None after
recording ``FILE: where.key: <why> (expected <kind>, found <value>)``. Kinds are the closed set in :class:`Kind`.
"""

from __future__ import annotations

import enum
import math
import re
from typing import Any, Iterable

from trace_lib.preflight.context import GroupOutcome

_HEX40 = re.compile(r"[0-9a-f]{40}")


class _Missing:
    """A value that a referenced document does not hold (unreadable file, absent field); falsy."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "<missing>"


#: Stands for a value another document does not provide; an expectation built from it is not evaluated (the
#: owning group reports the gap), so one broken file never floods dependent groups with "expected None".
MISSING: Any = _Missing()


def unknown(value: Any) -> bool:
    """Whether ``value`` is, or directly contains, :data:`MISSING`."""
    if value is MISSING:
        return True
    if isinstance(value, dict):
        return any(v is MISSING for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(v is MISSING for v in value)
    return False
_HEX64 = re.compile(r"[0-9a-f]{64}")


class Kind(enum.Enum):
    """What a field must hold."""

    ANY = "any value"
    TEXT = "a non-empty string"
    COUNT = "a positive integer"
    NONNEG = "a non-negative integer"
    NUMBER = "a finite number"
    BOOL = "a boolean"
    LIST = "an array"
    OBJECT = "an object"
    SHA256 = "a SHA-256 (64 lowercase hex)"
    COMMIT = "an immutable commit (40 lowercase hex)"
    URL = "an HTTP(S) URL"


def is_kind(value: Any, kind: Kind) -> bool:
    """Whether ``value`` is of ``kind`` (bools are never numbers)."""
    if kind is Kind.ANY:
        return True
    if kind is Kind.TEXT:
        return isinstance(value, str) and bool(value.strip())
    if kind in (Kind.COUNT, Kind.NONNEG):
        ok = isinstance(value, int) and not isinstance(value, bool)
        return ok and (value > 0 if kind is Kind.COUNT else value >= 0)
    if kind is Kind.NUMBER:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind is Kind.BOOL:
        return isinstance(value, bool)
    if kind is Kind.LIST:
        return isinstance(value, list)
    if kind is Kind.OBJECT:
        return isinstance(value, dict)
    if kind is Kind.SHA256:
        return isinstance(value, str) and _HEX64.fullmatch(value) is not None
    if kind is Kind.COMMIT:
        return isinstance(value, str) and _HEX40.fullmatch(value) is not None
    if kind is Kind.URL:
        return isinstance(value, str) and value.startswith(("https://", "http://")) and len(value) > 8
    raise AssertionError(kind)


def hashable(value: Any) -> Any:
    """``value`` itself when it can be a set member or dict key, else its ``repr`` (a malformed document can put
    an array or object where an identity belongs; that must become a finding, never a TypeError)."""
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


def join(where: str, key: str | int) -> str:
    """``where.key`` (or ``where[key]`` for an index), without a leading dot."""
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON/YAML values where a bool never equals a number (Python's ``True == 1`` does)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


class Fields:
    """Typed reads from one document of one file, recording findings into ``out``."""

    def __init__(self, out: GroupOutcome, file: str) -> None:
        self.out = out
        self.file = file

    def fail(self, field: str | None, message: str, **parts: Any) -> None:
        self.out.fail(self.file, message, field=field or None, **parts)

    def get(self, obj: Any, key: str, where: str = "", kind: Kind = Kind.ANY) -> Any | None:
        """``obj[key]`` if ``obj`` is an object holding ``key`` of ``kind``; else None and one finding."""
        path = join(where, key)
        if not isinstance(obj, dict):
            self.fail(where, "must be an object", found=type(obj).__name__)
            return None
        if key not in obj:
            self.fail(path, "required field is missing")
            return None
        value = obj[key]
        if not is_kind(value, kind):
            self.fail(path, f"must be {kind.value}", found=value)
            return None
        return value

    def items(self, obj: Any, key: str, where: str = "", kind: Kind = Kind.OBJECT) -> list[tuple[int, Any]]:
        """``(index, element)`` of the array ``obj[key]`` whose elements are of ``kind`` (bad ones recorded)."""
        seq = self.get(obj, key, where, Kind.LIST)
        if seq is None:
            return []
        good = []
        for i, element in enumerate(seq):
            if is_kind(element, kind):
                good.append((i, element))
            else:
                self.fail(join(join(where, key), i), f"must be {kind.value}", found=element)
        return good

    def expect(self, field: str, expected: Any, found: Any, message: str = "differs") -> bool:
        """Record ``message (expected, found)`` unless ``found`` equals ``expected`` (JSON equality).

        An ``expected`` that is (or holds) :data:`MISSING` is not evaluated; a ``found`` that is MISSING is
        reported as a missing field."""
        if unknown(expected):
            return True
        if found is MISSING:
            self.fail(field, "required field is missing", expected=expected)
            return False
        if json_equal(expected, found):
            return True
        self.fail(field, message, expected=expected, found=found)
        return False

    def expect_keys(self, field: str, expected: Iterable[Any], found: Iterable[Any], noun: str) -> bool:
        """Record missing and unexpected members of a set (each named), unless the sets are equal."""
        want, have = {hashable(x) for x in expected}, {hashable(x) for x in found}
        ok = True
        for item in sorted(want - have, key=str):
            self.fail(field, f"{noun} missing", expected=item)
            ok = False
        for item in sorted(have - want, key=str):
            self.fail(field, f"unexpected {noun}", found=item)
            ok = False
        return ok
