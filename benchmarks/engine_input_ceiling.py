"""What bounds one offline engine: the thread that renders and adds its requests, or the engine itself.

One Qwen2.5-VL engine (the 3B or 7B release's layer shapes, dummy weights, the engine flags of
``campaign_throughput.py``) generates the same mixed requests (``campaign_throughput.py``'s benchmarks: images
224x224 to 1024x768, a benchmark's seeds in lockstep) in several ways, one after another on the same started engine
(vLLM's multimodal caches reset between them):

- **in-thread**: the vllm backend's streamed path (``VLLMBackend.generate_stream``): each request rendered (chat
  template, tokenizer, image processor) on the thread that steps the engine, as ``LLM.enqueue_chat`` does;
- **rendered ahead**: every request rendered first (not timed), then only added and stepped: the ceiling that
  moving the rendering off the engine's thread can reach;
- **N render workers**: the same streamed path with ``input_workers=N``
  (:mod:`trace_lib.generation.backends.vllm_render`: rendering in N spawned processes, each with its own vLLM
  renderer, the engine's thread injecting the processed images into the engine's cache and adding).

Prints rows/s, output tokens/s, GPU busy (nvidia-smi, 0.1 s), the engine thread's CPU share (``thread_time`` over
wall time: near 1.0 means that thread is the bound) and the engine-core process's CPU share, per way, and each
way's ratio to in-thread. Needs vLLM >= 0.24 (its ``vllm.renderers``).

    python benchmarks/engine_input_ceiling.py [--shape 3b|7b] [--benchmarks 8] [--seeds 3] [--rows 48]
        [--ways in-thread,ahead,workers=4,workers=8]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (0.0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _engine_core_pids() -> list[int]:
    """Child processes of this one whose command line names vLLM's engine core."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if ppid == os.getpid() and "Engine" in name:
            found.append(int(entry.name))
    return found


class _Ahead:
    """Every request rendered before the timed run (by the engine's own renderer, in order); handed out as
    they are submitted."""

    def __init__(self, llm, items) -> None:  # noqa: ANN001
        self._rendered = {i: llm._preprocess_chat([conv], mm_processor_kwargs=mm)[0] for i, conv, mm in items}
        self._ready: list = []

    def submit(self, index, conversation, mm) -> None:  # noqa: ANN001
        self._ready.append((index, self._rendered.pop(index)))

    def poll(self, block: bool) -> list:
        ready, self._ready = self._ready, []
        return ready

    def close(self) -> None:
        pass


