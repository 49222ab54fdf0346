"""Upstream's prediction-workbook round trip, run through the real pandas, XlsxWriter and openpyxl.

Upstream's calls (TRACE rlvr af32fe0e, VLMEvalKit a8b12bf1), reproduced per table, in memory:
- write: ``DataFrame.to_excel(path, index=False)`` (generation queue ``_finalize_spec``, the score queue's judged
  tables, the official route's adapters; pandas picks XlsxWriter when installed) or VLMEvalKit's
  ``dump`` (``to_excel(f, index=False, engine='xlsxwriter')``): both are ``engine="xlsxwriter"`` here;
- re-save (``resaved=True``): the official route's ``_filter_evaluator_input`` loads the staged workbook with
  ``openpyxl.load_workbook(read_only=False, data_only=False)``, deletes the queue-only columns
  (``request_hash``, ``source_row_hash``) and saves it; formulas then lose their cached value;
- read: VLMEvalKit's ``load`` / the score queue's ``pd.read_excel(path)`` (``keep_default_na=False`` where the
  score queue passes it), through openpyxl.
No benchmark of the suite skips the workbook: the 16 ``official_vlmevalkit`` benchmarks read it re-saved, the
``direct_score`` ones and MME-Reasoning (``dedicated_score``) read the queue's workbook as written; scorers that
write their own judged/adapted tables add further write/read trips (``roundtrip_table(..., cycles=...)``).

So every quirk is the libraries' own (NA tokens read as NaN, ``=...`` written as a formula reading 0 or, once
re-saved, NaN, link prefixes dropped, control characters escaped as ``_xHHHH_``, numbers written with ``%.16G``,
the 32,767-character cell limit, whole columns re-typed by ``read_excel``). Some of those depend on the versions
(pandas 3 types a bool + int + text column differently from the paper's pandas 2.3.3): the versions used are in
:func:`library_versions` (recorded in every ``scores.json`` and JUnit receipt); the release's pins are read by
:func:`trace_lib.environment.requirements.workbook_pins`; ``trace-repro env constraints`` installs them.
"""

from __future__ import annotations

import functools
import io
import math
import warnings
from typing import Any, Mapping, Sequence

from trace_lib.errors import InputError
from trace_lib.protocol import DataRow

#: XlsxWriter's string cell limit (longer strings are truncated).
EXCEL_CELL_LIMIT = 32767
#: Columns the generation queue writes and the official route's filter deletes before its openpyxl re-save.
QUEUE_ONLY_COLUMNS = ("request_hash", "source_row_hash")
#: Dataset columns the official route leaves out of the prediction workbook (``--compact-prediction-tables``).
COMPACT_MEDIA_COLUMNS = frozenset({"image", "images", "image_path", "image_paths"})
# Every upstream table has a never-blank ``index`` column, so read_excel never trims a trailing blank row; a
# table written here carries this row-number column for the same reason (dropped after reading).
_ROW_GUARD = "_trace_repro_row"


