"""What bounds one offline engine: the thread that renders and adds its requests, or the engine itself.

One Qwen2.5-VL engine (the 3B or 7B release's layer shapes, dummy weights, the engine flags of
``campaign_throughput.py``) generates the same mixed requests (``campaign_throughput.py``'s benchmarks: images
224x224 to 1024x768, a benchmark's seeds in lockstep) in several ways, one after another on the same started engine
(vLLM's multimodal caches reset between them):

- **in-thread**: the vllm backend's streamed path (``VLLMBackend.generate_stream``): each request rendered (chat
  template, tokenizer, image processor) on the thread that steps the engine, as ``LLM.enqueue_chat`` does;
- **rendered ahead**: every request rendered first (not timed), then only added and stepped: the ceiling that
  moving the rendering off the engine's thread can reach;
- **foreign**: the render workers' mechanism without their processes: each request rendered (on the engine's
  thread) by a second vLLM renderer built as a worker builds its own (processor-only cache, from the pickled
  ``VllmConfig``), its engine input pickled and unpickled, its images entered into the engine's cache as the
  backend enters a worker's, then added one at a time;
- **N render workers**: the same streamed path with ``input_workers=N``
  (:mod:`trace_lib.generation.backends.vllm_render`: rendering in N spawned processes, each with its own vLLM
  renderer, the engine's thread injecting the processed images into the engine's cache and adding).

Prints rows/s, output tokens/s, GPU busy (nvidia-smi, 0.1 s), the engine thread's CPU share (``thread_time`` over
wall time: near 1.0 means that thread is the bound) and the engine-core process's CPU share, per way, and each
way's ratio to in-thread. Needs vLLM >= 0.24 (its ``vllm.renderers``).

    python benchmarks/engine_input_ceiling.py [--shape 3b|7b] [--benchmarks 8] [--seeds 3] [--rows 48]
        [--ways in-thread,ahead,foreign,workers=4,workers=8] [--max-num-seqs 256] [--stall-s 90] [--sample-hz 20]

``--stall-s S``: when a way answers nothing for S seconds, write every thread's traceback of this process and of
each process it started (vLLM's engine core, the render workers; through ``benchmarks/stall_dump``), the
driving state, and exit 3; a process that wrote nothing is explained (how it treats ``SIGUSR1``). ``--sample-hz
HZ``: the engine-core process samples its own threads' tracebacks HZ times a second during each way (a thread
``benchmarks/stall_dump`` starts in it; no signal: vLLM 0.24's engine core wrote no dump for 1,240 signals in run
18) and the benchmark prints where its busy loop and its input thread spend their time (a sample takes the GIL: a
sampled run's rates are a diagnostic's, not figures).
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import os
import pickle
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _processes import cpu_seconds, descendants, process_table  # noqa: E402
from _stack_samples import StackSampler, dump_once, report, why_no_dump  # noqa: E402


def _engine_core_pids() -> list[int]:
    """Child processes of this one whose command name names vLLM's engine core."""
    return [p.pid for p in process_table().values() if p.ppid == os.getpid() and "Engine" in p.name]


class StallWatch:
    """A thread that, when :meth:`progress` has not been called for ``seconds`` while armed, dumps every
    thread's traceback of this process and its descendants (``SIGUSR1`` through ``benchmarks/stall_dump``), then
    ``describe()``, and exits 3."""

    def __init__(self, seconds: float, dump_dir: Path) -> None:
        self.seconds, self.dump_dir = seconds, dump_dir
        self.describe = lambda: ""
        self._last = time.monotonic()
        self._armed = False
        threading.Thread(target=self._watch, daemon=True).start()

    def progress(self, armed: bool = True) -> None:
        self._last, self._armed = time.monotonic(), armed

    def _watch(self) -> None:
        while True:
            time.sleep(1.0)
            if not self._armed or time.monotonic() - self._last < self.seconds:
                continue
            print(f"\n[stall] nothing answered for {self.seconds:.0f} s; state: {self.describe()}", flush=True)
            faulthandler.dump_traceback(all_threads=True)
            processes = descendants()
            dumps = dump_once([p.pid for p in processes], self.dump_dir)  # nvidia-smi has no handler: skipped
            for p in processes:
                dump = (dumps.get(p.pid, "(no dump handler)")
                        or f"(nothing written: {why_no_dump(p.pid, self.dump_dir)})")
                print(f"\n[stall] ===== pid {p.pid} ({p.name}) =====\n{dump}", flush=True)
            os._exit(3)


