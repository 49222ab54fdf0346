"""Stage attribution: where two runs of one slice part ways, row by row.

Each row present on both sides is walked through the pipeline in order and charged to the *first* stage at which
the two sides differ: ``prompt`` (prompt text, images, or the request's decoding fields), ``sampling`` (same request,
another response), ``extraction`` / ``judge`` (same response, another extracted answer; ``judge`` when a judge made
either), ``score`` (same extraction, another credit). Rows on one side only are charged to ``rows``. When every row
agrees and the slice scores still differ, the slice is charged to ``aggregation``. The slice's first diverging
stage is the earliest stage with any charge. A stage that cannot be compared (a side never recorded it, or the two
sides record it in different forms: :attr:`~trace_lib.diagnose.views.SliceView.extraction_form`) is never guessed:
the diagnosis lists it per slice in ``not_comparable``. Every row's stage is kept (``rows``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import fmean
from typing import Mapping, Sequence

from trace_lib.decoding import ascii_digits
from trace_lib.diagnose.views import RowView, SliceKey, SliceView

#: Pipeline order; the first stage with a charge is the slice's first diverging stage.
STAGES: tuple[str, ...] = ("rows", "prompt", "sampling", "extraction", "judge", "score", "aggregation")
#: What to look at for each stage (one line in reports and failure messages).
STAGE_MEANING: Mapping[str, str] = {
    "rows": "the two runs cover different rows (dataset version, loader drops, an incomplete slice)",
    "prompt": "the model was asked something else (prompt text, images or decoding fields differ)",
    "sampling": "same request, another response (engine, seed, hardware numerics or model weights)",
    "extraction": "same response, another extracted answer (extraction code or its inputs)",
    "judge": "same response, another judge-extracted answer (judge model, endpoint, template or its fallback)",
    "score": "same extracted answer, another credit (scoring code or ground truth)",
    "aggregation": "every row agrees but the slice score does not (aggregation or rounding)",
}
SCORE_EPSILON = 1e-9
EXAMPLES_PER_STAGE = 3


@dataclass(frozen=True)
class RowDivergence:
    """The first stage at which one row differs, why, and short excerpts of both sides' values there."""

    index: str
    stage: str
    reason: str
    left: str | None = None
    right: str | None = None


@dataclass(frozen=True)
class ResponseStats:
    """Response statistics of one side (``None`` where the source recorded nothing to compute it from)."""

    rows: int
    mean_chars: float | None
    length_stop_rate: float | None  # fraction of rows with finish_reason == "length"
    mean_prompt_tokens: float | None
    mean_completion_tokens: float | None

    @classmethod
    def of(cls, rows: Sequence[RowView]) -> ResponseStats:
        def mean(values: list[float]) -> float | None:
            return fmean(values) if values else None

        texts = [len(r.response) for r in rows if r.response is not None]
        reasons = [r.finish_reason for r in rows if r.finish_reason is not None]
        return cls(
            rows=len(rows),
            mean_chars=mean([float(n) for n in texts]),
            length_stop_rate=(sum(reason == "length" for reason in reasons) / len(reasons)) if reasons else None,
            mean_prompt_tokens=mean([float(r.prompt_tokens) for r in rows if r.prompt_tokens is not None]),
            mean_completion_tokens=mean([float(r.completion_tokens) for r in rows
                                         if r.completion_tokens is not None]),
        )


