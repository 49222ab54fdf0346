"""``trace-repro diagnose --reference A --candidate B [--slice ID ...] [--out DIR]``.

A and B are each a trace-repro campaign or an archive run of the paper's public schema (an archive root holding
``runs/<run_id>/`` or one run directory; ``--reference-run-id`` / ``--candidate-run-id`` pick a run of a root that
holds several). ``--campaign-root`` is a spelling of ``--candidate``; ``--against`` and ``--archive-root`` are
spellings of ``--reference`` (one reference, one candidate: two of either is a usage error).

Per slice of B, compares it with the same slice of A and names the first stage at which they part ways: rows,
prompt, sampling, extraction, judge, score or aggregation (see :mod:`trace_lib.diagnose.attribution`); a stage
the two runs do not record in one form is listed as not comparable, per slice. Response statistics side by side
and whether the score delta is within the band sampling explains (the tolerance rule's band for two single-seed
runs, at the per-test level of the release's family-wise budget --alpha). Writes ``diagnose.json`` (every row's
stage), ``diagnose.md`` and ``diagnose-<model>.png`` into ``--out`` (default ``B/diagnose`` for a campaign; required
for an archive, which is never written into; never inside A, nor inside an archive B: the trees read). Exit 0 when
every compared delta is within its band, 1 when one is not (or a slice has no counterpart), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from trace_lib import options
from trace_lib.exitcodes import ExitCode
from trace_lib.outputs import check_output_dir, check_outside_inputs

#: Spellings of the two sides, each an appendable flag so that two of one side is caught, not silently overridden.
REFERENCE_FLAGS = ("--reference", "--against", "--archive-root")
CANDIDATE_FLAGS = ("--candidate", "--campaign-root")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("diagnose", help="name the pipeline stage at which two runs of a slice diverge",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    helps = {
        "--reference": "the reference run A: a trace-repro campaign or an archive run (root or run directory)",
        "--against": "spelling of --reference (another trace-repro campaign)",
        "--archive-root": "spelling of --reference (a fetched copy of the paper's archive)",
        "--candidate": "the run under question B: a trace-repro campaign or an archive run",
        "--campaign-root": f"spelling of --candidate (env {options.CAMPAIGN_ROOT.env})",
    }
    for flag in (*REFERENCE_FLAGS, *CANDIDATE_FLAGS):
        parser.add_argument(flag, action="append", default=None, metavar="DIR", help=helps[flag])
    parser.add_argument("--reference-run-id", default=None, metavar="ID",
                        help="the run of an archive reference root that holds several")
    parser.add_argument("--candidate-run-id", default=None, metavar="ID",
                        help="the run of an archive candidate root that holds several")
    parser.add_argument("--slice", action="append", default=None, metavar="ID",
                        help="only this slice (MODEL-seedSEED-BENCHMARK); repeatable")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output directory (default <candidate>/diagnose for a campaign)")
    parser.add_argument("--no-plot", action="store_true", help="skip the per-model PNGs")
    options.add_to_argparse(parser, options.TRACE_ROOT, options.ALPHA, options.TOLERANCE_Z)
    # --tolerance-z is kept only to refuse it with a pointer (evaluation verdicts take --alpha)
    parser.set_defaults(run=run)


def one_of(args: argparse.Namespace, flags: Sequence[str], *, side: str, env_default: str | None = None) -> str:
    """The single value given for one side across its spellings (``env_default`` when none is given).

    Raises:
        UsageError: none given, or more than one (naming each flag and value).
    """
    from trace_lib.errors import UsageError

    given = [(flag, value) for flag in flags for value in getattr(args, flag.lstrip("-").replace("-", "_")) or ()]
    if len(given) > 1:
        raise UsageError(f"{len(given)} {side} runs given: " + ", ".join(f"{f} {v}" for f, v in given),
                         field=flags[0], hint=f"{' / '.join(flags)} are spellings of one option; give one")
    if given:
        return given[0][1]
    if env_default:
        return env_default
    raise UsageError(f"no {side} run given", field=flags[0],
                     hint=f"pass {flags[0]} DIR (a trace-repro campaign or an archive run)")


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.aggregation.canonical import load_canonical
    from trace_lib.aggregation.verdict import Rule
    from trace_lib.archive.extraction_form import benchmark_routes
    from trace_lib.diagnose.attribution import diagnose_slice
    from trace_lib.diagnose.band import sampling_band
    from trace_lib.diagnose.report import write_reports
    from trace_lib.diagnose.sources import open_run
    from trace_lib.errors import UsageError
    from trace_lib.release.locate import locate_release

    reference_path = one_of(args, REFERENCE_FLAGS, side="reference")
    candidate_path = one_of(args, CANDIDATE_FLAGS, side="candidate",
                            env_default=options.CAMPAIGN_ROOT.resolve(None))
    release = locate_release(options.given(args, options.TRACE_ROOT))
    routes = benchmark_routes(release)
    candidate = open_run(candidate_path, flag="--candidate", routes=routes, run_id=args.candidate_run_id,
                         release=release)
    reference = open_run(reference_path, flag="--reference", routes=routes, run_id=args.reference_run_id,
                         release=release)
    keys = candidate.keys()
    if args.slice:
        wanted = set(args.slice)
        unknown = sorted(wanted - {k.id for k in keys})
        if unknown:
            kind = "campaign" if candidate.kind == "campaign" else "candidate run"
            raise UsageError(f"no such slice in the {kind}: {', '.join(unknown)}", field="--slice",
                             hint=f"slices of {candidate.description}: {', '.join(k.id for k in keys[:8]) or 'none'}")
        keys = [k for k in keys if k.id in wanted]
    if not keys:
        raise UsageError(f"the candidate {candidate.kind} has no slices", field="--candidate", found=candidate_path)
    if args.out:
        out = Path(args.out)
    elif candidate.kind == "campaign":
        out = Path(candidate_path) / "diagnose"
    else:
        raise UsageError("--out is required when the candidate is an archive run (nothing is written into an "
                         "archive)", field="--out")
    check_output_dir(out, flag="--out")
    inputs = [(f"reference {reference.kind}", reference.tree)]  # the candidate's campaign holds its own diagnose/
    if candidate.kind == "archive":
        inputs.append(("candidate archive", candidate.tree))
    check_outside_inputs(out, inputs, flag="--out")

    options.reject_tolerance_z(args)
    canonical = load_canonical(release)  # the band at the per-test level of the release's whole planned campaign
    from trace_lib.campaign.verdicts import verdict_plan

    rule = (canonical, Rule.for_plan(canonical, verdict_plan(release), alpha=options.resolve(args, options.ALPHA)))
    diagnoses, unmatched = [], []
    for key in keys:
        left = candidate.slice(key)
        right = reference.slice(key)
        if left is None or right is None:
            unmatched.append(key.id)
            continue
        diagnoses.append(diagnose_slice(left, right, band=sampling_band(rule, key)))
    paths = write_reports(diagnoses, out, left=candidate.description, right=reference.description,
                          plot=not args.no_plot)
    for d in diagnoses:
        mark = {True: "within band", False: "OUTSIDE band", None: "no band"}[d.within_band]
        print(f"[trace-repro diagnose] {d.headline()} [{mark}]")
        for stage, why in d.not_comparable.items():
            if stage != "judge":
                print(f"[trace-repro diagnose]   {d.key.id}: {stage} not comparable: {why}")
    for slice_id in unmatched:
        print(f"[trace-repro diagnose] {slice_id}: no counterpart in {reference.description}")
    for path in paths:
        print(f"[trace-repro diagnose] wrote {path}")
    outside = [d for d in diagnoses if d.within_band is False]
    return ExitCode.FINDINGS if outside or unmatched else ExitCode.OK
