"""ChartQAPro protocol: the five CoT templates, the TRACE final-answer adapter and relaxed correctness (spec
vectors), workbook quirks, edge cases, CLI, and the aggregation against the release's canonical scores."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from trace_lib.benchmarks import chartqapro
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError
from trace_lib.release import identity

SPEC = json.loads((Path(__file__).parent / "data" / "chartqapro" / "vectors.json").read_text("utf-8"))
VECTORS = [v for v in SPEC["vectors"] if v["extracted"] != "CRASH"]
#: spec section 1.2: SHA-256 of each rendering (question '<QUESTION>'; Conversational: Q1..Q3 / A1..A3)
TEMPLATE_SHA256 = {
    "Factoid": "4d9b373fdb9695ada73486e3dfb04fd707166a068a3b4d167b068cb364b3bdba",
    "Multi Choice": "988d7007095b861644bed05caccf24f19824506c2a0827f4b812ee58fd315290",
    "Conversational": "6f2f062799eb5aad242951f47c253bf25b302352505893cff976f4151ebd49ce",
    "Fact Checking": "65981f554f970a1c1b9400cefc718f013717a9f9051ce39dbbf29e478b43f60e",
    "Hypothetical": "3875aba2f4b9578bc79189d3001d67f7fba528f0c019dd3cb4bf66757bd56a58",
}


def _row(i: int, gold: str, question_type: str = "Factoid", year: list[str] | None = None, image: str = "x") -> dict:
    return {"index": i, "image": image, "question": "['What is shown?']", "answer": repr([gold]),
            "question_type": question_type, "paragraph": math.nan, "year": repr(year or ["NO"])}


@pytest.mark.parametrize("question_type", list(TEMPLATE_SHA256))
def test_cot_templates_match_the_pinned_renderings(question_type):
    if question_type == "Conversational":
        text = chartqapro.prompt_context(["<Q1>", "<Q2>", "<Q3>"], ["<A1>", "<A2>", "<A3>"], question_type)
    else:
        text = chartqapro.prompt_context(["<QUESTION>"], ["x"], question_type)
    assert hashlib.sha256(text.encode()).hexdigest() == TEMPLATE_SHA256[question_type]


def test_build_prompt_drops_an_empty_paragraph(tmp_path):
    pytest.importorskip("PIL", reason="the row's image is a PNG")
    from trace_lib.testing.tiny_bench import tiny_png

    image = base64.b64encode(tiny_png(0)).decode("ascii")
    without = chartqapro.build_prompt(_row(1, "42", image=image), tmp_path)
    with_text = chartqapro.build_prompt({**_row(2, "42", image=image), "paragraph": "Context."}, tmp_path)
    assert [i.kind for i in without] == ["image", "text"]
    assert [i.kind for i in with_text] == ["image", "text", "text"] and with_text[1].value == "Context."


@pytest.mark.parametrize("vector", SPEC["vectors"], ids=lambda v: f"v{v['id']}")
def test_spec_vector_adapter(vector):
    if vector["extracted"] == "CRASH":
        with pytest.raises(chartqapro.AdapterCrash, match="IndexError"):
            chartqapro.final_answer(vector["raw"])
    else:
        assert chartqapro.final_answer(vector["raw"]) == vector["extracted"]


@pytest.fixture(scope="module")
def vector_slice():
    rows = [_row(i, v["gold"], v["question_type"], v["year"]) for i, v in enumerate(VECTORS)]
    return chartqapro.score(rows, [v["raw"] for v in VECTORS], ScoringContext(seed=42))


@pytest.mark.parametrize("position", range(len(VECTORS)), ids=[f"v{v['id']}" for v in VECTORS])
def test_spec_vector_row_score(vector_slice, position):
    assert vector_slice.records[position].score == pytest.approx(VECTORS[position]["score"], abs=1e-12)


def test_slice_score_is_the_mean_in_percent(vector_slice):
    expected = sum(v["score"] for v in VECTORS) / len(VECTORS) * 100
    assert vector_slice.score == pytest.approx(expected, abs=1e-9)
    assert vector_slice.counts["unresolved"] == sum(v["extracted"] is None for v in VECTORS)


def test_a_marker_at_the_very_end_aborts_the_slice():
    crash = next(v for v in SPEC["vectors"] if v["extracted"] == "CRASH")
    with pytest.raises(chartqapro.AdapterCrash, match=r"rows\[0\]"):
        chartqapro.score([_row(0, crash["gold"])], [crash["raw"]], ScoringContext(seed=42))


@pytest.mark.parametrize(
    ("response", "gold", "score"),
    [("", "nan", 0.0), ("None", "5", 0.0), ("The answer is NA", "nan", 0.0), ("The answer is =5", "0", 1.0),
     ("The answer is 42", "42.0", 1.0), ("The answer is Zürich", "Zurich", pytest.approx(0.8333333333333334)),
     ("The answer is ['b', 'c']", "['b', 'c']", 1.0), ("The answer is 0", "0", 1.0), ("The answer is 0.1", "0", 0.0)],
    ids=["empty-reads-nan-never-within-tolerance", "none-token", "extracted-na-token", "formula-resaved", "numeric",
         "unicode-anls",
         "multiple-answers", "zero", "zero-needs-exact"],
)
def test_edge_responses(response, gold, score):
    rows = [_row(0, gold), _row(1, "x")]
    result = chartqapro.score(rows, [response, "The answer is y"], ScoringContext(seed=42))
    assert result.records[0].score == score


def test_unparsable_answer_cell_is_an_input_error():
    with pytest.raises(InputError, match="answer"):
        chartqapro.score([{**_row(0, "5"), "answer": "not a list"}], ["x"], ScoringContext(seed=42))


def test_auto_percent_rule_applies_a_second_time_at_or_below_one_percent():
    assert chartqapro.aggregate(0.005) == 50.0
    assert chartqapro.aggregate(0.45813) == 0.45813 * 100


def test_aggregation_is_consistent_with_every_canonical_score(release):
    """Row scores are fractional, so counts cannot be recovered; the canonical value must be a sum/rows mean."""
    scores = [s for s in release.read_json(identity.RESULTS)["scores"]["benchmark_scores"]
              if s["benchmark_id"] == chartqapro.KEY]
    assert scores, "results.json has no ChartQAPro scores"
    overall = {(s["model_id"], s["seed"]): s["score"] * s["evaluated_rows"] / 100 / s["evaluated_rows"] for s in scores}
    wrong = [(s["model_id"], s["seed"]) for s in scores
             if abs(chartqapro.aggregate(overall[s["model_id"], s["seed"]]) - s["score"]) > 1e-9]
    assert not wrong


def test_cli_scores_a_real_format_file(release, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("PIL", reason="the TSV's images are PNGs")
    from trace_lib.testing.synthetic_campaign import write_response_file
    from trace_lib.testing.tiny_bench import tiny_png

    image = base64.b64encode(tiny_png(6)).decode("ascii")
    dataset = tmp_path / "chartqapro.tsv"
    table = [_row(i, v["gold"], v["question_type"], v["year"], image) for i, v in enumerate(VECTORS)]
    pd.DataFrame(table).to_csv(dataset, sep="\t", index=False)
    rows = chartqapro.load(dataset)
    texts = [v["raw"] for v in VECTORS]
    responses = write_response_file(tmp_path / "r.jsonl", model="tiny", seed=42, benchmark="chartqapro", rows=rows,
                                    texts=texts)
    proc = subprocess.run(
        [sys.executable, "-m", "trace_lib", "score", "--trace-root", str(release.path), "--benchmark", "chartqapro",
         "--dataset", str(dataset), "--responses", str(responses), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    expected = chartqapro.score(rows, texts, ScoringContext(seed=42)).score
    assert json.loads((tmp_path / "out" / "scores.json").read_text())["score"] == expected
