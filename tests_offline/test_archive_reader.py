"""trace_lib.archive reader and writer: a written archive reads back joined, in order, with every field; a tampered
part is refused naming both hashes; unknown ids get one line with close matches."""

from __future__ import annotations

from pathlib import Path

import pytest

from trace_lib.archive import hashes
from trace_lib.archive.reader import PartDigestError, open_archive
from trace_lib.errors import UsageError
from trace_lib.testing.archive_writer import SampleSpec, SliceSpec, write_archive_run


def _samples(n: int) -> tuple[SampleSpec, ...]:
    return tuple(SampleSpec(str(100 + i), i, hashes.text_sha256(f"row{i}"), f"Question {i}?", f"The answer is {i}",
                            (hashes.text_sha256(f"img{i}"),), finish_reason="length" if i == 2 else "stop",
                            extraction_value=str(i), judge_output="B" if i == 1 else None, retry_count=i % 2,
                            score=float(i % 2)) for i in range(n))


@pytest.fixture
def archive(tmp_path: Path):
    write_archive_run(tmp_path / "runs" / "run-a", "run-a", [
        SliceSpec("model-a", 42, "mmstar", _samples(6), 50.0),
        SliceSpec("model-a", 43, "mmstar", _samples(4), 50.0, aggregate_only=True),
    ])
    return open_archive(tmp_path)


def test_slice_rows_join_all_three_configs(archive):
    rows = list(archive.iter_slice(archive.find("model-a", 42, "mmstar")))
    assert [r.source_index for r in rows] == [str(100 + i) for i in range(6)]
    r = rows[1]
    assert (r.response_text, r.used_judge, r.judge_output, r.retry_count, r.score_value) == (
        "The answer is 1", True, "B", 1, 1.0)
    assert rows[2].finish_reason == "length" and rows[0].extraction_value() == "0"
    assert r.response_sha256 == hashes.response_sha256(r.response_text)
    assert r.prompt_sha256 == hashes.prompt_sha256("Question 1?")
    assert r.row_key == f"00000001:101:{hashes.text_sha256('row1')[:16]}"
    assert archive.aggregate(archive.find("model-a", 42, "mmstar")).score == 50.0


def test_aggregate_only_slice_has_no_row_scores(archive):
    key = archive.find("model-a", 43, "mmstar")
    assert not any(r.has_row_score for r in archive.iter_slice(key))
    assert archive.aggregate(key).scoring_scope == "aggregate_only"


def test_tampered_part_is_refused_with_both_hashes(archive):
    key = archive.find("model-a", 42, "mmstar")
    ref = archive.run_of(key).parts[key]["responses"]
    path = archive.run_of(key).part_path(ref)
    path.write_bytes(path.read_bytes()[:-1] + b"\x00")
    with pytest.raises(PartDigestError) as info:
        list(archive.iter_slice(key))
    assert ref.sha256 in str(info.value) and path.name in str(info.value) and "found" in str(info.value)


@pytest.mark.parametrize("model, seed, bench, words", [
    ("model-b", 42, "mmstar", ["unknown model id 'model-b'", "did you mean: model-a"]),
    ("model-a", 42, "mmstr", ["unknown benchmark 'mmstr'", "did you mean: mmstar"]),
    ("model-a", 44, "mmstar", ["seed 44", "42, 43"]),
])
def test_unknown_ids_get_one_line_with_close_matches(archive, model, seed, bench, words):
    with pytest.raises(UsageError) as info:
        archive.find(model, seed, bench)
    text = info.value.render()
    assert "\n" not in text and all(w in text for w in words)


def test_no_root_and_empty_root_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="TRACE_ARCHIVE_ROOT"):
        open_archive(None)
    with pytest.raises(UsageError, match="no archive run found"):
        open_archive(tmp_path)
