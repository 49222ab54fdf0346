"""LogicVista protocol (``trace_lib.benchmarks.logicvista``): judge prompt, schedule, label vectors, canonical, CLI."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, tiny_png_b64,
                                     write_responses, write_tsv)

from trace_lib.benchmarks import logicvista as bench
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError, JudgeError
from trace_lib.scoring.judge import CallableJudge, OpenAIJudge, render_qwen3_no_think
from trace_lib.testing.openai_server import OpenAIStubServer

SPEC = load_vectors("logicvista")
#: SHA-256 of ``build_prompt_logicvista({'question': '{}', 'prediction': '{}'})`` at VLMEvalKit@a8b12bf1.
TEMPLATE_SHA256 = "7deb2e77a7e66aefc78ae77a34f82ec8c6afdca7491050b5bcfce96da2002c35"
QUESTION = "Which shape comes next? A. circle B. square C. star D. moon"


def _row(index: int = 0, answer: str = "B", skill: str = "inductive, spatial") -> dict:
    return {"index": index, "image": tiny_png_b64(), "question": QUESTION, "answer": answer, "skill": skill}


def _score(responses: list, judge, rows: list | None = None):  # noqa: ANN001, ANN202
    rows = rows or [_row(i) for i in range(len(responses))]
    return bench.score(rows, responses, ScoringContext(seed=42, judge=judge))


def _scripted(replies: list[str]) -> CallableJudge:
    answers = iter(replies)
    return CallableJudge(lambda prompt, transport, settings: next(answers))


def test_prompt_is_the_question_verbatim(tmp_path: Path) -> None:
    pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
    items = bench.build_prompt(_row(4), tmp_path)
    assert [(i.kind, Path(i.value).name if i.kind == "image" else i.value) for i in items] == [
        ("image", "4.png"), ("text", QUESTION)]


def test_judge_template_is_pinned_and_filled_with_workbook_cells() -> None:
    assert hashlib.sha256(bench.JUDGE_TEMPLATE.encode()).hexdigest() == TEMPLATE_SHA256
    judge = _scripted(["B"])
    _score([None], judge)
    prompt, transport, settings = judge.calls[0]
    assert prompt.endswith(f"Example 5: \nQuestion: <start>\n{QUESTION}\n<end>\nAnswer: <start>\nnan\n<end>\n"
                           "Your output: ")
    assert (transport, settings) == ("completions", {"max_tokens": 128, "temperature": 0.0, "top_p": 1.0,
                                                     "system": None})


@pytest.mark.parametrize("vector", SPEC["vectors"], ids=lambda v: str(v["id"]))
def test_spec_vector(vector: dict) -> None:
    got = bench.normalize_judgement(vector["judge"], vector["gold"])
    if vector["normalized"] is None:
        assert got is None
    else:
        assert got[:2] == (vector["normalized"], bool(vector["hit"]))


def test_invalid_extraction_is_retried_at_the_next_temperature() -> None:
    judge = _scripted(["B. Because the pattern repeats", "", "b."])
    record = _score(["It must be the square."], judge).records[0]
    assert (record.extracted, record.score, record.detail["temperature_attempt"], record.judge_calls) == (
        "B", 1.0, 1, 3)
    assert [(c[2]["temperature"], c[2]["max_tokens"]) for c in judge.calls] == [(0.0, 128), (0.5, 128), (0.5, 256)]


def test_still_invalid_after_five_temperatures_fails_the_slice() -> None:
    judge = _scripted(["N", "A..", "maybe B", "none", "?"])
    with pytest.raises(JudgeError, match="malformed option extraction after five official temperature attempts"):
        _score(["no idea"], judge)
    assert [c[2]["temperature"] for c in judge.calls] == [0.0, 0.5, 1.0, 1.5, 2.0]


def test_judge_is_required() -> None:
    with pytest.raises(JudgeError, match="none is configured"):
        _score(["B"], None)


def test_invalid_gold_label_is_an_input_error() -> None:
    with pytest.raises(InputError, match="not an option label"):
        _score(["B"], _scripted(["B"]), rows=[_row(answer="B and C")])


def test_score_is_overall_rounded_like_to_json_with_skill_breakdowns() -> None:
    rows = [_row(0), _row(1, answer="A, C", skill="deductive"), _row(2, answer="2")]
    result = _score(["B", "A and C", "B"], _scripted(["B", "CA", "D"]), rows)
    assert result.score == round(200 / 3, 10)
    assert result.metrics == {"acc/Overall": pytest.approx(200 / 3), "acc/inductive": 50.0, "acc/deductive": 100.0,
                              "acc/spatial": 50.0}
    assert result.counts["label_kind_mapped"] == 1


def test_judge_route_through_the_openai_stub_server() -> None:
    with OpenAIStubServer(lambda route, body: " C ", model="qwen3-32b-judge") as server:
        result = _score(["C"], OpenAIJudge(server.url, backoff_s=0))
        route, body = server.requests[-1]
    assert [r.extracted for r in result.records] == ["C"]
    prompt = body["prompt"][0] if isinstance(body["prompt"], list) else body["prompt"]
    assert (route, body["temperature"], body["top_p"], body["max_tokens"]) == ("completions", 0.0, 1.0, 128)
    assert prompt == render_qwen3_no_think(bench.build_judge_prompt(QUESTION, "C"))


def test_canonical_scores_reproduce_from_integer_counts(release, receipt) -> None:  # noqa: ANN001
    slices = canonical_slices(release, bench.KEY)
    receipt("slices", len(slices))
    assert slices and count_mismatches(bench.aggregate, slices) == []


def test_score_cli_on_a_real_format_file(tmp_path: Path, release) -> None:  # noqa: ANN001
    dataset = write_tsv(tmp_path / "LogicVista.tsv", [_row(i, answer=a) for i, a in enumerate(["B", "C"])])
    responses = write_responses(tmp_path / "logicvista.jsonl", bench.KEY, bench.load(dataset), ["B", "square"])
    with OpenAIStubServer(lambda route, body: "B", model="qwen3-32b-judge") as server:
        done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", judge_url=server.url,
                             trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == 50.0


def test_the_judged_table_is_reread_with_keep_default_na_false() -> None:
    # written ["2", ""], the workbook reads [2.0, NaN]; upstream's re-read with keep_default_na=False gives [2, ""]:
    # row 0's gold "2" is a label again and the blank row 1 is the one reported, as the empty string
    rows = [_row(0, answer="2"), _row(1, answer="")]
    with pytest.raises(InputError) as info:
        _score(["B", "B"], _scripted(["B", "B"]), rows)
    assert (info.value.field, info.value.found) == ("rows[1].answer", repr(""))
