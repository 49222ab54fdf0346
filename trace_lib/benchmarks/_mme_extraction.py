"""How MME-Reasoning accepts a judge extraction: TRACE's choice normalisation and the JSON validity rule.

Mirrors ``maveryn/trace@rlvr:rlvr/evaluation/scripts/run_mme_reasoning_eval.py`` (``_normalize_choice_extraction``,
``_validate_extraction``) and ``VLMEvalKit@a8b12bf1:vlmeval/dataset/utils/mme_reasoning.py``
(``extract_json_from_response``).
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from typing import Any

#: The sentinel for "the response selects no option" (never equal to a gold answer).
NO_CHOICE = "__MME_NO_CHOICE__"
#: VLMEvalKit's API failure text; an extraction containing it is invalid.
API_FAILURE = "Failed to obtain answer via API."
#: Prompts whose extraction is free text (no JSON check).
FREE_TEXT_PROMPTS = frozenset({"open_question_prompt", "points24_prompt"})

#: ``extract_json_from_response``: the first pattern that matches anywhere decides (DOTALL).
_JSON_FENCES = (
    re.compile(r"```json\s*(.*?)\s*```", re.S),
    re.compile(r"```\s*(.*?)\s*```", re.S),
    re.compile(r"```JSON\s*(.*?)\s*```", re.S),
)
_PLACEHOLDER = re.compile(r"\?(?:(?:\s*,\s*|\s+)\?)*")
_REPEATED_LABEL = re.compile(r"([A-Ga-g])\s*(?:\r?\n)+\s*Extracted answer:\s*([A-Ga-g])", re.I)
_NUMERIC = re.compile(r"[+-]?\d+(?:\.\d+)?")
_BOXED_COMMAND = re.compile(r"\\boxed\{\\[A-Za-z]+\}")
_COMPACT_LETTERS = re.compile(r"[A-G]{2,7}")
_ONE_LETTER = re.compile(r"[A-Z]")
_PREFIXED = re.compile(r"([A-Za-z])\s*[.)]\s*(.*)", re.S)
_OTHER_LABEL = re.compile(r"(?:^|[\s,;/])(?:or|and)?\s*[A-Za-z]\s*[.)](?:\s|$)", re.I)


def literal_eval_quietly(text: str) -> Any:
    """``ast.literal_eval`` without the SyntaxWarnings odd judge text triggers (e.g. ``3a``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.literal_eval(text)


def extract_json_from_response(text: str) -> str | None:
    """The content of the first fenced block (```json, ```, ```JSON in that order), or None."""
    for fence in _JSON_FENCES:
        match = fence.search(text)
        if match:
            return match.group(1)
    return None


def normalize_choice(output: str) -> str | None:
    """``_normalize_choice_extraction``: ``A`` / ``A,C`` / the no-choice sentinel / the raw text; None if empty."""
    text = str(output or "").strip()
    if not text:
        return None
    folded = re.sub(r"\s+", " ", text).strip().rstrip(".!").casefold()
    if folded in ("none", "none of the above") or folded.startswith(("none of the given options ",
                                                                       "none of the options ")):
        return NO_CHOICE
    placeholder = text
    if text.startswith("[") or text.startswith("("):
        closing = "]" if text.startswith("[") else ")"
        if not text.endswith(closing) or any(token in text[1:-1] for token in "[]()"):
            placeholder = ""
        else:
            placeholder = text[1:-1].strip()
    elif any(token in text for token in "[]()"):
        placeholder = ""
    if placeholder and _PLACEHOLDER.fullmatch(placeholder):
        return NO_CHOICE
    repeated = _REPEATED_LABEL.fullmatch(text)
    if repeated is not None:
        first, second = (value.upper() for value in repeated.groups())
        return first if first == second else text
    if _NUMERIC.fullmatch(text):
        return text  # numeric option labels (2, 4, 44) compare like letters
    if _BOXED_COMMAND.fullmatch(text):
        return text
    try:
        parsed = literal_eval_quietly(text)
    except Exception:  # noqa: BLE001 - upstream catches everything here
        parsed = None
    if isinstance(parsed, (list, tuple)):
        values = [str(value).strip().upper() for value in parsed]
    else:
        inner = text.strip("[]() ")
        values = [part.strip().strip("\"'").upper() for part in inner.split(",")]
        if len(values) == 1 and _COMPACT_LETTERS.fullmatch(values[0]):
            letters = list(values[0])
            values = letters if len(set(letters)) == len(letters) else values
    if values and all(_ONE_LETTER.fullmatch(value) is not None for value in values):
        return ",".join(values)
    prefixed = _PREFIXED.fullmatch(text)
    if prefixed is not None:
        if _OTHER_LABEL.search(prefixed.group(2).strip()):
            return text
        return prefixed.group(1).upper()
    return text  # short option text, prose and conflicting labels are compared literally


def validate_extraction(prompt_id: str, output: str) -> tuple[bool, str]:
    """``_validate_extraction``: whether the judge output is usable for ``prompt_id``, and the value to keep."""
    if not str(output or "").strip():
        return False, output
    if API_FAILURE in output:
        return False, output
    if prompt_id == "choice_prompt":
        normalized = normalize_choice(output)
        return normalized is not None, normalized or output
    if prompt_id in FREE_TEXT_PROMPTS:
        return True, output
    try:
        json.loads(output)
        return True, output
    except Exception:  # noqa: BLE001 - any parse failure falls back to a fenced block
        fenced = extract_json_from_response(output)
        if fenced is None:
            return False, output
        try:
            json.loads(fenced)
            return True, fenced
        except Exception:  # noqa: BLE001
            return False, output