@dataclass(frozen=True)
class SliceDiagnosis:
    """How two runs of one slice differ: rows charged per stage, the first diverging stage, the score delta
    (left minus right) against the band sampling explains, and both sides' response statistics."""

    key: SliceKey
    left_source: str
    right_source: str
    compared_rows: int
    counts: Mapping[str, int]  # stage -> rows (slices, for "aggregation") charged to it
    examples: tuple[RowDivergence, ...]
    left_score: float | None
    right_score: float | None
    band: float | None
    left_stats: ResponseStats
    right_stats: ResponseStats
    notes: tuple[str, ...] = field(default_factory=tuple)
    not_comparable: Mapping[str, str] = field(default_factory=dict)  # stage -> why it was not compared
    rows: tuple[RowDivergence, ...] = ()  # every row's stage ("none": identical where compared), rows first

    def row_stage(self, index: str) -> str | None:
        """The stage row ``index`` was charged to (``"none"``: no divergence), None for a row of neither side."""
        return next((r.stage for r in self.rows if r.index == index), None)

    @property
    def first_stage(self) -> str | None:
        """The earliest stage with a charge, ``None`` when the two runs agree everywhere they were compared."""
        return next((stage for stage in STAGES if self.counts.get(stage)), None)

    @property
    def identical_rows(self) -> int:
        return self.compared_rows - sum(n for stage, n in self.counts.items() if stage not in ("rows", "aggregation"))

    @property
    def delta(self) -> float | None:
        if self.left_score is None or self.right_score is None:
            return None
        return self.left_score - self.right_score

    @property
    def within_band(self) -> bool | None:
        """Whether |delta| is within what sampling alone explains (``None``: no delta or no band)."""
        if self.delta is None or self.band is None:
            return None
        return abs(self.delta) <= self.band + SCORE_EPSILON

    def headline(self) -> str:
        """One line: the first diverging stage and what it means (used in failing tests' messages)."""
        stage = self.first_stage
        if stage is None:
            return f"{self.key.id}: no divergence in {self.compared_rows} compared rows"
        rows = self.counts[stage]
        unit = "slice" if stage == "aggregation" else f"{rows} of {self.compared_rows} rows"
        return f"{self.key.id}: first diverging stage '{stage}' ({unit}): {STAGE_MEANING[stage]}"


def _excerpt(value: str | None, limit: int = 80) -> str | None:
    if value is None:
        return None
    return value if len(value) <= limit else value[: limit - 3] + "..."


def first_divergence(left: RowView, right: RowView, *, same_namespace: bool,
                     compare_extraction: bool = True) -> RowDivergence | None:
    """The first pipeline stage at which ``left`` and ``right`` (one row, two runs) differ, or ``None``
    (``compare_extraction``: whether the two sides' extractions are of one form)."""
    index = left.index
    if left.prompt_sha256 and right.prompt_sha256 and left.prompt_sha256 != right.prompt_sha256:
        return RowDivergence(index, "prompt", "prompt text differs", left.prompt_sha256, right.prompt_sha256)
    if left.media_set_sha256 and right.media_set_sha256 and left.media_set_sha256 != right.media_set_sha256:
        return RowDivergence(index, "prompt", "images differ", left.media_set_sha256, right.media_set_sha256)
    if same_namespace and left.request_key and right.request_key and left.request_key != right.request_key:
        return RowDivergence(index, "prompt", "request differs with the same prompt text (decoding fields or images)",
                             left.request_key, right.request_key)
    if left.response is not None and right.response is not None and left.response != right.response:
        return RowDivergence(index, "sampling", "response differs", _excerpt(left.response), _excerpt(right.response))
    if (compare_extraction and left.extracted is not None and right.extracted is not None
            and left.extracted != right.extracted):
        stage = "judge" if (left.used_judge or right.used_judge) else "extraction"
        return RowDivergence(index, stage, "extracted answer differs", _excerpt(left.extracted),
                             _excerpt(right.extracted))
    if (left.score is not None and right.score is not None
            and not math.isclose(left.score, right.score, rel_tol=0.0, abs_tol=SCORE_EPSILON)):
        return RowDivergence(index, "score", "row credit differs", repr(left.score), repr(right.score))
    return None


