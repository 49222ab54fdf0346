"""CharXiv reasoning protocol: judge prompt assembly, score parsing (spec vectors), the validator-driven token
ladder, the empty-prediction rule, judge transport, CLI, canonical aggregation."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from trace_lib.benchmarks import charxivreason
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError, JudgeError
from trace_lib.release import identity
from trace_lib.scoring.judge import CallableJudge, OpenAIJudge
from trace_lib.testing.cli_runner import run_cli
from trace_lib.testing.openai_server import OpenAIStubServer

SPEC = json.loads((Path(__file__).parent / "data" / "charxivreason" / "vectors.json").read_text("utf-8"))
GRADE_ONE = '{"extracted_answer": "5", "score": 1}'
QUERY = "Grade the response.\n* Question: q\n* Ground Truth: 5\n* Response: {PREDICTION}\n"


def _row(i: int, category: int = 1, image: str = "x") -> dict:
    return {"index": i, "image": image, "question": f"Question {i}", "grading_query": QUERY, "inst_category": category}


@pytest.mark.parametrize("vector", SPEC["prompts"], ids=lambda v: f"v{v['id']}")
def test_spec_prompt_vectors(vector):
    assert charxivreason.build_judge_prompt(vector) == vector["prompt"]


@pytest.mark.parametrize("vector", SPEC["outputs"], ids=lambda v: f"v{v['id']}")
def test_spec_output_vectors(vector):
    assert charxivreason.parse_score(vector["output"]) == vector["score"]


def test_spec_aggregate():
    agg = SPEC["aggregate"]
    assert charxivreason.aggregate(agg["row_scores"]) == agg["reported"]


def test_build_prompt_is_first_image_then_question(tmp_path):
    pytest.importorskip("PIL", reason="the row's image is a PNG")
    from trace_lib.testing.tiny_bench import tiny_png

    items = charxivreason.build_prompt(_row(3, image=base64.b64encode(tiny_png(0)).decode("ascii")), tmp_path)
    assert [(i.kind, i.value if i.kind == "text" else Path(i.value).name) for i in items] == [
        ("image", "3.png"), ("text", "Question 3")]


def test_invalid_outputs_climb_the_ladder_then_fractional_scores_count():
    budgets: list[int] = []

    def reply(prompt: str, transport: str, settings: dict) -> str:
        budgets.append(settings["max_tokens"])
        return '{"score": 2}' if settings["max_tokens"] < 1024 else '{"extract_answer": "5", "score": 0.5}'

    result = charxivreason.score([_row(0)], ["It is 5."], ScoringContext(seed=42, judge=CallableJudge(reply)))
    assert budgets == [256, 512, 1024]
    assert (result.records[0].score, result.records[0].judge_calls, result.score) == (0.5, 3, 50.0)
    assert result.records[0].extracted == "5"


def test_still_invalid_at_1024_tokens_fails_the_slice():
    with pytest.raises(JudgeError, match="token ladder"):
        charxivreason.score([_row(0)], ["x"], ScoringContext(seed=42, judge=CallableJudge(lambda p, t, s: "no")))


@pytest.mark.parametrize(("response", "judge_score", "ok"),
                         [("", 0, True), ("", 1, False), ("None", 0, True), ("<answer></answer>", 1, False),
                          ("42", 1, True), ("答案是 5", 1, True)],
                         ids=["empty-0", "empty-1", "none-token", "empty-tag", "numeric", "unicode"])
def test_empty_prediction_must_be_scored_zero(response, judge_score, ok):
    judge = CallableJudge(lambda p, t, s: '{"extracted_answer": "x", "score": %d}' % judge_score)
    if ok:
        result = charxivreason.score([_row(0)], [response], ScoringContext(seed=42, judge=judge))
        assert result.records[0].score == float(judge_score)
    else:
        with pytest.raises(JudgeError, match="empty prediction"):
            charxivreason.score([_row(0)], [response], ScoringContext(seed=42, judge=judge))


def test_empty_cell_is_inserted_as_nan():
    judge = CallableJudge(lambda p, t, s: '{"score": 0}')
    charxivreason.score([_row(0)], [""], ScoringContext(seed=42, judge=judge))
    assert judge.calls[0][0].endswith("* Response: nan\n")


def test_no_judge_and_unknown_category_are_errors():
    with pytest.raises(JudgeError, match="needs the Qwen3-32B judge"):
        charxivreason.score([_row(0)], ["x"], ScoringContext(seed=42))
    with pytest.raises(InputError, match="inst_category"):
        charxivreason.score([_row(0, category=9)], ["x"],
                            ScoringContext(seed=42, judge=CallableJudge(lambda p, t, s: '{"score": 1}')))


def test_judge_route_over_http():
    with OpenAIStubServer(lambda route, body: GRADE_ONE, model="qwen3-32b-judge") as server:
        result = charxivreason.score([_row(0), _row(1, 3)], ["5", "6"],
                                     ScoringContext(seed=42, judge=OpenAIJudge(server.url, backoff_s=0)))
    assert result.score == 100.0 and result.metrics["Text-in-Chart"] == 1.0
    (route, body), = server.requests
    assert route == "completions" and (body["max_tokens"], body["temperature"], body["top_p"]) == (256, 0.0, 1.0)


def test_aggregation_reproduces_every_canonical_score(release):
    scores = [s for s in release.read_json(identity.RESULTS)["scores"]["benchmark_scores"]
              if s["benchmark_id"] == charxivreason.KEY]
    assert scores, "results.json has no CharXiv scores"

    def rows_scored_one(s: dict) -> list[float]:
        hits = round(s["score"] * s["evaluated_rows"] / 100)
        return [1.0] * hits + [0.0] * (s["evaluated_rows"] - hits)

    wrong = [(s["model_id"], s["seed"], s["score"]) for s in scores
             if charxivreason.aggregate(rows_scored_one(s)) != s["score"]]
    assert not wrong


def test_cli_scores_a_real_format_file(release, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("PIL", reason="the TSV's images are PNGs")
    from trace_lib.testing.synthetic_campaign import write_response_file
    from trace_lib.testing.tiny_bench import tiny_png

    image = base64.b64encode(tiny_png(4)).decode("ascii")
    dataset = tmp_path / "CharXiv_reasoning_val.tsv"
    pd.DataFrame([_row(i, 1 + i % 4, image) for i in range(4)]).to_csv(dataset, sep="\t", index=False)
    rows = charxivreason.load(dataset)
    responses = write_response_file(tmp_path / "r.jsonl", model="tiny", seed=42, benchmark="charxivreason", rows=rows,
                                    texts=["5", "The answer is 5.", "6", "<answer>5</answer>"])
    with OpenAIStubServer(lambda route, body: GRADE_ONE, model="qwen3-32b-judge") as server:
        proc = run_cli(["score", "--trace-root", str(release.path), "--benchmark", "charxivreason",
                        "--dataset", str(dataset), "--responses", str(responses), "--out", str(tmp_path / "out"),
                        "--judge-url", server.url])
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "out" / "scores.json").read_text())["score"] == 100.0
