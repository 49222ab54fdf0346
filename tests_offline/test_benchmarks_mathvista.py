"""MathVista protocol: judge prompt, spec vectors (prefetch + typed post_check), quirks, judge transport, CLI,
and the aggregation against every canonical MathVista score of the release."""

from __future__ import annotations

import base64
import hashlib
import json
import math
from pathlib import Path

import pytest

from trace_lib.benchmarks import mathvista
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import JudgeError
from trace_lib.release import identity
from trace_lib.scoring.judge import CallableJudge, OpenAIJudge
from trace_lib.testing.cli_runner import run_cli
from trace_lib.testing.openai_server import OpenAIStubServer

DATA = Path(__file__).parent / "data" / "mathvista" / "vectors.json"
VECTORS = json.loads(DATA.read_text(encoding="utf-8"))["rows"]
PROMPT_SHA256 = "eafe1762c9a15f78eda2eebe7355b99c4330df2c3ca3b389e2fee5e6e92b7758"  # spec section 6.3


def _png_b64() -> str:
    from trace_lib.testing.tiny_bench import tiny_png

    return base64.b64encode(tiny_png(3)).decode("ascii")


def _row(i: int, vector: dict, image: str = "x") -> dict:
    return {
        "index": i, "image": image, "question": f"Question {i}?", "answer": vector["answer"],
        "question_type": vector["question_type"], "answer_type": vector["answer_type"],
        "choices": vector["choices"], "answer_option": vector["answer_option"] or math.nan,
        "task": "figure question answering", "skills": "['arithmetic reasoning']",
    }


def _judge_from(vectors: list[dict]) -> CallableJudge:
    """Answers each judge prompt with the vector whose response it quotes."""
    answers = {v["raw"]: v["judge"] for v in vectors if v["judge"] is not None}

    def reply(prompt: str, transport: str, settings: dict) -> str:
        for raw, out in answers.items():
            if f"Model respone: {raw}Extracted answer:" in prompt:
                return out
        raise AssertionError("unexpected judge prompt")

    return CallableJudge(reply)


def test_judge_prompt_matches_the_pinned_rendering():
    prompt = mathvista.build_judge_prompt({"question": "<QUESTION>", "prediction": "<PREDICTION>"})
    assert (len(prompt), hashlib.sha256(prompt.encode()).hexdigest()) == (1765, PROMPT_SHA256)


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"v{v['id']}")
def test_spec_vector_prefetch(vector):
    row = {**_row(0, vector), "prediction": vector["raw"]}
    assert mathvista.post_check(row, prefetch=True) == vector["prefetch"]


@pytest.fixture(scope="module")
def vector_slice():
    """All spec vectors scored as one slice (so the judged workbook's ``res`` column is mixed text, as in a
    real slice)."""
    rows = [_row(i, v) for i, v in enumerate(VECTORS)]
    return mathvista.score(rows, [v["raw"] for v in VECTORS], ScoringContext(seed=42, judge=_judge_from(VECTORS)))


@pytest.mark.parametrize("position", range(len(VECTORS)), ids=[f"v{v['id']}" for v in VECTORS])
def test_spec_vector_through_the_slice_scorer(vector_slice, position):
    vector = VECTORS[position]
    record = vector_slice.records[position]
    assert (record.score, record.judge_calls) == (float(vector["correct"]), 0 if vector["judge"] is None else 1)


def test_a_lone_judged_cell_is_retyped_by_the_workbook():
    """quirk: in a one-row slice the judged column holds only '14.0', which read_excel turns into 14.0 -> right."""
    vector = VECTORS[4]
    result = mathvista.score([_row(0, vector)], [vector["raw"]], ScoringContext(seed=42, judge=_judge_from([vector])))
    assert (vector["correct"], result.records[0].score) == (False, 1.0)


def test_slice_score_counts_and_records(vector_slice):
    result = vector_slice
    correct = sum(v["correct"] for v in VECTORS)
    assert result.counts == {"hit": correct, "total": len(VECTORS), "prefetched": 2, "judged": len(VECTORS) - 2}
    assert result.score == correct / len(VECTORS) * 100


def test_a_prefetched_zero_is_falsy_and_goes_to_the_judge():
    vector = {"answer": "0", "question_type": "free_form", "answer_type": "integer", "choices": "[]",
              "answer_option": None}
    judge = CallableJudge(lambda p, t, s: "0")
    result = mathvista.score([_row(0, vector)], ["0"], ScoringContext(seed=42, judge=judge))
    assert result.records[0].judge_calls == 1 and result.records[0].score == 1.0


