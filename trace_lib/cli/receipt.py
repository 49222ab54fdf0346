"""``trace-repro receipt FILE``: summarize a JUnit XML receipt; exit 1 on failures, errors, inconclusive verdicts,
or when nothing was verified (no test, or every test skipped).

A missing or malformed file is one ``error:`` line and exit 2.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from trace_lib.exitcodes import ExitCode


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "receipt",
        help="summarize a JUnit XML receipt: counts per marker, failures, the release identity tests recorded",
        description="Summarize a JUnit XML file written by 'pytest --junitxml=FILE' over trace-repro's suites. "
        "Exit 0: a test passed, none failed and no verdict is inconclusive; 1: failures, errors, inconclusive "
        "verdicts, or nothing verified (no tests, or every test skipped); 2: missing or malformed file.",
    )
    parser.add_argument("file", metavar="FILE", help="JUnit XML file")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.receipts.junit import load_junit

    summary = load_junit(args.file)
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        print(summary.render_text())
    return ExitCode.OK if summary.ok else ExitCode.FINDINGS
