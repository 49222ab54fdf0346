"""The per-slice response store: append, resume, torn-line repair, identity checks, single writer."""

from __future__ import annotations

import json

import pytest

from trace_lib.errors import InputError
from trace_lib.generation.store import SliceIdentity, SliceStore, StoredResponse, load_header, load_responses

IDENTITY = SliceIdentity(slice="m-seed42-b", model="m", model_revision="a" * 40, seed=42, benchmark="b",
                         contract={"temperature": 0.6, "seed": 42})


def row(ordinal: int, text: str = "answer", request_hash: str = "h") -> StoredResponse:
    return StoredResponse(row_key=f"{ordinal:08d}:{ordinal}:{'0' * 16}", index=str(ordinal), ordinal=ordinal,
                          source_row_hash="0" * 64, request_hash=f"{request_hash}{ordinal}", response=text,
                          finish_reason="stop", prompt_tokens=10, completion_tokens=3, model_revision="a" * 40,
                          backend="stub", prompt="q")


def test_new_file_has_header_then_rows(tmp_path):
    path = tmp_path / "s.jsonl"
    with SliceStore.open(path, IDENTITY) as store:
        assert store.done == {}
        store.append([row(0), row(1, "ünïcode ✓")])
    header = load_header(path)
    assert header["kind"] == "header" and header["contract_hash"] == IDENTITY.contract_hash
    assert [r.response for r in load_responses(path)] == ["answer", "ünïcode ✓"]
    assert path.read_bytes().endswith(b"\n")


def test_resume_sees_stored_rows(tmp_path):
    path = tmp_path / "s.jsonl"
    with SliceStore.open(path, IDENTITY) as store:
        store.append([row(0), row(1)])
    with SliceStore.open(path, IDENTITY) as store:
        assert sorted(store.done) == [row(0).row_key, row(1).row_key]
        store.append([row(2)])
    assert [r.ordinal for r in load_responses(path)] == [0, 1, 2]


@pytest.mark.parametrize("tail", [b'{"kind":"row","row_key":"0000', b"\x00\x00\x00\x00\n", b'{"kind": "row"'])
def test_torn_last_line_is_detected_and_truncated(tmp_path, tail):
    path = tmp_path / "s.jsonl"
    with SliceStore.open(path, IDENTITY) as store:
        store.append([row(0), row(1)])
    good = path.read_bytes()
    path.write_bytes(good + tail)
    assert len(load_responses(path)) == 2  # the reader ignores the torn line
    with SliceStore.open(path, IDENTITY) as store:
        assert store.repaired_bytes == len(tail)
        assert len(store.done) == 2
        store.append([row(2)])
    assert path.read_bytes().startswith(good)
    assert [r.ordinal for r in load_responses(path)] == [0, 1, 2]


def test_corrupt_line_before_the_end_is_an_error(tmp_path):
    path = tmp_path / "s.jsonl"
    with SliceStore.open(path, IDENTITY) as store:
        store.append([row(0), row(1)])
    lines = path.read_bytes().split(b"\n")
    lines[1] = b"garbage"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(InputError, match="line 2 is not a JSON object"):
        SliceStore.open(path, IDENTITY)


@pytest.mark.parametrize("change,field", [
    ({"model_revision": "b" * 40}, "header.model_revision"),
    ({"seed": 43}, "header.seed"),
    ({"contract": {"temperature": 1.0, "seed": 42}}, "header.contract"),
])
def test_header_mismatch_refuses_to_resume(tmp_path, change, field):
    path = tmp_path / "s.jsonl"
    SliceStore.open(path, IDENTITY).close()
    other = SliceIdentity(**{**IDENTITY.__dict__, **change})
    with pytest.raises(InputError) as info:
        SliceStore.open(path, other)
    message = info.value.render()
    assert f"{path}: {field}:" in message and "\n" not in message