def not_comparable(left: SliceView, right: SliceView) -> dict[str, str]:
    """Stages no row of the slice could compare, and why: a side never recorded the stage's field, or the two
    sides record the extraction in different forms."""
    def recorded(view: SliceView, name: str) -> bool:
        return any(getattr(row, name) is not None for row in view.rows.values())

    out = {}
    for stage, name in (("prompt", "prompt_sha256"), ("sampling", "response"), ("extraction", "extracted"),
                        ("score", "score")):
        missing = [side for side, view in (("left", left), ("right", right)) if not recorded(view, name)]
        if missing:
            out[stage] = f"the {' and '.join(missing)} run recorded no {name}"
    if "extraction" not in out and left.extraction_form != right.extraction_form:
        out["extraction"] = (f"the two runs hold different forms (left: {left.extraction_form}; right: "
                             f"{right.extraction_form})")
    if "extraction" in out:
        out["judge"] = "follows extraction"
    return out


def diagnose_slice(left: SliceView, right: SliceView, *, band: float | None = None) -> SliceDiagnosis:
    """Compare two runs of one slice (``left``: the run under question, ``right``: the reference).

    ``band`` is the |score delta| that sampling alone explains (from the tolerance rule), when known.
    """
    if left.key != right.key:
        raise ValueError(f"cannot compare slice {left.key.id} with {right.key.id}")
    counts = {stage: 0 for stage in STAGES}
    examples: list[RowDivergence] = []
    shown = {stage: 0 for stage in STAGES}
    rows: list[RowDivergence] = []

    def charge(divergence: RowDivergence) -> None:
        counts[divergence.stage] += 1
        if divergence.stage != "aggregation":
            rows.append(divergence)
        if shown[divergence.stage] < EXAMPLES_PER_STAGE:
            shown[divergence.stage] += 1
            examples.append(divergence)

    skipped = not_comparable(left, right)
    same_namespace = bool(left.request_namespace) and left.request_namespace == right.request_namespace
    common = [index for index in left.rows if index in right.rows]
    for index in sorted(set(left.rows) ^ set(right.rows), key=_index_order):
        side = "left" if index in left.rows else "right"
        charge(RowDivergence(index, "rows", f"only in the {side} run"))
    for index in common:
        divergence = first_divergence(left.rows[index], right.rows[index], same_namespace=same_namespace,
                                      compare_extraction="extraction" not in skipped)
        if divergence is not None:
            charge(divergence)
        else:
            rows.append(RowDivergence(index, "none", "identical where compared"))
    row_charges = sum(counts.values())
    if (row_charges == 0 and left.score is not None and right.score is not None
            and not math.isclose(left.score, right.score, rel_tol=0.0, abs_tol=SCORE_EPSILON)):
        charge(RowDivergence("*", "aggregation", "slice score differs although every row agrees",
                             repr(left.score), repr(right.score)))
    notes = [*(f"left: {n}" for n in left.notes), *(f"right: {n}" for n in right.notes)]
    notes += [f"not comparable: {stage} ({why})" for stage, why in skipped.items() if stage != "judge"]
    if not same_namespace and "prompt" not in skipped:
        notes.append(f"request hashes not compared: namespaces differ ({left.request_namespace or 'none'} vs "
                     f"{right.request_namespace or 'none'}); the prompt stage compares prompt text and images only")
    examples.sort(key=lambda d: STAGES.index(d.stage))
    return SliceDiagnosis(
        key=left.key, left_source=left.source, right_source=right.source, compared_rows=len(common),
        counts={stage: n for stage, n in counts.items() if n}, examples=tuple(examples),
        left_score=left.score, right_score=right.score, band=band,
        left_stats=ResponseStats.of([left.rows[i] for i in common] or list(left.rows.values())),
        right_stats=ResponseStats.of([right.rows[i] for i in common] or list(right.rows.values())),
        notes=tuple(notes), not_comparable=skipped, rows=tuple(rows),
    )


def _index_order(index: str) -> tuple[int, int | str]:
    return (0, int(index)) if ascii_digits(index.removeprefix("-")) else (1, index)
