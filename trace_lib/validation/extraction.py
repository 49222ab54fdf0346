"""Deterministic, ground-truth-blind answer extraction for TRACE validation (``trace-validation-answer-extraction-v1``).

``extract(response, answer_type) -> Extraction`` sees only the raw response and the declared answer type, never
the question, image, choices or ground truth. It mirrors upstream's extractor
(``maveryn/trace@rlvr:rlvr/evaluation/trace_validation/answer_extraction.py``) behaviour for behaviour, including
its quirks:

- candidates come from answer tags, code fences, ``final json:`` sections and balanced ``{...}`` objects
  (structured), then ``final answer:`` / ``answer:`` lines, ``\\boxed{}`` and, for option letters, a bare last
  line (explicit);
- a structured candidate ending at the right-stripped end of the response is *terminal*; if any terminal
  structured candidate exists (accepted or not), only accepted terminal ones count, so a rejected terminal
  answer hides earlier valid ones (status ``missing``);
- an unclosed ``{`` in prose swallows every later balanced object; ``The answer is 7`` is not a pattern;
  markdown (``**B**``) and ``$5$`` are not stripped; numbers have no tolerance and no thousands separators;
- candidates disagreeing on their canonical value make the row ``ambiguous`` (strings compare case-sensitively).

The status is ``resolved`` (upstream's ``found``; the member compares equal to both spellings), ``missing`` or
``ambiguous``; only ``missing`` and ``ambiguous`` rows go to the judge.
``Extraction.as_dict()`` is byte-compatible with upstream's ``AnswerExtractionResult.as_dict()``.
"""

from __future__ import annotations

import ast
import enum
import json
import math
import re
import warnings
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from trace_lib.jsonio import DuplicateKey, loads_strict

#: Contract version recorded in every scored row and judge request.
EXTRACTION_VERSION = "trace-validation-answer-extraction-v1"
#: The four answer types of the validation split (``answer_gt.type``).
ANSWER_TYPES = ("integer", "number", "option_letter", "string")

TERMINAL_STRUCTURED = "terminal_structured"
STRUCTURED = "structured"
EXPLICIT = "explicit"

#: Preference among candidates that agree (lower first), after terminal-structured ones.
ROUTE_RANK = {
    "balanced_object": 0,
    "code_fence": 1,
    "answer_tag": 2,
    "structured_section": 3,
    "final_answer": 4,
    "answer_line": 5,
    "boxed": 6,
    "terminal_option": 7,
}


class ExtractionStatus(str, enum.Enum):
    """Outcome of deterministic extraction: ``resolved``, ``missing`` or ``ambiguous``.

    ``RESOLVED`` is upstream's ``found`` (``FOUND`` is the same member, it compares equal to both spellings, and
    :meth:`Extraction.as_dict` writes ``found`` as upstream's records do).
    """

    RESOLVED = "resolved"
    MISSING = "missing"
    AMBIGUOUS = "ambiguous"
    FOUND = "resolved"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str) and not isinstance(other, ExtractionStatus) and other == "found":
            return self.value == "resolved"
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return self.value

    @property
    def upstream(self) -> str:
        """Upstream's spelling (``found`` | ``missing`` | ``ambiguous``), as stored in scored rows."""
        return "found" if self.value == "resolved" else self.value


