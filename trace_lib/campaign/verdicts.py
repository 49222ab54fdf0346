"""A campaign's verdicts from its scored slices: the one path ``score``, ``summarize`` and ``tests_reproduction``
share (per-row credits from ``records.jsonl`` -> :func:`~trace_lib.aggregation.verdict.judge_credits`).

The family is the plan's (``trace-repro plan`` with the same ``--model-id``/``--seeds``/``--benchmark``: release
models, release seeds and the whole suite by default), never what happens to be on disk, so ``score --benchmark
X`` and ``summarize --benchmark X`` judge with the same per-test level.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from trace_lib.aggregation.canonical import Canonical, load_canonical
from trace_lib.aggregation.credits import CreditTable
from trace_lib.aggregation.verdict import DEFAULT_MARGIN, VerdictPlan, VerdictSet, judge_credits
from trace_lib.aggregation.budget import DEFAULT_ALPHA
from trace_lib.errors import InputError
from trace_lib.scoring.plain_responses import indexed_records


def verdict_plan(release: Any, *, model_ids: Sequence[str] | None = None, seeds: Sequence[Any] | None = None,
                 benchmarks: Sequence[str] | None = None) -> VerdictPlan:
    """The family of the campaign ``trace-repro plan`` would resolve from these flags.

    Raises:
        UsageError: an unknown model, seed or benchmark.
    """
    from trace_lib.campaign.plan import build_plan

    return VerdictPlan.of(build_plan(release, model_ids=model_ids or (), seeds=seeds, benchmarks=benchmarks,
                                     with_judge=False))


@dataclass(frozen=True)
class CampaignVerdicts:
    """The verdicts of a campaign's scored slices, the credits they came from and the slices not usable."""

    result: VerdictSet
    credits: CreditTable
    missing: tuple[Any, ...]  # SliceState of slices not scored or not verified


def judge_campaign(root: Path, release: Any, plan: VerdictPlan, slices: Sequence[Any], *,
                   alpha: float = DEFAULT_ALPHA, margin: float = DEFAULT_MARGIN, archive_root: Any = None,
                   canonical: Canonical | None = None) -> CampaignVerdicts:
    """Judge the receipt-verified ``slices`` of the campaign at ``root`` under ``plan``'s family
    (``archive_root``: the paper's per-row canonical credits for the canonical side's row variance).

    Raises:
        InputError, UsageError: see :func:`~trace_lib.aggregation.verdict.judge_credits`.
    """
    from trace_lib.reports.collect import current_protocol_versions

    canonical = canonical or load_canonical(release)
    rows = {b: canonical.rows(b) for b in canonical.suite.keys}
    credits, missing = campaign_credits(Path(root), slices, rows=rows,
                                        protocol_versions=current_protocol_versions(canonical.suite.keys))
    archive = archive_credits(archive_root, {(m, b) for m, b in credits.cells()}) if archive_root else None
    result = judge_credits(credits, release, alpha=alpha, margin=margin, plan=plan, canonical=canonical,
                           archive_credits=archive)
    return CampaignVerdicts(result, credits, tuple(missing))


