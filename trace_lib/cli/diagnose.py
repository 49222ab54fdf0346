"""``trace-repro diagnose --campaign-root C (--against C2 | --archive-root A) [--slice ID ...] [--out DIR]``.

Per slice of campaign C, compares it with the same slice of another campaign (two machines, two engine versions)
or of the paper's archive, and names the first stage at which they part ways: rows, prompt, sampling, extraction,
judge, score or aggregation (see :mod:`trace_lib.diagnose.attribution`), with response statistics side by side and
whether the score delta is within the band sampling explains (the tolerance rule's band for two single-seed
runs, at the per-test level of the release's family-wise budget --alpha). Writes ``diagnose.json``, ``diagnose.md`` and
``diagnose-<model>.png`` into ``--out`` (default ``C/diagnose``). Exit 0 when every compared delta is within its
band, 1 when one is not (or a slice has no counterpart), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trace_lib import options
from trace_lib.exitcodes import ExitCode


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("diagnose", help="name the pipeline stage at which two runs of a slice diverge",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    reference = parser.add_mutually_exclusive_group(required=True)
    reference.add_argument("--against", metavar="C2", help="another trace-repro campaign root (the reference)")
    reference.add_argument("--archive-root", metavar="A",
                           help="a fetched copy of the paper's archive (trace-repro fetch-runs) as the reference")
    parser.add_argument("--slice", action="append", default=None, metavar="ID",
                        help="only this slice (MODEL-seedSEED-BENCHMARK); repeatable")
    parser.add_argument("--out", default=None, metavar="DIR", help="output directory (default <campaign>/diagnose)")
    parser.add_argument("--no-plot", action="store_true", help="skip the per-model PNGs")
    options.add_to_argparse(parser, options.TRACE_ROOT, options.CAMPAIGN_ROOT, options.ALPHA, options.TOLERANCE_Z)
    # --tolerance-z is kept only to refuse it with a pointer (evaluation verdicts take --alpha)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.aggregation.canonical import load_canonical
    from trace_lib.aggregation.verdict import Rule
    from trace_lib.diagnose.attribution import diagnose_slice
    from trace_lib.diagnose.band import sampling_band
    from trace_lib.diagnose.campaign_view import campaign_slice_keys, load_campaign_slice
    from trace_lib.diagnose.report import write_reports
    from trace_lib.errors import UsageError
    from trace_lib.release.locate import locate_release

    root = options.resolve(args, options.CAMPAIGN_ROOT)
    if not root or not Path(root).is_dir():
        raise UsageError("campaign root is not a directory", field="--campaign-root", found=root)
    root = Path(root)
    keys = campaign_slice_keys(root)
    if args.slice:
        wanted = set(args.slice)
        unknown = sorted(wanted - {k.id for k in keys})
        if unknown:
            raise UsageError(f"no such slice in the campaign: {', '.join(unknown)}", field="--slice",
                             hint=f"slices under {root}/generation: {', '.join(k.id for k in keys[:8]) or 'none'}")
        keys = [k for k in keys if k.id in wanted]
    if not keys:
        raise UsageError("the campaign has no response files", file=str(root / "generation"))

    release = locate_release(options.resolve(args, options.TRACE_ROOT))
    if args.against:
        other = Path(args.against)
        if not other.is_dir():
            raise UsageError("reference campaign root is not a directory", field="--against", found=args.against)
        reference_name = f"campaign {other}"

        def reference(key):  # noqa: ANN001, ANN202
            return load_campaign_slice(other, key)
    else:
        from trace_lib.archive.extraction_form import benchmark_routes
        from trace_lib.diagnose.archive_view import ArchiveReference

        archive = ArchiveReference.open(Path(args.archive_root), routes=benchmark_routes(release))
        reference_name = archive.description
        reference = archive.slice

    options.reject_tolerance_z(args)
    canonical = load_canonical(release)  # the band at the per-test level of the release's whole planned campaign
    from trace_lib.campaign.verdicts import verdict_plan

    rule = (canonical, Rule.for_plan(canonical, verdict_plan(release), alpha=options.resolve(args, options.ALPHA)))
    diagnoses, unmatched = [], []
    for key in keys:
        left = load_campaign_slice(root, key)
        right = reference(key)
        if left is None or right is None:
            unmatched.append(key.id)
            continue
        diagnoses.append(diagnose_slice(left, right, band=sampling_band(rule, key)))
    out = Path(args.out) if args.out else root / "diagnose"
    paths = write_reports(diagnoses, out, left=f"campaign {root}", right=reference_name, plot=not args.no_plot)
    for d in diagnoses:
        mark = {True: "within band", False: "OUTSIDE band", None: "no band"}[d.within_band]
        print(f"[trace-repro diagnose] {d.headline()} [{mark}]")
    for slice_id in unmatched:
        print(f"[trace-repro diagnose] {slice_id}: no counterpart in {reference_name}")
    for path in paths:
        print(f"[trace-repro diagnose] wrote {path}")
    outside = [d for d in diagnoses if d.within_band is False]
    return ExitCode.FINDINGS if outside or unmatched else ExitCode.OK
