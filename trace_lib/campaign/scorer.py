"""Scoring a campaign's slices from their stored responses: :class:`CampaignScorer`, shared by
``trace-repro score --campaign-root`` and ``trace-repro generate --score``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

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

    def __init__(self, campaign_root: Path, data_root: Path, sources: dict, judge_url: str | None) -> None:
        import threading

        self.campaign_root, self.data_root, self.sources = campaign_root, data_root, sources
        self.judge_url, self.judge = judge_url, open_judge(judge_url)
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
