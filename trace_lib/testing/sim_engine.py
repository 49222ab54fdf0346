"""A loopback simulated judge engine: ``max_num_seqs`` slots and a service time, behind the OpenAI stub server.

Every prompt of a request (a completions batch of 64 is 64 prompts, a chat request one) needs one of the
``max_num_seqs`` slots for ``service_s`` seconds, as vLLM runs at most ``--max-num-seqs`` sequences at once:
a request takes the free slots (first come, first served), holds them ``service_s``, and repeats with its
remaining prompts until all are served; then ``responder(route, prompt_text)`` answers each prompt. The engine records how many sequences
run over time (:attr:`SimulatedEngine.stats`: the time-weighted mean over the busy span, the peak) and answers
``GET /metrics`` with vLLM's gauge and counter names (``vllm:num_requests_running``, ``..._waiting``,
``vllm:request_success_total``, ...), so a client measured against it is measured as against vLLM.

Faults, for the robustness tests: ``drop_every=K`` closes the connection of every K-th request without an
answer (after serving it), ``hang=K`` holds the K-th request without ever answering (until the engine stops),
``idle_timeout_s`` closes kept-alive connections idle that long.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from trace_lib.testing.openai_server import OpenAIStubServer, StubDrop


@dataclass(frozen=True)
class EngineStats:
    """What the simulated engine saw: prompts served, requests, the mean and peak running sequences over the
    busy span (first arrival to last completion), that span's seconds."""

    prompts: int
    requests: int
    mean_running: float
    peak_running: int
    busy_s: float

    @property
    def prompts_per_s(self) -> float:
        return self.prompts / self.busy_s if self.busy_s > 0 else 0.0


def _answers(responder: Callable[[str, str], str], route: str, body: dict[str, Any]) -> Any:
    """The responder's answer to each prompt of the request (a list for completions)."""
    if route == "completions":
        prompt = body.get("prompt")
        return [responder(route, str(p)) for p in (prompt if isinstance(prompt, list) else [prompt])]
    if route == "chat/completions":
        return responder(route, str(body["messages"][0]["content"][0]["text"]))
    return ""


def _prompt_count(route: str, body: dict[str, Any]) -> int:
    if route == "completions":
        prompt = body.get("prompt")
        return len(prompt) if isinstance(prompt, list) else 1
    return 1


class SimulatedEngine:
    """The engine (module docstring); a context manager serving at :attr:`url`."""

    def __init__(self, responder: Callable[[str, str], str], *, max_num_seqs: int = 16,
                 service_s: float = 0.05, model: str = "qwen3-32b-judge", drop_every: int = 0, hang: int = 0,
                 idle_timeout_s: float | None = None) -> None:
        self.max_num_seqs, self.service_s = max_num_seqs, service_s
        self.drop_every, self.hang = drop_every, hang
        self._cond = threading.Condition()
        self._free = max_num_seqs
        self._queue: list[int] = []
        self._tickets = 0
        self._requests = self._prompts = self._waiting = self._dropped = 0
        self._events: list[tuple[float, int]] = []  # (time, running) after each change
        self._stopped = threading.Event()
        self._server = OpenAIStubServer(lambda route, body: _answers(responder, route, body), model=model,
                                        service=self._serve, metrics=self._metrics, idle_timeout_s=idle_timeout_s)

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def dropped(self) -> int:
        return self._dropped

    @property
    def requests(self) -> list[tuple[str, dict[str, Any]]]:
        """Every request's (route, body) so far, in arrival order."""
        return list(self._server.requests)

    def __enter__(self) -> SimulatedEngine:
        self._server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        with self._cond:
            self._cond.notify_all()
        self._server.__exit__(*exc)

    def reset(self) -> None:
        """Forget the statistics (between two measured runs)."""
        with self._cond:
            self._requests = self._prompts = 0
            self._events = []

    def _running(self) -> int:
        return self.max_num_seqs - self._free

    def _serve(self, route: str, body: dict[str, Any]) -> None:
        if route not in ("completions", "chat/completions"):
            return
        need = _prompt_count(route, body)
        with self._cond:
            self._requests += 1
            number = self._requests
            self._waiting += need
        if self.hang and number == self.hang:
            self._stopped.wait()
            raise StubDrop
        while need:
            with self._cond:
                ticket = self._tickets
                self._tickets += 1
                self._queue.append(ticket)
                while (self._queue[0] != ticket or not self._free) and not self._stopped.is_set():
                    self._cond.wait(timeout=1.0)
                self._queue.remove(ticket)
                take = min(self._free, need)
                self._free -= take
                self._waiting -= take
                self._events.append((time.monotonic(), self._running()))
                self._cond.notify_all()
            if self._stopped.is_set():
                raise StubDrop
            time.sleep(self.service_s)
            with self._cond:
                self._free += take
                self._prompts += take
                self._events.append((time.monotonic(), self._running()))
                self._cond.notify_all()
            need -= take
        if self.drop_every and number % self.drop_every == 0:
            with self._cond:
                self._dropped += 1
            raise StubDrop

    @property
    def stats(self) -> EngineStats:
        with self._cond:
            events, prompts, requests = list(self._events), self._prompts, self._requests
        if len(events) < 2:
            return EngineStats(prompts, requests, 0.0, max((r for _, r in events), default=0), 0.0)
        area = sum((t1 - t0) * r0 for (t0, r0), (t1, _) in zip(events, events[1:]))
        span = events[-1][0] - events[0][0]
        return EngineStats(prompts, requests, area / span if span > 0 else 0.0, max(r for _, r in events), span)

    def _metrics(self) -> str:
        with self._cond:
            running, waiting, prompts = self._running(), self._waiting, self._prompts
        return (f"vllm:num_requests_running {running}\nvllm:num_requests_waiting {waiting}\n"
                f"vllm:request_success_total {prompts}\n")