# -- patterns (the upstream grammar; each comment says what it accepts) ------------------------------------------
# <answer>..</answer>, <final_answer>, <final-answer>, <finalanswer>; closing tag repeats the name; shortest body.
_TAG = re.compile(r"<(?P<tag>answer|final[_-]?answer)>\s*(?P<body>.*?)\s*</(?P=tag)>", re.IGNORECASE | re.DOTALL)
# ``` [json|python|py] <newline> body ```
_FENCE = re.compile(r"```[ \t]*(?P<language>json|python|py)?[ \t]*\r?\n(?P<body>.*?)```", re.IGNORECASE | re.DOTALL)
# "final json:", "final answer json:", "answer json:" (gaps: spaces/underscores/hyphens) at a line start.
_SECTION = re.compile(
    r"^[ \t]*(?:final[ _-]*json|final[ _-]*answer[ _-]*json|answer[ _-]*json)[ \t]*:[ \t]*(?P<inline>[^\r\n]*)",
    re.IGNORECASE | re.MULTILINE,
)
_FINAL_ANSWER_LINE = re.compile(
    r"^[ \t]*(?:the[ \t]+)?final[ \t]+answer[ \t]*(?:is|=|:|：)[ \t]*(?P<answer>[^\r\n]+?)\s*$",
    re.IGNORECASE | re.MULTILINE,
)
_ANSWER_LINE = re.compile(r"^[ \t]*answer[ \t]*(?:is|=|:|：)[ \t]*(?P<answer>[^\r\n]+?)\s*$", re.IGNORECASE | re.MULTILINE)
_BOXED_OPEN = re.compile(r"\\boxed\s*\{", re.IGNORECASE)
_ATOMIC_NUMBER = re.compile(r"^[+-]?(?:(?:\d+(?:\.\d*)?)|(?:\.\d+))(?:[eE][+-]?\d+)?$")
_OPTION_FORM = re.compile(r"^(?:option[ \t]+)?(?:[\(\[]\s*)?([A-Za-z])(?:\s*[\)\]])?[.!?]?$", re.IGNORECASE)
_NONEMPTY_LINE = re.compile(r"(?m)^\s*(\S[^\r\n]*?)\s*$")
_WRAPPERS = (
    re.compile(r"\\(?:text|mathrm|mathbf)\s*\{\s*(.*?)\s*\}", re.IGNORECASE | re.DOTALL),
    re.compile(r"`\s*(.*?)\s*`", re.IGNORECASE | re.DOTALL),
)


# -- records -------------------------------------------------------------------------------------------------------
class _UpstreamNames:
    """Upstream's attribute names for the ``raw`` and ``typed`` fields of a candidate and of an extraction."""

    raw: Any
    typed: Any

    @property
    def raw_candidate(self) -> Any:
        return self.raw

    @property
    def typed_candidate(self) -> Any:
        return self.typed


@dataclass(frozen=True)
class Candidate(_UpstreamNames):
    """One candidate answer seen in a response, typed or rejected with a reason."""

    route: str
    priority: str  # terminal_structured | structured | explicit
    raw: Any
    typed: int | float | str | None
    canonical: str | None
    start: int
    end: int
    parser: str  # json | python_literal | text
    rejection: str | None = None

    @property
    def accepted(self) -> bool:
        return self.rejection is None

    def as_dict(self) -> dict[str, Any]:
        """Upstream's ``CandidateProvenance.as_dict()`` form."""
        return {
            "route": self.route,
            "priority": self.priority,
            "raw_candidate": json_safe(self.raw),
            "typed_candidate": json_safe(self.typed),
            "canonical_candidate": self.canonical,
            "source_start": self.start,
            "source_end": self.end,
            "parser": self.parser,
            "accepted": self.accepted,
            "rejection_reason": self.rejection,
        }

    # upstream attribute names, for callers written against the upstream record (and those of _UpstreamNames)
    @property
    def canonical_candidate(self) -> str | None:
        return self.canonical

    @property
    def rejection_reason(self) -> str | None:
        return self.rejection


@dataclass(frozen=True)
class Extraction(_UpstreamNames):
    """Result of :func:`extract`: status, the typed value (``None`` unless found), why, and every candidate."""

    answer_type: str
    status: ExtractionStatus
    route: str  # the chosen candidate's route, or "missing" / "ambiguous"
    raw: Any
    typed: int | float | str | None
    reason: str | None  # None when found; otherwise why nothing was resolved
    candidates: tuple[Candidate, ...]
    version: str = EXTRACTION_VERSION

    @property
    def resolved(self) -> bool:
        return self.status is ExtractionStatus.FOUND

    @property
    def candidate_provenance(self) -> tuple[Candidate, ...]:
        return self.candidates

    def as_dict(self) -> dict[str, Any]:
        """Upstream's ``AnswerExtractionResult.as_dict()`` form (what scored rows store)."""
        return {
            "version": self.version,
            "answer_type": self.answer_type,
            "status": self.status.upstream,
            "route": self.route,
            "raw_candidate": json_safe(self.raw),
            "typed_candidate": json_safe(self.typed),
            "candidate_provenance": [c.as_dict() for c in self.candidates],
        }


