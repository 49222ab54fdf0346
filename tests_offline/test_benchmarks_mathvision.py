"""MathVision protocol: judge prompt, spec vectors, ``is_equal`` semantics (Python eval, latex2sympy), judge
transport, CLI, and the aggregation against every canonical MathVision score of the release."""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path

import pytest

from trace_lib.benchmarks import _math_equal, mathvision
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError, JudgeError
from trace_lib.release import identity
from trace_lib.scoring.judge import CallableJudge, OpenAIJudge
from trace_lib.testing.cli_runner import run_cli
from trace_lib.testing.openai_server import OpenAIStubServer

VECTORS = json.loads((Path(__file__).parent / "data" / "mathvision" / "vectors.json").read_text("utf-8"))["rows"]
PROMPT_SHA256 = "f18e57a71a54d70b71828cfd0e09235f2d382a36e94717933ea00ed1bc8d0c4b"  # spec section 5.3
try:
    import latex2sympy2_extended  # noqa: F401 - availability probe
    HAVE_LATEX = True
except ImportError:
    HAVE_LATEX = False
needs_latex = pytest.mark.skipif(
    not HAVE_LATEX, reason="latex2sympy2_extended==1.11.0 (the 'math' extra) is not installed")


def _row(i: int, vector: dict, image: str = "x") -> dict:
    return {"index": i, "image": image, "question": f"Question {i}?", "answer": vector["gold"],
            "choices": vector["choices"], "category": "algebra"}


def _judge_from(vectors: list[dict]) -> CallableJudge:
    answers = {v["raw"]: v["judge"] for v in vectors if v["judge"] is not None}

    def reply(prompt: str, transport: str, settings: dict) -> str:
        return next(out for raw, out in answers.items() if f"Model respone: {raw}Extracted answer:" in prompt)

    return CallableJudge(reply)


def test_judge_prompt_matches_the_pinned_rendering():
    prompt = mathvision.build_judge_prompt({"question": "<QUESTION>", "prediction": "<PREDICTION>"})
    assert (len(prompt), hashlib.sha256(prompt.encode()).hexdigest()) == (1492, PROMPT_SHA256)


@needs_latex
@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"v{v['id']}")
def test_spec_vector_prefetch(vector):
    row = {**_row(0, vector), "prediction": vector["raw"]}
    assert mathvision.post_check(row, prefetch=True) == vector["prefetch"]


@pytest.fixture(scope="module")
def vector_slice():
    if not HAVE_LATEX:
        pytest.skip("latex2sympy2_extended==1.11.0 (the 'math' extra) is not installed")
    rows = [_row(i, v) for i, v in enumerate(VECTORS)]
    return mathvision.score(rows, [v["raw"] for v in VECTORS], ScoringContext(seed=42, judge=_judge_from(VECTORS)))


@pytest.mark.parametrize("position", range(len(VECTORS)), ids=[f"v{v['id']}" for v in VECTORS])
def test_spec_vector_through_the_slice_scorer(vector_slice, position):
    vector = VECTORS[position]
    record = vector_slice.records[position]
    assert (record.score, record.judge_calls) == (float(vector["correct"]), 0 if vector["judge"] is None else 1)


def test_slice_counts(vector_slice):
    correct = sum(v["correct"] for v in VECTORS)
    assert vector_slice.counts == {"hit": correct, "total": len(VECTORS), "prefetched": 3, "judged": len(VECTORS) - 3}
    assert vector_slice.score == correct / len(VECTORS) * 100


