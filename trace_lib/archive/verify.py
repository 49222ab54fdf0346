"""What a CPU proves about an archive run, per slice (``trace-repro archive verify``): the scores re-computed
exactly from the archived responses, the rows identical to trace-repro's requests in all eight hash fields, the run
that answered and whether the release pins it, and what only a GPU can test (sampling).

:func:`verify_slices` runs the archive lane (:class:`~trace_lib.archive.lane.ArchiveLane`) on each slice;
:func:`render_markdown` and :func:`to_json` render the same :class:`SliceProof` list.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from trace_lib.archive.lane import LEFT_TO_GPU, ArchiveLane, slice_of
from trace_lib.archive.schema import SliceKey
from trace_lib.errors import TraceReproError

SCHEMA_VERSION = "trace-repro-archive-verify-v1"


@dataclass(frozen=True)
class SliceProof:
    """One slice: what is proven (``scores_exact``, ``row_scores``, ``extractions``, ``rows_identical``), by which
    run, and what is left."""

    slice: str
    run_id: str | None
    source_artifact: str  # "yes", or the sentence saying it is not (or "-" when the slice was not checked)
    rescored: float | None = None
    canonical: float | None = None
    archived: float | None = None
    scores_exact: bool | None = None  # None: not checked (see problem)
    row_scores: str | None = None  # "k/n" archived row scores trace-repro's credits equal (n = 0: none archived)
    row_scores_agree: bool | None = None
    extractions: str | None = None  # "k/n" archived extractions trace-repro reads the same (n = 0: none compared)
    extractions_agree: bool | None = None
    rows_identical: str | None = None  # "k/n" over ``fields``
    identity_ok: bool | None = None
    fields: tuple[str, ...] = ()
    not_compared: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    left_to_gpu: str = LEFT_TO_GPU
    problem: str | None = None  # why the slice was not checked, or the one-line failure

    @property
    def proven(self) -> bool:
        return (bool(self.scores_exact) and bool(self.row_scores_agree) and bool(self.extractions_agree)
                and bool(self.identity_ok))


def verify_slices(lane: ArchiveLane, keys: Iterable[SliceKey]) -> list[SliceProof]:
    """Check every slice of ``keys`` with ``lane`` (a slice it cannot check says why; nothing raises per slice
    except a usage error, e.g. two runs holding one slice)."""
    proofs = []
    for key in keys:
        slice_ = slice_of(key)
        blocker = lane.blocker(slice_)
        if blocker:
            proofs.append(SliceProof(key.id, None, "-", problem=f"not checked: {blocker}"))
            continue
        try:
            result = lane.run(slice_)
        except TraceReproError as exc:
            if exc.field == "--run-id":
                raise
            proofs.append(SliceProof(key.id, None, "-", problem=exc.render()))
            continue
        r, ident = result.rescore, result.identity
        proofs.append(SliceProof(
            key.id, result.source.run_id, "yes" if result.source.pinned else result.source.describe(),
            rescored=r.score, canonical=r.canonical, archived=r.archived_score, scores_exact=r.ok,
            row_scores=f"{r.score_agree}/{r.score_compared}", row_scores_agree=r.row_scores_agree,
            extractions=f"{r.extraction_agree}/{r.extraction_compared}", extractions_agree=r.extractions_agree,
            rows_identical=None if ident is None else f"{ident.identical}/{ident.compared}",
            identity_ok=None if ident is None else ident.ok, fields=() if ident is None else ident.fields,
            not_compared={} if ident is None else dict(ident.not_compared),
            notes=() if ident is None else ident.notes,
            problem=result.failure() or (None if ident is not None else
                                         f"identity not checked: {result.identity_problem}"),
        ))
    return proofs


def to_json(proofs: Sequence[SliceProof], *, archive: str) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "archive": archive,
            "proven": sum(p.proven for p in proofs), "slices": [asdict(p) for p in proofs]}


def _mark(value: bool | None) -> str:
    return {True: "yes", False: "**no**", None: "-"}[value]


def _count(value: str | None, agree: bool | None) -> str:
    """A "k/n" agreement count, bold when short; "-" when not checked."""
    return "-" if value is None else (value if agree else f"**{value}**")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def render_markdown(proofs: Sequence[SliceProof], *, archive: str) -> str:
    """One table row per slice (what is proven), then each slice's problem and fields not compared."""
    proven = sum(p.proven for p in proofs)
    lines = [
        "# trace-repro archive verify", "",
        f"- archive: {archive}",
        f"- proven on this CPU: {proven}/{len(proofs)} slices (scores exact, every archived row score and "
        "extraction read the same and every row identical in every hash field compared)",
        f"- left to a GPU: {LEFT_TO_GPU}", "",
        "| slice | run | source artifact | scores exact | row scores agree | extractions agree | re-scored | canonical "
        "| rows identical | hash fields |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in proofs:
        source = "yes" if p.source_artifact == "yes" else ("-" if p.source_artifact == "-" else "**no**")
        lines.append(f"| {p.slice} | {p.run_id or '-'} | {source} | {_mark(p.scores_exact)} | "
                     f"{_count(p.row_scores, p.row_scores_agree)} | {_count(p.extractions, p.extractions_agree)} | "
                     f"{_num(p.rescored)} | {_num(p.canonical)} | {p.rows_identical or '-'} | {len(p.fields) or '-'} |")
    details = [p for p in proofs if p.problem or p.not_compared or p.notes or p.source_artifact not in ("yes", "-")]
    if details:
        lines += ["", "## Details", ""]
    for p in details:
        if p.problem:
            lines.append(f"- {p.slice}: {p.problem}")
        if p.source_artifact not in ("yes", "-") and p.source_artifact not in (p.problem or ""):
            lines.append(f"- {p.slice}: {p.source_artifact}")  # an unpinned run is said even beside a problem
        for name, why in sorted(p.not_compared.items()):
            lines.append(f"- {p.slice}: {name} not compared: {why}")
        for note in p.notes:
            lines.append(f"- {p.slice}: note: {note}")
    return "\n".join(lines) + "\n"
