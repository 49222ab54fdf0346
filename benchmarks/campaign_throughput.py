"""Campaign throughput on one GPU: per-slice generation (the previous design), the streaming campaign scheduler
(every slice through one engine; a benchmark's seeds queued in lockstep chunks), the streaming scheduler on
``--replicas`` engines sharing the GPU (one process each, its share of the memory, whole benchmarks dealt out by
rows as ``trace-repro generate --engines-per-group`` deals them: ``deal_slices``; 8 equal benchmarks over 3 engines
make 3, 3 and 2; ``--replicas 2,3``: one such path per count, one after another), and upstream's design (``vllm
serve`` + an HTTP client with 32 requests in flight, one slice after another), side by side in one run on the same
requests. Each path is set against every baseline that ran: per-slice, upstream's design, and the first engine count.
A reused ``--work-dir`` keeps its model and images, and every path's campaign directory starts empty.

The model is a random-weight Qwen2.5-VL with the 3B release's layer shapes (36 layers, hidden 2048, a 32-block
vision tower) or, with ``--shape 7b``, the 7B release's (28 layers, hidden 3584; 6 of the 8 models); config only,
loaded with vLLM's ``load_format="dummy"``; the vocabulary is the tiny test
tokenizer's, so random weights stop at ``<|im_end|>`` now and then and output lengths vary). The mini campaign is
``--benchmarks`` x ``--seeds`` slices of ``--rows`` rows (default 8 x 3 x 200 = 24 slices, 4,800 rows per
path): each benchmark has its own prompt length and image sizes (224x224 up to 1024x768, some rows with two
images), every image distinct. Decoding is the suite's except ``max_tokens`` (``--max-tokens``, default 256).
Engine settings are upstream's server flags except ``max_model_len`` (8192), ``gpu_memory_utilization`` and, with
``--max-num-seqs``, the ``max_num_seqs`` of trace-repro's engines (upstream's design keeps 256).

Prints rows/s, output tokens/s and the GPU's busy fraction (utilisation sampled every 0.1 s by nvidia-smi) per path,
and the ratios; for the offline engine also how much of the wall time the driving thread spent adding requests
(vLLM's offline ``LLM`` renders and processes images serially there: a share near 100% with a low GPU busy
fraction means preprocessing, not the GPU, bounds the path). Targets: streaming >= 1.2x per-slice and >= 2.5x
upstream's design.

    python benchmarks/campaign_throughput.py [--shape 3b|7b] [--benchmarks 8] [--seeds 3] [--rows 200]
        [--max-tokens 256] [--replicas 2[,3...]] [--input-workers N] [--max-num-seqs 256] [--skip-per-slice]
        [--skip-single] [--skip-upstream] [--model-runners v1[,v2]] [--ignore-eos] [--work-dir DIR]

``--model-runners v1,v2``: the one-engine path once per vLLM model runner, one after another (``v2`` sets
``VLLM_USE_V2_MODEL_RUNNER=1`` for trace-repro's engines: vLLM's Model Runner V2, which samples a seeded request in
a Triton kernel instead of V1's per-request ``torch.Generator``); the replicas run the last one listed. Upstream's
design always runs vLLM's default for the model (V1 for Qwen2.5-VL in vLLM 0.24): the variable is removed from its
server's environment.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trace_lib.environment.engine import MODEL_RUNNER_ENV as RUNNER_ENV  # noqa: E402

IMAGE_SIZES = ((224, 224), (336, 252), (448, 448), (640, 480), (800, 600), (1024, 768), (512, 384), (720, 540))
FILLER = ("Read the figure carefully and consider every labelled part before answering. "
          "The options may differ only in small details. ")


def _table(path: str, bench: int, rows: int) -> str:
    """Write one benchmark's MCQ table (tiny_bench's mcq columns), images distinct per row."""
    import base64

    import pandas as pd

    from trace_lib.testing.tiny_bench import tiny_png

    rng = random.Random(bench)
    size = IMAGE_SIZES[bench % len(IMAGE_SIZES)]
    records = []
    for i in range(rows):
        count = 1 + (i + bench) % 2 if bench % 4 == 3 else 1
        blobs = [base64.b64encode(tiny_png(bench * 100_000 + i * 10 + j, size=size)).decode() for j in range(count)]
        question = FILLER * (bench % 5 * 3) + f"Question {i}: how many shapes are drawn in the image?"
        records.append({"index": i, "question": question, "A": "1", "B": "2", "C": "3", "D": "4",
                        "answer": "ABCD"[rng.randrange(4)],
                        "image": blobs[0] if count == 1 else json.dumps(blobs)})
    pd.DataFrame(records).to_csv(path, sep="\t", index=False)
    return path


class GpuBusy:
    """Mean GPU utilisation (percent of time a kernel ran) while active, sampled every 0.1 s by a separate
    ``nvidia-smi -lms 100`` process (a sampler thread in this process would share the GIL with the scheduler's
    threads and miss samples exactly when the harness is busiest)."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.samples: list[int] = []

    def __enter__(self) -> GpuBusy:
        self._log = tempfile.TemporaryFile(mode="w+")
        self._proc = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "100",
             f"--id={self.index}"], stdout=self._log, stderr=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc: object) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)
        self._log.seek(0)
        self.samples = [int(line) for line in self._log.read().split() if line.isdigit()]
        self._log.close()

    @property
    def fraction(self) -> float:
        return sum(self.samples) / len(self.samples) / 100 if self.samples else float("nan")


