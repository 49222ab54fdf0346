"""The prediction-workbook round trip runs the real XlsxWriter + openpyxl + pandas, with upstream's values.

Expected values were checked against upstream's own route code (the generation queue's ``to_excel``, the official
route's ``_filter_evaluator_input`` re-save, VLMEvalKit's ``dump``/``load``) under the paper's pandas 2.3.3,
XlsxWriter 3.2.9 and openpyxl 3.1.5.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import openpyxl
import pandas as pd
import pytest

from trace_lib.errors import InputError
from trace_lib.extraction import workbook
from trace_lib.extraction.workbook import official_workbook, roundtrip_column, roundtrip_table
from trace_lib.environment.requirements import workbook_pins

NAN = math.nan
REPO = Path(__file__).resolve().parents[1]


def _same(a: object, b: object) -> bool:
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return both_nan or (type(a) is type(b) and a == b)


def _all_same(got: list[object], expected: list[object]) -> bool:
    return len(got) == len(expected) and all(_same(g, e) for g, e in zip(got, expected))


# (written column, read_excel options, upstream's values): the quirks the former emulation listed, and its mismatches.
QUIRKS = {
    "na-tokens": (["", "NA", "nan", "None", "#N/A", " NA", "B", "null", "<NA>"], {},
                  [NAN, NAN, NAN, NAN, NAN, " NA", "B", NAN, NAN]),
    "formula-reads-0": (["=1+1", "x", "{=x}", "="], {}, [0, "x", 0, 0]),
    "formula-resaved-nan": (["=1+1", "x", "{=x}", "="], {"resaved": True}, [NAN, "x", NAN, NAN]),
    "links": (["mailto:x", "internal:foo", "external:c:\\a.xlsx", "http://x.com", "http://" + "a" * 2100,
               "file:///a/b", "ftp://h#frag"], {}, ["x", "foo", "c:\\a.xlsx", "http://x.com", NAN, "a\\b", "ftp://h#frag"]),
    "control-escapes": (["a\x01b", "_x000D_", "_x005F_x000D_", "a\r\nb", "tab\there", "\ufffe"], {},
                        ["a_x0001_b", "_x000D_", "_x000D_", "a_x000D_\nb", "tab\there", "_xFFFE_"]),
    "numbers-%.16G": ([0.1 + 0.2, 1e16, 123456789.123456789, float("inf"), 2.0], {},
                      [0.3, 1e16, 123456789.1234568, math.inf, 2.0]),
    "20-digit-int-beside-float": ([12345678901234567890, 1.5], {}, [1.234567890123457e19, 1.5]),
    "20-digit-int-beside-int": ([12345678901234567890, 2], {}, [12345678901234569216, 2]),
    "20-digit-int-beside-text": ([12345678901234567890, "x", 1.5], {}, [12345678901234569216, "x", 1.5]),
    "numeric-text-int": (["5", "6"], {}, [5, 6]),
    "numeric-text-float": (["5", "5.5"], {}, [5.0, 5.5]),
    "numeric-text-blank": (["5", ""], {}, [5.0, NAN]),
    "bool-text": (["True", "False"], {}, [True, False]),
    "bool-text-blank": (["true", ""], {}, [True, NAN]),
    "padded-and-inf": ([" 5", "inf"], {}, [5.0, math.inf]),
    "leading-zero-and-formula": (["007", "=1"], {}, [7, 0]),
    "bool-and-text-one": ([True, "1"], {}, [1, 1]),
    "int-text-float-one": ([1, "1", 1.0], {}, [1, 1, 1]),
    "keep-default-na-false": (["", "NA", "x"], {"keep_default_na": False}, ["", "NA", "x"]),
    "keep-default-na-false-numeric": (["5", ""], {"keep_default_na": False}, ["5", ""]),
}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("case", list(QUIRKS))
def test_round_trip_gives_upstreams_values(case: str) -> None:
    written, options, expected = QUIRKS[case]
    assert _all_same(roundtrip_column(written, **options), expected)


def test_excel_cell_limit_truncates() -> None:
    assert roundtrip_column(["x" * 40000, "y"]) == ["x" * workbook.EXCEL_CELL_LIMIT, "y"]


# Columns whose reading depends on the pandas version: {pandas major: values}. "2" is upstream's, under the paper's
# pandas 2.3.3 (checked with xlsxwriter 3.2.9 and 3.3.1, openpyxl 3.1.5: only pandas matters); "3" is what pandas 3
# reads (a bool + int column keeps its types, an integral float becomes an int), a known deviation recorded in every
# scores.json ("workbook_libraries").
VERSION_DEPENDENT = {
    "bool-int-text": ([True, 1, "x"], {"2": [True, True, "x"], "3": [True, 1, "x"]}),
    "int-bool-text": ([0, False, "a"], {"2": [0, 0, "a"], "3": [0, False, "a"]}),
    "huge-float": ([1e300], {"2": [1e300], "3": [int(1e300)]}),
}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("case", list(VERSION_DEPENDENT))
def test_version_dependent_columns_read_as_the_installed_pandas_reads_them(case: str, release) -> None:
    major = pd.__version__.split(".")[0]
    written, by_major = VERSION_DEPENDENT[case]
    if major not in by_major:
        pytest.skip(f"no recorded values for pandas {pd.__version__} (known: pandas {', '.join(sorted(by_major))}.x; "
                    f"upstream's are pandas {workbook_pins(release)['pandas']}'s)")
    assert _all_same(roundtrip_column(written), by_major[major])


def test_the_paper_pins_give_upstreams_values(release) -> None:
    assert workbook_pins(release)["pandas"].split(".")[0] == "2"  # the "2" column above is upstream's


def _file_chain(values: list[object], tmp: Path) -> list[object]:
    """The route on files, written independently: queue writes, filter deletes queue columns and saves, load reads."""
    path = tmp / "book_predictions.xlsx"
    pd.DataFrame({"index": [str(i) for i in range(len(values))], "c": values, "request_hash": "h",
                  "source_row_hash": "s"}).to_excel(path, index=False)
    book = openpyxl.load_workbook(path, read_only=False, data_only=False)
    sheet = book.active
    header = [c.value for c in sheet[1]]
    for name in ("source_row_hash", "request_hash"):
        sheet.delete_cols(header.index(name) + 1)
    book.save(path)
    return [v.item() if hasattr(v, "item") else v for v in pd.read_excel(path)["c"]]


@pytest.mark.filterwarnings("ignore")
def test_in_memory_round_trip_equals_the_file_route(tmp_path: Path) -> None:
    cases = ["formula-reads-0", "links", "control-escapes", "20-digit-int-beside-float", "numeric-text-blank"]
    columns = [QUIRKS[c][0] for c in cases] + [written for written, _ in VERSION_DEPENDENT.values()]
    assert [i for i, c in enumerate(columns) if not _all_same(roundtrip_column(c, resaved=True),
                                                                _file_chain(c, tmp_path))] == []


def test_table_columns_are_typed_on_their_own_and_cycles_repeat() -> None:
    table = roundtrip_table({"a": ["5", "x"], "b": ["5", "6"], "c": ["mailto:mailto:x", "y"]}, cycles=2)
    assert table == {"a": ["5", "x"], "b": [5, 6], "c": ["x", "y"]}  # one trip leaves "mailto:x"


def test_trailing_blank_rows_are_kept() -> None:
    assert _all_same(roundtrip_column(["a", "", None]), ["a", NAN, NAN])


def test_a_workbook_openpyxl_cannot_read_is_a_one_line_error() -> None:
    with pytest.raises(InputError, match="cannot be read back by openpyxl"):
        roundtrip_column(["http://a\x01b", "x"])


def test_official_workbook_writes_the_index_as_text() -> None:
    rows = [{"index": 1, "answer": "A"}, {"index": "a", "answer": "B"}, {"index": True, "answer": "C"}]
    table = official_workbook(rows, ["B", "C", "D"], ["index", "prediction"])
    assert _all_same(table["index"], ["1", "a", "True"])  # typed, the cells would read back as 1, "a", True


def test_official_workbook_types_index_and_keeps_prediction_text() -> None:
    rows = [{"index": i, "image": "b64", "answer": "A"} for i in (1, 2, 3)]
    table = official_workbook(rows, ["B", None, "=1+1"], ["index", "image", "answer", "prediction"])
    assert (table["index"], "image" in table, table["prediction"][0]) == ([1, 2, 3], False, "B")
    assert math.isnan(table["prediction"][1]) and math.isnan(table["prediction"][2])  # formula: re-saved -> NaN


def test_paper_constraints_pin_the_release_workbook_versions(release) -> None:
    from trace_lib.environment.constraints import build_constraints

    pins = {p.name: p.exact_version for p in build_constraints(release, "eval", pypi_only=True).pins
            if p.name in ("pandas", "xlsxwriter", "openpyxl")}
    assert pins == workbook_pins(release) == {"pandas": "2.3.3", "xlsxwriter": "3.2.9", "openpyxl": "3.1.5"}


def test_scores_and_junit_receipts_record_the_versions_used() -> None:
    from trace_lib.receipts.properties import environment_properties

    import xlsxwriter

    used = {"pandas": pd.__version__, "xlsxwriter": xlsxwriter.__version__, "openpyxl": openpyxl.__version__}
    assert workbook.library_versions() == used
    assert {k: v for k, v in environment_properties() if k.startswith("workbook_")} == {
        f"workbook_{k}": v for k, v in used.items()}


def test_round_trip_writes_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    roundtrip_column(["a"], resaved=True)
    assert list(tmp_path.iterdir()) == []


def test_prediction_workbook_resaves_only_on_the_official_route() -> None:
    from trace_lib.benchmarks._math_workbook import prediction_workbook

    rows = [{"index": 1, "image": "b64", "answer": "2"}, {"index": 2, "image": "b64", "answer": "3"}]
    direct = prediction_workbook(rows, ["=1+1", "x"])
    official = prediction_workbook(rows, ["=1+1", "x"], resaved=True)
    assert (direct["prediction"][0], math.isnan(official["prediction"][0]), "image" in direct) == (0, True, False)


def test_resave_deletes_both_queue_only_columns() -> None:
    buffer = io.BytesIO()
    pd.DataFrame({"index": ["1"], "request_hash": ["h"], "c": ["x"], "source_row_hash": ["s"]}).to_excel(
        buffer, index=False, engine="xlsxwriter")
    assert pd.read_excel(io.BytesIO(workbook._resave(buffer.getvalue()))).columns.tolist() == ["index", "c"]


def test_table_round_trip_is_not_resaved_by_default() -> None:
    assert roundtrip_table({"a": ["=1+1", "x"]}) == {"a": [0, "x"]}  # re-saved, the formula would read NaN


def test_empty_table_round_trips_to_an_empty_table() -> None:
    assert roundtrip_table({}) == {}


def test_unreadable_workbook_error_names_the_table_columns() -> None:
    with pytest.raises(InputError, match="^a, b: the workbook XlsxWriter wrote cannot be read back") as info:
        roundtrip_table({"a": ["http://a\x01b", "x"], "b": ["y", "z"]})
    assert info.value.field == "a, b"


def test_a_read_back_with_another_row_count_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pd, "read_excel", lambda *args, **kwargs: pd.DataFrame({"c0": ["x"]}))
    with pytest.raises(InputError, match="^a, b: the workbook read back has a different row count") as info:
        roundtrip_table({"a": ["x", "y"], "b": [1, 2]})
    assert (info.value.expected, info.value.found) == (2, 1)


def test_official_workbook_refuses_misaligned_responses_and_an_empty_slice() -> None:
    with pytest.raises(InputError, match="^responses: responses do not align with dataset rows") as info:
        official_workbook([{"index": 1}], [], ["index"])
    assert (info.value.expected, info.value.found) == (1, 0)
    with pytest.raises(InputError, match="^rows: empty slice: no dataset rows to score"):
        official_workbook([], [], ["index"])


def test_official_workbook_overrides_replace_only_the_named_columns() -> None:
    rows = [{"index": 1, "question": "real", "answer": "A"}]
    table = official_workbook(rows, ["B"], ["index", "question", "answer", "prediction"],
                              overrides={"question": ["placeholder"]})
    assert table == {"index": [1], "question": ["placeholder"], "answer": ["A"], "prediction": ["B"]}
