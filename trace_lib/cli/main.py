"""``trace-repro``: the argparse root. Each subcommand lives in its own module under ``trace_lib.cli``.

A subcommand module defines ``add_parser(subparsers)`` (registering its parser with ``set_defaults(run=...)``)
and a ``run(args) -> ExitCode`` function; modules import nothing heavy at import time. Errors that are the
user's (``TraceReproError``) print one ``error:`` line and exit 2; ``TRACE_REPRO_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from trace_lib import __version__
from trace_lib.errors import TraceReproError
from trace_lib.exitcodes import ExitCode

#: Subcommand modules, in the order ``--help`` lists them (the pipeline order).
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "trace_lib.cli.fetch_release",
    "trace_lib.cli.check",
    "trace_lib.cli.benchmarks",
    "trace_lib.cli.plan",
    "trace_lib.cli.prepare",
    "trace_lib.cli.generate",
    "trace_lib.cli.score",
    "trace_lib.cli.status",
    "trace_lib.cli.verify",
    "trace_lib.cli.summarize",
    "trace_lib.cli.receipt",
    "trace_lib.cli.train",
    "trace_lib.cli.validation",
)


def available_subcommand_modules() -> list[object]:
    """The subcommand modules that exist (a module not yet written is left out of the CLI)."""
    modules = []
    for name in SUBCOMMAND_MODULES:
        try:
            modules.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
    return modules


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trace-repro",
        description="Reproduce and verify the TRACE paper release: preflight, evaluation, training, validation.",
    )
    parser.add_argument("--version", action="version", version=f"trace-repro {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in available_subcommand_modules():
        module.add_parser(subparsers)  # type: ignore[attr-defined]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help(sys.stderr)
        return int(ExitCode.USAGE)
    try:
        return int(args.run(args))
    except TraceReproError as exc:
        if os.environ.get("TRACE_REPRO_DEBUG") == "1":
            raise
        print(f"error: {exc.render()}", file=sys.stderr)
        print("(set TRACE_REPRO_DEBUG=1 for a traceback)", file=sys.stderr)
        return int(ExitCode.USAGE)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
