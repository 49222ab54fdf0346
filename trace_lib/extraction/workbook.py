"""Emulation of upstream's prediction-workbook round trip (``DataFrame.to_excel`` via XlsxWriter, then
``pandas.read_excel`` via openpyxl), which is part of the scoring input of most benchmarks.

Quirks reproduced (each deliberate; pinned by a differential test against the real pandas/XlsxWriter/openpyxl):
- an empty prediction, or one whose whole text is a pandas NA token, reads back as NaN;
- a string starting with ``=`` (or ``{=...}``) is written as a formula whose stored result is 0: it reads back as 0,
  or as NaN once openpyxl has re-saved the workbook (``resaved=True``: the official route's queue-column filter
  loads and saves it with openpyxl, which keeps the formula but drops its cached value);
- ``mailto:``/``internal:``/``external:`` links lose their prefix; an http(s)/ftp link over 2,079 characters is
  dropped (NaN); ``file://`` links are rewritten as Windows paths;
- control characters other than tab and newline come back as ``_xHHHH_`` escapes; XlsxWriter escapes a literal
  ``_xHHHH_`` as ``_x005F_xHHHH_`` and openpyxl's reader deletes every ``x005F_``;
- numbers are written with ``%.16G`` and integral ones read back as int; an infinite float is written as ``inf``;
- a string longer than Excel's 32,767-character cell limit is truncated by XlsxWriter;
- ``str()`` of NaN is ``"nan"``, which is what scorers that stringify the cell see.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping, Sequence

from trace_lib.errors import InputError

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
_LITERAL_ESCAPE = re.compile(r"(_x[0-9a-fA-F]{4}_)")


def _xml_text_roundtrip(text: str) -> str:
    """XlsxWriter's ``_escape_control_characters`` on write, then openpyxl's ``replace('x005F_', '')`` on read."""
    text = _LITERAL_ESCAPE.sub(r"_x005F\1", text)
    text = _CONTROL.sub(lambda m: f"_x{ord(m.group()):04X}_", text)
    text = text.replace("\ufffe", "_xFFFE_").replace("\uffff", "_xFFFF_")
    return text.replace("x005F_", "")


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


def roundtrip_cell(value: str | None, *, resaved: bool = False) -> Any:
    """What ``pandas.read_excel`` returns for a string cell that ``to_excel`` wrote: str, 0 or NaN.

    ``resaved``: openpyxl loaded and saved the workbook in between (formulas then read back as NaN).
    """
    if value is None:
        return math.nan
    if isinstance(value, float) and math.isnan(value):
        return math.nan
    text = str(value)
    if text.startswith("=") or (text.startswith("{=") and text.endswith("}")):
        # XlsxWriter strings_to_formulas: the stored formula result is 0; an openpyxl re-save drops it
        return math.nan if resaved else 0
    if ":" in text and _URL.match(text):
        linked = _link_text(text)
        if not isinstance(linked, str):
            return linked
        text = linked
    if len(text) > EXCEL_CELL_LIMIT:
        text = text[:EXCEL_CELL_LIMIT]  # XlsxWriter truncates before it escapes
    text = _xml_text_roundtrip(text)
    if text in NA_TOKENS:
        return math.nan
    return text


def is_na(value: Any) -> bool:
    """True for the NaN a round-tripped cell can hold."""
    return isinstance(value, float) and math.isnan(value)


def roundtrip_text(value: str | None) -> str:
    """``str()`` of the round-tripped cell, as scorers that stringify the prediction see it (``"nan"``)."""
    return str(roundtrip_cell(value))


# -- whole columns ---------------------------------------------------------------------------------------------
# ``read_excel`` re-infers each column's type from the cells openpyxl returns (``TextParser._infer_types``):
# when every non-NA cell is numeric-like the column becomes int64 (no NA, all integers) or float64; a column of
# only True/False spellings becomes bool; anything else keeps its strings. Pinned against pandas 2.3.3.
_SPACE = "[ \t\n\v\f\r]*"
_NUMERIC = re.compile(rf"{_SPACE}[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?{_SPACE}")  # ASCII digits only
_INFINITY = re.compile(r"[+-]?inf(?:inity)?", re.I)  # matched without surrounding whitespace
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
_TRUE_SPELLINGS = frozenset({"True", "TRUE", "true"})
_FALSE_SPELLINGS = frozenset({"False", "FALSE", "false"})


def _written_cell(value: Any, resaved: bool = False) -> Any:
    """The Python value openpyxl hands pandas for one written cell (NaN for a blank)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return math.nan
        if isinstance(value, float) and math.isinf(value):
            return roundtrip_cell("inf" if value > 0 else "-inf")  # pandas ExcelFormatter inf_rep
        stored = float(f"{value:.16G}")  # XlsxWriter writes numbers with %.16G
        return int(stored) if stored.is_integer() else stored  # pandas' openpyxl reader: integral -> int
    return roundtrip_cell(value, resaved=resaved)


def _as_number(cell: Any) -> int | float | None:
    """The number ``lib.maybe_convert_numeric`` reads from a cell, or None when the cell is not numeric-like."""
    if isinstance(cell, bool):
        return int(cell)
    if isinstance(cell, (int, float)):
        return cell
    if _INFINITY.fullmatch(cell):
        return float(cell)
    if _NUMERIC.fullmatch(cell) is None:
        return None
    if "." in cell or "e" in cell or "E" in cell:
        number = float(cell.strip())
        return None if math.isinf(number) else number  # overflow: pandas keeps the column as text
    number = int(cell.strip())
    return number if _INT64_MIN <= number <= _UINT64_MAX else None


