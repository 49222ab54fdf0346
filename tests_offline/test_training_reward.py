"""The TRACE reward as verl's custom reward function: spec §4.8 vectors, contract validation, value set."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trace_lib.training import reward
from trace_lib.training.reward import REWARD_VALUES, RewardInputError, compute_score

DATA = Path(__file__).parent / "data"
ANNOTATION_GT = {"type": "bbox", "value": [1, 2, 30, 40]}


def _contract(answer_type: str) -> dict:
    return {
        "reward_contract_version": "v0",
        "answer": {"id": "answer_exact_match_v0", "type": answer_type},
        "annotation": {"id": "bbox_soft_iou_v0", "type": "bbox"},
    }


def _extra(answer_type: str, **override: object) -> dict:
    extra = {"annotation_gt": json.dumps(ANNOTATION_GT), "reward_contract": json.dumps(_contract(answer_type))}
    extra.update(override)
    return extra


def _vectors(name: str) -> list:
    rows = [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    return [pytest.param(row, id=row["id"]) for row in rows]


@pytest.mark.parametrize("vector", _vectors("train_reward_vectors.jsonl"))
def test_spec_vector(vector: dict) -> None:
    gt = vector["answer_gt"]
    result = compute_score("maveryn/trace", vector["response"], json.dumps(gt), _extra(gt["type"]))
    assert (result["overall"], result["accuracy"], result["format"]) == (
        vector["overall"],
        vector["accuracy"],
        vector["format"],
    ), vector.get("note", "")


def _contract_case(case: dict) -> tuple[object, object, dict]:
    gt = {"type": "integer", "value": 7}
    ground_truth = case.get("ground_truth", json.dumps(gt))
    extra = _extra("integer")
    if "reward_contract" in case:
        extra["reward_contract"] = json.dumps(case["reward_contract"])
    if "annotation_gt" in case and case["annotation_gt"] is None:
        del extra["annotation_gt"]
    if case.get("as_mappings"):
        ground_truth = gt
        extra = {"annotation_gt": ANNOTATION_GT, "reward_contract": _contract("integer")}
    return case.get("response", '{"answer":7}'), ground_truth, extra


@pytest.mark.parametrize("case", _vectors("train_reward_contract_vectors.jsonl"))
def test_contract_vector(case: dict) -> None:
    response, ground_truth, extra = _contract_case(case)
    if "error" in case:
        with pytest.raises(ValueError) as info:
            compute_score("maveryn/trace", response, ground_truth, extra)
        assert isinstance(info.value, RewardInputError)
        assert str(info.value) == case["error"]
    else:
        result = compute_score("maveryn/trace", response, ground_truth, extra)
        assert (result["overall"], result["accuracy"], result["format"]) == (
            case["overall"],
            case["accuracy"],
            case["format"],
        )


def test_missing_extra_info_fails_closed() -> None:
    with pytest.raises(RewardInputError, match="annotation_gt must be an object"):
        compute_score("maveryn/trace", '{"answer": 7}', json.dumps({"type": "integer", "value": 7}), None)


def test_returns_the_adapter_keys() -> None:
    result = compute_score("maveryn/trace", "x {\"answer\": 8}", json.dumps({"type": "integer", "value": 7}), _extra("integer"))
    assert result == {
        "overall": 0.05,
        "score": 0.05,
        "accuracy": 0.0,
        "answer_reward": 0.0,
        "format": 1.0,
        "zero_reward": 1.0,
        "trace_reward": 1.0,
    }


def test_signature_is_verls_custom_reward_signature() -> None:
    params = list(inspect.signature(reward.compute_score).parameters)
    assert params == ["data_source", "solution_str", "ground_truth", "extra_info"]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)
_GT = st.sampled_from(
    [("integer", 7), ("number", 12.5), ("string", "blue"), ("option_letter", "B"), ("integer", 0)]
)


@st.composite
def _responses(draw: st.DrawFn) -> str:
    prose = draw(st.text(max_size=40))
    obj = json.dumps({draw(st.sampled_from(["answer", "Answer", "result"])): draw(_JSON)})
    tail = draw(st.sampled_from(["", ".", "\n", " ok", "```", "\n```"]))
    shape = draw(st.sampled_from(["{p}{o}{t}", "{p}\n```json\n{o}\n```{t}", "{p}", "{o}{p}", "<answer>{o}</answer>{t}"]))
    return shape.format(p=prose, o=obj, t=tail)


@settings(max_examples=400, deadline=None)
@given(response=_responses(), gt=_GT)
def test_score_is_always_one_of_four_values(response: str, gt: tuple[str, object]) -> None:
    answer_type, value = gt
    result = compute_score("maveryn/trace", response, json.dumps({"type": answer_type, "value": value}), _extra(answer_type))
    assert result["overall"] in REWARD_VALUES
    assert result["score"] == result["overall"]
    assert result["accuracy"] in (0.0, 1.0) and result["format"] in (0.0, 1.0)
    assert result["overall"] == (1 - 0.05) * result["accuracy"] + 0.05 * result["format"]
