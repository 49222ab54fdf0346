"""BLINK protocol (``trace_lib.benchmarks.blink``): prompt, spec vectors, judge transport, fallback, canonical, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, tiny_png_b64,
                                     write_responses, write_tsv)

from trace_lib.benchmarks import blink as bench
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError, JudgeError
from trace_lib.scoring.judge import CallableJudge, OpenAIJudge
from trace_lib.testing.openai_server import OpenAIStubServer

pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
SPEC = load_vectors("blink")
_DEFAULT = object()


def _row(index: int = 3, **extra: object) -> dict:
    return {"index": f"val_Depth_{index}", "image": tiny_png_b64(), "question": "Which point is closer to the camera?",
            **SPEC["choices"], "answer": SPEC["gold"], "category": "Relative_Depth", **extra}


def _score(responses: list, judge=_DEFAULT, seed: int = 42):  # noqa: ANN001, ANN202
    judge = CallableJudge(lambda *_: "Z") if judge is _DEFAULT else judge  # the route always has a judge
    return bench.score([_row(i) for i in range(len(responses))], responses, ScoringContext(seed=seed, judge=judge))


def test_prompt_is_every_image_then_the_imagemcq_text(tmp_path: Path) -> None:
    row = _row(image=f"['{tiny_png_b64()}', '{tiny_png_b64((1, 2, 3))}']")
    dataset = write_tsv(tmp_path / "BLINK.tsv", [row])
    items = bench.build_prompt(bench.load(dataset)[0], tmp_path / "img")
    assert [(i.kind, Path(i.value).name if i.kind == "image" else i.value) for i in items] == [
        ("image", "val_Depth_3_0.png"), ("image", "val_Depth_3_1.png"),
        ("text", "Question: Which point is closer to the camera?\nOptions:\nA. Point A\nB. Point B\n"
                 "Please select the correct answer from the options above. \n"),
    ]


@pytest.mark.parametrize("vector", SPEC["vectors"], ids=lambda v: str(v["id"]))
def test_spec_vector(vector: dict) -> None:
    replies = iter(vector.get("judge", []))
    judge = CallableJudge(lambda prompt, transport, settings: next(replies))
    record = _score([vector["response"]], judge).records[0]
    assert (record.detail["method"], record.extracted if "option" in vector else None, record.fallback) == (
        vector["method"], vector.get("option"), vector["method"] == "fallback")
    if "judge_prompt_contains" in vector:
        assert vector["judge_prompt_contains"] in judge.calls[0][0]


def test_judge_prompt_is_the_blink_template_with_workbook_cells() -> None:
    judge = CallableJudge(lambda *_: "(B)")
    _score(["Point B is closer to the camera."], judge)
    prompt, transport, settings = judge.calls[0]
    assert prompt.startswith("You are an AI assistant who will help me to match an answer with several options of "
                             "a single-choice question.")
    assert "output Z.If the meaning" in prompt
    assert prompt.endswith("Example 4: \nQuestion: Which point is closer to the camera??\nOptions: There are several "
                           "options: \nA. Point A\nB. Point B\n\n(Z) Failed\nAnswer: Point B is closer to the camera."
                           "\nYour output: ")
    assert (transport, settings) == ("chat", {"max_tokens": 256, "temperature": 0.0})


def test_fallback_is_seeded_marked_and_counted() -> None:
    def run(seed: int) -> list[str]:
        result = _score(["I am not sure"] * 12, CallableJudge(lambda *_: "I am not sure"), seed=seed)
        assert result.counts["fallbacks"] == result.fallbacks == 12
        assert all(r.judge_calls == 3 for r in result.records)
        return [r.extracted for r in result.records]

    first = run(42)
    assert first == run(42) and set(first) <= {"A", "B", "Z"} and first != run(43)


def test_score_counts_hits_against_the_dataset_answer() -> None:
    result = _score(["(B)", "the answer is a point", "point b", "Cannot determine the answer"])
    assert (result.counts["correct"], result.score, result.judge_calls) == (2, 50.0, 0)


def test_missing_judge_fails_the_slice_even_when_every_row_prefetches() -> None:
    with pytest.raises(JudgeError, match="none is configured"):
        _score(["(B)"], judge=None)


def test_judge_route_through_the_openai_stub_server() -> None:
    with OpenAIStubServer(lambda route, body: " (B) ", model="qwen3-32b-judge") as server:
        result = _score(["Point B is closer to the camera.", "(A)"], OpenAIJudge(server.url, backoff_s=0))
        route, body = server.requests[-1]
    assert [r.extracted for r in result.records] == ["B", "A"]
    assert (route, body["model"], body["temperature"], body["max_tokens"], body["chat_template_kwargs"]) == (
        "chat/completions", "qwen3-32b-judge", 0.0, 256, {"enable_thinking": False})
    assert body["messages"][0]["content"][0]["text"].endswith("Your output: ")


def test_empty_and_misaligned_slices_are_input_errors() -> None:
    with pytest.raises(InputError, match="empty slice"):
        bench.score([], [], ScoringContext(seed=42))
    with pytest.raises(InputError, match="do not align"):
        bench.score([_row()], [], ScoringContext(seed=42))


def test_canonical_scores_reproduce_from_integer_counts(release, receipt) -> None:  # noqa: ANN001
    slices = canonical_slices(release, bench.KEY)
    receipt("slices", len(slices))
    assert slices and count_mismatches(bench.aggregate, slices) == []


def test_score_cli_on_a_real_format_file(tmp_path: Path, release) -> None:  # noqa: ANN001
    dataset = write_tsv(tmp_path / "BLINK.tsv", [_row(i) for i in range(3)])
    responses = write_responses(tmp_path / "blink.jsonl", bench.KEY, bench.load(dataset),
                                ["(B)", "Point B is closer to the camera.", "(A)"])
    with OpenAIStubServer(lambda route, body: "(B)", model="qwen3-32b-judge") as server:
        done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", judge_url=server.url,
                             trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == pytest.approx(200 / 3)
