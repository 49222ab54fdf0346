"""``trace-repro doctor [--lane L ...] [--json]``: what this machine can run, and the one command that fixes each gap.

For each lane (offline, cpu_model, gpu, reproduction, archive, training): can it run here, and if not, the one
thing missing and the command that supplies it. Reports Python, the extras against the ranges trace-repro
declares, CUDA devices (nvidia-smi; torch only with --probe-cuda), release models under --model-root, data
under --data-root, the judge at --judge-url, and whether HF_TOKEN is set (never its value). Imports nothing heavy
unless asked. Exit 0 when every requested lane (default: all) can run, 1 otherwise, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from trace_lib import options
from trace_lib.exitcodes import ExitCode


def add_parser(subparsers: Any) -> None:
    from trace_lib.doctor import registry

    lanes = "\n".join(f"  {lane.name:<13} {lane.summary}" for lane in registry.LANES)
    parser = subparsers.add_parser("doctor", help="what this machine can run (per lane) and how to fix what is missing",
                                   description=__doc__, epilog=f"lanes:\n{lanes}",
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lane", action="append", default=None, metavar="LANE",
                        help="check only this lane (repeatable; default every lane)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--model-root", default=None, metavar="DIR",
                        help="directory of the release models (env TRACE_MODEL_ROOT; default trace-repro-work/models)")
    parser.add_argument("--data-root", default=None, metavar="DIR",
                        help="prepared benchmark data (env TRACE_DATA_ROOT; default trace-repro-work/data)")
    parser.add_argument("--archive-root", default=None, metavar="DIR",
                        help="local copy of the run archive (env TRACE_ARCHIVE_ROOT)")
    parser.add_argument("--probe-cuda", action="store_true", help="import torch to list CUDA devices (slower)")
    options.add_to_argparse(parser, options.TRACE_ROOT, options.JUDGE_URL)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.doctor.context import DoctorContext
    from trace_lib.doctor.report import diagnose

    ctx = DoctorContext(trace_root=args.trace_root, model_root=args.model_root,
                        data_root=args.data_root, judge_url=options.resolve(args, options.JUDGE_URL),
                        archive_root=args.archive_root, probe_cuda=args.probe_cuda)
    report = diagnose(ctx, args.lane or ())
    print(json.dumps(report.to_json(), indent=2) if args.json else report.render_text())
    return ExitCode.OK if report.ok else ExitCode.FINDINGS
