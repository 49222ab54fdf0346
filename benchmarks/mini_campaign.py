"""A mini campaign end to end on one GPU (generation + judge + scoring) in three designs, side by side, with one
Qwen3-32B-shaped judge shared by all of them (issue 28 items 3, 5 and 6).

The campaign: ``--benchmarks`` (default 8 suite benchmarks: four without a judge, MMStar's official route whose
extraction fails on random-weight answers so the judge fallback runs, MathVista's direct-score extraction,
CharXiv's direct-score grading and MME-Reasoning's dedicated route) x seed 42 x ``--rows`` rows, their data the
synthetic rows of ``benchmarks/score_speed.py`` with real PNG images (sizes as ``campaign_throughput.py``), written
where the release's provenance puts them; one model at the Qwen2.5-VL-3B release's layer shapes with random
weights (a config-only directory, ``TRACE_VLLM_LOAD_FORMAT=dummy``).

Designs (``--design``, or ``all``):

- ``upstream``: upstream's phased design. Generation: ``vllm serve`` of the model + an HTTP client with 32 requests
  in flight, one slice after another (``trace-repro generate --backend openai --concurrency 32 --schedule
  per-slice``, the client ``campaign_throughput.py`` uses for upstream); the server is stopped, then the judge
  phase: every slice scored on the CPU with a stub judge recording the judge calls its protocol makes, replayed
  against the judge in upstream's client design (``judge_throughput.upstream_design``: one (benchmark, seed) job
  at a time, chat 16 in flight, completions one 64-prompt batch in flight).
- ``phased``: trace-repro in upstream's order: ``trace-repro generate --backend vllm --engines-per-group N
  --score phased`` (every slice generated and the engines closed, then scored by the campaign scorer).
- ``overlapped``: ``trace-repro generate ... --score overlap``: each slice judged and scored the moment its last
  row is stored, while the engines generate the others.

The judge shares the GPU with the generation engines (split memory): it runs at ``--judge-memory`` (0.60) of the
GPU, generation at ``--generation-memory`` (0.26, split among the engines; 0.24 for two: the judge at 0.60 holds
0.67 of an H200 once up and 0.69 after some 2,000 requests, docs/judge.md) in every design. Start it once
(``--design judge``: detached, prints its URL) and pass ``--judge-url URL`` to later invocations, or let a design
run start and stop it. Random judge weights answer noise, so trace-repro's scorer reaches the judge through
``judge_throughput.AnswerRelay``: each request goes to the engine unchanged and its answer is replaced by one the
benchmark's stub judge (``score_speed.SPEED_CASES``) gives for that prompt, so the scorer makes the calls a real
judge would have it make (no ladder climbs on noise); the benchmark is told from the prompt by its longest
common prefix with the prompts a CPU recording pass saw. Upstream's replay goes to the engine directly.

Printed: per design, wall clock per phase (engine start, generation, judge + scoring) and end to end, ratios
against upstream's phased design (end to end and without engine start-up; target >= 2.5 end to end), rows/s of
the CLI's generation (item 5; campaign_throughput.py measured 61.4 rows/s for two engines at this shape) and
``trace-repro plan --estimate``'s prediction for the same mini plan against the measured phased run (item 6,
target within 20%; its engine start taken with the caches the run found: ``--engine-caches``, read from what the
start wrote into vLLM's cache root). Results of each design go to ``<work-dir>/results/<design>.json``, so designs
run in separate invocations are compared as well. ``--dry-run`` runs everything on the CPU (a stub ``vllm`` package for the
engines, loopback stubs for ``vllm serve`` and the judge): no figures, a check of the script.

    python benchmarks/mini_campaign.py --work-dir DIR [--design all|judge|upstream|phased|overlapped]
        [--judge-url URL] [--rows 64] [--benchmarks KEY ...] [--engines-per-group 2] [--judge-memory 0.60]
        [--generation-memory 0.26] [--phase-timeout 420] [--calibration FILE] [--dry-run]
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import judge_throughput as jt  # noqa: E402

from trace_lib.generation.backends.vllm_caches import caches_found, snapshot, vllm_cache_root  # noqa: E402

MODEL = "mini-3b"  # "3b" in the slug: plan --estimate takes the 3B shape's rates
REVISION = "sha256set:" + "0" * 64
SOURCE = f"org/mini-3b@{'0' * 40}"
SEED = 42
DEFAULT_BENCHMARKS = ("realworldqa", "embspatial", "phyx_mini_mc", "countbenchqa", "mmstar", "mathvista",
                      "charxivreason", "mme_reasoning")
DESIGNS = ("upstream", "phased", "overlapped")
UPSTREAM_IN_FLIGHT = 32  # campaign_throughput.py's upstream client (upstream's generation client)
CLI_ROWS_PER_S_REFERENCE = 61.4  # campaign_throughput.py, two engines at the 3B shape (docs/performance.md)


# -- setup -----------------------------------------------------------------------------------------------------

def build_data(release: Any, data_root: Path, keys: list[str], rows: int) -> None:
    """Each benchmark's synthetic rows (score_speed's case) with real PNGs, where the release's provenance puts it."""
    import pandas as pd
    from campaign_throughput import IMAGE_SIZES
    from score_speed import SPEED_CASES

    from trace_lib.data.prepare import load_artifact_sources
    from trace_lib.testing.tiny_bench import tiny_png

    import shutil

    sources = load_artifact_sources(release)
    marker = data_root / "mini_campaign.json"  # what the data was built for: other rows or benchmarks rebuild it
    wanted = {"rows": rows, "benchmarks": keys}
    if marker.is_file() and json.loads(marker.read_text(encoding="utf-8")) == wanted:
        return
    shutil.rmtree(data_root, ignore_errors=True)
    for b, key in enumerate(keys):
        path = sources[key].local_path(data_root)
        case = SPEED_CASES[key](rows)
        for i, row in enumerate(case.rows):
            if "image" in row:
                png = tiny_png(b * 100_000 + i, size=IMAGE_SIZES[b % len(IMAGE_SIZES)])
                row["image"] = base64.b64encode(png).decode("ascii")
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(case.rows).to_csv(path, sep="\t", index=False)
    marker.write_text(json.dumps(wanted), encoding="utf-8")