def test_contract_mismatch_names_the_changed_setting(tmp_path):
    path = tmp_path / "s.jsonl"
    SliceStore.open(path, IDENTITY).close()
    other = SliceIdentity(**{**IDENTITY.__dict__, "contract": {"temperature": 1.0, "seed": 42}})
    with pytest.raises(InputError, match=r"expected \{'temperature': 1\.0\}, found \{'temperature': 0\.6\}"):
        SliceStore.open(path, other)


def test_second_writer_is_refused(tmp_path):
    path = tmp_path / "s.jsonl"
    with SliceStore.open(path, IDENTITY):
        with pytest.raises(InputError, match="another process is writing this slice"):
            SliceStore.open(path, IDENTITY)
    SliceStore.open(path, IDENTITY).close()  # free again once closed


def test_append_refuses_a_row_twice(tmp_path):
    path = tmp_path / "s.jsonl"
    with SliceStore.open(path, IDENTITY) as store:
        store.append([row(0)])
        with pytest.raises(InputError, match="row already stored"):
            store.append([row(0)])
        before = path.read_bytes()
        with pytest.raises(InputError, match="row already stored"):
            store.append([row(1), row(1, "another answer")])  # one batch holding a row twice: none of it written
        assert path.read_bytes() == before and store.append([row(1)]) == 1


def test_retain_drops_stale_rows_atomically(tmp_path):
    path = tmp_path / "s.jsonl"
    with SliceStore.open(path, IDENTITY) as store:
        store.append([row(0), row(1), row(2)])
        assert store.retain(lambda r: r.ordinal != 1) == 1
        store.append([row(1, "regenerated", request_hash="new")])
    rows = load_responses(path)
    assert [(r.ordinal, r.response) for r in rows] == [(0, "answer"), (1, "regenerated"), (2, "answer")]
    assert sum(1 for line in path.read_text().splitlines() if json.loads(line)["kind"] == "row") == 3
    assert not list(tmp_path.glob("*.incomplete"))


def _stored_file(tmp_path, rows=3):
    path = tmp_path / "r.jsonl"
    with SliceStore.open(path, IDENTITY) as store:
        store.append([row(i) for i in range(rows)])
    return path


def _edit_row(path, number: int, edit) -> None:  # noqa: ANN001 - rewrite line ``number`` (1: the header)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[number - 1] = edit(lines[number - 1])
    path.write_text("".join(lines), encoding="utf-8")


@pytest.mark.parametrize(("field", "value"), [
    ("ordinal", "0"), ("ordinal", None), ("ordinal", -1), ("ordinal", 10 ** 30), ("ordinal", True),
    ("response", None), ("response", 12345), ("response", ["A"]), ("index", {}), ("prompt_tokens", "x"),
    ("completion_tokens", 1.5), ("backend", None),
])
def test_a_row_field_of_another_type_or_range_is_one_line_naming_it(tmp_path, field, value):
    path = _stored_file(tmp_path)

    def edit(line: str) -> str:
        record = json.loads(line)
        record[field] = value
        return json.dumps(record) + "\n"

    _edit_row(path, 2, edit)  # a middle row: not a torn last line
    with pytest.raises(InputError) as err:
        load_responses(path)
    assert err.value.field == f"line 2.{field}" and "wrong type or range" in str(err.value)


@pytest.mark.parametrize(("field", "value"), [
    ("model", 5), ("model", None), ("seed", "42"), ("seed", 2 ** 64), ("seed", False), ("contract", [1]),
    ("benchmark", ["mmstar"]), ("engine", "vllm"), ("created_at", 0), ("slice", None),
])
def test_a_header_field_of_another_type_is_one_line_naming_it_for_readers_and_resume(tmp_path, field, value):
    """The header is typed as the writer writes it: ``model: 5`` used to reach the verdict as a key and
    ``contract: [1]`` a resume's comparison, where only a differing value was noticed."""
    path = _stored_file(tmp_path)

    def edit(line: str) -> str:
        record = json.loads(line)
        record[field] = value
        return json.dumps(record) + "\n"

    _edit_row(path, 1, edit)
    before = path.read_bytes()
    for attempt in (load_header, load_responses, lambda p: SliceStore.open(p, IDENTITY)):
        with pytest.raises(InputError) as err:
            attempt(path)
        assert err.value.field == f"header.{field}" and "wrong type or range" in str(err.value)
    assert path.read_bytes() == before and not path.with_name(path.name + ".lock").exists()


