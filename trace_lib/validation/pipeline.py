"""One TRACE-validation slice end to end: generate -> score -> judge -> final score -> tolerance verdict.

``plan_validation(release)`` lists the eight slices (suite order, id ``<slug>-validation``, canonical score from
``results.v1.json``); ``run_validation_slice(...)`` runs one model through every stage under a
:class:`~trace_lib.validation.layout.ValidationLayout` (each stage resumes from its durable files) and returns a
:class:`ValidationOutcome` whose ``verdict`` compares the reproduced accuracy with the release's score.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from trace_lib.aggregation.budget import DEFAULT_ALPHA
from trace_lib.aggregation.tolerance import Verdict
from trace_lib.benchmarks import deviations
from trace_lib.environment.engine import engine_drift_text, engine_properties
from trace_lib.errors import InputError
from trace_lib.release.locate import ReleaseRoot
from trace_lib.validation import pins
from trace_lib.validation.chat_template import ChatTemplate
from trace_lib.validation.generate import GenerationReport, GenerationTarget, generate_validation_responses
from trace_lib.validation.judge import JudgeReport, load_pending, run_judge
from trace_lib.validation.layout import ValidationLayout
from trace_lib.validation.score import ScoreReport, run_score
from trace_lib.release.validation_suite import ReleaseScore, ValidationModel, load_release_scores, load_validation_suite
from trace_lib.validation.tolerance import check_validation_score, validation_criterion


@dataclass(frozen=True)
class ValidationSlice:
    """One model of the validation table: the unit of one reproduction test."""

    model: ValidationModel
    canonical: ReleaseScore

    @property
    def id(self) -> str:
        return f"{self.model.slug}-validation"


def plan_validation(release: ReleaseRoot, models: Sequence[str] | None = None) -> list[ValidationSlice]:
    """The validation slices in suite order (all, or those named in ``models``).

    Raises:
        InputError: a named model is not in the suite, or a suite model has no canonical score.
    """
    suite = load_validation_suite(release)
    scores = load_release_scores(release)
    chosen = list(suite.models) if not models else []
    for slug in models or ():
        try:
            chosen.append(suite.model(slug))
        except KeyError:
            raise InputError("unknown validation model", field="--model", found=slug,
                             hint=f"suite models: {', '.join(suite.slugs)}") from None
    out = []
    for model in chosen:
        if model.slug not in scores:
            raise InputError("suite model has no canonical score", file="results.v1.json", field=model.slug)
        out.append(ValidationSlice(model=model, canonical=scores[model.slug]))
    return out


@dataclass(frozen=True)
class ValidationOutcome:
    """What one validation slice produced at each stage, and the verdict against the release (an evaluation
    slice's is :class:`trace_lib.campaign.run_slice.SliceOutcome`)."""

    generation: GenerationReport
    first_score: ScoreReport
    judge: JudgeReport | None
    score: ScoreReport
    verdict: Verdict

    def properties(self) -> list[tuple[str, str]]:
        """JUnit receipt properties: stage counts, hashes, the verdict's numbers and the deliberate deviations."""
        props = [
            ("validation_rows", str(self.score.rows)),
            ("validation_correct", str(self.score.correct)),
            ("deterministic_found_rows", str(self.score.deterministic_found)),
            ("judge_requested_rows", str(self.score.judge_requested)),
            ("judge_resolved_rows", str(self.score.judge_resolved)),
            ("unresolved_rows", str(self.score.unresolved)),
            ("responses_sha256", self.generation.responses_sha256),
            ("generated_rows", str(self.generation.generated_rows)),
            ("reused_rows", str(self.generation.reused_rows)),
        ]
        return (props + self.verdict.properties() + engine_properties(self.generation.engine)
                + deviations.receipt_properties(deviations.for_validation()))


@dataclass(frozen=True)
class SliceSettings:
    """How to run a slice: engine, judge and tolerance (the model directory is per slice)."""

    backend: str = "vllm"
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    endpoint_url: str | None = None
    media_transport: str = "data-url"  # upstream's transport (base64 data URLs); every backend reads it
    judge_urls: tuple[str, ...] = ()
    judge_template: ChatTemplate | None = None
    z: float | None = None  # explicit critical value (--tolerance-z); None: from alpha over the suite's models
    alpha: float = DEFAULT_ALPHA  # family-wise false-alarm budget (--alpha)
    expected: pins.DatasetIdentity = pins.REPRODUCTION_DATASET


def run_validation_generation(
    release: ReleaseRoot, slice_: ValidationSlice, layout: ValidationLayout, model_path: Path,
    settings: SliceSettings, *, backend: Any = None, progress: Callable[[int, int], None] | None = None,
) -> GenerationReport:
    """Generate (or resume) one slice's responses and require them complete (``--phase generate``; no judge).

    Raises:
        InputError: invalid inputs, or rows still in error after the run.
    """
    slug = slice_.model.slug
    target = GenerationTarget(model=slice_.model, model_path=Path(model_path), backend=settings.backend,
                              served_model=slug, endpoint_url=settings.endpoint_url,
                              media_transport=settings.media_transport,
                              backend_options=dict(settings.backend_options))
    generation = generate_validation_responses(release, layout.manifest, layout.generation_dir(slug), target,
                                expected=settings.expected, backend=backend, progress=progress)
    if not generation.complete:
        raise InputError("generation is incomplete", file=str(layout.generation_dir(slug)),
                         found=f"{generation.error_rows} error rows", hint="re-run to regenerate the error rows")
    return generation


def run_validation_slice(
    release: ReleaseRoot, slice_: ValidationSlice, layout: ValidationLayout, model_path: Path,
    settings: SliceSettings, *, backend: Any = None, progress: Callable[[int, int], None] | None = None,
) -> ValidationOutcome:
    """Run (or resume) one slice and judge its accuracy against the release (``progress(done, total)`` is called
    as generation chunks land).

    Raises:
        InputError: invalid inputs at any stage; an incomplete generation stops before scoring.
        JudgeError: rows need the judge but it is not configured or unreachable.
    """
    slug = slice_.model.slug
    generation = run_validation_generation(release, slice_, layout, model_path, settings, backend=backend,
                                           progress=progress)
    first = run_score(release, layout.manifest, layout.generation_dir(slug), layout.scoring_dir(slug),
                      model_slug=slug, expected=settings.expected)
    pending = load_pending(layout.scoring_dir(slug) / "judge_pending.jsonl")
    judge_report = None
    if pending or not layout.judge_results(slug).exists():
        suite = load_validation_suite(release)
        judge_report = run_judge(pending, judge=suite.judge, template=settings.judge_template,
                                 endpoints=settings.judge_urls, output_dir=layout.judge_dir(slug))
    final = run_score(release, layout.manifest, layout.generation_dir(slug), layout.scoring_dir(slug),
                      model_slug=slug, judge_results=layout.judge_results(slug), expected=settings.expected)
    verdict = check_validation_score(slice_.canonical, final.accuracy_percent, rows=final.rows,
                                     criterion=validation_criterion(release, alpha=settings.alpha, z=settings.z))
    verdict = dataclasses.replace(verdict, engine_note=engine_drift_text(generation.engine))
    return ValidationOutcome(generation=generation, first_score=first, judge=judge_report, score=final, verdict=verdict)
