"""``trace-repro plan``: resolve and print a campaign plan (suite, run tag, seeds, models, deltas, GPU plan,
tolerance, slices). Starts nothing and writes nothing."""

from __future__ import annotations

import argparse

from trace_lib import options
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
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> ExitCode:
    options.reject_tolerance_z(args)
    release = locate_release(options.resolve(args, options.TRACE_ROOT))
    plan = plan_from_options(release, args)
    if args.slices_only:
        print("\n".join(s.id for s in plan.slices))
    else:
        print(plan.render(plan.power(release)))
    return ExitCode.OK