def model_dir(work: Path, dry_run: bool, shape: str = "3b", suffix: str = "") -> Path:
    """The ``shape``-shaped config-only directory ``qwen25vl-<shape>-shapes<suffix>`` (a placeholder on a dry run:
    the stub engine reads nothing)."""
    path = work / f"qwen25vl-{shape}-shapes{suffix}"
    if not path.exists():
        if dry_run:
            path.mkdir(parents=True)
            (path / "config.json").write_text("{}", encoding="utf-8")
        else:
            from trace_lib.testing.tiny_qwen import QWEN25VL_SHAPES, write_qwen25vl_shaped_config

            write_qwen25vl_shaped_config(path, QWEN25VL_SHAPES[shape])
    return path


def _shared_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (binary search on slices: C-speed compares)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class Answerer:
    """A valid judge answer for any judge prompt of the mini campaign: the benchmark is the one whose recorded
    prompts share the longest prefix with it (a CPU recording pass over score_speed's synthetic responses), the
    answer its stub judge's (score_speed.SPEED_CASES)."""

    def __init__(self, release: Any, work: Path, keys: list[str]) -> None:
        from score_speed import SPEED_CASES

        import shutil

        shutil.rmtree(work / "signatures", ignore_errors=True)  # written afresh by every invocation
        recorded = jt.build_workload(release, work / "signatures" / "campaign", work / "signatures" / "data", keys,
                                     12, [SEED])
        self.recorded = recorded
        representatives: dict[tuple[str, str], str] = {}  # one prompt per benchmark and 200-character opening
        for call in recorded.calls:
            for prompt in call.prompts:
                representatives.setdefault((call.benchmark, prompt[:200]), prompt)
        self.prompts = [(key, prompt) for (key, _), prompt in representatives.items()]
        self.answers: dict[str, Any] = {}
        for key in keys:
            judge = SPEED_CASES[key](1).judge
            self.answers[key] = judge._fn if judge is not None else (lambda p, t, s: "A")

    def benchmark_of(self, prompt: str) -> str | None:
        best, length = None, -1
        for key, seen in self.prompts:
            shared = _shared_prefix(prompt, seen)
            if shared > length:
                best, length = key, shared
        return best

    def answer(self, prompt: str, transport: str = "chat", settings: dict | None = None) -> str:
        key = self.benchmark_of(prompt)
        return "A" if key is None else str(self.answers[key](prompt, transport, settings or {})).strip()

    def for_request_text(self, text: str) -> str:
        """The relay's fallback: ``text`` is a chat prompt, or a rendered completions prompt (un-rendered here)."""
        head, tail = "<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n"
        if head in text and tail in text:
            return self.answer(text.split(head, 1)[1].rsplit(tail, 1)[0], "completions")
        return self.answer(text, "chat")


# -- servers ---------------------------------------------------------------------------------------------------

