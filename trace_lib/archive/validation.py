"""Re-score the archived TRACE validation responses (one model, 2,000 rows) with trace-repro's validation scoring.

Per row (``trace-validation-answer-scoring-v2``, as :func:`trace_lib.validation.score.score_rows`): deterministic
extraction; MATCH against the ground truth when found; otherwise the archived judge output (replayed: the
validation judge reads only the raw response and the answer type, so its recorded final output is exact) validated
by :func:`~trace_lib.validation.judge_output.validate_judge_output` and matched when ``ok``; otherwise 0. The
accuracy (percent) must equal the release's ``results.v1.json`` score exactly, and each archived row score must
equal trace-repro's credit for the row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from trace_lib.archive.reader import ArchiveRoot
from trace_lib.archive.rescore import EXACT, FIRST_DIFFS, RowDiff
from trace_lib.archive.schema import SliceKey
from trace_lib.errors import InputError
from trace_lib.release.identity import VALIDATION_RESULTS

VALIDATION_SEED = 42  # the validation suite's single decoding seed (results.v1.json evaluation.seed)


def validation_benchmark_id(release: Any) -> str:
    """The archive's benchmark id of the validation run (``results.v1.json`` ``source.benchmark_id``)."""
    return str((release.read_json(VALIDATION_RESULTS).get("source") or {}).get("benchmark_id"))


@dataclass(frozen=True)
class ValidationRescore:
    """One model's re-scored validation slice."""

    key: SliceKey
    rows: int
    score: float
    canonical: float
    deterministic: int
    judged: int
    unresolved: int
    score_agree: int
    score_compared: int
    first_diffs: tuple[RowDiff, ...]

    @property
    def ok(self) -> bool:
        """The accuracy equals the release's validation score: the slice score alone (``exact`` is the verdict)."""
        return abs(self.score - self.canonical) <= EXACT

    @property
    def row_scores_agree(self) -> bool:
        """Every archived row score compared equals trace-repro's credit (vacuous when the archive holds none)."""
        return self.score_agree == self.score_compared

    @property
    def exact(self) -> bool:
        """The verdict: the accuracy and every archived row score agree."""
        return self.ok and self.row_scores_agree

    def explain(self) -> str:
        text = (f"{self.key.model_id}-validation-archive: re-scored {self.score!r} vs canonical {self.canonical!r}; "
                f"rows {self.score_agree}/{self.score_compared} agree (deterministic {self.deterministic}, judge "
                f"{self.judged}, unresolved {self.unresolved})")
        if self.first_diffs:
            text += "; first differing rows: " + "; ".join(d.render() for d in self.first_diffs)
        return text

    def properties(self) -> list[tuple[str, str]]:
        return [("slice", f"{self.key.model_id}-validation-archive"), ("rescored", repr(self.score)),
                ("canonical", repr(self.canonical)), ("rows", str(self.rows)),
                ("rows_score_agree", f"{self.score_agree}/{self.score_compared}"),
                ("deterministic", str(self.deterministic)), ("judged", str(self.judged)),
                ("unresolved", str(self.unresolved)), ("verdict", "exact" if self.exact else "differs"),
                *((f"first_diff[{i}]", d.render()) for i, d in enumerate(self.first_diffs))]


def score_validation_row(raw: str, data: Mapping[str, Any], judge_output: str | None) -> tuple[int, str]:
    """``(credit, route)`` of one validation row from its raw response and the recorded judge output."""
    from trace_lib.validation.extraction import extract
    from trace_lib.validation.judge_output import JudgeOutputError, validate_judge_output
    from trace_lib.validation.match import semantic_correct

    gt = data["answer_gt"]["value"]
    extraction = extract(raw, data["answer_type"])
    if extraction.resolved:
        return int(semantic_correct(extraction.typed, gt)), "deterministic"
    if judge_output is None:
        return 0, "unresolved"
    try:
        judged = validate_judge_output(judge_output, raw_response=raw, answer_type=data["answer_type"])
    except JudgeOutputError:
        return 0, "unresolved"
    if judged.get("status") != "ok":
        return 0, "unresolved"
    return int(semantic_correct(judged["answer"], gt)), "judge"


def rescore_validation(archive: ArchiveRoot, model_id: str, manifest_rows: Sequence[Mapping[str, Any]], *,
                       canonical: float, benchmark_id: str) -> ValidationRescore:
    """Re-score one model's archived validation rows against the prepared dataset's ground truth.

    Raises:
        InputError: the archive's rows do not cover the dataset rows one to one.
    """
    key = archive.find(model_id, VALIDATION_SEED, benchmark_id)
    archived = list(archive.iter_slice(key))
    ordinals = sorted(a.source_ordinal for a in archived)
    if ordinals != list(range(len(manifest_rows))):
        raise InputError(f"the archive's validation rows of {model_id} do not cover the dataset",
                         expected=f"{len(manifest_rows)} rows 0..{len(manifest_rows) - 1}",
                         found=f"{len(archived)} rows")
    counts = {"deterministic": 0, "judge": 0, "unresolved": 0}
    diffs: list[RowDiff] = []
    agree = compared = 0
    total = 0
    for a in sorted(archived, key=lambda r: r.source_ordinal):
        calls = a.judge_outputs()  # the validation judge asks one prompt per row: the last call is its final output
        credit, route = score_validation_row(a.response_text, manifest_rows[a.source_ordinal],
                                             calls[-1] if calls else None)
        counts[route] += 1
        total += credit
        if a.has_row_score and a.score_value is not None and not a.excluded:
            compared += 1
            if float(a.score_value) == float(credit):
                agree += 1
            elif len(diffs) < FIRST_DIFFS:
                diffs.append(RowDiff(a.source_index, "score", a.score_value, credit))
    score = 100.0 * total / len(archived)
    return ValidationRescore(key, len(archived), score, canonical, counts["deterministic"], counts["judge"],
                             counts["unresolved"], agree, compared, tuple(diffs))


@dataclass(frozen=True)
class ValidationArchiveResult:
    """One ``MODEL-validation-archive`` check: the exact re-score and, with the prepared images, prompt identity."""

    rescore: ValidationRescore
    identity: Any  # trace_lib.archive.identity.IdentityReport | None

    def failure(self) -> str | None:
        """One line naming what differs (None when the re-score and every identity compared are exact)."""
        problems = [] if self.rescore.exact else [self.rescore.explain()]
        if self.identity is not None and not self.identity.ok:
            problems.append(self.identity.explain())
        return "; ".join(problems) or None

    def properties(self) -> list[tuple[str, str]]:
        props = self.rescore.properties()
        if self.identity is None:
            return props + [("identity", "not checked: the prepared validation images are missing or changed")]
        return props + self.identity.properties()


def validation_archive_identity(archive: ArchiveRoot, key: SliceKey, rescore: ValidationRescore, release: Any,
                                manifest_path: Any) -> ValidationArchiveResult:
    """Attach prompt identity (:mod:`trace_lib.archive.validation_identity`) to a validation re-score; identity is
    None when the manifest's images cannot be verified byte for byte here."""
    from trace_lib.archive.validation_identity import compare_validation_identity
    from trace_lib.validation.manifest import load_validation_manifest
    from trace_lib.release.validation_suite import load_validation_suite

    try:
        manifest = load_validation_manifest(manifest_path, verify_media=True)
    except InputError:
        return ValidationArchiveResult(rescore, None)
    identity = compare_validation_identity(key, list(archive.iter_slice(key)), manifest.rows,
                                           suite=load_validation_suite(release))
    return ValidationArchiveResult(rescore, identity)
