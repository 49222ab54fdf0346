"""MME-Reasoning protocol (``trace_lib.benchmarks.mme_reasoning``): prompts, extraction schedule, official checkers,
open-answer judgement, canonical numbers, CLI."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from slice_support import (canonical_slices, count_mismatches, load_vectors, run_score_cli, tiny_png_b64,
                                     write_responses, write_tsv)

from trace_lib.benchmarks import _mme_functions as checkers
from trace_lib.benchmarks import mme_reasoning as bench
from trace_lib.benchmarks._mme_extraction import extract_json_from_response, normalize_choice, validate_extraction
from trace_lib.benchmarks._mme_prompts import EXTRACTION_PROMPTS, OPEN_EVAL_PROMPT
from trace_lib.benchmarks.protocol import ScoringContext
from trace_lib.errors import InputError, JudgeError
from trace_lib.scoring.judge import CallableJudge, OpenAIJudge
from trace_lib.testing.openai_server import OpenAIStubServer

SPEC = load_vectors("mme_reasoning")
SHA = SPEC["prompt_sha256"]


def _row(index: int = 0, *, question_type: str = "choice", answer: object = "B", function_id: object = None,
         prompt_id: object = None, special_info: object = None) -> dict:
    return {"index": index, "image": tiny_png_b64(), "question": "Which option is right?\nA. 1\nB. 2",
            "answer": answer, "question_type": question_type, "function_id": function_id, "prompt_id": prompt_id,
            "special_info": special_info, "capability": "calculation", "reasoning_type": "deductive"}


def _scripted(replies: list[str]) -> CallableJudge:
    answers = iter(replies)
    return CallableJudge(lambda prompt, transport, settings: next(answers))


def _score(rows: list[dict], responses: list, judge):  # noqa: ANN001, ANN202
    return bench.score(rows, responses, ScoringContext(seed=42, judge=judge))


@pytest.mark.parametrize("prompt_id", sorted(EXTRACTION_PROMPTS))
def test_extraction_templates_are_pinned(prompt_id: str) -> None:
    assert hashlib.sha256(EXTRACTION_PROMPTS[prompt_id].encode()).hexdigest() == SHA[prompt_id]


def test_open_eval_template_is_pinned() -> None:
    assert hashlib.sha256(OPEN_EVAL_PROMPT.encode()).hexdigest() == SHA["open_eval"]
    assert len(OPEN_EVAL_PROMPT.format(question="{question}", answer="{answer}", response="{response}")) == 1314


def test_prompt_is_the_question_verbatim(tmp_path: Path) -> None:
    pytest.importorskip("PIL", reason="pillow decodes the TSV images (test extra)")
    items = bench.build_prompt(_row(2), tmp_path)
    assert [(i.kind, Path(i.value).name if i.kind == "image" else i.value) for i in items] == [
        ("image", "2.png"), ("text", "Which option is right?\nA. 1\nB. 2")]


@pytest.mark.parametrize("vector", SPEC["choice_vectors"], ids=lambda v: str(v["id"]))
def test_choice_vector(vector: dict) -> None:
    assert normalize_choice(vector["judge"]) == vector["res"]
    judge = _scripted([vector["judge"]])
    record = _score([_row(answer=vector["gold"])], ["model text"], judge).records[0]
    assert (record.extracted, record.score) == (vector["res"], float(vector["correct"]))


@pytest.mark.parametrize("vector", SPEC["open_vectors"], ids=lambda v: str(v["id"]))
def test_open_vector(vector: dict) -> None:
    judge = _scripted(["3.5", *vector["judge"]])
    rows = [_row(question_type="open", answer="\\frac{7}{2}")]
    if vector.get("fails"):
        with pytest.raises(JudgeError, match="binary decisions"):
            _score(rows, ["It is 3.5"], judge)
        return
    record = _score(rows, ["It is 3.5"], judge).records[0]
    assert (record.detail["method"], record.score) == ("open_judgement", float(vector["correct"]))
    assert [c[2]["temperature"] for c in judge.calls[1:]] == [0.0, 0.5][: vector.get("attempts", 1)]
    assert judge.calls[1][0].endswith("[Standard answer]: \\frac{7}{2}\n    [Model answer]: 3.5\n    [Judgement]:\n"
                                      "You should only output the judgement without any other texts.\n")


def test_extraction_prompt_shows_the_workbook_cells_and_budgets_grow() -> None:
    judge = _scripted(["", "B"])
    record = _score([_row()], [None], judge).records[0]
    assert "    Model Response: None\n" in judge.calls[0][0]
    assert [(c[2]["temperature"], c[2]["max_tokens"]) for c in judge.calls] == [(0.0, 1024), (0.5, 2048)]
    assert (record.extracted, record.detail["extraction_attempt"]) == ("B", 1)


def test_json_extractions_must_parse_directly_or_from_the_first_fence() -> None:
    assert validate_extraction("id_answer_pair_prompt", '{"A": 1}') == (True, '{"A": 1}')
    assert validate_extraction("id_answer_pair_prompt", 'x ```json\n{"A": 1}\n``` y') == (True, '{"A": 1}')
    assert validate_extraction("id_answer_pair_prompt", "```\nnot json\n```")[0] is False
    # the ```json pattern is tried first anywhere; its invalid content decides even if a plain fence holds JSON
    assert validate_extraction("id_answer_pair_prompt", "```\n{}\n``` ```json\nnope\n```")[0] is False
    assert extract_json_from_response("no fence") is None
    assert validate_extraction("points24_prompt", "6*4=24") == (True, "6*4=24")


def test_structured_rows_use_the_official_checker() -> None:
    rows = [
        _row(0, question_type="open", function_id="calculate_answer_function_10", prompt_id="id_answer_pair_prompt",
             answer=None),
        _row(1, question_type="open", function_id="judge_24points_function", prompt_id="points24_prompt",
             answer=None, special_info="{'init_cards': [4, 6]}"),
        _row(2, question_type="open", function_id="match_answer_function", prompt_id="id_answer_pair_prompt",
             answer="{'A': [1, 2]}"),
    ]
    judge = _scripted(['{"A": 1, "B": 4, "C": 6, "D": 5, "E": 2, "F": 3}', "6*4 = 24", '```json\n{"A": [2, 1]}\n```'])
    result = _score(rows, ["...", "...", "..."], judge)
    assert [(r.detail["method"], r.score) for r in result.records] == [
        ("calculate_answer_function_10", 1.0), ("judge_24points_function", 1.0), ("match_answer_function", 1.0)]


@pytest.mark.parametrize(("row", "extraction", "message"), [
    ({"function_id": "calculate_answer_function_3", "prompt_id": "id_answer_pair_prompt", "answer": None}, '["A"]',
     "raised AttributeError"),
    ({"function_id": "calculate_answer_function_3", "prompt_id": "id_answer_pair_prompt"}, "{}",
     "not a Python literal"),  # gold 'B': upstream's eval raises NameError
    ({"function_id": "multiple_match_function", "prompt_id": "multiple_answer_prompt", "answer": "['A']"},
     '{"a": 1, "b": 2}', "raised AssertionError"),
    ({"function_id": "judge_24points_function", "prompt_id": "points24_prompt", "answer": None}, "6*4",
     "requires special_info"),
    ({"function_id": "no_such_function", "prompt_id": "id_answer_pair_prompt"}, "{}", "unknown official function_id"),
    ({"question_type": "judge"}, "A", "question type requires function_id"),
])
def test_checker_failures_fail_the_slice(row: dict, extraction: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        _score([{**_row(question_type="open"), **row}], ["text"], _scripted([extraction]))


def test_choice_function_reads_literal_answers() -> None:
    assert checkers.choice_function("A,C", "['A', 'C']") and checkers.choice_function("44", "44")
    assert not checkers.choice_function("A,C", "A") and checkers.choice_function("None", None)
    with pytest.raises(TypeError):
        checkers.choice_function("1,2", "[1, 2]")  # upstream's ','.join of ints raises too


def test_24_points_arithmetic_only() -> None:
    cards = {"init_cards": [8, 3, 8, 3]}
    assert not checkers.judge_24points_function("8/(3-8/3)", None, dict(cards))  # 24.000000000000004
    assert checkers.judge_24points_function("(8-3)*3+8+1 = 24", None, {"init_cards": [1, 3, 3, 8, 8]}) is True
    assert checkers.judge_24points_function("6*4", None, {"init_cards": [4, 7]}) is False
    assert checkers.judge_24points_function("abs(-6)*4", None, {"init_cards": [4, 6]})
    assert not checkers.judge_24points_function("9**9**9", None, {"init_cards": [9, 9, 9]})


def test_puzzle_checkers() -> None:
    grid4 = [[1, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]]
    base = {"base_matrix": [[1, None, None, None]] + [[None] * 4] * 3}
    assert checkers.calculate_answer_function_sudoku_4(grid4, None, base)
    assert not checkers.calculate_answer_function_sudoku_4(grid4[:3], None, base)
    free = {"base_matrix": [[None] * 6] * 6}
    assert checkers.calculate_answer_function_yinyang([[0] * 6] * 6, None, free) is False  # 2x2 block of zeros
    checker = [[(r + c) % 2 for c in range(6)] for r in range(6)]
    assert checkers.calculate_answer_function_yinyang(checker, None, free) is False  # not connected
    islands = {"init_islands": [{"cord": "a1", "requirement": 1}, {"cord": "a3", "requirement": 1}]}
    assert checkers.calculate_answer_function_hashi([{"start": "a1", "end": "a3", "number": 1}], None, islands)


def test_duplicate_indices_and_api_failures_are_refused() -> None:
    judge = _scripted(["B", "B"])
    with pytest.raises(InputError, match="unique"):
        _score([_row(1), _row(1)], ["B", "B"], judge)
    with pytest.raises(InputError, match="generation failed"):
        _score([_row(1)], ["Failed to obtain answer via API."], judge)


def test_judge_is_required() -> None:
    with pytest.raises(JudgeError, match="none is configured"):
        _score([_row()], ["B"], None)


def test_score_is_mean_times_100_with_breakdowns() -> None:
    result = _score([_row(0), _row(1, answer="A")], ["B", "B"], _scripted(["B", "B"]))
    assert (result.score, result.metrics["calculation"], result.metrics["deductive"]) == (50.0, 50.0, 50.0)


def test_judge_route_through_the_openai_stub_server() -> None:
    def respond(route: str, body: dict) -> str:
        prompt = body["prompt"][0] if isinstance(body["prompt"], list) else body["prompt"]
        return "1" if "[Judgement]:" in prompt else "7/2"

    with OpenAIStubServer(respond, model="qwen3-32b-judge") as server:
        result = _score([_row(question_type="open", answer="3.5")], ["It is 7/2"], OpenAIJudge(server.url, backoff_s=0))
        bodies = [body for _, body in server.requests]
    assert (result.records[0].extracted, result.score) == ("7/2", 100.0)
    assert [(b["temperature"], b["max_tokens"], b["top_p"]) for b in bodies] == [(0.0, 1024, 1.0), (0.0, 128, 1.0)]


def test_canonical_scores_reproduce_from_integer_counts(release, receipt) -> None:  # noqa: ANN001
    slices = canonical_slices(release, bench.KEY)
    receipt("slices", len(slices))
    assert slices and count_mismatches(bench.aggregate, slices) == []


def test_score_cli_on_a_real_format_file(tmp_path: Path, release) -> None:  # noqa: ANN001
    dataset = write_tsv(tmp_path / "MME-Reasoning.tsv", [_row(0), _row(1, answer="A")])
    responses = write_responses(tmp_path / "mme_reasoning.jsonl", bench.KEY, bench.load(dataset), ["B", "B"])
    with OpenAIStubServer(lambda route, body: "B", model="qwen3-32b-judge") as server:
        done = run_score_cli(bench.KEY, dataset, responses, tmp_path / "out", judge_url=server.url,
                             trace_root=str(release.path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["score"] == 50.0


def test_compare_expression_uses_sympy_argument_sets() -> None:
    pytest.importorskip("sympy", reason="sympy (MME-Reasoning formula rows) is in the 'eval' extra")
    assert checkers.compare_expression_function({"equation": "3+2=5"}, ["2+3=5"])
    assert not checkers.compare_expression_function({"equation": "2*3"}, ["2+3", "1*6"])
