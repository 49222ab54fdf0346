"""The contract every benchmark protocol fulfils: data, prompt, extraction and scoring side by side.

A protocol module (``trace_lib/benchmarks/<key>.py``) defines its functions in pipeline order and ends with
``PROTOCOL = Protocol(...)``. Facts the release holds (rows, route, category, canonical scores, data source
and checksum) are *not* restated here: they come from ``suite.v1.json`` and ``benchmark_provenance.v1.json``.

The contract sits below every layer that calls it (data preparation, generation, scoring), so it imports nothing
of trace_lib but :mod:`trace_lib.linear_aggregate` and :mod:`trace_lib.errors`; benchmark modules import it as
:mod:`trace_lib.benchmarks.protocol`. See docs/adding-a-benchmark.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

from trace_lib.errors import MissingColumn
from trace_lib.linear_aggregate import MEAN, RowAggregate

#: One dataset row with its native columns (``index`` is always present).
Row = Mapping[str, Any]


class DataRow(dict):
    """A :data:`Row` as the loaders build it (``data/vlmeval_tsv.py: load_vlmeval_tsv``, the workbook's rows): a
    column the row lacks is :class:`~trace_lib.errors.MissingColumn` naming the row and the column, where a
    ``dict`` raised a bare ``KeyError`` (a traceback) for a data file without a column its benchmark reads."""

    def __missing__(self, key: Any) -> Any:
        raise MissingColumn(key, index=dict.get(self, "index"))


@dataclass(frozen=True)
class PromptItem:
    """One item of the message the model sees, in order: an image file or a text part."""

    kind: Literal["image", "text"]
    value: str  # the text, or the absolute path of a materialised image file


@dataclass(frozen=True)
class RowScore:
    """How one response was read and scored."""

    index: str
    extracted: Any  # the extracted answer; None when nothing could be extracted
    score: float  # the row's credit in [0, 1] toward the benchmark's metric
    judge_calls: int = 0  # judge requests made for this row (0 on deterministic routes)
    fallback: bool = False  # a deterministic stand-in replaced upstream's unseeded random choice
    detail: Mapping[str, Any] = field(default_factory=dict)  # route-specific facts (sub-split, judge text, ...)


@dataclass(frozen=True)
class SliceScore:
    """The scored slice: the reported number (percent) and the per-row records it came from."""

    benchmark: str
    score: float  # the number upstream reports for this benchmark, in percent
    rows: int
    records: tuple[RowScore, ...]
    metrics: Mapping[str, float] = field(default_factory=dict)  # sub-metrics upstream reports beside the score
    counts: Mapping[str, int] = field(default_factory=dict)  # integer counts the score derives from

    def __post_init__(self) -> None:
        if not math.isfinite(self.score):
            raise ValueError(f"{self.benchmark}: slice score must be finite, got {self.score}")

    @property
    def fallbacks(self) -> int:
        return sum(1 for r in self.records if r.fallback)

    @property
    def judge_calls(self) -> int:
        return sum(r.judge_calls for r in self.records)


@dataclass(frozen=True)
class ScoringContext:
    """What a scorer may use besides rows and responses."""

    seed: int  # the slice's decoding seed; seeds deterministic fallbacks as (benchmark, row index, seed)
    judge: Any = None  # a trace_lib.scoring.judge.Judge; None: a route that needs the judge raises JudgeError


JudgeUse = Literal["none", "fallback", "always"]


@dataclass(frozen=True)
class Protocol:
    """One benchmark's evaluation protocol, mirroring a pinned upstream implementation."""

    key: str  # suite key (``suite.v1.json`` ``benchmarks[].key``)
    upstream: str  # the pinned source mirrored, e.g. "VLMEvalKit@a8b12bf1:vlmeval/dataset/image_mcq.py"
    version: str  # recorded in every receipt that used this protocol
    load: Callable[[Path], list[Row]]  # native data file -> rows in dataset order
    build_prompt: Callable[[Row, Path], list[PromptItem]]  # row, image directory -> what the model sees
    score: Callable[[Sequence[Row], Sequence[str | None], ScoringContext], SliceScore]  # responses -> slice
    judge: JudgeUse = "none"  # whether scoring calls the Qwen3-32B judge
    quirks: tuple[str, ...] = ()  # upstream behaviours reproduced on purpose, one line each
    row_aggregate: RowAggregate = MEAN  # the score as a linear function of independent units (row-level variance)
