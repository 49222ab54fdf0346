"""MMStar protocol (``trace_lib.benchmarks.mmstar``): prompt, spec vectors, judge transport, canonical numbers, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, tiny_png_b64,
                                     write_responses, write_tsv)

from trace_lib.benchmarks import mmstar as bench
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError, JudgeError
from trace_lib.scoring.judge import CallableJudge, OpenAIJudge
from trace_lib.testing.openai_server import OpenAIStubServer

pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
SPEC = load_vectors("mmstar")


def _row(index: int = 7, question: str = "Where is the suitcase?", answer: str = "B") -> dict:
    return {"index": index, "image": tiny_png_b64(), "question": question, **SPEC["choices"], "answer": answer,
            "category": "coarse perception", "l2-category": "image scene and topic"}


def _score(responses: list[str | None], judge=None, rows=None):  # noqa: ANN001, ANN202
    judge = judge or CallableJudge(lambda *_: "Z")  # a judge route needs a judge even when every row prefetches
    return bench.score(rows or [_row(i) for i in range(len(responses))], responses,
                       ScoringContext(seed=42, judge=judge))


def test_prompt_is_images_then_the_imagemcq_text(tmp_path: Path) -> None:
    items = bench.build_prompt(_row(), tmp_path)
    assert [(i.kind, i.value if i.kind == "text" else Path(i.value).name) for i in items] == [
        ("image", "7.png"),
        ("text", "Question: Where is the suitcase?\nOptions:\nA. The suitcase is on the book.\n"
                 "B. The suitcase is beneath the cat.\nC. The suitcase is beneath the bed.\n"
                 "D. The suitcase is beneath the book.\nPlease select the correct answer from the options above. \n"),
    ]


@pytest.mark.parametrize("vector", SPEC["vectors"], ids=lambda v: str(v["id"]))
def test_spec_vector(vector: dict) -> None:
    replies = iter(vector.get("judge", []))
    judge = CallableJudge(lambda prompt, transport, settings: next(replies))
    record = _score([vector["response"]], judge, rows=[_row(question=vector.get("question", "Where is it"))]).records[0]
    assert (record.detail["method"], record.extracted if "option" in vector else None) == (
        vector["method"], vector.get("option"))
    if "judge_prompt_starts" in vector:
        assert judge.calls[0][0].startswith(vector["judge_prompt_starts"])


def test_fallback_rows_are_marked_and_counted() -> None:
    result = _score(["B and C", "A"], CallableJudge(lambda *_: "no idea"))
    assert (result.counts["fallbacks"], result.fallbacks, result.records[0].fallback) == (1, 1, True)


def test_hits_count_against_the_dataset_answer() -> None:
    result = _score(["B", "A", "The suitcase is beneath the cat."])
    assert (result.counts["correct"], result.score) == (2, pytest.approx(200 / 3))


def test_judge_route_through_the_openai_stub_server() -> None:
    with OpenAIStubServer(lambda route, body: " C ", model="qwen3-32b-judge") as server:
        judge = OpenAIJudge(server.url, backoff_s=0, chat_pause_s=0)
        result = _score(["B and C both seem plausible", "A"], judge)
        route, body = server.requests[-1]
    assert [r.extracted for r in result.records] == ["C", "A"]
    assert (body["temperature"], body["max_tokens"], body["chat_template_kwargs"]) == (
        0, 256, {"enable_thinking": False})


def test_missing_judge_fails_the_slice_even_when_every_row_prefetches() -> None:
    with pytest.raises(JudgeError, match="none is configured"):
        bench.score([_row()], ["A"], ScoringContext(seed=42, judge=None))


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
    dataset = write_tsv(tmp_path / "MMStar.tsv", [_row(i) for i in range(3)])
    responses = write_responses(tmp_path / "mmstar.jsonl", bench.KEY, bench.load(dataset),
                                ["B", "B and C both seem plausible", "A"])
    with OpenAIStubServer(lambda route, body: "B", model="qwen3-32b-judge") as server:
        done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", judge_url=server.url,
                             trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == pytest.approx(200 / 3)
