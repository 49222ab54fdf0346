"""WeMath protocol: the COT prompt, the generic judge template, prefetch and judge vectors, the deterministic
fallback, the four-dimensional classification and ``Score (Strict)``, judge transport, CLI, canonical scores."""

from __future__ import annotations

import base64
import hashlib
import json
import math
from pathlib import Path

import pytest

from trace_lib.benchmarks import wemath
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError, JudgeError
from trace_lib.extraction.choices import build_judge_prompt, can_infer
from trace_lib.release import identity
from trace_lib.scoring.judge import CallableJudge, OpenAIJudge
from trace_lib.testing.cli_runner import run_cli
from trace_lib.testing.openai_server import OpenAIStubServer

SPEC = json.loads((Path(__file__).parent / "data" / "wemath" / "vectors.json").read_text("utf-8"))
CHOICES = SPEC["choices"]
JUDGE_SHA256 = "6a7009c505637d58b3e41acc64c2fa70f49acbf8890f1e4ca66a60eece4af098"  # spec section 8.3
REQUIREMENT = ("Regarding the format, please answer following the template below, and be sure to include two <> "
               "symbols:\n<Thought process>: <<your thought process>> <Answer>: <<your option>>")


def _group(first_index: int, group_id: object, steps: int, answers: str, image: str = "x") -> list[dict]:
    """One composite problem: ``steps`` sub-questions and the multi-step question (gold letters ``answers``)."""
    keys = [f"{steps}steps_{i}" for i in range(1, steps + 1)] + [f"{steps}steps_multi"]
    return [{"index": first_index + k, "image": image, "question": "What is the angle?", **CHOICES,
             "answer": answers[k], "hint": math.nan, "requirement": REQUIREMENT, "ID": group_id, "key": key,
             "knowledge concept": "Angles"} for k, key in enumerate(keys)]


def test_prompt_text(tmp_path):
    row = {**_group(0, 1, 2, "BBB")[0], "hint": "Look at the figure."}
    assert wemath.build_prompt_text(row) == (
        "Hint: Look at the figure.\nQuestion: What is the angle?\nOptions:\nA. 90°\nB. 60°\nC. 45°\nD. 30°\n"
        f"E. No correct answer\n\n{REQUIREMENT}")


def test_judge_uses_the_generic_template_for_wemath_cot():
    prompt = build_judge_prompt("<QUESTION>", "There are several options: \nA. <OPT_A>\nB. <OPT_B>\n", "<PREDICTION>",
                                dataset=wemath.DATASET_NAME)
    assert (len(prompt), hashlib.sha256(prompt.encode()).hexdigest()) == (830, JUDGE_SHA256)


@pytest.mark.parametrize("vector", SPEC["prefetch"], ids=lambda v: f"v{v['id']}")
def test_spec_prefetch_vectors(vector):
    assert can_infer(vector["raw"], dict(CHOICES)) == vector["prefetch"]


@pytest.mark.parametrize("vector", SPEC["judge"], ids=lambda v: f"v{v['id']}")
def test_spec_judge_vectors(vector):
    rows = _group(0, 7, 2, "BBB")
    replies = iter(vector["replies"] * 3)
    judge = CallableJudge(lambda p, t, s: next(replies))
    responses = ["<Thought process>: ... <Answer>: <B>", "B", "B"]
    result = wemath.score(rows, responses, ScoringContext(seed=42, judge=judge))
    record = result.records[0]
    assert record.fallback is vector["fallback"] and record.judge_calls == len(vector["replies"])
    if vector["option"] is not None:
        assert record.extracted == vector["option"]
    assert result.counts["fallbacks"] == int(vector["fallback"])


def test_fallback_is_deterministic_per_row_and_seed():
    rows = _group(0, 7, 2, "BBB")
    judge = CallableJudge(lambda p, t, s: "unclear")
    responses = ["<Answer>: <B>", "B", "B"]
    first = wemath.score(rows, responses, ScoringContext(seed=42, judge=judge)).records[0].extracted
    again = wemath.score(rows, responses, ScoringContext(seed=42, judge=judge)).records[0].extracted
    assert first == again and first in [*CHOICES, "Z"]


@pytest.mark.parametrize("vector", SPEC["aggregates"], ids=lambda v: f"v{v['id']}")
def test_spec_aggregate_vectors(vector):
    assert wemath.aggregate(vector["CM_strict"], vector["IG"], vector["RM_strict"], vector["IK"]) == float(
        vector["strict"][:-1])


