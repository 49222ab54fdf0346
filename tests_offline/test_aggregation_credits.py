"""Per-row credits (trace_lib.aggregation.credits): every field a benchmark's aggregate reads beside the credit
lies in the domain its protocol's scorer writes (the ``RowField`` declared with the aggregate), so an implausible
value (``exact_score: 5`` on a fintabnetqa row) is one line naming the file, the row and the field, never a term
of the aggregate; a field of the dataset row holds one value at every seed."""

from __future__ import annotations

import json

import pytest

from trace_lib.aggregation.canonical import load_canonical
from trace_lib.aggregation.credits import CreditTable
from trace_lib.cli.main import main
from trace_lib.errors import InputError

pytestmark = pytest.mark.offline

TRACE = "trace-qwen2.5-vl-3b"
SEEDS = (42, 43, 44)
SPLITS = ("fintabnetqa", "vtabfact", "vwtq", "vwtq_syn")


@pytest.fixture(scope="module")
def rows_of(release):
    canonical = load_canonical(release)
    return canonical.rows


def _tablevqabench(n: int) -> list[dict]:
    """A whole TableVQA-Bench cell as its scorer writes it: ``split`` on every row, ``exact_score`` (0 or 1) on the
    fintabnetqa rows only."""
    out = []
    for seed in SEEDS:
        for i in range(n):
            split, credit = SPLITS[i % 4], float((i + seed) % 3 != 0)
            row = {"model_id": TRACE, "seed": seed, "benchmark_id": "tablevqabench", "index": str(i),
                   "credit": credit, "split": split}
            if split == "fintabnetqa":
                row["exact_score"] = int(credit and i % 5 != 0)
            out.append(row)
    return out


