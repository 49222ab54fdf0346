"""Emulation of upstream's prediction-workbook round trip (``DataFrame.to_excel`` via XlsxWriter, then
``pandas.read_excel`` via openpyxl), which is part of the scoring input of most benchmarks.

Quirks reproduced (each deliberate; pinned by a differential test against the real pandas/XlsxWriter/openpyxl):
- an empty prediction, or one whose whole text is a pandas NA token, reads back as NaN;
- a string starting with ``=`` (or ``{=...}``) is written as a formula whose stored result is 0: it reads back as 0;
- ``mailto:``/``internal:``/``external:`` links lose their prefix; an http(s)/ftp link over 2,079 characters is
  dropped (NaN); ``file://`` links are rewritten as Windows paths;
- control characters other than tab and newline come back as ``_xHHHH_`` escapes;
- a string longer than Excel's 32,767-character cell limit is truncated by XlsxWriter;
- ``str()`` of NaN is ``"nan"``, which is what scorers that stringify the cell see.
"""

from __future__ import annotations

import math
import re
from typing import Any

#: pandas' default NA strings for ``read_excel``/``read_csv`` (``pandas._libs.parsers.STR_NA_VALUES``).
NA_TOKENS = frozenset(
    {
        "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
        "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
    }
)
EXCEL_CELL_LIMIT = 32767
EXCEL_URL_LIMIT = 2079
_URL = re.compile(r"(ftp|http)s?://|mailto:|(in|ex)ternal:|file://")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f]")


def _link_text(text: str) -> Any:
    """The cell text XlsxWriter's ``write_url`` leaves for a link-like string."""
    link, _, anchor = text.partition("#")
    if len(link) > EXCEL_URL_LIMIT or len(anchor) > EXCEL_URL_LIMIT:
        return math.nan  # XlsxWriter refuses over-long URLs and writes nothing
    if text.startswith(("mailto:", "internal:", "external:")):
        return text.split(":", 1)[1]
    if text.startswith("file:///"):
        return text[len("file:///"):].replace("/", "\\")
    return text


def roundtrip_cell(value: str | None) -> Any:
    """What ``pandas.read_excel`` returns for a string cell that ``to_excel`` wrote: str, 0 or NaN."""
    if value is None:
        return math.nan
    if isinstance(value, float) and math.isnan(value):
        return math.nan
    text = str(value)
    if text.startswith("=") or (text.startswith("{=") and text.endswith("}")):
        return 0  # XlsxWriter strings_to_formulas: the stored formula result is 0
    if ":" in text and _URL.match(text):
        linked = _link_text(text)
        if not isinstance(linked, str):
            return linked
        text = linked
    text = _CONTROL.sub(lambda m: f"_x{ord(m.group()):04X}_", text)
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
