"""Scoring a campaign's slices from their stored responses: :class:`CampaignScorer`, shared by
``trace-repro score --campaign-root`` and ``trace-repro generate --score``.

:meth:`CampaignScorer.score_all` keeps the judge saturated whatever the slices' sizes: every slice's requests go
through the one judge client, whose lanes share one in-flight window per endpoint (``TRACE_JUDGE_CONCURRENCY``
sequences, default 192: the judge's ``--max-num-seqs 128`` and headroom), and slices are started while that
window has room nobody will fill: at least ``jobs`` at once, and, whenever the judge's windows have room
(:meth:`~trace_lib.scoring.judge.OpenAIJudge.room`) while every slice in progress waits for judge replies (or
for :data:`STARVED_S`), as many more as that room holds at the slices' mean demand, up to ``max_jobs``. Each slice's results depend on its own
responses and judge replies only, so the files are the same whatever the concurrency and the order.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from trace_lib.errors import UsageError

if TYPE_CHECKING:
    from trace_lib.scoring.judge import Judge


def open_judge(url: str | None) -> Judge | None:
    """The OpenAI-compatible judge at ``url`` (None: no URL, judge routes are blocked)."""
    if not url:
        return None
    from trace_lib.scoring.judge import OpenAIJudge

    return OpenAIJudge(url)


class CampaignScorer:
    """Scores the slices of one campaign into ``<campaign-root>/scores/...``: each benchmark's protocol, rows and
    dataset hash are loaded once, whichever seed or thread asks first (``trace-repro score --campaign-root`` and
    ``trace-repro generate --score``)."""

    def __init__(self, campaign_root: Path, data_root: Path, sources: dict, judge_url: str | None,
                 judge: Judge | None = None) -> None:
        self.campaign_root, self.data_root, self.sources = campaign_root, data_root, sources
        self.judge_url, self.judge = judge_url, judge if judge is not None else open_judge(judge_url)
        self._loaded: dict[str, tuple] = {}
        self._lock = threading.Lock()

    def _benchmark(self, benchmark: str) -> tuple:
        """``(protocol, rows, dataset FileRef)``, loaded on first use.

        Raises:
            UsageError: the benchmark's dataset is not prepared.
        """
        from trace_lib.benchmarks.registry import get_protocol
        from trace_lib.release.load import sha256_file
        from trace_lib.scoring.score import FileRef

        with self._lock:
            if benchmark not in self._loaded:
                protocol = get_protocol(benchmark)
                dataset = self.sources[benchmark].local_path(self.data_root)
                if not dataset.exists():
                    raise UsageError(f"dataset missing: {benchmark} ({dataset})", field="--data-root",
                                     hint=f"run 'trace-repro prepare-data --benchmark {benchmark}'")
                self._loaded[benchmark] = (protocol, protocol.load(dataset),
                                           FileRef(str(dataset), sha256_file(dataset)))
            return self._loaded[benchmark]

    def score(self, key, responses: Path):  # noqa: ANN001, ANN201 - a plan Slice; ScoredSlice
        from trace_lib.scoring.score import run_scoring, scores_dir

        protocol, rows, dataset_ref = self._benchmark(key.benchmark)
        return run_scoring(protocol, rows, responses,
                           scores_dir(self.campaign_root, model=key.model, seed=key.seed, benchmark=key.benchmark),
                           judge=self.judge, judge_url=self.judge_url, dataset=dataset_ref, seed=key.seed,
                           model=key.model)  # the header must name the slice the path files it under

    def score_all(self, keys: Sequence[Any], responses: Callable[[Any], Path], *, jobs: int = 4,
                  max_jobs: int = 32) -> Iterator[tuple[Any, Any]]:
        """Score every slice of ``keys`` (``responses(key)``: its response file), several at once (module
        docstring); yields ``(key, ScoredSlice or the TraceReproError it raised)`` in the order of ``keys``.
        Other exceptions (and Ctrl-C) propagate once the slices in progress have ended."""
        from concurrent.futures import Future, ThreadPoolExecutor

        from trace_lib.errors import TraceReproError

        jobs, max_jobs = max(1, jobs), max(1, jobs, max_jobs)
        done = threading.Condition()
        running = [0]

        def one(key: Any) -> Any:
            try:
                return self.score(key, responses(key))
            finally:
                with done:
                    running[0] -= 1
                    done.notify_all()

        futures: list[tuple[Any, Future]] = []
        starved_since: float | None = None
        burst = 0  # slices still to start at once after the last look at the judge's room
        with ThreadPoolExecutor(max_workers=min(max_jobs, len(keys)) or 1, thread_name_prefix="score") as pool:
            try:
                for key in keys:
                    with done:
                        while True:
                            if running[0] < jobs or (burst > 0 and running[0] < max_jobs):
                                break
                            room = self._judge_room(running[0]) if running[0] < max_jobs else 0
                            if room > 0:
                                starved_since = starved_since or time.monotonic()
                                if self._everyone_waits(running[0]) or time.monotonic() - starved_since > STARVED_S:
                                    burst = room
                                    break
                            else:
                                starved_since = None
                            done.wait(timeout=POLL_S)
                        running[0] += 1
                        burst = max(0, burst - 1)
                        starved_since = None
                    futures.append((key, pool.submit(one, key)))
            except BaseException:
                for _, future in futures:
                    future.cancel()
                raise
            for key, future in futures:
                try:
                    yield key, future.result()
                except TraceReproError as exc:
                    yield key, exc

    def _judge_room(self, running: int) -> int:
        """Slices to start so that the judge's free window is asked for, at the mean demand of the slices in
        progress (0: no room, or a judge without windows)."""
        room = getattr(self.judge, "room", None)
        if running == 0 or room is None:
            return 0
        load, capacity = room()
        if load >= capacity:
            return 0
        return max(1, -(-(capacity - load) * running // max(1, load)))

    def _everyone_waits(self, running: int) -> bool:
        return getattr(self.judge, "callers", 0) >= running


#: How often the scorer looks at the judge's window while it cannot start a slice (seconds).
POLL_S = 0.02
#: A judge starved this long gets another slice even while some slice in progress is busy on the CPU.
STARVED_S = 1.0


def judge_heavy_first(slices: Sequence[Any]) -> list[Any]:
    """The order slices are started in: the benchmarks implying the most judge requests per row first (the
    longest judge work must not be the campaign's tail), otherwise as given (a benchmark's seeds together)."""
    from trace_lib.benchmarks.registry import get_protocol
    from trace_lib.campaign.estimate import judge_requests_per_row
    from trace_lib.errors import TraceReproError

    weight: dict[str, float] = {}
    for key in slices:
        if key.benchmark not in weight:
            try:
                weight[key.benchmark] = judge_requests_per_row(key.benchmark, get_protocol(key.benchmark).judge)
            except TraceReproError:  # an unimplemented protocol: its slice fails when scored, in its turn
                weight[key.benchmark] = 0.0
    return sorted(slices, key=lambda k: -weight[k.benchmark])
