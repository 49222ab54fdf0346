"""CountBenchQA protocol (``trace_lib.benchmarks.countbenchqa``): prompt, vectors, workbook quirks, canonical, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, tiny_png_b64,
                                     write_responses, write_tsv)

from trace_lib.benchmarks import countbenchqa as bench
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError

SPEC = load_vectors("countbenchqa")


def _row(index: int = 0, answer: object = 3) -> dict:
    return {"index": index, "image": tiny_png_b64(), "question": "How many dogs are there?", "answer": answer}


def _score(responses: list, answers: list) -> object:
    rows = [_row(i, a) for i, a in enumerate(answers)]
    return bench.score(rows, responses, ScoringContext(seed=42))


def test_prompt_is_the_images_then_question_and_number_instruction(tmp_path: Path) -> None:
    pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
    items = bench.build_prompt(_row(5), tmp_path)
    assert [(i.kind, Path(i.value).name if i.kind == "image" else i.value) for i in items] == [
        ("image", "5.png"),
        ("text", "How many dogs are there? Note that: answer with a number directly e.g. 3. "
                 "Do not include any additional text."),
    ]


@pytest.mark.parametrize("vector", SPEC["vectors"], ids=lambda v: str(v["id"]))
def test_spec_vector(vector: dict) -> None:
    assert _score([vector["response"]], [vector["gold"]]).records[0].score == float(vector["correct"])


def test_all_numeric_predictions_with_a_missing_one_read_back_as_floats() -> None:
    # "3" -> 3.0 -> "3.0": gold 0 now matches every prediction, gold 3 still matches
    result = _score(["3", "5", ""], [0, 3, 4])
    assert [r.extracted for r in result.records] == ["3.0", "5.0", "nan"]
    assert [r.score for r in result.records] == [1.0, 0.0, 0.0]


def test_score_is_percent_of_all_rows() -> None:
    result = _score(["3", "13", "three", "4"], [3, 3, 3, 14])
    assert (result.score, result.counts) == (50.0, {"correct": 2, "total": 4})


def test_empty_slice_is_an_input_error() -> None:
    with pytest.raises(InputError, match="empty slice"):
        bench.score([], [], ScoringContext(seed=42))


def test_canonical_scores_reproduce_from_integer_counts(release, receipt) -> None:  # noqa: ANN001
    slices = canonical_slices(release, bench.KEY)
    receipt("slices", len(slices))
    assert slices and count_mismatches(bench.aggregate, slices) == []


def test_score_cli_on_a_real_format_file(tmp_path: Path, release) -> None:  # noqa: ANN001
    dataset = write_tsv(tmp_path / "CountBenchQA.tsv", [_row(i, 3) for i in range(4)])
    responses = write_responses(tmp_path / "countbenchqa.jsonl", bench.KEY, bench.load(dataset),
                                ["3", "There are 3.", "two", ""])
    done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == 50.0