def start_generation_server(work: Path, model: Path, data_root: Path, args: argparse.Namespace):  # noqa: ANN201
    """``vllm serve`` of the 3B-shaped model (dummy weights, the generation memory share); returns (stop, url)."""
    import socket
    import urllib.request

    if args.dry_run:
        from trace_lib.testing.openai_server import OpenAIStubServer

        stub = OpenAIStubServer(lambda route, body: "The answer is B.", model=MODEL).__enter__()
        return (lambda: stub.__exit__(None, None, None)), stub.url
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--served-model-name", MODEL, "--load-format", "dummy", "--trust-remote-code", "--host", "127.0.0.1",
           "--port", str(port), "--allowed-local-media-path", str(data_root.resolve()), "--limit-mm-per-prompt",
           json.dumps({"image": 24, "video": 3}), "--max-model-len", str(args.max_model_len), "--max-num-seqs",
           "256", "--max-num-batched-tokens", "32768", "--gpu-memory-utilization", str(args.generation_memory),
           *(["--enforce-eager"] if args.enforce_eager else [])]
    log_path = work / "vllm-serve-generation.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed with the server
    env = dict(os.environ, VLLM_WORKER_MULTIPROC_METHOD="spawn", TOKENIZERS_PARALLELISM="false")
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def stop() -> None:
        jt.stop(server)
        log.close()

    deadline = time.monotonic() + args.phase_timeout
    while True:
        if server.poll() is not None or time.monotonic() > deadline:
            stop()
            print(log_path.read_text(errors="replace")[-3000:], file=sys.stderr)
            raise SystemExit(f"vllm serve (generation) did not come up; log {log_path}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return stop, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(1)


def start_judge(work: Path, release: Any, args: argparse.Namespace):  # noqa: ANN201
    """The shared judge: a loopback stub (dry run) or the 32B-shaped ``vllm serve`` at the judge memory share;
    returns (server or stub, url)."""
    if args.dry_run:
        from trace_lib.scoring.judge import JUDGE_SERVED_NAME
        from trace_lib.testing.openai_server import OpenAIStubServer

        stub = OpenAIStubServer(lambda route, body: "noise", model=JUDGE_SERVED_NAME).__enter__()
        return stub, stub.url
    return jt.start_judge(work, release, log_path=work / "vllm-judge.log", eager=args.enforce_eager,
                          timeout_s=args.phase_timeout, gpu_memory_utilization=args.judge_memory)


# -- measuring -------------------------------------------------------------------------------------------------

def generate_argv(release: Any, model: Path, campaign: Path, data_root: Path, keys: list[str]) -> list[str]:
    """``trace-repro generate`` of the mini plan (``keys`` x seed 42, the mini model) up to its backend flags."""
    argv = [sys.executable, "-m", "trace_lib", "generate", "--trace-root", str(release.path),
            "--model", MODEL, str(model), REVISION, SOURCE, "Mini 3B", "--seeds", str(SEED),
            "--campaign-root", str(campaign), "--data-root", str(data_root), "--unprepared-data",
            "--model-verify", "none", "--no-progress"]
    for key in keys:
        argv += ["--benchmark", key]
    return argv


#: What each ``generate`` worker prints once its engine is up (the drift line: random weights never match).
ENGINE_UP = "engine differs from the paper's"


class TimedRun:
    """``argv`` running in its own session, its output copied to ``log`` with each line prefixed by its second since
    the start; ``ups`` fills, as they come, with the seconds at which lines containing :data:`ENGINE_UP` came."""

    def __init__(self, argv: list[str], env: dict, log: Path) -> None:
        print("[run] " + " ".join(argv), flush=True)
        self.argv, self.log, self.ups = argv, log, []
        self.t0 = time.monotonic()
        self._handle = open(log, "w")  # noqa: SIM115 (closed by wait)
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                     start_new_session=True, text=True, errors="replace", bufsize=1)
        self._reader = threading.Thread(target=self._copy, daemon=True)
        self._reader.start()

    def _copy(self) -> None:
        for line in self.proc.stdout:
            at = time.monotonic() - self.t0
            if ENGINE_UP in line:
                self.ups.append(at)
            self._handle.write(f"{at:8.2f} {line}")
        self._handle.flush()

    def stop(self) -> None:
        """Stop the run's process group (SIGTERM, then SIGKILL), if it still runs."""
        jt.stop(self.proc)

    def wait(self, timeout_s: float) -> tuple[float, list[float], int]:
        """Wait at most ``timeout_s`` (from the start); returns the wall seconds, ``ups`` and the exit code (1: it
        ran to the end, some slice failed). Stopped here (SIGTERM, Ctrl-C), it stops the run's process group.

        Raises:
            SystemExit: it ran out of time or exited otherwise than 0 or 1 (the log's tail printed).
        """
        try:
            code = self.proc.wait(timeout=max(timeout_s - (time.monotonic() - self.t0), 0.0))
        except subprocess.TimeoutExpired:
            self.stop()
            code = None
        except BaseException:  # this script stopped: the run's engines must not outlive it
            self.stop()
            raise
        finally:
            seconds = time.monotonic() - self.t0
            self._reader.join(10)
            self._handle.close()
        tail = "".join(self.log.read_text(errors="replace").splitlines(keepends=True)[-15:])
        if code not in (0, 1):
            print(tail, file=sys.stderr)
            raise SystemExit(f"{self.argv[3]} {'timed out' if code is None else f'exited {code}'} after "
                             f"{seconds:.0f} s (log {self.log})")
        print(tail, end="", flush=True)
        if code == 1:
            print(f"[run] {self.argv[3]} exited 1: some slice failed (log {self.log})", flush=True)
        return seconds, self.ups, code