def test_classification_left_joins_on_id():
    rows = [
        {"key": "2steps_1", "ID": 1, "joker": True}, {"key": "2steps_2", "ID": 1, "joker": True},
        {"key": "2steps_multi", "ID": 1, "joker": False},  # IG
        {"key": "2steps_1", "ID": 2, "joker": False}, {"key": "2steps_2", "ID": 2, "joker": True},
        {"key": "2steps_multi", "ID": 2, "joker": True},  # RM (strict); CM (loose)
        {"key": "3steps_1", "ID": 3, "joker": True}, {"key": "3steps_2", "ID": 3, "joker": True},
        {"key": "3steps_3", "ID": 3, "joker": True}, {"key": "3steps_multi", "ID": 3, "joker": True},  # CM
        {"key": "2steps_1", "ID": 4, "joker": False}, {"key": "2steps_2", "ID": 4, "joker": False},  # no multi row
    ]
    assert wemath.dimensions(rows) == wemath.Dimensions(1, 0, 1, 1, 2, 0)


def test_slice_without_a_correct_multistep_answer_aborts_like_upstream():
    with pytest.raises(InputError, match="divides by zero"):
        wemath.score(_group(0, 1, 2, "BBB"), ["A", "A", "A"], ScoringContext(seed=42))


@pytest.mark.parametrize(("response", "hit"), [("", 0), ("None", 0), ("60°", 1), ("Ｂ", 0), ("B or C", 0), ("B", 1)],
                         ids=["empty", "none-token", "option-text", "fullwidth-letter", "two-letters", "letter"])
def test_edge_responses(response, hit):
    rows = _group(0, 1, 2, "BBB")
    judge = CallableJudge(lambda p, t, s: "Z")
    result = wemath.score(rows, [response, "B", "B"], ScoringContext(seed=42, judge=judge))
    assert result.records[0].score == float(hit)


def test_missing_judge_is_an_error_when_a_row_needs_it():
    # quirk: with 525 hard-coded, one mastered problem and nothing wrong reads as 100 %
    assert wemath.score(_group(0, 1, 2, "BBB"), ["B", "B", "B"], ScoringContext(seed=42)).score == 100.0
    with pytest.raises(JudgeError, match="judge"):
        wemath.score(_group(0, 1, 2, "BBB"), ["hmm", "B", "B"], ScoringContext(seed=42))


def test_judge_route_over_http_uses_the_chat_transport():
    rows = _group(0, 1, 2, "BBB")
    with OpenAIStubServer(lambda route, body: "B", model="qwen3-32b-judge") as server:
        judge = OpenAIJudge(server.url, backoff_s=0, chat_pause_s=0)
        result = wemath.score(rows, ["I am not sure", "B", "B"], ScoringContext(seed=42, judge=judge))
    assert result.records[0].extracted == "B" and result.records[0].judge_calls == 1
    routes = [route for route, _ in server.requests]
    assert set(routes) == {"chat/completions"}
    body = server.requests[-1][1]
    settings = (body["temperature"], body["max_tokens"], body["chat_template_kwargs"])
    assert settings == (0.0, 256, {"enable_thinking": False})


def test_aggregation_reproduces_every_canonical_score(release):
    scores = [s for s in release.read_json(identity.RESULTS)["scores"]["benchmark_scores"]
              if s["benchmark_id"] == wemath.KEY]
    assert scores, "results.json has no WeMath scores"

    def from_score(score: float) -> float:
        halves = round(score * wemath.PROBLEMS / 100 * 2)  # 2 * (CM + 0.5 * IG)
        ig = halves % 2
        cm = (halves - ig) // 2
        return wemath.aggregate(cm, ig, 0, wemath.PROBLEMS - cm - ig)

    wrong = [(s["model_id"], s["seed"], s["score"]) for s in scores if from_score(s["score"]) != s["score"]]
    assert not wrong


def test_cli_scores_a_real_format_file(release, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("PIL", reason="the TSV's images are PNGs")
    from trace_lib.testing.synthetic_campaign import write_response_file
    from trace_lib.testing.tiny_bench import tiny_png

    image = base64.b64encode(tiny_png(8)).decode("ascii")
    table = _group(0, 101, 2, "BCB", image) + _group(3, 102, 3, "ABCD", image)
    dataset = tmp_path / "WeMath.tsv"
    pd.DataFrame(table).to_csv(dataset, sep="\t", index=False)
    rows = wemath.load(dataset)
    texts = ["<Thought process>: x <Answer>: B", "not sure", "B", "A", "B", "60°", "The answer is D."]
    responses = write_response_file(tmp_path / "r.jsonl", model="tiny", seed=42, benchmark="wemath", rows=rows,
                                    texts=texts)
    expected = wemath.score(rows, texts, ScoringContext(seed=42, judge=CallableJudge(lambda p, t, s: "C"))).score
    with OpenAIStubServer(lambda route, body: "C", model="qwen3-32b-judge") as server:
        proc = run_cli(["score", "--trace-root", str(release.path), "--benchmark", "wemath",
                        "--dataset", str(dataset), "--responses", str(responses), "--out", str(tmp_path / "out"),
                        "--judge-url", server.url])
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "out" / "scores.json").read_text())["score"] == expected