class CampaignJudge:
    """Judges one planned test at a time from a campaign directory (``tests_reproduction``): reads only the cells
    the test needs (cached once every planned seed of a cell is scored and verified), under the plan's family."""

    def __init__(self, root: Path, release: Any, plan: Any, *, alpha: float = DEFAULT_ALPHA,
                 margin: float = DEFAULT_MARGIN, archive_root: Any = None, canonical: Canonical | None = None) -> None:
        from trace_lib.aggregation.verdict import planned_tests

        self.root, self.release, self.plan = Path(root), release, VerdictPlan.of(plan)
        self.alpha, self.margin, self.archive_root = alpha, margin, archive_root
        self.canonical = canonical or load_canonical(release)
        self.specs = {spec.test_id: spec for spec in planned_tests(self.canonical, self.plan)}
        self._cells: dict[tuple[str, str], CreditTable] = {}

    def missing(self, cell: tuple[str, str]) -> list[Any]:
        """The planned slices of ``cell`` not yet scored and verified (empty: its credits are cached)."""
        if cell in self._cells:
            return []
        from trace_lib.slices import Slice
        from trace_lib.reports.collect import current_protocol_versions

        slices = [Slice(cell[0], seed, cell[1]) for seed in self.plan.seeds]
        rows = {b: self.canonical.rows(b) for b in self.canonical.suite.keys}
        table, missing = campaign_credits(self.root, slices, rows=rows,
                                          protocol_versions=current_protocol_versions([cell[1]]))
        if not missing:
            self._cells[cell] = table
        return [m.key for m in missing]

    def judge(self, test_id: str):  # noqa: ANN201 - Verdict | str
        """The test's verdict, or why it cannot be judged yet (one sentence naming the unscored slices).

        Raises:
            KeyError: ``test_id`` is not a planned test.
        """
        spec = self.specs[test_id]
        missing = [key for cell in spec.cells for key in self.missing(cell)]
        if missing:
            shown = " ".join(k.id for k in missing[:5]) + (" ..." if len(missing) > 5 else "")
            return f"{test_id}: {len(missing)} planned slice(s) not scored and verified yet: {shown}"
        credits = CreditTable.concat([self._cells[c] for c in spec.cells], source=str(self.root))
        archive = archive_credits(self.archive_root, spec.cells) if self.archive_root else None
        result = judge_credits(credits, self.release, alpha=self.alpha, margin=self.margin, plan=self.plan,
                               canonical=self.canonical, archive_credits=archive)
        verdict = result.by_id().get(test_id)
        return verdict if verdict is not None else f"{test_id}: no verdict (no canonical value)"


def campaign_credits(root: Path, slices: Sequence[Any], *, protocol_versions: Mapping[str, str] | None = None,
                     rows: Mapping[str, int] | None = None) -> tuple[CreditTable, list[Any]]:
    """The per-row credits of a campaign's receipt-verified slices (``records.jsonl``: ``score`` is the credit,
    the aggregate's fields are keys of ``detail``). Returns the table and the slice states not usable (missing,
    incomplete or unverified)."""
    from trace_lib.benchmarks.registry import get_protocol
    from trace_lib.reports.collect import CampaignReader

    reader = CampaignReader(Path(root), dict(rows or {}))
    tables, missing = [], []
    for key in slices:
        state = reader.score(key, protocol_versions=protocol_versions)
        if not state.complete or state.score is None:
            missing.append(state)
            continue
        fields = get_protocol(key.benchmark).row_aggregate.fields
        path = Path(state.path).parent / "records.jsonl"
        records = []
        for number, rec in indexed_records(path):  # strict JSON objects with an index, each line checked
            detail = rec.get("detail") if isinstance(rec.get("detail"), dict) else {}
            if "score" not in rec:
                raise InputError("record has no score", file=str(path), field=f"line {number}.score")
            records.append({"model_id": key.model, "seed": key.seed, "benchmark_id": key.benchmark,
                            "index": rec["index"], "credit": rec["score"], **{f: detail.get(f) for f in fields}})
        tables.append(CreditTable.from_records(records, source=str(path)))
    return CreditTable.concat(tables, source=str(root)), missing


def archive_credits(root: Any, cells: Iterable[tuple[str, str]]) -> CreditTable | None:
    """The paper's own per-row canonical credits for ``cells`` (model, benchmark) from a fetched archive
    (``trace-repro fetch-runs``): every archived seed of each cell whose benchmark is a plain mean and whose
    archive holds row-level scores (aggregate-only slices and structured aggregates are left out). None when no
    cell has any.

    Raises:
        UsageError, InputError: the archive cannot be opened or a part is unreadable.
    """
    from trace_lib.archive.reader import open_archive
    from trace_lib.benchmarks.registry import get_protocol

    archive = open_archive(root)
    wanted = set(cells)
    records = []
    for key in archive.slices():
        if (key.model_id, key.benchmark_id) not in wanted:
            continue
        if get_protocol(key.benchmark_id).row_aggregate.fields:
            continue
        rows = [r for r in archive.iter_slice(key) if not r.excluded]
        if not rows or not all(r.has_row_score and r.score_value is not None for r in rows):
            continue
        records += [{"model_id": key.model_id, "seed": key.seed, "benchmark_id": key.benchmark_id,
                     "index": r.source_index, "credit": float(r.score_value)} for r in rows]
    return CreditTable.from_records(records, source=str(root)) if records else None
