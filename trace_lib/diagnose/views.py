"""What :mod:`trace_lib.diagnose` compares: one slice's rows, stage by stage, from any source.

A source (a trace-repro campaign, the paper's archive) is read into a :class:`SliceView`; the attribution never
looks at files. Every stage field is optional: a source that does not record a stage leaves it ``None`` and the
comparison skips that stage for the row instead of guessing, and the diagnosis lists it as not comparable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from trace_lib.reports.collect import SliceKey  # (model, seed, benchmark); .id is the test id

__all__ = ["EXTRACTED", "RowView", "SliceKey", "SliceView"]


@dataclass(frozen=True)
class RowView:
    """One row of a slice as one source recorded it, in pipeline order (prompt -> response -> extraction -> score).

    ``request_key`` hashes the whole request (prompt, images, decoding) in the source's own namespace
    (:attr:`SliceView.request_namespace`); it is compared only between sources of the same namespace.
    ``extracted`` is the canonical text of the extracted answer; ``used_judge`` says whether a judge produced it.
    """

    index: str
    prompt_sha256: str | None = None
    media_set_sha256: str | None = None
    request_key: str | None = None
    response: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    extracted: str | None = None
    used_judge: bool | None = None
    score: float | None = None


@dataclass(frozen=True)
class SliceView:
    """Every row of one slice from one source, and the slice score that source reports (``None``: not scored)."""

    key: SliceKey
    source: str  # what it was read from, for reports ("campaign /x", "archive maveryn/trace-eval-runs@4178a83")
    rows: Mapping[str, RowView]  # source index -> row
    score: float | None = None
    request_namespace: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: What ``RowView.extracted`` holds; two sides' extractions are compared only when their forms are equal
    #: (:data:`EXTRACTED`: an extracted answer; an archive on the official route holds the scorer's input).
    extraction_form: str = "extracted answer"


#: The extraction form of a trace-repro campaign and of an archive route that archives the extracted answer.
EXTRACTED = "extracted answer"