def _wait_gpu_memory_free(index: int, timeout_s: float = 90.0) -> None:
    """Wait until the offline engine's GPU memory is released (NVML used < 10% of total), at most ``timeout_s``."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # noqa: BLE001 - no NVML: give the engine process a moment
        time.sleep(10)
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
        if memory.used < 0.1 * memory.total:
            return
        time.sleep(1)


def shaped_work_dir(work_dir: str | None, prefix: str, shape: str) -> tuple[Path, Path, Path]:
    """``(work, model_dir, data)``: the work directory (``work_dir`` or a new temporary one), a config-only
    Qwen2.5-VL of the release's ``shape`` in it (written once) and its ``data`` folder."""
    from trace_lib.testing.tiny_qwen import QWEN25VL_SHAPES, write_qwen25vl_shaped_config

    work = Path(work_dir or tempfile.mkdtemp(prefix=prefix))
    model_dir = work / f"qwen25vl-{shape}-shapes"
    if not model_dir.exists():
        write_qwen25vl_shaped_config(model_dir, QWEN25VL_SHAPES[shape])
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    return work, model_dir, data


def empty_campaign_dirs(work: Path) -> None:
    """Remove ``work``'s ``warmup`` and ``campaign-*`` directories (not links), left by an earlier invocation with
    the same ``--work-dir``, so that no measured path resumes stored rows."""
    for stale in [work / "warmup", *work.glob("campaign-*")]:
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale)


def _count(campaign: Path) -> tuple[int, int]:
    from trace_lib.generation.store import load_responses

    rows = tokens = 0
    for path in campaign.rglob("*.jsonl"):
        stored = load_responses(path)
        rows += len(stored)
        tokens += sum(r.completion_tokens or 0 for r in stored)
    return rows, tokens


def _await_line(worker: subprocess.Popen, word: str, *, echo: bool = False) -> bool:
    """Read ``worker``'s stdout until a line equal to ``word`` (True) or its end (False); other lines are
    printed when ``echo``."""
    for line in worker.stdout:
        if line.strip() == word:
            return True
        if echo:
            print(line, end="", flush=True)
    return False


def _counts(text: str) -> list[int]:
    """``--replicas``: one or more engine counts, comma-separated."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of counts: {text!r}") from None
    if len(set(counts)) != len(counts):  # a count's path has one campaign directory: a repeat would resume it
        raise argparse.ArgumentTypeError(f"a count given twice: {text!r}")
    return counts


def _replica(index: int, model_dir: Path, data: Path, engine_flags: dict, warmup_requests, streaming,
             jobs: list, input_workers: int) -> int:  # noqa: ANN001
    """One engine of the replicated path: started and warmed up, prints READY, waits for GO on stdin, streams
    its benchmarks' slices, prints its driving-thread stats and DONE."""
    from vllm import LLM

    from trace_lib.generation.backends.vllm import VLLMBackend

    llm = LLM(model=str(model_dir), load_format="dummy", trust_remote_code=True, served_model_name="bench",
              allowed_local_media_path=str(data.resolve()), limit_mm_per_prompt={"image": 24, "video": 3},
              **engine_flags)
    backend = VLLMBackend(model_path=str(model_dir), served_name="bench", llm=llm, input_workers=input_workers)
    list(backend.generate(warmup_requests(41 + index)))
    print("READY", flush=True)
    if not sys.stdin.readline():
        return 1
    before, t0 = backend.loop_stats.snapshot(), time.perf_counter()
    streaming(backend, jobs)
    seconds = time.perf_counter() - t0
    print(f"[replica {index}] {len(jobs)} slices in {seconds:.1f} s; driving thread: "
          f"{backend.loop_stats.since(before).summary(seconds)}", flush=True)
    print("DONE", flush=True)
    backend.close()
    return 0


