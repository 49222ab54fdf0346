"""Judge throughput on one GPU: the engine's saturation, trace-repro's campaign scorer and upstream's client design
on the same judge prompts, side by side, against one started Qwen3-32B-shaped ``vllm serve``.

The judge is ``vllm serve`` with the command :func:`trace_lib.scoring.judge_pool.serve_command` builds (upstream's
flags: ``--max-num-seqs 128``, ``--max-num-batched-tokens 32768``, ``--max-model-len 8192``, memory 0.90, the
``qwen3`` reasoning parser and the no-think chat template) plus ``--load-format dummy``, on a directory with
Qwen3-32B's layer shapes and the tiny test tokenizer
(:func:`trace_lib.testing.tiny_qwen3.write_qwen3_judge_shaped_config`).

The prompts are the suite's: every benchmark whose protocol calls the judge (the direct-score routes,
MME-Reasoning and the official routes' fallbacks) gets ``--rows`` synthetic rows and responses per seed
(``benchmarks/score_speed.py``'s ``SPEED_CASES``), written as a campaign (data TSVs where the release's provenance
puts them, response files in the store format). Scoring it once on the CPU with each case's stub judge records
every judge call the protocols make (prompt, route, budget, round) and a valid answer for each prompt.

Paths (each after a prefix-cache reset, its counters read from vLLM's ``/metrics``):

- (a) saturation: every recorded prompt as its own request, ``--saturation-in-flight`` (256) at once, straight
  to the engine;
- (b) ``trace-repro score --campaign-root ... --judge-url ...`` in a subprocess (the real CampaignScorer and judge
  client), with prefix ordering on and off (``TRACE_JUDGE_PREFIX_ORDER``);
- (c) upstream's client design: one job per (benchmark, seed) at a time on one endpoint, official jobs first, then
  direct, then MME-Reasoning (``--official-workers/--direct-workers/--mme-workers`` capped by one endpoint); a
  chat job keeps 16 requests in flight (VLMEvalKit ``nproc``), a completions job one batch of 64 prompts /
  100,000 characters (``--judge-api-batches-per-endpoint 1``), its rounds one after another. Job start-up
  (upstream starts a process per job) is not counted, which favours upstream.

Dummy weights answer noise, so (b) reaches the engine through a loopback relay that forwards each request
unchanged and replaces the answer texts by the recorded valid answers (the engine does the same work; the scorer
sees the answers a real judge could give and makes the recorded calls, no ladder retries). (a) and (c) talk to
the engine directly. Every request decodes to its budget or an end token, so output lengths are the budgets'
(pessimistic for a real judge, the same for every path).

Prints requests/s, prompt and output tokens/s and the prefix-cache hit rate per path, the ratios (b)/(a) (target
>= 0.9) and (b)/(c) (target >= 2), and writes the judge rate to ``--calibration`` for ``trace-repro plan
--estimate`` (the best (b), else (a); ``start_s`` when it started the judge). The engine's running/waiting
requests are sampled from ``/metrics`` every ``--sample-s`` (printed every 20 s, their means per path in the
table). ``--stub`` runs every path against a loopback simulated engine (128 slots, 20 ms a sequence) instead of
vLLM: a CPU dry run, no figures.

The judge can be started once and reused across calls: ``--serve-only [--port P] [--pid-file F]`` starts it (its
own session), waits until it serves and exits leaving it running; later runs pass ``--judge-url
http://127.0.0.1:P/v1`` (nothing started or stopped). Each path can be skipped (``--skip-saturation``,
``--skip-scorer``, ``--skip-unordered``, ``--skip-upstream``); ``--upstream-budget-s S`` bounds (c), whose rate is
then answered / seconds (marked partial). ``--rows 200`` with fewer ``--benchmarks``/``--seeds`` measures (b) on
full-size slices, a real campaign's regime.

    python benchmarks/judge_throughput.py [--rows 24] [--seeds 42 43 44] [--benchmarks KEY ...] [--stub]
        [--judge-url URL | --serve-only [--port P] [--pid-file F]] [--calibration FILE] [--work-dir DIR]
        [--skip-saturation] [--skip-scorer] [--skip-unordered] [--skip-upstream] [--upstream-budget-s S]
        [--score-jobs N] [--score-max-jobs M] [--judge-window N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

MODEL = "qwen2.5-vl-3b-base"  # a release model (score --campaign-root names only those); verdicts are not read
UPSTREAM_CHAT_IN_FLIGHT = 16  # run_trace_eval.sh --eval-nproc 16 (VLMEvalKit api_nproc)
UPSTREAM_BATCH = 64  # --judge-api-batch-size 64
UPSTREAM_BATCH_CHARS = 100_000  # the score queue's --judge-api-max-batch-chars default


@dataclass(frozen=True)
class Call:
    """One judge call a protocol made: its route, prompts, settings and the answers it was given."""

    benchmark: str
    seed: int
    route: str  # "chat" or "completions"
    prompts: tuple[str, ...]
    settings: dict


@dataclass
class Workload:
    calls: list[Call] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)  # request text (rendered for completions) -> answer
    keys: list[str] = field(default_factory=list)  # the benchmarks in it

    @property
    def prompts(self) -> int:
        return sum(len(c.prompts) for c in self.calls)


def _rendered(call: Call, prompt: str) -> str:
    from trace_lib.scoring.judge import render_qwen3_no_think

    return render_qwen3_no_think(prompt, system=call.settings.get("system")) if call.route == "completions" else prompt


def critical_path(work: Workload) -> tuple[int, int, str]:
    """(the largest token budget of one request, the largest sum of budgets along one slice's calls, that
    slice): a slice's judge calls depend on each other (a round's replies decide the next round), so when the
    workload is small the scorer (b) cannot finish before its longest chain decodes, while (a) sends every prompt
    at once and finishes with its longest single request."""
    chains: dict[tuple[str, int], int] = {}
    for call in work.calls:
        key = (call.benchmark, call.seed)
        chains[key] = chains.get(key, 0) + int(call.settings["max_tokens"])
    single = max((int(c.settings["max_tokens"]) for c in work.calls), default=0)
    (benchmark, seed), chain = max(chains.items(), key=lambda kv: kv[1], default=(("", 0), 0))
    return single, chain, f"{benchmark} seed {seed}"


def judge_routes(benchmarks: list[str] | None) -> list[str]:
    """Suite benchmarks whose protocol calls the judge (and that have a synthetic case)."""
    from score_speed import SPEED_CASES

    from trace_lib.benchmarks.registry import get_protocol

    keys = [k for k in SPEED_CASES if get_protocol(k).judge != "none"]
    if benchmarks:
        unknown = sorted(set(benchmarks) - set(keys))
        if unknown:
            raise SystemExit(f"not a judge-route benchmark with a synthetic case: {', '.join(unknown)}")
        keys = [k for k in keys if k in benchmarks]
    return keys


def build_workload(release: Any, campaign: Path, data_root: Path, keys: list[str], rows: int,
                   seeds: list[int]) -> Workload:
    """Write the campaign (data + responses per seed; ``campaign`` and ``data_root`` are emptied first) and
    record the judge calls scoring it makes."""
    import pandas as pd
    from score_speed import SPEED_CASES

    from trace_lib.benchmarks.registry import get_protocol
    from trace_lib.data.prepare import load_artifact_sources
    from trace_lib.errors import TraceReproError
    from trace_lib.generation.store import response_path
    from trace_lib.testing.synthetic_campaign import write_response_file

    sources = load_artifact_sources(release)
    for stale in (campaign, data_root):  # a work dir reused from an earlier run: this run's files only
        if stale.exists():
            shutil.rmtree(stale)
    work = Workload()
    for key in keys:
        protocol = get_protocol(key)
        case = SPEED_CASES[key](rows)
        path = sources[key].local_path(data_root)
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(case.rows).to_csv(path, sep="\t", index=False)
        loaded = protocol.load(path)
        answer = case.judge._fn if case.judge is not None else (lambda p, t, s: "A")
        for seed in seeds:
            shift = seeds.index(seed) * 7  # other responses per seed, the same questions
            texts = [case.responses[(i + shift) % len(case.responses)] for i in range(len(loaded))]
            write_response_file(response_path(campaign, model=MODEL, seed=seed, benchmark=key), model=MODEL,
                                seed=seed, benchmark=key, rows=loaded, texts=texts)

            try:
                record_calls(work, protocol, key, seed, loaded, texts, answer)
            except TraceReproError as exc:  # e.g. WeMath on too few rows: leave the benchmark out
                print(f"[setup] {key} left out: {exc.render()}", flush=True)
                work.calls = [c for c in work.calls if c.benchmark != key]
                for other in seeds:
                    response_path(campaign, model=MODEL, seed=other, benchmark=key).unlink(missing_ok=True)
                break
        else:
            work.keys.append(key)
    return work


def record_calls(work: Workload, protocol: Any, key: str, seed: int, rows: list, texts: list[str],
                 answer: Callable[[str, str, dict], str]) -> Any:
    """Score ``texts`` with a stub judge answering ``answer(prompt, transport, settings)``, appending every judge
    call the protocol makes to ``work`` (and each prompt's answer); returns the protocol's score.

    Raises:
        TraceReproError: the protocol cannot score these rows.
    """
    from trace_lib.benchmarks.protocol import ScoringContext
    from trace_lib.scoring.judge import MIN_COMPLETION_TOKENS, CallableJudge

    class Recorder(CallableJudge):
        def _ask(self, prompts, transport, settings):  # noqa: ANN001, ANN202
            settings = dict(settings)
            if transport == "completions":
                settings["max_tokens"] = max(MIN_COMPLETION_TOKENS, settings["max_tokens"])
            call = Call(key, seed, transport, tuple(prompts), settings)
            work.calls.append(call)
            for prompt in prompts:
                work.answers.setdefault(_rendered(call, prompt), answer(prompt, transport, settings).strip())
            return super()._ask(prompts, transport, settings)

    return protocol.score(rows, texts, ScoringContext(seed=seed, judge=Recorder(answer)))


# -- the engine ------------------------------------------------------------------------------------------------

def check_fits(what: str, model: Path, share: float, kv_tokens: int) -> None:
    """Refuse, in one line and before anything starts, a ``share`` of this GPU that cannot hold one engine of
    ``model`` with ``kv_tokens`` tokens of KV cache (``trace_lib.campaign.engines.share_shortfall``): vLLM would
    say so only after minutes of start-up. Nothing is checked where ``nvidia-smi`` lists no GPU."""
    from trace_lib.campaign.engines import model_size, share_shortfall
    from trace_lib.reports.status import query_gpus

    totals = [g["memory_total_mib"] * 2**20 for g in query_gpus()]
    if totals and (short := share_shortfall(model_size(model), kv_tokens, share, min(totals))):
        raise SystemExit(f"{what}: {short}: give it a larger share, or run on a larger GPU")


def judge_model(work: Path) -> Path:
    """The 32B-shaped judge's config-only directory under ``work`` (written once)."""
    from trace_lib.testing.tiny_qwen3 import write_qwen3_judge_shaped_config

    model = work / "qwen3-32b-shapes"
    if not model.exists():
        write_qwen3_judge_shaped_config(model)
    return model


def start_judge(work: Path, release: Any, *, log_path: Path | None = None, eager: bool = False,
                timeout_s: float = 540.0, gpu_memory_utilization: float | None = None,
                port: int | None = None) -> tuple[subprocess.Popen, str]:
    """Start the 32B-shaped ``vllm serve`` (upstream's command + ``--load-format dummy``; ``gpu_memory_utilization``
    instead of upstream's 0.90 when given; ``port``: that port, else the first free one from 18100); returns it and
    its URL."""
    from trace_lib.scoring.judge import JUDGE_SERVED_NAME
    from trace_lib.scoring.judge_http import probe
    from trace_lib.scoring.judge_pool import JUDGE_SERVE_FLAGS, PoolSpec, port_taken, release_chat_template, \
        serve_command, serve_environment
    from trace_lib.testing.tiny_qwen3 import QWEN3_NO_THINK_TEMPLATE
    from trace_lib.errors import InputError, JudgeError

    model = judge_model(work)
    flags = dict(JUDGE_SERVE_FLAGS)
    check_fits("the judge", model, gpu_memory_utilization or float(flags["--gpu-memory-utilization"]),
               int(flags["--max-model-len"]))
    try:
        template = release_chat_template(release)
    except InputError:  # a data-only release copy: the tiny judge's template renders the same no-think turn
        template = work / "chat_template_no_think.jinja"
        template.write_text(QWEN3_NO_THINK_TEMPLATE, encoding="utf-8")
    if port is None:
        port = next(p for p in range(18100, 18200) if not port_taken("127.0.0.1", p))
    elif port_taken("127.0.0.1", port):
        raise SystemExit(f"port {port} is taken (a judge already running there? pass --judge-url)")
    spec = PoolSpec(model_root=model, gpu_groups=("0",), log_dir=work, chat_template=template,
                    served_names=(JUDGE_SERVED_NAME,), port_start=port,
                    extra_args=("--load-format", "dummy", *(["--enforce-eager"] if eager else [])),
                    gpu_memory_utilization=gpu_memory_utilization)
    argv = serve_command(spec, 0)
    if shutil.which(argv[0]) is None:  # wheels installed with --target: no console script on PATH
        argv[:2] = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve"]
    env = serve_environment(spec, 0)
    env["VLLM_SERVER_DEV_MODE"] = "1"  # POST /reset_prefix_cache between paths
    print("[engine] " + " ".join(argv), flush=True)
    log_path = log_path or work / "vllm-judge.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed with the server
    server = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                              start_new_session=True)  # its own session: --serve-only leaves it running
    url = spec.urls()[0]
    t0 = time.monotonic()
    while True:
        if server.poll() is not None:
            log.close()
            sys.stderr.write(log_path.read_text(errors="replace")[-4000:])
            raise SystemExit("vllm serve exited while starting")
        try:
            probe(url, JUDGE_SERVED_NAME, timeout_s=5.0)
            break
        except JudgeError:
            if time.monotonic() - t0 > timeout_s:
                stop(server)
                raise SystemExit(f"vllm serve not ready after {timeout_s:.0f} s; log {log_path}")
            time.sleep(1)
    print(f"[engine] judge up in {time.monotonic() - t0:.0f} s at {url}", flush=True)
    return server, url


