"""MATCH (spec §A8.2, vectors §A10.3), the historical fields, aggregates and the binomial tolerance."""

from __future__ import annotations

import pytest

from trace_lib.validation.extraction import extract
from trace_lib.validation.historical import historical_fields
from trace_lib.validation.match import semantic_correct
from trace_lib.validation.score import aggregate, summary_markdown
from trace_lib.release.validation_suite import load_release_scores
from trace_lib.validation.tolerance import check_validation_score

MATCH = [
    ('{"answer": "Blue "}', "string", "blue", 1),
    ("Final answer: light  blue", "string", "light blue", 0),
    ('{"answer": "4.0"}', "integer", 4, 1),
    ('{"answer": "0.50"}', "number", 0.5, 1),
    ("Final answer: 0.33", "number", 0.333, 0),
    ('{"answer": 0.30000000000000004}', "number", 0.3, 0),
    ("Final answer: (c)", "option_letter", "C", 1),
    ('{"answer": 5}', "integer", 4, 0),
]


@pytest.mark.parametrize(("response", "answer_type", "gt", "correct"), MATCH,
                         ids=[f"{t}:{r}" for r, t, _, _ in MATCH])
def test_match_vector(response: str, answer_type: str, gt: object, correct: int) -> None:
    extraction = extract(response, answer_type)
    assert extraction.resolved
    assert semantic_correct(extraction.typed, gt) == correct


def test_judge_answers_match_case_insensitively() -> None:
    assert semantic_correct("cerulean blue", "Cerulean Blue") == 1
    assert semantic_correct("red.", "red") == 0


@pytest.mark.parametrize(
    ("response", "gt", "expected"),
    [
        ('Reasoning.\n{"answer": 4}', {"type": "integer", "value": 4}, (1, 1, 1.0, True, True)),
        ("```json\n{'answer': 'B'}\n```", {"type": "option_letter", "value": "b"}, (1, 1, 1.0, True, False)),
        ('{"answer": 4, "note": 1}', {"type": "integer", "value": 4}, (1, 0, 0.95, True, False)),
        ("Final answer: 4", {"type": "integer", "value": 4}, (0, 0, 0.0, False, False)),
        ("4", {"type": "integer", "value": 4}, (1, 0, 0.95, False, False)),
    ],
)
def test_historical_fields(response: str, gt: dict, expected: tuple) -> None:
    fields = historical_fields(response, gt)
    assert (fields["historical_answer_correct"], fields["historical_format_correct"], fields["historical_reward"],
            fields["structured_answer_found"], fields["terminal_rfc_json"]) == expected


def _row(i: int, correct: int, requested: int, resolved: int, task: str) -> dict:
    return {"model_slug": "m", "task": task, "historical_answer_correct": correct, "historical_format_correct": 1,
            "terminal_rfc_json": True, "historical_reward": 0.95 * correct + 0.05, "deterministic_semantic_correct":
            correct * (1 - requested), "combined_semantic_correct": correct, "deterministic_found": 1 - requested,
            "judge_requested": requested, "judge_resolved": resolved, "unresolved": requested - resolved,
            "final_extraction_route": "judge" if resolved else ("judge:missing" if requested else "deterministic:x")}


def test_unresolved_rows_stay_in_the_denominator() -> None:
    rows = [_row(0, 1, 0, 0, "t1"), _row(1, 1, 1, 1, "t1"), _row(2, 0, 1, 0, "t2"), _row(3, 0, 0, 0, "t2")]
    (overall,) = aggregate(rows, ("model_slug",))
    assert (overall["rows"], overall["combined_semantic_accuracy"], overall["unresolved_rows"]) == (4, 0.5, 1)
    assert overall["judge_resolution_rate"] == 0.5 and overall["route_counts"]["judge"] == 1
    assert [r["task"] for r in aggregate(rows, ("model_slug", "task"))] == ["t1", "t2"]
    text = summary_markdown([overall], {"m": "Model M"}, rows=2000, tasks=1000)
    assert "2,000 unseen validation instances from the same 1,000 task programs" in text
    assert "| Model M | 50.00% | 100.00% | 25.00% | 50.00% | 50.00% | 25.00% |" in text


def test_binomial_tolerance_around_the_release_score(release) -> None:
    canonical = load_release_scores(release)["trace-qwen2.5-vl-3b"]
    same = check_validation_score(canonical, canonical.score, rows=canonical.evaluated_rows)
    assert same.ok and same.delta == 0 and same.canonical_seeds == 1
    edge = check_validation_score(canonical, canonical.score + same.band + 0.05, rows=canonical.evaluated_rows)
    assert not edge.ok and "FAILED" in edge.explain()
    short = check_validation_score(canonical, canonical.score, rows=canonical.evaluated_rows - 1)
    assert not short.ok and "row count differs" in short.explain()