def ratio_lines(rate: dict[str, float], ours: list[str]) -> list[str]:
    """One line per path of ``ours`` that ran: its rate over each baseline that ran in the same run.

    The baselines are ``per-slice``, upstream's design, and, for a later engine count, the first of ``ours`` that
    ran (so ``--replicas 2,3 --skip-upstream`` still compares the counts side by side). A path with no baseline
    gets no line.
    """
    upstream = next((k for k in rate if k.startswith("upstream")), None)
    ran = [name for name in ours if name in rate]  # not a count below 2, nor a failed path
    lines = []
    for name in ran:
        ratios = []
        if "per-slice" in rate:
            ratios.append(f"/ per-slice = {rate[name] / rate['per-slice']:.2f} (target >= 1.2)")
        if upstream:
            ratios.append(f"/ upstream design = {rate[name] / rate[upstream]:.2f} (target >= 2.5)")
        if name != ran[0]:
            ratios.append(f"/ {ran[0]} = {rate[name] / rate[ran[0]]:.2f}")
        if ratios:
            lines.append(f"{name} " + "; ".join(ratios))
    return lines


def _runners(text: str) -> list[str]:
    """``v1,v2`` -> ``["v1", "v2"]``: the model runners of the one-engine path, each once."""
    runners = text.split(",")
    if not runners or any(r not in ("v1", "v2") for r in runners) or len(set(runners)) != len(runners):
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of v1 and v2, each at most once")
    return runners


def single_path_name(runner: str) -> str:
    """The one-engine path's name in the table: ``streaming`` for V1 (the name of every earlier run)."""
    return "streaming" if runner == "v1" else f"streaming (model runner {runner})"


def set_runner(runner: str) -> None:
    """Make engines started from now on by this process (and its children) use ``runner``."""
    os.environ[RUNNER_ENV] = "1" if runner == "v2" else "0"


def force_ignore_eos() -> None:
    """Benchmark only (``--ignore-eos``): every request of this process generates ``max_tokens`` tokens, on
    trace-repro's engines (``ignore_eos`` in their ``SamplingParams``) and in upstream's request body alike.

    A random-weight model stops where the sampler's noise puts ``<|im_end|>``, and every request of a seed draws
    the same noise, so two samplers (V1 and V2 model runners) give different output lengths for the same
    requests; with this, paths compare at equal decode work.
    """
    from trace_lib.generation import request as request_module
    from trace_lib.generation.backends import vllm as vllm_backend

    kwargs, payload = vllm_backend.sampling_kwargs, request_module.ChatRequest.payload
    vllm_backend.sampling_kwargs = lambda sampling, defaults: {**kwargs(sampling, defaults), "ignore_eos": True}
    request_module.ChatRequest.payload = lambda self, model: {**payload(self, model), "ignore_eos": True}


def upstream_server_env(environ: dict[str, str]) -> dict[str, str]:
    """The environment of upstream's ``vllm serve``: ``environ`` with spawned workers, no tokenizer threads, and
    no model-runner choice of ours (vLLM picks its default, as upstream's server did)."""
    env = {k: v for k, v in environ.items() if k != RUNNER_ENV}
    return {**env, "VLLM_WORKER_MULTIPROC_METHOD": "spawn", "TOKENIZERS_PARALLELISM": "false"}


