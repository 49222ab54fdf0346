"""``trace-repro check``: the offline release preflight (no GPU, no network, no heavy imports).

Exit 0 when every group holds, 1 when any finding failed (all are listed), 2 when no release is found or a flag
is wrong. ``--json`` prints the full report. The group list in ``--help`` comes from the preflight registry.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from trace_lib import options
from trace_lib.exitcodes import ExitCode

REQUIRE_SOURCE_HELP = "fail (instead of 'not checked') when code/Markdown files are absent, e.g. on a data-only copy"


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check",
        help="offline release preflight: is everything the paper's numbers rest on present and consistent?",
        description="The offline release preflight: no GPU, no network, no heavy imports. Exit 0: every group "
        "holds; 1: findings (all listed, one line each); 2: no release found or bad flags.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    format_help = parser.format_help

    def format_help_with_groups() -> str:
        parser.epilog = _groups_epilog()  # built only when help is shown: the group modules load lazily
        return format_help()

    parser.format_help = format_help_with_groups  # type: ignore[method-assign]
    options.add_to_argparse(parser, options.TRACE_ROOT, options.UNPINNED)
    parser.add_argument("--require-source", action="store_true", help=REQUIRE_SOURCE_HELP)
    parser.add_argument("--json", action="store_true", help="print the full report as JSON (per group: status, counts)")
    parser.add_argument("--group", action="append", metavar="NAME", help="run only this group (repeatable)")
    parser.set_defaults(run=run)


def _groups_epilog() -> str:
    """The group list of ``--help``, straight from the preflight registry."""
    from trace_lib.preflight import registry

    groups = registry.groups()
    width = max(len(g.name) for g in groups)
    return "check groups, in order:\n" + "\n".join(f"  {g.name:<{width}}  {g.summary}" for g in groups)


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.preflight.report import check_release
    from trace_lib.release.locate import locate_release

    release = locate_release(options.given(args, options.TRACE_ROOT))
    report = check_release(
        release,
        pinned=not options.resolve(args, options.UNPINNED),
        require_source=bool(args.require_source),
        only=args.group,
    )
    if args.json:
        print(json.dumps(report.to_json(), indent=2, allow_nan=False))
    else:
        print(report.render_text())
    return ExitCode.OK if report.ok else ExitCode.FINDINGS