def run_timed(argv: list[str], env: dict, log: Path, timeout_s: float) -> tuple[float, list[float], int]:
    """Run ``argv`` to its end, at most ``timeout_s`` (:class:`TimedRun`)."""
    return TimedRun(argv, env, log).wait(timeout_s)


def generated(campaign: Path) -> dict[str, float]:
    """Rows, output tokens, first header time and last write time of the campaign's response files."""
    from trace_lib.campaign.estimate import campaign_started_at
    from trace_lib.generation.store import load_responses

    paths = sorted((campaign / "generation").rglob("*.jsonl"))
    rows = tokens = 0
    for path in paths:
        stored = load_responses(path)
        rows += len(stored)
        tokens += sum(r.completion_tokens or 0 for r in stored)
    return {"rows": rows, "output_tokens": tokens, "first_header": campaign_started_at(campaign) or 0.0,
            "last_write": max((p.stat().st_mtime for p in paths), default=0.0)}


def _scored(campaign: Path) -> int:
    return len(list((campaign / "scoring").rglob("scores.json")))


def _fresh(campaign: Path) -> Path:
    """``campaign`` emptied: a design measured again generates everything again (nothing resumed)."""
    import shutil

    shutil.rmtree(campaign, ignore_errors=True)
    return campaign


def design_upstream(ctx: dict) -> dict:
    """Upstream's phased design (module docstring)."""
    from trace_lib.benchmarks.registry import get_protocol
    from trace_lib.data.prepare import load_artifact_sources
    from trace_lib.generation.store import load_responses, response_path
    from trace_lib.scoring.score import responses_for_rows

    args, release, keys = ctx["args"], ctx["release"], ctx["keys"]
    campaign = _fresh(ctx["work"] / "campaign-upstream")
    t0 = time.time()
    stop, url = start_generation_server(ctx["work"], ctx["model"], ctx["data_root"], args)
    try:
        up = time.time()
        argv = [*generate_argv(release, ctx["model"], campaign, ctx["data_root"], keys), "--backend", "openai",
                "--base-url", url, "--concurrency", str(UPSTREAM_IN_FLIGHT), "--schedule", "per-slice"]
        code = run_timed(argv, ctx["env"], ctx["work"] / "generate-upstream.log", args.phase_timeout)[2]
    finally:
        stop()
    gen_end = time.time()
    from trace_lib.errors import TraceReproError

    sources = load_artifact_sources(release)
    work = jt.Workload()
    failed = []
    for key in keys:  # the CPU part of upstream's scoring: each slice through its protocol, judge calls recorded
        protocol = get_protocol(key)
        try:
            rows = protocol.load(sources[key].local_path(ctx["data_root"]))
            path = response_path(campaign, model=MODEL, seed=SEED, benchmark=key)
            texts = responses_for_rows(rows, load_responses(path), source=str(path))
            jt.record_calls(work, protocol, key, SEED, rows, texts, ctx["answerer"].answer)
        except TraceReproError as exc:
            failed.append(key)
            print(f"[upstream] {key} not scored: {exc.render()}", flush=True)
    recorded = time.time()
    done: list[int] = []
    replay = threading.Thread(target=lambda: done.append(jt.upstream_design(ctx["judge_url"], work, release,
                                                                             answer_tokens=args.judge_answer_tokens)),
                              daemon=True)
    replay.start()
    replay.join(args.phase_timeout)
    end = time.time()
    stats = generated(campaign)
    return {"design": "upstream", "e2e_s": end - t0, "engine_start_s": up - t0, "generation_s": gen_end - up,
            "judge_scoring_s": end - gen_end, "scoring_cpu_s": recorded - gen_end, "rows": stats["rows"],
            "output_tokens": stats["output_tokens"], "judge_requests": work.prompts,
            "judge_answer_tokens": args.judge_answer_tokens,
            "complete": bool(done) and not failed and code == 0,
            "note": "; ".join(filter(None, ["" if done else "judge replay stopped at --phase-timeout",
                                            f"not scored: {' '.join(failed)}" if failed else "",
                                            "" if code == 0 else "some slice failed to generate"]))}