def roundtrip_column(
    values: list[Any] | tuple[Any, ...], *, keep_default_na: bool = True, resaved: bool = False
) -> list[Any]:
    """What ``pandas.read_excel`` returns for one column that ``DataFrame.to_excel`` wrote (rows kept in order).

    ``values`` are the cells as written (str, int, float, bool, None/NaN). With ``keep_default_na=False`` (a
    ``read_excel`` option some upstream readers pass) NA tokens and blanks stay strings (``""``). ``resaved``:
    openpyxl re-saved the workbook before it was read (see :func:`roundtrip_cell`).
    """
    cells = [_written_cell(v, resaved) for v in values]
    if not keep_default_na:
        cells = [("" if text is None else text) for text in (_undo_na(v, c) for v, c in zip(values, cells))]
    missing = [is_na(c) for c in cells]
    present = [c for c, gone in zip(cells, missing) if not gone]
    if not present:
        return [math.nan] * len(cells)
    if all(isinstance(c, bool) for c in present) and not any(missing):
        return cells
    numbers = [_as_number(c) for c in present]
    if all(n is not None for n in numbers):
        as_float = any(missing) or any(isinstance(n, float) for n in numbers)
        if not as_float and any(n < 0 for n in numbers) and any(n > _INT64_MAX for n in numbers):
            return cells  # neither int64 nor uint64 holds both: pandas keeps the column as text
        converted = iter(float(n) if as_float else n for n in numbers)
        return [math.nan if gone else next(converted) for gone in missing]
    if all(isinstance(c, bool) or (isinstance(c, str) and c in _TRUE_SPELLINGS | _FALSE_SPELLINGS) for c in present):
        return [math.nan if gone else (c if isinstance(c, bool) else c in _TRUE_SPELLINGS)
                for c, gone in zip(cells, missing)]
    return cells


def _undo_na(written: Any, cell: Any) -> Any:
    """Under ``keep_default_na=False`` a cell keeps its text (a blank reads as ``""``)."""
    if not is_na(cell):
        return cell
    if written is None or (isinstance(written, float) and math.isnan(written)):
        return ""
    text = str(written)
    return text if text in NA_TOKENS else cell


def roundtrip_table(
    columns: Mapping[str, Sequence[Any]], *, resaved: bool = False, cycles: int = 1
) -> dict[str, list[Any]]:
    """Every column of a table after ``cycles`` write/read round trips (the first one optionally re-saved)."""
    out = {name: list(values) for name, values in columns.items()}
    for cycle in range(cycles):
        out = {name: roundtrip_column(values, resaved=resaved and cycle == 0) for name, values in out.items()}
    return out


def roundtrip_rows(
    rows: list[Any] | tuple[Any, ...],
    predictions: list[Any] | tuple[Any, ...],
    columns: tuple[str, ...] | list[str],
    *,
    keep_default_na: bool = True,
) -> list[dict[str, Any]]:
    """The prediction workbook's rows as ``read_excel`` returns them: ``prediction`` plus each named column.

    A column no row has is left out (as upstream's workbook lacks it); a row missing a column others have
    reads that cell as NaN.
    """
    table: dict[str, list[Any]] = {"prediction": roundtrip_column(list(predictions), keep_default_na=keep_default_na)}
    for name in columns:
        if any(name in row for row in rows):
            cells = [row.get(name, math.nan) for row in rows]
            table[name] = roundtrip_column(cells, keep_default_na=keep_default_na)
    return [{name: values[i] for name, values in table.items()} for i in range(len(rows))]


#: Dataset columns the official route leaves out of the prediction workbook (``--compact-prediction-tables``).
COMPACT_MEDIA_COLUMNS = frozenset({"image", "images", "image_path", "image_paths"})


def official_workbook(
    rows: Sequence[Mapping[str, Any]],
    responses: Sequence[str | None],
    columns: Sequence[str],
    *,
    overrides: Mapping[str, Sequence[Any]] | None = None,
) -> dict[str, list[Any]]:
    """The official route's staged prediction workbook as ``dataset.evaluate`` reads it, for ``columns``.

    Written by the generation queue (``index`` as text, ``prediction`` = the raw response, ``""`` for None, the
    dataset's other columns as typed), re-saved by openpyxl (queue-column filter), read by ``pandas.read_excel``.
    ``overrides`` replaces dataset columns before writing (e.g. MMMU-Pro's ``question`` placeholder). A column
    absent from every row is left out, as it would be absent from the workbook.
    """
    if len(rows) != len(responses):
        raise InputError("responses do not align with dataset rows", field="responses", expected=len(rows),
                         found=len(responses))
    if not rows:
        raise InputError("empty slice: no dataset rows to score", field="rows")
    table: dict[str, list[Any]] = {}
    for name in columns:
        if overrides and name in overrides:
            table[name] = list(overrides[name])
        elif name == "index":
            table[name] = [str(row["index"]) for row in rows]
        elif name == "prediction":
            table[name] = ["" if r is None else r for r in responses]
        elif name not in COMPACT_MEDIA_COLUMNS and any(name in row for row in rows):
            table[name] = [row.get(name, math.nan) for row in rows]
    return roundtrip_table(table, resaved=True)
