"""Re-score the archive's own responses through trace-repro's protocols and compare with the paper, exactly.

Per slice (:func:`rescore_slice`): the archived responses are aligned to the dataset rows by row identity
(``source_ordinal``, ``source_index``, ``source_row_sha256``), scored with the same ``score_slice`` the live slices
use (the decoding seed seeds the same deterministic fallbacks; judge routes use a live judge or
:mod:`trace_lib.archive.replay_judge`), and compared with the release's canonical seed score (|Δ| ≤ 1e-9, no
tolerance: the responses are the paper's). Per row it counts agreement with the archived extraction and score and
keeps the first differing rows, of either stage, for the receipt: an extraction that differs where the score agrees
is a divergence too (the extractor is claimed exact), so the slice is exact only when both agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from trace_lib.archive.extraction_form import NOT_COMPARABLE_NOTE, extraction_key
from trace_lib.archive.reader import ArchiveRoot
from trace_lib.archive.replay_judge import ReplayStats, build_replay
from trace_lib.archive.schema import ArchiveRow, SliceKey
from trace_lib.errors import InputError, JudgeError
from trace_lib.release.identity import RESULTS

#: Exact equality after the release's rounding (its values carry at most 10 decimals: 5e-11 < 1e-9).
EXACT = 1e-9
FIRST_DIFFS = 5


@dataclass(frozen=True)
class RowDiff:
    """One row where trace-repro's reading differs from the archive's."""

    source_index: str
    stage: str  # "extraction" or "score"
    archived: Any
    ours: Any

    def render(self) -> str:
        return f"{self.stage}@{self.source_index}: archive {self.archived!r} vs trace-repro {self.ours!r}"


@dataclass(frozen=True)
class RescoreOutcome:
    """A re-scored slice: our score, the archive's and the release's, per-row agreement, replay coverage."""

    key: SliceKey
    rows: int
    score: float | None  # None when the replayed judge could not answer every request (then see ``replay``)
    archived_score: float
    canonical: float | None
    score_agree: int
    score_compared: int
    extraction_agree: int
    extraction_compared: int
    first_diffs: tuple[RowDiff, ...]
    judge_mode: str  # "none", "live" or "replay"
    replay: ReplayStats | None = None
    extraction_note: str | None = None  # why extractions were not compared (the route archives no extracted answer)

    @property
    def delta(self) -> float | None:
        if self.score is None or self.canonical is None:
            return None
        return self.score - self.canonical

    @property
    def ok(self) -> bool:
        """The re-score equals the canonical seed score: the slice score alone (``exact`` is the verdict)."""
        return self.delta is not None and abs(self.delta) <= EXACT

    @property
    def extractions_agree(self) -> bool:
        """Every archived extraction compared reads the same as trace-repro's (vacuous when none is compared)."""
        return self.extraction_agree == self.extraction_compared

    @property
    def row_scores_agree(self) -> bool:
        """Every archived row score compared equals trace-repro's credit (vacuous when the archive holds none): row
        differences that cancel in the slice score are still differences."""
        return self.score_agree == self.score_compared

    @property
    def exact(self) -> bool:
        """The slice's verdict: its score, every row score and every extraction compared agree."""
        return self.ok and self.row_scores_agree and self.extractions_agree

    def explain(self) -> str:
        if self.score is None and self.replay is not None:
            return (f"{self.key.id}: not re-scored: the replay judge could not answer every request "
                    f"({self.replay.explain()}); pass --judge-url (archive aggregate {self.archived_score!r}, "
                    f"canonical {self.canonical!r})")
        head = (f"{self.key.id}: re-scored {self.score!r} vs canonical {self.canonical!r} (archive aggregate "
                f"{self.archived_score!r}); rows {self.score_agree}/{self.score_compared} scores and "
                f"{self.extraction_agree}/{self.extraction_compared} extractions agree")
        if self.first_diffs:
            head += "; first differing rows: " + "; ".join(d.render() for d in self.first_diffs)
        return head

    def properties(self) -> list[tuple[str, str]]:
        props = [("slice", self.key.id + "-archive"), ("archive_rows", str(self.rows)),
                 ("rescored", repr(self.score)), ("archived_score", repr(self.archived_score)),
                 ("canonical", repr(self.canonical)), ("delta", repr(self.delta)),
                 ("rows_score_agree", f"{self.score_agree}/{self.score_compared}"),
                 ("rows_extraction_agree", f"{self.extraction_agree}/{self.extraction_compared}"),
                 ("judge_mode", self.judge_mode),
                 ("verdict", "exact" if self.exact else "differs")]
        props += [(f"first_diff[{i}]", d.render()) for i, d in enumerate(self.first_diffs)]
        if self.extraction_note:
            props.append(("extraction_compared", self.extraction_note))
        if self.replay is not None:
            props += self.replay.properties()
        return props