@needs_latex
@pytest.mark.parametrize(
    ("answer", "gold", "equal"),
    [("0.5", "1/2", True), ("2^3", "8", True), ("2**3", "8", True), ("1_000", "1000", True), ("1,000", "1000", True),
     ("\\frac{1}{2}", "0.5", True), ("2 \\sqrt{3}", "2\\sqrt{3}", False), ("30°", "30", False),
     ("  YES ", "yes", True),
     ("a", "14", True), ("a*2", "0", True), ("pi", "3.14159", False), ("[1, 2]", "[1, 2]", True), ("3j", "3j", True),
     ("abs(-2)", "2", True), ("9**9**9", "1", False), ("", "0", False), ("１４", "14", False), ("x - x", "0", False)],
    ids=["frac-eval", "xor-then-latex", "pow", "underscore", "thousands-latex", "latex-frac", "sqrt-nameerror",
         "degree", "case-strip", "local-a", "local-a-times-2", "pi-name", "equal-strings", "complex", "builtin",
         "huge-power", "empty", "fullwidth-digits", "cancelling-symbols"],
)
def test_is_equal_mirrors_python_eval_and_latex2sympy(answer, gold, equal):
    assert _math_equal.is_equal(answer, gold) is equal


def test_missing_latex2sympy_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "latex2sympy2_extended", None)
    monkeypatch.setattr(_math_equal, "_latex_cache", {})
    with pytest.raises(InputError, match="latex2sympy2_extended==1.11.0"):
        _math_equal.is_equal("\\frac{3}{7}", "x")


@needs_latex
def test_missing_judge_is_an_error_when_a_row_needs_it():
    vector = next(v for v in VECTORS if v["judge"] is not None)
    with pytest.raises(JudgeError, match="judge"):
        mathvision.score([_row(0, vector)], [vector["raw"]], ScoringContext(seed=42))


@needs_latex
def test_judge_route_over_http(release):
    rows = [_row(i, v) for i, v in enumerate(VECTORS[:2])]
    with OpenAIStubServer(lambda route, body: "D", model="qwen3-32b-judge") as server:
        result = mathvision.score(rows, [v["raw"] for v in VECTORS[:2]],
                                  ScoringContext(seed=42, judge=OpenAIJudge(server.url, backoff_s=0)))
    assert [r.score for r in result.records] == [1.0, 1.0]  # row 0 prefetched D; row 1 judged D
    (route, body), = server.requests
    assert route == "completions" and body["max_tokens"] == 128 and body["temperature"] == 0.0


def test_aggregation_reproduces_every_canonical_score(release):
    scores = [s for s in release.read_json(identity.RESULTS)["scores"]["benchmark_scores"]
              if s["benchmark_id"] == mathvision.KEY]
    assert scores, "results.json has no MathVision scores"
    wrong = [(s["model_id"], s["seed"], s["score"]) for s in scores
             if mathvision.aggregate(round(s["score"] * s["evaluated_rows"] / 100), s["evaluated_rows"]) != s["score"]]
    assert not wrong


@needs_latex
def test_cli_scores_a_real_format_file(release, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("PIL", reason="the TSV's images are PNGs")
    from trace_lib.testing.synthetic_campaign import write_response_file
    from trace_lib.testing.tiny_bench import tiny_png

    image = base64.b64encode(tiny_png(5)).decode("ascii")
    dataset = tmp_path / "MathVision.tsv"
    pd.DataFrame([_row(i, v, image) for i, v in enumerate(VECTORS)]).to_csv(dataset, sep="\t", index=False)
    rows = mathvision.load(dataset)
    texts = [v["raw"] for v in VECTORS]
    responses = write_response_file(tmp_path / "r.jsonl", model="tiny", seed=43, benchmark="mathvision", rows=rows,
                                    texts=texts)
    expected = mathvision.score(rows, texts, ScoringContext(seed=43, judge=CallableJudge(lambda p, t, s: "D"))).score
    with OpenAIStubServer(lambda route, body: "D", model="qwen3-32b-judge") as server:
        proc = run_cli(["score", "--trace-root", str(release.path), "--benchmark", "mathvision",
                        "--dataset", str(dataset), "--responses", str(responses), "--out", str(tmp_path / "out"),
                        "--judge-url", server.url])
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "out" / "scores.json").read_text())["score"] == expected