def test_a_header_without_the_optional_fields_still_reads(tmp_path):
    path = _stored_file(tmp_path)
    _edit_row(path, 1, lambda line: json.dumps({k: v for k, v in json.loads(line).items()
                                                 if k not in ("engine", "created_at")}) + "\n")
    assert len(load_responses(path)) == 3
    _edit_row(path, 1, lambda line: json.dumps({k: v for k, v in json.loads(line).items() if k != "model"}) + "\n")
    with pytest.raises(InputError, match="header line lacks a field") as err:
        load_header(path)
    assert err.value.field == "header.model"


@pytest.mark.parametrize("edit", [
    lambda line: line.replace('"response":', '"response":"B","response":', 1),  # last-wins would change the score
    lambda line: line.replace("\"prompt_tokens\":10", "\"prompt_tokens\":NaN", 1),
    lambda line: "[" * 100_000 + "]" * 100_000 + "\n",  # deeper than the parser's recursion
])
def test_a_row_line_that_is_not_strict_json_is_corrupt(tmp_path, edit):
    path = _stored_file(tmp_path)
    _edit_row(path, 2, edit)
    with pytest.raises(InputError, match="line 2 is not a JSON object"):
        load_responses(path)


@pytest.mark.timeout(30)
def test_a_fifo_in_place_of_a_response_file_is_refused_without_opening_it(tmp_path):
    import os

    path = tmp_path / "r.jsonl"
    os.mkfifo(path)  # reading it would block for ever (trace-repro status hung on one)
    for read in (load_header, load_responses):
        with pytest.raises(InputError, match="is a FIFO, not a regular file"):
            read(path)
    assert path.is_fifo()


def test_a_header_line_that_is_not_json_is_corrupt(tmp_path):
    """A whole first line that does not parse is a corrupt file, not one cut before its first line ended."""
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"garbage\n")
    with pytest.raises(InputError, match="line 1 is not a JSON object; the file is corrupt"):
        load_responses(path)


def test_a_corrupt_line_before_a_torn_tail_is_an_error_not_a_repair(tmp_path):
    """Only the bytes after the last newline can be torn by a crash; a complete line that does not parse before
    them is corruption, and resuming leaves the file as it is."""
    path = _stored_file(tmp_path)
    _edit_row(path, 4, lambda line: "garbage\n")
    path.write_bytes(path.read_bytes() + b'{"kind":"row","row_k')
    before = path.read_bytes()
    for attempt in (load_responses, lambda p: SliceStore.open(p, IDENTITY)):
        with pytest.raises(InputError, match="line 4 is not a JSON object"):
            attempt(path)
    assert path.read_bytes() == before


def test_a_file_that_starts_with_a_row_or_holds_a_second_header_is_refused(tmp_path):
    path = _stored_file(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    headless = tmp_path / "headless.jsonl"
    headless.write_bytes(b"".join(lines[1:]))
    with pytest.raises(InputError) as refused:
        load_responses(headless)
    assert refused.value.field == "line 1" and "first line is not a header" in str(refused.value)
    joined = tmp_path / "joined.jsonl"
    joined.write_bytes(b"".join(lines) * 2)  # two files concatenated
    with pytest.raises(InputError) as refused:
        load_responses(joined)
    assert str(refused.value) == (f"{joined}: line 5.kind: unexpected line kind (expected 'row', found 'header')")


def test_two_lines_for_one_row_are_refused_by_readers_and_by_resume(tmp_path):
    path = _stored_file(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines) + lines[2])  # row 1 again, as a last-wins reader would take it
    with pytest.raises(InputError) as refused:
        load_responses(path)
    assert refused.value.field == row(1).row_key and "two lines for one row" in str(refused.value)
    with pytest.raises(InputError, match="two lines for one row"):
        SliceStore.open(path, IDENTITY)
    assert not path.with_name(path.name + ".lock").exists()