def isna(value: Any) -> bool:
    """``pandas.isna`` for a scalar cell: None or a float NaN (what an empty workbook cell reads back as)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def library_versions() -> dict[str, str]:
    """The pandas / XlsxWriter / openpyxl versions this process round-trips workbooks with."""
    return dict(_versions())


@functools.lru_cache(maxsize=1)
def _versions() -> tuple[tuple[str, str], ...]:
    import openpyxl
    import pandas
    import xlsxwriter

    return (("pandas", pandas.__version__), ("xlsxwriter", xlsxwriter.__version__), ("openpyxl", openpyxl.__version__))


def _resave(data: bytes) -> bytes:
    """``_filter_evaluator_input``: openpyxl loads the workbook, deletes the queue-only columns, saves it."""
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(data), read_only=False, data_only=False)
    try:
        sheet = book.active
        header = [cell.value for cell in next(sheet.iter_rows(min_row=1, max_row=1))]
        for position in sorted((header.index(c) + 1 for c in QUEUE_ONLY_COLUMNS if c in header), reverse=True):
            sheet.delete_cols(position)
        out = io.BytesIO()
        book.save(out)
    finally:
        book.close()
    return out.getvalue()


def _python(value: Any) -> Any:
    """A cell as a plain Python value (numpy scalars -> int/float/bool)."""
    return value.item() if hasattr(value, "item") and not isinstance(value, str) else value


def _one_trip(columns: Mapping[str, Sequence[Any]], *, resaved: bool, keep_default_na: bool) -> dict[str, list[Any]]:
    import pandas as pd

    names = list(columns)
    length = len(next(iter(columns.values()))) if names else 0
    if any(len(values) != length for values in columns.values()):
        raise ValueError("workbook columns differ in length")
    data: dict[str, list[Any]] = {_ROW_GUARD: list(range(length))}
    data.update({f"c{i}": list(values) for i, values in enumerate(columns.values())})
    if resaved:
        data.update({name: ["queue"] * length for name in QUEUE_ONLY_COLUMNS})
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # e.g. XlsxWriter's truncation notice: the behaviour is the point, not the note
        warnings.simplefilter("ignore")
        pd.DataFrame(data).to_excel(buffer, index=False, engine="xlsxwriter")
        written = _resave(buffer.getvalue()) if resaved else buffer.getvalue()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            frame = pd.read_excel(io.BytesIO(written), engine="openpyxl", keep_default_na=keep_default_na)
    except Exception as exc:  # upstream's read_excel fails the same way on this workbook
        raise InputError(f"the workbook XlsxWriter wrote cannot be read back by openpyxl ({type(exc).__name__}: "
                         f"{exc}); upstream's read_excel fails on the same cells", field=", ".join(names)) from exc
    if len(frame) != length:
        raise InputError("the workbook read back has a different row count", field=", ".join(names),
                         expected=length, found=len(frame))
    return {name: [_python(v) for v in frame[f"c{i}"].tolist()] for i, name in enumerate(names)}


def roundtrip_table(
    columns: Mapping[str, Sequence[Any]],
    *,
    resaved: bool = False,
    cycles: int = 1,
    keep_default_na: bool = True,
) -> dict[str, list[Any]]:
    """A table after ``cycles`` ``to_excel`` + ``read_excel`` round trips (the first one optionally re-saved).

    ``columns``: ``{name: [cell, ...]}`` (str, int, float, bool, None/NaN), all of one length, in row order.
    """
    out = {name: list(values) for name, values in columns.items()}
    if not out:
        return out
    for cycle in range(cycles):
        out = _one_trip(out, resaved=resaved and cycle == 0, keep_default_na=keep_default_na)
    return out


def roundtrip_column(
    values: list[Any] | tuple[Any, ...], *, keep_default_na: bool = True, resaved: bool = False
) -> list[Any]:
    """One column of a table after a round trip (``read_excel`` types each column on its own)."""
    return roundtrip_table({"c": values}, resaved=resaved, keep_default_na=keep_default_na)["c"]


def roundtrip_cell(value: Any, *, resaved: bool = False) -> Any:
    """A one-cell column after a round trip (a numeric-looking text reads back as a number, as in a column)."""
    return roundtrip_column([value], resaved=resaved)[0]


def roundtrip_text(value: Any) -> str:
    """``str()`` of the round-tripped cell, as scorers that stringify the prediction see it (``"nan"``)."""
    return str(roundtrip_cell(value))


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
    table: dict[str, list[Any]] = {"prediction": list(predictions)}
    for name in columns:
        if any(name in row for row in rows):
            table[name] = [row.get(name, math.nan) for row in rows]
    table = roundtrip_table(table, keep_default_na=keep_default_na)
    return [DataRow({name: values[i] for name, values in table.items()}) for i in range(len(rows))]


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