def stop(server: subprocess.Popen) -> None:
    """SIGTERM the server's process group (it leads its own session), then SIGKILL after 30 s."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


COUNTERS = {"requests": "vllm:request_success_total", "prompt_tokens": "vllm:prompt_tokens_total",
            "output_tokens": "vllm:generation_tokens_total", "cache_queries": "vllm:prefix_cache_queries_total",
            "cache_hits": "vllm:prefix_cache_hits_total"}
_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+([-+0-9.eE]+|NaN)\s*$")


def read_counters(base: str) -> dict[str, float] | None:
    """vLLM's counters (summed over labels) from ``/metrics``; None when the server has none (the stub)."""
    import httpx

    try:
        text = httpx.get(base.removesuffix("/v1") + "/metrics", timeout=10).text
    except httpx.HTTPError:
        return None
    sums: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and match.group(1) in COUNTERS.values():
            sums[match.group(1)] = sums.get(match.group(1), 0.0) + float(match.group(3))
    return {name: sums.get(metric, 0.0) for name, metric in COUNTERS.items()} if sums else None


def reset_prefix_cache(base: str) -> bool:
    import httpx

    try:
        return httpx.post(base.removesuffix("/v1") + "/reset_prefix_cache", timeout=30).status_code == 200
    except httpx.HTTPError:
        return False


