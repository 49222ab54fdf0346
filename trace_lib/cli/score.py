"""``trace-repro score``: score responses without a GPU, one file or a whole campaign, and judge them against
the release's canonical scores.

One file:   ``trace-repro score --benchmark KEY --dataset FILE --responses FILE.jsonl --out DIR [--judge-url URL]``
Campaign:   ``trace-repro score --campaign-root DIR [--data-root DIR] [--model-id SLUG] [--seeds S ...] [--benchmark KEY]
            [--jobs N] [--max-jobs M]`` (slices default to those with responses in the campaign directory; N
            slices at once, a benchmark's seeds together, more while the judge has room, M at most)

Writes ``records.jsonl`` (one line per row: extracted answer, credit, judge calls) and ``scores.json`` into the
output directory (campaign: ``<root>/scoring/seed_<S>/<model>/<benchmark>/``) and prints one line per slice: the
score, and its verdict when the responses' model has canonical scores: reproduced, differs or inconclusive
(docs/tolerance.md), from the per-row credits of every scored seed of its cell, with the budget ``--alpha`` spread
over the family of the plan these flags give (``trace-repro plan``); a campaign also gets its means, categories,
overall and the paper's claims. Exit 0 when everything scored and every verdict is reproduced, 1 when a verdict
differs or is inconclusive or (campaign) a slice could not be scored, 2 on bad input (one ``error:`` line naming
the file and line).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trace_lib import options
from trace_lib.errors import TraceReproError, UsageError
from trace_lib.exitcodes import ExitCode
from trace_lib.interrupts import stoppable


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from trace_lib.campaign.plan import DATA_ROOT_ENV
    from trace_lib.cli.verify import add_selection_options

    parser = subparsers.add_parser("score", help="score responses (a file or a campaign) and compare to canonical",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_selection_options(parser)  # --model-id, --seeds, --benchmark (one-file mode: exactly one --benchmark)
    parser.add_argument("--data-root", default=None, metavar="DIR",
                        help=f"campaign mode: prepared benchmark data (env {DATA_ROOT_ENV}; default "
                             "trace-repro-work/data)")
    parser.add_argument("--dataset", default=None, metavar="FILE", help="one-file mode: the benchmark's data file")
    parser.add_argument("--responses", default=None, metavar="FILE.jsonl",
                        help="one-file mode: a response file of the trace-repro store format")
    parser.add_argument("--out", default=None, metavar="DIR", help="one-file mode: where scores go")
    parser.add_argument("--seed", type=options.non_negative_int, default=None,
                        help="one-file mode: the decoding seed of a plain {index, response} JSONL file "
                             "(trace-repro response files carry it in their header)")
    parser.add_argument("--json", action="store_true", help="print the scores.json documents (with verdicts)")
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS, metavar="N",
                        help=f"campaign mode: slices scored at once at least, a benchmark's seeds side by side so "
                             f"their judge requests share the judge's prefix cache (default {DEFAULT_JOBS}); more "
                             "are started while the judge's in-flight window has room (up to --max-jobs)")
    parser.add_argument("--max-jobs", type=int, default=DEFAULT_MAX_JOBS, metavar="M",
                        help=f"campaign mode: at most this many slices at once (default {DEFAULT_MAX_JOBS}; "
                             "--jobs 1 --max-jobs 1: one after another)")
    options.add_to_argparse(parser, options.TRACE_ROOT, options.CAMPAIGN_ROOT, options.JUDGE_URL,
                            options.ALPHA, options.MARGIN, options.TOLERANCE_Z, options.ARCHIVE_ROOT)
    parser.set_defaults(run=stoppable(run, label="score"))


#: Slices ``score --campaign-root`` scores at once at least: to send the three seeds of a benchmark together;
#: more are started while the judge's window has room (trace_lib/campaign/scorer.py), up to DEFAULT_MAX_JOBS.
DEFAULT_JOBS = 4
DEFAULT_MAX_JOBS = 32


def scoring_order(slices):  # noqa: ANN001, ANN201 - SliceKeys in, SliceKeys out
    """Model, then benchmark, then seed: the seeds of one benchmark are scored next to each other."""
    benchmarks = list(dict.fromkeys(k.benchmark for k in slices))
    return sorted(slices, key=lambda k: (k.model, benchmarks.index(k.benchmark), k.seed))


#: Why a slice generated with random weights (TRACE_VLLM_LOAD_FORMAT=dummy) gets no verdict.
RANDOM_WEIGHTS_NOTE = ("no verdict: the responses were generated with random weights (engine.load_format dummy, "
                       "TRACE_VLLM_LOAD_FORMAT): a benchmark run, its scores are meaningless")


def _emit(summary: dict, verdict, as_json: bool) -> None:  # noqa: ANN001
    if as_json:
        print(json.dumps({**summary, "verdict": verdict.to_dict() if verdict else None}, sort_keys=True))
        return
    who = summary.get("slice") or summary["benchmark"]
    line = f"{who}: score {summary['score']:.3f} over {summary['rows']} rows"
    if summary.get("judge_calls"):
        line += f", {summary['judge_calls']} judge calls"
    if summary.get("fallbacks"):
        line += f", {summary['fallbacks']} deterministic fallbacks"
    if summary.get("dropped_rows"):
        line += f", {summary['dropped_rows']} dropped rows not scored (the benchmark's loader skips them, as upstream)"
    print(line)
    if summary.get("random_weights"):
        print(f"{who}: {RANDOM_WEIGHTS_NOTE}")
    elif verdict is not None:
        print(verdict.explain())
    elif summary.get("model"):
        print(f"{who}: no canonical score for model {summary['model']!r}; nothing to compare")
    else:  # a plain file names no model
        print(f"{who}: no verdict: a plain response file names no model; pass --model-id SLUG to compare it "
              "with that model's canonical score")


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.release.locate import locate_release

    options.reject_tolerance_z(args)
    release = locate_release(options.given(args, options.TRACE_ROOT))
    judge_url = options.resolve(args, options.JUDGE_URL)
    one_file = [f for f in ("dataset", "responses", "out") if getattr(args, f)]
    if one_file and getattr(args, options.CAMPAIGN_ROOT.dest, None):
        raise UsageError(f"--{one_file[0]} (one-file mode) and --campaign-root (campaign mode) contradict",
                         field="score", hint="pass one of them")
    if not one_file and args.seed is not None:
        raise UsageError("--seed is for one-file mode (a campaign's response files carry their seed)",
                         field="--seed")
    if one_file:
        return _run_file(args, release, judge_url)
    if options.resolve(args, options.CAMPAIGN_ROOT):
        return _run_campaign(args, release, judge_url)
    raise UsageError("nothing to score", field="score",
                     hint="pass --benchmark KEY --dataset FILE --responses FILE.jsonl --out DIR, or --campaign-root DIR")


def _judge_options(args: argparse.Namespace) -> dict:
    return {"alpha": options.resolve(args, options.ALPHA), "margin": options.resolve(args, options.MARGIN)}


def _run_file(args: argparse.Namespace, release, judge_url: str | None) -> ExitCode:  # noqa: ANN001
    from trace_lib.aggregation.credits import CreditTable
    from trace_lib.aggregation.verdict import judge_credits, slice_id
    from trace_lib.benchmarks.registry import get_protocol
    from trace_lib.campaign.scorer import open_judge
    from trace_lib.campaign.verdicts import verdict_plan
    from trace_lib.release.load import sha256_file
    from trace_lib.scoring.score import FileRef, run_scoring

    missing = [f"--{f}" for f in ("dataset", "responses", "out") if not getattr(args, f)]
    if not args.benchmark or len(args.benchmark) != 1:
        missing.insert(0, "--benchmark (exactly one)")
    if missing:
        raise UsageError("one-file mode needs " + ", ".join(missing), field="score")
    if args.model_id and len(args.model_id) != 1:
        raise UsageError("one-file mode scores one model's responses", field="--model-id", found=args.model_id)
    from trace_lib.outputs import check_output_dir

    protocol = get_protocol(args.benchmark[0])
    dataset, responses = Path(args.dataset), Path(args.responses)
    from trace_lib.decoding import check_input_file

    for flag, path in (("--dataset", dataset), ("--responses", responses)):
        try:
            check_input_file(path, name=f"{flag} {path}")
        except (FileNotFoundError, NotADirectoryError):
            raise UsageError("no such file", field=f"{flag} {path}") from None
    check_output_dir(args.out, flag="--out")
    model = args.model_id[0] if args.model_id else None  # a plain file's model (a store file's header must agree)
    rows = protocol.load(dataset)
    judge = open_judge(judge_url)
    if judge is not None and protocol.judge != "none":
        judge.check()  # the endpoint serves the judge, before any row is scored
    scored = run_scoring(protocol, rows, responses, Path(args.out), judge=judge, judge_url=judge_url,
                         dataset=FileRef(str(dataset), sha256_file(dataset)), seed=args.seed, model=model)
    summary = dict(scored.summary)
    verdict = None
    model, seed = summary.get("model") or model, summary.get("seed")
    if model and seed is not None and not summary.get("random_weights"):
        fields = protocol.row_aggregate.fields
        table = CreditTable.from_records(
            [{"model_id": model, "seed": seed, "benchmark_id": protocol.key, "index": r.index, "credit": r.score,
              **{f: r.detail.get(f) for f in fields}} for r in scored.score.records], source=str(responses))
        try:  # the family: the release's whole planned campaign (a one-file score is one slice of it)
            result = judge_credits(table, release, plan=verdict_plan(release), **_judge_options(args))
            verdict = result.by_id().get(slice_id(model, seed, protocol.key))
        except TraceReproError:
            verdict = None  # rows that are not the suite's: scored, not judged
    _emit(summary, verdict, args.json)
    return ExitCode.FINDINGS if verdict is not None and not verdict.ok else ExitCode.OK


def _run_campaign(args: argparse.Namespace, release, judge_url: str | None) -> ExitCode:  # noqa: ANN001
    from trace_lib.campaign.plan import DATA_ROOT_ENV
    from trace_lib.campaign.scorer import CampaignScorer, judge_heavy_first
    from trace_lib.campaign.verdicts import judge_campaign, verdict_plan
    from trace_lib.cli.verify import campaign_inputs
    from trace_lib.data.prepare import load_artifact_sources
    from trace_lib.outputs import not_regular
    from trace_lib.reports.collect import SliceKey, expected_slices, response_file

    for flag, value in (("--jobs", args.jobs), ("--max-jobs", args.max_jobs)):
        if value < 1:
            raise UsageError("must be at least 1", field=flag, found=value)
    _, _, root, models, seeds, keys = campaign_inputs(args)
    plan = verdict_plan(release, model_ids=args.model_id, seeds=args.seeds, benchmarks=args.benchmark)
    scorer = CampaignScorer(root, options.work_root(args.data_root, DATA_ROOT_ENV, "data", directory="--data-root"),
                            load_artifact_sources(release), judge_url)
    slices: list[SliceKey] = expected_slices(models, seeds, keys)
    summaries: list[dict] = []
    if scorer.judge is not None:
        scorer.judge.check()  # an unreachable judge stops the run here (exit 2), before any slice
    odd = {key: problem for key in slices if (problem := not_regular(response_file(root, key)))}
    for key, problem in odd.items():  # a FIFO or a directory where the responses belong: named, never opened
        print(f"[score] {key.id}: {response_file(root, key)} {problem}", file=sys.stderr)
    failed: list[str] = [key.id for key in odd]
    pending = [key for key in slices if key not in odd and not response_file(root, key).is_file()]
    if pending:  # one line for what is not generated yet, not one error per slice
        shown = " ".join(key.id for key in pending[:6]) + (" ..." if len(pending) > 6 else "")
        print(f"[score] not generated yet: {len(pending)} of {len(slices)} slice(s) have no response file "
              f"({shown}); run 'trace-repro generate' for them or select --benchmark/--model-id/--seeds",
              file=sys.stderr)
        failed += [key.id for key in pending]

    ordered = scoring_order([key for key in slices if key not in pending and key not in odd])
    results = dict(scorer.score_all(judge_heavy_first(ordered), lambda key: response_file(root, key),
                                    jobs=args.jobs, max_jobs=max(args.jobs, args.max_jobs)))
    for key in ordered:  # reported in scoring order
        result = results[key]
        if isinstance(result, TraceReproError):
            failed.append(key.id)
            print(f"{key.id}: error: {result.render()}", file=sys.stderr)
        else:
            summaries.append(dict(result.summary))
    scored_keys = [k for k in slices if k.id not in set(failed)]
    if any(s.get("random_weights") for s in summaries):  # a benchmark's campaign: scores only, no verdict at all
        for summary in summaries:
            _emit(summary, None, args.json)
        print(f"[score] {len(slices) - len(failed)}/{len(slices)} slice(s) scored; {RANDOM_WEIGHTS_NOTE}"
              + (f"; not scored: {' '.join(failed[:10])}" + (" ..." if len(failed) > 10 else "") if failed else ""),
              file=sys.stderr if args.json else sys.stdout)
        return ExitCode.FINDINGS if failed else ExitCode.OK
    verdicts = judge_campaign(root, release, plan, scored_keys, archive_root=options.resolve(args, options.ARCHIVE_ROOT),
                              **_judge_options(args)).result
    by_id = verdicts.by_id()
    for summary in summaries:
        _emit(summary, by_id.get(summary.get("slice") or ""), args.json)
    shown = {s.get("slice") for s in summaries}
    for verdict in verdicts.verdicts:
        if verdict.test_id not in shown:
            print(json.dumps({"verdict": verdict.to_dict()}, sort_keys=True) if args.json else verdict.explain())
    counts = verdicts.counts()
    print(f"[score] {len(slices) - len(failed)}/{len(slices)} slice(s) scored; {verdicts.summary_line()} "
          f"({verdicts.rule.describe()})"
          + (f"; not scored: {' '.join(failed[:10])}" + (" ..." if len(failed) > 10 else "") if failed else ""),
          file=sys.stderr if args.json else sys.stdout)
    bad = failed or counts["differs"] or counts["inconclusive"]
    return ExitCode.FINDINGS if bad else ExitCode.OK
