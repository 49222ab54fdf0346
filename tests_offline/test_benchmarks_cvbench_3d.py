"""CV-Bench 3D protocol (``trace_lib.benchmarks.cvbench_3d``): prompt, matcher vectors, judge, canonical numbers, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, tiny_png_b64,
                                     write_responses, write_tsv)

from trace_lib.benchmarks import cvbench_3d as bench
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError
from trace_lib.scoring.judge import CallableJudge, OpenAIJudge
from trace_lib.testing.openai_server import OpenAIStubServer

pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
SPEC = load_vectors("cvbench_3d")
PROMPT = ("Which object is closer to the camera taking this photo, the lamp (highlighted by a red box) or the chair "
          "(highlighted by a blue box)?\n(A) lamp\n(B) chair\nAnswer with the option's letter from the given choices "
          "directly.")


def _row(index: int = 1, answer: str = "A", split: str = "3D") -> dict:
    return {"index": index, "image": tiny_png_b64(), "question": "Which object is closer?", "prompt": PROMPT,
            "A": "lamp", "B": "chair", "answer": answer, "split": split, "source": "Omni3D", "category": "Depth"}


def _score(responses, judge=None, rows=None):  # noqa: ANN001, ANN202
    judge = judge or CallableJudge(lambda *_: "Z")  # a judge route needs a judge even when every row prefetches
    return bench.score(rows or [_row(i) for i in range(len(responses))], responses,
                       ScoringContext(seed=44, judge=judge))


def test_prompt_is_images_then_the_prompt_cell_verbatim(tmp_path: Path) -> None:
    items = bench.build_prompt(_row(), tmp_path)
    assert [(i.kind, i.value if i.kind == "text" else Path(i.value).name) for i in items] == [
        ("image", "1.png"), ("text", PROMPT)]


@pytest.mark.parametrize("vector", SPEC["vectors"], ids=lambda v: str(v["id"]))
def test_spec_vector(vector: dict) -> None:
    replies = iter(vector.get("judge", []))
    record = _score([vector["response"]], CallableJudge(lambda *_: next(replies))).records[0]
    assert (record.extracted, record.detail["method"]) == (vector["option"], vector["method"])


def test_reported_key_is_the_split_overall() -> None:
    result = _score(["A", "B", "(A)", "A"])
    assert (result.score, "split=3D|Overall" in result.metrics) == (75.0, True)


def test_all_2d_rows_use_the_per_source_average() -> None:
    rows = [_row(1, split="2D"), _row(2, split="2D"), {**_row(3, split="2D"), "source": "ADE20K"}]
    assert _score(["A", "B", "A"], rows=rows).score == 75.0  # (1/2 + 1/1) / 2


def test_a_missing_split_column_is_an_input_error() -> None:
    row = {k: v for k, v in _row().items() if k != "split"}
    with pytest.raises(InputError, match="split"):
        _score(["A"], rows=[row])


def test_judge_route_through_the_openai_stub_server() -> None:
    with OpenAIStubServer(lambda route, body: "(B)", model="qwen3-32b-judge") as server:
        result = _score(["Neither; both are equally far.", "A"], OpenAIJudge(server.url, backoff_s=0, chat_pause_s=0))
        body = server.requests[-1][1]
    assert [r.extracted for r in result.records] == ["B", "A"]
    assert "Question: Which object is closer??\nOptions: There are several options: \nA. lamp\nB. chair\n" in (
        body["messages"][0]["content"][0]["text"])


def test_canonical_scores_reproduce_from_integer_counts(release, receipt) -> None:  # noqa: ANN001
    slices = canonical_slices(release, bench.KEY)
    receipt("slices", len(slices))
    assert slices and count_mismatches(bench.aggregate, slices) == []


def test_score_cli_on_a_real_format_file(tmp_path: Path, release) -> None:  # noqa: ANN001
    dataset = write_tsv(tmp_path / "CV-Bench-3D.tsv", [_row(i) for i in range(2)])
    responses = write_responses(tmp_path / "r.jsonl", bench.KEY, bench.load(dataset), ["(A)", "B) chair"], seed=44)
    with OpenAIStubServer(lambda route, body: "Z", model="qwen3-32b-judge") as server:
        done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", judge_url=server.url,
                             trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == 50.0
