"""What the render workers' results cost the engine's thread, on CPU: the vllm backend's streamed path with
``input_workers`` driving a stub ``vllm.LLM`` that answers at once (``trace_lib.testing.stub_vllm``), its
render workers (real spawned processes) returning one processed image of ``--item-mb`` per request.

Two ways side by side, on the same requests (``--rows`` rows x ``--seeds`` seeds, a row's seeds sharing its
image, fed in the campaign scheduler's lockstep order):

- **every item shipped** (the baseline: what crossed in runs 10-11 of docs/performance.md): the stub engine
  without a sender cache, so each request's image crosses from its worker whole;
- **each item shipped once**: a worker sends an image it has sent before as ``None`` (the default since then).

Prints per way the wall time and rows/s, the engine thread's CPU per request, and what the results weighed, then
the ratio of the rows/s (shipped once over the baseline). The stub engine does no work, so the figures are the
transfer's cost alone: the rate the render path can feed an engine at (on one H200 a 3B-shaped engine took
57.7 rows/s from 8 workers shipping every item, and 93.4 rows/s with every request rendered beforehand).

    python benchmarks/render_transfer.py [--rows 96] [--seeds 3] [--item-mb 6] [--workers 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STUB_RENDERER = "trace_lib.testing.stub_vllm:stub_renderer"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=96)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--item-mb", type=float, default=6.0,
                        help="one processed image, MB (Qwen2.5-VL float32 pixel values: 224x224 ~1.2, 1024x768 ~18)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from trace_lib.testing.stub_vllm import StubLLM, stub_vllm_module

    sys.modules.setdefault("vllm", stub_vllm_module())
    from trace_lib.generation.backends.base import RequestFeed
    from trace_lib.generation.backends.vllm import VLLMBackend
    from trace_lib.generation.request import ChatRequest

    chunk = 16  # the scheduler's lockstep: a benchmark's seeds in chunks of rows
    requests = [ChatRequest(f"{42 + s}|row{i}", ({"role": "user", "content": [{"type": "text", "text": f"q{i}"}]},),
                            {"temperature": 0.6, "max_tokens": 16, "seed": 42 + s}, {})
                for start in range(0, args.rows, chunk) for s in range(args.seeds)
                for i in range(start, min(start + chunk, args.rows))]
    item_bytes = int(args.item_mb * 1e6)

    def run(omit: bool) -> tuple[float, float, float]:
        # the baseline: an engine without a sender cache, so the workers ship every item whole
        llm = StubLLM(per_step=1 << 20, item_bytes=item_bytes, **({} if omit else {"mm_cache_items": 0}))
        backend = VLLMBackend(model_path="stub", served_name="stub", llm=llm, input_workers=args.workers,
                              renderer_factory=STUB_RENDERER)
        try:
            backend._renders.wait_started()
            thread0, wall0 = time.thread_time(), time.perf_counter()
            answered = sum(1 for _ in backend.generate_stream(RequestFeed.of(requests)))
            wall, thread = time.perf_counter() - wall0, time.thread_time() - thread0
            assert answered == len(requests), (answered, len(requests))
            return wall, 1000 * thread / len(requests), backend._renders.received_bytes / 1e6
        finally:
            backend.close()

    ways = {"every item shipped": False, "each item shipped once": True}
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in ways}
    for _ in range(args.repeats):  # alternated, so drift hits both alike
        for name, omit in ways.items():
            results[name].append(run(omit))
    print(f"{len(requests)} requests ({args.rows} rows x {args.seeds} seeds), one {args.item_mb:g} MB image each, "
          f"{args.workers} render workers, {args.repeats} runs per way (median)")
    print()
    print("| way | wall s | rows/s | engine thread ms per request | results MB |")
    print("| --- | --- | --- | --- | --- |")
    medians = {}
    for name, runs in results.items():
        medians[name] = [statistics.median(column) for column in zip(*runs)]
        wall, per_request, weighed = medians[name]
        print(f"| {name} | {wall:.2f} | {len(requests) / wall:.1f} | {per_request:.2f} | {weighed:.0f} |")
    base, once = medians["every item shipped"][0], medians["each item shipped once"][0]
    print()
    print(f"rows/s: shipped once / every item shipped = {base / once:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