class _Foreign:
    """Requests rendered on submit by a renderer built as a render worker builds its own, pickled across and
    back; :func:`_drive` injects and adds them one at a time."""

    inject = True

    def __init__(self, llm) -> None:  # noqa: ANN001
        from trace_lib.generation.backends.vllm_render import vllm_renderer

        self._render = vllm_renderer(pickle.dumps(llm.llm_engine.vllm_config))
        self._ready: list = []

    def submit(self, index, conversation, mm) -> None:  # noqa: ANN001
        self._ready.append((index, pickle.loads(pickle.dumps(self._render(conversation, mm)))))

    def poll(self, block: bool) -> list:
        ready, self._ready = self._ready, []
        return ready

    def close(self) -> None:
        pass


class _Ahead:
    """Every request rendered before the timed run (by the engine's own renderer, in order); handed out as
    they are submitted."""

    inject = False

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


def _drive(llm, items, params, source, *, target: int,  # noqa: ANN001
           watch: StallWatch | None) -> tuple[int, int, int]:
    """Take rendered requests from ``source``, add and step until every request of ``items`` is answered; returns
    (answered, output tokens, failures). A source with ``inject`` has each request's images injected into the
    engine's cache and is added one request at a time (the render workers' order)."""
    from trace_lib.generation.backends.vllm_render import inject_into_sender_cache, sender_cache

    engine, cache = llm.llm_engine, sender_cache(llm)
    submitted = in_engine = answered = tokens = failures = 0
    rendering = 0
    if watch is not None:
        watch.describe = lambda: (f"submitted {submitted}, rendering {rendering}, in engine {in_engine}, "
                                  f"answered {answered}, engine unfinished {engine.get_num_unfinished_requests()}")
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
        if prompts and source.inject:
            for engine_input, one in zip(prompts, batch_params):
                if isinstance(engine_input, dict) and engine_input.get("type") == "multimodal":
                    if cache is not None:  # as the vllm backend enters a worker's render
                        inject_into_sender_cache(cache, engine_input)
                    else:
                        engine.input_processor.inject_into_mm_cache(engine_input["mm_hashes"],
                                                                    engine_input["mm_kwargs"])
                llm._render_and_add_requests(prompts=[engine_input], params=[one])
        elif prompts:
            llm._render_and_add_requests(prompts=prompts, params=batch_params)
        in_engine += len(prompts)
        if in_engine:
            for output in engine.step():
                if output.finished:
                    in_engine -= 1
                    answered += 1
                    tokens += len(output.outputs[0].token_ids)
                    if watch is not None:
                        watch.progress()
    return answered, tokens, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=("3b", "7b"), default="3b")
    parser.add_argument("--benchmarks", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=48)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--ways", default="in-thread,ahead,workers=4,workers=8",
                        help="comma-separated: in-thread, ahead, foreign, workers=N")
    parser.add_argument("--stall-s", type=float, default=None,
                        help="dump every process's tracebacks and exit 3 when a way answers nothing this long")
    parser.add_argument("--sample-hz", type=float, default=None,
                        help="sample the engine core's tracebacks this often during each way and print a profile")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    parser.add_argument("--max-num-seqs", type=int, default=256,
                        help="the engine's max_num_seqs (upstream's server flag: 256); requests in flight are 4x")
    parser.add_argument("--work-dir", default=None)
    args = parser.parse_args()
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    watch = dump_dir = None
    if args.stall_s or args.sample_hz:
        import tempfile

        dump_dir = Path(tempfile.mkdtemp(prefix="stall-dumps-"))
        os.environ["TRACE_STALL_DUMP_DIR"] = str(dump_dir)  # the processes started from here register SIGUSR1
        if args.sample_hz:  # ... and sample their own threads while StackSampler's gate is open
            os.environ["TRACE_STACK_SAMPLE_HZ"] = str(args.sample_hz)
        site = str(Path(__file__).resolve().parent / "stall_dump")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [site, os.environ.get("PYTHONPATH")]))
    if args.stall_s:
        watch = StallWatch(args.stall_s, dump_dir)

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
              max_model_len=8192, max_num_seqs=args.max_num_seqs, max_num_batched_tokens=32768,
              gpu_memory_utilization=args.gpu_memory_utilization)
    print(f"[engine] up in {time.monotonic() - t0:.0f} s", flush=True)
    backend = VLLMBackend(model_path=str(model_dir), served_name="bench", llm=llm)
    list(backend.generate(requests[:32]))  # warm-up
    cores = _engine_core_pids()
    items = [(i, r.messages_json(), dict(r.mm_processor_kwargs) or None) for i, r in enumerate(requests)]
    params = [backend._sampling_params(r) for r in requests]

    target = 4 * args.max_num_seqs

    def streamed(through: VLLMBackend) -> tuple[int, int, int]:
        answered = tokens = failures = 0
        for result in through.generate_stream(RequestFeed.of(requests)):
            if watch is not None:
                watch.progress()
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
            elif way == "foreign":
                source = _Foreign(llm)
            elif way.startswith("workers="):
                count = int(way.split("=", 1)[1])
                t_start = time.perf_counter()
                through = VLLMBackend(model_path=str(model_dir), served_name="bench", llm=llm, input_workers=count)
                through._renders.wait_started()
                name = f"{count} render workers"
                print(f"[{name}] started in {time.perf_counter() - t_start:.1f} s", flush=True)
            elif way != "in-thread":
                raise SystemExit(f"unknown way {way!r} (in-thread, ahead, foreign, workers=N)")
            core_before = sum(cpu_seconds(p) for p in cores)
            thread_before = time.thread_time()
            before = through.loop_stats.snapshot()
            if watch is not None:
                if source is None:
                    renders = through._renders
                    watch.describe = lambda: (f"backend loop {through.loop_stats.since(before).summary(1.0)}; "
                                              f"engine unfinished {llm.llm_engine.get_num_unfinished_requests()}; "
                                              f"render futures {len(renders._futures) if renders else '-'}")
                watch.progress()
            sampler = StackSampler(cores, dump_dir) if args.sample_hz else contextlib.nullcontext()
            with GpuBusy(0) as busy, sampler:
                t0 = time.perf_counter()
                if source is None:
                    answered, tokens, failures = streamed(through)
                else:
                    answered, tokens, failures = _drive(llm, items, params, source, target=target, watch=watch)
                seconds = time.perf_counter() - t0
            if watch is not None:
                watch.progress(armed=False)
            thread_share = (time.thread_time() - thread_before) / seconds
            core_share = (sum(cpu_seconds(p) for p in cores) - core_before) / seconds
            results[name] = (seconds, answered, tokens, busy.fraction, thread_share, core_share)
            print(f"[{name}] {answered} answered ({failures} failed) in {seconds:.1f} s: {answered / seconds:.1f} "
                  f"rows/s, {tokens / seconds:.0f} output tokens/s, GPU busy {busy.fraction:.2f}, engine thread "
                  f"CPU {thread_share:.2f}, engine core CPU {core_share:.2f}", flush=True)
            if source is None:
                print(f"[{name}] driving thread: {through.loop_stats.since(before).summary(seconds)}", flush=True)
            if args.sample_hz:
                for pid in cores:
                    if pid not in sampler.pids:
                        print(f"[{name}] engine core {pid} not sampled: it runs no sampler "
                              f"(no {pid}.samples.txt in {dump_dir})", flush=True)
                        continue
                    samples, account = sampler.samples(pid), sampler.account(pid)
                    print(f"[{name}] engine core {pid}, sampled at {args.sample_hz:g} Hz ({account}):\n"
                          f"{report(samples, 'run_busy_loop', account=account)}\n"
                          f"{report(samples, 'process_input_sockets', account=account)}", flush=True)
            if through._renders is not None:
                print(f"[{name}] the workers' results weighed {through._renders.received_bytes / 1e6:.0f} MB",
                      flush=True)
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
