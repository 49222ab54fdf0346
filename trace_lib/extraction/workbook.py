"""Emulation of upstream's prediction-workbook round trip (``DataFrame.to_excel`` via XlsxWriter, then
``pandas.read_excel`` via openpyxl), which is part of the scoring input of most benchmarks.

Quirks reproduced (each deliberate):
- an empty prediction, or one whose whole text is a pandas NA token, reads back as NaN;
- a string starting with ``=`` is written as a formula whose stored result is 0, so it reads back as 0;
- a string longer than Excel's 32,767-character cell limit is truncated by XlsxWriter;
- ``str()`` of NaN is ``"nan"``, which is what scorers that stringify the cell see.
"""

from __future__ import annotations

import math
from typing import Any

#: pandas' default NA strings for ``read_excel``/``read_csv`` (``pandas._libs.parsers.STR_NA_VALUES``).
NA_TOKENS = frozenset(
    {
        "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
        "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
    }
)
EXCEL_CELL_LIMIT = 32767


def roundtrip_cell(value: str | None) -> Any:
    """What ``pandas.read_excel`` returns for a string cell that ``to_excel`` wrote: str, 0 or NaN."""
    if value is None:
        return math.nan
    if isinstance(value, float) and math.isnan(value):
        return math.nan
    text = str(value)
    if len(text) > 1 and text.startswith("="):
        return 0  # XlsxWriter strings_to_formulas: stored formula result is 0
    if len(text) > EXCEL_CELL_LIMIT:
        text = text[:EXCEL_CELL_LIMIT]
    if text in NA_TOKENS:
        return math.nan
    return text


def is_na(value: Any) -> bool:
    """True for the NaN a round-tripped cell can hold."""
    return isinstance(value, float) and math.isnan(value)


def roundtrip_text(value: str | None) -> str:
    """``str()`` of the round-tripped cell, as scorers that stringify the prediction see it (``"nan"``)."""
    return str(roundtrip_cell(value))
