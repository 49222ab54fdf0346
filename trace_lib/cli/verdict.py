"""``trace-repro verdict --credits FILE [--json]``: judge per-row results from any harness against the paper.

FILE is JSONL or Parquet with one row per (model_id, seed, benchmark_id, index): ``credit`` in [0, 1] plus the
per-row fields a benchmark's aggregate needs (``trace-repro benchmarks --json``: ``aggregate.fields``), each
holding a value its benchmark's scorer writes (TableVQA-Bench ``exact_score`` 0 or 1, ...: a file with another
is one line naming the row and the field). Every
test the rows support is judged, with the same code ``score``, ``summarize`` and ``tests_reproduction`` use: each
seed's slice, each model-benchmark mean, categories, overall and the paper's claims (its comparisons), each
reproduced, differs or inconclusive (docs/tolerance.md). The budget ``--alpha`` is spread over the tests the rows'
models, seeds and benchmarks plan. ``--archive-credits FILE``: the paper's own per-row canonical credits, same
format. Exit 0 when every test is reproduced, 1 when any differs or is inconclusive, 2 on a bad file.
"""

from __future__ import annotations

import argparse
import json

from trace_lib import options
from trace_lib.exitcodes import ExitCode


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("verdict", help="judge per-row credits (JSONL or Parquet) from any harness",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--credits", required=True, metavar="FILE", help="per-row credits (JSONL or Parquet)")
    parser.add_argument("--archive-credits", default=None, metavar="FILE",
                        help="the paper's per-row canonical credits (same format), for the canonical row variance")
    parser.add_argument("--json", action="store_true", help="print every test as JSON")
    options.add_to_argparse(parser, options.TRACE_ROOT, options.ALPHA, options.MARGIN)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.aggregation.credits import CreditTable
    from trace_lib.aggregation.verdict import judge_credits
    from trace_lib.release.locate import locate_release

    release = locate_release(options.given(args, options.TRACE_ROOT))
    credits = CreditTable.read(args.credits)
    archive = CreditTable.read(args.archive_credits) if args.archive_credits else None
    result = judge_credits(credits, release, alpha=options.resolve(args, options.ALPHA),
                           margin=options.resolve(args, options.MARGIN), archive_credits=archive)
    if args.json:
        print(json.dumps({"rule": result.rule.describe(), "family_size": result.rule.family_size,
                          "per_test_alpha": result.rule.per_test_alpha, "margin": result.rule.margin,
                          "counts": result.counts(), "status": result.status,
                          "tests": [v.to_dict() for v in result.verdicts]}, indent=1, allow_nan=False, default=str))
    else:
        print(f"[trace-repro verdict] {result.rule.describe()}")
        for verdict in result.verdicts:
            print(verdict.explain())
        print(f"[trace-repro verdict] {result.summary_line()}")
    return ExitCode.OK if result.status == "reproduced" else ExitCode.FINDINGS