def canonical_seed_scores(release: Any) -> dict[tuple[str, int, str], float]:
    """``(model_id, seed, benchmark) -> score`` from the release's ``trace_eval/results.json``."""
    doc = release.read_json(RESULTS)
    return {(str(r["model_id"]), int(r["seed"]), str(r["benchmark_id"])): float(r["score"])
            for r in (doc.get("scores") or {}).get("benchmark_scores") or []}


def align_rows(archived: Sequence[ArchiveRow], rows: Sequence[Mapping[str, Any]], *, key: SliceKey,
               dataset: str) -> list[ArchiveRow]:
    """The archived rows in dataset order, matched by row identity.

    Raises:
        InputError: the dataset and the archive disagree on rows (names the first row and the count).
    """
    from trace_lib.data.rowhash import row_key, source_row_hash

    by_key = {a.row_key: a for a in archived}
    expected = [row_key(i, row["index"], source_row_hash(row)) for i, row in enumerate(rows)]
    missing = [k for k in expected if k not in by_key]
    if missing or len(by_key) != len(expected):
        extra = sorted(set(by_key) - set(expected))
        raise InputError(
            f"the archive's rows differ from the dataset for {key.id}: {len(missing)} dataset row(s) without an "
            f"archived response, {len(extra)} archived row(s) not in the dataset", file=dataset,
            hint=f"first: {(missing or extra)[0]}; the dataset is not the paper's (prepare-data at the pinned "
                 "revision) or rows were edited")
    return [by_key[k] for k in expected]


def rescore_slice(
    archive: ArchiveRoot, key: SliceKey, protocol: Any, rows: Sequence[Mapping[str, Any]], *,
    canonical: float | None, judge: Any = None, dataset: str = "dataset", compare_extraction: bool = True,
    archived: Sequence[ArchiveRow] | None = None,
) -> RescoreOutcome:
    """Re-score one archived slice (see the module docstring). ``judge``: a live judge; None on a judge route
    builds the replay judge from the archive. ``compare_extraction``: whether the archive's extraction values are
    extracted answers (:func:`trace_lib.archive.extraction_form.comparable` of the benchmark's route); when not,
    no extraction agreement is counted. ``archived``: the slice's rows when the caller already read them
    (``archive.iter_slice(key)``); None reads them here.

    Raises:
        InputError: the archive does not cover the dataset rows; PartDigestError: a tampered part.
        JudgeError: a live judge failed.
    """
    from trace_lib.benchmarks.protocol import ScoringContext
    from trace_lib.scoring.score import score_slice

    if archived is None:
        archived = list(archive.iter_slice(key))
    archived = align_rows(archived, rows, key=key, dataset=dataset)
    aggregate = archive.aggregate(key)
    responses = [a.response_text for a in archived]
    mode, stats = "none", None
    if protocol.judge != "none":
        if judge is not None:
            mode = "live"
        else:
            mode = "replay"

            def score_one(row: Any, response: str, probe: Any) -> Any:
                return protocol.score([row], [response], ScoringContext(seed=key.seed, judge=probe))

            judge = build_replay(rows, responses, [(a.source_index, a.judge_outputs()) for a in archived],
                                 score_one)
            stats = judge.stats
    try:
        result = score_slice(protocol, rows, responses, ScoringContext(seed=key.seed, judge=judge), source=dataset)
    except JudgeError:
        if stats is None or stats.complete:
            raise
        # the replay could not answer what the protocol asked: no score, the counts say why
        return RescoreOutcome(key, len(archived), None, aggregate.score, canonical, 0, 0, 0, 0, (), mode, stats,
                              None if compare_extraction else NOT_COMPARABLE_NOTE)
    score: float | None = result.score
    if stats is not None and not stats.complete:
        score = None
    diffs: list[RowDiff] = []
    s_agree = s_n = e_agree = e_n = 0
    for a, rec in zip(archived, result.records):
        if a.has_row_score and not a.excluded and a.score_value is not None:
            s_n += 1
            if math.isclose(float(rec.score), float(a.score_value), abs_tol=1e-12):
                s_agree += 1
            elif len(diffs) < FIRST_DIFFS:
                diffs.append(RowDiff(a.source_index, "score", a.score_value, rec.score))
        if compare_extraction and a.extraction_value_json is not None and a.extraction_status == "resolved":
            e_n += 1
            if extraction_key(rec.extracted) == extraction_key(a.extraction_value()):
                e_agree += 1
            elif len(diffs) < FIRST_DIFFS:
                diffs.append(RowDiff(a.source_index, "extraction", a.extraction_value(), rec.extracted))
    return RescoreOutcome(key, len(archived), score, aggregate.score, canonical, s_agree, s_n, e_agree, e_n,
                          tuple(diffs), mode, stats, None if compare_extraction else NOT_COMPARABLE_NOTE)
