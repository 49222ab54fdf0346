"""MMMU-ProVis protocol (``trace_lib.benchmarks.mmmu_pro_vision``): prompt, cot_postproc vectors, canonical numbers."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, tiny_png_b64,
                                     write_responses, write_tsv)

from trace_lib.benchmarks import mmmu_pro_vision as bench
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError
from trace_lib.scoring.judge import CallableJudge, OpenAIJudge
from trace_lib.testing.openai_server import OpenAIStubServer

pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
SPEC = load_vectors("mmmu_pro_vision")
#: SHA-256 of the CoT instruction text (234 characters, trailing space included).
INSTRUCTION_SHA256 = "92646b0bfce64fc22164089644a1c3a802bc3967b5eccceb65976c0cd118b752"


def _row(index: int = 1, answer: str = "B") -> dict:
    return {"index": index, "image": tiny_png_b64(), "question": "real question text", "answer": answer,
            **{letter: f"opt{letter}" for letter in "ABCDEFGHIJ"}}


def _score(responses, judge=None, rows=None):  # noqa: ANN001, ANN202
    judge = judge or CallableJudge(lambda *_: "Z")  # a judge route needs a judge even when every row prefetches
    return bench.score(rows or [_row(i) for i in range(len(responses))], responses,
                       ScoringContext(seed=42, judge=judge))


def test_prompt_is_one_image_then_the_cot_instruction(tmp_path: Path) -> None:
    items = bench.build_prompt(_row(), tmp_path)
    assert [i.kind for i in items] == ["image", "text"]
    assert (len(items[1].value), hashlib.sha256(items[1].value.encode()).hexdigest()) == (234, INSTRUCTION_SHA256)


def test_rows_with_several_images_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="exactly one image"):
        bench.build_prompt({**_row(), "image": [tiny_png_b64(), tiny_png_b64()]}, tmp_path)


def test_load_replaces_every_question_with_the_placeholder(tmp_path: Path) -> None:
    rows = bench.load(write_tsv(tmp_path / "MMMU_Pro_V.tsv", [_row()]))
    assert rows[0]["question"] == "placeholder"


@pytest.mark.parametrize("vector", SPEC["vectors"], ids=lambda v: str(v["id"]))
def test_spec_vector(vector: dict) -> None:
    replies = iter(vector.get("judge", []))
    record = _score([vector["response"]], CallableJudge(lambda *_: next(replies)),
                    rows=[_row(answer=vector["answer"])]).records[0]
    assert (record.detail["cot_postproc"], record.extracted, record.detail["method"], int(record.score)) == (
        vector["cot"], vector["option"], vector["method"], vector["hit"])


def test_judge_sees_the_placeholder_question_and_the_postprocessed_text() -> None:
    judge = CallableJudge(lambda *_: "C")
    _score(["Answer: B. Because X is true"], judge)
    assert "Question: placeholder?\nOptions: There are several options: \nA. optA\n" in judge.calls[0][0]
    assert judge.calls[0][0].endswith("Answer:  B. Because X is true\nYour output: ")


def test_missing_option_a_is_reformulated_by_mmmu_preproc() -> None:
    row = {**_row(answer="forty"), "A": math.nan}
    record = _score(["forty"], rows=[row]).records[0]
    assert (record.extracted, record.score) == ("A", 1.0)


def test_an_empty_response_fails_the_slice_like_upstream() -> None:
    with pytest.raises(InputError, match="cot_postproc needs text"):
        _score(["Answer: A", ""])


def test_judge_route_through_the_openai_stub_server() -> None:
    with OpenAIStubServer(lambda route, body: "D", model="qwen3-32b-judge") as server:
        result = _score(["I choose B.", "Answer: A"], OpenAIJudge(server.url, backoff_s=0, chat_pause_s=0))
    assert ([r.extracted for r in result.records], len(server.requests)) == (["D", "A"], 1)


def test_canonical_scores_reproduce_from_integer_counts(release, receipt) -> None:  # noqa: ANN001
    slices = canonical_slices(release, bench.KEY)
    receipt("slices", len(slices))
    assert slices and count_mismatches(bench.aggregate, slices) == []


def test_score_cli_on_a_real_format_file(tmp_path: Path, release) -> None:  # noqa: ANN001
    dataset = write_tsv(tmp_path / "MMMU_Pro_V.tsv", [_row(i) for i in range(2)])
    responses = write_responses(tmp_path / "r.jsonl", bench.KEY, bench.load(dataset), ["Answer: B", "I choose B."])
    with OpenAIStubServer(lambda route, body: "B", model="qwen3-32b-judge") as server:
        done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", judge_url=server.url,
                             trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == 100.0
