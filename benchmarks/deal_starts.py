"""What counting engine starts in the deal saves, by the estimate's arithmetic (issue 28; no GPU).

``generate`` deals each (model, benchmark) to the worker whose load it leaves lowest, a model new to a worker
adding ``START_COST_ROWS`` (:func:`trace_lib.campaign.plan.deal_slices`). This prints, for the paper campaign (or
``--model-id``/``--seeds``) on 1-8 GPUs, the starts of the engine that finishes last and ``trace-repro plan
--estimate``'s generation time dealt that way and dealt by rows alone (the baseline, ``start_rows=0``), side by
side, and their ratio. Rates: ``--calibration FILE``, else the stated H200 defaults. A prediction, not a measurement.

    python benchmarks/deal_starts.py [--gpus 1,2,4,8] [--calibration FILE] [--engine-caches new-model]
        [--model-id ID ...] [--seeds 42 43 44] [--trace-root DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rows_for(release, model_ids: list[str] | None, seeds: list[int], gpus: list[int], calibration: str | None,
             engine_caches: str) -> list[dict]:
    """One row per GPU count: the last engine's starts and the generation seconds, counted and by rows alone."""
    from trace_lib.campaign.estimate import calibrated_rates, estimate, plan_work
    from trace_lib.campaign.plan import build_plan

    plan = build_plan(release, model_ids=model_ids, seeds=seeds)  # a plan only: nothing is read or written
    work = plan_work(plan, release)
    rates = calibrated_rates(calibration)
    out = []
    for count in gpus:
        runs = {name: estimate(work, rates, gpus=count, engine_caches=engine_caches, start_rows=start_rows)
                for name, start_rows in (("counted", None), ("by_rows", 0))}
        gen = {name: est.phase("generation") for name, est in runs.items()}
        out.append({"gpus": count, "start_s": {n: g.start_s for n, g in gen.items()},
                    "generation_s": {n: g.seconds for n, g in gen.items()},
                    "ratio": gen["by_rows"].seconds / gen["counted"].seconds})
    return out


def main(argv: list[str] | None = None) -> int:
    from trace_lib.generation.backends.vllm_caches import ENGINE_CACHES
    from trace_lib.release.locate import locate_release

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", default="1,2,4,8", help="GPU counts, comma-separated")
    parser.add_argument("--calibration", default=None)
    parser.add_argument("--engine-caches", choices=ENGINE_CACHES, default="new-model")
    parser.add_argument("--model-id", action="append", default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    parser.add_argument("--trace-root", default=None)
    args = parser.parse_args(argv)
    try:
        gpus = [int(g) for g in args.gpus.split(",") if g]
    except ValueError:
        parser.error(f"--gpus: comma-separated integers, not {args.gpus!r}")
    if not gpus or min(gpus) < 1:
        parser.error("--gpus: each count at least 1")
    table = rows_for(locate_release(args.trace_root), args.model_id, args.seeds, gpus, args.calibration,
                     args.engine_caches)
    print("| GPUs | last engine's start s (by rows / counted) | generation (by rows) | generation (counted) "
          "| by rows / counted |")
    print("| --- " * 5 + "|")
    for r in table:
        print(f"| {r['gpus']} | {r['start_s']['by_rows']:.0f} / {r['start_s']['counted']:.0f} | "
              f"{r['generation_s']['by_rows'] / 60:.1f} min | {r['generation_s']['counted'] / 60:.1f} min | "
              f"{r['ratio']:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