def _wemath(n: int) -> list[dict]:
    """A whole WeMath cell: 2-step composite problems (``key``, ``problem_id`` as the scorer writes them)."""
    labels = ("2steps_1", "2steps_2", "2steps_multi")
    return [{"model_id": TRACE, "seed": seed, "benchmark_id": "wemath", "index": str(i),
             "credit": float((i + seed) % 2), "key": labels[i % 3], "problem_id": i // 3}
            for seed in SEEDS for i in range(n)]


def _write(tmp_path, rows, fmt="jsonl"):
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = tmp_path / "credits.parquet"
        names = dict.fromkeys(k for r in rows for k in r)  # a column per field, null where a row lacks it
        pq.write_table(pa.table({k: [r.get(k) for r in rows] for k in names}), path)
        return path
    path = tmp_path / "credits.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _verdict(capsys, release, path):
    code = main(["verdict", "--trace-root", str(release.path), "--credits", str(path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_plausible_cell_of_each_structured_aggregate_is_judged(capsys, release, rows_of, tmp_path):
    rows = _tablevqabench(rows_of("tablevqabench")) + _wemath(rows_of("wemath"))
    for fmt in ("jsonl", "parquet"):
        code, out, err = _verdict(capsys, release, _write(tmp_path, rows, fmt))
        assert code in (0, 1) and err == "" and f"{TRACE}-tablevqabench" in out and f"{TRACE}-wemath" in out


ROW4 = f"row 4 ({TRACE}, seed 42, {{bench}}, index 3)"  # index 3 of seed 42: a vwtq_syn row, a WeMath step 1
ROW5 = f"row 5 ({TRACE}, seed 42, {{bench}}, index 4)"  # index 4 of seed 42: a fintabnetqa row


@pytest.mark.parametrize(("bench", "at", "change", "message"), [
    ("tablevqabench", 4, {"exact_score": 5}, f"{ROW5}.exact_score: value outside what tablevqabench's scorer writes "
                                             "(expected [0, 1], found 5)"),
    ("tablevqabench", 4, {"exact_score": 0.5}, f"{ROW5}.exact_score: value outside what tablevqabench's scorer "
                                               "writes (expected [0, 1], found 0.5)"),
    ("tablevqabench", 4, {"exact_score": True}, f"{ROW5}.exact_score: value outside what tablevqabench's scorer "
                                                "writes (expected [0, 1], found True)"),
    ("tablevqabench", 4, {"exact_score": None}, f"{ROW5}.exact_score: required field is missing (tablevqabench's "
                                                "aggregate reads it on rows with split 'fintabnetqa')"),
    ("tablevqabench", 3, {"exact_score": -1}, f"{ROW4}.exact_score: value outside what tablevqabench's scorer "
                                              "writes (expected [0, 1], found -1)"),  # a row it does not read
    ("tablevqabench", 3, {"split": "vwtq_sym"}, f"{ROW4}.split: value outside what tablevqabench's scorer writes "
                                                "(expected ['fintabnetqa', 'vtabfact', 'vwtq', 'vwtq_syn'], "
                                                "found 'vwtq_sym')"),
    ("tablevqabench", 3, {"split": None}, f"{ROW4}.split: required field is missing (tablevqabench's aggregate "
                                          "reads it)"),
    ("wemath", 3, {"key": 5}, f"{ROW4}.key: value outside what wemath's scorer writes (expected 'a string', "
                              "found 5)"),
    ("wemath", 3, {"problem_id": [1]}, f"{ROW4}.problem_id: value outside what wemath's scorer writes (expected "
                                       "'a string or a finite number', found [1])"),
    ("wemath", 3, {"problem_id": None}, f"{ROW4}.problem_id: required field is missing (wemath's aggregate reads "
                                        "it)"),
    ("wemath", 3, {"problem_id": True}, f"{ROW4}.problem_id: value outside what wemath's scorer writes (expected "
                                        "'a string or a finite number', found True)"),
], ids=["exact_score-5", "exact_score-0.5", "exact_score-true", "exact_score-missing",
        "exact_score-unread-row", "split-unknown", "split-missing", "key-number", "problem_id-list",
        "problem_id-missing", "problem_id-true"])
def test_a_field_outside_its_domain_is_one_line_naming_file_row_and_field(capsys, release, rows_of, tmp_path,
                                                                          bench, at, change, message):
    rows = (_tablevqabench if bench == "tablevqabench" else _wemath)(rows_of(bench))
    rows[at].update(change)  # seed 42: the rows come seed by seed
    path = _write(tmp_path, rows)
    code, out, err = _verdict(capsys, release, path)
    assert (code, out) == (2, "") and err == f"error: {path}: {message.format(bench=bench)}\n"


@pytest.mark.parametrize("value", [5, 0.5])
def test_a_parquet_credits_file_is_held_to_the_same_domains(capsys, release, rows_of, tmp_path, value):
    rows = _tablevqabench(rows_of("tablevqabench"))
    rows[4]["exact_score"] = value  # an int64 or a double column: both read as numbers
    path = _write(tmp_path, rows, "parquet")
    code, out, err = _verdict(capsys, release, path)
    assert (code, out) == (2, "") and err == (f"error: {path}: {ROW5.format(bench='tablevqabench')}.exact_score: "
                                              f"value outside what tablevqabench's scorer writes (expected [0, 1], "
                                              f"found {value})\n")


@pytest.mark.parametrize("later", [1, 2], ids=["seed 43", "seed 44"])
@pytest.mark.parametrize(("bench", "field", "other"), [("tablevqabench", "split", "vwtq"),
                                                       ("wemath", "key", "2steps_2"),
                                                       ("wemath", "problem_id", "p7")])
def test_a_field_of_the_dataset_row_that_differs_between_seeds_is_refused(capsys, release, rows_of, tmp_path,
                                                                          bench, field, other, later):
    n = rows_of(bench)
    rows = (_tablevqabench if bench == "tablevqabench" else _wemath)(n)
    first = rows[3][field]
    rows[later * n + 3][field] = other  # a later seed's index 3: the aggregate reads seed 42's value only
    path = _write(tmp_path, rows)
    code, out, err = _verdict(capsys, release, path)
    assert (code, out) == (2, "")
    assert err == (f"error: {path}: row {later * n + 4} ({TRACE}, seed {SEEDS[later]}, {bench}, index 3).{field}: a "
                   f"field of the dataset row differs between seeds (the aggregate reads seed 42's) (expected "
                   f"{first!r}, found {other!r})\n")


@pytest.mark.parametrize("data, line", [
    (b'{"model_id": "m"}\n{"model_id": "\xe9"}\n', "not UTF-8 text at byte offset 32 (bytes e9); save it as UTF-8"),
    (b'\xef\xbb\xbf{"model_id": "m"}\n', "starts with a byte-order mark (byte offset 0); trace-repro reads UTF-8 "
                                         "without a BOM; save it as UTF-8 without BOM"),
])
def test_a_credits_file_that_is_not_utf8_names_the_byte(capsys, tmp_path, data, line):
    """The decoding policy every text input has (the byte's offset; a BOM named as one), where credits said only
    'not UTF-8 text', and of a BOM Python's 'Unexpected UTF-8 BOM (decode using utf-8-sig)'."""
    path = tmp_path / "credits.jsonl"
    path.write_bytes(data)
    assert main(["verdict", "--credits", str(path)]) == 2
    assert capsys.readouterr().err == f"error: {path}: {line}\n"



def test_a_nan_cell_of_a_parquet_float_column_is_a_missing_value(capsys, release, rows_of, tmp_path):
    """A float column may hold NaN where a row has no value (how pandas and numpy mark one): ``exact_score`` NaN on
    every row that is not fintabnetqa, which the aggregate never reads, is judged; NaN where it reads it is named
    as NaN."""
    rows = _tablevqabench(rows_of("tablevqabench"))
    for row in rows:
        row.setdefault("exact_score", float("nan"))
    code, out, err = _verdict(capsys, release, _write(tmp_path, rows, "parquet"))
    assert code in (0, 1) and err == "" and f"{TRACE}-tablevqabench" in out
    rows[4]["exact_score"] = float("nan")  # a fintabnetqa row
    path = _write(tmp_path, rows, "parquet")
    code, out, err = _verdict(capsys, release, path)
    assert (code, out) == (2, "") and err == (
        f"error: {path}: {ROW5.format(bench='tablevqabench')}.exact_score: required field is NaN (tablevqabench's "
        "aggregate reads it on rows with split 'fintabnetqa')\n")


def test_an_infinite_problem_id_in_a_parquet_file_is_refused(capsys, release, rows_of, tmp_path):
    rows = _wemath(rows_of("wemath"))
    for row in rows:
        row["problem_id"] = float(row["problem_id"])  # a double column, as a pandas export of integer ids can be
    rows[3]["problem_id"] = float("inf")
    path = _write(tmp_path, rows, "parquet")
    code, out, err = _verdict(capsys, release, path)
    assert (code, out) == (2, "") and err == (
        f"error: {path}: {ROW4.format(bench='wemath')}.problem_id: value outside what wemath's scorer writes "
        "(expected 'a string or a finite number', found inf)\n")


def _credit_rows(*extras: dict) -> list[dict]:
    return [dict({"model_id": "m", "seed": 42, "benchmark_id": "erqa", "index": str(i), "credit": 1.0}, **extra)
            for i, extra in enumerate(extras)]


def test_an_empty_table_concatenates_and_has_no_cells():
    empty = CreditTable.concat([])
    assert len(empty) == 0 and empty.cells() == {} and empty.model_id.tolist() == []
    assert CreditTable.from_records([]).cells() == {}


def test_records_omit_an_absent_extra_field_and_jsonl_sorts_the_keys(tmp_path):
    table = CreditTable.from_records(_credit_rows({"note": "x"}, {}))
    assert table.to_records() == [dict(_credit_rows({"note": "x"})[0]), _credit_rows({}, {})[1]]
    path = table.to_jsonl(tmp_path / "out.jsonl")
    first, second = path.read_text().splitlines()
    assert first == ('{"benchmark_id": "erqa", "credit": 1.0, "index": "0", "model_id": "m", "note": "x", '
                     '"seed": 42}')
    assert second == '{"benchmark_id": "erqa", "credit": 1.0, "index": "1", "model_id": "m", "seed": 42}'


def test_an_unreadable_parquet_file_names_the_os_error(tmp_path):
    path = tmp_path / "absent.parquet"
    with pytest.raises(InputError) as caught:
        CreditTable.from_parquet(path)  # pyarrow's FileNotFoundError has no strerror: the exception's text
    message = str(caught.value)
    assert message.startswith(f"{path}: cannot read file: ") and str(path) in message.split("cannot read file: ")[1]


@pytest.mark.parametrize(("seed", "error"), [(2 ** 63 - 1, None), (2 ** 63, "row 1.seed: seed is not an integer")],
                         ids=["max", "max+1"])
def test_the_largest_seed_is_the_largest_int64(seed, error):
    rows = [dict(_credit_rows({})[0], seed=seed)]
    if error is None:
        assert CreditTable.from_records(rows).seed.tolist() == [seed]
    else:
        with pytest.raises(InputError, match=error):
            CreditTable.from_records(rows)


@pytest.mark.parametrize(("first", "later", "what"), [(None, float("nan"), "missing"), (float("nan"), None, "NaN")],
                         ids=["none-then-nan", "nan-then-none"])
def test_the_first_null_credit_says_whether_it_is_missing_or_nan(first, later, what):
    rows = _credit_rows({"credit": 1.0}, {"credit": first}, {"credit": later})
    with pytest.raises(InputError, match=rf"credits: row 2\.credit: required field is {what}$"):
        CreditTable.from_records(rows)
