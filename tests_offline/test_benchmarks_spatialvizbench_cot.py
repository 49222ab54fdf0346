"""SpatialVizBench CoT protocol (``trace_lib.benchmarks.spatialvizbench_cot``): prompt, grader vectors, judge, CLI."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, tiny_png_b64,
                                     write_responses, write_tsv)

from trace_lib.benchmarks import spatialvizbench_cot as bench
from trace_lib.benchmarks._easi_grader import GENERIC_EXTRACT_JUDGE_PROMPT, build_grader_prompt
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import JudgeError
from trace_lib.scoring.judge import CallableJudge, OpenAIJudge
from trace_lib.testing.openai_server import OpenAIStubServer

pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
SPEC = load_vectors("spatialvizbench_cot")
#: SHA-256 of the EASI grader template (3,720 characters, before ``str.format``), equal to the pinned upstream one.
GRADER_SHA256 = "38920b216662082bec80b56ad472838499019cea56d27c530037bc859bdf3b1b"


def _row(index: int = 1, answer: str = "C", task: str = "2DRotation") -> dict:
    return {"index": index, "image": tiny_png_b64(), "question": "Which view matches?", "A": "red", "B": "blue",
            "C": "green", "D": "yellow", "answer": answer, "category": "MentalRotation", "task": task}


def _score(responses, judge, rows=None):  # noqa: ANN001, ANN202
    return bench.score(rows or [_row(i) for i in range(len(responses))], responses,
                       ScoringContext(seed=42, judge=judge))


def test_prompt_text(tmp_path: Path) -> None:
    items = bench.build_prompt(_row(), tmp_path)
    assert [i.kind for i in items] == ["image", "text"]
    assert items[1].value == bench.PRE_PROMPT + "\nQuestion:Which view matches?\nA. red\nB. blue\nC. green\nD. yellow\n"


def test_grader_template_is_pinned() -> None:
    assert (len(GENERIC_EXTRACT_JUDGE_PROMPT), hashlib.sha256(GENERIC_EXTRACT_JUDGE_PROMPT.encode()).hexdigest()) == (
        3720, GRADER_SHA256)


@pytest.mark.parametrize("vector", SPEC["replies"], ids=lambda v: str(v["id"]))
def test_spec_reply_vector(vector: dict) -> None:
    replies = iter(vector["replies"])
    record = _score(["<think>..</think><answer>B</answer>"], CallableJudge(lambda *_: next(replies))).records[0]
    assert (record.detail["grade"], record.extracted or "N/A", int(record.score)) == (
        vector["grade"], vector["extracted"], vector["hit"])


def test_spec_prompt_vector() -> None:
    vector = SPEC["prompt"]
    prompt = build_grader_prompt({**vector["row"], "prediction": "raw"})
    assert prompt == GENERIC_EXTRACT_JUDGE_PROMPT.format(
        question=vector["row"]["question"], options_block=vector["options_block"], gold_answer=vector["gold_answer"],
        llm_response="raw")


def test_every_row_goes_to_the_judge_with_the_raw_response() -> None:
    judge = CallableJudge(lambda *_: "A\tB")
    _score(["<answer>B</answer>", "B"], judge)
    assert [call[0].split("<Candidate's Answer Begin>\n")[1].split("\n")[0] for call in judge.calls] == [
        "<answer>B</answer>", "B"]


def test_summary_reports_tasks_and_categories() -> None:
    rows = [_row(1), _row(2, task="3DRotation")]
    result = _score(["x", "y"], CallableJudge(lambda p, *_: "A" if "x\n<Candidate" in p else "B"), rows=rows)
    assert result.metrics == {"overall": 50.0, "2DRotation_accuracy": 100.0, "3DRotation_accuracy": 0.0,
                              "MentalRotation_accuracy": 50.0}


def test_missing_judge_fails_the_slice() -> None:
    with pytest.raises(JudgeError):
        _score(["A"], None)


def test_judge_route_through_the_openai_stub_server() -> None:
    with OpenAIStubServer(lambda route, body: "A\tC. green", model="qwen3-32b-judge") as server:
        result = _score(["<answer>C</answer>"], OpenAIJudge(server.url, backoff_s=0, chat_pause_s=0))
        body = server.requests[-1][1]
    assert (result.score, result.records[0].extracted, body["max_tokens"], body["temperature"]) == (
        100.0, "C. green", 256, 0)


def test_canonical_scores_reproduce_from_integer_counts(release, receipt) -> None:  # noqa: ANN001
    slices = canonical_slices(release, bench.KEY)
    receipt("slices", len(slices))
    assert slices and count_mismatches(bench.aggregate, slices) == []


def test_score_cli_on_a_real_format_file(tmp_path: Path, release) -> None:  # noqa: ANN001
    dataset = write_tsv(tmp_path / "SpatialVizBench_CoT.tsv", [_row(i) for i in range(2)])
    responses = write_responses(tmp_path / "r.jsonl", bench.KEY, bench.load(dataset), ["<answer>C</answer>", "A"])
    with OpenAIStubServer(lambda route, body: "A\tC", model="qwen3-32b-judge") as server:
        done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", judge_url=server.url,
                             trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == 100.0
