"""MathVerse protocol: prompts, spec vectors (prefetch, binary decisions, 10-decimal rounding), the extraction
ladder and the score judge's temperature schedule, judge transport, CLI, canonical aggregation."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from trace_lib.benchmarks import mathverse
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError, JudgeError
from trace_lib.release import identity
from trace_lib.scoring.judge import CallableJudge, OpenAIJudge
from trace_lib.testing.cli_runner import run_cli
from trace_lib.testing.openai_server import OpenAIStubServer

SPEC = json.loads((Path(__file__).parent / "data" / "mathverse" / "vectors.json").read_text("utf-8"))
EXTRACT_SHA256 = "1fb7a97d258f53f5655fe22b7235f5e30c93024fd543b1d281ee65c17ebf6ec2"  # spec section 7.3
SCORE_SHA256 = "37d434f0755ba7eaffd92a656c244166161e4a427852fd41015a753ec1ef8881"


def _row(i: int, answer: str, image: str = "x") -> dict:
    return {"index": i, "image": image, "query_cot": f"Solve problem {i}.", "question_for_eval": f"Problem {i}",
            "answer": answer, "metadata": "{'subject': 'plane geometry', 'subfield': 'length'}",
            "problem_version": "Vision Only"}


def _judge(extract: dict[str, str], decisions: dict[float, str] | None = None) -> CallableJudge:
    """Extraction: the response's mapped value; score judge: the decision text per temperature."""
    decisions = decisions or {0.0: "1"}

    def reply(prompt: str, transport: str, settings: dict) -> str:
        if prompt.endswith("Judgement:"):
            return decisions.get(settings["temperature"], "0")
        return next(out for raw, out in extract.items() if f"Model response: '{raw}'\nExtracted Answer: " in prompt)

    return CallableJudge(reply)


def test_prompts_match_the_pinned_renderings():
    extract = mathverse.build_extract_prompt({"prediction": "<PREDICTION>"})
    score = mathverse.build_score_prompt(
        {"question_for_eval": "<QUESTION_FOR_EVAL>", "answer": "<ANSWER>", "extract": "<EXTRACT>"})
    assert (len(extract), hashlib.sha256(extract.encode()).hexdigest()) == (1516, EXTRACT_SHA256)
    assert (len(score), hashlib.sha256(score.encode()).hexdigest()) == (1507, SCORE_SHA256)


def test_build_prompt_uses_query_cot(tmp_path):
    pytest.importorskip("PIL", reason="the row's image is a PNG")
    from trace_lib.testing.tiny_bench import tiny_png

    row = _row(7, "C", base64.b64encode(tiny_png(1)).decode("ascii"))
    items = mathverse.build_prompt(row, tmp_path)
    assert [i.kind for i in items] == ["image", "text"] and items[1].value == "Solve problem 7."


@pytest.mark.parametrize("vector", SPEC["prefetch"], ids=lambda v: f"v{v['id']}")
def test_spec_prefetch_vectors(vector):
    assert mathverse.prefetch_match(vector["answer"], vector["extract"]) is vector["prefetch"]


@pytest.mark.parametrize("vector", SPEC["decisions"], ids=lambda v: f"v{v['id']}")
def test_spec_decision_vectors(vector):
    assert mathverse.parse_decision(vector["output"]) == vector["decision"]


def test_spec_aggregate_is_rounded_to_ten_decimals():
    agg = SPEC["aggregate"]
    assert mathverse.aggregate(agg["hit"], agg["total"]) == agg["reported"]


def test_slice_prefetch_judge_and_temperature_schedule():
    rows = [_row(0, "C"), _row(1, "C"), _row(2, "22.30"), _row(3, "5")]
    responses = ["so C", "so c", "so 22.3", "so five"]
    extract = {"so C": " C ", "so c": "c", "so 22.3": "22.3", "so five": "None"}
    # temperature 0: an invalid 'Judgement: 1.'; 0.5: the decision '**Judgement**: **1**'
    judge = _judge(extract, {0.0: "Judgement: 1.", 0.5: "**Judgement**: **1**"})
    result = mathverse.score(rows, responses, ScoringContext(seed=42, judge=judge))
    assert [r.score for r in result.records] == [1.0, 1.0, 1.0, 1.0]
    assert result.counts == {"hit": 4, "total": 4, "prefetched": 1, "judged": 3}
    temperatures = [s["temperature"] for p, t, s in judge.calls if p.endswith("Judgement:")]
    assert temperatures == [0.0] * 3 + [0.5] * 3
    assert {s["max_tokens"] for p, t, s in judge.calls} == {128}  # 16 and 128 both become 128


