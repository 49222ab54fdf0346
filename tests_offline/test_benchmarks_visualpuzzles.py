"""VisualPuzzles protocol (``trace_lib.benchmarks.visualpuzzles``): prompt, spec vectors, canonical numbers, CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, tiny_png_b64,
                                     write_responses, write_tsv)

from trace_lib.benchmarks import visualpuzzles as bench
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError

SPEC = load_vectors("visualpuzzles")
TAIL = ("\nSolve the multiple-choice question and then answer with the option letter from the given choices. The "
        "last line of your response should be of the following format:'Answer: $LETTER' (without quotes) where "
        "LETTER is one of options. Think step by step before answering.")


def _row(index: int = 0, options: object = math.nan, category: str = "spatial", difficulty: str = "easy") -> dict:
    return {"index": index, "image": tiny_png_b64(), "question": "Which piece fits?", "options": options,
            "answer": SPEC["gold"], "category": category, "difficulty": difficulty}


@pytest.mark.parametrize(("options", "block"), [
    (math.nan, "Options: Choose from (A) (B) (C) (D) in the image."),
    ("['a cube', 'a sphere']", "Options:\n(A) a cube\n(B) a sphere"),
    ("['it's red', 'blue']", "Options:\n(A) it\n(B) , "),  # an apostrophe splits items, as upstream does
    ("no quotes", "Options:\n"),
])
def test_prompt_options_block(options: object, block: str) -> None:
    assert bench.build_prompt_text(_row(options=options)) == f"Which piece fits?\n{block}{TAIL}"


def test_non_text_options_cell_is_an_input_error() -> None:
    with pytest.raises(InputError, match="not option text"):
        bench.build_prompt_text(_row(options=3))


@pytest.mark.parametrize("vector", SPEC["vectors"], ids=lambda v: str(v["id"]))
def test_spec_vector(vector: dict) -> None:
    record = bench.score([_row()], [vector["response"]], ScoringContext(seed=42)).records[0]
    assert (record.extracted, record.score) == (vector["extracted"], float(vector["extracted"] == SPEC["gold"]))


def test_score_reports_category_and_level_tables() -> None:
    rows = [_row(0), _row(1, category="deductive", difficulty="hard")]
    result = bench.score(rows, ["Answer: B", "Answer: C"], ScoringContext(seed=42))
    assert result.score == 50.0
    assert result.metrics == {"acc/category/overall": 50.0, "acc/category/spatial": 100.0,
                              "acc/category/deductive": 0.0, "acc/level/easy": 100.0, "acc/level/hard": 0.0,
                              "acc/level/overall": 50.0}


def test_canonical_scores_reproduce_from_integer_counts(release, receipt) -> None:  # noqa: ANN001
    slices = canonical_slices(release, bench.KEY)
    receipt("slices", len(slices))
    assert slices and count_mismatches(bench.aggregate, slices) == []


def test_score_cli_on_a_real_format_file(tmp_path: Path, release) -> None:  # noqa: ANN001
    dataset = write_tsv(tmp_path / "VisualPuzzles.tsv", [_row(i, options="['x', 'y']") for i in range(2)])
    responses = write_responses(tmp_path / "visualpuzzles.jsonl", bench.KEY, bench.load(dataset),
                                ["Answer: B", "The answer is B."])
    done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == 50.0