def design_trace_repro(ctx: dict, order: str) -> dict:
    """trace-repro's design, phased or overlapped: ``trace-repro generate --score ORDER`` (module docstring)."""
    args, release = ctx["args"], ctx["release"]
    name = "phased" if order == "phased" else "overlapped"
    campaign = _fresh(ctx["work"] / f"campaign-{name}")
    relay = jt.AnswerRelay(ctx["judge_url"], {}, fallback=ctx["answerer"].for_request_text,
                           answer_tokens=args.judge_answer_tokens)
    argv = [*generate_argv(release, ctx["model"], campaign, ctx["data_root"], ctx["keys"]), "--backend", "vllm",
            "--engines-per-group", str(args.engines_per_group), "--gpu-memory-utilization",
            str(args.generation_memory), "--max-model-len", str(args.max_model_len), "--score", order,
            "--score-workers", str(args.score_workers), "--judge-url", relay.url,
            *(["--enforce-eager"] if args.enforce_eager else [])]
    env = dict(ctx["env"], TRACE_VLLM_LOAD_FORMAT="dummy")
    caches = vllm_cache_root(env)
    before = snapshot(caches)
    t0 = time.time()
    try:
        seconds, ups, code = run_timed(argv, env, ctx["work"] / f"generate-{name}.log", args.phase_timeout)
    finally:
        relay.close()
    end = t0 + seconds
    stats = generated(campaign)
    # the first engine up (its worker's drift line; else its first store opened), generation over at the last write
    start = ups[0] if ups else max(stats["first_header"] - t0, 0.0)
    gen_end = stats["last_write"] or end  # nothing stored (the engine failed): the run's end
    return {"design": name, "e2e_s": seconds, "engine_start_s": start, "all_engines_up_s": ups[-1] if ups else None,
            "generation_s": gen_end - t0 - start,
            "judge_scoring_s": end - gen_end, "rows": stats["rows"], "output_tokens": stats["output_tokens"],
            "judge_requests": relay.prompts, "scored": _scored(campaign),
            "judge_answer_tokens": args.judge_answer_tokens, "engine_caches": caches_found(before, snapshot(caches)),
            "complete": code == 0 and _scored(campaign) == len(ctx["keys"]),
            "note": "" if code == 0 else f"some slice failed (log generate-{name}.log)"}


def estimate(ctx: dict, output_tokens: int | None, rows: int, keys: list[str],
             engine_caches: str | None = None) -> dict | None:
    """``trace-repro plan --estimate --json`` of the same mini plan (``keys`` x ``rows``) on one GPU, its engine
    start taken with the caches the measured run found."""
    args = ctx["args"]
    argv = [sys.executable, "-m", "trace_lib", "plan", "--estimate", "--json", "--gpus", "1", "--trace-root",
            str(ctx["release"].path), "--model", MODEL, str(ctx["model"]), REVISION, SOURCE, "Mini 3B",
            "--seeds", str(SEED), "--rows", str(rows), *[a for k in keys for a in ("--benchmark", k)],
            "--engines-per-group", str(args.engines_per_group),
            *(["--calibration", args.calibration] if args.calibration else []),
            *(["--engine-caches", engine_caches] if engine_caches else []),
            *(["--output-tokens", str(output_tokens)] if output_tokens else [])]
    done = subprocess.run(argv, capture_output=True, text=True, env=ctx["env"], cwd=REPO, timeout=120)
    if done.returncode != 0:
        print(f"[estimate] plan --estimate exited {done.returncode}: {done.stderr.strip()[-300:]}", flush=True)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def item6(est: dict, phased: dict) -> dict[str, float]:
    """Item 6's comparisons of ``phased`` (a measured run) with ``est`` (``plan --estimate --json`` of its plan):
    the judge is up before the design starts, so its start-up is left out; each ratio is measured/estimated, for
    the judge requests the protocols imply and for those the run made, with and without the engine start."""
    by = {p["name"]: p for p in est["phases"]}
    judge = by["judge"]
    estimated = est["total_s"] - judge["start_s"]
    made = phased["judge_requests"] / judge["rate_per_s"] if judge["rate_per_s"] else 0.0
    with_requests = estimated - (judge["seconds"] - judge["start_s"]) + made
    start = by["generation"]["start_s"]
    work = phased["e2e_s"] - phased["engine_start_s"]
    return {"estimated_s": estimated, "ratio": phased["e2e_s"] / estimated,
            "with_requests_s": with_requests, "with_requests_ratio": phased["e2e_s"] / with_requests,
            "estimated_start_s": start, "work_ratio": work / (estimated - start),
            "work_with_requests_ratio": work / (with_requests - start)}


