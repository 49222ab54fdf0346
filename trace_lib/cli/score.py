"""``trace-repro score``: score responses without a GPU, one file or a whole campaign, and judge them against
the release's canonical scores.

One file:   ``trace-repro score --benchmark KEY --dataset FILE --responses FILE.jsonl --out DIR [--judge-url URL]``
Campaign:   ``trace-repro score --campaign-root DIR [--data-root DIR] [--model-id SLUG] [--seeds S ...] [--benchmark KEY]``
            (slices default to those with responses in the campaign directory)

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
    parser.add_argument("--seed", type=int, default=None,
                        help="one-file mode: the decoding seed of a plain {index, response} JSONL file "
                             "(trace-repro response files carry it in their header)")
    parser.add_argument("--json", action="store_true", help="print the scores.json documents (with verdicts)")
    options.add_to_argparse(parser, options.TRACE_ROOT, options.CAMPAIGN_ROOT, options.JUDGE_URL,
                            options.ALPHA, options.MARGIN, options.TOLERANCE_Z, options.ARCHIVE_ROOT)
    parser.set_defaults(run=run)


def _judge(url: str | None):  # noqa: ANN202 - Judge | None, imported lazily
    if not url:
        return None
    from trace_lib.scoring.judge import OpenAIJudge

    return OpenAIJudge(url)


class CampaignScorer:
    """Scores the slices of one campaign into ``<campaign-root>/scores/...``: each benchmark's protocol, rows and
    dataset hash are loaded once, whichever seed or thread asks first (``trace-repro score --campaign-root`` and
    ``trace-repro generate --score``)."""

    def __init__(self, campaign_root: Path, data_root: Path, sources: dict, judge_url: str | None) -> None:
        import threading

        self.campaign_root, self.data_root, self.sources = campaign_root, data_root, sources
        self.judge_url, self.judge = judge_url, _judge(judge_url)
        self._loaded: dict[str, tuple] = {}
        self._lock = threading.Lock()

    def _benchmark(self, benchmark: str) -> tuple:
        """``(protocol, rows, dataset FileRef)``, loaded on first use.

        Raises:
            UsageError: the benchmark's dataset is not prepared.
        """
        from trace_lib.benchmarks.registry import get_protocol
        from trace_lib.release.load import sha256_file
        from trace_lib.scoring.score import FileRef

        with self._lock:
            if benchmark not in self._loaded:
                protocol = get_protocol(benchmark)
                dataset = self.sources[benchmark].local_path(self.data_root)
                if not dataset.exists():
                    raise UsageError(f"dataset missing: {benchmark} ({dataset})", field="--data-root",
                                     hint=f"run 'trace-repro prepare-data --benchmark {benchmark}'")
                self._loaded[benchmark] = (protocol, protocol.load(dataset),
                                           FileRef(str(dataset), sha256_file(dataset)))
            return self._loaded[benchmark]

    def score(self, key, responses: Path):  # noqa: ANN001, ANN201 - a plan Slice; ScoredSlice
        from trace_lib.scoring.score import run_scoring, scores_dir

        protocol, rows, dataset_ref = self._benchmark(key.benchmark)
        return run_scoring(protocol, rows, responses,
                           scores_dir(self.campaign_root, model=key.model, seed=key.seed, benchmark=key.benchmark),
                           judge=self.judge, judge_url=self.judge_url, dataset=dataset_ref)


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
    if verdict is not None:
        print(verdict.explain())
    elif summary.get("model"):
        print(f"{who}: no canonical score for model {summary['model']!r}; nothing to compare")


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.release.locate import locate_release

    options.reject_tolerance_z(args)
    release = locate_release(options.resolve(args, options.TRACE_ROOT))
    judge_url = options.resolve(args, options.JUDGE_URL)
    one_file = [f for f in ("dataset", "responses", "out") if getattr(args, f)]
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
    from trace_lib.campaign.verdicts import verdict_plan
    from trace_lib.release.load import sha256_file
    from trace_lib.scoring.score import FileRef, run_scoring

    missing = [f"--{f}" for f in ("dataset", "responses", "out") if not getattr(args, f)]
    if not args.benchmark or len(args.benchmark) != 1:
        missing.insert(0, "--benchmark (exactly one)")
    if missing:
        raise UsageError("one-file mode needs " + ", ".join(missing), field="score")
    protocol = get_protocol(args.benchmark[0])
    dataset, responses = Path(args.dataset), Path(args.responses)
    for flag, path in (("--dataset", dataset), ("--responses", responses)):
        if not path.is_file():
            raise UsageError("no such file", field=f"{flag} {path}")
    rows = protocol.load(dataset)
    judge = _judge(judge_url)
    if judge is not None and protocol.judge != "none":
        judge.check()  # the endpoint serves the judge, before any row is scored
    scored = run_scoring(protocol, rows, responses, Path(args.out), judge=judge, judge_url=judge_url,
                         dataset=FileRef(str(dataset), sha256_file(dataset)), seed=args.seed)
    summary = dict(scored.summary)
    verdict = None
    model, seed = summary.get("model"), summary.get("seed")
    if model and seed is not None:
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
    from trace_lib.campaign.plan import DATA_ROOT_ENV, work_root
    from trace_lib.campaign.verdicts import judge_campaign, verdict_plan
    from trace_lib.cli.verify import campaign_inputs
    from trace_lib.data.prepare import load_artifact_sources
    from trace_lib.reports.collect import SliceKey, expected_slices, response_file

    _, _, root, models, seeds, keys = campaign_inputs(args)
    plan = verdict_plan(release, model_ids=args.model_id, seeds=args.seeds, benchmarks=args.benchmark)
    scorer = CampaignScorer(root, work_root(args.data_root, DATA_ROOT_ENV, "data"), load_artifact_sources(release),
                            judge_url)
    slices: list[SliceKey] = expected_slices(models, seeds, keys)
    failed: list[str] = []
    summaries: list[dict] = []
    if scorer.judge is not None:
        scorer.judge.check()  # an unreachable judge stops the run here (exit 2), before any slice
    for key in slices:
        responses = response_file(root, key)
        try:
            if not responses.is_file():
                raise UsageError("no responses", field=key.id, found=str(responses),
                                 hint="run 'trace-repro generate' for this slice")
            summaries.append(dict(scorer.score(key, responses).summary))
        except TraceReproError as exc:
            failed.append(key.id)
            print(f"{key.id}: error: {exc.render()}", file=sys.stderr)
    scored_keys = [k for k in slices if k.id not in set(failed)]
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
