"""``trace-repro fetch-release``: download the paper release's canonical data files, verified, atomically.

Exit 0 when every file is in place with its pinned hash; 1 when any download or hash check failed (every
failure is listed and nothing is written); 2 for a bad destination.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from trace_lib import options
from trace_lib.exitcodes import ExitCode
from trace_lib.interrupts import stoppable


def add_parser(subparsers: Any) -> None:
    from trace_lib.release.fetch import DEFAULT_BASE_URL

    parser = subparsers.add_parser(
        "fetch-release",
        help="download the paper release's canonical data files at the pinned commit and verify every hash",
        description="Download exactly the canonical data files of the TRACE paper release (rlvr branch at the "
        "pinned commit), verify every SHA-256, and write them atomically under DIR (a data-only release).",
    )
    parser.add_argument("--dest", required=True, metavar="DIR", help="release root to create or complete")
    parser.add_argument("--base-url", default=DEFAULT_BASE_URL, metavar="URL",
                        help=f"raw-file host serving <repository>/<commit>/<path> (default {DEFAULT_BASE_URL})")
    parser.add_argument("--timeout", type=options.positive_seconds, default=60.0, metavar="S",
                        help="seconds per request (default 60)")
    parser.set_defaults(run=stoppable(run, label="fetch-release"))  # SIGTERM cleans up as Ctrl-C does


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.release import identity
    from trace_lib.outputs import check_output_dir
    from trace_lib.release.fetch import FetchError, fetch_release

    check_output_dir(args.dest, flag="--dest")  # before any request
    try:
        report = fetch_release(args.dest, base_url=args.base_url, timeout=args.timeout)
    except FetchError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        print(f"error: {exc.render()}", file=sys.stderr)
        return ExitCode.FINDINGS
    kept = len(report.files) - report.downloaded
    print(f"{len(report.files)} canonical files of {identity.REPOSITORY}@{identity.COMMIT[:12]} verified in "
          f"{report.dest} ({report.downloaded} downloaded, {kept} already present)")
    print(f"next: trace-repro check --trace-root {report.dest}")
    return ExitCode.OK
