"""Validation re-score from the archive (trace_lib.archive.validation): deterministic rows, replayed judge outputs
validated as the scoring contract does, unresolved rows at 0, exact comparison with the canonical percent."""

from __future__ import annotations

import json

import pytest

from trace_lib.archive import hashes
from trace_lib.archive.reader import open_archive
from trace_lib.archive.validation import rescore_validation, score_validation_row
from trace_lib.testing.archive_writer import SampleSpec, SliceSpec, write_archive_run

BENCH = "trace_validation_iid2000"
ROWS = [{"row_index": i, "answer_type": "integer", "answer_gt": {"value": 7}} for i in range(4)]
OK = json.dumps({"status": "ok", "answer": 7, "evidence": "maybe 7"})
RESPONSES = [("Final answer: 7", None), ("maybe 7 or 8", OK), ("no idea", None), ("Final answer: 3", None)]


def _archive(tmp_path):  # noqa: ANN001, ANN202
    samples = tuple(SampleSpec(str(i), i, hashes.text_sha256(str(i)), "p", text, judge_output=out,
                               score=float(i in (0, 1))) for i, (text, out) in enumerate(RESPONSES))
    write_archive_run(tmp_path / "runs" / "v", "v", [SliceSpec("m", 42, BENCH, samples, 50.0)])
    return open_archive(tmp_path)


def test_rows_take_their_routes():
    assert score_validation_row("Final answer: 7", ROWS[0], None) == (1, "deterministic")
    assert score_validation_row("maybe 7 or 8", ROWS[1], OK) == (1, "judge")
    assert score_validation_row("maybe 7 or 8", ROWS[1], "not json") == (0, "unresolved")


def test_exact_validation_rescore(tmp_path):
    out = rescore_validation(_archive(tmp_path), "m", ROWS, canonical=50.0, benchmark_id=BENCH)
    assert out.ok and (out.deterministic, out.judged, out.unresolved) == (2, 1, 1)
    assert (out.score_agree, out.score_compared) == (4, 4)
    bad = rescore_validation(_archive(tmp_path / "b"), "m", ROWS, canonical=75.0, benchmark_id=BENCH)
    assert not bad.ok and "vs canonical 75.0" in bad.explain()


def test_rows_not_covering_the_dataset_are_refused(tmp_path):
    from trace_lib.errors import InputError

    with pytest.raises(InputError, match="do not cover the dataset"):
        rescore_validation(_archive(tmp_path), "m", ROWS + ROWS[:1], canonical=50.0, benchmark_id=BENCH)
