"""Engines on a Ray cluster: one engine actor per GPU group on every node, the driver the single writer.

:class:`RayEngines` is a backend whose ``generate_stream`` spreads the requests of a
:class:`~trace_lib.generation.backends.base.RequestFeed` over engine actors. Each actor (:class:`_EngineActor`)
wraps an ordinary backend (``vllm``, ``hf`` or ``openai``) created *on its node* and runs that backend's own
``generate_stream`` over a local feed, so a vLLM actor keeps its continuous batch full; the driver keeps up to
``per_actor_in_flight`` requests on each actor, polls finished results and yields them to the caller (the
campaign scheduler, which writes the stores). GPU actors get a placement group of one bundle
``{"GPU": tensor_parallel_size, "CPU": 1}`` with ``STRICT_PACK`` (tensor parallelism inside one node).

Loss: when an actor, its node or its engine dies (an engine that stopped sends
:class:`~trace_lib.errors.EngineStoppedError`), every request it had not returned is queued again for the other
actors; a result counts only when the driver receives it, and each request is answered once (the scheduler
refuses a second answer), so nothing is lost or duplicated. When no actor is left the stream raises
``EngineStoppedError`` (the CLI exits SYSTEM).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import queue
import threading
import time
from typing import Any, Iterator, Mapping

from trace_lib.errors import BackendError, EngineStartError, EngineStoppedError, TraceReproError, UsageError
from trace_lib.generation.backends.base import RequestFeed, create_backend, exception_line, stream_generate
from trace_lib.generation.request import ChatRequest, GenerationResult
from trace_lib.interrupts import raise_if_stopped


def ends_the_actor(answer: BaseException) -> bool:
    """Whether an exception an actor sent means its engine is gone (its requests go to the other actors): any but
    a failure of the requests themselves (a :class:`TraceReproError` that is not the machine's), which ends the
    stream."""
    return not isinstance(answer, TraceReproError) or answer.machine_failure


class _EngineActor:
    """Runs one backend on its node; ``submit`` requests, ``poll`` finished results (body of a Ray actor)."""

    def __init__(self, kind: str, model_path: str, served_name: str, options: Mapping[str, Any]) -> None:
        self.start_error: tuple[str, bool] | None = None  # (line, out of memory): reported by node()
        self.feed = RequestFeed(capacity=1 << 20)
        self.results: queue.Queue[Any] = queue.Queue()
        try:
            self.backend = create_backend(kind, model_path=model_path, served_name=served_name, **dict(options))
        except TraceReproError as exc:  # one line for the driver, not a dead actor's traceback
            self.backend = None
            self.start_error = (exc.render(), bool(getattr(exc, "out_of_memory", False)))
            return

        def run() -> None:
            try:
                for result in stream_generate(self.backend, self.feed):
                    self.results.put(result)
            except BaseException as exc:  # noqa: BLE001 - reported to the driver by poll()
                self.results.put(exc)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def node(self) -> tuple[str, tuple[str, bool] | None]:
        """This actor's node id, and why its engine did not start (None: it did)."""
        import ray

        return ray.get_runtime_context().get_node_id(), self.start_error

    def submit(self, requests: list[ChatRequest]) -> int:
        for request in requests:
            self.feed.put(request)
        return len(requests)

    def poll(self, wait_s: float) -> list[Any]:
        """Finished results (or the engine's exception) waiting up to ``wait_s`` for the first one."""
        out: list[Any] = []
        try:
            out.append(self.results.get(timeout=wait_s))
            while True:
                out.append(self.results.get_nowait())
        except queue.Empty:
            pass
        return out

    def close(self) -> None:
        self.feed.finish()
        if self.backend is not None:
            self.backend.close()


class RayEngines:
    """Engine actors on the Ray cluster at ``address`` (``auto``, ``ray://...`` or ``HOST:PORT``).

    Options: ``kind`` (the backend each actor runs), ``backend_options`` (its keyword arguments),
    ``actors`` (default: as many as the cluster's GPUs hold at ``gpus_per_actor`` each for GPU kinds, else one per
    alive node), ``gpus_per_actor`` (0 for CPU kinds; a fraction puts several actors on one GPU),
    ``cpus_per_actor`` (1), ``per_actor_in_flight`` (requests kept on each actor; default 1024 for vllm, 8
    otherwise), ``ray_init`` (further ``ray.init`` arguments).
    """

    def __init__(
        self,
        *,
        model_path: str,
        served_name: str,
        address: str,
        kind: str,
        backend_options: Mapping[str, Any] | None = None,
        actors: int | None = None,
        gpus_per_actor: float = 0,
        cpus_per_actor: float = 1,
        per_actor_in_flight: int | None = None,
        ray_init: Mapping[str, Any] | None = None,
    ) -> None:
        try:
            import ray
            from ray.util.placement_group import placement_group
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        except ImportError as exc:
            raise BackendError(f"ray is not importable ({exc})", field="--ray-address",
                               hint="install the 'ray' extra") from None
        self.name = kind
        self._ray = ray
        if not ray.is_initialized():
            try:
                ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, **dict(ray_init or {}))
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise BackendError(f"cannot connect to the Ray cluster ({exc})", field="--ray-address",
                                   found=address) from None
        if actors is None:
            if gpus_per_actor:  # a fraction: that many engines share each GPU
                actors = int(ray.cluster_resources().get("GPU", 0) / gpus_per_actor + 1e-9)
            else:
                actors = sum(1 for node in ray.nodes() if node.get("Alive") and node["Resources"].get("CPU", 0)
                             >= cpus_per_actor)
        if actors < 1:
            raise BackendError("the Ray cluster has no room for an engine actor", field="--ray-address",
                               found=ray.cluster_resources(), hint=f"each needs {gpus_per_actor} GPU(s)")
        self.in_flight = per_actor_in_flight or (1024 if kind == "vllm" else 8)
        remote = ray.remote(_EngineActor)
        self._groups = []
        self.actors: list[Any] = []
        for _ in range(actors):
            if gpus_per_actor:
                group = placement_group([{"GPU": gpus_per_actor, "CPU": cpus_per_actor}], strategy="STRICT_PACK")
                self._groups.append(group)
                strategy = PlacementGroupSchedulingStrategy(placement_group=group)
                options: dict[str, Any] = dict(num_gpus=gpus_per_actor, num_cpus=cpus_per_actor,
                                               scheduling_strategy=strategy)
            else:
                options = dict(num_cpus=cpus_per_actor, scheduling_strategy="SPREAD")
            self.actors.append(remote.options(max_restarts=0, **options).remote(
                kind, model_path, served_name, dict(backend_options or {})))
        try:
            started = ray.get([a.node.remote() for a in self.actors])
        except ray.exceptions.RayActorError as exc:  # an actor died starting (an OS error in its engine)
            self.close()
            raise EngineStartError(f"{served_name}: an engine actor did not start: {exception_line(exc)}",
                                   field="--ray-address", hint="its node's Ray log has the cause") from None
        failed = [error for _, error in started if error is not None]
        if failed:
            self.close()
            raise EngineStartError(f"{len(failed)} of {len(started)} engine actor(s) did not start; first: "
                                   f"{failed[0][0]}", field="--ray-address",
                                   out_of_memory=any(out_of_memory for _, out_of_memory in failed))
        self.nodes = [node for node, _ in started]
        self.lost: list[str] = []  # nodes of actors lost during a stream (receipts, tests)

    def generate(self, requests: list[ChatRequest]) -> Iterator[GenerationResult]:
        yield from self.generate_stream(RequestFeed.of(requests))

    def generate_stream(self, feed: RequestFeed) -> Iterator[GenerationResult]:
        ray = self._ray
        # per actor: the key it was sent under -> the request (request ids need not be unique in a stream)
        outstanding: dict[int, dict[str, ChatRequest]] = {i: {} for i in range(len(self.actors))}
        keys = (str(n) for n in itertools.count())
        alive = set(outstanding)
        retry: collections.deque[ChatRequest] = collections.deque()
        polls: dict[Any, int] = {}

        def lose(index: int, why: BaseException) -> None:
            if index in alive:
                alive.discard(index)
                self.lost.append(self.nodes[index])
                retry.extend(outstanding[index].values())
                outstanding[index].clear()
            if not alive:
                raise EngineStoppedError("every engine actor was lost", field="--ray-address",
                                         found=repr(why)[:200])

        while True:
            for index in sorted(alive):
                room = self.in_flight - len(outstanding[index])
                batch = [retry.popleft() for _ in range(min(room, len(retry)))]
                if len(batch) < room and not feed.finished:
                    idle = not any(outstanding.values()) and not batch
                    batch += feed.take(room - len(batch), wait=idle)
                if batch:
                    sent = []
                    for request in batch:
                        key = next(keys)
                        outstanding[index][key] = request
                        sent.append(dataclasses.replace(request, request_id=key))
                    self.actors[index].submit.remote(sent)
            if not any(outstanding.values()) and not retry:
                if feed.finished:
                    return
                continue
            for index in alive:
                if outstanding[index] and index not in polls.values():
                    polls[self.actors[index].poll.remote(0.2)] = index
            if not polls:
                continue
            ready, _ = ray.wait(list(polls), num_returns=1, timeout=5.0)
            for ref in ready:
                index = polls.pop(ref)
                try:
                    answers = ray.get(ref)
                except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError,
                        ray.exceptions.NodeDiedError) as exc:
                    lose(index, exc)
                    continue
                for answer in answers:
                    if isinstance(answer, BaseException):
                        if not ends_the_actor(answer):
                            raise answer
                        lose(index, answer)
                        break
                    request = outstanding[index].pop(answer.request_id, None)
                    if request is not None:  # an answer of a request already re-queued elsewhere is dropped
                        yield dataclasses.replace(answer, request_id=request.request_id)
            for ref in [r for r, i in polls.items() if i not in alive]:
                polls.pop(ref)
            raise_if_stopped()  # a stop signal Python discarded (trace_lib.interrupts) ends the run here
            time.sleep(0)

    def close(self) -> None:
        ray = self._ray
        for actor in self.actors:
            try:
                ray.get(actor.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - a lost actor has nothing to close
                pass
            ray.kill(actor)
        for group in self._groups:
            ray.util.remove_placement_group(group)
        self.actors = []


def ray_engines(kind: str, *, model_path: str, served_name: str, address: str, options: Mapping[str, Any],
                tensor_parallel_size: int = 1, engines_per_gpu: int = 1) -> RayEngines:
    """The :class:`RayEngines` of a campaign: ``kind``'s engine with ``options`` in each actor; vllm actors get
    ``tensor_parallel_size`` GPUs of one node each (and vLLM's own multiprocessing inside the actor), or, with
    ``engines_per_gpu`` N > 1 (single-GPU engines only), 1/N of a GPU each (``options`` then give each engine its
    share of the memory).

    Raises:
        UsageError: several engines per GPU with tensor parallelism.
    """
    options = dict(options)
    gpus = 0.0
    if kind == "vllm":
        options["llm_kwargs"] = {"distributed_executor_backend": "mp", **dict(options.get("llm_kwargs") or {})}
        if engines_per_gpu > 1 and tensor_parallel_size != 1:
            raise UsageError("several engines per GPU need single-GPU engines", field="--engines-per-group",
                             found=engines_per_gpu, hint=f"tensor parallel size is {tensor_parallel_size}")
        gpus = tensor_parallel_size / engines_per_gpu
    return RayEngines(model_path=model_path, served_name=served_name, address=address, kind=kind,
                      backend_options=options, gpus_per_actor=gpus)