# -- the relay in front of the engine for path (b) -------------------------------------------------------------

def cap_answer_tokens(body: dict, answer_tokens: int | None) -> dict:
    """``body`` with ``max_tokens`` at most ``answer_tokens`` (None: unchanged). A random-weight judge decodes every
    request to its budget; a real one stops after a short answer: the cap models the real answer's length."""
    if answer_tokens is not None:
        body = {**body, "max_tokens": min(int(body.get("max_tokens") or answer_tokens), answer_tokens)}
    return body


class AnswerRelay:
    """Forward every request to ``upstream`` (unchanged but for ``max_tokens``, capped at ``answer_tokens`` when
    given: :func:`cap_answer_tokens`); answer with the recorded answer of each prompt, else ``fallback(request
    text)`` (vLLM's choices otherwise as they came: finish reasons become ``stop``). Counts the prompts it
    forwarded."""

    def __init__(self, upstream: str, answers: dict[str, str],
                 fallback: Callable[[str], str | None] | None = None, answer_tokens: int | None = None) -> None:
        import httpx

        self.upstream, self.answers, self.fallback = upstream.rstrip("/"), answers, fallback
        self.answer_tokens = answer_tokens
        self.prompts = self.unknown = 0
        self._lock = threading.Lock()
        self._local = threading.local()  # one upstream client per handler thread: a shared httpcore pool can
        self._clients: list[httpx.Client] = []  # close a connection another thread uses (judge_http.py)
        self._tls = httpx.create_ssl_context()
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                got = relay._upstream().get(relay.upstream + self.path.removeprefix("/v1"))
                self._answer(got.status_code, got.content)

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                sent = raw if relay.answer_tokens is None else json.dumps(
                    cap_answer_tokens(json.loads(raw), relay.answer_tokens)).encode()
                got = relay._upstream().post(relay.upstream + self.path.removeprefix("/v1"), content=sent,
                                         headers={"Content-Type": "application/json"})
                if got.status_code != 200:
                    self._answer(got.status_code, got.content)
                    return
                self._answer(200, json.dumps(relay.rewrite(json.loads(raw), got.json())).encode())

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 512

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def _upstream(self) -> Any:
        import httpx

        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = httpx.Client(timeout=600, trust_env=False, verify=self._tls)
            with self._lock:
                self._clients.append(client)
        return client

    def rewrite(self, body: dict, answer: dict) -> dict:
        if "messages" in body:
            texts = [body["messages"][0]["content"][0]["text"]]
        else:
            texts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        for choice in answer.get("choices", []):
            text = texts[choice.get("index", 0)]
            reply = self.answers.get(text)
            if reply is None and self.fallback is not None:  # a prompt not recorded beforehand
                reply = self.fallback(text)
            with self._lock:
                self.prompts += 1
                self.unknown += reply is None
            reply = "A" if reply is None else reply
            if "message" in choice:
                choice["message"]["content"] = reply
                choice["message"].pop("reasoning_content", None)
            else:
                choice["text"] = reply
            choice["finish_reason"] = "stop"
        return answer

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        for client in self._clients:
            client.close()


