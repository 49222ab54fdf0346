"""TreeBench protocol (``trace_lib.benchmarks.treebench``): option repair, prompt, spec vectors, canonical, CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, tiny_png_b64,
                                     write_responses, write_tsv)

from trace_lib.benchmarks import treebench as bench
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError

SPEC = load_vectors("treebench")


def _row(index: int = 0, answer: str = "C", category: str = "Perception/Attributes", **options: object) -> dict:
    options = options or {"A": "red", "B": "blue", "C": "green", "D": "white"}
    return {"index": index, "image": tiny_png_b64(), "question": "What color is the mug?", **options,
            "answer": answer, "category": category, "target_instances": "[[10,10,50,50]]"}


def _score(responses: list, rows: list | None = None) -> object:
    rows = rows or [_row(i) for i in range(len(responses))]
    return bench.score(rows, responses, ScoringContext(seed=42))


def test_prompt_lists_options_and_the_letter_instruction() -> None:
    assert bench.build_prompt_text({**_row(), "hint": "Look left."}) == (
        "Hint: Look left.\nQuestion: What color is the mug?\nOptions:\nA. red\nB. blue\nC. green\nD. white\n"
        "Answer with the correct option's letter directly. \n")


def test_ocr_rows_without_option_columns_get_only_the_question() -> None:
    row = _row(A=math.nan, B=math.nan)
    assert bench.build_prompt_text(row) == "Question: What color is the mug?\n"


def test_repair_splits_a_merged_option_cell_and_shifts_the_rest() -> None:
    rows = [{"index": 9, "answer": "D", "A": "cat", "B": "dog C. fox", "C": "owl", "D": math.nan}]
    changes = bench.repair_options(rows)
    assert (rows[0]["A"], rows[0]["B"], rows[0]["C"], rows[0]["D"]) == ("cat", "dog", "fox", "owl")
    assert changes == [{"index": "9", "split_column": "B", "inserted_column": "C", "ground_truth": "D"}]


def test_repair_leaves_ocr_rows_and_refuses_unrepairable_ones() -> None:
    ocr = [{"index": 1, "answer": "B", "A": math.nan, "multi-choice options": "A. STOP B. GO"}]
    assert bench.repair_options(ocr) == [] and math.isnan(ocr[0]["A"])
    with pytest.raises(InputError, match="ground-truth option missing"):
        bench.repair_options([{"index": 2, "answer": "D", "A": "x", "B": "y"}])


def test_parse_lettered_option_blob() -> None:
    assert bench.parse_lettered_option_blob("A. STOP sign B) GO\nC  yield") == {"A": "STOP sign", "B": "GO",
                                                                                "C": "yield"}


@pytest.mark.parametrize("vector", SPEC["vectors"], ids=lambda v: str(v["id"]))
def test_spec_vector(vector: dict) -> None:
    record = _score([vector["response"]], [_row(answer=vector["gold"])]).records[0]
    assert (record.detail["adapter"], record.extracted, record.score) == (
        vector["adapter"], vector["final"], float(vector["score"]))


def test_non_text_cells_score_zero_and_are_counted() -> None:
    result = _score(["", None, "=1", "C"])
    assert [r.score for r in result.records] == [0.0, 0.0, 0.0, 1.0]
    assert (result.counts["upstream_crash_rows"], result.score) == (3, 25.0)


def test_box_iou_is_reported_beside_the_score() -> None:
    result = _score(["<think><box>[10,10,50,50]</box></think><answer>C</answer>", "C"])
    assert (result.metrics["mIoU"], result.records[0].detail["iou"]) == (0.5, 1.0)


def test_unknown_category_is_an_input_error() -> None:
    with pytest.raises(InputError, match="unknown TreeBench category"):
        _score(["C"], [_row(category="Perception/Colour")])


def test_canonical_scores_reproduce_from_integer_counts(release, receipt) -> None:  # noqa: ANN001
    slices = canonical_slices(release, bench.KEY)
    receipt("slices", len(slices))
    assert slices and count_mismatches(bench.aggregate, slices) == []


def test_score_cli_on_a_real_format_file(tmp_path: Path, release) -> None:  # noqa: ANN001
    pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
    rows = [_row(0), _row(1, category="Reasoning/Ordering"), _row(2, answer="A", category="Perception/OCR",
                                                                 A="", B="", C="", D="")]
    dataset = write_tsv(tmp_path / "TreeBench.tsv", [{**r, "multi-choice options": "A. 1 B. 2"} for r in rows])
    responses = write_responses(tmp_path / "treebench.jsonl", bench.KEY, bench.load(dataset),
                                ["<answer>\\boxed{C}</answer>", "D", "The answer is"])
    done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == pytest.approx(200 / 3)
