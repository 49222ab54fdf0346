"""``trace-repro archive verify A [--data-root D] [--run-id ID] [--json] [--out DIR]``: what this CPU proves about
an archive run, per slice.

For every slice of archive A (a root holding ``runs/<run_id>/`` or one run directory; ``--model-id``, ``--seeds``,
``--benchmark`` narrow it): the archived responses re-scored through trace-repro's protocols against the release's
canonical score (exact, |delta| <= 1e-9), every row's eight public hash fields recomputed from trace-repro's own
requests over the run's dataset view (needs the benchmark data under ``--data-root``), the run that answered and
whether the release pins it, and what is left to a GPU (sampling). Markdown on stdout (``--json``: JSON instead);
``--out DIR`` (outside A and the data root, checked before any slice) also writes ``archive-verify.md`` and
``archive-verify.json`` there. Exit 0 when every slice is proven, 1 when one is not (or could not be checked), 2 on
bad arguments.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trace_lib import options
from trace_lib.exitcodes import ExitCode


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "archive", help="verify an archive run on a CPU: scores exact, rows identical, left to a GPU",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="archive_action", metavar="ACTION", required=True)
    verify = actions.add_parser("verify", help="per slice: scores exact, rows identical in all eight hashes, "
                                               "what is left to a GPU", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    verify.add_argument("archive", metavar="A", help="archive root or run directory")
    verify.add_argument("--run-id", default=None, metavar="ID", help="the run to read when A holds several")
    verify.add_argument("--data-root", default=None, metavar="DIR",
                        help="prepared benchmark data (env TRACE_DATA_ROOT; default trace-repro-work/data)")
    verify.add_argument("--model-id", action="append", default=None, metavar="MODEL_ID", help="only this model")
    verify.add_argument("--seeds", nargs="+", default=None, metavar="SEED", help="only these seeds")
    verify.add_argument("--benchmark", action="append", default=None, metavar="KEY", help="only this benchmark")
    verify.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    verify.add_argument("--out", default=None, metavar="DIR", help="also write archive-verify.{md,json} here")
    options.add_to_argparse(verify, options.TRACE_ROOT, options.JUDGE_URL)
    verify.set_defaults(run=run)


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.archive.lane import ArchiveLane
    from trace_lib.archive.verify import render_markdown, to_json, verify_slices
    from trace_lib.atomic import atomic_outputs, json_document
    from trace_lib.campaign.plan import DATA_ROOT_ENV, parse_seeds
    from trace_lib.options import work_root
    from trace_lib.outputs import check_output_dir, check_outside_inputs
    from trace_lib.errors import UsageError
    from trace_lib.release.locate import locate_release

    release = locate_release(options.given(args, options.TRACE_ROOT))
    data_root = work_root(args.data_root, DATA_ROOT_ENV, "data", directory="--data-root")
    lane = ArchiveLane.create(release, data_root=data_root,
                              archive_root=args.archive, judge_url=options.resolve(args, options.JUDGE_URL),
                              run_id=args.run_id)
    if lane.archive is None:
        raise UsageError(f"cannot open the archive: {lane.archive_problem}", field="A")
    seeds = set(parse_seeds(args.seeds)) if args.seeds else None
    keys = [k for k in lane.archive.slices()
            if (not args.model_id or k.model_id in args.model_id) and (seeds is None or k.seed in seeds)
            and (not args.benchmark or k.benchmark_id in args.benchmark)]
    if not keys:
        raise UsageError("the selection matches no slice of the archive", field="--model-id/--seeds/--benchmark",
                         found=str(lane.archive.root))
    keys.sort(key=lambda k: (k.model_id, k.seed, k.benchmark_id))
    if args.out:  # before any slice is verified: a directory that can be written, outside what is read
        check_output_dir(args.out, flag="--out")
        check_outside_inputs(args.out, [("archive", lane.archive.tree), ("data root", data_root)], flag="--out")
    proofs = verify_slices(lane, keys)
    name = str(lane.archive.root)
    markdown, doc = render_markdown(proofs, archive=name), to_json(proofs, archive=name)
    if args.out:
        out = Path(args.out)
        with atomic_outputs() as files:  # both reports or neither
            with files.output(out / "archive-verify.md") as handle:
                handle.write(markdown.encode("utf-8"))
            with files.output(out / "archive-verify.json") as handle:
                handle.write(json_document(doc, out / "archive-verify.json", indent=2, ensure_ascii=False)
                             .encode("utf-8"))
    print(json.dumps(doc, indent=2, ensure_ascii=False) if args.json else markdown, end="" if not args.json else "\n")
    return ExitCode.OK if all(p.proven for p in proofs) else ExitCode.FINDINGS
