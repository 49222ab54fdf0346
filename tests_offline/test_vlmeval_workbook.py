"""The official route's workbook round trip, differentially against the real XlsxWriter + openpyxl + pandas."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from trace_lib.extraction.workbook import official_workbook, roundtrip_column

pd = pytest.importorskip("pandas")
openpyxl = pytest.importorskip("openpyxl", reason="openpyxl (test extra) reproduces the queue-column filter")
pytest.importorskip("xlsxwriter", reason="XlsxWriter (test extra) writes the prediction workbook")

EDGE_CELLS = [
    "", "=1+1", "=", "{=x}", "NA", "nan", "None", " NA", "5", "ok", "True", "http://x.com", "mailto:x",
    "internal:foo", "http://" + "a" * 2100, "a\r\nb", "_x000D_", "a\x01b", "x" * 40000, "_x005F_x000D_",
    "\ufffe", "Answer: B", "答案：B", "  ", "-", "#N/A",
]
NUMERIC_COLUMNS = [["5", "6"], ["5", "5.5"], ["5", ""], ["True", "False"], ["true", ""], [" 5", "inf"], ["007", "=1"]]


def _real_chain(values: list[object], tmp: Path) -> list[object]:
    """Generation queue writes, the official wrapper re-saves without queue columns, the evaluator reads."""
    path = tmp / "book.xlsx"
    pd.DataFrame({"index": [str(i) for i in range(len(values))], "c": values, "request_hash": "h"}).to_excel(
        path, index=False, engine="xlsxwriter")
    book = openpyxl.load_workbook(path)
    sheet = book.active
    sheet.delete_cols([c.value for c in sheet[1]].index("request_hash") + 1)
    book.save(path)
    return [v.item() if hasattr(v, "item") else v for v in pd.read_excel(path)["c"]]


def _same(a: object, b: object) -> bool:
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return both_nan or (type(a) is type(b) and a == b)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("column", [EDGE_CELLS, *NUMERIC_COLUMNS], ids=lambda c: f"{len(c)}cells:{c[0][:8]!r}")
def test_emulation_matches_the_real_libraries(column: list[object], tmp_path: Path) -> None:
    real = _real_chain(column, tmp_path)
    emulated = roundtrip_column(column, resaved=True)
    assert [i for i, (r, e) in enumerate(zip(real, emulated)) if not _same(r, e)] == []


def test_formula_without_resave_reads_back_as_zero() -> None:
    assert roundtrip_column(["=1+1", "x"]) == [0, "x"]


def test_official_workbook_types_index_and_keeps_prediction_text() -> None:
    rows = [{"index": 1, "image": "b64", "answer": "A"}, {"index": 2, "image": "b64", "answer": "B"}]
    table = official_workbook(rows, ["B", None], ["index", "image", "answer", "prediction"])
    assert (table["index"], "image" in table, table["prediction"][0], math.isnan(table["prediction"][1])) == (
        [1, 2], False, "B", True)
