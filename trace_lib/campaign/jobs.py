"""One slice's generation job: the one place a :class:`~trace_lib.campaign.scheduler.SliceJob` is made, and the
per-slice path that runs a job alone through :func:`~trace_lib.generation.run.run_generation`.

Every driver builds its jobs here: ``trace-repro generate`` (:mod:`trace_lib.cli.generate`), the pytest session's
stream (:mod:`trace_lib.campaign.stream_ahead`) and :class:`~trace_lib.campaign.run_slice.SliceRunner`'s own
per-slice generation; so a slice's store identity (model, generation settings, dataset snapshot, engine record) is
the same whichever path generated it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from trace_lib.campaign.scheduler import SliceJob
from trace_lib.errors import UsageError

if TYPE_CHECKING:
    from trace_lib.benchmarks.protocol import Protocol, Row
    from trace_lib.slices import ModelDescriptor
    from trace_lib.slices import Slice
    from trace_lib.data.manifest import DatasetEntry, Manifest
    from trace_lib.data.prepare import ArtifactSource
    from trace_lib.generation.backends.base import Backend
    from trace_lib.generation.run import Progress, SliceRun


def dataset_entry(manifest: Manifest | None, benchmark: str, *, allow_unprepared: bool) -> DatasetEntry | None:
    """The manifest's entry of ``benchmark`` (None: not recorded, allowed only with ``allow_unprepared``).

    Raises:
        UsageError: the benchmark is not prepared and ``allow_unprepared`` is false.
    """
    entry = manifest.datasets.get(benchmark) if manifest is not None else None
    if entry is None and not allow_unprepared:
        raise UsageError("benchmark data is not prepared", field=benchmark,
                         hint=f"run 'trace-repro prepare-data --benchmark {benchmark}'")
    return entry


def slice_job(
    slice_: Slice,
    protocol: Protocol,
    *,
    model: ModelDescriptor,
    source: ArtifactSource,
    campaign_root: Path,
    data_root: Path,
    generation: Mapping[str, Any],
    dataset: DatasetEntry | None,
    engine: Callable[[], Mapping[str, Any] | None],
    expected_rows: int | None = None,
) -> SliceJob:
    """The job of ``slice_``: rows from ``source``'s file under ``data_root``, its store under ``campaign_root``
    bound to ``dataset``'s snapshot and to the engine record ``engine()`` gives when the store is opened."""
    from trace_lib.generation.run import open_slice_store

    path = source.local_path(data_root)
    return SliceJob(
        slice=slice_, protocol=protocol, load_rows=lambda: protocol.load(path), image_dir=source.image_dir(data_root),
        open_store=lambda: open_slice_store(campaign_root, slice_, model, generation,
                                            dataset_snapshot=dataset.snapshot_sha256 if dataset else None,
                                            engine=engine()),
        generation=generation, dataset=dataset, data_root=data_root, expected_rows=expected_rows, dataset_path=path,
    )


def run_job(job: SliceJob, backend: Backend, *, rows: Sequence[Row] | None = None, progress: bool | Progress = True,
            batch_size: int = 64) -> tuple[SliceRun, Path]:
    """Generate ``job`` alone (the per-slice path): its rows (``rows``, else loaded first, so that a dataset that
    cannot be read fails before any response file is created) through ``backend`` into its store; returns the
    generation summary and the store's path.

    Raises:
        InputError, BackendError: as :func:`~trace_lib.generation.run.run_generation`.
    """
    from trace_lib.generation.run import run_generation

    if rows is None:
        rows = job.load_rows()
    with job.open_store() as store:
        run = run_generation(job.slice, rows, job.protocol, backend, store, job.image_dir, generation=job.generation,
                             progress=progress, batch_size=batch_size, dataset=job.dataset, data_root=job.data_root,
                             source=job.dataset_path)
        return run, store.path
