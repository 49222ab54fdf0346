"""Generation ahead of the slice tests: the session's campaign scheduler, one model at a time, in the background.

When the first slice test of a model asks for its responses, :class:`StreamAhead` starts the
:class:`~trace_lib.campaign.scheduler.CampaignScheduler` on a background thread over *every* selected slice
of that model that can run here (its blockers are checked first; a blocked or unprepared slice is left to
the per-slice path, which reports it exactly as before; a slice already complete is reused there without an
engine), through the runner's engine pool; the engine is created on the calling thread. Each slice test
then waits for its own slice only, and scores it while the engine keeps generating the next ones. Under
``pytest-xdist --dist loadgroup`` all slices of a model run on one worker, so each model is streamed once.
A status line per model (slices, rows, rows/s, output tokens/s, ETA) goes to the ``trace_lib.progress`` log.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, Sequence

from trace_lib.errors import BackendError, TraceReproError

if TYPE_CHECKING:
    from trace_lib.benchmarks.protocol import Protocol as BenchmarkProtocol
    from trace_lib.slices import ModelDescriptor
    from trace_lib.campaign.plan import Plan, Slice
    from trace_lib.campaign.scheduler import CampaignScheduler, SliceJob, SliceResult
    from trace_lib.generation.backends.base import Backend
    from trace_lib.generation.run import SliceRun


class _Engines(Protocol):
    def get(self, model: ModelDescriptor) -> Backend: ...

    def lazy(self, model: ModelDescriptor, name: str) -> Backend: ...


class StreamRunner(Protocol):
    """What :class:`StreamAhead` needs of its runner (:class:`~trace_lib.campaign.run_slice.SliceRunner` has it;
    named structurally so that this module does not import the runner's, which imports this one)."""

    plan: Plan
    engines: _Engines
    backend_kind: str

    def protocol(self, slice_: Slice) -> BenchmarkProtocol: ...

    def responses_complete(self, slice_: Slice) -> bool: ...

    def blocker(self, slice_: Slice, protocol: BenchmarkProtocol, *, need_judge: bool = True) -> str | None: ...

    def slice_job(self, slice_: Slice, protocol: BenchmarkProtocol) -> SliceJob: ...


@dataclass
class _ModelStream:
    done: dict[Slice, threading.Event]
    results: dict[Slice, SliceResult] = field(default_factory=dict)
    scheduler: CampaignScheduler | None = None
    thread: threading.Thread | None = None


class _LoggedLines:
    """A text stream whose lines become ``trace_lib.progress`` INFO records: the per-model status line, live with
    ``pytest --log-cli-level INFO`` (as the per-slice path's progress)."""

    def write(self, text: str) -> None:
        for line in text.splitlines():
            if line.strip():
                logging.getLogger("trace_lib.progress").info("%s", line)

    def flush(self) -> None:
        pass


class StreamAhead:
    """The background scheduler of one session (see the module docstring); ``selected`` are the session's
    selected slice tests, in run order. Made by :meth:`~trace_lib.campaign.run_slice.SliceRunner.stream_ahead`."""

    def __init__(self, runner: StreamRunner, selected: Sequence[Slice]) -> None:
        self.runner = runner
        self.selected = tuple(selected)
        self._streams: dict[str, _ModelStream] = {}
        self._current: _ModelStream | None = None

    def covers(self, slice_: Slice) -> bool:
        return slice_ in self.selected

    def result(self, slice_: Slice) -> SliceRun | None:
        """The generation summary of ``slice_`` once the stream has stored its last row; None when the slice is
        not streamed (the caller generates it itself).

        Raises:
            TraceReproError: the error that stopped this slice's generation (the per-slice path's message).
        """
        stream = self._streams.get(slice_.model) or self._start(slice_.model)
        event = stream.done.get(slice_)
        if event is None:
            return None
        event.wait()
        result = stream.results[slice_]
        if result.error is not None:
            raise result.error
        return result.run

    def _start(self, model: str) -> _ModelStream:
        from trace_lib.campaign.scheduler import CampaignProgress, CampaignScheduler, SliceResult

        if self._current is not None:  # the engine pool holds one model: finish the previous one first
            self._join(self._current)
        jobs = [job for job in (self._job(s) for s in self.selected if s.model == model) if job is not None]
        stream = _ModelStream({job.slice: threading.Event() for job in jobs})
        self._streams[model] = stream
        self._current = stream
        if not jobs:
            return stream
        try:  # the engine is created here, on the test's (main) thread; the stream thread only drives it
            self.runner.engines.get(self.runner.plan.model(model))
        except TraceReproError as exc:
            for job in jobs:
                stream.results[job.slice] = SliceResult(job.slice, error=exc)
                stream.done[job.slice].set()
            return stream

        def complete(result: SliceResult) -> None:
            stream.results[result.slice] = result
            stream.done[result.slice].set()

        def generate() -> None:
            try:
                scheduler.run(jobs)
            except BaseException as exc:  # noqa: BLE001 - every waiting test gets it
                error = exc if isinstance(exc, TraceReproError) else BackendError("generation stopped",
                                                                                  found=repr(exc))
                for job in jobs:
                    if job.slice not in stream.results:
                        complete(SliceResult(job.slice, error=error))

        progress = CampaignProgress(model, expected_rows=sum(j.expected_rows or 0 for j in jobs), slices=len(jobs),
                                    stream=_LoggedLines())
        backend = self.runner.engines.lazy(self.runner.plan.model(model), self.runner.backend_kind)
        scheduler = stream.scheduler = CampaignScheduler(backend, on_complete=complete, progress=progress)
        stream.thread = threading.Thread(target=generate, name=f"trace-repro-stream-{model}", daemon=True)
        stream.thread.start()
        return stream

    def _job(self, slice_: Slice) -> SliceJob | None:
        """The scheduler job of ``slice_``, or None when the per-slice path must handle it (it cannot run here,
        or it fails before generation: unimplemented protocol, unprepared data)."""
        runner = self.runner
        try:
            protocol = runner.protocol(slice_)
            if runner.responses_complete(slice_) or runner.blocker(slice_, protocol) is not None:
                return None  # complete: reused without an engine; blocked: skipped as before
            return runner.slice_job(slice_, protocol)
        except TraceReproError:
            return None

    def _join(self, stream: _ModelStream, *, stop: bool = False) -> None:
        if stream.thread is None:
            return
        if stop and stream.scheduler is not None:
            stream.scheduler.stop()
        stream.thread.join()

    def close(self) -> None:
        """Stop generating (the session ends): persist what was received and wait for the thread."""
        for stream in self._streams.values():
            self._join(stream, stop=True)



def session_stream(runner: StreamRunner, items: Sequence[object], *, schedule: str, dist: str | None,
                   worker: str | None) -> StreamAhead | None:
    """The session's :class:`StreamAhead` over the selected slice tests of ``items`` (pytest items, after
    ``-k``/``-m`` deselection), or None: ``schedule`` is ``per-slice``, or xdist spreads one model's slices
    over several workers (only ``--dist loadgroup`` keeps a model on one worker).

    Raises:
        UsageError: an unknown schedule.
    """
    from trace_lib import options

    if options.check_schedule(schedule) != "stream" or (worker is not None and dist != "loadgroup"):
        return None
    selected = [item.callspec.params["eval_slice"] for item in items  # type: ignore[attr-defined]
                if "eval_slice" in getattr(getattr(item, "callspec", None), "params", {})]
    return StreamAhead(runner, selected) if selected else None
