"""Where the harness spends CPU outside the engine: ``run_generation`` and the campaign scheduler through the
real vllm backend code driving a *stub* ``vllm.LLM`` (answers every request at once, no model), profiled with
cProfile. Runs on CPU without vllm (a stub ``vllm`` module provides ``SamplingParams``).

Prints per path the harness seconds per 1,000 rows (prompt building, image checks, request hashing, sampling
parameters, store appends with fsync) and the top functions by cumulative time. At the 3B shape on one H200
the engine does ~200 rows/s, i.e. 5 s per 1,000 rows: a harness ratio of 0.97 leaves ~0.15 s per 1,000 rows
of serial CPU work beside the engine.

    python benchmarks/harness_profile.py [--rows 2000] [--slices 4] [--top 25]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2000, help="rows per slice")
    parser.add_argument("--slices", type=int, default=4)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    from trace_lib.testing.stub_vllm import StubLLM, stub_vllm_module

    sys.modules.setdefault("vllm", stub_vllm_module())

    from trace_lib.slices import ModelDescriptor
    from trace_lib.slices import Slice
    from trace_lib.campaign.scheduler import CampaignScheduler, SliceJob
    from trace_lib.generation.backends.vllm import VLLMBackend
    from trace_lib.generation.run import open_slice_store, prepare_rows, run_generation
    from trace_lib.release.locate import locate_release
    from trace_lib.release.suite import load_suite
    from trace_lib.testing.tiny_bench import build_tiny_tsv, tiny_tsv_protocol

    work = Path(tempfile.mkdtemp(prefix="harness-profile-"))
    table = build_tiny_tsv(work / "data" / "tiny.tsv", style="mcq", rows=args.rows)
    generation = dict(load_suite(locate_release()).generation)
    model = ModelDescriptor("stub", "/nonexistent", "sha256set:" + "0" * 64, f"org/stub@{'0' * 40}", "Stub")
    protocol = tiny_tsv_protocol("tiny")
    rows = protocol.load(table)
    prepare_rows(rows, protocol, work / "data" / "images", served_name="stub", generation=generation, seed=0)
    slices = [Slice("stub", 42 + i, "tiny") for i in range(args.slices)]

    def per_slice(campaign: Path) -> None:
        backend = VLLMBackend(model_path="stub", served_name="stub", llm=StubLLM())
        for slice_ in slices:
            with open_slice_store(campaign, slice_, model, generation) as store:
                run_generation(slice_, rows, protocol, backend, store, work / "data" / "images",
                               generation=generation, progress=False)

    def streaming(campaign: Path) -> None:
        backend = VLLMBackend(model_path="stub", served_name="stub", llm=StubLLM())
        jobs = [SliceJob(slice=s, protocol=protocol, load_rows=lambda: rows, image_dir=work / "data" / "images",
                         generation=generation, open_store=lambda s=s: open_slice_store(campaign, s, model, generation))
                for s in slices]
        assert all(r.ok for r in CampaignScheduler(backend).run(jobs))

    total = args.rows * args.slices
    for name, fn in (("per-slice", per_slice), ("streaming", streaming)):
        fn(work / f"warm-{name}")
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        fn(work / f"campaign-{name}")
        profiler.disable()
        seconds = time.perf_counter() - start
        print(f"[{name}] {total} rows: {seconds:.2f} s harness time, {1000 * seconds / total:.3f} s per 1,000 rows "
              f"(under cProfile)")
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(args.top)
        print(out.getvalue())
    for name, fn in (("per-slice", per_slice), ("streaming", streaming)):
        start = time.perf_counter()
        fn(work / f"plain-{name}")
        seconds = time.perf_counter() - start
        print(f"[{name}] without profiler: {1000 * seconds / total:.3f} s per 1,000 rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
