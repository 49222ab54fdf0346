"""The campaign scorer against direct saturation of the same simulated judge engine, on CPU (the offline
stand-in for ``benchmarks/judge_throughput.py``'s (b)/(a) on the GPU).

One loopback :class:`~trace_lib.testing.sim_engine.SimulatedEngine` (``--slots`` sequences at once, each prompt
``--service-s`` seconds) serves, side by side:

- (b) the real :class:`~trace_lib.campaign.scorer.CampaignScorer` (``score_all``, the one judge client, its
  lanes and the shared window of ``--window`` sequences) on a campaign of many small toy judged slices
  (``--benchmarks`` x ``--seeds`` slices of ``--rows`` rows: a chat round per row, then a completions ladder for a
  quarter of them), the regime where a per-slice window starved the judge;
- (b') the same with a fixed ``--jobs`` slices at once (``max_jobs = jobs``: the former design), for contrast;
- (a) the very prompts (b) sent, each its own request, ``--window`` in flight, straight to the engine.

Prints prompts/s and the engine's mean running sequences per path, and (b)/(a) (target >= 0.9 on the GPU).

    python benchmarks/judge_client_saturation.py [--slots 32] [--service-s 1.0] [--rows 4] [--window 48]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BENCHMARKS = ("erqa", "logicvista", "treebench", "blink", "mmstar", "realworldqa", "embspatial", "countqa")


def _scorer(args: argparse.Namespace, work: Path, name: str, max_jobs: int) -> tuple[float, object, list]:
    from trace_lib.scoring.judge import OpenAIJudge
    from trace_lib.scoring.judge_http import JudgeTransport
    from trace_lib.testing.sim_engine import SimulatedEngine, build_judged_campaign, score_judged_campaign
    from trace_lib.testing.synthetic_campaign import toy_judge_answer

    campaign = build_judged_campaign(work / name, benchmarks=BENCHMARKS[: args.benchmarks], seeds=args.seeds,
                                     rows=args.rows)
    with SimulatedEngine(toy_judge_answer, max_num_seqs=args.slots, service_s=args.service_s) as engine:
        judge = OpenAIJudge(engine.url, transport=JudgeTransport(concurrency=args.window))
        started = time.perf_counter()
        score_judged_campaign(campaign, judge, jobs=args.jobs, max_jobs=max_jobs)
        seconds = time.perf_counter() - started
        judge.close()
        return seconds, engine.stats, engine.requests


def _saturate(args: argparse.Namespace, requests: list) -> tuple[float, object]:
    from trace_lib.scoring.judge_http import JudgeTransport
    from trace_lib.testing.sim_engine import SimulatedEngine
    from trace_lib.testing.synthetic_campaign import toy_judge_answer

    singles = []
    for route, body in requests:
        if route == "completions" and isinstance(body.get("prompt"), list):
            singles += [(route, {**body, "prompt": p}) for p in body["prompt"]]
        else:
            singles.append((route, body))
    transport = JudgeTransport(concurrency=args.window)
    with SimulatedEngine(toy_judge_answer, max_num_seqs=args.slots, service_s=args.service_s) as engine:
        def one(item: tuple[str, dict]) -> None:
            transport.post(f"{engine.url}/{item[0]}", item[1], timeout_s=120)

        started = time.perf_counter()
        with ThreadPoolExecutor(args.window) as pool:
            list(pool.map(one, singles))
        seconds = time.perf_counter() - started
        stats = engine.stats
    transport.close()
    return seconds, stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", type=int, default=32, help="the engine's max_num_seqs")
    parser.add_argument("--service-s", type=float, default=1.0, help="seconds one sequence holds a slot")
    parser.add_argument("--window", type=int, default=48, help="TRACE_JUDGE_CONCURRENCY: the client's window")
    parser.add_argument("--rows", type=int, default=4, help="rows per slice (small: the starving regime)")
    parser.add_argument("--benchmarks", type=int, default=8, help="toy benchmarks (x seeds = slices)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    parser.add_argument("--jobs", type=int, default=4, help="slices at once at least ('score --jobs')")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        b_s, b, requests = _scorer(args, Path(tmp), "shared", max_jobs=32)
        f_s, f, _ = _scorer(args, Path(tmp), "fixed", max_jobs=args.jobs)
    a_s, a = _saturate(args, requests)
    slices = args.benchmarks * len(args.seeds)
    print(f"engine: {args.slots} slots x {args.service_s:g} s a sequence (at most {args.slots / args.service_s:.0f} "
          f"prompts/s); {slices} slices x {args.rows} rows; window {args.window}")
    print("| path | prompts | seconds | prompts/s | engine mean running |")
    print("| --- | --- | --- | --- | --- |")
    for name, seconds, stats in (("(a) direct saturation, same prompts", a_s, a),
                                 ("(b) campaign scorer, shared window", b_s, b),
                                 (f"(b') campaign scorer, fixed {args.jobs} slices", f_s, f)):
        print(f"| {name} | {stats.prompts} | {seconds:.2f} | {stats.prompts / seconds:.1f} | "
              f"{stats.mean_running:.1f} of {args.slots} |")
    print(f"(b)/(a) = {(b.prompts / b_s) / (a.prompts / a_s):.2f}; (b')/(a) = {(f.prompts / f_s) / (a.prompts / a_s):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
