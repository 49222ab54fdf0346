"""Validation of one Qwen3 judge output against the raw response it read.

``validate_judge_output(output, raw_response=..., answer_type=...)`` returns ``{"status", "answer", "evidence"}`` or
raises :class:`JudgeOutputError` (an invalid attempt: the retry ladder moves on). A valid output is one strict JSON
object (optionally in exactly one lower-case ```` ```json ```` fence) with keys ``status``/``answer``/``evidence``;
an abstention (``missing``/``ambiguous``) has a null answer and empty evidence; an ``ok`` answer has the declared
type, and its evidence is a verbatim, case-sensitive substring of the response that supports the answer.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from trace_lib.jsonio import DuplicateKey, NonFinite, loads_strict

_SINGLE_FENCE = re.compile(r"\A```json[ \t]*\r?\n(?P<body>[\s\S]*?)\r?\n```[ \t]*\Z")
_NUMERIC_TOKEN = re.compile(r"(?<![\w.])[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?![\w.])")
JUDGE_STATUSES = frozenset({"ok", "missing", "ambiguous"})  # a set: an unhashable status raises TypeError, as upstream


class JudgeOutputError(ValueError):
    """A judge output (or stored judge record) outside the contract; the message says which rule failed."""


def strict_object(text: str, *, source: str) -> dict[str, Any]:
    """One strict JSON object. Raises JudgeOutputError (``<source>: invalid JSON: ...`` or a key/constant rule)."""
    try:
        value = loads_strict(text)
    except DuplicateKey as exc:
        raise JudgeOutputError(f"duplicate key: {exc.key}") from None
    except NonFinite as exc:
        raise JudgeOutputError(f"non-finite JSON constant: {exc.name}") from None
    except Exception as exc:
        raise JudgeOutputError(f"{source}: invalid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise JudgeOutputError(f"{source}: expected a JSON object")
    return value


def _unfence(text: str) -> str:
    stripped = text.strip()
    if not stripped.startswith("```"):
        return stripped
    match = _SINGLE_FENCE.fullmatch(stripped)
    if match is None:
        raise JudgeOutputError("judge output: invalid JSON fence envelope")
    return match.group("body").strip()


def _typed_answer(value: Any, answer_type: str) -> Any:
    if answer_type == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise JudgeOutputError("answer is not a JSON integer")
        return int(value)
    if answer_type == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise JudgeOutputError("answer is not a JSON number")
        if isinstance(value, float) and not math.isfinite(value):
            raise JudgeOutputError("answer is not finite")
        try:
            number = Decimal(str(value))
            as_float = float(number)
        except (InvalidOperation, OverflowError, ValueError) as exc:
            raise JudgeOutputError("answer is outside the supported finite range") from exc
        if not number.is_finite() or not math.isfinite(as_float):
            raise JudgeOutputError("answer is not finite")
        if number != 0 and as_float == 0.0:
            raise JudgeOutputError("answer is outside the supported finite range")
        return int(number) if number == number.to_integral_value() else as_float
    if answer_type == "option_letter":
        if not isinstance(value, str) or re.fullmatch(r"[A-Z]", value) is None:
            raise JudgeOutputError("answer is not one uppercase option letter A-Z")
        return value
    if answer_type == "string":
        if not isinstance(value, str):
            raise JudgeOutputError("answer is not a JSON string")
        if not value.strip():
            raise JudgeOutputError("answer string is empty")
        return value
    raise JudgeOutputError(f"unsupported answer type: {answer_type!r}")


def evidence_supports(evidence: str, answer: Any, answer_type: str) -> bool:
    """Whether ``evidence`` contains ``answer`` as a standalone letter, an equal numeric token or a whole phrase."""
    if answer_type == "option_letter":
        return re.search(rf"(?<![A-Za-z]){re.escape(str(answer))}(?![A-Za-z])", evidence, re.IGNORECASE) is not None
    if answer_type in ("integer", "number"):
        expected = Decimal(str(answer))
        for match in _NUMERIC_TOKEN.finditer(evidence):
            try:
                token = Decimal(match.group(0))
            except InvalidOperation:
                continue
            if token.is_finite() and token == expected:
                return True
        return False
    if answer_type == "string":
        needle = str(answer).strip().casefold()
        haystack = evidence.casefold()
        start = 0
        while True:
            index = haystack.find(needle, start)
            if index < 0:
                return False
            end = index + len(needle)
            before_ok = index == 0 or not (needle[0].isalnum() and haystack[index - 1].isalnum())
            after_ok = end == len(haystack) or not (needle[-1].isalnum() and haystack[end].isalnum())
            if before_ok and after_ok:
                return True
            start = index + 1
    return False


def validate_judge_output(output: str, *, raw_response: str, answer_type: str) -> dict[str, Any]:
    """The validated ``{"status", "answer", "evidence"}`` of one judge output. Raises JudgeOutputError."""
    payload = strict_object(_unfence(output), source="judge output")
    if set(payload) != {"status", "answer", "evidence"}:
        raise JudgeOutputError("output keys differ from status/answer/evidence")
    status = payload["status"]
    if status not in JUDGE_STATUSES:
        raise JudgeOutputError("invalid status")
    evidence = payload["evidence"]
    if not isinstance(evidence, str):
        raise JudgeOutputError("evidence is not a string")
    if status != "ok":
        if payload["answer"] is not None or evidence != "":
            raise JudgeOutputError("abstention must use null answer and empty evidence")
        return {"status": status, "answer": None, "evidence": ""}
    answer = _typed_answer(payload["answer"], answer_type)
    if not evidence or evidence not in raw_response:
        raise JudgeOutputError("evidence is not a verbatim response substring")
    if not evidence_supports(evidence, answer, answer_type):
        raise JudgeOutputError("evidence does not contain the extracted answer")
    return {"status": "ok", "answer": answer, "evidence": evidence}
