"""TRACE annotation similarity (bbox soft-IoU, point/segment soft distance): a diagnostic in answer-only mode.

``annotation_score(value, annotation_gt, reward_contract) -> float | None``. In the released answer-only profile
the annotation never enters the reward, but upstream still scores any ``annotation`` a response carries, so
inputs that make that arithmetic fail (a coordinate whose square overflows a float, a non-finite IoU matrix
handed to the assignment solver) abort the reward call there too; this module reproduces that arithmetic
(float32 matrices, ``scipy.optimize.linear_sum_assignment`` when scipy is installed, else upstream's greedy
matcher) so the two fail on the same inputs. Points use upstream's fallback half-life of 32 px (the adapter
passes no image size). Returns None when the annotation does not parse or the contract does not resolve.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any, Callable, Mapping

from trace_lib.answers.canonical import is_sequence, scalar_number
from trace_lib.answers.json_blocks import parse_json_like

#: Annotation type -> the one reward-contract id the resolver accepts for it (reward_contracts.py).
CONTRACT_ID_BY_TYPE: Mapping[str, str] = {
    "bbox": "bbox_soft_iou_v0",
    "bbox_sequence": "bbox_sequence_soft_iou_v0",
    "bbox_set": "bbox_set_soft_iou_v0",
    "bbox_map": "bbox_map_soft_iou_v0",
    "bbox_set_map": "bbox_set_map_soft_iou_v0",
    "point_map": "point_map_soft_distance_v0",
    "point_set_map": "point_set_map_soft_distance_v0",
    "point": "point_soft_distance_v0",
    "segment": "segment_soft_distance_v0",
    "segment_set": "segment_set_soft_distance_v0",
    "point_sequence": "point_sequence_soft_distance_v0",
    "point_set": "point_set_soft_distance_v0",
}

HALF_LIFE_PX = 32.0  # upstream's fallback point half-life when no image size is known

Point = tuple[float, float]
Segment = tuple[Point, Point]
Box = list[float]


# -- parsing ------------------------------------------------------------------------------------------------
def _pair(value: Any) -> tuple[float, float] | None:
    if not is_sequence(value) or len(value) != 2:
        return None
    x, y = scalar_number(value[0]), scalar_number(value[1])
    if x is None or y is None:
        return None
    return (x, y)


def _point(value: Any) -> Point | None:
    pair = _pair(parse_json_like(value))
    return None if pair is None else (float(pair[0]), float(pair[1]))


def _each(parsed: Any, convert: Callable[[Any], Any]) -> list[Any] | None:
    """``convert`` of every item of a parsed sequence; None when it is no sequence or an item does not convert
    (items after that one are not converted)."""
    if not is_sequence(parsed):
        return None
    out = []
    for item in parsed:
        converted = convert(item)
        if converted is None:
            return None
        out.append(converted)
    return out


def _points(value: Any) -> list[Point] | None:
    parsed = parse_json_like(value)
    single = _point_value(parsed)
    if single is not None:
        return [single]
    return _each(parsed, _point_value)


def _segment_of(item: Any) -> Segment | None:
    if not is_sequence(item) or len(item) != 2:
        return None
    left, right = _pair(item[0]), _pair(item[1])
    if left is None or right is None:
        return None
    return ((float(left[0]), float(left[1])), (float(right[0]), float(right[1])))


def _segment(value: Any) -> Segment | None:
    parsed = parse_json_like(value)
    return _segment_of(parsed) if is_sequence(parsed) else None


def _segments(value: Any) -> list[Segment] | None:
    return _each(parse_json_like(value), _segment_of)


def _box_of(value: Any) -> Box | None:
    if not is_sequence(value) or len(value) != 4:
        return None
    coords = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, Real):
            return None
        coord = float(item)  # OverflowError for ints beyond float range, as upstream
        if not math.isfinite(coord):
            return None
        coords.append(coord)
    left, right = sorted((coords[0], coords[2]))
    top, bottom = sorted((coords[1], coords[3]))
    if left == right or top == bottom:
        return None
    return [left, top, right, bottom]


def _box(value: Any) -> Box | None:
    return _box_of(parse_json_like(value))


def _boxes(value: Any) -> list[Box] | None:
    parsed = parse_json_like(value)
    if parsed is None:
        return None
    single = _box_of(parsed)
    if single is not None:
        return [single]
    if isinstance(parsed, dict) and "bboxes" in parsed:
        parsed = parsed.get("bboxes")
    return _each(parsed, _box_of)


def _keyed(value: Any, convert: Callable[[Any], Any]) -> dict[str, Any] | None:
    parsed = parse_json_like(value)
    if not isinstance(parsed, dict):
        return None
    out: dict[str, Any] = {}
    for key, item in parsed.items():
        name = str(key).strip()
        if not name or name in out:
            return None
        converted = convert(item)
        if converted is None:
            return None
        out[name] = converted
    return out


def _point_value(item: Any) -> Point | None:
    pair = _pair(item)
    return None if pair is None else (float(pair[0]), float(pair[1]))


# -- similarity ---------------------------------------------------------------------------------------------
def _distance(a: Point, b: Point) -> float:
    return float(((float(a[0]) - float(b[0])) ** 2 + (float(a[1]) - float(b[1])) ** 2) ** 0.5)


def _soft(distance: float) -> float:
    half_life = max(float(HALF_LIFE_PX), 1e-6)
    return float(math.exp(-math.log(2.0) * ((float(distance) / half_life) ** 2)))


def _iou(a: Box, b: Box) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    if inter <= 0.0:
        return 0.0
    union = max(0.0, a[2] - a[0]) * max(0.0, a[3] - a[1]) + max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1]) - inter
    if union <= 0.0:
        return 0.0
    return inter / union


def _greedy(matrix: Any) -> tuple[list[int], list[int]]:
    """Upstream's fallback matcher: repeatedly take the largest remaining entry (first one on ties)."""
    if matrix.size == 0:
        return [], []
    rows, cols = set(range(matrix.shape[0])), set(range(matrix.shape[1]))
    picked_rows, picked_cols = [], []
    while rows and cols:
        best, best_value = None, -1.0
        for row in rows:
            for col in cols:
                value = float(matrix[row, col])
                if value > best_value:
                    best_value, best = value, (row, col)
        if best is None:
            break
        picked_rows.append(best[0])
        picked_cols.append(best[1])
        rows.remove(best[0])
        cols.remove(best[1])
    return picked_rows, picked_cols


