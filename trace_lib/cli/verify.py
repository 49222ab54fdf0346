"""``trace-repro verify --campaign-root DIR --phase generation|score``: coverage and receipts of a campaign.

Checks every (model, seed, benchmark) slice: ``generation`` = a response file for the slice holding every suite
row; ``score`` = a ``scores.json`` receipt for the slice whose records and responses still hash as recorded,
scored with the current protocol version. Models and seeds default to those present in the campaign directory;
benchmarks to the whole suite. Exit 0 when complete, 1 when some slice is incomplete, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from trace_lib import options
from trace_lib.errors import UsageError
from trace_lib.exitcodes import ExitCode


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    """``--model-id``, ``--seeds``, ``--benchmark`` (spelled as the plan flags) for the campaign reports."""
    parser.add_argument("--model-id", action="append", default=None, metavar="SLUG",
                        help="a model slug to report on (repeatable; default: those in the campaign directory)")
    parser.add_argument("--seeds", nargs="+", type=options.non_negative_int, default=None, metavar="SEED",
                        help="seeds to report on (default: those in the campaign directory)")
    parser.add_argument("--benchmark", action="append", default=None, metavar="KEY",
                        help="restrict to this suite benchmark (repeatable; default: all)")


def campaign_inputs(args: argparse.Namespace) -> tuple[Any, Any, Path, tuple, tuple, tuple]:
    """(release, suite, campaign root, models, seeds, benchmarks) from the report flags.

    Raises:
        UsageError: no campaign root, a missing directory, an unknown benchmark, or nothing to report on.
    """
    from trace_lib.campaign.plan import select_benchmarks
    from trace_lib.release.locate import locate_release
    from trace_lib.release.suite import load_suite
    from trace_lib.reports.collect import resolve_selection

    release = locate_release(options.given(args, options.TRACE_ROOT))
    suite = load_suite(release)
    value = options.resolve(args, options.CAMPAIGN_ROOT)
    if not value:
        raise UsageError("no campaign root", field="--campaign-root", hint="pass --campaign-root DIR or set TRACE_CAMPAIGN_ROOT")
    root = Path(value)
    if not root.is_dir():
        raise UsageError("no such directory", field=f"--campaign-root {root}")
    benchmarks = select_benchmarks(suite, args.benchmark)
    models, seeds, keys = resolve_selection(root, suite.keys, models=args.model_id, seeds=args.seeds,
                                            benchmarks=benchmarks)
    if not models or not seeds:
        raise UsageError("no generated or scored slices found", field=f"--campaign-root {root}",
                         hint="pass --model-id and --seeds to name the expected slices")
    return release, suite, root, models, seeds, keys


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("verify", help="check a campaign's coverage and receipts (generation or score)",
                                   description=__doc__)
    parser.add_argument("--phase", required=True, choices=("generation", "score"), help="which phase to verify")
    add_selection_options(parser)
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    options.add_to_argparse(parser, options.TRACE_ROOT, options.CAMPAIGN_ROOT)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.reports.verify import verify_campaign

    _, suite, root, models, seeds, keys = campaign_inputs(args)
    report = verify_campaign(root, suite, phase=args.phase, models=models, seeds=seeds, benchmarks=keys)
    if args.json:
        print(json.dumps(report.to_json(), indent=2, sort_keys=True))
    else:
        print("\n".join(report.lines()))
    return ExitCode.OK if report.complete else ExitCode.FINDINGS