@pytest.mark.parametrize(
    ("response", "judge_text", "correct"),
    [("", "14", True), ("None", "14", True), (" 14 ", None, True), ("١٤", None, True), ("14", "unused", True),
     ("Thinking...", "N/A", False), ("Thinking...", "=14", False)],
    ids=["empty", "none-token", "spaced-number", "arabic-indic-digits", "bare", "judge-na", "judge-formula"],
)
def test_edge_responses(response, judge_text, correct):
    vector = {"answer": "14", "question_type": "free_form", "answer_type": "integer", "choices": "[]",
              "answer_option": None}
    judge = CallableJudge(lambda p, t, s: judge_text)
    result = mathvista.score([_row(0, vector)], [response], ScoringContext(seed=42, judge=judge))
    assert result.records[0].score == float(correct)


def test_empty_judge_output_climbs_the_token_ladder_then_fails():
    vector = VECTORS[0]
    budgets = []
    judge = CallableJudge(lambda p, t, s: budgets.append(s["max_tokens"]) or "")
    with pytest.raises(JudgeError, match="token ladder"):
        mathvista.score([_row(0, vector)], [vector["raw"]], ScoringContext(seed=42, judge=judge))
    assert budgets == [128, 256, 512, 1024]


def test_missing_judge_is_an_error_only_when_a_row_needs_it():
    vector = VECTORS[5]  # bare "14": prefetched
    assert mathvista.score([_row(0, vector)], ["14"], ScoringContext(seed=42)).score == 100.0
    with pytest.raises(JudgeError, match="judge"):
        mathvista.score([_row(0, VECTORS[0])], [VECTORS[0]["raw"]], ScoringContext(seed=42))


def test_auto_percent_rule_rescales_an_accuracy_of_at_most_one_percent():
    assert mathvista.aggregate(5, 1000) == 50.0  # 0.5 % -> upstream reports 50.0
    assert mathvista.aggregate(11, 1000) == 11 / 1000 * 100  # 1.1 %: left alone


def test_judge_route_over_http_sends_the_persistent_client_request():
    rows = [_row(i, v) for i, v in enumerate(VECTORS[:2])]
    with OpenAIStubServer(lambda route, body: "B", model="qwen3-32b-judge") as server:
        judge = OpenAIJudge(server.url, backoff_s=0)
        result = mathvista.score(rows, [v["raw"] for v in VECTORS[:2]], ScoringContext(seed=42, judge=judge))
    assert [r.score for r in result.records] == [1.0, 1.0]  # both multiple-choice rows have gold option B
    (route, body), = server.requests
    assert route == "completions"
    assert (body["max_tokens"], body["temperature"], body["top_p"]) == (128, 0.0, 1.0)
    assert body["prompt"][0].startswith("<|im_start|>user\n\nPlease read the following example.")


def test_aggregation_reproduces_every_canonical_score(release):
    scores = [s for s in release.read_json(identity.RESULTS)["scores"]["benchmark_scores"]
              if s["benchmark_id"] == mathvista.KEY]
    assert scores, "results.json has no MathVista scores"
    wrong = [(s["model_id"], s["seed"], s["score"]) for s in scores
             if mathvista.aggregate(round(s["score"] * s["evaluated_rows"] / 100), s["evaluated_rows"]) != s["score"]]
    assert not wrong


def test_cli_scores_a_real_format_file(release, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("PIL", reason="the TSV's images are PNGs")
    from trace_lib.testing.synthetic_campaign import write_response_file

    image = _png_b64()
    dataset = tmp_path / "MathVista_MINI.tsv"
    pd.DataFrame([_row(100 + i, v, image) for i, v in enumerate(VECTORS)]).to_csv(dataset, sep="\t", index=False)
    rows = mathvista.load(dataset)
    responses = write_response_file(tmp_path / "r.jsonl", model="tiny", seed=42, benchmark="mathvista", rows=rows,
                                    texts=[v["raw"] for v in VECTORS])
    expected = mathvista.score(rows, [v["raw"] for v in VECTORS], ScoringContext(seed=42, judge=CallableJudge(
        lambda p, t, s: "B"))).score
    with OpenAIStubServer(lambda route, body: "B", model="qwen3-32b-judge") as server:
        proc = run_cli(["score", "--trace-root", str(release.path), "--benchmark", "mathvista",
                        "--dataset", str(dataset), "--responses", str(responses), "--out", str(tmp_path / "out"),
                        "--judge-url", server.url])
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "out" / "scores.json").read_text())["score"] == expected
