"""Run one slice end to end: generate (resumable, through a generation backend) -> score -> tolerance verdict.

:class:`SliceRunner` is what ``tests_reproduction`` and the tiny-model lanes call; it holds the session's plan,
verdict judge, judge and engine pool. Per slice:

1. the protocol (an unimplemented one raises :class:`~trace_lib.errors.ProtocolNotImplementedError`: the slice
   fails, never passes or skips);
2. :meth:`SliceRunner.blocker` names what is missing to run it (model directory, dataset file, CUDA GPU, judge
   URL) in one exact sentence, which the tests turn into a skip;
3. generation into ``<campaign>/generation/seed_<S>/<model>/<benchmark>.jsonl`` (rows already stored are
   reused; the engine is created only when some row is missing, once per model); with ``stream`` set
   (:class:`~trace_lib.campaign.stream_ahead.StreamAhead`), the session's scheduler generates every selected
   slice of the model ahead in the background and the slice only waits for its own rows;
4. scoring into ``<campaign>/scoring/seed_<S>/<model>/<benchmark>/`` (``records.jsonl``, ``scores.json``);
5. the verdict (:mod:`trace_lib.aggregation.verdict`) when the model has canonical scores: from the per-row
   credits of every planned seed of the slice's cell (:meth:`SliceRunner.judged` scores the cell's other seeds
   first when they are not yet), one of reproduced, differs or inconclusive.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from trace_lib.aggregation.verdict import Verdict
from trace_lib.decoding import ascii_digits
from trace_lib.environment.engine import (
    engine_drift_text,
    engine_properties,
    generation_engine,
    random_weights,
    read_stored_engine,
    refresh_engine,
)
from trace_lib.errors import InputError, UsageError
from trace_lib.scoring.score import FileRef, ScoredSlice, run_scoring, scores_dir

if TYPE_CHECKING:
    from trace_lib.benchmarks.protocol import Protocol
    from trace_lib.slices import ModelDescriptor
    from trace_lib.campaign.plan import Plan, Slice
    from trace_lib.campaign.scheduler import SliceJob
    from trace_lib.campaign.stream_ahead import StreamAhead
    from trace_lib.campaign.verdicts import CampaignJudge
    from trace_lib.data.manifest import DatasetEntry, Manifest
    from trace_lib.data.prepare import ArtifactSource
    from trace_lib.generation.backends.base import Backend, RequestFeed
    from trace_lib.generation.request import ChatRequest, GenerationResult
    from trace_lib.generation.run import SliceRun
    from trace_lib.scoring.judge import Judge

#: Backends that run the model on a local GPU (``openai`` talks to a server; ``hf`` runs on ``--device``).
GPU_BACKENDS = frozenset({"vllm"})


def backend_options(kind: str, plan: Plan, *, base_url: str | None = None, device: str = "cpu",
                    request_timeout: float | None = None) -> dict[str, Any]:
    """The keyword arguments of :func:`~trace_lib.generation.backends.base.create_backend` for ``kind``
    (vllm: tensor parallel size and the data root for ``file://`` images; openai: ``base_url`` and the
    per-attempt ``request_timeout`` when given; hf: ``device``).

    Raises:
        UsageError: the openai backend without ``base_url``.
    """
    if kind == "vllm":  # engine limits default to upstream's server flags in the vllm backend itself
        return dict(tensor_parallel_size=plan.tp_size,
                    allowed_local_media_path=str(Path(plan.data_root or ".").resolve()))
    if kind == "openai":
        if not base_url:
            raise UsageError("the openai backend needs --base-url", field="--base-url")
        return dict(base_url=base_url, **({"timeout_s": request_timeout} if request_timeout else {}))
    return dict(device=device)


class EnginePool:
    """One generation engine at a time, per model: created on first use, closed when another model needs it.

    With ``pytest --dist loadgroup`` every slice of a model runs on one worker, consecutively, so each model's
    engine is loaded once per worker.
    """

    def __init__(self, factory: Callable[[ModelDescriptor], Backend]) -> None:
        self._factory = factory
        self._slug: str | None = None
        self._engine: Backend | None = None
        self.loads: list[str] = []  # slugs in load order (receipts, tests)

    def get(self, model: ModelDescriptor) -> Backend:
        if self._slug != model.slug:
            self.close()
            self._engine = self._factory(model)
            self._slug = model.slug
            self.loads.append(model.slug)
        assert self._engine is not None
        return self._engine

    def lazy(self, model: ModelDescriptor, name: str) -> Backend:
        """A stand-in that asks the pool for the real engine only when a request must be generated."""
        return _LazyBackend(self, model, name)  # type: ignore[return-value]

    def close(self) -> None:
        if self._engine is not None:
            engine, self._engine, self._slug = self._engine, None, None
            engine.close()


@dataclass
class _LazyBackend:
    pool: EnginePool
    model: ModelDescriptor
    name: str

    def generate(self, requests: Sequence[ChatRequest]) -> Iterator[GenerationResult]:
        return self.pool.get(self.model).generate(requests)

    def generate_stream(self, feed: RequestFeed) -> Iterator[GenerationResult]:
        from trace_lib.generation.backends.base import stream_generate

        return stream_generate(self.pool.get(self.model), feed)

    def close(self) -> None:  # the pool owns the engine
        pass


@dataclass(frozen=True)
class SliceOutcome:
    """What running one slice produced: generation summary, scores on disk and the verdict (None: no canonical
    value, or not judged yet: ``verdict_reason`` says why)."""

    slice_id: str
    generation: SliceRun
    scored: ScoredSlice
    verdict: Verdict | None
    protocol_version: str
    engine: Mapping[str, Any] | None = None  # the response file's engine record (None: not recorded)
    verdict_reason: str = ""

    @property
    def score(self) -> float:
        return self.scored.score.score

    @property
    def engine_note(self) -> str:
        """``engine differs from the paper's (...)`` when the responses' engine is not the paper's."""
        return engine_drift_text(self.engine)

    def properties(self) -> list[tuple[str, str]]:
        """JUnit receipt properties: score, canonical mean, delta, band, z, rows and the hashes that bind them."""
        summary = self.scored.summary
        inputs = summary.get("inputs") or {}
        props = [
            ("slice", self.slice_id),
            ("score", repr(self.score)),
            ("rows", str(self.scored.score.rows)),
            ("protocol_version", self.protocol_version),
            ("judge_calls", str(self.scored.score.judge_calls)),
            ("fallbacks", str(self.scored.score.fallbacks)),
            ("rows_generated", str(self.generation.generated)),
            ("rows_reused", str(self.generation.reused)),
            ("model_revision", str(summary.get("model_revision"))),
            ("generation_contract_hash", str(summary.get("generation_contract_hash"))),
            ("responses_sha256", str((inputs.get("responses") or {}).get("sha256"))),
            ("dataset_sha256", str((inputs.get("dataset") or {}).get("sha256"))),
            ("records_sha256", str(summary["records"]["sha256"])),
            ("scores_path", str(self.scored.scores_path)),
        ]
        if self.verdict is not None:
            props += self.verdict.properties()
            if self.engine_note:
                props.append(("engine_note", self.engine_note))
        else:
            props.append(("verdict", "not judged"))
            props.append(("verdict_reason", self.verdict_reason))
        return props + engine_properties(self.engine)