def report(ctx: dict) -> None:
    """The side-by-side table of every design measured under this work dir, ratios, item 5 and item 6."""
    results = {}
    for name in DESIGNS:
        path = ctx["work"] / "results" / f"{name}.json"
        if path.is_file():
            results[name] = json.loads(path.read_text(encoding="utf-8"))
    if not results:
        return
    base = results.get("upstream")
    print()
    print("| design | engine start s | generation s | judge + scoring s | end to end s | without start s | rows "
          "| judge requests | e2e vs upstream | without start vs upstream |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, r in results.items():
        work_s = r["e2e_s"] - r["engine_start_s"]
        ratio = f"{base['e2e_s'] / r['e2e_s']:.2f}" if base else "-"
        ratio_work = f"{(base['e2e_s'] - base['engine_start_s']) / work_s:.2f}" if base and work_s > 0 else "-"
        flag = "" if r.get("complete", True) else f" (incomplete: {r.get('note') or 'see its log'})"
        print(f"| {name}{flag} | {r['engine_start_s']:.0f} | {r['generation_s']:.1f} | {r['judge_scoring_s']:.1f} | "
              f"{r['e2e_s']:.1f} | {work_s:.1f} | {r['rows']} | {r['judge_requests']} | {ratio} | {ratio_work} |")
    print("(target: overlapped end to end >= 2.5x upstream's phased design)")
    sizes = {(r.get("rows_per_slice"), tuple(r.get("benchmarks") or ()), r.get("judge_answer_tokens"))
             for r in results.values()}
    if len(sizes) > 1:
        print("warning: these designs ran on different campaigns (--rows, --benchmarks or --judge-answer-tokens "
              "differ): not comparable")
    incomplete = [name for name, r in results.items() if not r.get("complete", True)]
    if incomplete:
        print(f"not compared (item 5, item 6, calibration): {' '.join(incomplete)} did not complete")
    results = {name: r for name, r in results.items() if name not in incomplete}
    for name in ("phased", "overlapped"):
        r = results.get(name)
        if r and r["generation_s"] > 0:
            rate = r["rows"] / r["generation_s"]
            later = (r.get("all_engines_up_s") or r["engine_start_s"]) - r["engine_start_s"]
            print(f"item 5: trace-repro generate --engines-per-group {ctx['args'].engines_per_group} ({name}): "
                  f"{rate:.1f} rows/s from the first engine up to the last row stored (the last engine came "
                  f"{later:.0f} s after the first; {r['output_tokens'] / max(r['rows'], 1):.0f} output tokens/row) "
                  f"vs campaign_throughput.py's {CLI_ROWS_PER_S_REFERENCE} rows/s at 256 tokens/row")
    phased = results.get("phased")
    if phased:
        mean_tokens = round(phased["output_tokens"] / max(phased["rows"], 1)) or None
        est = estimate(ctx, mean_tokens, phased.get("rows_per_slice", ctx["args"].rows),
                       phased.get("benchmarks", ctx["keys"]), phased.get("engine_caches"))
        if est is not None:
            item = item6(est, phased)
            by = {p["name"]: p for p in est["phases"]}
            judge = by["judge"]
            print(f"item 6: plan --estimate (rates: {est['rates_source']}; --output-tokens {mean_tokens}) predicts "
                  f"{item['estimated_s']:.0f} s without the judge's start-up (generation "
                  f"{by['generation']['seconds']:.0f} s, judge {judge['seconds'] - judge['start_s']:.0f} s for "
                  f"{judge['work']:.0f} requests, scoring {by['scoring']['seconds']:.1f} s); measured phased "
                  f"{phased['e2e_s']:.0f} s: measured/estimated = {item['ratio']:.2f} (target 0.8-1.2)")
            print(f"item 6: with the {phased['judge_requests']} judge requests actually made (random-weight answers "
                  f"fail rule extraction far more often than a real model's): estimated {item['with_requests_s']:.0f} "
                  f"s, measured/estimated = {item['with_requests_ratio']:.2f}")
            print(f"item 6: without engine start (estimated {item['estimated_start_s']:.0f} s, measured "
                  f"{phased['engine_start_s']:.0f} s, vLLM's caches {phased.get('engine_caches', 'unknown')}): "
                  f"{item['work_ratio']:.2f}, with the requests made {item['work_with_requests_ratio']:.2f}")
    if ctx["args"].calibration and phased and not phased.get("dry_run") and phased["generation_s"] > 0:
        from trace_lib.campaign.estimate import load_rates, record_calibration

        stamp = {"measured_by": "benchmarks/mini_campaign.py " + " ".join(sys.argv[1:]),
                 "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
        extra = load_rates(Path(ctx["args"].calibration)).start_extra(phased.get("engine_caches", "warm"))
        sections = calibration_sections(results, phased, ctx["args"].engines_per_group, stamp, start_extra_s=extra)
        for name, values in sections.items():
            record_calibration(Path(ctx["args"].calibration), name, values)
        print(f"calibration: sections {', '.join(sections)} written to {ctx['args'].calibration}")


def _start_detached_judge(work: Path, release: Any, args: argparse.Namespace) -> dict:
    """Start the shared judge, leave it running (its own session) and record it in ``<work>/judge.json``."""
    t0 = time.monotonic()
    server, url = start_judge(work, release, args)
    started = {"url": url, "pid": server.pid}
    (work / "judge.json").write_text(json.dumps(started), encoding="utf-8")
    print(f"[judge] up in {time.monotonic() - t0:.0f} s and detached (pid {server.pid}; stop with --design "
          f"stop-judge); --judge-url {url} (or --judge-url auto)", flush=True)
    return started


def _started_judge(work: Path) -> dict | None:
    """The judge ``--design judge`` started under ``work`` when it still answers, else None."""
    from trace_lib.errors import JudgeError
    from trace_lib.scoring.judge import JUDGE_SERVED_NAME
    from trace_lib.scoring.judge_http import probe

    path = work / "judge.json"
    if not path.is_file():
        return None
    started = json.loads(path.read_text(encoding="utf-8"))
    try:
        probe(started["url"], JUDGE_SERVED_NAME, timeout_s=5.0)
    except JudgeError:
        return None
    return started


def calibration_sections(results: dict, phased: dict, engines_per_group: str | int, stamp: dict, *,
                         start_extra_s: float = 0.0) -> dict[str, dict]:
    """The calibration sections a measured run writes for ``plan --estimate``: ``mini_campaign`` (every design's
    figures), ``generation_3b`` (the CLI's generation rate and start in the phased design, the judge idle
    meanwhile; the start as a warm one: less ``start_extra_s``, what the caches it found added) and, when judge
    answers were capped (``--judge-answer-tokens``: a real judge's length), ``judge`` (the phased design's requests over its judge + scoring seconds). Uncapped, a random-weight judge decodes every
    request to its budget (4.9 requests/s at 384 and 1,024 rows, docs/performance.md run 5): not a real judge's
    rate, so not recorded."""
    one = str(engines_per_group) == "1"
    sections = {
        "mini_campaign": {"results": results, **stamp},
        "generation_3b": {
            ("one_engine_rows_per_s" if one else "rows_per_s"): round(phased["rows"] / phased["generation_s"], 2),
            "max_tokens": max(1, round(phased["output_tokens"] / max(phased["rows"], 1))),
            ("one_engine_start_s" if one else "start_s"):
                round(max((phased.get("all_engines_up_s") or phased["engine_start_s"]) - start_extra_s, 1.0), 1),
            "measured_start_s": round(phased.get("all_engines_up_s") or phased["engine_start_s"], 1),
            "start_caches": phased.get("engine_caches", "unknown"),
            "path": f"trace-repro generate --engines-per-group {engines_per_group} (mini campaign)",
            **stamp},
    }
    if phased.get("judge_answer_tokens") and phased.get("judge_requests") and phased["judge_scoring_s"] > 0:
        sections["judge"] = {
            "requests_per_s": round(phased["judge_requests"] / phased["judge_scoring_s"], 2),
            "answer_tokens": phased["judge_answer_tokens"],
            "path": "trace-repro generate --score phased (mini campaign; the judge shares the GPU, answers capped)",
            **stamp}
    return sections


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # through the finally blocks: servers are stopped
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--design", choices=("all", "judge", "stop-judge", "report", *DESIGNS), default="all",
                        help="judge: start the shared judge detached (or find it running), print its URL and exit; "
                             "stop-judge: stop it; report: print the table of the designs measured so far")
    parser.add_argument("--judge-url", default=None,
                        help="an already running judge; 'auto': the one --design judge started (<work-dir>/judge.json)")
    parser.add_argument("--rows", type=int, default=64, help="rows per benchmark (one seed)")
    parser.add_argument("--benchmarks", nargs="+", default=list(DEFAULT_BENCHMARKS))
    parser.add_argument("--engines-per-group", type=int, default=2, help="trace-repro designs (item 5)")
    parser.add_argument("--score-workers", type=int, default=8, help="trace-repro designs: scoring threads")
    parser.add_argument("--judge-memory", type=float, default=0.60, help="the judge's share of the GPU's memory")
    parser.add_argument("--generation-memory", type=float, default=0.26,
                        help="generation's share of the GPU's memory (split among the engines; 0.24 for two)")
    parser.add_argument("--max-model-len", type=int, default=32768, help="generation engines (upstream's 32768)")
    parser.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs (faster start; not upstream's)")
    parser.add_argument("--judge-answer-tokens", type=int, default=None, metavar="N",
                        help="cap every judge request's max_tokens at N in every design (a real judge's short "
                             "answer; the random-weight judge otherwise decodes each request to its budget)")
    parser.add_argument("--phase-timeout", type=float, default=420.0,
                        help="seconds any one phase (server start, generate run, judge replay) may take")
    parser.add_argument("--calibration", default=None, metavar="FILE",
                        help="plan --estimate reads its rates here; the results are recorded in it (mini_campaign)")
    parser.add_argument("--dry-run", action="store_true", help="CPU only: stub engines and judge (no figures)")
    parser.add_argument("--trace-root", default=None)
    args = parser.parse_args(argv)
    from trace_lib.release.locate import locate_release

    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    release = locate_release(args.trace_root)
    work = Path(args.work_dir).resolve()
    (work / "results").mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    started = _started_judge(work)
    if args.design in ("judge", "stop-judge"):
        if args.dry_run:
            raise SystemExit("--design judge starts the GPU judge; a dry run starts its stub judge per invocation")
        if args.design == "stop-judge":
            if started:
                os.killpg(started["pid"], signal.SIGTERM)
                (work / "judge.json").unlink()
            print(f"[judge] {'stopped pid ' + str(started['pid']) if started else 'none running'}", flush=True)
            return 0
        if started:
            print(f"[judge] already up (pid {started['pid']}); --judge-url {started['url']}", flush=True)
            return 0
        _start_detached_judge(work, release, args)
        return 0
    if args.judge_url == "auto" and args.dry_run:
        args.judge_url = None  # a dry run's stub judge lives as long as the invocation
    elif args.judge_url == "auto":
        if not started:  # the machine was handed back since: start it again, for this call and the next ones
            print(f"[judge] --judge-url auto: none running under {work}; starting one", flush=True)
            started = _start_detached_judge(work, release, args)
        args.judge_url = started["url"]
    keys = list(args.benchmarks)
    data_root = work / "data"
    build_data(release, data_root, keys, args.rows)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    if args.dry_run:  # the engines of `generate --backend vllm` are stub engines
        from trace_lib.testing.stub_vllm import write_stub_vllm_package

        write_stub_vllm_package(work / "stub-vllm")
        env["PYTHONPATH"] = os.pathsep.join([str(work / "stub-vllm"), env["PYTHONPATH"]])
        env["CUDA_VISIBLE_DEVICES"] = "0"
    ctx = {"args": args, "release": release, "work": work, "keys": keys, "data_root": data_root, "env": env,
           "model": model_dir(work, args.dry_run)}
    if args.design == "report":
        report(ctx)
        return 0
    if not args.dry_run:  # generate splits its share among the engines (cli/generate.py)
        jt.check_fits("generation", ctx["model"], args.generation_memory / args.engines_per_group, args.max_model_len)
    ctx["answerer"] = Answerer(release, work, keys)
    print(f"[setup] {len(keys)} benchmarks x 1 seed x {args.rows} rows under {work} in "
          f"{time.monotonic() - t0:.0f} s", flush=True)
    judge = None
    try:
        if args.judge_url:
            ctx["judge_url"] = args.judge_url.rstrip("/")
        else:
            t = time.monotonic()
            judge, ctx["judge_url"] = start_judge(work, release, args)
            print(f"[judge] up in {time.monotonic() - t:.0f} s at {ctx['judge_url']}", flush=True)
        jt.saturate(ctx["judge_url"], jt.Workload(ctx["answerer"].recorded.calls[:2]), 8)  # warm-up, not measured
        designs = DESIGNS if args.design == "all" else (args.design,)
        for name in designs:
            print(f"[{name}] starting", flush=True)
            jt.reset_prefix_cache(ctx["judge_url"])  # no design profits from another's judge prompts
            try:
                result = design_upstream(ctx) if name == "upstream" else design_trace_repro(
                    ctx, "phased" if name == "phased" else "overlap")
            except (SystemExit, Exception) as exc:  # noqa: BLE001 - one design failing leaves the others to run
                import traceback

                if not isinstance(exc, SystemExit):
                    traceback.print_exc()
                print(f"[{name}] failed: {exc}", flush=True)
                continue
            result.update(dry_run=args.dry_run, rows_per_slice=args.rows, benchmarks=keys)
            (work / "results" / f"{name}.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
            print(f"[{name}] end to end {result['e2e_s']:.1f} s (engine start {result['engine_start_s']:.0f} s, "
                  f"generation {result['generation_s']:.1f} s, judge + scoring {result['judge_scoring_s']:.1f} s; "
                  f"{result['rows']} rows, {result['judge_requests']} judge requests)", flush=True)
    finally:
        if judge is not None:
            if hasattr(judge, "__exit__"):
                judge.__exit__(None, None, None)
            else:
                jt.stop(judge)
    report(ctx)
    print(f"total wall time {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