def test_five_attempts_without_a_decision_fail_the_slice():
    judge = _judge({"x": "B"}, {t: "Judgment: 1" for t in mathverse.SCORE_TEMPERATURES})
    with pytest.raises(JudgeError, match="no 0/1 decision after 5 attempts"):
        mathverse.score([_row(0, "C")], ["x"], ScoringContext(seed=42, judge=judge))


@pytest.mark.parametrize(
    ("response", "extract", "answer", "correct"),
    [("", "null", "C", False), ("None", "None", "None", False), ("42", "42", "42", True),
     ("résumé √3", "√3", "√3", True),
     ("x", "A, B", "A, B", True)],
    ids=["empty-response", "none-gold-reads-as-nan", "numeric", "unicode", "multiple-answers"],
)
def test_edge_responses(response, extract, answer, correct):
    judge = _judge({"nan" if response in ("", "None") else response: extract}, {0.0: "0"})
    result = mathverse.score([_row(0, answer), _row(1, "Z")], [response, "other"],
                             ScoringContext(seed=42, judge=_combine(judge, {"other": "Q"})))
    assert result.records[0].score == float(correct)


def _combine(judge: CallableJudge, more: dict[str, str]) -> CallableJudge:
    def reply(prompt: str, transport: str, settings: dict) -> str:
        for raw, out in more.items():
            if f"Model response: '{raw}'\n" in prompt:
                return out
        return judge._fn(prompt, transport, settings)  # noqa: SLF001 - test-local composition

    return CallableJudge(reply)


def test_no_judge_and_bad_metadata_are_errors():
    with pytest.raises(JudgeError, match="needs the Qwen3-32B judge"):
        mathverse.score([_row(0, "C")], ["C"], ScoringContext(seed=42))
    bad = {**_row(0, "C"), "metadata": "not json"}
    with pytest.raises(InputError, match="metadata"):
        mathverse.score([bad], ["C"], ScoringContext(seed=42, judge=_judge({"C": "C"})))


def _http_responder(route: str, body: dict) -> str:
    """Extraction requests get 'B'; score requests (rendered prompt ends in 'Judgement:') get '1'."""
    prompt = body["prompt"][0] if isinstance(body["prompt"], list) else body["prompt"]
    return "1" if "Judgement:<|im_end|>" in prompt else "B"


def test_judge_route_over_http():
    with OpenAIStubServer(_http_responder, model="qwen3-32b-judge") as server:
        result = mathverse.score([_row(0, "C")], ["so B"],
                                 ScoringContext(seed=42, judge=OpenAIJudge(server.url, backoff_s=0)))
    assert result.records[0].score == 1.0 and result.records[0].judge_calls == 2
    assert [route for route, _ in server.requests] == ["completions", "completions"]


def test_aggregation_reproduces_every_canonical_score(release):
    scores = [s for s in release.read_json(identity.RESULTS)["scores"]["benchmark_scores"]
              if s["benchmark_id"] == mathverse.KEY]
    assert scores, "results.json has no MathVerse scores"
    wrong = [(s["model_id"], s["seed"], s["score"]) for s in scores
             if mathverse.aggregate(round(s["score"] * s["evaluated_rows"] / 100), s["evaluated_rows"]) != s["score"]]
    assert not wrong


def test_cli_scores_a_real_format_file(release, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("PIL", reason="the TSV's images are PNGs")
    from trace_lib.testing.synthetic_campaign import write_response_file
    from trace_lib.testing.tiny_bench import tiny_png

    image = base64.b64encode(tiny_png(2)).decode("ascii")
    dataset = tmp_path / "MathVerse_MINI_Vision_Only_cot.tsv"
    pd.DataFrame([_row(i, a, image) for i, a in enumerate(["B", "C", "22.3"])]).to_csv(dataset, sep="\t", index=False)
    rows = mathverse.load(dataset)
    texts = ["so B", "so C", "so 22.3"]
    responses = write_response_file(tmp_path / "r.jsonl", model="tiny", seed=44, benchmark="mathverse", rows=rows,
                                    texts=texts)
    judge = CallableJudge(lambda p, t, s: "1" if p.endswith("Judgement:") else "B")
    expected = mathverse.score(rows, texts, ScoringContext(seed=44, judge=judge)).score
    with OpenAIStubServer(_http_responder, model="qwen3-32b-judge") as server:
        proc = run_cli(["score", "--trace-root", str(release.path), "--benchmark", "mathverse",
                        "--dataset", str(dataset), "--responses", str(responses), "--out", str(tmp_path / "out"),
                        "--judge-url", server.url])
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "out" / "scores.json").read_text())["score"] == expected == 100.0
