"""PuzzleVQA protocol (``trace_lib.benchmarks.puzzlevqa``) and the shared ``extract_unambiguous_abcd``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, tiny_png_b64,
                                     write_responses, write_tsv)

from trace_lib.benchmarks import puzzlevqa as bench
from trace_lib.benchmarks._puzzle_prompt import ANSWER_LETTER_TAIL
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError
from trace_lib.extraction.abcd import extract_unambiguous_abcd

SPEC = load_vectors("puzzlevqa")
#: SHA-256 of the instruction tail as ``PuzzleVQA.build_prompt`` concatenates it (VLMEvalKit@a8b12bf1).
TAIL_SHA256 = "22c3cd5098d5d7bfca2948138f93f944ec4f09d7afeaf872afcf8cc7d74bc7d5"


def _row(index: int = 0, category: str = "size_cycle", **extra: object) -> dict:
    return {"index": index, "image": tiny_png_b64(), "question": "What is the size of the missing circle?",
            "options": SPEC["options"], "answer": SPEC["answer"], "category": category, **extra}


def test_prompt_letters_options_and_appends_the_pinned_tail() -> None:
    assert hashlib.sha256(ANSWER_LETTER_TAIL.encode()).hexdigest() == TAIL_SHA256
    assert bench.build_prompt_text(_row()) == (
        "What is the size of the missing circle?\nOptions:\n(A) 3\n(B) 4\n(C) 5\n(D) 6\nSolve the multiple-choice "
        "question and then answer with the option letter from the given choices. The last line of your response "
        "should be of the following format:'Answer: $LETTER' (without quotes) where LETTER is one of options. "
        "Think step by step before answering.")


@pytest.mark.parametrize("vector", SPEC["vectors"], ids=lambda v: str(v["id"]))
def test_spec_vector(vector: dict) -> None:
    assert extract_unambiguous_abcd(vector["response"]) == vector["extracted"]
    record = bench.score([_row()], [vector["response"]], ScoringContext(seed=42)).records[0]
    assert (record.extracted, record.score) == (vector["extracted"], float(vector["extracted"] == "C"))


def test_gold_letter_comes_from_the_option_text() -> None:
    assert bench.gold_letter([1, " 5 ", "5"], "5", 0) == "B"
    with pytest.raises(InputError, match="answer not found among the options"):
        bench.gold_letter(["3"], "5", 0)


def test_options_must_be_a_list_literal() -> None:
    with pytest.raises(InputError, match="not a list literal"):
        bench.build_prompt_text(_row(options="__import__('os')"))


def test_score_reports_overall_and_present_categories() -> None:
    rows = [_row(0), _row(1, category="venn"), _row(2, category="venn")]
    result = bench.score(rows, ["Answer: C", "Answer: B", "<answer>C</answer>"], ScoringContext(seed=42))
    assert (result.score, result.metrics) == (pytest.approx(200 / 3), {
        "acc/overall": pytest.approx(200 / 3), "acc/size_cycle": 100.0, "acc/venn": 50.0})
    assert result.counts == {"correct": 2, "total": 3, "unresolved": 0}


def test_canonical_scores_reproduce_from_integer_counts(release, receipt) -> None:  # noqa: ANN001
    slices = canonical_slices(release, bench.KEY)
    receipt("slices", len(slices))
    assert slices and count_mismatches(bench.aggregate, slices) == []


def test_score_cli_on_a_real_format_file(tmp_path: Path, release) -> None:  # noqa: ANN001
    dataset = write_tsv(tmp_path / "PuzzleVQA.tsv", [_row(i) for i in range(4)])
    responses = write_responses(tmp_path / "puzzlevqa.jsonl", bench.KEY, bench.load(dataset),
                                ["Answer: C", "Answer: (C)", "\\boxed{C}", "Answer: D"])
    done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == 50.0