# -- the three clients -----------------------------------------------------------------------------------------

def _bodies(call: Call, prompts: list[str]) -> tuple[str, dict]:
    from trace_lib.scoring.judge import JUDGE_SERVED_NAME, chat_body, completions_body

    s = call.settings
    if call.route == "chat":
        assert len(prompts) == 1
        return "chat/completions", chat_body(JUDGE_SERVED_NAME, prompts[0], max_tokens=s["max_tokens"],
                                             temperature=s["temperature"])
    rendered = [_rendered(call, p) for p in prompts]
    return "completions", completions_body(JUDGE_SERVED_NAME, rendered, max_tokens=s["max_tokens"],
                                           temperature=s["temperature"], top_p=s["top_p"])


FAILED: list[str] = []  # requests of (a) and (c) that failed (printed; none expected)
#: (a)/(c) give up on one request after this long: on the H200 one of 314 requests at 256 connections once never
#: came back although the engine had finished all of them (a client-side stall, docs/performance.md).
REQUEST_TIMEOUT_S = 180.0


def _post(transport: Any, url: str, body: dict) -> bool:
    """Send one request; False (and the reason kept in FAILED) when it failed."""
    from trace_lib.scoring.judge_http import CallFailed

    try:
        transport.post(url, body, timeout_s=REQUEST_TIMEOUT_S)
        return True
    except CallFailed as exc:
        FAILED.append(exc.reason)
        return False


