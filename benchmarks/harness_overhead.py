"""Harness overhead of the vllm backend: rows/s through ``run_generation`` vs a raw ``vllm.LLM.chat``.

Both drive the *same* engine in one process on the same N tiny-model requests (a tiny random Qwen2.5-VL and a
tiny MMStar-style table with one image per row, built here): the baseline is one ``LLM.chat`` call over
prebuilt conversations and ``SamplingParams`` (the least a raw script does); the harness is the full
``run_generation`` (prompt building, request hashing, the vllm backend, durable appends with fsync) into a
fresh campaign directory. Runs alternate (raw, harness, stream, raw, ...) after one warm-up of each, and the
fastest of ``--repeats`` is reported, as rows/s and as output tokens/s (output lengths vary between runs).
The target is judged on the run-by-run ratios (each run against the raw run before it): their median, with its
90% distribution-free interval (``_paired_ratio``), is ``met``, ``missed`` or ``unresolved`` (the interval
straddles the target, or fewer than 5 repeats: the machine's noise is then larger than the runs can resolve).
Decoding is the suite's except ``max_tokens`` (``--max-tokens``, default 256, so a run takes seconds). A third
line runs the same slice through the campaign scheduler (``trace_lib.campaign.scheduler``: requests are built on
a producer thread and queued in chunks while the engine already runs).
``--shape 3b`` uses a random-weight checkpoint with the 3B release's layer shapes (vLLM ``load_format="dummy"``).
Target: ratio >= 0.97.

``--paths raw,stream`` times only those paths (raw is always one), so a run of the same length holds more pairs.
Each run also records the CPU seconds of this process and of the engine's processes (its children, read from
``/proc``), its ``llm_engine.step()`` calls (each collects the outputs of the engine core's iterations since the
last) and the machine's load, so a slow run can be told apart: the engine core's CPU slower for the same work (a
contended or throttled core), more CPU for the same tokens (more iterations), or the same CPU and a longer wait
(the GPU, or the feeding). It records when each request reached the engine (``llm_engine.add_request``), from
the run's start: the ramp-up is the time until the engine held ``max_num_seqs`` requests.

    python benchmarks/harness_overhead.py [--rows 2000] [--max-tokens 256] [--repeats 5] [--model DIR | --shape 3b]
        [--input-workers N] [--paths raw,harness,stream] [--seconds S]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _paired_ratio import median_interval, pairs_needed  # noqa: E402  (this directory)
from _processes import descendants  # noqa: E402
from campaign_throughput import empty_campaign_dirs  # noqa: E402

TARGET = 0.97
MAX_NUM_SEQS = 256  # the backend's default, both paths' engine
CONFIDENCE = 0.9
PATHS = {"raw": "raw vllm.LLM.chat", "harness": "trace-repro vllm", "stream": "trace-repro stream"}


def paths_arg(text: str) -> list[str]:
    """``--paths``: a comma-separated subset of raw, harness and stream, in that order, raw always included."""
    asked = {name.strip() for name in text.split(",") if name.strip()}
    unknown = asked - set(PATHS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown path(s) {', '.join(sorted(unknown))} (choose from "
                                         f"{', '.join(PATHS)})")
    return [name for name in PATHS if name in asked or name == "raw"]


def count_engine_steps(engine: Any) -> list[int]:
    """Count ``engine.step()`` calls in the returned one-item list (the instance's ``step`` is wrapped)."""
    count = [0]
    step = engine.step

    def counted() -> Any:
        count[0] += 1
        return step()

    engine.step = counted
    return count


def record_add_times(engine: Any) -> list[float]:
    """Append the ``time.perf_counter()`` of each ``engine.add_request()`` call to the returned list (the
    instance's ``add_request`` is wrapped; ``LLM.chat`` and the backend both add through it)."""
    times: list[float] = []
    add_request = engine.add_request

    def recorded(*args: Any, **kwargs: Any) -> Any:
        times.append(time.perf_counter())
        return add_request(*args, **kwargs)

    engine.add_request = recorded
    return times


def ramp_up(add_times: list[float], start: float, slots: int) -> tuple[float, float]:
    """Seconds from ``start`` until the ``slots``-th request was added (all of them, if fewer) and until the
    last one was."""
    if not add_times:
        return float("nan"), float("nan")
    return add_times[min(slots, len(add_times)) - 1] - start, add_times[-1] - start


def children_cpu_seconds(pid: int | None = None) -> float:
    """User plus system CPU seconds of every live descendant of ``pid`` (this process by default): the engine core
    and its helpers, which ``os.times`` does not count until they are waited for."""
    return sum(process.cpu_s for process in descendants(pid))


def ratio_line(path: str, fastest_rows: float, fastest_tokens: float, paired: list[float]) -> str:
    """One path's ratios to raw ``LLM.chat``: by the fastest runs, run by run, and the target's verdict on the pairs
    (the line ``pool_paired_ratios.py`` reads back)."""
    return (f"ratio {path:>6}/raw: fastest run rows/s {fastest_rows:.3f}, output tok/s {fastest_tokens:.3f}; "
            f"run by run {', '.join(f'{r:.3f}' for r in paired)}; "
            f"{median_interval(paired, CONFIDENCE).summary(TARGET, CONFIDENCE)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", default=None, help="model directory (default: build the tiny Qwen2.5-VL)")
    parser.add_argument("--shape", choices=("tiny", "3b"), default="tiny",
                        help="without --model: the tiny test model or the 3B release's shapes with dummy weights")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.5)
    parser.add_argument("--input-workers", type=int, default=0,
                        help="the harness renders in N processes (VLLMBackend input_workers; raw LLM.chat never does)")
    parser.add_argument("--work-dir", default=None, help="where to build model, data and campaigns (default: temp)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="start no further repeat once the timed runs have taken this long (a call's time limit)")
    parser.add_argument("--paths", type=paths_arg, default=list(PATHS),
                        help="comma-separated paths to time: raw, harness, stream (default all; raw always)")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")

    from vllm import LLM, SamplingParams

    from trace_lib.slices import ModelDescriptor
    from trace_lib.slices import Slice
    from trace_lib.generation.backends.vllm import VLLMBackend, sampling_kwargs
    from trace_lib.generation.run import open_slice_store, prepare_rows, run_generation
    from trace_lib.release.locate import locate_release
    from trace_lib.release.suite import load_suite
    from trace_lib.testing.tiny_bench import build_tiny_tsv, tiny_tsv_protocol
    from trace_lib.testing.tiny_qwen import build_tiny_qwen25vl

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="harness-overhead-"))
    empty_campaign_dirs(work)  # the runs' campaign-N directories of an earlier invocation
    model_dir = Path(args.model) if args.model else work / ("tiny-qwen25vl" if args.shape == "tiny" else "qwen25vl-3b")
    if not args.model and not model_dir.exists():
        if args.shape == "tiny":
            build_tiny_qwen25vl(model_dir)
        else:
            from trace_lib.testing.tiny_qwen import write_qwen25vl_shaped_config

            write_qwen25vl_shaped_config(model_dir)
    dummy = {"load_format": "dummy"} if not args.model and args.shape == "3b" else {}
    data = work / "data"
    table = data / "tiny.tsv"
    if not table.exists():
        build_tiny_tsv(table, style="mcq", rows=args.rows)
    generation = {**load_suite(locate_release()).generation, "max_tokens": args.max_tokens}
    protocol = tiny_tsv_protocol("tiny")
    rows = protocol.load(table)
    model = ModelDescriptor("tiny", str(model_dir), "sha256set:" + "0" * 64, f"org/tiny@{'0' * 40}", "Tiny")
    slice_ = Slice("tiny", 42, "tiny")

    llm = LLM(model=str(model_dir), trust_remote_code=True, allowed_local_media_path=str(data.resolve()),
              max_model_len=32768, max_num_seqs=MAX_NUM_SEQS, max_num_batched_tokens=32768,
              gpu_memory_utilization=args.gpu_memory_utilization,
              limit_mm_per_prompt={"image": 24, "video": 3}, **dummy)
    backend = VLLMBackend(model_path=str(model_dir), served_name="tiny", llm=llm, input_workers=args.input_workers)
    steps = count_engine_steps(llm.llm_engine)  # LLM.chat and the backend both call llm_engine.step()
    add_times = record_add_times(llm.llm_engine)
    defaults = llm.model_config.get_diff_sampling_param()

    prepared = prepare_rows(rows, protocol, data / "images", served_name="tiny", generation=generation, seed=42)
    conversations = [p.request.messages_json() for p in prepared]
    params = [SamplingParams.from_optional(**sampling_kwargs(p.request.sampling, defaults)) for p in prepared]
    mm_kwargs = dict(prepared[0].request.mm_processor_kwargs)

    def raw() -> tuple[float, int]:
        start = time.perf_counter()
        outputs = llm.chat(conversations, sampling_params=params, use_tqdm=False, mm_processor_kwargs=mm_kwargs)
        elapsed = time.perf_counter() - start
        assert len(outputs) == len(conversations)
        return elapsed, sum(len(o.outputs[0].token_ids) for o in outputs)

    def stored_tokens(campaign: Path) -> int:
        from trace_lib.generation.store import load_responses

        return sum(r.completion_tokens or 0 for path in campaign.rglob("*.jsonl") for r in load_responses(path))

    counter = iter(range(1_000_000))

    def harness() -> tuple[float, int]:
        campaign = work / f"campaign-{next(counter)}"
        start = time.perf_counter()
        with open_slice_store(campaign, slice_, model, generation) as store:
            result = run_generation(slice_, rows, protocol, backend, store, data / "images", generation=generation,
                                    progress=False)
        elapsed = time.perf_counter() - start
        assert result.complete and result.generated == len(rows)
        return elapsed, stored_tokens(campaign)

    def streamed() -> tuple[float, int]:
        from trace_lib.campaign.scheduler import CampaignScheduler, SliceJob

        campaign = work / f"campaign-{next(counter)}"
        job = SliceJob(slice=slice_, protocol=protocol, load_rows=lambda: rows, image_dir=data / "images",
                       generation=generation, open_store=lambda: open_slice_store(campaign, slice_, model, generation))
        start = time.perf_counter()
        [result] = CampaignScheduler(backend).run([job])
        elapsed = time.perf_counter() - start
        assert result.ok and result.run.generated == len(rows)
        return elapsed, stored_tokens(campaign)

    timers = {"raw": raw, "harness": harness, "stream": streamed}
    for path in args.paths:
        timers[path]()  # warm-up (CUDA graphs, caches, image files)
    runs: dict[str, list[tuple[float, int]]] = {PATHS[path]: [] for path in args.paths}
    cpu: dict[str, list[tuple[float, float, float]]] = {name: [] for name in runs}
    stepped: dict[str, list[int]] = {name: [] for name in runs}
    ramps: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    adding: dict[str, float] = {}
    started = time.perf_counter()
    for repeat in range(args.repeats):
        if repeat and args.seconds is not None and time.perf_counter() - started > args.seconds:
            args.repeats = repeat
            break
        for path in args.paths:
            name = PATHS[path]
            before = backend.loop_stats.snapshot()
            own, engine, before_steps, added = time.process_time(), children_cpu_seconds(), steps[0], len(add_times)
            begun = time.perf_counter()
            runs[name].append(timers[path]())
            ramps[name].append(ramp_up(add_times[added:], begun, MAX_NUM_SEQS))
            cpu[name].append((time.process_time() - own, children_cpu_seconds() - engine, os.getloadavg()[0]))
            stepped[name].append(steps[0] - before_steps)
            adding[name] = adding.get(name, 0.0) + backend.loop_stats.since(before).adding_s
    print(f"rows={len(rows)} max_tokens={args.max_tokens} repeats={args.repeats}")
    best = {}
    for name, timed in runs.items():
        seconds, tokens = min(timed)
        best[name] = (len(rows) / seconds, tokens / seconds)
        listed = ", ".join(f"{t:.2f}s/{n} tok" for t, n in timed)
        share = (f"; adding requests {adding[name] / sum(t for t, _ in timed):.0%} of the time"
                 if name in adding and adding[name] else "")
        print(f"{name:<22}: {best[name][0]:8.1f} rows/s {best[name][1]:9.0f} output tok/s  (runs: {listed}{share})")
    for name, timed in runs.items():
        listed = ", ".join(f"{own:.1f}/{engine:.1f}/{load:.1f}" for own, engine, load in cpu[name])
        per_wall = [engine / seconds for (seconds, _), (_, engine, _) in zip(timed, cpu[name])]
        print(f"{name:<22}: CPU s this process/engine processes/load per run: {listed}; engine CPU per wall second "
              f"{min(per_wall):.2f}-{max(per_wall):.2f}; llm_engine.step() calls per run "
              f"{', '.join(map(str, stepped[name]))}")
    for name, ramp in ramps.items():
        full, last = (sorted(values)[len(values) // 2] for values in zip(*ramp))
        print(f"{name:<22}: requests in the engine, median of runs: the {MAX_NUM_SEQS}th after "
              f"{1000 * full:.0f} ms, the last after {1000 * last:.0f} ms (the {MAX_NUM_SEQS}th per run, ms: "
              f"{', '.join(f'{1000 * f:.0f}' for f, _ in ramp)})")
    baseline = best["raw vllm.LLM.chat"]
    raw_times = [t for t, _ in runs["raw vllm.LLM.chat"]]
    for name in runs:
        if name == PATHS["raw"]:
            continue
        # random weights stop at <|im_end|> now and then, and where depends on batch numerics: output tokens may
        # vary between runs of the same requests, so the tokens/s ratio is printed beside the rows/s ratio
        paired = [r[0] / h[0] for r, h in zip(runs["raw vllm.LLM.chat"], runs[name])]
        print(ratio_line(name[12:], best[name][0] / baseline[0], best[name][1] / baseline[1], paired))
    spread = max(raw_times) / min(raw_times) - 1
    print(f"the raw baseline's own spread between runs: {spread:.1%}"
          + (f"; a {CONFIDENCE:.0%} interval needs >= {pairs_needed(CONFIDENCE)} repeats"
             if args.repeats < pairs_needed(CONFIDENCE) else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
