"""``trace-repro fetch-runs``: download selected slices of the paper's own archive (responses, extractions,
scores) at the release's pinned revisions, verified byte for byte.

Exit 0 when every selected file is in place with its pinned hash; 2 for bad input (unknown id, bad part: one line).
"""

from __future__ import annotations

import argparse
from typing import Any

from trace_lib import options
from trace_lib.exitcodes import ExitCode
from trace_lib.interrupts import stoppable


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "fetch-runs",
        help="download the paper's archived responses/extractions/scores (maveryn/trace-eval-runs), verified",
        description="Download exactly the selected parts of the paper's evaluation archive (Hugging Face dataset "
        "maveryn/trace-eval-runs) at the revisions the release pins, through huggingface_hub (HF_TOKEN, HF cache, "
        "resumable), verify the run manifest against the release, every part against its content address and "
        "benchmark_scores.json against result_sha256, and place them under DIR/runs/<run_id>/.",
    )
    parser.add_argument("--dest", required=True, metavar="DIR", help="archive root to create or complete")
    parser.add_argument("--model-id", action="append", default=None, metavar="MODEL_ID",
                        help="only this release model (repeatable; default: all)")
    parser.add_argument("--seeds", nargs="+", default=None, metavar="SEED", help="only these seeds (default: all)")
    parser.add_argument("--benchmark", action="append", default=None, metavar="KEY",
                        help="only this suite benchmark (repeatable; default: all)")
    parser.add_argument("--validation", action="store_true",
                        help="fetch the TRACE validation run (alone, unless --seeds or --benchmark is also given)")
    parser.add_argument("--cache-dir", default=None, metavar="DIR", help="Hugging Face cache (default: HF_HUB_CACHE)")
    parser.add_argument("--workers", type=options.positive_int, default=8, metavar="N",
                        help="parallel downloads (default 8)")
    parser.add_argument("--timeout", type=options.positive_seconds, default=None, metavar="S",
                        help="seconds per request: the endpoint check, each file's metadata request and each body "
                        "read (default: huggingface_hub's, HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT, 10 each)")
    options.add_to_argparse(parser, options.TRACE_ROOT)
    parser.set_defaults(run=stoppable(run, label="fetch-runs"))  # SIGTERM cleans up as Ctrl-C does


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.archive.fetch import Selection, fetch_runs, hub_downloader
    from trace_lib.campaign.plan import parse_seeds
    from trace_lib.data.hub_access import hub_timeouts
    from trace_lib.release.locate import locate_release
    from trace_lib.errors import UsageError
    from trace_lib.outputs import check_output_dir, no_empty_tree_left
    from trace_lib.release.suite import load_seeds, load_suite

    check_output_dir(args.dest, flag="--dest")  # validate first, then touch the network
    if args.cache_dir:
        check_output_dir(args.cache_dir, flag="--cache-dir")
    release = locate_release(options.given(args, options.TRACE_ROOT))
    seeds = parse_seeds(args.seeds) if args.seeds else ()
    known_seeds = load_seeds(release)
    for seed in seeds:
        if seed not in known_seeds:
            raise UsageError(f"unknown seed {seed}", field="--seeds",
                             hint=f"the release's seeds are {', '.join(str(s) for s in known_seeds)}")
    benchmarks = tuple(args.benchmark or ())
    selection = Selection(
        model_ids=tuple(args.model_id or ()), seeds=seeds, benchmarks=benchmarks, validation=args.validation,
        evaluation=not args.validation or bool(seeds or benchmarks),
    )
    known = list(load_suite(release).keys)
    download = hub_downloader(cache_dir=args.cache_dir, timeout=args.timeout)
    with no_empty_tree_left(args.dest), hub_timeouts(args.timeout):  # a failed fetch leaves no empty archive root
        report = fetch_runs(release, args.dest, selection, download=download, workers=args.workers,
                            benchmark_ids=known + ["trace_validation_iid2000"])
    print(f"{len(report.files)} archive files verified and placed under {report.dest} ({report.reused} already "
          f"present); runs: {', '.join(report.runs)}")
    print(f"next: pytest tests_reproduction/test_archive.py --archive-root {report.dest} --data-root <data>")
    return ExitCode.OK
