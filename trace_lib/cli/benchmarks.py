"""``trace-repro benchmarks [--json]``: the suite's benchmarks and whether trace-repro implements each protocol.

One row per suite benchmark in suite order: key, category, route, rows (all from ``suite.v1.json``), and from the
protocol registry whether the protocol is implemented, its version, its judge use and its aggregate (``--json``:
``aggregate.kind`` and ``aggregate.fields``, the per-row fields ``trace-repro verdict --credits`` needs). Exit 0; with ``--require-all``, exit 1 when some
protocol is not implemented.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from trace_lib import options
from trace_lib.benchmarks import registry
from trace_lib.errors import ProtocolNotImplementedError
from trace_lib.exitcodes import ExitCode
from trace_lib.release.locate import locate_release
from trace_lib.release.suite import load_suite


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "benchmarks",
        help="list the suite's benchmarks (key, route, rows) and which protocols are implemented",
        description=__doc__.splitlines()[0],
    )
    options.add_to_argparse(parser, options.TRACE_ROOT)
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    parser.add_argument("--require-all", action="store_true", help="exit 1 when some protocol is not implemented")
    parser.set_defaults(run=run)


def benchmark_rows(trace_root: str | None) -> list[dict[str, Any]]:
    """One dict per suite benchmark: suite facts plus the protocol's implementation state."""
    suite = load_suite(locate_release(trace_root))
    out = []
    for bench in suite.benchmarks:
        entry: dict[str, Any] = {
            "key": bench.key,
            "display": bench.display,
            "category": bench.category,
            "route": bench.route,
            "rows": bench.rows,
            "implemented": False,
            "protocol_version": None,
            "judge": None,
            "aggregate": None,
        }
        try:
            protocol = registry.get_protocol(bench.key)
        except ProtocolNotImplementedError:
            pass
        else:
            entry.update(implemented=True, protocol_version=protocol.version, judge=protocol.judge,
                         aggregate=protocol.row_aggregate.to_dict())
        out.append(entry)
    return out


def run(args: argparse.Namespace) -> ExitCode:
    rows = benchmark_rows(options.given(args, options.TRACE_ROOT))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        states = [r["protocol_version"] if r["implemented"] else "NOT IMPLEMENTED" for r in rows]
        width = max(len("protocol"), *(len(s) for s in states))
        print(f"{'key':<20} {'category':<22} {'route':<20} {'rows':>5}  {'protocol':<{width}}  judge")
        for r, state in zip(rows, states):
            print(f"{r['key']:<20} {r['category']:<22} {r['route']:<20} {r['rows']:>5}  {state:<{width}}  "
                  f"{r['judge'] or '-'}")
        done = sum(r["implemented"] for r in rows)
        print(f"{done}/{len(rows)} protocols implemented; {sum(r['rows'] for r in rows)} rows per model and seed")
    if args.require_all and not all(r["implemented"] for r in rows):
        return ExitCode.FINDINGS
    return ExitCode.OK
