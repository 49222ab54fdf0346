"""The ``archive`` reproduction lane: per planned slice, re-score the paper's archived responses exactly and check
that trace-repro's prompts are the paper's (``tests_reproduction/test_archive.py`` calls this; tests stay thin).

Needs a fetched archive (``--archive-root`` / ``TRACE_ARCHIVE_ROOT``) and the benchmark data (``--data-root``:
the archive holds no questions, answers or images). Judge routes use ``--judge-url`` when given, else the replay
judge. :meth:`ArchiveLane.blocker` names, in one sentence, what is missing to run a slice (the test skips with it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_lib.archive.extraction_form import benchmark_routes, comparable
from trace_lib.archive.identity import IdentityReport, compare_identity
from trace_lib.archive.reader import ArchiveRoot, open_archive
from trace_lib.archive.rescore import RescoreOutcome, canonical_seed_scores, rescore_slice
from trace_lib.archive.schema import SliceKey
from trace_lib.errors import InputError, TraceReproError, UsageError

NO_ARCHIVE = ("no archive root given (--archive-root / TRACE_ARCHIVE_ROOT); fetch one with "
              "'trace-repro fetch-runs --dest DIR'")


@dataclass(frozen=True)
class ArchiveSliceResult:
    """What the lane found for one slice: the exact re-score and, with the benchmark data, prompt identity."""

    rescore: RescoreOutcome
    identity: IdentityReport | None

    def properties(self) -> list[tuple[str, str]]:
        return self.rescore.properties() + ([] if self.identity is None else self.identity.properties())


@dataclass
class ArchiveLane:
    """Session state of the lane: release, plan, the opened archive (or why not), sources, canonical scores."""

    release: Any
    plan: Any
    archive: ArchiveRoot | None
    archive_problem: str | None
    judge: Any = None
    _canonical: dict[tuple[str, int, str], float] = field(default_factory=dict)
    routes: dict[str, str] = field(default_factory=dict)  # benchmark -> the suite's scoring route
    _sources: Any = None

    @classmethod
    def create(cls, release: Any, plan: Any, *, archive_root: str | None, judge_url: str | None = None) -> ArchiveLane:
        archive, problem = None, None
        if not archive_root:
            problem = NO_ARCHIVE
        else:
            try:
                archive = open_archive(archive_root)
            except TraceReproError as exc:
                problem = exc.render()
        judge = None
        if judge_url:
            from trace_lib.scoring.judge import OpenAIJudge

            judge = OpenAIJudge(judge_url)
        return cls(release, plan, archive, problem, judge, canonical_seed_scores(release), benchmark_routes(release))

    @property
    def data_root(self) -> Path:
        return Path(self.plan.data_root or ".").resolve()

    def dataset_path(self, benchmark: str) -> Path:
        if self._sources is None:
            from trace_lib.data.prepare import load_artifact_sources

            self._sources = load_artifact_sources(self.release)
        return self._sources[benchmark].local_path(self.data_root)

    def blocker(self, slice_: Any) -> str | None:
        """Why ``slice_`` cannot be checked here, in one exact sentence; None when it can."""
        if self.archive is None:
            return self.archive_problem
        key = SliceKey(slice_.model, slice_.seed, slice_.benchmark)
        try:
            run = self.archive.run_of(key)
        except UsageError:
            return (f"slice not in the fetched archive: {slice_.id} (trace-repro fetch-runs --dest "
                    f"{self.archive.root} --model-id {slice_.model} --seeds {slice_.seed} --benchmark {slice_.benchmark})")
        missing = [c for c, ref in run.parts[key].items() if not run.part_path(ref).is_file()]
        if missing:
            return (f"archive parts not fetched for {slice_.id}: {', '.join(missing)} (trace-repro fetch-runs --dest "
                    f"{self.archive.root} --model-id {slice_.model} --seeds {slice_.seed} --benchmark {slice_.benchmark})")
        dataset = self.dataset_path(slice_.benchmark)
        if not dataset.exists():
            return f"dataset missing: {slice_.benchmark} ({dataset}); the archive holds no questions or answers"
        return None

    def run(self, slice_: Any) -> ArchiveSliceResult:
        """Re-score the slice and compare its prompts (see the module docstring).

        Raises:
            TraceReproError: a tampered part, rows that differ from the dataset, a live judge failure.
        """
        from trace_lib.benchmarks.registry import get_protocol
        from trace_lib.generation.run import prepare_rows

        assert self.archive is not None
        key = SliceKey(slice_.model, slice_.seed, slice_.benchmark)
        protocol = get_protocol(slice_.benchmark)
        dataset = self.dataset_path(slice_.benchmark)
        rows = protocol.load(dataset)
        archived = list(self.archive.iter_slice(key))  # read once: re-score and identity compare the same rows
        outcome = rescore_slice(self.archive, key, protocol, rows, judge=self.judge, dataset=str(dataset),
                                canonical=self._canonical.get((key.model_id, key.seed, key.benchmark_id)),
                                compare_extraction=comparable(self.routes.get(slice_.benchmark)), archived=archived)
        identity = None
        try:
            prepared = prepare_rows(rows, protocol, self._sources[slice_.benchmark].image_dir(self.data_root),
                                    served_name=slice_.model, generation=self.plan.suite.generation, seed=slice_.seed)
        except InputError:
            prepared = None  # images not materialisable here: identity is not checked (the receipt says so)
        if prepared is not None:
            identity = compare_identity(key, archived, prepared, model_id=slice_.model)
        return ArchiveSliceResult(outcome, identity)
