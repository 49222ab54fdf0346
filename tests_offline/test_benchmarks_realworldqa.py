"""RealWorldQA protocol (``trace_lib.benchmarks.realworldqa``): prompt, TRACE adapter vectors, canonical numbers, CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, tiny_png_b64,
                                     write_responses, write_tsv)

from trace_lib.benchmarks import realworldqa as bench
from trace_lib.benchmarks.protocol import ScoringContext

pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
SPEC = load_vectors("realworldqa")


def _row(index: int = 1, options: tuple[str, ...] = ("left", "right", "center"), answer: str = "A") -> dict:
    return {"index": index, "image": tiny_png_b64(), "question": "Which way does the road turn?",
            **dict(zip("ABCD", options)), "answer": answer}


def test_prompt_with_hint_and_missing_options(tmp_path: Path) -> None:
    row = {**_row(), "hint": "Look ahead", "D": math.nan}
    items = bench.build_prompt(row, tmp_path)
    assert [i.kind for i in items] == ["image", "text"]
    assert items[1].value == ("Hint: Look ahead\nQuestion: Which way does the road turn?\nOptions:\nA. left\n"
                              "B. right\nC. center\nPlease select the correct answer from the options above. \n")


@pytest.mark.parametrize("vector", SPEC["vectors"], ids=lambda v: str(v["id"]))
def test_spec_vector(vector: dict) -> None:
    row = _row(options=tuple(vector.get("options", ("left", "right", "center"))))
    record = bench.score([row], [vector["response"]], ScoringContext(seed=42)).records[0]
    assert (record.detail["adapted"], record.detail["adapter"], record.extracted) == (
        vector["adapted"], vector["adapter"], vector["option"])


def test_no_judge_is_ever_called() -> None:
    result = bench.score([_row()], ["I really cannot tell from this picture."], ScoringContext(seed=42, judge=None))
    assert (result.records[0].extracted, result.judge_calls) == ("Z", 0)


@pytest.mark.parametrize(("text", "choices", "expected"), [
    ("therefore, the answer is (c).", ["A", "B", "C"], ("C", "answer_marker")),
    ("- B) because", ["A", "B"], ("B", "tail_line_start")),
    ("b. no", ["A", "B"], ("B", "tail_line_start")),
    ("x b) y", ["A", "B"], ("Z", "unparsed")),
    ("**C**", ["A", "B", "C"], ("C", "last_line")),
    ("anything", [], ("Z", "no_choices")),
])
def test_final_option_extractor_rules(text: str, choices: list[str], expected: tuple[str, str]) -> None:
    assert bench.extract_final_mcq_option(text, choices) == expected


def test_canonical_scores_reproduce_from_integer_counts(release, receipt) -> None:  # noqa: ANN001
    slices = canonical_slices(release, bench.KEY)
    receipt("slices", len(slices))
    assert slices and count_mismatches(bench.aggregate, slices) == []


def test_score_cli_on_a_real_format_file(tmp_path: Path, release) -> None:  # noqa: ANN001
    dataset = write_tsv(tmp_path / "RealWorldQA.tsv", [_row(i) for i in range(4)])
    responses = write_responses(tmp_path / "r.jsonl", bench.KEY, bench.load(dataset),
                                ["A.", "<answer>\\boxed{A}</answer>", "The answer is B.", "left"])
    done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == 75.0


def test_responses_to_rows_without_an_image_are_counted_not_scored(tmp_path: Path, release, capsys) -> None:  # noqa: ANN001
    """VLMEvalKit's ``skip_noimg`` drops rows without an image; upstream never scores them and goes on."""
    from trace_lib.cli.main import main

    rows = [_row(i) for i in range(3)] + [{**_row(3), "image": None}]
    dataset = write_tsv(tmp_path / "RealWorldQA.tsv", rows)
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({"index": i, "response": "A."}) + "\n" for i in (3, 0, 1, 2)))
    argv = ["score", "--trace-root", str(release.path), "--benchmark", bench.KEY, "--dataset", str(dataset),
            "--responses", str(plain), "--seed", "42"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "score 100.000 over 3 rows" in out and "1 dropped rows not scored" in out
    summary = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert (summary["rows"], summary["dropped_rows"]) == (3, 1)
    with plain.open("a") as handle:  # an index the TSV does not hold at all stays an error
        handle.write(json.dumps({"index": 99, "response": "A."}) + "\n")
    assert main([*argv, "--out", str(tmp_path / "out2")]) == 2
    assert "line 5.index: index not in the dataset" in capsys.readouterr().err
