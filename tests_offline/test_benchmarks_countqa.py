"""CountQA protocol (``trace_lib.benchmarks.countqa``): cached TSV, prompt, spec vectors, canonical numbers, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, write_responses,
                                     write_tsv)

from trace_lib.benchmarks import countqa as bench
from trace_lib.benchmarks.protocol import ScoringContext

SPEC = load_vectors("countqa")


@pytest.fixture
def image(tmp_path: Path) -> Path:
    pil = pytest.importorskip("PIL.Image", reason="pillow writes the CountQA JPEG (test extra)")
    path = tmp_path / "images" / "CountQA" / "0.jpg"
    path.parent.mkdir(parents=True)
    pil.new("RGB", (4, 3), (9, 9, 9)).save(path)
    return path


def _rows(image: Path, answers: list[object]) -> list[dict]:
    return [{"index": f"0_{i}", "question": "  How many cups?  ", "answer": a, "image_path": str(image),
             "objects": "['cup']", "categories": "['kitchen']", "is_focused": True, "full_config": "{}"}
            for i, a in enumerate(answers)]


def test_load_renormalises_cached_answers_to_text(tmp_path: Path, image: Path) -> None:
    dataset = write_tsv(tmp_path / "CountQA.tsv", _rows(image, [12, "7 "]))
    assert [(r["index"], r["answer"]) for r in bench.load(dataset)] == [("0_0", "12"), ("0_1", "7")]


def test_prompt_is_the_image_then_stripped_question_and_boxed_suffix(tmp_path: Path, image: Path) -> None:
    row = bench.load(write_tsv(tmp_path / "CountQA.tsv", _rows(image, ["3"])))[0]
    items = bench.build_prompt(row, tmp_path / "images" / "CountQA")
    assert [(i.kind, i.value) for i in items] == [
        ("image", str(image)), ("text", "How many cups?\nPut the final answer inside \\boxed{}.")]


@pytest.mark.parametrize("vector", SPEC["vectors"], ids=lambda v: str(v["id"]))
def test_spec_vector(vector: dict) -> None:
    result = bench.score([{"index": "0_0", "answer": vector["gold"]}], [vector["response"]], ScoringContext(seed=42))
    record = result.records[0]
    assert (record.extracted, record.score) == (vector["extracted"], float(vector["correct"]))


def test_a_zero_cell_reads_as_empty_text() -> None:
    # every prediction numeric -> int column; str(0 or "") == "" -> no integer, so gold 0 can never be hit
    result = bench.score([{"index": "a", "answer": "0"}, {"index": "b", "answer": "2"}], ["0", "2"],
                         ScoringContext(seed=42))
    assert [(r.extracted, r.score) for r in result.records] == [(None, 0.0), (2, 1.0)]


def test_a_missing_gold_makes_the_answer_column_float() -> None:
    # "" -> NaN makes the whole answer column float64: "12" reads back as 12.0, whose last integer is 0
    result = bench.score([{"index": "a", "answer": "12"}, {"index": "b", "answer": ""}], ["\\boxed{12}", "3"],
                         ScoringContext(seed=42))
    assert [(r.detail["gold"], r.score) for r in result.records] == [(0, 0.0), (None, 0.0)]


def test_canonical_scores_reproduce_from_integer_counts(release, receipt) -> None:  # noqa: ANN001
    slices = canonical_slices(release, bench.KEY)
    receipt("slices", len(slices))
    assert slices and count_mismatches(bench.aggregate, slices) == []


def test_score_cli_on_a_real_format_file(tmp_path: Path, image: Path, release) -> None:  # noqa: ANN001
    dataset = write_tsv(tmp_path / "CountQA.tsv", _rows(image, ["3", "4", "5", "6"]))
    responses = write_responses(tmp_path / "countqa.jsonl", bench.KEY, bench.load(dataset),
                                ["\\boxed{3}", "four", "Answer: 5 cups", "I see 7"])
    done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == 75.0
