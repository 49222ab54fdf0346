"""The TRACE answer-only reward as verl's custom reward function.

verl config: ``reward.custom_reward_function.path=pkg://trace_lib.training.reward``, ``.name=compute_score``;
verl's naive reward manager calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` once
per response. ``ground_truth`` is the row's ``answer_gt`` (JSON string or mapping); ``extra_info`` carries the
row's ``annotation_gt`` and ``reward_contract``. The score is the convex blend of the upstream adapter
(``maveryn/trace@rlvr:rlvr/easyr1_backend/examples/reward_function/trace_rlvr.py``):

    overall = (1 - FORMAT_WEIGHT) * accuracy + FORMAT_WEIGHT * format   ->  one of {0, 0.05, 0.95, 1}

Malformed contract inputs fail closed with upstream's exact message (:class:`RewardInputError`, a
``ValueError``): in training that aborts the run, as upstream's adapter does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trace_lib.answers.canonical import answer_matches
from trace_lib.answers.prediction import locate_prediction
from trace_lib.errors import InputError
from trace_lib.training.annotation_match import annotation_score

#: Weights the upstream adapter passes to its scorer (answer-only mode; the annotation weight is 0).
FORMAT_WEIGHT = 0.05
ANSWER_WEIGHT = 1.0
ANNOTATION_WEIGHT = 0.0
#: The contract every TRACE row carries (reward_contracts.py).
CONTRACT_VERSION = "v0"
ANSWER_CONTRACT_ID = "answer_exact_match_v0"
#: Every value ``overall`` can take (a property test and the GPU smoke test assert it).
REWARD_VALUES = frozenset({0.0, FORMAT_WEIGHT, 1.0 - FORMAT_WEIGHT, 1.0})


class RewardInputError(InputError, ValueError):
    """A reward input violates the TRACE reward contract (message identical to the upstream adapter's)."""


@dataclass(frozen=True)
class TraceScore:
    """One scored response: the values the reward logs, plus the annotation diagnostic (None when absent)."""

    overall: float
    accuracy: float
    format: float
    annotation: float | None

    def as_reward(self) -> dict[str, float]:
        """The adapter's dict (key order as upstream): ``score`` is the reward verl trains on."""
        return {
            "overall": self.overall,
            "score": self.overall,
            "accuracy": self.accuracy,
            "answer_reward": self.accuracy,
            "format": self.format,
            "zero_reward": 1.0 if self.accuracy <= 0.0 else 0.0,
            "trace_reward": 1.0,
        }


def _mapping(value: Any, field: str) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise RewardInputError(f"{field} must contain a JSON object") from None
    if not isinstance(value, Mapping):
        raise RewardInputError(f"{field} must be an object")
    return dict(value)


def decode_contract(
    ground_truth: Any, annotation_gt: Any, reward_contract: Any
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The three contract inputs as objects, validated as the upstream adapter does (same order, same messages).

    Raises:
        RewardInputError: a field is not an object / JSON object, lacks ``type``/``value``, or the contract's
            version, answer id or types disagree with the ground truth.
    """
    answer_gt = _mapping(ground_truth, "ground_truth")
    annotation = _mapping(annotation_gt, "annotation_gt")
    contract = _mapping(reward_contract, "reward_contract")
    if {"type", "value"}.difference(answer_gt):
        raise RewardInputError("ground_truth must contain type and value")
    if {"type", "value"}.difference(annotation):
        raise RewardInputError("annotation_gt must contain type and value")
    answer_side, annotation_side = contract.get("answer"), contract.get("annotation")
    if not isinstance(answer_side, Mapping):
        raise RewardInputError("reward_contract.answer must be an object")
    if not isinstance(annotation_side, Mapping):
        raise RewardInputError("reward_contract.annotation must be an object")
    if contract.get("reward_contract_version") != CONTRACT_VERSION:
        raise RewardInputError(f"reward_contract_version must be {CONTRACT_VERSION}")
    if answer_side.get("id") != ANSWER_CONTRACT_ID:
        raise RewardInputError(f"reward_contract.answer must use {ANSWER_CONTRACT_ID}")
    if answer_side.get("type") != answer_gt.get("type"):
        raise RewardInputError("reward_contract.answer type must match ground_truth")
    if not annotation_side.get("id"):
        raise RewardInputError("reward_contract.annotation must contain an id")
    if annotation_side.get("type") != annotation.get("type"):
        raise RewardInputError("reward_contract.annotation type must match annotation_gt")
    return answer_gt, annotation, contract


def score_response(
    response: str, answer_gt: Mapping[str, Any], annotation_gt: Mapping[str, Any], reward_contract: Mapping[str, Any]
) -> TraceScore:
    """Score one decoded response against already-validated contract objects (see :func:`decode_contract`)."""
    prediction = locate_prediction(response)
    accuracy = 1.0 if answer_matches(prediction.answer, answer_gt) else 0.0
    annotation = None
    if prediction.annotation is not None:
        annotation = annotation_score(prediction.annotation, annotation_gt, reward_contract)
    format_credit = 1.0 if prediction.format_ok else 0.0
    overall = float(((1.0 - FORMAT_WEIGHT) * accuracy) + (FORMAT_WEIGHT * format_credit))
    return TraceScore(overall=overall, accuracy=accuracy, format=format_credit, annotation=annotation)


def compute_score(
    data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Mapping[str, Any] | None = None
) -> dict[str, float]:
    """verl's custom reward function: the TRACE reward dict of one response (``score`` = ``overall``).

    ``data_source`` is not used (TRACE rows carry their own contract). ``extra_info`` must hold the row's
    ``annotation_gt`` and ``reward_contract`` (JSON strings or mappings).

    Raises:
        RewardInputError: the contract inputs are malformed (see :func:`decode_contract`).
    """
    extra = extra_info if isinstance(extra_info, Mapping) else {}
    response = str(solution_str or "")
    answer_gt, annotation_gt, contract = decode_contract(
        ground_truth, extra.get("annotation_gt"), extra.get("reward_contract")
    )
    return score_response(response, answer_gt, annotation_gt, contract).as_reward()
