"""Run one slice end to end: generate (resumable, through a generation backend) -> score -> tolerance verdict.

:class:`SliceRunner` is what ``tests_reproduction`` and the tiny-model lanes call; it holds the session's plan,
tolerance rule, judge and engine pool. Per slice:

1. the protocol (an unimplemented one raises :class:`~trace_lib.errors.ProtocolNotImplementedError`: the slice
   fails, never passes or skips);
2. :meth:`SliceRunner.blocker` names what is missing to run it (model directory, dataset file, CUDA GPU, judge
   URL) in one exact sentence, which the tests turn into a skip;
3. generation into ``<campaign>/generation/seed_<S>/<model>/<benchmark>.jsonl`` (rows already stored are
   reused; the engine is created only when some row is missing, once per model);
4. scoring into ``<campaign>/scoring/seed_<S>/<model>/<benchmark>/`` (``records.jsonl``, ``scores.json``);
5. the verdict of :mod:`trace_lib.aggregation.tolerance` when the model has canonical scores.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from trace_lib.aggregation.tolerance import ToleranceRule, Verdict
from trace_lib.errors import InputError, UsageError
from trace_lib.scoring.score import FileRef, ScoredSlice, run_scoring, scores_dir

if TYPE_CHECKING:
    from trace_lib.benchmarks.protocol import Protocol
    from trace_lib.campaign.models import ModelDescriptor
    from trace_lib.campaign.plan import Plan, Slice
    from trace_lib.data.manifest import DatasetEntry, Manifest
    from trace_lib.data.prepare import ArtifactSource
    from trace_lib.generation.backends.base import Backend
    from trace_lib.generation.request import ChatRequest, GenerationResult
    from trace_lib.generation.run import SliceRun
    from trace_lib.scoring.judge import Judge

#: Backends that run the model on a local GPU (``openai`` talks to a server; ``hf`` runs on ``--device``).
GPU_BACKENDS = frozenset({"vllm"})


def backend_options(kind: str, plan: Plan, *, base_url: str | None = None, device: str = "cpu") -> dict[str, Any]:
    """The keyword arguments of :func:`~trace_lib.generation.backends.base.create_backend` for ``kind``
    (vllm: the suite campaign's engine settings; openai: ``base_url``; hf: ``device``).

    Raises:
        UsageError: the openai backend without ``base_url``.
    """
    if kind == "vllm":
        return dict(tensor_parallel_size=plan.tp_size, allowed_local_media_path=str(Path(plan.data_root or ".").resolve()),
                    max_model_len=32768, max_num_seqs=256, gpu_memory_utilization=0.90, enforce_eager=False)
    if kind == "openai":
        if not base_url:
            raise UsageError("the openai backend needs --base-url", field="--base-url")
        return dict(base_url=base_url)
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

    def close(self) -> None:  # the pool owns the engine
        pass


@dataclass(frozen=True)
class SliceOutcome:
    """What running one slice produced: generation summary, scores on disk and the verdict (None: no canonical)."""

    slice_id: str
    generation: SliceRun
    scored: ScoredSlice
    verdict: Verdict | None
    protocol_version: str

    @property
    def score(self) -> float:
        return self.scored.score.score

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
            props += [(k, v) for k, v in self.verdict.properties() if k not in ("rows",)]
        else:
            props.append(("verdict", "no canonical score"))
        return props


@dataclass
class SliceRunner:
    """Everything a session needs to run slices of ``plan`` (see the module docstring)."""

    plan: Plan
    rule: ToleranceRule
    sources: Mapping[str, ArtifactSource]
    campaign_root: Path
    engines: EnginePool
    backend_kind: str
    judge: Judge | None = None
    judge_url: str | None = None
    manifest: Manifest | None = None
    allow_unprepared: bool = False  # score data files the manifest does not record (tiny-model lanes)
    cuda_available: Callable[[], bool] = field(default=lambda: _cuda_available())
    _dataset_hashes: dict[Path, str] = field(default_factory=dict, repr=False)
    _judge_checked: bool = field(default=False, repr=False)

    @property
    def data_root(self) -> Path:
        return Path(self.plan.data_root or ".").resolve()

    def protocol(self, slice_: Slice) -> Protocol:
        """The slice's protocol; raises ProtocolNotImplementedError (a failure, never a skip)."""
        from trace_lib.benchmarks.registry import get_protocol

        return get_protocol(slice_.benchmark)

    def dataset_path(self, slice_: Slice) -> Path:
        return self.sources[slice_.benchmark].local_path(self.data_root)

    def blocker(self, slice_: Slice, protocol: Protocol) -> str | None:
        """Why this slice cannot run here, in one exact sentence; None when it can."""
        model = self.plan.model(slice_.model)
        if self.backend_kind != "openai" and not Path(model.local_path).is_dir():
            return f"model dir missing: {model.slug} ({model.local_path})"
        dataset = self.dataset_path(slice_)
        if not dataset.exists():
            return f"dataset missing: {slice_.benchmark} ({dataset})"
        if self.backend_kind in GPU_BACKENDS and not self._responses_complete(slice_) and not self.cuda_available():
            return "no CUDA GPU"
        if protocol.judge != "none" and self.judge is None:
            return f"judge URL not set (--judge-url / TRACE_JUDGE_URL) for judge route {slice_.benchmark}"
        return None

    def _responses_complete(self, slice_: Slice) -> bool:
        """Whether the store already holds every row (then no engine and no GPU is needed)."""
        from trace_lib.generation.store import load_responses, response_path

        path = response_path(self.campaign_root, model=slice_.model, seed=slice_.seed, benchmark=slice_.benchmark)
        if not path.is_file():
            return False
        try:
            return len(load_responses(path)) == self.plan.rows(slice_)
        except InputError:
            return False

    def _dataset_entry(self, slice_: Slice) -> DatasetEntry | None:
        entry = self.manifest.datasets.get(slice_.benchmark) if self.manifest is not None else None
        if entry is None and not self.allow_unprepared:
            raise UsageError("benchmark data is not prepared", field=slice_.benchmark,
                             hint=f"run 'trace-repro prepare-data --benchmark {slice_.benchmark}'")
        return entry

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

    def run(self, slice_: Slice) -> SliceOutcome:
        """Generate what is missing, score, judge against canonical.

        Raises:
            ProtocolNotImplementedError, UsageError, InputError, BackendError, JudgeError: the slice cannot be
                produced (each one line, naming what to do).
        """
        from trace_lib.generation.run import open_slice_store, run_generation

        protocol = self.protocol(slice_)
        model = self.plan.model(slice_.model)
        source = self.sources[slice_.benchmark]
        entry = self._dataset_entry(slice_)
        dataset_path = self.dataset_path(slice_)
        rows = protocol.load(dataset_path)
        generation = self.plan.suite.generation
        with open_slice_store(self.campaign_root, slice_, model, generation,
                              dataset_snapshot=entry.snapshot_sha256 if entry else None) as store:
            run = run_generation(slice_, rows, protocol, self.engines.lazy(model, self.backend_kind), store,
                                 source.image_dir(self.data_root), generation=generation, progress=False,
                                 dataset=entry, data_root=self.data_root)
            responses_path = store.path
        self._check_judge(protocol)
        scored = run_scoring(
            protocol, rows, responses_path,
            scores_dir(self.campaign_root, model=slice_.model, seed=slice_.seed, benchmark=slice_.benchmark),
            judge=self.judge, judge_url=self.judge_url, dataset=self._dataset_ref(dataset_path),
        )
        verdict = None
        if (slice_.model, slice_.benchmark) in self.rule.benchmarks:
            verdict = self.rule.check_slice(slice_.model, slice_.benchmark, scored.score.score, seed=slice_.seed,
                                            rows=scored.score.rows)
        return SliceOutcome(slice_.id, run, scored, verdict, protocol.version)


def _cuda_available() -> bool:
    """Whether torch sees a CUDA device (imports torch; only called for GPU backends)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())