@dataclass
class SliceRunner:
    """Everything a session needs to run slices of ``plan`` (see the module docstring)."""

    plan: Plan
    verdicts: CampaignJudge
    sources: Mapping[str, ArtifactSource]
    campaign_root: Path
    engines: EnginePool
    backend_kind: str
    judge: Judge | None = None
    judge_url: str | None = None
    manifest: Manifest | None = None
    allow_unprepared: bool = False  # score data files the manifest does not record (tiny-model lanes)
    generation_overrides: Mapping[str, Any] = field(default_factory=dict)  # tiny lanes only (e.g. max_tokens)
    cuda_available: Callable[[], bool] = field(default=lambda: _cuda_available())
    engine: Mapping[str, Any] | None = None  # generation engine record for new response files (environment.engine)
    progress: Any = False  # run_generation's progress: False (quiet), True (bar) or a factory (logged_progress)
    ray_address: str | None = None  # engines are Ray actors (GPUs are the cluster's, not this host's)
    #: the session's scheduler generating ahead (None: per-slice generation); set by :meth:`stream_ahead`
    stream: StreamAhead | None = field(default=None, init=False)
    _dataset_hashes: dict[Path, str] = field(default_factory=dict, init=False, repr=False)  # per session: a
    _judge_checked: bool = field(default=False, init=False, repr=False)  # dataclasses.replace copy starts afresh
    _outcomes: dict[Any, SliceOutcome] = field(default_factory=dict, init=False, repr=False)  # run this session

    @classmethod
    def from_plan(
        cls,
        release: Any,
        plan: Plan,
        *,
        backend: str,
        campaign_root: Path,
        base_url: str | None = None,
        device: str = "cpu",
        judge_url: str | None = None,
        canonical: Any = None,
        archive_root: Any = None,
        backend_overrides: Mapping[str, Any] | None = None,
        model_verify: str = "deep",
        ray_address: str | None = None,
        request_timeout: float | None = None,
        **extra: Any,
    ) -> SliceRunner:
        """A runner for ``plan``: sources and manifest from the data root, one ``backend`` engine per model,
        the judge at ``judge_url`` (None: judge routes are blocked), verdicts against the release's canonical values
        (``canonical``: others, e.g. a tiny-model lane's) under the plan's family, ``--alpha`` and ``--margin``
        (``archive_root``: the paper's per-row canonical credits for the canonical row variance).
        ``backend_overrides`` replace engine settings (tiny-model lanes: a small ``max_model_len``); ``extra`` sets
        other fields (``allow_unprepared``, ``generation_overrides``). Before a model's engine is created its
        directory is checked against its revision marker (``model_verify``: ``deep`` re-hashes every file,
        ``shallow`` reads the marker, ``none`` skips; an openai backend is never checked). With ``ray_address`` the
        engines are Ray actors on that cluster (:mod:`trace_lib.generation.backends.ray_engines`).

        Raises:
            UsageError: unknown backend, or the openai backend without ``base_url``.
        """
        from trace_lib.data.manifest import load_manifest, manifest_path
        from trace_lib.data.prepare import load_artifact_sources
        from trace_lib.generation.backends.base import BACKENDS, create_backend

        if backend not in BACKENDS:
            raise UsageError(f"unknown backend {backend!r}", field="--backend", hint=f"choose one of: {', '.join(BACKENDS)}")
        options = {**backend_options(backend, plan, base_url=base_url, device=device, request_timeout=request_timeout),
                   **(backend_overrides or {})}
        if model_verify not in ("deep", "shallow", "none"):
            raise UsageError("invalid model verification", field="--model-verify", found=model_verify,
                             expected="deep, shallow or none")

        def engine(model: ModelDescriptor) -> Backend:
            if model_verify != "none" and backend != "openai":
                _check_model_dir(model, deep=model_verify == "deep")
            if ray_address:  # engine actors on a Ray cluster, this process writing the stores
                from trace_lib.generation.backends.ray_engines import ray_engines

                return ray_engines(backend, model_path=model.local_path, served_name=model.slug,
                                   address=ray_address, options=options, tensor_parallel_size=plan.tp_size)
            return create_backend(backend, model_path=model.local_path, served_name=model.slug, **options)

        engines = EnginePool(engine)
        data_root = Path(plan.data_root or ".").resolve()
        manifest_file = manifest_path(data_root)
        from trace_lib.campaign.scorer import open_judge
        from trace_lib.campaign.verdicts import CampaignJudge

        judge = open_judge(judge_url)

        extra.setdefault("engine", generation_engine(release, backend, base_url=options.get("base_url")))
        verdicts = CampaignJudge(Path(campaign_root), release, plan, alpha=plan.tolerance_alpha, margin=plan.margin,
                                 canonical=canonical, archive_root=archive_root)
        return cls(
            plan=plan, verdicts=verdicts,
            sources=load_artifact_sources(release), campaign_root=Path(campaign_root), engines=engines,
            backend_kind=backend, judge=judge, judge_url=judge_url,
            manifest=load_manifest(manifest_file) if manifest_file.exists() else None, ray_address=ray_address,
            **extra,
        )

    def stream_ahead(self, selected: Sequence[Slice]) -> StreamAhead:
        """Generate the ``selected`` slices ahead, each model's in the background when its first slice is run
        (:class:`~trace_lib.campaign.stream_ahead.StreamAhead`); :meth:`run` then waits for a slice's rows."""
        from trace_lib.campaign.stream_ahead import StreamAhead

        self.stream = StreamAhead(self, selected)
        return self.stream

    def stream_session(self, items: Sequence[object], *, schedule: str, dist: str | None,
                       worker: str | None) -> StreamAhead | None:
        """Stream the selected slice tests of a pytest session's ``items`` when ``schedule`` and the xdist mode
        allow it (:func:`~trace_lib.campaign.stream_ahead.session_stream`); returns the stream, or None.

        Raises:
            UsageError: an unknown schedule.
        """
        from trace_lib.campaign.stream_ahead import session_stream

        self.stream = session_stream(self, items, schedule=schedule, dist=dist, worker=worker)
        return self.stream

    @property
    def data_root(self) -> Path:
        return Path(self.plan.data_root or ".").resolve()

    def protocol(self, slice_: Slice) -> Protocol:
        """The slice's protocol; raises ProtocolNotImplementedError (a failure, never a skip)."""
        from trace_lib.benchmarks.registry import get_protocol

        return get_protocol(slice_.benchmark)

    def dataset_path(self, slice_: Slice) -> Path:
        return self.sources[slice_.benchmark].local_path(self.data_root)

    def blocker(self, slice_: Slice, protocol: Protocol, *, need_judge: bool = True) -> str | None:
        """Why this slice cannot run here, in one exact sentence; None when it can (``need_judge=False``:
        ``--phase generate``, where nothing is scored)."""
        model = self.plan.model(slice_.model)
        if self.backend_kind != "openai" and not Path(model.local_path).is_dir():
            return f"model dir missing: {model.slug} ({model.local_path})"
        dataset = self.dataset_path(slice_)
        if not dataset.exists():
            return f"dataset missing: {slice_.benchmark} ({dataset})"
        if (self.backend_kind in GPU_BACKENDS and not self.ray_address and not self.responses_complete(slice_)
                and not self.cuda_available()):
            return "no CUDA GPU"
        if need_judge and protocol.judge != "none" and self.judge is None:
            return f"judge URL not set (--judge-url / TRACE_JUDGE_URL) for judge route {slice_.benchmark}"
        return None

    def responses_complete(self, slice_: Slice) -> bool:
        """Whether the store already holds every row (then no engine and no GPU is needed; ``--phase score``
        requires it)."""
        from trace_lib.generation.store import load_responses, response_path

        path = response_path(self.campaign_root, model=slice_.model, seed=slice_.seed, benchmark=slice_.benchmark)
        if not path.is_file():
            return False
        try:
            return len(load_responses(path)) == self.plan.rows(slice_)
        except InputError:
            return False

    def dataset_entry(self, slice_: Slice) -> DatasetEntry | None:
        """The manifest's entry of the slice's benchmark (None: unprepared data, allowed with ``allow_unprepared``).

        Raises:
            UsageError: the benchmark is not prepared.
        """
        from trace_lib.campaign.jobs import dataset_entry

        return dataset_entry(self.manifest, slice_.benchmark, allow_unprepared=self.allow_unprepared)

    def slice_job(self, slice_: Slice, protocol: Protocol) -> SliceJob:
        """The slice's generation job (:func:`~trace_lib.campaign.jobs.slice_job`), with this session's generation
        overrides and engine record.

        Raises:
            UsageError: the benchmark is not prepared.
        """
        from trace_lib.campaign.jobs import slice_job

        entry = self.dataset_entry(slice_)
        return slice_job(slice_, protocol, model=self.plan.model(slice_.model), source=self.sources[slice_.benchmark],
                         campaign_root=self.campaign_root, data_root=self.data_root,
                         generation={**self.plan.suite.generation, **self.generation_overrides}, dataset=entry,
                         engine=lambda: refresh_engine(self.engine), expected_rows=self.plan.rows(slice_))

    def _dataset_ref(self, path: Path) -> FileRef:
        from trace_lib.release.load import sha256_file

        if path.is_file() and path not in self._dataset_hashes:
            self._dataset_hashes[path] = sha256_file(path)
        return FileRef(str(path), self._dataset_hashes.get(path, "directory"))

    def _check_judge(self, protocol: Protocol) -> None:
        if protocol.judge != "none" and self.judge is not None and not self._judge_checked:
            check = getattr(self.judge, "check", None)
            if callable(check):
                check()
            self._judge_checked = True

    def generate(self, slice_: Slice) -> SliceRun:
        """Generate what is missing (``--phase generate``): the store then covers every row of the dataset with
        this slice's request identity (stale rows are regenerated), or this raises.

        Raises:
            ProtocolNotImplementedError, UsageError, InputError, BackendError: as :meth:`run`.
        """
        protocol = self.protocol(slice_)
        return self._generate(slice_, protocol, protocol.load(self.dataset_path(slice_)))[0]

    def _generate(self, slice_: Slice, protocol: Protocol, rows: Sequence[Any]) -> tuple[SliceRun, Path]:
        from trace_lib.campaign.jobs import run_job

        job = self.slice_job(slice_, protocol)
        return run_job(job, self.engines.lazy(self.plan.model(slice_.model), self.backend_kind), rows=rows,
                       progress=self.progress)

    def close(self) -> None:
        """Stop generating ahead (persisting what was received) and release the engine."""
        if self.stream is not None:
            self.stream.close()
        self.engines.close()

    def run(self, slice_: Slice) -> SliceOutcome:
        """Generate what is missing (or wait for the session's stream to store it), score, judge against
        canonical.

        Raises:
            ProtocolNotImplementedError, UsageError, InputError, BackendError, JudgeError: the slice cannot be
                produced (each one line, naming what to do).
        """
        protocol = self.protocol(slice_)
        dataset_path = self.dataset_path(slice_)
        rows = protocol.load(dataset_path)
        run = self.stream.result(slice_) if self.stream is not None and self.stream.covers(slice_) else None
        if run is None:
            run, responses_path = self._generate(slice_, protocol, rows)
        else:
            responses_path = run.path
        self._check_judge(protocol)
        scored = run_scoring(
            protocol, rows, responses_path,
            scores_dir(self.campaign_root, model=slice_.model, seed=slice_.seed, benchmark=slice_.benchmark),
            judge=self.judge, judge_url=self.judge_url, dataset=self._dataset_ref(dataset_path),
        )
        outcome = SliceOutcome(slice_.id, run, scored, None, protocol.version, read_stored_engine(responses_path))
        self._outcomes[slice_] = outcome
        return outcome

    def judged(self, slice_: Slice, *, generate: bool = True) -> SliceOutcome:
        """:meth:`run` (once per session), then the slice's verdict from every planned seed of its cell: the cell's
        other seeds are run first when they are not scored yet (their own tests then reuse them); a seed that cannot
        run here leaves the verdict None with the reason (``generate=False``, ``--phase score``: a seed whose
        responses are not all stored cannot run here either).

        Raises:
            ProtocolNotImplementedError, UsageError, InputError, BackendError, JudgeError: as :meth:`run`.
        """
        outcome = self._outcomes.get(slice_) or self.run(slice_)
        if random_weights(outcome.engine):  # TRACE_VLLM_LOAD_FORMAT=dummy: a benchmark's run, never a reproduction
            return dataclasses.replace(outcome, verdict_reason="no verdict: the responses came from random weights "
                                                               "(TRACE_VLLM_LOAD_FORMAT=dummy, benchmarks only)")
        if slice_.id not in self.verdicts.specs:
            return dataclasses.replace(outcome, verdict_reason=f"no canonical score for model {slice_.model}")
        for other in self.verdicts.missing((slice_.model, slice_.benchmark)):
            other = type(slice_)(other.model, other.seed, other.benchmark)
            if other in self._outcomes:
                continue
            reason = self.blocker(other, self.protocol(other))
            if not reason and not generate and not self.responses_complete(other):
                reason = "responses incomplete; run --phase generate first"
            if reason:
                return dataclasses.replace(outcome, verdict_reason=f"not judged: seed {other.seed} of the cell "
                                                                   f"cannot run here ({reason})")
            self.run(other)
        verdict = self.verdicts.judge(slice_.id)
        if isinstance(verdict, str):
            return dataclasses.replace(outcome, verdict_reason=verdict)
        return dataclasses.replace(outcome, verdict=verdict.noted(outcome.engine_note))