def _assign(cost: Any, *, maximise_fallback: Any) -> tuple[Any, Any]:
    """Minimum-cost assignment with scipy, else the greedy matcher on ``maximise_fallback``."""
    try:
        from scipy.optimize import linear_sum_assignment
    except Exception:  # noqa: BLE001 - upstream falls back on any import failure
        return _greedy(maximise_fallback)
    return linear_sum_assignment(cost)


def _matched_mean(pairs: list[float], pred_n: int, gt_n: int) -> float:
    return float(sum(pairs) / max(pred_n, gt_n, 1)) if pairs else 0.0


def _set_match(pred: list[Any], gt: list[Any], measure: Callable[[Any, Any], float], *, similarity: bool) -> float:
    """Mean over a one-to-one assignment of the float32 ``measure`` matrix: a similarity (IoU) is maximised and
    averaged as is, a distance is minimised and averaged softened; 1.0 when both sides are empty, 0.0 when one is."""
    import numpy as np

    if not pred and not gt:
        return 1.0
    if not pred or not gt:
        return 0.0
    matrix = np.zeros((len(pred), len(gt)), dtype=np.float32)
    for r, a in enumerate(pred):
        for c, b in enumerate(gt):
            matrix[r, c] = measure(a, b)
    if similarity:
        rows, cols = _assign(-matrix, maximise_fallback=matrix)
        return _matched_mean([float(matrix[r, c]) for r, c in zip(rows, cols)], len(pred), len(gt))
    rows, cols = _assign(matrix, maximise_fallback=-matrix)
    return _matched_mean([_soft(float(matrix[r, c])) for r, c in zip(rows, cols)], len(pred), len(gt))