def saturate(url: str, work: Workload, in_flight: int) -> int:
    """(a): every prompt its own request, ``in_flight`` at once, in prefix order; returns prompts answered."""
    from trace_lib.scoring.judge_http import JudgeTransport
    from trace_lib.scoring.request_order import prefix_order

    items = [(call, p) for call in work.calls for p in call.prompts]
    order = prefix_order([_rendered(c, p) for c, p in items])
    transport = JudgeTransport(concurrency=in_flight)

    def one(item: tuple[Call, str]) -> None:
        route, body = _bodies(item[0], [item[1]])
        _post(transport, f"{url}/{route}", body)

    with ThreadPoolExecutor(max_workers=in_flight) as pool:
        list(pool.map(one, [items[i] for i in order]))
    transport.close()
    return len(items)


def upstream_design(url: str, work: Workload, release: Any, budget_s: float | None = None,
                    answer_tokens: int | None = None) -> int:
    """(c): upstream's jobs on one endpoint (module docstring); returns prompts answered. With ``budget_s``, no
    request starts after that many seconds (those in flight finish): the count is then the prompts answered so
    far, and ``measure`` turns it into the partial rate (answered / seconds). ``answer_tokens``: as the relay's."""
    from trace_lib.release.suite import load_suite
    from trace_lib.scoring.judge_http import JudgeTransport

    deadline = None if budget_s is None else time.monotonic() + budget_s
    transport = JudgeTransport(concurrency=UPSTREAM_CHAT_IN_FLIGHT)
    answered_lock = threading.Lock()
    answered = 0

    def late() -> bool:
        return deadline is not None and time.monotonic() > deadline

    def send(route: str, body: dict, prompts: int) -> None:
        nonlocal answered
        if late() or not _post(transport, f"{url}/{route}", cap_answer_tokens(body, answer_tokens)):
            return
        with answered_lock:
            answered += prompts

    jobs: dict[tuple[str, int], list[Call]] = {}
    for call in work.calls:
        jobs.setdefault((call.benchmark, call.seed), []).append(call)

    routes = {b.key: b.route for b in load_suite(release).benchmarks}
    phase = {"official_vlmevalkit": 0, "direct_score": 1}  # then MME-Reasoning's dedicated route

    for (key, _seed), calls in sorted(jobs.items(), key=lambda kv: (phase.get(routes[kv[0][0]], 2), kv[0])):
        for call in calls:  # a job's rounds one after another
            if late():
                break
            if call.route == "chat":
                def one(prompt: str, c: Call = call) -> None:
                    route, body = _bodies(c, [prompt])
                    send(route, body, 1)

                with ThreadPoolExecutor(max_workers=UPSTREAM_CHAT_IN_FLIGHT) as pool:
                    list(pool.map(one, call.prompts))
            else:
                for batch in _upstream_batches([_rendered(call, p) for p in call.prompts]):
                    route, body = _bodies(call, [call.prompts[i] for i in batch])
                    send(route, body, len(batch))
    transport.close()
    if late():
        print(f"[upstream] time budget of {budget_s:g} s spent: {answered} of {work.prompts} prompts answered "
              "(the rate below is answered / seconds: partial)", flush=True)
    return answered


def _upstream_batches(rendered: list[str]) -> list[list[int]]:
    """Upstream's ``_make_judge_api_batches`` (64 prompts or 100,000 characters per request): the judge client's
    own packing (``trace_lib.scoring.judge._batches``) at upstream's score-queue settings."""
    from trace_lib.scoring.judge import _batches

    return _batches(rendered, batch_size=UPSTREAM_BATCH, max_chars=UPSTREAM_BATCH_CHARS)


