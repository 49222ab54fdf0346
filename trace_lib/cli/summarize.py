"""``trace-repro summarize --campaign-root DIR [--out DIR]``: Markdown, spreadsheet and plot against canonical.

Reads every receipt-verified ``scores.json`` of the selected slices (models and seeds default to those in the
campaign directory), judges seed scores, per-benchmark means and complete category/overall scores with the
tolerance rule, and writes ``summary.md``, ``summary.xlsx`` and ``summary.png`` (default ``<campaign>/results``;
the spreadsheet and plot need the ``report`` extra). Exit 0 when every expected slice is scored and every verdict
is within tolerance, 1 otherwise (the reports are written either way), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trace_lib import options
from trace_lib.exitcodes import ExitCode


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from trace_lib.cli.verify import add_selection_options

    parser = subparsers.add_parser("summarize", help="write Markdown, spreadsheet and plot of a campaign vs canonical",
                                   description=__doc__)
    add_selection_options(parser)
    parser.add_argument("--out", default=None, metavar="DIR", help="output directory (default <campaign>/results)")
    parser.add_argument("--stem", default="summary", help="file name stem (default 'summary')")
    parser.add_argument("--no-xlsx", action="store_true", help="skip the spreadsheet")
    parser.add_argument("--no-plot", action="store_true", help="skip the plot")
    options.add_to_argparse(parser, options.TRACE_ROOT, options.CAMPAIGN_ROOT, options.ALPHA, options.TOLERANCE_Z)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.aggregation.tolerance import load_tolerance_rule
    from trace_lib.cli.verify import campaign_inputs
    from trace_lib.release.suite import load_eval_models
    from trace_lib.outputs import check_output_dir, file_name
    from trace_lib.reports.summarize import build_campaign_summary, summary_rule, write_reports

    file_name(args.stem, flag="--stem")  # files land in --out, never beside or above it
    if args.out:
        check_output_dir(args.out, flag="--out")
    release, suite, root, models, seeds, keys = campaign_inputs(args)
    if not args.out:
        check_output_dir(root / "results", flag="--out")
    rule = summary_rule(load_tolerance_rule(release, z=3.0), suite, models=models, seeds=seeds, benchmarks=keys,
                        alpha=options.resolve(args, options.ALPHA), z=options.resolve(args, options.TOLERANCE_Z))
    labels = {m.model_id: m.display_name for m in load_eval_models(release)}
    summary = build_campaign_summary(root, suite, rule, models=models, seeds=seeds, benchmarks=keys, labels=labels,
                                     release=release.label)
    paths = write_reports(summary, Path(args.out) if args.out else root / "results", stem=args.stem,
                          xlsx=not args.no_xlsx, plot=not args.no_plot)
    print(f"[trace-repro summarize] {len(summary.seed_scores)}/{summary.expected_slices} slices scored; "
          f"{len(summary.verdicts) - len(summary.failures)}/{len(summary.verdicts)} verdicts within tolerance "
          f"({rule.budget.describe()})")
    print(f"[trace-repro summarize] release: {release.label}")
    if summary.campaign is not None:
        print(f"[trace-repro summarize] campaign verdict: {'within tolerance' if summary.campaign.ok else 'FAILED'}")
    print(f"[trace-repro summarize] {summary.engine_line}")
    for verdict in summary.failures:
        print(f"[trace-repro summarize:out] {verdict.explain()}")
    for group in summary.campaign.failed_groups if summary.campaign else ():
        print(f"[trace-repro summarize:out] {group.explain()}")
    for path in paths:
        print(f"[trace-repro summarize] wrote {path}")
    complete = not summary.missing and summary.ok
    return ExitCode.OK if complete else ExitCode.FINDINGS