def _set_iou(pred: list[Box], gt: list[Box]) -> float:
    return _set_match(pred, gt, _iou, similarity=True)


def _set_distance(pred: list[Any], gt: list[Any], distance: Callable[[Any, Any], float]) -> float:
    return _set_match(pred, gt, distance, similarity=False)


def _sequence(pred: list[Any], gt: list[Any], similarity: Callable[[Any, Any], float]) -> float:
    if not pred and not gt:
        return 1.0
    if not pred or not gt:
        return 0.0
    return _matched_mean([similarity(a, b) for a, b in zip(pred, gt)], len(pred), len(gt))


def _keyed_mean(pred: dict[str, Any], gt: dict[str, Any], per_key: Callable[[Any, Any], float]) -> float:
    if not pred and not gt:
        return 1.0
    union = set(pred) | set(gt)
    shared = sorted(set(pred) & set(gt))
    scores = [per_key(pred[k], gt[k]) for k in shared]
    return float(sum(scores) / len(union)) if scores else 0.0


def _segment_distance(a: Segment, b: Segment) -> float:
    direct = max(_distance(a[0], b[0]), _distance(a[1], b[1]))
    flipped = max(_distance(a[0], b[1]), _distance(a[1], b[0]))
    return float(min(direct, flipped))


# type -> (parser, similarity of parsed prediction and parsed ground truth)
_SCORERS: dict[str, tuple[Callable[[Any], Any], Callable[[Any, Any], float]]] = {
    "point": (_point, lambda p, g: _soft(_distance(p, g))),
    "point_set": (_points, lambda p, g: _set_distance(p, g, _distance)),
    "point_sequence": (_points, lambda p, g: _sequence(p, g, lambda a, b: _soft(_distance(a, b)))),
    "segment": (_segment, lambda p, g: _soft(_segment_distance(p, g))),
    "segment_set": (_segments, lambda p, g: _set_distance(p, g, _segment_distance)),
    "bbox": (_box, _iou),
    "bbox_set": (_boxes, _set_iou),
    "bbox_sequence": (_boxes, lambda p, g: _sequence(p, g, _iou)),
    "point_map": (lambda v: _keyed(v, _point_value), lambda p, g: _keyed_mean(p, g, lambda a, b: _soft(_distance(a, b)))),
    "point_set_map": (lambda v: _keyed(v, _points), lambda p, g: _keyed_mean(p, g, lambda a, b: _set_distance(a, b, _distance))),
    "bbox_map": (lambda v: _keyed(v, _box_of), lambda p, g: _keyed_mean(p, g, _iou)),
    "bbox_set_map": (lambda v: _keyed(v, _boxes), lambda p, g: _keyed_mean(p, g, _set_iou)),
}


def annotation_score(value: Any, annotation_gt: Mapping[str, Any], reward_contract: Mapping[str, Any]) -> float | None:
    """Similarity in [0, 1] of a predicted annotation to ``annotation_gt`` under the contract; None if unscorable.

    Raises whatever upstream's arithmetic raises on the same input (``OverflowError``, scipy's ``ValueError``).
    """
    annotation_type = str(annotation_gt.get("type", "")).strip()
    contract = reward_contract.get("annotation")
    contract = contract if isinstance(contract, dict) else {}
    contract_id = str(contract.get("id", "")).strip()
    contract_type = str(contract.get("type", "")).strip()
    expected_id = CONTRACT_ID_BY_TYPE.get(annotation_type)
    if expected_id is None or (contract_type and contract_type != annotation_type) or contract_id != expected_id:
        return None
    parse, similarity = _SCORERS[annotation_type]
    pred = parse(value)
    gt = parse(annotation_gt.get("value"))
    if pred is None or gt is None:
        return None
    return similarity(pred, gt)
