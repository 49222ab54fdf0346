"""``trace-repro status --campaign-root DIR [--watch S] [--json] [--fail-if-incomplete]``: campaign progress.

Per model and seed: durable response rows, fully generated benchmarks, scored slices (files present, and
receipt-verified as by ``trace-repro verify --phase score``); overall rows/s and ETA while watching; GPU
utilisation from ``nvidia-smi`` when present. ``--watch S`` repeats every max(1, S) seconds until complete.
Exit 0; 1 with ``--fail-if-incomplete`` when the campaign is incomplete; 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import time

from trace_lib import options
from trace_lib.exitcodes import ExitCode


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from trace_lib.campaign.estimate import add_engine_caches_option
    from trace_lib.cli.verify import add_selection_options

    parser = subparsers.add_parser("status", help="show a campaign's progress (rows, scores, rate, ETA, GPUs)",
                                   description=__doc__)
    add_selection_options(parser)
    parser.add_argument("--watch", type=options.positive_seconds, default=None, metavar="SECONDS",
                        help="repeat every SECONDS (at least 1) until the campaign is complete")
    parser.add_argument("--json", action="store_true", help="print each snapshot as one JSON object")
    parser.add_argument("--fail-if-incomplete", action="store_true", help="exit 1 when the campaign is incomplete")
    parser.add_argument("--no-gpu", action="store_true", help="do not query nvidia-smi")
    parser.add_argument("--gpus", type=options.gpu_count, default=None, metavar="N",
                        help="GPUs the campaign runs on, for the estimate it is compared with (default: those "
                             "nvidia-smi lists, else 1)")
    parser.add_argument("--calibration", default=None, metavar="FILE",
                        help="measured rates for the estimate (as 'trace-repro plan --estimate')")
    add_engine_caches_option(parser)
    options.add_to_argparse(parser, options.TRACE_ROOT, options.CAMPAIGN_ROOT)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.cli.verify import campaign_inputs
    from trace_lib.reports.collect import CampaignReader
    from trace_lib.reports.status import build_status, query_gpus

    _, suite, root, models, seeds, keys = campaign_inputs(args)
    reader = CampaignReader(root, {b.key: b.rows for b in suite.benchmarks})
    previous = None
    estimated = None
    while True:
        gpus = () if args.no_gpu else query_gpus()
        report = build_status(root, suite, models=models, seeds=seeds, benchmarks=keys, reader=reader,
                              previous=previous, gpus=gpus)
        if estimated is None:
            estimated = _estimate(args, suite, models, seeds, keys, args.gpus or len(gpus) or 1)
        against = _against_estimate(estimated, report, root)
        if args.json:
            print(json.dumps({**report.to_json(), "estimate": {**estimated.to_json(), "progress": against}},
                             sort_keys=True, allow_nan=False), flush=True)
        else:
            print("\n".join(report.lines() + [f"[trace-repro status:estimate] {line}" for line in against]),
                  flush=True)
        if args.watch is None or report.complete:
            break
        previous = report
        time.sleep(max(1.0, args.watch))
    if args.fail_if_incomplete and not report.complete:
        return ExitCode.FINDINGS
    return ExitCode.OK


def _estimate(args: argparse.Namespace, suite, models, seeds, keys, gpus: int):  # noqa: ANN001, ANN202
    from trace_lib.campaign.estimate import calibrated_rates, estimate, slice_work

    work = slice_work(suite, [(m, s, k) for m in models for s in seeds for k in keys])
    return estimate(work, calibrated_rates(args.calibration), gpus=gpus, engine_caches=args.engine_caches)


def _against_estimate(estimated, report, root) -> list[str]:  # noqa: ANN001
    import time as _time

    from trace_lib.campaign.estimate import Progress, campaign_started_at, compare_progress

    started = campaign_started_at(root)
    elapsed = None if started is None else max(0.0, _time.time() - started)
    return compare_progress(estimated, Progress(report.durable_rows, report.expected_rows, report.score_slices,
                                                report.expected_score_slices, elapsed))
