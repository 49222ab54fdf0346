"""Deterministic extraction (spec §A6) replayed on the 67 upstream-generated vectors (§A10.1) and its contract."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from trace_lib.validation.extraction import EXTRACTION_VERSION, ExtractionStatus, extract

VECTORS = [json.loads(line) for line in
           (Path(__file__).parent / "data" / "validation_extraction_vectors.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_extraction_vector(vector: dict) -> None:
    result = extract(vector["response"], vector["answer_type"])
    seen = (result.status.upstream, result.route, result.typed, type(result.typed).__name__)
    assert seen == (vector["status"], vector["route"], vector["typed"], type(vector["typed"]).__name__), vector["note"]


def _candidates(response: str, answer_type: str) -> list[tuple[str, str, object, bool]]:
    return [(c.route, c.priority, c.canonical, c.accepted) for c in extract(response, answer_type).candidates]


def test_terminal_structured_answer_shadows_earlier_explicit_candidates() -> None:
    assert _candidates('Answer: 3\nIntermediate guess: \\boxed{3}\n{"answer": 4}', "integer") == [
        ("answer_line", "explicit", "3", True),
        ("boxed", "explicit", "3", True),
        ("balanced_object", "terminal_structured", "4", True),
    ]


def test_code_fence_is_terminal_but_its_inner_object_is_not() -> None:
    assert [(r, p) for r, p, _, _ in _candidates('```json\n{"answer": -2.5}\n```', "number")] == [
        ("code_fence", "terminal_structured"), ("balanced_object", "structured")]


def test_section_and_object_are_both_terminal_and_the_object_route_wins() -> None:
    result = extract('Final JSON: {"answer": 5}', "integer")
    assert {(c.route, c.priority) for c in result.candidates} == {
        ("structured_section", "terminal_structured"), ("balanced_object", "terminal_structured")}
    assert result.route == "balanced_object"


def test_rejection_reason_and_parser_are_recorded() -> None:
    (only,) = extract('{"answer": 4}', "string").candidates
    assert (only.accepted, only.rejection) == (False, "string_value_required")
    assert [c.parser for c in extract("{'answer': '4'}", "integer").candidates] == ["python_literal"]
    assert [c.parser for c in extract('{"answer": 0x1F}', "integer").candidates] == ["python_literal"]
    spans = {(c.start, c.end) for c in extract('{"answer": 7, "ANSWER": 8}', "integer").candidates}
    assert len(spans) == 1


def test_canonical_duplicates_resolve_to_the_better_ranked_route() -> None:
    result = extract("Answer: 4\n\\boxed{4.0}", "number")
    assert [c.canonical for c in result.candidates] == ["4", "4"]
    assert (result.route, result.typed) == ("answer_line", 4)


def test_the_extractor_never_sees_the_ground_truth() -> None:
    assert list(inspect.signature(extract).parameters) == ["response", "answer_type"]


def test_status_vocabulary_and_reason() -> None:
    found = extract('{"answer": 4}', "integer")
    assert found.status == "found" and found.status == "resolved" and found.resolved and found.reason is None
    assert ExtractionStatus.RESOLVED is ExtractionStatus.FOUND
    assert (found.status.value, str(found.status), found.status.upstream) == ("resolved", "resolved", "found")
    assert found.as_dict()["status"] == "found" and not found.status != "found" and "found" == found.status
    ambiguous = extract("Answer: 4\n\\boxed{5}", "integer")
    assert (ambiguous.status, ambiguous.reason) == (ExtractionStatus.AMBIGUOUS, "conflicting_candidates:4,5")
    missing = extract('Answer: 4\n{"answer": true}', "integer")
    assert missing.status == "missing" and missing.reason == "terminal_structured_rejected:boolean_not_allowed"
    assert extract("no answer at all", "integer").reason == "no_candidates"


def test_as_dict_is_upstreams_json_safe_record() -> None:
    record = extract("{'answer': {1, 2}}", "integer").as_dict()
    assert set(record) == {"version", "answer_type", "status", "route", "raw_candidate", "typed_candidate",
                           "candidate_provenance"}
    assert record["version"] == EXTRACTION_VERSION
    assert record["candidate_provenance"][0]["raw_candidate"] == [1, 2]
    inf = extract('{"answer": 1e999}', "number").as_dict()
    assert inf["candidate_provenance"][0]["raw_candidate"] == "inf"
    json.dumps(record, allow_nan=False)


def test_bad_inputs_raise_like_upstream() -> None:
    message = r"answer_type must be one of \['integer', 'number', 'option_letter', 'string'\]; got 'boolean'$"
    with pytest.raises(ValueError, match=message):
        extract("Answer: 4", "boolean")
    with pytest.raises(TypeError, match="response must be a string"):
        extract(4, "integer")  # type: ignore[arg-type]
    assert extract(None, " Integer ").status == "missing"


def test_text_answers_are_unwrapped_then_read_as_literals() -> None:
    assert extract('Final answer: "blue"', "string").typed == "blue"
    assert extract("Final answer: 0x1F", "integer").typed == 31
    assert extract("Final answer: True", "integer").reason == "all_candidates_rejected:boolean_not_allowed"


def test_only_a_whole_text_box_is_unwrapped() -> None:
    boxed = extract("Answer: \\boxed{5}", "integer")
    assert [(c.route, c.canonical) for c in boxed.candidates] == [("answer_line", "5"), ("boxed", "5")]
    assert (boxed.route, boxed.typed) == ("answer_line", 5)
    assert extract("Answer: f{5}", "integer").reason == "all_candidates_rejected:not_an_atomic_number"


def test_a_structured_section_may_hold_a_bare_scalar() -> None:
    result = extract("Final JSON: 5", "integer")
    assert [(c.route, c.priority) for c in result.candidates] == [("structured_section", "terminal_structured")]
    assert (result.route, result.typed) == ("structured_section", 5)


def test_scalars_only_where_allowed_and_never_containers() -> None:
    assert extract("```json\n5\n```\nThat is all.", "integer").candidates == ()  # non-terminal fence: no scalar
    assert extract("<answer>[1, 2]</answer>", "integer").candidates == ()  # a list without an answer key


def test_escaped_quotes_inside_object_strings() -> None:
    inner = extract(r'{"answer": "say \"}\" ok"}', "string")
    assert (inner.route, inner.typed) == ("balanced_object", 'say "}" ok')
    first = extract(r'{"\"": 0, "answer": 7}', "integer")
    assert (first.route, first.typed) == ("balanced_object", 7)


def test_as_dict_lists_sequences_and_reprs_other_literals() -> None:
    result = extract("{'answer': (1, [2, 3]), 'Answer ': b'x', 'ANSWER': 1j}", "string")
    assert [c.as_dict()["raw_candidate"] for c in result.candidates] == [[1, [2, 3]], "1j", "b'x'"]


def test_upstream_attribute_names() -> None:
    result = extract("Answer: 4\n\\boxed{x}", "integer")
    assert result.candidate_provenance == result.candidates
    assert (result.raw_candidate, result.typed_candidate) == ("4", 4)
    named = [(c.raw_candidate, c.typed_candidate, c.canonical_candidate, c.rejection_reason) for c in result.candidates]
    assert named == [("4", 4, "4", None), ("x", None, None, "not_an_atomic_number")]