# -- a campaign of toy judged slices, scored by the real CampaignScorer against the engine ----------------------

@dataclass(frozen=True)
class _Source:
    path: Any

    def local_path(self, data_root: Any) -> Any:
        return self.path


@dataclass(frozen=True)
class JudgedCampaign:
    """A campaign directory of toy judged slices (:func:`~trace_lib.testing.synthetic_campaign.toy_judged_protocol`
    per benchmark key, answered by :func:`~trace_lib.testing.synthetic_campaign.toy_judge_answer`): its root, the
    data sources the scorer reads, the slice keys in scoring order, the protocols to register and the judge prompts
    one scoring sends."""

    root: Any
    sources: dict[str, Any]
    keys: tuple[Any, ...]
    protocols: dict[str, Any]

    prompts: int  # judge prompts one scoring of the campaign sends (a chat round, then the D rows' completions)


def build_judged_campaign(root: Any, *, benchmarks: Any, seeds: Any, rows: int,
                          model: str = "toy-judged") -> JudgedCampaign:
    """Write data and response files of ``benchmarks x seeds`` toy judged slices of ``rows`` rows under ``root``."""
    from pathlib import Path

    from trace_lib.generation.store import response_path
    from trace_lib.reports.collect import SliceKey
    from trace_lib.testing.synthetic_campaign import (
        extract_letter,
        toy_judged_protocol,
        toy_responses,
        toy_rows,
        write_response_file,
        write_toy_dataset,
    )

    root = Path(root)
    sources, protocols, keys, prompts = {}, {}, [], 0
    for number, key in enumerate(benchmarks):
        sources[key] = _Source(write_toy_dataset(root / "data" / f"{key}.jsonl", rows, seed=number))
        protocols[key] = toy_judged_protocol(key)
        data = toy_rows(rows, seed=number)
        for seed in seeds:
            texts = toy_responses(data, 0.5, seed=seed)
            write_response_file(response_path(root, model=model, seed=seed, benchmark=key), model=model, seed=seed,
                                benchmark=key, rows=data, texts=texts)
            keys.append(SliceKey(model, seed, key))
            prompts += len(texts) + sum(1 for t in texts if extract_letter(t) == "D")
    return JudgedCampaign(root, sources, tuple(keys), protocols, prompts)


def register_protocols(protocols: dict[str, Any]) -> Callable[[], None]:
    """Make the suite registry resolve each key to its protocol; returns the function that undoes it."""
    import sys
    import types

    from trace_lib.benchmarks import registry

    saved = {key: registry.PROTOCOLS[key] for key in protocols}
    for key, protocol in protocols.items():
        module = types.ModuleType(f"trace_lib_sim_protocol_{key}")
        module.PROTOCOL = protocol  # type: ignore[attr-defined]
        sys.modules[module.__name__] = module
        registry.PROTOCOLS[key] = f"{module.__name__}:PROTOCOL"

    def undo() -> None:
        registry.PROTOCOLS.update(saved)
        for key in protocols:
            sys.modules.pop(f"trace_lib_sim_protocol_{key}", None)

    return undo


def score_judged_campaign(campaign: JudgedCampaign, judge: Any, *, jobs: int = 4, max_jobs: int = 32) -> dict:
    """Score every slice of ``campaign`` with :meth:`CampaignScorer.score_all` and ``judge``; returns each slice's
    ``records.jsonl`` bytes and ``scores.json`` (without its time and input paths), by slice id.

    Raises:
        TraceReproError: a slice failed.
    """
    import json

    from trace_lib.campaign.scorer import CampaignScorer
    from trace_lib.generation.store import response_path
    from trace_lib.scoring.score import scores_dir

    undo = register_protocols(campaign.protocols)
    try:
        scorer = CampaignScorer(campaign.root, campaign.root / "data", campaign.sources, "http://sim", judge=judge)
        outputs = {}
        for key, result in scorer.score_all(
                list(campaign.keys), lambda k: response_path(campaign.root, model=k.model, seed=k.seed,
                                                             benchmark=k.benchmark), jobs=jobs, max_jobs=max_jobs):
            if isinstance(result, Exception):
                raise result
            out = scores_dir(campaign.root, model=key.model, seed=key.seed, benchmark=key.benchmark)
            summary = json.loads((out / "scores.json").read_text(encoding="utf-8"))
            outputs[key.id] = ((out / "records.jsonl").read_bytes(),
                               {k: v for k, v in summary.items() if k not in ("created_at", "inputs")})
        return outputs
    finally:
        undo()