def json_safe(value: Any) -> Any:
    """A deterministic JSON-safe form: sets sorted, tuples as lists, non-finite floats and others as ``repr``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, (set, frozenset)):
        items = [json_safe(item) for item in value]
        return sorted(items, key=lambda item: json.dumps(item, ensure_ascii=False, sort_keys=True))
    return repr(value)


# -- parsing structured bodies ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Parsed:
    value: Any
    parser: str


def _literal(text: str) -> Any:
    """``ast.literal_eval`` that refuses repeated dict keys, ``**`` unpacking and unhashable keys."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # "invalid decimal literal" noise from model prose
        tree = ast.parse(text, mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys: set[Any] = set()
            for key_node in node.keys:
                if key_node is None:
                    raise ValueError("dict unpacking")
                key = ast.literal_eval(key_node)
                try:
                    if key in keys:
                        raise DuplicateKey(repr(key))
                    keys.add(key)
                except TypeError as exc:
                    raise ValueError("unhashable key") from exc
    return ast.literal_eval(tree.body)


def _parse(text: str) -> _Parsed | None:
    """Strict JSON, else a Python literal; ``None`` when neither parses (a duplicate JSON key: no fallback)."""
    body = text.strip()
    if not body:
        return None
    try:
        value = loads_strict(body)
    except DuplicateKey:
        return None
    except (json.JSONDecodeError, TypeError, ValueError):
        try:
            return _Parsed(_literal(body), "python_literal")
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            return None
    return _Parsed(value, "json")


def _answer_values(value: Any) -> list[Any]:
    """Values of every key that reads ``answer`` after strip + casefold, in key order."""
    if not isinstance(value, dict):
        return []
    return [item for key, item in value.items() if isinstance(key, str) and key.strip().casefold() == "answer"]


# -- scanning -----------------------------------------------------------------------------------------------------
def _object_spans(text: str) -> list[tuple[int, int]]:
    """Outermost balanced ``{...}`` spans; quotes count only inside an object; an unclosed ``{`` ends the scan."""
    spans: list[tuple[int, int]] = []
    depth = 0
    start = 0
    quote: str | None = None
    escaped = False
    for index, char in enumerate(text):
        if depth == 0:
            if char == "{":
                start, depth = index, 1
            continue
        if quote is not None:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = None
            continue
        if char in ("'", '"'):
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                spans.append((start, index + 1))
    return spans


def _box_end(text: str, content_start: int) -> int | None:
    """Index just past the ``}`` closing a box whose content starts at ``content_start`` (plain brace count)."""
    depth = 1
    for index in range(content_start, len(text)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def _strip_wrappers(value: str) -> str:
    """Unwrap a whole-text ``\\boxed{..}``, then one ``\\text{}``/``\\mathrm{}``/``\\mathbf{}`` or backtick pair."""
    text = value.strip()
    if not text:
        return text
    brace = text.find("{")
    if brace >= 0 and _BOXED_OPEN.fullmatch(text[: brace + 1]):
        if _box_end(text, brace + 1) == len(text):
            text = text[brace + 1 : -1].strip()
    for wrapper in _WRAPPERS:
        match = wrapper.fullmatch(text)
        if match is not None:
            return match.group(1).strip()
    return text


def _text_value(value: str, answer_type: str) -> Any:
    """A text candidate after unwrapping; a parsed literal replaces it when it has the right kind of type."""
    text = _strip_wrappers(value)
    if not text:
        return text
    parsed = _parse(text)
    if parsed is None:
        return text
    if answer_type == "string":
        return parsed.value if isinstance(parsed.value, str) else text
    return parsed.value if isinstance(parsed.value, (str, int, float, bool)) else text


# -- typing ------------------------------------------------------------------------------------------------------
def _decimal(value: Any) -> tuple[Decimal | None, str | None]:
    if isinstance(value, bool):
        return None, "boolean_not_allowed"
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            return None, "nonfinite_not_allowed"
        text = repr(value)
    elif isinstance(value, str):
        text = value.strip()
        if not _ATOMIC_NUMBER.fullmatch(text):
            if text.endswith(".") and _ATOMIC_NUMBER.fullmatch(text[:-1]):
                text = text[:-1]  # one sentence period after a number: "2.5."
            else:
                return None, "not_an_atomic_number"
    else:
        return None, "numeric_scalar_required"
    try:
        number = Decimal(text)
    except InvalidOperation:
        return None, "not_an_atomic_number"
    try:
        as_float = float(number)
    except (OverflowError, ValueError):
        return None, "nonfinite_not_allowed"
    if not number.is_finite() or not math.isfinite(as_float):
        return None, "nonfinite_not_allowed"
    if number != 0 and as_float == 0.0:
        return None, "number_out_of_range"
    return number, None


def _type_value(raw: Any, answer_type: str, parser: str) -> tuple[Any, str | None, str | None]:
    """``(typed, canonical, rejection)``; structured values keep their parsed type, text ones are unwrapped."""
    value = _text_value(raw, answer_type) if isinstance(raw, str) and parser == "text" else raw
    if answer_type in ("integer", "number"):
        number, rejection = _decimal(value)
        if number is None:
            return None, None, rejection
        integral = number == number.to_integral_value()
        if answer_type == "integer" and not integral:
            return None, None, "non_integral_number"
        typed: Any = int(number) if integral else float(number)
        canonical = str(number.normalize())
        if canonical in ("-0", "-0E+1") or number == 0:
            canonical = "0"
        return typed, canonical, None
    if isinstance(value, bool):
        return None, None, "boolean_not_allowed"
    if isinstance(value, float) and not math.isfinite(value):
        return None, None, "nonfinite_not_allowed"
    if answer_type == "option_letter":
        if not isinstance(value, str):
            return None, None, "option_letter_string_required"
        match = _OPTION_FORM.fullmatch(value.strip())
        if match is None:
            return None, None, "not_an_atomic_option_letter"
        letter = match.group(1).upper()
        return letter, letter, None
    if not isinstance(value, str):
        return None, None, "string_value_required"
    text = value.strip()
    if not text:
        return None, None, "empty_string"
    return text, text, None


def _candidate(route: str, priority: str, raw: Any, start: int, end: int, parser: str, answer_type: str) -> Candidate:
    typed, canonical, rejection = _type_value(raw, answer_type, parser)
    return Candidate(route, priority, raw, typed, canonical, start, end, parser, rejection)


def _from_body(
    parsed: _Parsed | None,
    fallback: str | None,
    *,
    scalar_ok: bool,
    route: str,
    terminal: bool,
    start: int,
    end: int,
    answer_type: str,
) -> list[Candidate]:
    """Candidates of one structured body: its answer keys, else (where allowed) the scalar or the plain text."""
    if parsed is None:
        if not (scalar_ok and fallback is not None):
            return []
        if fallback.lstrip().startswith(("{", "[", '"', "'")):
            return []  # malformed structured data is never reread as text
    priority = TERMINAL_STRUCTURED if terminal else STRUCTURED
    if parsed is not None:
        answers = _answer_values(parsed.value)
        if answers:
            return [_candidate(route, priority, a, start, end, parsed.parser, answer_type) for a in answers]
        if not scalar_ok or isinstance(parsed.value, (dict, list, tuple, set)):
            return []
        return [_candidate(route, priority, parsed.value, start, end, parsed.parser, answer_type)]
    return [_candidate(route, priority, (fallback or "").strip(), start, end, "text", answer_type)]


def _structured(text: str, answer_type: str) -> list[Candidate]:
    found: list[Candidate] = []
    terminal_end = len(text.rstrip())
    for match in _TAG.finditer(text):
        body = match.group("body").strip()
        found += _from_body(
            _parse(body), body, scalar_ok=True, route="answer_tag", terminal=match.end() == terminal_end,
            start=match.start(), end=match.end(), answer_type=answer_type,
        )
    for match in _FENCE.finditer(text):
        body = match.group("body").strip()
        terminal = match.end() == terminal_end
        found += _from_body(
            _parse(body), body, scalar_ok=terminal, route="code_fence", terminal=terminal,
            start=match.start(), end=match.end(), answer_type=answer_type,
        )
    for match in _SECTION.finditer(text):
        body_start = match.start("inline") if match.group("inline").strip() else match.end()
        parsed = _parse(text[body_start:terminal_end].strip())
        found += _from_body(
            parsed, None, scalar_ok=True, route="structured_section", terminal=parsed is not None,
            start=match.start(), end=terminal_end, answer_type=answer_type,
        )
    for start, end in _object_spans(text):
        found += _from_body(
            _parse(text[start:end]), None, scalar_ok=False, route="balanced_object", terminal=end == terminal_end,
            start=start, end=end, answer_type=answer_type,
        )
    return found


def _explicit(text: str, answer_type: str) -> list[Candidate]:
    found: list[Candidate] = []
    for route, pattern in (("final_answer", _FINAL_ANSWER_LINE), ("answer_line", _ANSWER_LINE)):
        for match in pattern.finditer(text):
            raw = match.group("answer").strip()
            found.append(_candidate(route, EXPLICIT, raw, match.start(), match.end(), "text", answer_type))
    for match in _BOXED_OPEN.finditer(text):
        end = _box_end(text, match.end())
        if end is not None:
            raw = text[match.end() : end - 1].strip()
            found.append(_candidate("boxed", EXPLICIT, raw, match.start(), end, "text", answer_type))
    if answer_type == "option_letter":
        lines = list(_NONEMPTY_LINE.finditer(text.rstrip()))
        if lines:
            last = lines[-1]
            raw = last.group(1).strip()
            if _OPTION_FORM.fullmatch(raw):
                found.append(_candidate("terminal_option", EXPLICIT, raw, last.start(), last.end(), "text", answer_type))
    return found


def _deduplicate(candidates: list[Candidate]) -> tuple[Candidate, ...]:
    """Sort by position, route and raw text; drop exact repeats (same span, route, value and verdict)."""
    kept: list[Candidate] = []
    seen: set[tuple[Any, ...]] = set()
    for cand in sorted(candidates, key=lambda c: (c.start, c.end, c.route, repr(c.raw))):
        key = (cand.route, cand.priority, repr(cand.raw), cand.start, cand.end, cand.canonical, cand.rejection)
        if key not in seen:
            seen.add(key)
            kept.append(cand)
    return tuple(kept)


def _missing_reason(candidates: tuple[Candidate, ...], terminal: list[Candidate]) -> str:
    if not candidates:
        return "no_candidates"
    if terminal:
        return "terminal_structured_rejected:" + ",".join(sorted({str(c.rejection) for c in terminal}))
    return "all_candidates_rejected:" + ",".join(sorted({str(c.rejection) for c in candidates}))


def extract(response: str | None, answer_type: str) -> Extraction:
    """Extract one typed answer from ``response`` for ``answer_type``, blind to the ground truth.

    Raises:
        ValueError: ``answer_type`` (lower-cased, stripped) is not one of :data:`ANSWER_TYPES`.
        TypeError: ``response`` is neither a string nor ``None``.
    """
    kind = str(answer_type).strip().lower()
    if kind not in ANSWER_TYPES:
        raise ValueError(f"answer_type must be one of {sorted(ANSWER_TYPES)!r}; got {answer_type!r}")
    if response is None or not str(response).strip():
        return Extraction(kind, ExtractionStatus.MISSING, "missing", None, None, "no_candidates", ())
    if not isinstance(response, str):
        raise TypeError(f"response must be a string or None; got {type(response).__name__}")

    candidates = _deduplicate(_structured(response, kind) + _explicit(response, kind))
    terminal = [c for c in candidates if c.priority == TERMINAL_STRUCTURED]
    pool = [c for c in (terminal or candidates) if c.accepted]
    if not pool:
        reason = _missing_reason(candidates, terminal)
        return Extraction(kind, ExtractionStatus.MISSING, "missing", None, None, reason, candidates)
    values = {c.canonical for c in pool}
    if len(values) != 1:
        reason = "conflicting_candidates:" + ",".join(sorted(str(v) for v in values))
        return Extraction(kind, ExtractionStatus.AMBIGUOUS, "ambiguous", None, None, reason, candidates)
    chosen = min(
        pool,
        key=lambda c: (0 if c.priority == TERMINAL_STRUCTURED else 1, ROUTE_RANK.get(c.route, 99), -c.end),
    )
    return Extraction(kind, ExtractionStatus.FOUND, chosen.route, chosen.raw, chosen.typed, None, candidates)