def _check_model_dir(model: ModelDescriptor, *, deep: bool) -> None:
    from trace_lib.data.model_dirs import verify_model_dir

    report = verify_model_dir(model, deep=deep)
    if not report.ok:
        raise InputError("model directory does not match its descriptor", field=model.slug, found=report.problems[0],
                         hint=f"{len(report.problems)} problem(s); run 'trace-repro prepare-models --verify-only'")


def worker_gpu_group(plan: Plan, worker_id: str | None) -> tuple[int, ...] | None:
    """The GPU group of an xdist worker (``gwN`` -> the N-th group); None outside xdist.

    Raises:
        UsageError: more workers than GPU groups (two engines would share GPUs).
    """
    if not worker_id or not worker_id.startswith("gw") or not ascii_digits(worker_id[2:]):
        return None
    index = int(worker_id[2:])
    if index >= len(plan.gpu_groups):
        raise UsageError(f"xdist worker {worker_id} has no GPU group (-n may be at most {len(plan.gpu_groups)}, "
                         f"the number of GPU groups)", field="--gpu-groups",
                         hint="give one GPU group per worker, e.g. --gpu-groups '0 1 2 3' with -n 4")
    return plan.gpu_groups[index]


def _cuda_available() -> bool:
    """Whether torch sees a CUDA device (imports torch; only called for GPU backends)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())
