"""PhyX mini MC protocol (``trace_lib.benchmarks.phyx_mini_mc``): prompt, P1 adapter vectors, canonical numbers, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, tiny_png_b64,
                                     write_responses, write_tsv)

from trace_lib.benchmarks import phyx_mini_mc as bench
from trace_lib.benchmarks.protocol import ScoringContext

pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
SPEC = load_vectors("phyx_mini_mc")


def _row(index: int = 1, answer: str = "C") -> dict:
    return {"index": index, "image": tiny_png_b64(), "question": "A ball rolls... Choose A, B, C or D.",
            "answer": answer, "category": "Mechanics"}


def test_prompt_is_images_then_the_question_verbatim(tmp_path: Path) -> None:
    items = bench.build_prompt(_row(), tmp_path)
    assert [(i.kind, i.value if i.kind == "text" else Path(i.value).name) for i in items] == [
        ("image", "1.png"), ("text", "A ball rolls... Choose A, B, C or D.")]


@pytest.mark.parametrize("vector", SPEC["vectors"], ids=lambda v: str(v["id"]))
def test_spec_vector(vector: dict) -> None:
    record = bench.score([_row(answer=vector["answer"])], [vector["response"]], ScoringContext(seed=42)).records[0]
    assert (record.detail["adapted"], int(record.score)) == (vector["adapted"], vector["hit"])


@pytest.mark.parametrize(("prediction", "answer", "hit"), [
    ("Answer: B", "B", 1), ("Answer: B", "C", 0), ("UNRESOLVED", "C", 0),
    ("Option B, not C:", "C", 1),  # quirk: a wrong keyword letter, but "C:" occurs -> matched
    ("A: maybe, **C**", "C", 1), ("Option B then", "C", 0),
])
def test_phyx_mc_matcher(prediction: str, answer: str, hit: int) -> None:
    assert bench.process_line_mc(prediction, answer)[0] == hit


def test_categories_are_reported_beside_overall() -> None:
    rows = [_row(1, "A"), {**_row(2, "B"), "category": "Optics"}]
    result = bench.score(rows, ["A", "C"], ScoringContext(seed=42))
    assert (result.score, result.metrics) == (50.0, {"Overall": 0.5, "Mechanics": 1.0, "Optics": 0.0})


def test_canonical_scores_reproduce_from_integer_counts(release, receipt) -> None:  # noqa: ANN001
    slices = canonical_slices(release, bench.KEY)
    receipt("slices", len(slices))
    assert slices and count_mismatches(bench.aggregate, slices) == []


def test_score_cli_on_a_real_format_file(tmp_path: Path, release) -> None:  # noqa: ANN001
    dataset = write_tsv(tmp_path / "PhyX_mini_MC.tsv", [_row(i) for i in range(4)])
    responses = write_responses(tmp_path / "r.jsonl", bench.KEY, bench.load(dataset),
                                ["The answer is C.", "\\boxed{B}", "", "Option A: no. Answer: C"])
    done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == 25.0
