"""Throughput of the TRACE reward (``trace_lib.training.reward.compute_score``) on one core.

Generates N deterministic responses shaped like policy outputs (reasoning then a final JSON object, fenced
answers, trailing text, bare values, stray quotes, annotation keys) with TRACE-like ground truths, scores them
in one process, and prints responses/s. Baseline: the same loop doing only ``json.loads`` of each response's
last line (a lower bound for any JSON-answer reward), so the ratio shows the cost of upstream's exact rules.
With ``--upstream-src DIR`` (a directory holding upstream's ``trace_tasks`` package and ``trace_rlvr.py``)
it also times upstream's adapter on the same inputs and checks the two agree on every response.

    python benchmarks/reward_speed.py [--n 100000] [--upstream-src DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trace_lib.training.reward import compute_score  # noqa: E402

_GROUND_TRUTHS = [("integer", 7), ("integer", 12), ("number", 3.5), ("string", "blue"), ("option_letter", "C")]
_VALUES = ["7", "12", "3.5", '"3.5"', '"blue"', '"Blue "', '"C"', '"c"', "8", "null", "[7]", '"seven"', "7.0"]
_PROSE = [
    "Let me count the objects in the image carefully. There are several rows of items. ",
    "The chart shows five bars; the tallest corresponds to 2019 and the shortest to 2021.\n",
    "Looking at the grid, row 1 has blue gems at columns 2, 5 and 7. ",
    "",
]
_SHAPES = [
    '{p}{{"answer": {v}}}',
    '{p}\n```json\n{{"answer": {v}}}\n```',
    '{p}{{"answer": {v}}}\nHope this helps!',
    "{p}The answer is {v}.",
    '{p}{{"answer": {v}, "annotation": [10, 20, 30, 40]}}',
    '{p}He said "hi. {{"answer": {v}}}',
    "{v}",
]


def build_inputs(n: int, seed: int = 0) -> list[tuple[str, str, dict]]:
    """``n`` deterministic (response, ground_truth, extra_info) triples."""
    rng = random.Random(seed)
    annotation_gt = json.dumps({"type": "bbox", "value": [12, 18, 30, 44]})
    out = []
    for _ in range(n):
        answer_type, value = rng.choice(_GROUND_TRUTHS)
        contract = {
            "reward_contract_version": "v0",
            "answer": {"id": "answer_exact_match_v0", "type": answer_type},
            "annotation": {"id": "bbox_soft_iou_v0", "type": "bbox"},
        }
        prose = rng.choice(_PROSE) * rng.randint(1, 6)
        response = rng.choice(_SHAPES).format(p=prose, v=rng.choice(_VALUES))
        extra = {"annotation_gt": annotation_gt, "reward_contract": json.dumps(contract)}
        out.append((response, json.dumps({"type": answer_type, "value": value}), extra))
    return out


def _baseline(response: str) -> float:
    try:
        json.loads(response.rstrip().rsplit("\n", 1)[-1])
        return 1.0
    except ValueError:
        return 0.0


def _rate(fn, inputs) -> tuple[float, list]:  # noqa: ANN001
    start = time.perf_counter()
    results = [fn(*item) for item in inputs]
    return len(inputs) / (time.perf_counter() - start), results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--upstream-src", type=Path, default=None)
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    inputs = build_inputs(args.n)
    ours, our_results = _rate(lambda r, g, e: compute_score("maveryn/trace", r, g, e), inputs)
    base, _ = _rate(lambda r, g, e: _baseline(r), inputs)
    values = sorted({r["overall"] for r in our_results})
    print(f"responses: {args.n} (one core); reward values seen: {values}")
    print(f"trace_lib compute_score: {ours:,.0f} responses/s")
    print(f"baseline json.loads(last line): {base:,.0f} responses/s  (ratio {ours / base:.3f})")
    if args.upstream_src:
        sys.path.insert(0, str(args.upstream_src))
        import trace_rlvr  # type: ignore[import-not-found]

        theirs, their_results = _rate(
            lambda r, g, e: trace_rlvr.compute_score([{"response": r, "ground_truth": g, **e}])[0], inputs
        )
        agree = sum(a == b for a, b in zip(our_results, their_results))
        print(f"upstream adapter: {theirs:,.0f} responses/s  (ours/upstream {ours / theirs:.2f}); agree {agree}/{args.n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
