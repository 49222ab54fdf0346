"""Scoring a whole model-seed on one core: 32,805 rows (suite sizes) from response files to verdicts.

Per suite benchmark, the responses of one (model, seed) are written once in the store format (untimed); the timed
part is what ``trace-repro score`` does for a campaign: read each response file, align it to the dataset rows by
row key, run the protocol's extraction and scoring, write ``records.jsonl`` + ``scores.json`` atomically, then
aggregate (category and overall means of ``trace_lib.aggregation.summaries``) and judge every slice and the overall
with the tolerance rule. Budget (issue #3): <= 10 s on one core.

Which scorer each benchmark gets: its real protocol when it is implemented, on a deterministic route
(``judge == "none"``) and has a synthetic case in ``benchmarks/score_speed.py`` (``SPEED_CASES``); otherwise a
representative deterministic MCQ scorer (``trace_lib.testing.synthetic_campaign.toy_mcq_protocol``) on as many
rows. ``--routes all`` also runs judge-route protocols, their judge answered in-process (judge cost excluded).

Memory: each pass runs in a fresh process and scores ``--passes K`` model-seeds one slice after another; the peak
RSS for K = 1, 2, 4 shows whether memory grows with the number of rows scored (it should stay flat: a slice's
records are streamed to disk and only its score is kept).

    python benchmarks/score_campaign_speed.py [--routes deterministic|all] [--passes 1 2 4] [--trace-root DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

BUDGET_S = 10.0
MODEL = "trace-qwen2.5-vl-3b"
SEED = 42


def _speed_cases() -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("score_speed", REPO / "benchmarks" / "score_speed.py")
    if spec is None or spec.loader is None:
        return {}
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module through sys.modules
    spec.loader.exec_module(module)
    return dict(getattr(module, "SPEED_CASES", {}))


def _slices(suite: Any, routes: str) -> list[tuple[str, Any, list[dict], list[str], Any, str]]:
    """(key, protocol, rows, responses, judge, kind) for every suite benchmark."""
    from trace_lib.benchmarks.registry import get_protocol
    from trace_lib.errors import ProtocolNotImplementedError
    from trace_lib.testing.synthetic_campaign import toy_mcq_protocol, toy_responses, toy_rows

    cases = _speed_cases()
    out = []
    for bench in suite.benchmarks:
        protocol = None
        try:
            protocol = get_protocol(bench.key)
        except ProtocolNotImplementedError:
            pass
        usable = protocol is not None and bench.key in cases and (routes == "all" or protocol.judge == "none")
        if usable:
            case = cases[bench.key](bench.rows)
            out.append((bench.key, protocol, case.rows, case.responses, case.judge, f"real ({protocol.judge})"))
        else:
            rows = toy_rows(bench.rows, seed=len(bench.key))
            out.append((bench.key, toy_mcq_protocol(bench.key), rows, toy_responses(rows, 0.5), None, "toy MCQ"))
    return out


def _child(args: argparse.Namespace) -> int:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    from trace_lib.aggregation.credits import CreditTable
    from trace_lib.aggregation.summaries import category_scores, overall_scores
    from trace_lib.aggregation.verdict import judge_credits
    from trace_lib.benchmarks.registry import get_protocol
    from trace_lib.generation.store import response_path
    from trace_lib.release.locate import locate_release
    from trace_lib.release.suite import load_suite
    from trace_lib.scoring.score import run_scoring, scores_dir

    release = locate_release(args.trace_root)
    suite = load_suite(release)
    work = Path(args.work)
    slices = _slices(suite, args.routes)  # the datasets' rows, as protocol.load would give them (untimed)
    start = time.perf_counter()
    cpu_start = time.process_time()
    rows_scored = 0
    verdicts = 0
    for number in range(args.passes):
        scores: dict[tuple[str, int, str], float] = {}
        credits: list = []
        for key, protocol, rows, _, judge, _ in slices:
            responses = response_path(work / "campaign", model=MODEL, seed=SEED, benchmark=key)
            out = scores_dir(work / f"scored_{number}", model=MODEL, seed=SEED, benchmark=key)
            scored = run_scoring(protocol, rows, responses, out, judge=judge)
            scores[(MODEL, SEED, key)] = scored.score.score
            rows_scored += scored.score.rows
            fields = protocol.row_aggregate.fields
            if get_protocol(key).row_aggregate.fields != fields:
                continue  # a toy scorer standing in for a structured aggregate: its rows lack the fields
            credits.append(CreditTable.from_records(
                [{"model_id": MODEL, "seed": SEED, "benchmark_id": key, "index": r.index, "credit": r.score,
                  **{f: r.detail.get(f) for f in fields}} for r in scored.score.records]))
        category_scores(scores, suite)
        overall_scores(scores, suite)
        verdicts += len(judge_credits(CreditTable.concat(credits), release).verdicts)
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"passes": args.passes, "rows": rows_scored, "seconds": seconds, "cpu_seconds": cpu_seconds,
                      "peak_rss_mib": peak_kib / 1024, "verdicts": verdicts}))
    return 0


def _prepare(work: Path, trace_root: str | None, routes: str) -> list[tuple[str, str, int]]:
    from trace_lib.generation.store import response_path
    from trace_lib.release.locate import locate_release
    from trace_lib.release.suite import load_suite
    from trace_lib.testing.synthetic_campaign import write_response_file

    suite = load_suite(locate_release(trace_root))
    kinds = []
    for key, _, rows, texts, _, kind in _slices(suite, routes):
        write_response_file(response_path(work / "campaign", model=MODEL, seed=SEED, benchmark=key), model=MODEL,
                            seed=SEED, benchmark=key, rows=rows, texts=texts)
        kinds.append((key, kind, len(rows)))
    return kinds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", choices=("deterministic", "all"), default="deterministic")
    parser.add_argument("--passes", nargs="+", type=int, default=[1, 2, 4], help="model-seeds per process")
    parser.add_argument("--trace-root", default=None, help="the TRACE release (default: TRACE_ROOT / discovery)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--work", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        args.passes = args.passes[0]
        return _child(args)
    with tempfile.TemporaryDirectory(prefix="score-campaign-speed-") as tmp:
        kinds = _prepare(Path(tmp), args.trace_root, args.routes)
        real = [f"{k} ({n})" for k, kind, n in kinds if kind.startswith("real")]
        print(f"scorers: {len(real)} real protocols [{', '.join(real)}]; "
              f"{len(kinds) - len(real)} benchmarks through the toy MCQ scorer; routes={args.routes}")
        print(f"{'model-seeds':>11}{'rows':>9}{'seconds':>9}{'CPU s':>8}{'rows/s':>10}{'peak RSS MiB':>14}")
        results = []
        for passes in args.passes:
            cmd = [sys.executable, __file__, "--child", "--work", tmp, "--routes", args.routes,
                   "--passes", str(passes)] + (["--trace-root", args.trace_root] if args.trace_root else [])
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            results.append(result)
            print(f"{passes:>11}{result['rows']:>9}{result['seconds']:>9.2f}{result['cpu_seconds']:>8.2f}"
                  f"{result['rows'] / result['seconds']:>10,.0f}"
                  f"{result['peak_rss_mib']:>14.1f}")
        one = next((r for r in results if r["passes"] == 1), results[0])
        per_pass = one["seconds"] / one["passes"]
        print(f"one model-seed ({one['rows'] // one['passes']} rows): {per_pass:.2f} s = {per_pass / BUDGET_S:.2f} x the "
              f"{BUDGET_S:g} s budget; CPU {one['cpu_seconds'] / one['passes']:.2f} s (wall exceeds CPU on a shared machine)")
        if len(results) > 1:
            print(f"peak RSS from {results[0]['passes']} to {results[-1]['passes']} model-seeds: "
                  f"{results[0]['peak_rss_mib']:.1f} -> {results[-1]['peak_rss_mib']:.1f} MiB "
                  f"({results[-1]['rows'] / results[0]['rows']:.0f}x the rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