def campaign_scorer(relay: AnswerRelay, release: Any, campaign: Path, data_root: Path, seeds: list[int],
                    keys: list[str], ordered: bool, log: Path, jobs: int | None = None,
                    max_jobs: int | None = None, env: dict[str, str] | None = None) -> int:
    """(b): ``trace-repro score --campaign-root`` in a subprocess, through the relay; returns prompts answered."""
    before = relay.prompts
    argv = [sys.executable, "-m", "trace_lib", "score", "--trace-root", str(release.path), "--campaign-root",
            str(campaign), "--data-root", str(data_root), "--judge-url", relay.url, "--model-id", MODEL,
            "--seeds", *map(str, seeds), *[a for k in keys for a in ("--benchmark", k)],
            *(["--jobs", str(jobs)] if jobs else []), *(["--max-jobs", str(max_jobs)] if max_jobs else [])]
    env = dict(os.environ, **(env or {}), TRACE_JUDGE_PREFIX_ORDER="1" if ordered else "0",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    with open(log, "w") as handle:
        done = subprocess.run(argv, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    tail = log.read_text().strip().splitlines()[-1:] or [""]
    if done.returncode != 0:
        raise SystemExit(f"trace-repro score exited {done.returncode}: {tail[0]} (log {log})")
    print(f"  {tail[0]}", flush=True)
    return relay.prompts - before


# -- measuring -------------------------------------------------------------------------------------------------

@dataclass
class Measured:
    name: str
    prompts: int
    seconds: float
    counters: dict[str, float] | None
    running: float = float("nan")  # the engine's mean running requests over the path's samples
    waiting: float = float("nan")  # and its mean waiting requests
    partial: bool = False  # stopped by its time budget: the rate is answered / seconds

    def rate(self, key: str) -> float:
        return float("nan") if self.counters is None else self.counters[key] / self.seconds

    @property
    def hit_rate(self) -> float:
        c = self.counters
        return c["cache_hits"] / c["cache_queries"] if c and c["cache_queries"] else float("nan")


def engine_gauges(engine: str) -> tuple[float, float, float, float] | None:
    """vLLM's (running, waiting, finished requests, output tokens) from ``/metrics``; None when unreachable."""
    import httpx

    try:
        text = httpx.get(engine.removesuffix("/v1") + "/metrics", timeout=5, trust_env=False).text
    except httpx.HTTPError:
        return None
    sums: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match:
            sums[match.group(1)] = sums.get(match.group(1), 0.0) + float(match.group(3))
    return (sums.get("vllm:num_requests_running", 0.0), sums.get("vllm:num_requests_waiting", 0.0),
            sums.get(COUNTERS["requests"], 0.0), sums.get(COUNTERS["output_tokens"], 0.0))


def _watch(name: str, engine: str, done: threading.Event, samples: list[tuple[float, float]],
           every_s: float = 2.0, print_every_s: float = 20.0) -> None:
    """Sample the engine's running/waiting requests every ``every_s`` into ``samples``; print them (and the
    finished requests and output tokens so far) every ``print_every_s`` while a path runs."""
    t0 = time.perf_counter()
    shown = t0
    while not done.wait(every_s):
        gauges = engine_gauges(engine)
        now = time.perf_counter()
        if gauges is None:
            print(f"[{name}] +{now - t0:.0f} s: /metrics unreachable", flush=True)
            continue
        samples.append(gauges[:2])
        if now - shown >= print_every_s:
            shown = now
            print(f"[{name}] +{now - t0:.0f} s: running {gauges[0]:.0f}, waiting {gauges[1]:.0f}, finished "
                  f"{gauges[2]:.0f}, output tokens {gauges[3]:.0f}", flush=True)


def measure(name: str, engine: str, fn: Callable[[], int], *, partial: Callable[[], bool] | None = None,
            sample_s: float = 2.0) -> Measured:
    if not reset_prefix_cache(engine):
        print(f"[{name}] (prefix cache not reset: the server has no /reset_prefix_cache; start it with "
              "VLLM_SERVER_DEV_MODE=1)", flush=True)
    before = read_counters(engine)
    done = threading.Event()
    samples: list[tuple[float, float]] = []
    threading.Thread(target=_watch, args=(name, engine, done, samples, sample_s), daemon=True).start()
    t0 = time.perf_counter()
    try:
        prompts = fn()
    finally:
        done.set()
    seconds = time.perf_counter() - t0
    after = read_counters(engine)
    delta = None if before is None or after is None else {k: after[k] - before[k] for k in before}
    running = sum(r for r, _ in samples) / len(samples) if samples else float("nan")
    waiting = sum(w for _, w in samples) / len(samples) if samples else float("nan")
    result = Measured(name, prompts, seconds, delta, running, waiting, bool(partial and partial()))
    if FAILED:
        print(f"[{name}] {len(FAILED)} request(s) failed, first: {FAILED[0]}", flush=True)
        FAILED.clear()
    print(f"[{name}] {prompts} judge requests in {seconds:.1f} s: {prompts / seconds:.2f} req/s"
          f"{' (partial: time budget)' if result.partial else ''}, {result.rate('prompt_tokens'):.0f} prompt "
          f"tok/s, {result.rate('output_tokens'):.0f} output tok/s, prefix-cache hit rate {result.hit_rate:.3f}, "
          f"engine running {running:.1f} / waiting {waiting:.1f} on average", flush=True)
    return result


def _stub_engine() -> Any:
    """A loopback simulated engine (trace_lib/testing/sim_engine.py): upstream's 128 slots, 20 ms a sequence."""
    from trace_lib.scoring.judge import JUDGE_SERVED_NAME
    from trace_lib.testing.sim_engine import SimulatedEngine

    return SimulatedEngine(lambda route, prompt: "A", max_num_seqs=128, service_s=0.02,
                           model=JUDGE_SERVED_NAME).__enter__()


def _number(value: float) -> float | None:
    return None if value != value else round(value, 1)  # NaN (no counters): null


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # through the finally blocks: the server is stopped
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=24, help="synthetic rows per benchmark and seed (200: "
                        "full-size slices, as a real campaign's, with fewer --benchmarks/--seeds)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    parser.add_argument("--benchmarks", nargs="+", default=None, help="judge-route keys (default: all)")
    parser.add_argument("--judge-url", default=None, metavar="URL",
                        help="an already running judge (started with --serve-only, or any vllm serve of the "
                             "judge name with VLLM_SERVER_DEV_MODE=1 for prefix-cache resets): nothing is started "
                             "or stopped")
    parser.add_argument("--serve-only", action="store_true",
                        help="start the 32B-shaped judge, print its URL and leave it running (its own session; "
                             "stop it with 'kill -TERM -PID' from --pid-file), then exit")
    parser.add_argument("--pid-file", default=None, metavar="FILE", help="--serve-only: write the server's pid here")
    parser.add_argument("--port", type=int, default=None, help="the started judge's port (default: the first free "
                        "from 18100)")
    parser.add_argument("--saturation-in-flight", type=int, default=256)
    parser.add_argument("--skip-saturation", action="store_true", help="no (a)")
    parser.add_argument("--skip-scorer", action="store_true", help="no (b)")
    parser.add_argument("--skip-unordered", action="store_true", help="(b) with prefix ordering only")
    parser.add_argument("--skip-upstream", action="store_true", help="no (c)")
    parser.add_argument("--upstream-budget-s", type=float, default=None, metavar="S",
                        help="(c): start no request after S seconds; its rate is then answered / seconds (partial)")
    parser.add_argument("--score-jobs", type=int, default=None, metavar="N",
                        help="(b): 'trace-repro score --jobs N' (default: its own default)")
    parser.add_argument("--score-max-jobs", type=int, default=None, metavar="M",
                        help="(b): 'trace-repro score --max-jobs M' (default: its own default)")
    parser.add_argument("--judge-window", type=int, default=None, metavar="N",
                        help="(b): TRACE_JUDGE_CONCURRENCY for the scorer (default: its own, 192)")
    parser.add_argument("--enforce-eager", action="store_true",
                        help="serve without CUDA graphs (starts faster; not upstream's flags: ratios only)")
    parser.add_argument("--stub", action="store_true",
                        help="a loopback simulated engine instead of vLLM (CPU dry run: no figures)")
    parser.add_argument("--sample-s", type=float, default=2.0, help="seconds between /metrics samples")
    parser.add_argument("--calibration", default=None, metavar="FILE",
                        help="write the measured judge rate here (trace-repro plan --estimate reads it)")
    parser.add_argument("--server-log", default=None, metavar="FILE", help="vllm serve's log (default: in the work dir)")
    parser.add_argument("--trace-root", default=None)
    parser.add_argument("--work-dir", default=None)
    args = parser.parse_args(argv)
    from trace_lib.release.locate import locate_release

    release = locate_release(args.trace_root)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="judge-throughput-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.serve_only:
        server, url = start_judge(work, release, log_path=Path(args.server_log) if args.server_log else None,
                                  eager=args.enforce_eager, port=args.port)
        if args.pid_file:
            Path(args.pid_file).write_text(f"{server.pid}\n", encoding="utf-8")
        print(f"[engine] left running: pid {server.pid} (its own process group), --judge-url {url}", flush=True)
        return 0
    campaign, data_root = work / "campaign", work / "data"
    t0 = time.monotonic()
    keys = judge_routes(args.benchmarks)
    workload = build_workload(release, campaign, data_root, keys, args.rows, args.seeds)
    routes = {}
    for call in workload.calls:
        routes[call.route] = routes.get(call.route, 0) + len(call.prompts)
    keys = workload.keys
    print(f"[setup] {len(keys)} judge-route benchmarks x {len(args.seeds)} seeds x {args.rows} rows: "
          f"{workload.prompts} judge requests ({', '.join(f'{n} {r}' for r, n in sorted(routes.items()))}) in "
          f"{len(workload.calls)} calls; built in {time.monotonic() - t0:.0f} s under {work}", flush=True)
    single, chain, where = critical_path(workload)
    print(f"[setup] longest request {single} tokens; longest chain of dependent calls {chain} tokens ({where}): "
          f"where the judge is not the bottleneck (few prompts), (b)/(a) <= {single / max(1, chain):.2f}", flush=True)

    server = stub = None
    started_s = None
    results: list[Measured] = []
    try:
        if args.judge_url:
            from trace_lib.scoring.judge import JUDGE_SERVED_NAME
            from trace_lib.scoring.judge_http import probe

            engine = args.judge_url.rstrip("/")
            engine = engine if engine.endswith("/v1") else engine + "/v1"
            probe(engine, JUDGE_SERVED_NAME, timeout_s=10.0)
            print(f"[engine] using the running judge at {engine}", flush=True)
        elif args.stub:
            stub = _stub_engine()
            engine = stub.url
        else:
            t_start = time.monotonic()
            server, engine = start_judge(work, release,
                                         log_path=Path(args.server_log) if args.server_log else None,
                                         eager=args.enforce_eager, port=args.port)
            started_s = time.monotonic() - t_start
        relay = AnswerRelay(engine, workload.answers)
        saturate(engine, Workload(workload.calls[:2]), 8)  # warm-up
        if not args.skip_saturation:
            results.append(measure("(a) saturation", engine,
                                   lambda: saturate(engine, workload, args.saturation_in_flight),
                                   sample_s=args.sample_s))
        scorer_env = {"TRACE_JUDGE_CONCURRENCY": str(args.judge_window)} if args.judge_window else {}
        for ordered in (() if args.skip_scorer else (True, False)[: 1 if args.skip_unordered else 2]):
            name = f"(b) trace-repro score, prefix order {'on' if ordered else 'off'}"
            results.append(measure(name, engine, lambda o=ordered: campaign_scorer(
                relay, release, campaign, data_root, args.seeds, workload.keys, o, work / f"score-{int(o)}.log",
                args.score_jobs, args.score_max_jobs, scorer_env), sample_s=args.sample_s))
        if relay.unknown:
            print(f"[relay] {relay.unknown} prompt(s) the recording did not predict were answered 'A'", flush=True)
        if not args.skip_upstream:
            budget_end = [None]

            def upstream() -> int:
                t_up = time.monotonic()
                answered = upstream_design(engine, workload, release, args.upstream_budget_s)
                budget_end[0] = answered < workload.prompts and args.upstream_budget_s is not None \
                    and time.monotonic() - t_up >= args.upstream_budget_s
                return answered

            results.append(measure("(c) upstream's client design", engine, upstream,
                                   partial=lambda: bool(budget_end[0]), sample_s=args.sample_s))
        relay.close()
    finally:
        if server is not None:
            stop(server)
        if stub is not None:
            stub.__exit__(None, None, None)

    print()
    print("| path | judge requests | seconds | requests/s | prompt tok/s | output tok/s | prefix-cache hit rate | "
          "engine running / waiting (mean) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| {r.name}{' (partial: time budget)' if r.partial else ''} | {r.prompts} | {r.seconds:.1f} | "
              f"{r.prompts / r.seconds:.2f} | {r.rate('prompt_tokens'):.0f} | {r.rate('output_tokens'):.0f} | "
              f"{r.hit_rate:.3f} | {r.running:.1f} / {r.waiting:.1f} |")
    rate = {r.name: r.prompts / r.seconds for r in results}
    a = rate.get("(a) saturation")
    c = rate.get("(c) upstream's client design")
    print()
    for name in (n for n in rate if n.startswith("(b)")):
        parts = [f"{name}:"]
        if a:
            parts.append(f"/ (a) = {rate[name] / a:.2f} (target >= 0.9)")
        if c:
            parts.append(f"/ (c) = {rate[name] / c:.2f} (target >= 2"
                         f"{'; (c) partial' if results[-1].partial else ''})")
        print(" ".join(parts))
    if args.calibration and results:
        from trace_lib.campaign.estimate import record_calibration

        scorer = [r for r in results if r.name.startswith("(b)")]
        best = max(scorer, key=lambda r: r.prompts / r.seconds) if scorer else results[0]
        values = {
            "requests_per_s": round(best.prompts / best.seconds, 3),
            "measured_path": best.name,
            "prompt_tokens_per_s": _number(best.rate("prompt_tokens")),
            "output_tokens_per_s": _number(best.rate("output_tokens")),
            "requests_per_row": round(workload.prompts / (len(keys) * len(args.seeds) * args.rows), 4),
            "measured_by": "benchmarks/judge_throughput.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        }
        if started_s is not None:
            values["start_s"] = round(started_s, 1)
        if args.stub:
            values["stub"] = True  # a dry run's file: not a measurement
        record_calibration(Path(args.calibration), "judge", values)
        print(f"calibration written to {args.calibration} (judge: {values['requests_per_s']} requests/s from "
              f"{best.name}{'; STUB, not a measurement' if args.stub else ''})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