def main() -> int:
    import signal

    # `timeout` and schedulers stop a run with SIGTERM: exit through the finally blocks so `vllm serve` is stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=("3b", "7b"), default="3b", help="the release's layer shapes to load")
    parser.add_argument("--benchmarks", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--in-flight", type=int, default=32, help="upstream design: HTTP requests in flight")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    parser.add_argument("--max-model-len", type=int, default=8192)
    parser.add_argument("--max-num-seqs", type=int, default=256,
                        help="max_num_seqs of trace-repro's engines (upstream's design keeps its server flag, 256)")
    parser.add_argument("--enforce-eager", action="store_true")
    parser.add_argument("--replicas", type=_counts, default=[2], metavar="N[,N...]",
                        help="engines sharing the GPU in the replicated streaming path, one path per count, one "
                             "after another (below 2: no such path)")
    parser.add_argument("--replica", default=None, help=argparse.SUPPRESS)  # I/N: run as replica I of N
    parser.add_argument("--input-workers", type=int, default=0,
                        help="render requests in N processes per engine (VLLMBackend input_workers; 0: on the "
                             "engine's thread)")
    parser.add_argument("--skip-per-slice", action="store_true", help="no per-slice run")
    parser.add_argument("--skip-upstream", action="store_true", help="no 'vllm serve' run")
    parser.add_argument("--skip-single", action="store_true",
                        help="no one-engine run (so no per-slice run either): only the replicas and upstream")
    parser.add_argument("--model-runners", type=_runners, default=["v1"], metavar="v1[,v2]",
                        help="vLLM model runner of trace-repro's engines: the one-engine path once per runner; the "
                             "replicas run the last (upstream's design: vLLM's default)")
    parser.add_argument("--ignore-eos", action="store_true",
                        help="every request generates --max-tokens tokens, on every path (equal decode work)")
    parser.add_argument("--gpu-index", type=int, default=0, help="NVML index of the GPU to sample")
    parser.add_argument("--work-dir", default=None)
    parser.add_argument("--calibration", default=None, metavar="FILE",
                        help="write the best path's rows/s for this shape here (trace-repro plan --estimate)")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    started = time.monotonic()
    if args.ignore_eos:
        force_ignore_eos()

    from trace_lib.slices import ModelDescriptor
    from trace_lib.slices import Slice
    from trace_lib.campaign.plan import deal_slices
    from trace_lib.campaign.scheduler import CampaignScheduler, SliceJob
    from trace_lib.generation.run import open_slice_store, prepare_rows, run_generation
    from trace_lib.release.locate import locate_release
    from trace_lib.release.suite import load_suite
    from trace_lib.testing.tiny_bench import tiny_tsv_protocol
    work, model_dir, data = shaped_work_dir(args.work_dir, "campaign-throughput-", args.shape)
    tables = [data / f"bench{b:02d}.tsv" for b in range(args.benchmarks)]
    if args.replica is None:  # a replica reads what its parent built
        with ProcessPoolExecutor(max_workers=min(16, os.cpu_count() or 1)) as pool:
            list(pool.map(_table, [str(t) for t in tables], range(args.benchmarks), [args.rows] * args.benchmarks))
    generation = {**load_suite(locate_release()).generation, "max_tokens": args.max_tokens}
    model = ModelDescriptor("bench", str(model_dir), "sha256set:" + "0" * 64, f"org/bench@{'0' * 40}", "Bench")
    seeds = [42 + s for s in range(args.seeds)]
    slices = [Slice("bench", seed, t.stem) for seed in seeds for t in tables]

    def jobs(campaign: Path) -> list[SliceJob]:
        out = []
        for slice_ in slices:
            protocol = tiny_tsv_protocol(slice_.benchmark)
            table = data / f"{slice_.benchmark}.tsv"
            out.append(SliceJob(slice=slice_, protocol=protocol, load_rows=lambda p=protocol, t=table: p.load(t),
                                image_dir=data / "images" / slice_.benchmark, generation=generation,
                                open_store=lambda s=slice_: open_slice_store(campaign, s, model, generation)))
        return out

    def per_slice(backend, campaign: Path) -> None:
        for job in jobs(campaign):
            with job.open_store() as store:
                run_generation(job.slice, job.load_rows(), job.protocol, backend, store, job.image_dir,
                               generation=generation, progress=False)

    def streaming(backend, campaign: Path | list[SliceJob]) -> None:
        results = CampaignScheduler(backend).run(campaign if isinstance(campaign, list) else jobs(campaign))
        failed = [r.error for r in results if not r.ok]
        assert not failed, failed[0]

    engine_flags = dict(max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
                        max_num_batched_tokens=32768, gpu_memory_utilization=args.gpu_memory_utilization,
                        enforce_eager=args.enforce_eager)
    warm = jobs(work / "warmup")[0]

    def warmup_requests(seed: int) -> list:
        return [r.request for r in prepare_rows(warm.load_rows()[:32], warm.protocol, warm.image_dir,
                                                served_name="bench", generation=generation, seed=seed)]

    if args.replica is not None:
        index, count = (int(part) for part in args.replica.split("/"))
        share = set(deal_slices(slices, lambda _: args.rows, count)[index])  # as `generate --worker i/N` deals
        return _replica(index, model_dir, data, engine_flags, warmup_requests, streaming,
                        [j for j in jobs(work / f"campaign-replicas-{count}") if j.slice in share],
                        args.input_workers)

    empty_campaign_dirs(work)
    for job in jobs(work / "prebuild"):  # materialise every image once (both paths then read the same files)
        prepare_rows(job.load_rows(), job.protocol, job.image_dir, served_name="bench", generation=generation,
                     seed=job.slice.seed)
    print(f"[setup] {len(slices)} slices x {args.rows} rows, max_tokens {args.max_tokens}; "
          f"built in {time.monotonic() - started:.0f} s under {work}", flush=True)

    results: dict[str, tuple[float, int, int, float]] = {}
    start_s: dict[str, float] = {}

    def measure(name: str, fn, backend, campaign: Path) -> None:  # noqa: ANN001
        loop = getattr(backend, "loop_stats", None)
        before = loop.snapshot() if loop is not None else None
        with GpuBusy(args.gpu_index) as busy:
            t0 = time.perf_counter()
            fn(backend, campaign)
            seconds = time.perf_counter() - t0
        rows, tokens = _count(campaign)
        results[name] = (seconds, rows, tokens, busy.fraction)
        print(f"[{name}] {rows} rows in {seconds:.1f} s: {rows / seconds:.1f} rows/s, {tokens / seconds:.0f} "
              f"output tokens/s, GPU busy {busy.fraction:.2f}", flush=True)
        if before is not None:  # the offline engine preprocesses images serially on the driving thread
            print(f"[{name}] driving thread: {backend.loop_stats.since(before).summary(seconds)}", flush=True)

    for runner in ([] if args.skip_single else args.model_runners):
        from vllm import LLM

        from trace_lib.generation.backends.vllm import VLLMBackend

        set_runner(runner)
        name = single_path_name(runner)
        _wait_gpu_memory_free(args.gpu_index)
        t0 = time.monotonic()
        llm = LLM(model=str(model_dir), load_format="dummy", trust_remote_code=True, served_model_name="bench",
                  allowed_local_media_path=str(data.resolve()), limit_mm_per_prompt={"image": 24, "video": 3},
                  **engine_flags)
        backend = VLLMBackend(model_path=str(model_dir), served_name="bench", llm=llm, input_workers=args.input_workers)
        start_s[name] = time.monotonic() - t0
        print(f"[engine] offline LLM ({runner} model runner) up in {start_s[name]:.0f} s", flush=True)
        list(backend.generate(warmup_requests(41)))
        if not args.skip_per_slice and runner == args.model_runners[0]:
            measure("per-slice", per_slice, backend, work / "campaign-per-slice")
        measure(name, streaming, backend, work / ("campaign-streaming" + ("" if runner == "v1" else f"-{runner}")))
        backend.close()
        shutdown = getattr(getattr(llm.llm_engine, "engine_core", None), "shutdown", None)
        if shutdown is not None:  # free the GPU for the next engine
            shutdown()
        del llm, backend
        gc.collect()
    set_runner(args.model_runners[-1])

    def replicated(count: int) -> str:
        return f"streaming, {count} engines on the GPU"

    for count in args.replicas:  # each count's engines started, measured and stopped before the next
        if count < 2:
            continue
        _wait_gpu_memory_free(args.gpu_index)
        argv = [sys.executable, __file__, "--work-dir", str(work), "--shape", args.shape,
                "--benchmarks", str(args.benchmarks),
                "--seeds", str(args.seeds), "--rows", str(args.rows), "--max-tokens", str(args.max_tokens),
                "--gpu-memory-utilization", str(args.gpu_memory_utilization / count),
                "--max-model-len", str(args.max_model_len), "--max-num-seqs", str(args.max_num_seqs),
                "--input-workers", str(args.input_workers),
                *(["--enforce-eager"] if args.enforce_eager else []), *(["--ignore-eos"] if args.ignore_eos else [])]
        campaign = work / f"campaign-replicas-{count}"
        t0 = time.monotonic()
        workers = []
        try:
            for index in range(count):  # one at a time: each sizes its KV cache from the memory left
                log = open(work / f"replica{index}-of-{count}.log", "w")  # noqa: SIM115 - closed with the worker
                worker = subprocess.Popen([*argv, "--replica", f"{index}/{count}"], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1,
                                          env=dict(os.environ, VLLM_LOGGING_STREAM="ext://sys.stderr"))
                workers.append((worker, log))
                if not _await_line(worker, "READY"):
                    raise SystemExit(f"replica {index} did not start; log: {log.name}")
            start_s[replicated(count)] = time.monotonic() - t0
            print(f"[engine] {count} offline engines up in {start_s[replicated(count)]:.0f} s", flush=True)

            def go(backend, campaign: Path) -> None:  # noqa: ANN001, ARG001
                for worker, _ in workers:
                    worker.stdin.write("GO\n")
                    worker.stdin.flush()
                for index, (worker, log) in enumerate(workers):
                    if not _await_line(worker, "DONE", echo=True):
                        raise SystemExit(f"replica {index} failed; log: {log.name}")

            measure(replicated(count), go, None, campaign)
        except SystemExit as exc:  # report it and go on to the next path
            print(f"[{replicated(count)}] {exc}", flush=True)
        finally:
            for worker, log in workers:
                if worker.poll() is None:
                    worker.stdin.close()
                    try:
                        worker.wait(timeout=120)
                    except subprocess.TimeoutExpired:
                        worker.kill()
                        worker.wait()
                log.close()

    if not args.skip_upstream:
        from trace_lib.generation.backends.openai import OpenAIBackend

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
               "--served-model-name", "bench", "--load-format", "dummy", "--trust-remote-code", "--host", "127.0.0.1",
               "--port", str(port), "--allowed-local-media-path", str(data.resolve()), "--limit-mm-per-prompt",
               json.dumps({"image": 24, "video": 3}), "--max-model-len", str(args.max_model_len),
               "--max-num-seqs", "256", "--max-num-batched-tokens", "32768", "--gpu-memory-utilization",
               str(args.gpu_memory_utilization), *(["--enforce-eager"] if args.enforce_eager else [])]
        _wait_gpu_memory_free(args.gpu_index)
        t0 = time.monotonic()
        log = open(work / "vllm-serve.log", "w")  # noqa: SIM115 - closed with the server
        server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=upstream_server_env(os.environ),
                                  start_new_session=True)
        try:
            deadline = time.monotonic() + 420
            while True:
                if time.monotonic() > deadline:
                    raise SystemExit(f"vllm serve not ready after 420 s; log: {work / 'vllm-serve.log'}")
                if server.poll() is not None:
                    log.flush()
                    print((work / "vllm-serve.log").read_text()[-4000:], file=sys.stderr)
                    raise SystemExit("vllm serve exited")
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                    break
                except OSError:
                    time.sleep(1)
            print(f"[engine] vllm serve up in {time.monotonic() - t0:.0f} s", flush=True)
            client = OpenAIBackend(model_path=str(model_dir), served_name="bench",
                                   base_url=f"http://127.0.0.1:{port}/v1", concurrency=args.in_flight)
            list(client.generate(warmup_requests(41)))
            measure(f"upstream design (vllm serve, {args.in_flight} in flight)", per_slice, client,
                    work / "campaign-upstream")
            client.close()
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
            log.close()

    print()
    print("| path | rows | seconds | rows/s | output tokens/s | GPU busy |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, (seconds, rows, tokens, busy) in results.items():
        print(f"| {name} | {rows} | {seconds:.1f} | {rows / seconds:.1f} | {tokens / seconds:.0f} | {busy:.2f} |")
    rate = {name: rows / seconds for name, (seconds, rows, _, _) in results.items()}
    print()
    singles = [single_path_name(r) for r in args.model_runners]
    for line in ratio_lines(rate, [*singles, *(replicated(count) for count in args.replicas)]):
        print(line)
    ours = {name: r for name, r in rate.items() if name in start_s}
    if args.calibration and ours:
        from trace_lib.campaign.estimate import record_calibration

        best = max(ours, key=ours.get)
        one = {"one_engine_rows_per_s": round(rate["streaming"], 2),
               "one_engine_start_s": round(start_s["streaming"], 1)} if "streaming" in ours else {}
        record_calibration(Path(args.calibration), f"generation_{args.shape}", {
            "rows_per_s": round(ours[best], 2), "path": best, "max_tokens": args.max_tokens,
            "start_s": round(start_s[best], 1), **one,
            "measured_by": "benchmarks/campaign_throughput.py " + " ".join(sys.argv[1:]),
        })
        print(f"calibration: generation_{args.shape} = {ours[best]:.1f} rows/s ({best}) written to {args.calibration}")
    print(f"total wall time {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
