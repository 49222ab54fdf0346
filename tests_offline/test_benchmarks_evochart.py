"""EvoChart protocol: prompt suffix, the double final-answer extraction and scoring (spec vectors), edge cases,
CLI on the cached ``EvoChart.tsv`` format, and the aggregation against every canonical EvoChart score."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from trace_lib.benchmarks import evochart
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.release import identity
from trace_lib.testing.cli_runner import run_cli

VECTORS = json.loads((Path(__file__).parent / "data" / "evochart" / "vectors.json").read_text("utf-8"))["rows"]
PROMPT_SHA256 = "a6777c6a5cc8216108a1ce8963c5f90b3d2c34a1a201efdd74484205ba8805f2"  # spec section 4.2


def _row(i: int, answer: str, is_clear: object = True, image_path: str = "/nonexistent.png") -> dict:
    return {"index": i, "question": f"  Question {i}? ", "answer": answer, "image_path": image_path,
            "attribute": "value", "is_clear": is_clear, "chart_type": "bar"}


def test_prompt_text_matches_the_pinned_rendering(tmp_path):
    pytest.importorskip("PIL", reason="the prompt builder opens the image")
    from trace_lib.testing.tiny_bench import tiny_png

    image = tmp_path / "0.png"
    image.write_bytes(tiny_png(0))
    items = evochart.build_prompt({**_row(0, "1", image_path=str(image)), "question": "<QUESTION>"}, tmp_path)
    assert [i.kind for i in items] == ["image", "text"] and items[0].value == str(image)
    assert hashlib.sha256(items[1].value.encode()).hexdigest() == PROMPT_SHA256


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"v{v['id']}")
def test_spec_vector_extraction(vector):
    first = evochart.final_answer(vector["raw"])
    assert evochart.final_answer(first) == vector["final"]
    if "first_pass" in vector:
        assert first == vector["first_pass"]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"v{v['id']}")
def test_spec_vector_score(vector):
    extracted = evochart.final_answer(vector["raw"])
    assert evochart.score_prediction(extracted, vector["gold"], vector["is_clear"]) == vector["score"]


def test_spec_vectors_through_the_slice_scorer():
    rows = [_row(i, v["gold"], v["is_clear"]) for i, v in enumerate(VECTORS)]
    result = evochart.score(rows, [v["raw"] for v in VECTORS], ScoringContext(seed=42))
    assert [r.score for r in result.records] == [float(v["score"]) for v in VECTORS]
    assert result.counts == {"hit": sum(v["score"] for v in VECTORS), "total": len(VECTORS)}


@pytest.mark.parametrize(
    ("response", "gold", "is_clear", "score"),
    [("", "nan", True, 1.0), ("None", "5", True, 0.0), ("\\boxed{٥}", "5", True, 1.0),
     ("\\boxed{5}", "5", math.nan, 1.0), ("\\boxed{5.2}", "5", math.nan, 0.0),
     ("\\boxed{Zürich}", "ZÜRICH", True, 1.0), ("\\boxed{3, 4}", "3", True, 0.0), ("\\boxed{-0}", "0", False, 1.0)],
    ids=["empty-reads-nan", "none-token", "arabic-digit-is-a-regex-digit", "nan-is-clear-exact",
         "nan-is-clear-no-tolerance", "unicode-casefold", "multiple-answers", "negative-zero"],
)
def test_edge_responses(response, gold, is_clear, score):
    rows = [_row(0, gold, is_clear), _row(1, "x", True)]
    result = evochart.score(rows, [response, "\\boxed{y}"], ScoringContext(seed=42))
    assert result.records[0].score == score


def test_acc_is_rounded_like_to_json():
    assert evochart.aggregate(611, 1250) == 48.88
    assert evochart.aggregate(1, 3) == 33.3333333333


def test_aggregation_reproduces_every_canonical_score(release):
    scores = [s for s in release.read_json(identity.RESULTS)["scores"]["benchmark_scores"]
              if s["benchmark_id"] == evochart.KEY]
    assert scores, "results.json has no EvoChart scores"
    wrong = [(s["model_id"], s["seed"], s["score"]) for s in scores
             if evochart.aggregate(round(s["score"] * s["evaluated_rows"] / 100), s["evaluated_rows"]) != s["score"]]
    assert not wrong


def test_cli_scores_the_cached_tsv(release, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("PIL", reason="the cached TSV references PNG files")
    from trace_lib.testing.synthetic_campaign import write_response_file
    from trace_lib.testing.tiny_bench import tiny_png

    table = []
    for i, v in enumerate(VECTORS):
        image = tmp_path / "images" / "EvoChart" / f"{i}.png"
        image.parent.mkdir(parents=True, exist_ok=True)
        image.write_bytes(tiny_png(i))
        table.append(_row(i, v["gold"], v["is_clear"], str(image)))
    dataset = tmp_path / "EvoChart.tsv"
    pd.DataFrame(table).to_csv(dataset, sep="\t", index=False)
    rows = evochart.load(dataset)
    texts = [v["raw"] for v in VECTORS]
    responses = write_response_file(tmp_path / "r.jsonl", model="tiny", seed=42, benchmark="evochart", rows=rows,
                                    texts=texts)
    proc = run_cli(["score", "--trace-root", str(release.path), "--benchmark", "evochart",
                    "--dataset", str(dataset), "--responses", str(responses), "--out", str(tmp_path / "out")])
    assert proc.returncode == 0, proc.stderr
    expected = evochart.aggregate(sum(v["score"] for v in VECTORS), len(VECTORS))
    assert json.loads((tmp_path / "out" / "scores.json").read_text())["score"] == expected
