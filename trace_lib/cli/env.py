"""``trace-repro env constraints|show``: the paper's software environment and how this one compares.

``constraints [--profile eval|train] [--out FILE] [--pypi-only]`` writes a pip constraints file derived from the
release's requirement files (stdout without ``--out``): ``pip install -c FILE -e '.[eval]'`` installs trace-repro
on the paper's engine (vllm, torch, transformers as the paper ran them). ``show [--probe] [--json]`` prints the
engine versions of this environment (vllm, torch, transformers, CUDA, GPU) against the paper's pins; exit 1 when
they differ, 0 when they match. Bad release files or flags: one ``error:`` line, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from trace_lib import options
from trace_lib.exitcodes import ExitCode


def add_parser(subparsers: Any) -> None:
    from trace_lib.environment.constraints import PROFILES

    parser = subparsers.add_parser("env", help="the paper's environment: pip constraints, engine versions vs pins",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="env_command", metavar="ACTION")
    cons = sub.add_parser("constraints", help="write pip constraints for the paper's environment",
                          description="Write a pip constraints file derived from the release's requirement files "
                          f"({', '.join(f'{k}: {v}' for k, v in PROFILES.items())}).")
    cons.add_argument("--profile", default="eval", choices=sorted(PROFILES),
                      help="eval (default): evaluation/validation/scoring; train: the paper's training base")
    cons.add_argument("--out", default=None, metavar="FILE", help="write here (atomically) instead of stdout")
    cons.add_argument("--pypi-only", action="store_true",
                      help="drop the release's extra package indexes and the local version labels (+cu128) only "
                      "they serve (PyPI's torch 2.8.0 Linux wheel is the CUDA 12.8 build)")
    options.add_to_argparse(cons, options.TRACE_ROOT)
    cons.set_defaults(run=run_constraints)
    show = sub.add_parser("show", help="engine versions of this environment against the paper's pins",
                          description="Print vllm, torch, transformers, CUDA and GPU of this environment and "
                          "whether they equal the paper's pins. Exit 0: match; 1: differs; 2: bad release.")
    show.add_argument("--probe", action="store_true",
                      help="import torch to read its CUDA build and the GPU name (slower; default reads metadata)")
    show.add_argument("--json", action="store_true", help="print the record as JSON")
    options.add_to_argparse(show, options.TRACE_ROOT)
    show.set_defaults(run=run_show)
    parser.set_defaults(run=lambda args: _no_action(parser))


def _no_action(parser: argparse.ArgumentParser) -> ExitCode:
    parser.print_help(sys.stderr)
    return ExitCode.USAGE


def run_constraints(args: argparse.Namespace) -> ExitCode:
    from trace_lib.atomic import write_text_atomic
    from trace_lib.environment.constraints import build_constraints, render_constraints
    from trace_lib.outputs import check_output_file
    from trace_lib.release.locate import locate_release

    if args.out is not None:
        check_output_file(args.out, flag="--out")
    release = locate_release(options.given(args, options.TRACE_ROOT))
    constraints = build_constraints(release, args.profile, pypi_only=args.pypi_only)
    command = f"trace-repro env constraints --profile {args.profile}" + (" --pypi-only" if args.pypi_only else "")
    text = render_constraints(release, constraints, command=command)
    if args.out is None:
        sys.stdout.write(text)
        return ExitCode.OK
    write_text_atomic(args.out, text)  # an OS error is main's one line (exit 2 or 3)
    print(f"[trace-repro env] wrote {args.out}: {len(constraints.pins)} pins from "
          f"{', '.join(constraints.source.files)} (profile {args.profile})", file=sys.stderr)
    return ExitCode.OK


def run_show(args: argparse.Namespace) -> ExitCode:
    from trace_lib.environment.engine import compare_to_paper, engine_versions, paper_engine
    from trace_lib.release.locate import locate_release

    release = locate_release(options.given(args, options.TRACE_ROOT))
    record = compare_to_paper(engine_versions(probe=args.probe), paper_engine(release))
    if args.json:
        print(json.dumps(record.to_json(), indent=2, sort_keys=True))
    else:
        for line in record.render_lines():
            print(line)
    return ExitCode.OK if record.matches_paper else ExitCode.FINDINGS
