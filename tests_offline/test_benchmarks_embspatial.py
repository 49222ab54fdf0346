"""EmbSpatial protocol (``trace_lib.benchmarks.embspatial``): prompt, rule-matcher vectors, canonical numbers, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, tiny_png_b64,
                                     write_responses, write_tsv)

from trace_lib.benchmarks import embspatial as bench
from trace_lib.benchmarks._easi_matching import can_match_option
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError

pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
SPEC = load_vectors("embspatial")


def _row(index: int = 3, answer: str = "B", source: str = "mp3d", options: str = '["lamp", "chair"]') -> dict:
    return {"index": index, "image": tiny_png_b64(), "question": "Which object is closer to you?", "options": options,
            "answer": answer, "data_source": source}


def test_prompt_labels_options_with_a_colon(tmp_path: Path) -> None:
    items = bench.build_prompt(_row(options="['lamp', 'chair']"), tmp_path)
    assert items[1].value == ("Question: Which object is closer to you?\nOptions:\nA: lamp\nB: chair\n"
                              "Give me the answer letter directly. The best answer is:")


def test_unparsable_options_cell_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="neither JSON nor a Python literal"):
        bench.build_prompt(_row(options="lamp, chair"), tmp_path)


@pytest.mark.parametrize("vector", SPEC["vectors"], ids=lambda v: str(v["id"]))
def test_spec_vector(vector: dict) -> None:
    record = bench.score([_row()], [vector["response"]], ScoringContext(seed=42)).records[0]
    assert (record.detail["matched"], int(record.score)) == (vector["matched"], vector["hit"])


@pytest.mark.parametrize(("text", "choices", "expected"), [("G", ["A", "G"], "G"), ("G", None, False),
                                                           ("<answer>H. x</answer>", None, "H")])
def test_choice_set_and_answer_block_letters(text: str, choices: list[str] | None, expected: object) -> None:
    assert can_match_option(text, choices) == expected


def test_summary_orders_sources_and_keeps_overall_in_percent() -> None:
    rows = [_row(1, source="scannet"), _row(2, source="other"), _row(3, source="mp3d")]
    result = bench.score(rows, ["B", "A", "B"], ScoringContext(seed=42))
    assert list(result.metrics) == ["overall", "mp3d_accuracy", "scannet_accuracy", "other_accuracy"]
    assert result.score == pytest.approx(200 / 3)


def test_canonical_scores_reproduce_from_integer_counts(release, receipt) -> None:  # noqa: ANN001
    slices = canonical_slices(release, bench.KEY)
    receipt("slices", len(slices))
    assert slices and count_mismatches(bench.aggregate, slices) == []


def test_score_cli_on_a_real_format_file(tmp_path: Path, release) -> None:  # noqa: ANN001
    dataset = write_tsv(tmp_path / "EmbSpatialBench.tsv", [_row(i) for i in range(2)])
    responses = write_responses(tmp_path / "r.jsonl", bench.KEY, bench.load(dataset), ["B.", "The answer is a lamp."])
    done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == 50.0
