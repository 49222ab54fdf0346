"""``trace-repro plan``: resolve and print a campaign plan (suite, run tag, seeds, models, deltas, GPU plan,
tolerance, slices). Starts nothing and writes nothing.

``--estimate [--gpus N] [--calibration FILE] [--output-tokens N] [--rows N] [--engine-caches STATE] [--json]``
prints instead how long the plan takes per phase (generation, judge, scoring) from its rows, the judge requests its
protocols imply and the measured rates of :mod:`trace_lib.campaign.estimate`."""

from __future__ import annotations

import argparse

from trace_lib import options
from trace_lib.campaign.engines import MAX_ENGINES_PER_GPU, MIN_ROWS_FOR_SECOND_ENGINE
from trace_lib.campaign.estimate import add_engine_caches_option
from trace_lib.campaign.plan import add_plan_options, plan_from_options
from trace_lib.exitcodes import ExitCode
from trace_lib.release.locate import locate_release


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("plan", help="print the resolved campaign plan (starts nothing)",
                                   description=__doc__)
    add_plan_options(parser.add_argument)
    options.add_to_argparse(parser, options.TRACE_ROOT, options.CAMPAIGN_ROOT, options.ALPHA, options.MARGIN,
                            options.TOLERANCE_Z, options.PRINT_CONFIG)
    parser.add_argument("--slices-only", action="store_true", help="print only the slice ids, one per line")
    estimate = parser.add_argument_group("estimate")
    estimate.add_argument("--estimate", action="store_true",
                          help="print the wall clock per phase the plan will take (trace_lib.campaign.estimate)")
    estimate.add_argument("--gpus", type=options.gpu_count, default=None, metavar="N",
                          help=f"GPUs to estimate for, 1 to {options.MAX_ESTIMATE_GPUS} (default: the plan's GPU "
                               "groups)")
    estimate.add_argument("--calibration", default=None, metavar="FILE",
                          help="rates the GPU benchmarks measured (default $TRACE_CALIBRATION or "
                               "trace-repro-work/calibration.json; else the stated H200 defaults)")
    estimate.add_argument("--rows", type=options.positive_int, default=None, metavar="N",
                          help="at most N rows per slice (a mini campaign, as benchmarks/mini_campaign.py runs)")
    estimate.add_argument("--engines-per-group", type=options.engines_per_group, default="auto", metavar="N|auto",
                          help="engines per GPU to estimate generation with (default auto: generate's rule, one "
                               f"engine for a GPU's share below {MIN_ROWS_FOR_SECOND_ENGINE:,} rows, else two)")
    add_engine_caches_option(estimate)
    estimate.add_argument("--json", action="store_true", help="print the estimate as one JSON object")
    estimate.add_argument("--output-tokens", type=options.output_tokens, default=None, metavar="N",
                          help="mean output tokens per generated row to expect (scales the generation rates)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> ExitCode:
    options.reject_tolerance_z(args)
    release = locate_release(options.given(args, options.TRACE_ROOT))
    plan = plan_from_options(release, args)
    if args.estimate:
        return _estimate(args, release, plan)
    if args.slices_only:
        print("\n".join(s.id for s in plan.slices))
    else:
        print(plan.render(plan.power(release)))
    return ExitCode.OK


def _estimate(args: argparse.Namespace, release, plan) -> ExitCode:  # noqa: ANN001
    from trace_lib.campaign.estimate import calibrated_rates, estimate, plan_work
    from trace_lib.errors import UsageError

    gpus = args.gpus if args.gpus is not None else sum(len(group) for group in plan.gpu_groups)
    if not 1 <= gpus <= options.MAX_ESTIMATE_GPUS:  # the plan's GPU groups
        raise UsageError(f"must be from 1 to {options.MAX_ESTIMATE_GPUS}", field="--gpus", found=gpus)
    rates = calibrated_rates(args.calibration)
    engines = None if args.engines_per_group == "auto" else args.engines_per_group
    if engines is not None and engines > MAX_ENGINES_PER_GPU:
        raise UsageError(f"the rates are measured for at most {MAX_ENGINES_PER_GPU} engines per GPU",
                         field="--engines-per-group", found=engines)
    est = estimate(plan_work(plan, release, rows_per_slice=args.rows), rates, gpus=gpus,
                   output_tokens=args.output_tokens, engines_per_gpu=engines, engine_caches=args.engine_caches)
    if args.json:
        import json

        print(json.dumps(est.to_json(), sort_keys=True, allow_nan=False))
    else:
        print("\n".join(est.lines()))
    return ExitCode.OK
