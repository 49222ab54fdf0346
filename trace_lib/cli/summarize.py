"""``trace-repro summarize --campaign-root DIR [--out DIR]``: Markdown, spreadsheet and plot against canonical.

Reads every receipt-verified slice of the selection (models and seeds default to those in the campaign directory)
and judges it as ``score`` and ``tests_reproduction`` do (each seed's slice, each model-benchmark mean, categories,
overall and the paper's claims: reproduced, differs or inconclusive; docs/tolerance.md), with the budget
``--alpha`` spread over the family of the plan the same flags give (``trace-repro plan``), never over what is on
disk. Writes ``summary.md``, ``summary.xlsx`` and ``summary.png`` (default ``<campaign>/results``; the spreadsheet
and plot need the ``report`` extra). Exit 0 when every expected slice is scored and every verdict is reproduced, 1
otherwise (differs, inconclusive, missing slices, or nothing verified; the reports are written either way), 2 on
bad arguments.
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
    options.add_to_argparse(parser, options.TRACE_ROOT, options.CAMPAIGN_ROOT, options.ALPHA, options.MARGIN,
                            options.TOLERANCE_Z, options.ARCHIVE_ROOT)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.campaign.verdicts import verdict_plan
    from trace_lib.cli.verify import campaign_inputs
    from trace_lib.release.suite import load_eval_models
    from trace_lib.reports.summarize import build_campaign_summary, write_reports

    options.reject_tolerance_z(args)
    release, suite, root, models, seeds, keys = campaign_inputs(args)
    plan = verdict_plan(release, model_ids=args.model_id, seeds=args.seeds, benchmarks=args.benchmark)
    labels = {m.model_id: m.display_name for m in load_eval_models(release)}
    summary = build_campaign_summary(root, release, suite, plan, models=models, seeds=seeds, benchmarks=keys,
                                     labels=labels, alpha=options.resolve(args, options.ALPHA),
                                     margin=options.resolve(args, options.MARGIN),
                                     archive_root=options.resolve(args, options.ARCHIVE_ROOT))
    paths = write_reports(summary, Path(args.out) if args.out else root / "results", stem=args.stem,
                          xlsx=not args.no_xlsx, plot=not args.no_plot)
    print(f"[trace-repro summarize] {len(summary.seed_scores)}/{summary.expected_slices} slices scored; "
          f"{summary.result.summary_line()}")
    print(f"[trace-repro summarize] rule: {summary.result.rule.describe()}")
    print(f"[trace-repro summarize] release: {release.label}")
    if summary.status == "nothing verified":
        print("[trace-repro summarize] campaign verdict: nothing verified (no test could be judged)")
    else:
        print(f"[trace-repro summarize] campaign verdict: {summary.status}")
    print(f"[trace-repro summarize] {summary.engine_line}")
    for verdict in summary.verdicts:
        if verdict.outcome == "differs":
            print(f"[trace-repro summarize:differs] {verdict.explain()}")
    inconclusive = summary.result.counts()["inconclusive"]
    if inconclusive:
        print(f"[trace-repro summarize] {inconclusive} inconclusive test(s): listed in the Markdown report")
    for path in paths:
        print(f"[trace-repro summarize] wrote {path}")
    return ExitCode.OK if summary.ok else ExitCode.FINDINGS
