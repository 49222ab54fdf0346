"""``trace-repro``: the argparse root. Each subcommand lives in its own module under ``trace_lib.cli``.

A subcommand module defines ``add_parser(subparsers)`` (registering its parser with ``set_defaults(run=...)``)
and a ``run(args) -> ExitCode`` function; only the chosen command's module is imported. :func:`main` is the one
error handler: a ``TraceReproError`` (the user's) prints one ``error:`` line and exits 2 (3 when it is the machine's:
``machine_failure``, an engine refused its GPU's memory or stopped while it ran); an ``OSError`` prints one
``error:`` line with the path and the errno text and exits 2 for a bad path or 3 when the machine failed
(:mod:`trace_lib.exitcodes`); ``TRACE_REPRO_DEBUG=1`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import os
import select
import sys
from typing import Sequence

from trace_lib import options
from trace_lib import __version__
from trace_lib.errors import TraceReproError, os_error_line, symlink_loop_error
from trace_lib.exitcodes import EXIT_CODES_HELP, ExitCode, exit_code_for

#: Command name -> (module, one-line help). The listing of ``trace-repro --help`` comes from this table; only the
#: chosen command's module is imported (a broken or heavy module never slows or breaks the others).
COMMANDS: dict[str, tuple[str, str]] = {
    "doctor": ("trace_lib.cli.doctor", "what this machine can run (per lane) and how to fix what is missing"),
    "fetch-release": ("trace_lib.cli.fetch_release",
                      "download the paper release's canonical data files at the pinned commit and verify every hash"),
    "fetch-runs": ("trace_lib.cli.fetch_runs",
                   "download the paper's archived responses/extractions/scores (maveryn/trace-eval-runs), verified"),
    "check": ("trace_lib.cli.check",
              "offline release preflight: is everything the paper's numbers rest on present and consistent?"),
    "benchmarks": ("trace_lib.cli.benchmarks",
                   "list the suite's benchmarks (key, route, rows) and which protocols are implemented"),
    "plan": ("trace_lib.cli.plan", "print the resolved campaign plan (starts nothing)"),
    "prepare-data": ("trace_lib.cli.prepare", "download pinned benchmark data and write its manifest"),
    "prepare-models": ("trace_lib.cli.prepare", "download pinned model snapshots and write markers"),
    "generate": ("trace_lib.cli.generate", "generate responses for planned slices (resumable)"),
    "score": ("trace_lib.cli.score", "score responses (a file or a campaign) and compare to canonical"),
    "judge": ("trace_lib.cli.judge", "start or stop the Qwen3-32B judge pool (vllm serve per GPU group)"),
    "status": ("trace_lib.cli.status", "show a campaign's progress (rows, scores, rate, ETA, GPUs)"),
    "verify": ("trace_lib.cli.verify", "check a campaign's coverage and receipts (generation or score)"),
    "verdict": ("trace_lib.cli.verdict", "judge per-row credits (JSONL or Parquet) from any harness"),
    "summarize": ("trace_lib.cli.summarize", "write Markdown, spreadsheet and plot of a campaign vs canonical"),
    "diagnose": ("trace_lib.cli.diagnose", "name the pipeline stage at which two runs of a slice diverge"),
    "archive": ("trace_lib.cli.archive", "verify an archive run on a CPU: scores exact, rows identical, left to a GPU"),
    "receipt": ("trace_lib.cli.receipt",
                "summarize a JUnit XML receipt: counts per marker, failures, the release identity tests recorded"),
    "train": ("trace_lib.cli.train", "RLVR training on verl: check, prepare, smoke, run, merge"),
    "validation": ("trace_lib.cli.validation", "reproduce the TRACE validation table (8 models x 2,000 rows)"),
    "env": ("trace_lib.cli.env", "the paper's environment: pip constraints, engine versions vs pins"),
}


#: The newcomer's path, shown under ``trace-repro --help`` (the README's Quick start).
FIRST_STEPS = """first steps:
  trace-repro doctor             what this machine can run, lane by lane, and the command that fixes each gap
  trace-repro check              release preflight (bundled pinned snapshot unless --trace-root/TRACE_ROOT/a checkout)
  pytest -m offline -n 2         the offline lane (pip install -e '.[test]')
  trace-repro plan --print-config   the paper campaign that would run (starts nothing)
'trace-repro COMMAND --help' describes each command."""


def _chosen_command(argv: Sequence[str]) -> str | None:
    """The first argument naming a command (options of the root parser take no values)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The root parser: the chosen command fully built by its module, every other command as a listing stub."""
    parser = argparse.ArgumentParser(
        prog="trace-repro",
        description="Reproduce and verify the TRACE paper release: preflight, evaluation, training, validation.",
        epilog=FIRST_STEPS + "\n\n" + EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"trace-repro {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _chosen_command(argv)
    if chosen is not None:
        importlib.import_module(COMMANDS[chosen][0]).add_parser(subparsers)
    for name, (_, help_text) in COMMANDS.items():
        if name not in subparsers.choices:
            subparsers.add_parser(name, help=help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help(sys.stderr)
        return int(ExitCode.USAGE)
    debug = options.DEBUG_ENV.enabled()
    try:
        return int(args.run(args))
    except TraceReproError as exc:
        if debug:
            raise
        print(f"error: {exc.render()}", file=sys.stderr)
        return int(ExitCode.SYSTEM if exc.machine_failure else ExitCode.USAGE)  # the machine, not the user's input
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError as exc:
        if not stdout_reader_left():  # a pipe of the command's own (a child, a socket): the machine's error
            return _os_error(exc, debug)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # `... | head`: no traceback at exit
        return int(ExitCode.READER_LEFT)  # the command did not finish: never a silent 0
    except OSError as exc:
        return _os_error(exc, debug)
    except RuntimeError as exc:
        loop = symlink_loop_error(exc)
        if loop is None:
            raise
        return _os_error(loop, debug)


def _os_error(exc: OSError, debug: bool) -> int:
    """An OS error as one ``error:`` line and its exit code (USAGE for a bad path, else SYSTEM)."""
    if debug:
        raise exc
    code = exit_code_for(exc)
    what = "" if code == ExitCode.USAGE else "the machine failed: "
    print(f"error: {what}{os_error_line(exc)}", file=sys.stderr)
    return int(code)


def stdout_reader_left() -> bool:
    """Whether stdout is a pipe whose reader has closed it (``poll`` reports an error on it), as after
    ``trace-repro ... | head``; False for anything else, a pipe still read, a file or a terminal."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll, no descriptor (a captured stdout)
        return False