def _drive(llm, items, params, source, *, target: int) -> tuple[int, int, int]:  # noqa: ANN001
    """Take rendered requests from ``source``, add and step until every request of ``items`` is answered; returns
    (answered, output tokens, failures)."""
    engine = llm.llm_engine
    submitted = in_engine = answered = tokens = failures = 0
    rendering = 0
    while answered + failures < len(items):
        while submitted < len(items) and in_engine + rendering < target:
            source.submit(*items[submitted])
            submitted += 1
            rendering += 1
        ready = source.poll(block=in_engine == 0 and rendering > 0)
        prompts, batch_params = [], []
        for index, engine_input in ready:
            rendering -= 1
            if isinstance(engine_input, str):
                failures += 1
                print(f"  refused: {engine_input[:200]}", flush=True)
                continue
            prompts.append(engine_input)
            batch_params.append(params[index])
        if prompts:
            llm._render_and_add_requests(prompts=prompts, params=batch_params)
            in_engine += len(prompts)
        if in_engine:
            for output in engine.step():
                if output.finished:
                    in_engine -= 1
                    answered += 1
                    tokens += len(output.outputs[0].token_ids)
    return answered, tokens, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=("3b", "7b"), default="3b")
    parser.add_argument("--benchmarks", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=48)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--ways", default="in-thread,ahead,workers=4,workers=8",
                        help="comma-separated: in-thread, ahead, workers=N")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    parser.add_argument("--work-dir", default=None)
    args = parser.parse_args()
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")

    from campaign_throughput import GpuBusy, _table, shaped_work_dir

    from trace_lib.generation.backends.base import RequestFeed
    from trace_lib.generation.backends.vllm import VLLMBackend
    from trace_lib.generation.run import prepare_rows
    from trace_lib.release.locate import locate_release
    from trace_lib.release.suite import load_suite
    from trace_lib.testing.tiny_bench import tiny_tsv_protocol

    work, model_dir, data = shaped_work_dir(args.work_dir, "engine-input-ceiling-", args.shape)
    generation = {**load_suite(locate_release()).generation, "max_tokens": args.max_tokens}
    requests: list = []
    chunk = 16
    for b in range(args.benchmarks):
        table = Path(_table(str(data / f"bench{b:02d}.tsv"), b, args.rows))
        protocol = tiny_tsv_protocol(table.stem)
        rows = protocol.load(table)
        by_seed = [prepare_rows(rows, protocol, data / "images" / table.stem, served_name="bench",
                                generation=generation, seed=42 + s) for s in range(args.seeds)]
        for start in range(0, len(rows), chunk):  # a benchmark's seeds in lockstep chunks, as the scheduler feeds
            for prepared in by_seed:
                requests += [p.request for p in prepared[start:start + chunk]]
    print(f"[setup] {len(requests)} requests ({args.benchmarks} benchmarks x {args.seeds} seeds x {args.rows} "
          f"rows) under {work}", flush=True)

    from vllm import LLM

    t0 = time.monotonic()
    llm = LLM(model=str(model_dir), load_format="dummy", trust_remote_code=True, served_model_name="bench",
              allowed_local_media_path=str(data.resolve()), limit_mm_per_prompt={"image": 24, "video": 3},
              max_model_len=8192, max_num_seqs=256, max_num_batched_tokens=32768,
              gpu_memory_utilization=args.gpu_memory_utilization)
    print(f"[engine] up in {time.monotonic() - t0:.0f} s", flush=True)
    backend = VLLMBackend(model_path=str(model_dir), served_name="bench", llm=llm)
    list(backend.generate(requests[:32]))  # warm-up
    cores = _engine_core_pids()
    items = [(i, r.messages_json(), dict(r.mm_processor_kwargs) or None) for i, r in enumerate(requests)]
    params = [backend._sampling_params(r) for r in requests]

    target = 4 * 256

    def streamed(through: VLLMBackend) -> tuple[int, int, int]:
        answered = tokens = failures = 0
        for result in through.generate_stream(RequestFeed.of(requests)):
            if hasattr(result, "completion_tokens"):
                answered += 1
                tokens += result.completion_tokens or 0
            else:
                failures += 1
        return answered, tokens, failures

    results: dict[str, tuple[float, int, int, float, float, float]] = {}
    for way in [w.strip() for w in args.ways.split(",") if w.strip()]:
        llm.reset_mm_cache()
        through, source, name = backend, None, way
        try:
            if way == "ahead":
                t_render = time.perf_counter()
                source = _Ahead(llm, items)
                seconds = time.perf_counter() - t_render
                name = "rendered ahead"
                print(f"[ahead] rendered {len(items)} requests in {seconds:.1f} s ({1000 * seconds / len(items):.1f} "
                      "ms each, engine thread)", flush=True)
            elif way.startswith("workers="):
                count = int(way.split("=", 1)[1])
                t_start = time.perf_counter()
                through = VLLMBackend(model_path=str(model_dir), served_name="bench", llm=llm, input_workers=count)
                through._renders.wait_started()
                name = f"{count} render workers"
                print(f"[{name}] started in {time.perf_counter() - t_start:.1f} s", flush=True)
            elif way != "in-thread":
                raise SystemExit(f"unknown way {way!r} (in-thread, ahead, workers=N)")
            core_before = sum(_proc_cpu_s(p) for p in cores)
            thread_before = time.thread_time()
            before = through.loop_stats.snapshot()
            with GpuBusy(0) as busy:
                t0 = time.perf_counter()
                if source is None:
                    answered, tokens, failures = streamed(through)
                else:
                    answered, tokens, failures = _drive(llm, items, params, source, target=target)
                seconds = time.perf_counter() - t0
            thread_share = (time.thread_time() - thread_before) / seconds
            core_share = (sum(_proc_cpu_s(p) for p in cores) - core_before) / seconds
            results[name] = (seconds, answered, tokens, busy.fraction, thread_share, core_share)
            print(f"[{name}] {answered} answered ({failures} failed) in {seconds:.1f} s: {answered / seconds:.1f} "
                  f"rows/s, {tokens / seconds:.0f} output tokens/s, GPU busy {busy.fraction:.2f}, engine thread "
                  f"CPU {thread_share:.2f}, engine core CPU {core_share:.2f}", flush=True)
            if source is None:
                print(f"[{name}] driving thread: {through.loop_stats.since(before).summary(seconds)}", flush=True)
        except Exception as exc:  # noqa: BLE001 - report and go on to the next way
            import traceback

            traceback.print_exc()
            print(f"[{way}] failed: {type(exc).__name__}: {exc}", flush=True)
        finally:
            if through is not backend:
                through.close()  # its render workers (the engine is not its own)

    print()
    print("| way | rows | seconds | rows/s | output tok/s | GPU busy | engine thread CPU | engine core CPU "
          "| vs in-thread |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    base = results.get("in-thread")
    for name, (seconds, rows, tokens, busy, thread, core) in results.items():
        ratio = f"{(rows / seconds) / (base[1] / base[0]):.2f}" if base else "-"
        print(f"| {name} | {rows} | {seconds:.1f} | {rows / seconds:.1f} | {tokens / seconds:.0f} | {busy:.2f} | "
              f"{thread:.2f} | {core:.2f} | {ratio} |")
    backend.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
