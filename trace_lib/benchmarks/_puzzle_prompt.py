"""The answer-letter instruction PuzzleVQA and VisualPuzzles append (byte-identical in both pinned builders).

Source: ``VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py`` (``PuzzleVQA.build_prompt``,
``VisualPuzzles.build_prompt``). Note the missing space in ``format:'Answer: $LETTER'``.
"""

from __future__ import annotations

import string
from typing import Any, Iterable

ANSWER_LETTER_TAIL = (
    "\nSolve the multiple-choice question and then answer with the option letter from the given choices. "
    "The last line of your response should be of the following format:"
    "'Answer: $LETTER' (without quotes) where LETTER is one of options. "
    "Think step by step before answering."
)


def paren_letter_lines(items: Iterable[Any]) -> str:
    """``(A) item0\\n(B) item1...`` (no trailing newline); items lettered by position."""
    return "\n".join(f"({string.ascii_uppercase[i]}) {item}" for i, item in enumerate(items))
