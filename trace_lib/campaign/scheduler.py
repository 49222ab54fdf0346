"""The campaign scheduler: every pending slice of a model streams through one engine; per-slice stores stay the
unit of durability and resume.

A producer thread prepares the slices (store opened with its identity check, rows -> requests, manifest check;
what :func:`~trace_lib.generation.run.plan_slice_rows` does) one benchmark at a time and puts their pending
requests on a bounded :class:`~trace_lib.generation.backends.base.RequestFeed`. The fresh slices of a benchmark
(nothing stored yet; one per seed) are queued in lockstep, ``chunk_rows`` rows at a time as they are prepared:
the engine starts on the first rows at once, and each row's seeds arrive back to back, so vLLM's multimodal-
processor and prefix caches can serve an image and prompt again for the next seed while they still hold it. A resumed slice is
planned whole first (stale rows are dropped before anything is sent). A row that fails to prepare ends its slice
with that error once the rows already queued are answered and stored (valid rows, kept for the re-run). The
engine pulls from the feed while it runs (the vllm backend keeps its continuous batch full across slice
boundaries; each request carries its own slice's seed). The thread calling :meth:`CampaignScheduler.run` is the
single writer: it routes each result by a campaign-unique request id to its slice's store, appends in durable
batches (``batch_size`` rows of a slice, or every ``flush_interval_s``), and the moment a slice's last row is
stored closes that store and hands the slice to ``on_complete`` (scoring, a waiting test) while generation goes
on. The lines written are those of the per-slice path (:func:`~trace_lib.generation.run.stored_response`).

Faults stay where they happen: a request the backend could not answer (a
:class:`~trace_lib.generation.request.RequestFailure`: refused, malformed answers) fails only its own slice,
with that one-line error, once the slice's other requests are answered and stored; every other slice goes on.
A backend failure, an answer to an unknown or repeated request, or a store write that fails (disk full) ends
every unfinished slice after each store has had one more chance to persist what it buffered (appends are all or
nothing and never write a row twice, see :meth:`~trace_lib.generation.store.SliceStore.append`); a write error
is then re-raised. A slice's result, once handed to ``on_complete``, is never replaced.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from trace_lib.decoding import ascii_digits
from trace_lib.errors import BackendError, TraceReproError
from trace_lib.generation.backends.base import RequestFeed, RequestsFailed, stream_generate
from trace_lib.generation.request import RequestFailure
from trace_lib.generation.run import (
    ManifestCheck,
    PreparedRow,
    SliceRun,
    iter_prepared_rows,
    plan_slice_rows,
    stored_response,
)

if TYPE_CHECKING:
    from trace_lib.benchmarks.protocol import Protocol, Row
    from trace_lib.slices import Slice
    from trace_lib.data.manifest import DatasetEntry
    from trace_lib.generation.backends.base import Backend
    from trace_lib.generation.request import ChatRequest
    from trace_lib.generation.store import SliceStore, StoredResponse


@dataclass(frozen=True)
class SliceJob:
    """One slice to stream: how to load its rows and open its store (called on the producer thread)."""

    slice: Slice
    protocol: Protocol
    load_rows: Callable[[], Sequence[Row]]
    image_dir: Path
    open_store: Callable[[], SliceStore]
    generation: Mapping[str, Any]
    dataset: DatasetEntry | None = None
    data_root: Path | None = None
    expected_rows: int | None = None  # for the progress display's ETA (the suite's row count)
    dataset_path: Path | None = None  # the data file load_rows reads (named by an error a row's cell raises)


@dataclass(frozen=True)
class SliceResult:
    """How one slice ended: its generation summary, or the error that stopped it (never both)."""

    slice: Slice
    run: SliceRun | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class _Active:
    """A slice whose requests are (being) queued; the producer grows it, the writer answers it."""

    job: SliceJob
    store: SliceStore
    started: float
    by_key: dict[str, PreparedRow] = field(default_factory=dict)  # every prepared row, by row key
    rows: int = 0  # rows in the slice's dataset
    pending: int = 0  # requests queued
    reused: int = 0
    dropped: int = 0
    planned: bool = False  # every row is prepared and queued; set before the last requests are queued
    error: TraceReproError | None = None  # a row failed to prepare after earlier rows were queued
    answered: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)  # row key -> why the backend could not answer it
    buffer: list[StoredResponse] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.planned and len(self.answered) + len(self.failed) == self.pending


class CampaignProgress:
    """One status line per model every ``interval_s`` on stderr: slices and rows done, rows/s, output tokens/s,
    ETA (from the rows still expected at the current rate)."""

    def __init__(self, description: str, *, expected_rows: int, slices: int, interval_s: float = 10.0,
                 stream: Any = None) -> None:
        self.description, self.expected, self.slices, self.interval = description, expected_rows, slices, interval_s
        self.stream = stream if stream is not None else sys.stderr
        self.started = self.last = time.monotonic()
        self.generated = self.reused = self.tokens = self.slices_done = 0

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = self.generated / elapsed
        left = max(self.expected - self.generated - self.reused, 0)
        if not left:
            eta = "0:00:00"
        elif rate > 0:
            seconds = int(left / rate)
            eta = f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        else:
            eta = "unknown"
        return (f"[generate] {self.description}: {self.slices_done}/{self.slices} slices, "
                f"{self.generated + self.reused}/{self.expected} rows ({self.reused} reused), "
                f"{rate:.1f} rows/s, {self.tokens / elapsed:.0f} output tokens/s, ETA {eta}")

    def update(self, *, generated: int = 0, tokens: int = 0, reused: int = 0, slices: int = 0,
               force: bool = False) -> None:
        self.generated += generated
        self.tokens += tokens
        self.reused += reused
        self.slices_done += slices
        now = time.monotonic()
        if force or now - self.last >= self.interval:
            self.last = now
            print(self.line(), file=self.stream, flush=True)


class CampaignScheduler:
    """Stream the pending rows of many slices through ``backend`` (see the module docstring).

    ``on_complete(result)`` is called once per job, on the writer thread or (for a slice with nothing to
    generate, or one that failed to prepare) on the producer thread; it must be quick and thread-safe
    (set an event, submit to a pool).
    """

    def __init__(
        self,
        backend: Backend,
        *,
        feed_capacity: int = 4096,
        batch_size: int = 256,
        flush_interval_s: float = 1.0,
        chunk: int = 256,
        chunk_rows: int = 64,
        on_complete: Callable[[SliceResult], Any] | None = None,
        progress: CampaignProgress | None = None,
    ) -> None:
        self.backend = backend
        self.feed_capacity, self.batch_size, self.flush_interval_s, self.chunk, self.chunk_rows = (
            feed_capacity, batch_size, flush_interval_s, chunk, max(1, chunk_rows))
        self.on_complete = on_complete or (lambda result: None)
        self.progress = progress
        self._lock = threading.Lock()
        self._active: dict[int, _Active] = {}
        self._results: dict[int, SliceResult] = {}
        self._stop = threading.Event()
        self._producer_error: BaseException | None = None
        self._opening: dict[int, _Active] = {}  # producer only: stores opened, not yet handed to the writer or ended

    def stop(self) -> None:
        """Ask a running :meth:`run` to end after the current result (thread-safe); unfinished slices then end
        with "generation stopped" after every answer received is persisted."""
        self._stop.set()

    # -- producer ---------------------------------------------------------------------------------------------

    def _finish(self, slot: int, result: SliceResult) -> None:
        with self._lock:
            if slot in self._results:
                return
            self._results[slot] = result
        self.on_complete(result)

    def _produce(self, jobs: Sequence[SliceJob], feed: RequestFeed) -> None:
        try:
            for group in _benchmark_groups(jobs):
                fresh: list[tuple[int, _Active]] = []
                for slot in group:
                    if self._stop.is_set():
                        return
                    job = jobs[slot]
                    try:
                        store = job.open_store()
                    except TraceReproError as exc:
                        self._finish(slot, SliceResult(job.slice, error=exc))
                        continue
                    active = _Active(job, store, time.monotonic())
                    self._opening[slot] = active
                    if not store.done:
                        fresh.append((slot, active))
                        continue
                    try:
                        if not self._queue_planned(slot, active, feed):
                            self._nothing_to_queue(slot, active)
                    except TraceReproError as exc:
                        self._failed_preparing(slot, active, exc)
                self._queue_fresh(fresh, feed)
        except BaseException as exc:  # noqa: BLE001 - handed to the writer, which re-raises it
            self._producer_error = exc
        finally:
            # the writer closes the stores of the slices it was handed; a store opened but never handed over (an
            # error, or a stop that came while the producer was opening it) is closed here, or its lock would stay
            for active in self._opening.values():
                active.store.close(failed=True)
            self._opening.clear()
            while not feed.finish(timeout=0.2):  # a stopped consumer may never drain a full feed
                if self._stop.is_set():
                    break

    def _nothing_to_queue(self, slot: int, active: _Active) -> None:
        self._opening.pop(slot, None)
        active.store.close()
        if self.progress is not None:
            self.progress.update(slices=1)
        self._finish(slot, SliceResult(active.job.slice, run=_summary(active)))

    def _failed_preparing(self, slot: int, active: _Active, error: TraceReproError) -> None:
        """End a slice whose rows failed to prepare: at once if nothing was queued, else by the writer once the
        rows already queued are answered and stored."""
        self._opening.pop(slot, None)
        with self._lock:
            writer_owns = slot in self._active
            active.error, active.planned = error, True
        if not writer_owns:
            active.store.close(failed=True)
            self._finish(slot, SliceResult(active.job.slice, error=error))

    def _queue_planned(self, slot: int, active: _Active, feed: RequestFeed) -> bool:
        """A resumed slice: plan it whole (stale rows dropped), then queue what is missing; False if nothing is."""
        job = active.job
        work = plan_slice_rows(job.slice, job.load_rows(), job.protocol, active.store, job.image_dir,
                               generation=job.generation, dataset=job.dataset, data_root=job.data_root,
                               source=job.dataset_path)
        active.by_key, active.rows, active.reused, active.dropped = (
            work.by_key, len(work.prepared), work.reused, work.dropped)
        if self.progress is not None:
            self.progress.update(reused=work.reused)
        if not work.pending:
            return False
        self._queue(slot, active, feed, [work.by_key[r.request_id] for r in work.pending], last=True)
        return True

    def _queue_fresh(self, members: Sequence[tuple[int, _Active]], feed: RequestFeed) -> None:
        """Slices of one benchmark with nothing stored (its seeds): prepared, checked and queued ``chunk_rows``
        rows at a time, in lockstep, so each chunk of rows is queued once per seed back to back (the engine's
        multimodal-processor and prefix caches then serve the repeated images and prompts)."""
        streams: list[tuple[int, _Active, int, Iterator[PreparedRow], ManifestCheck | None]] = []
        hashed: dict[Path, str] = {}  # image digests, shared by the seeds' manifest checks
        for slot, active in members:
            job = active.job
            try:
                rows = job.load_rows()
                active.rows = len(rows)
                root = job.data_root if job.data_root is not None else job.image_dir
                check = ManifestCheck(job.dataset, root, hashed=hashed) if job.dataset is not None else None
                if check is not None:
                    check.row_count(len(rows))
            except TraceReproError as exc:
                self._failed_preparing(slot, active, exc)
                continue
            if not rows:
                self._nothing_to_queue(slot, active)
                continue
            prepared = iter_prepared_rows(rows, job.protocol, job.image_dir, served_name=job.slice.model,
                                          generation=job.generation, seed=job.slice.seed, source=job.dataset_path)
            streams.append((slot, active, len(rows), prepared, check))
        while streams:
            for stream in list(streams):
                if self._stop.is_set():
                    return
                slot, active, total, prepared, check = stream
                try:
                    chunk = list(itertools.islice(prepared, self.chunk_rows))
                    if check is not None:
                        check.rows(chunk)
                except TraceReproError as exc:
                    self._failed_preparing(slot, active, exc)
                    streams.remove(stream)
                    continue
                last = chunk[-1].ordinal == total - 1
                self._queue(slot, active, feed, chunk, last=last)
                if last:
                    streams.remove(stream)

    def _queue(self, slot: int, active: _Active, feed: RequestFeed, rows: list[PreparedRow], *, last: bool) -> None:
        """Register ``rows`` with their slice (the writer may answer them as soon as they are queued), then queue
        their requests; ``last`` marks the slice planned first, so its final answers find it complete."""
        with self._lock:
            for row in rows:
                active.by_key[row.request.request_id] = row
            active.pending += len(rows)
            active.planned = last
            self._active[slot] = active
        self._opening.pop(slot, None)
        for row in rows:
            routed = _routed(row.request, f"{slot}|{row.request.request_id}")
            while not feed.put(routed, timeout=0.2):
                if self._stop.is_set():
                    return

    # -- writer -----------------------------------------------------------------------------------------------

    def run(self, jobs: Sequence[SliceJob]) -> list[SliceResult]:
        """Generate every pending row of ``jobs``; one result per job, in job order.

        A request failure ends its own slice only. A backend failure (or an answer to an unknown or repeated
        request) ends every unfinished slice with that error after persisting every answer received; an
        ``OSError`` (a store write failed) and ``KeyboardInterrupt`` persist what they can, then propagate.
        """
        feed = RequestFeed(self.feed_capacity)
        producer = threading.Thread(target=self._produce, args=(jobs, feed), name="trace-repro-feed", daemon=True)
        producer.start()
        last_flush = time.monotonic()
        failure: BaseException | None = None
        write_error: OSError | None = None
        crash: BaseException | None = None
        answers = stream_generate(self.backend, feed, chunk=self.chunk)
        try:
            for result in answers:
                if self._stop.is_set():
                    failure = BackendError("generation stopped", field=self.backend.name,
                                           hint="re-run to generate the missing rows")
                    break
                slot_text, _, key = result.request_id.partition("|")
                active = self._active.get(int(slot_text)) if ascii_digits(slot_text) else None
                row = active.by_key.get(key) if active is not None else None
                if active is None or row is None or key in active.store.done:
                    raise BackendError("backend answered a request it was not sent", field=self.backend.name,
                                       found=result.request_id)
                if key in active.answered or key in active.failed:
                    raise BackendError("backend answered a request twice", field=self.backend.name,
                                       found=result.request_id)
                if isinstance(result, RequestFailure):
                    active.failed[key] = result.error
                else:
                    active.answered.add(key)
                    active.buffer.append(stored_response(row, result, active.store, self.backend.name))
                    if self.progress is not None:
                        self.progress.update(generated=1, tokens=result.completion_tokens or 0)
                if active.complete:
                    self._complete(int(slot_text), active)
                elif len(active.buffer) >= self.batch_size:
                    active.store.append(active.buffer)
                    active.buffer.clear()
                if time.monotonic() - last_flush >= self.flush_interval_s:
                    self._flush_all()
                    self._complete_answered()
                    last_flush = time.monotonic()
        except TraceReproError as exc:
            failure = exc
        except OSError as exc:  # a store write failed (disk full, file too large): the machine, not the backend
            failure = write_error = exc
        except BaseException as exc:  # a crash or an interrupt: persist, end the unfinished slices, propagate
            crash = exc
            raise
        finally:
            self._stop.set()
            answers.close()  # an engine still running aborts what it holds (the vllm backend's cleanup)
            write_error = self._flush_all() or write_error
            failure = failure or write_error
            producer.join()
            if write_error is None:
                self._complete_answered()
            for slot, active in list(self._active.items()):
                active.store.close(failed=True)  # every slice still active ends here unfinished
                if isinstance(crash, KeyboardInterrupt):
                    continue  # the interrupt propagates; no slice result is final
                if crash is not None:
                    failure_here: BaseException = BackendError("generation stopped", field=self.backend.name,
                                                               found=repr(crash)[:200],
                                                               hint="re-run to generate the missing rows")
                elif failure is None and self._producer_error is None and not active.complete:
                    failure_here = BackendError(
                        "backend left requests unanswered", field=self.backend.name,
                        expected=active.pending, found=len(active.answered),
                        hint="re-run to generate the missing rows")
                else:
                    failure_here = failure or self._producer_error or BackendError("generation stopped")
                self._finish(slot, SliceResult(active.job.slice, error=failure_here))
            self._active.clear()
            if self.progress is not None:
                self.progress.update(force=True)
        if self._producer_error is not None:
            raise self._producer_error
        if failure is not None:
            for slot, job in enumerate(jobs):  # slices never reached
                self._finish(slot, SliceResult(job.slice, error=failure))
        if write_error is not None:
            raise write_error
        return [self._results[slot] for slot in range(len(jobs))]

    def _flush_all(self) -> OSError | None:
        """Append every slice's buffer (each store once, whatever the others do); returns the first write error.

        A buffer is emptied only once its rows are durable, or when its store refused them (the rows are then
        not stored, and the slice ends with the error; a re-run regenerates them)."""
        first: OSError | None = None
        for active in list(self._active.values()):
            if active.buffer:
                try:
                    active.store.append(active.buffer)
                except OSError as exc:
                    first = first or exc
                active.buffer.clear()
        return first

    def _complete_answered(self) -> None:
        """Complete the slices whose last answer came before the producer marked them planned (a row that failed
        to prepare after earlier rows were queued)."""
        for slot, active in list(self._active.items()):
            if active.complete:
                self._complete(slot, active)

    def _complete(self, slot: int, active: _Active) -> None:
        if active.buffer:
            active.store.append(active.buffer)
            active.buffer.clear()
        error = active.error or (RequestsFailed(active.failed, field=self.backend.name) if active.failed else None)
        active.store.close(failed=error is not None)
        with self._lock:
            self._active.pop(slot, None)
        if self.progress is not None:
            self.progress.update(slices=1)
        if error is not None:
            self._finish(slot, SliceResult(active.job.slice, error=error))
        else:
            self._finish(slot, SliceResult(active.job.slice, run=_summary(active)))


def _benchmark_groups(jobs: Sequence[SliceJob]) -> list[list[int]]:
    """Job slots grouped by (model, benchmark), groups in order of first appearance, slots in job order."""
    groups: dict[tuple[str, str], list[int]] = {}
    for slot, job in enumerate(jobs):
        groups.setdefault((job.slice.model, job.slice.benchmark), []).append(slot)
    return list(groups.values())


def _routed(request: ChatRequest, request_id: str) -> ChatRequest:
    """``request`` under a campaign-unique id (a shallow copy: the frozen fields are shared, not re-frozen)."""
    routed = object.__new__(type(request))
    routed.__dict__.update(request.__dict__)
    object.__setattr__(routed, "request_id", request_id)
    return routed


def _summary(active: _Active) -> SliceRun:
    return SliceRun(active.job.slice.id, active.store.path, active.rows, active.reused, active.dropped,
                    len(active.answered), active.store.repaired_bytes, time.monotonic() - active.started)
