"""JSON for every trace_lib file: one strict reader, one ``required`` lookup, canonical writers named by their bytes.

- :func:`loads_strict` refuses duplicate object keys (:class:`DuplicateKey`, from the one hook
  :func:`unique_object`), the non-finite constants ``NaN``/``Infinity`` (:class:`NonFinite`) and nesting deeper
  than the parser's recursion allows (:class:`TooDeep`); all are ``ValueError``, which callers turn into their
  own one-line errors.
- :func:`required` is the "this field must be present" lookup of release and manifest readers, :func:`json_object`
  and :func:`json_array` the "this document or field is an object / an array" checks.
- :func:`outside_strings` is the one scan of JSON string state (a double quote toggles it, a backslash escapes
  inside strings) behind the reward scorer's brace finder and the strict reader's error positions.
- Two canonical forms feed hashes, and both must stay byte-stable (sorted keys, compact separators, NaN refused):
  :func:`canonical_json_ascii` escapes non-ASCII (``\\u00e9``; the evaluation release, campaign and archive hashes)
  and :func:`canonical_json_utf8` keeps it (the TRACE-validation artifacts, as upstream's validation code writes
  them). They differ only for non-ASCII text; never swap one for the other.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, Mapping

from trace_lib.errors import InputError, ReleaseFileError, TraceReproError


#: The largest integer a trace_lib file may hold (int64, as pandas, pyarrow and numpy read it back).
MAX_INT = 2 ** 63 - 1


class DuplicateKey(ValueError):
    """A JSON object repeats ``key`` (never resolved by last-wins)."""

    def __init__(self, key: Any) -> None:
        super().__init__(key)
        self.key = key


class NonFinite(ValueError):
    """The text holds the non-finite constant ``name`` (``NaN``, ``Infinity`` or ``-Infinity``)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class HugeInteger(ValueError):
    """An integer too long for Python to read (its 4,300-digit limit)."""


class TooDeep(ValueError):
    """The text nests arrays or objects deeper than the parser can follow (Python's recursion limit)."""

    def __init__(self) -> None:
        super().__init__("arrays or objects nested too deeply")


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` that refuses a repeated key.

    Raises:
        DuplicateKey: the first repeated key.
    """
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def reject_constant(name: str) -> Any:
    """``parse_constant`` that refuses ``NaN``/``Infinity``.

    Raises:
        NonFinite: always.
    """
    raise NonFinite(name)


def outside_strings(text: str) -> Iterator[tuple[int, str, bool]]:
    """``(index, character, outside)`` for every character of ``text``; ``outside`` is False inside a JSON string
    and for the quote that opens one (a double quote anywhere toggles the state; a backslash escapes inside)."""
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            yield index, char, False
        elif char == '"':
            in_string = True
            yield index, char, False
        else:
            yield index, char, True


def loads_strict(text: str) -> Any:
    """Strict JSON: RFC 8259 without duplicate keys or non-finite constants.

    Raises:
        DuplicateKey, NonFinite, TooDeep, HugeInteger, json.JSONDecodeError: the first violation (all
            ``ValueError``).
    """
    try:
        return json.loads(text, object_pairs_hook=unique_object, parse_constant=reject_constant)
    except RecursionError:
        raise TooDeep() from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):  # Python's int-digits limit, not a JSON error
            raise HugeInteger() from None
        raise


def strict_error(exc: ValueError) -> str:
    """What a :func:`loads_strict` failure says in a one-line error (the caller names the file and field)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON at line {exc.lineno} column {exc.colno} ({exc.msg})"
    if isinstance(exc, DuplicateKey):
        return f"duplicate key {exc.key!r}"
    if isinstance(exc, NonFinite):
        return f"non-finite number {exc.name} is not valid JSON"
    if isinstance(exc, HugeInteger):
        return "holds an integer of more than 4,300 digits (no figure of trace-repro's is one)"
    return f"not strict JSON ({exc})"


def required(doc: Any, key: str, *, file: str, where: str = "",
             error: type[TraceReproError] = ReleaseFileError) -> Any:
    """``doc[key]``, or ``error("required field is missing")`` naming ``file`` and ``<where><key>``."""
    if not isinstance(doc, Mapping) or key not in doc:
        raise error("required field is missing", file=file, field=f"{where}{key}")
    return doc[key]


def json_type(value: Any) -> str:
    """The JSON type ``value`` was read as: ``object``, ``array``, ``string``, ``number``, ``boolean`` or ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object" if isinstance(value, Mapping) else type(value).__name__


def json_object(value: Any, *, file: str, field: str | None = None,
                error: type[TraceReproError] = InputError) -> dict[str, Any]:
    """``value`` when it is a JSON object: the one check of a document or field read as an object (where a
    ``.get`` on an array or ``null`` raised ``AttributeError``).

    Raises:
        InputError (or ``error``): ``FILE: FIELD: not a JSON object (found array)``.
    """
    if not isinstance(value, dict):
        raise error(f"not a JSON object (found {json_type(value)})", file=file, field=field)
    return value


def json_array(value: Any, *, file: str, field: str | None = None,
               error: type[TraceReproError] = InputError) -> list[Any]:
    """``value`` when it is a JSON array, as :func:`json_object` checks an object (where iterating a number raised
    ``TypeError`` and a string was taken one character at a time).

    Raises:
        InputError (or ``error``): ``FILE: FIELD: not a JSON array (found number)``.
    """
    if not isinstance(value, list):
        raise error(f"not a JSON array (found {json_type(value)})", file=file, field=field)
    return value


def canonical_json_ascii(value: Any) -> str:
    """Canonical JSON with non-ASCII escaped (``ensure_ascii=True``): sorted keys, compact, NaN refused."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def canonical_json_utf8(value: Any) -> str:
    """Canonical JSON with non-ASCII kept (``ensure_ascii=False``; UTF-8 when encoded): sorted keys, compact,
    NaN refused."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
