"""ERQA protocol (``trace_lib.benchmarks.erqa``): interleaved prompt, grader vectors, judge, canonical numbers, CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, tiny_png_b64,
                                     write_responses, write_tsv)

from trace_lib.benchmarks import erqa as bench
from trace_lib.benchmarks._easi_grader import GENERIC_EXTRACT_JUDGE_PROMPT, build_grader_prompt
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError
from trace_lib.scoring.judge import CallableJudge, OpenAIJudge
from trace_lib.testing.openai_server import OpenAIStubServer

pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
SPEC = load_vectors("erqa")


def _row(index: int = 1, images: int = 1, question: str = "Is the cup to the left?\nOptions:\nA. Yes\nB. No",
         visual_indices: object = "[0]", answer: str = "A") -> dict:
    cell = tiny_png_b64() if images == 1 else repr([tiny_png_b64((i, 0, 0)) for i in range(images)])
    return {"index": index, "image": cell, "question": question, "visual_indices": visual_indices, "answer": answer,
            "question_type": "Spatial Reasoning"}


@pytest.mark.parametrize("vector", SPEC["prompts"], ids=lambda v: str(v["id"]))
def test_spec_prompt_vector(vector: dict, tmp_path: Path) -> None:
    indices = math.nan if vector["visual_indices"] is None else vector["visual_indices"]
    row = {"index": 4, "image": [f"img{i}" for i in range(vector["images"])], "question": vector["question"],
           "visual_indices": indices}
    paths = [f"/img/{i}.png" for i in range(vector["images"])]
    if vector.get("error"):
        with pytest.raises(InputError, match="visual_indices"):
            bench.parse_visual_indices(indices, index=4)
        return
    items = bench.interleave(row["question"], paths, bench.parse_visual_indices(indices, index=4))
    assert [[i.kind, paths.index(i.value) if i.kind == "image" else i.value] for i in items] == vector["items"]


def test_build_prompt_decodes_list_images_in_row_order(tmp_path: Path) -> None:
    dataset = write_tsv(tmp_path / "ERQA.tsv", [_row(images=2, question="Look <here> and <there>",
                                                     visual_indices="[5, 15]")])
    items = bench.build_prompt(bench.load(dataset)[0], tmp_path / "images")
    assert [(i.kind, i.value if i.kind == "text" else Path(i.value).name) for i in items] == [
        ("text", "Look "), ("image", "1_0.png"), ("text", "<here> and"), ("image", "1_1.png"), ("text", " <there>")]


@pytest.mark.parametrize("vector", SPEC["replies"], ids=lambda v: str(v["id"]))
def test_spec_reply_vector(vector: dict) -> None:
    replies = iter(vector["replies"])
    result = bench.score([_row()], ["A"], ScoringContext(seed=42, judge=CallableJudge(lambda *_: next(replies))))
    assert int(result.records[0].score) == vector["hit"]


@pytest.mark.parametrize("vector", SPEC["choices"], ids=lambda v: str(v["id"]))
def test_spec_choice_vector(vector: dict) -> None:
    prompt = build_grader_prompt({"question": vector["question"], "answer": vector["answer"], "prediction": "r"})
    assert prompt == GENERIC_EXTRACT_JUDGE_PROMPT.format(question=vector["question"],
                                                         options_block=vector["options_block"],
                                                         gold_answer=vector["gold_answer"], llm_response="r")


def test_judge_route_through_the_openai_stub_server() -> None:
    with OpenAIStubServer(lambda route, body: "B\tA", model="qwen3-32b-judge") as server:
        result = bench.score([_row()], ["B"], ScoringContext(seed=43, judge=OpenAIJudge(server.url, backoff_s=0,
                                                                                           chat_pause_s=0)))
        body = server.requests[-1][1]
    assert (result.score, body["chat_template_kwargs"]) == (0.0, {"enable_thinking": False})


def test_canonical_scores_reproduce_from_integer_counts(release, receipt) -> None:  # noqa: ANN001
    slices = canonical_slices(release, bench.KEY)
    receipt("slices", len(slices))
    assert slices and count_mismatches(bench.aggregate, slices) == []


def test_score_cli_on_a_real_format_file(tmp_path: Path, release) -> None:  # noqa: ANN001
    dataset = write_tsv(tmp_path / "ERQA.tsv", [_row(i, images=2, visual_indices="[0, 0]") for i in range(2)])
    responses = write_responses(tmp_path / "r.jsonl", bench.KEY, bench.load(dataset), ["A", "B"])
    with OpenAIStubServer(lambda route, body: "A\tA", model="qwen3-32b-judge") as server:
        done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", judge_url=server.url,
                             trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == 100.0
