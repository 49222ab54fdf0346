"""The ``archive`` reproduction lane: per slice, re-score the paper's archived responses exactly and check that
trace-repro's prompts are the paper's in every hash field (``tests_reproduction/test_archive.py`` and
``trace-repro archive verify`` call this; tests stay thin).

Needs a fetched archive (``--archive-root`` / ``TRACE_ARCHIVE_ROOT``; ``--archive-run-id`` when a root holds several
runs of one slice) and the benchmark data (``--data-root``: the archive holds no questions, answers or images).
Judge routes use ``--judge-url`` when given, else the replay judge. :meth:`ArchiveLane.blocker` names, in one
sentence, what is missing to run a slice (the test skips with it). Every result says which run answered and
whether it is the release's pinned source artifact (:mod:`trace_lib.archive.provenance`); a failure is one line
(:meth:`ArchiveSliceResult.failure`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_lib.archive.extraction_form import benchmark_routes, comparable
from trace_lib.archive.identity import IdentityReport, benchmark_snapshot, compare_identity, dataset_view
from trace_lib.archive.provenance import SourceCheck, source_check
from trace_lib.archive.reader import ArchiveRoot, ArchiveRun, open_archive
from trace_lib.archive.rescore import RescoreOutcome, canonical_seed_scores, rescore_slice
from trace_lib.archive.schema import SliceKey
from trace_lib.errors import InputError, TraceReproError

NO_ARCHIVE = ("no archive root given (--archive-root / TRACE_ARCHIVE_ROOT); fetch one with "
              "'trace-repro fetch-runs --dest DIR'")
#: What the archive lane cannot prove on a CPU: the responses are the paper's, so sampling is not exercised.
LEFT_TO_GPU = "sampling: regenerate the slice with vLLM on a GPU (pytest tests_reproduction -m reproduction)"


@dataclass(frozen=True)
class ArchiveSliceResult:
    """What the lane found for one slice: the run that answered, the exact re-score and, with the benchmark data,
    prompt identity."""

    rescore: RescoreOutcome
    identity: IdentityReport | None
    source: SourceCheck
    identity_problem: str | None = None  # why identity was not checked (identity is None)

    def failure(self) -> str | None:
        """One line naming what differs and what the lane was given (None when everything checked is exact)."""
        problems, rescore = [], self.rescore
        if not rescore.exact:
            if self.source.pinned or rescore.score is None or rescore.ok:
                problems.append(rescore.explain())
            else:
                problems.append(f"re-scored {rescore.score!r} vs canonical {rescore.canonical!r}")
        if self.identity is not None and not self.identity.ok:
            problems.append(self.identity.explain())
        if not problems:
            return None
        return "; ".join(problems) + ("" if self.source.pinned else f": {self.source.describe()}")

    def properties(self) -> list[tuple[str, str]]:
        props = [("archive_run", self.source.run_id), ("archive_manifest_sha256", self.source.manifest_sha256),
                 ("source_artifact", "yes" if self.source.pinned else self.source.describe())]
        props += self.rescore.properties()
        if self.identity is not None:
            props += self.identity.properties()
        else:
            props.append(("identity", f"not checked: {self.identity_problem}"))
        props.append(("left_to_gpu", LEFT_TO_GPU))
        return props


@dataclass
class ArchiveLane:
    """Session state of the lane: release, data root, the opened archive (or why not), sources, canonical scores,
    and the per-benchmark dataset snapshots of the runs' views (each benchmark hashed once)."""

    release: Any
    data_root: Path
    archive: ArchiveRoot | None
    archive_problem: str | None
    judge: Any = None
    _canonical: dict[tuple[str, int, str], float] = field(default_factory=dict)
    routes: dict[str, str] = field(default_factory=dict)  # benchmark -> the suite's scoring route
    _sources: Any = None
    _snapshots: dict[str, tuple[str, int] | str] = field(default_factory=dict)  # benchmark -> (snapshot, rows)|why
    _file_hashes: dict[Path, str] = field(default_factory=dict)

    @classmethod
    def create(cls, release: Any, *, data_root: Path | str | None, archive_root: str | None,
               judge_url: str | None = None, run_id: str | None = None) -> ArchiveLane:
        archive, problem = None, None
        if not archive_root:
            problem = NO_ARCHIVE
        else:
            try:
                archive = open_archive(archive_root, run_id=run_id)
            except TraceReproError as exc:
                problem = exc.render()
        judge = None
        if judge_url:
            from trace_lib.scoring.judge import OpenAIJudge

            judge = OpenAIJudge(judge_url)
        return cls(release, Path(data_root or ".").resolve(), archive, problem, judge, canonical_seed_scores(release),
                   benchmark_routes(release))

    @property
    def suite(self) -> Any:
        from trace_lib.release.suite import load_suite

        return load_suite(self.release)

    def dataset_path(self, benchmark: str) -> Path:
        if self._sources is None:
            from trace_lib.data.prepare import load_artifact_sources

            self._sources = load_artifact_sources(self.release)
        if benchmark not in self._sources:
            raise InputError(f"no data source for benchmark {benchmark!r} in the release", field="benchmark_id")
        return self._sources[benchmark].local_path(self.data_root)

    def blocker(self, slice_: Any) -> str | None:
        """Why ``slice_`` cannot be checked here, in one exact sentence; None when it can (a slice several runs
        hold is not a skip: :meth:`run` fails on it in one line)."""
        if self.archive is None:
            return self.archive_problem
        key = SliceKey(slice_.model, slice_.seed, slice_.benchmark)
        holders = [run for run in self.archive.runs if key in run.parts]
        if not holders:
            return f"slice not in the fetched archive: {slice_.id} ({self.archive.fetch_hint(key)})"
        if len(holders) > 1:
            return None
        run = holders[0]
        missing = [c for c, ref in run.parts[key].items() if not run.part_path(ref).is_file()]
        if missing:
            return f"archive parts not fetched for {slice_.id}: {', '.join(missing)} ({self.archive.fetch_hint(key)})"
        dataset = self.dataset_path(slice_.benchmark)
        if not dataset.exists():
            return f"dataset missing: {slice_.benchmark} ({dataset}); the archive holds no questions or answers"
        return None

    def _prepare(self, benchmark: str, *, model: str, seed: int) -> tuple[Any, list[Any], list[Any] | None]:
        """(protocol, dataset rows, prepared rows or None when the images cannot be materialised here)."""
        from trace_lib.benchmarks.registry import get_protocol
        from trace_lib.generation.run import prepare_rows

        protocol = get_protocol(benchmark)
        path = self.dataset_path(benchmark)
        rows = protocol.load(path)
        try:
            prepared = prepare_rows(rows, protocol, self._sources[benchmark].image_dir(self.data_root),
                                    served_name=model, generation=self.suite.generation, seed=seed, source=path)
        except InputError:
            prepared = None
        return protocol, rows, prepared

    def _snapshot(self, benchmark: str, prepared: list[Any] | None = None) -> tuple[str, int] | str:
        """A view benchmark's (snapshot, rows) from trace-repro's own prepared rows, or why it cannot be had."""
        if benchmark not in self._snapshots:
            try:
                if prepared is None:
                    if not self.dataset_path(benchmark).exists():
                        raise InputError("not in the data root", file=str(self.dataset_path(benchmark)))
                    _, _, prepared = self._prepare(benchmark, model="view", seed=0)
                if prepared is None:
                    self._snapshots[benchmark] = f"{benchmark}: prompt images not materialisable from the data root"
                else:
                    self._snapshots[benchmark] = (benchmark_snapshot(prepared, file_hashes=self._file_hashes),
                                                  len(prepared))
            except TraceReproError as exc:
                self._snapshots[benchmark] = f"{benchmark}: {exc.render()}"
        return self._snapshots[benchmark]

    def view_of(self, run: ArchiveRun, *, current: str, prepared: list[Any]) -> tuple[Any, str | None]:
        """The run's :class:`~trace_lib.data.manifest.DatasetView` (every benchmark its metadata lists), or None
        and why not."""
        snapshots: dict[str, str] = {}
        rows: dict[str, int] = {}
        for benchmark in run.view():
            got = self._snapshot(benchmark, prepared if benchmark == current else None)
            if isinstance(got, str):
                return None, f"the run's dataset view is not all here ({got})"
            snapshots[benchmark], rows[benchmark] = got
        return dataset_view(self.suite, snapshots, rows), None

    def run(self, slice_: Any) -> ArchiveSliceResult:
        """Re-score the slice and compare its prompts (see the module docstring).

        Raises:
            TraceReproError: a tampered part, rows that differ from the dataset, several runs holding the slice,
                a live judge failure.
        """
        assert self.archive is not None
        key = SliceKey(slice_.model, slice_.seed, slice_.benchmark)
        run = self.archive.run_of(key)
        source = source_check(self.release, run, model_id=key.model_id)
        protocol, rows, prepared = self._prepare(slice_.benchmark, model=slice_.model, seed=slice_.seed)
        archived = list(self.archive.iter_slice(key))  # read once: re-score and identity compare the same rows
        outcome = rescore_slice(self.archive, key, protocol, rows, judge=self.judge,
                                dataset=str(self.dataset_path(slice_.benchmark)),
                                canonical=self._canonical.get((key.model_id, key.seed, key.benchmark_id)),
                                compare_extraction=comparable(self.routes.get(slice_.benchmark)), archived=archived)
        if prepared is None:
            return ArchiveSliceResult(outcome, None, source,
                                      "prompt images could not be materialised from the data root")
        view, why = self.view_of(run, current=slice_.benchmark, prepared=prepared)
        identity = compare_identity(key, archived, prepared, model_id=slice_.model, view=view)
        if why is not None:
            identity = _with_reason(identity, why)
        return ArchiveSliceResult(outcome, identity, source)


def _with_reason(report: IdentityReport, why: str) -> IdentityReport:
    from dataclasses import replace

    return replace(report, not_compared={name: why for name in report.not_compared})


def slice_of(key: SliceKey) -> Any:
    """A lane slice (``model``, ``seed``, ``benchmark``, ``id``) for an archive key (``trace-repro archive verify``)."""
    from trace_lib.reports.collect import SliceKey as ReportKey

    return ReportKey(key.model_id, key.seed, key.benchmark_id)


