"""An archive run of the paper's public schema (``trace-repro fetch-runs``, or any export of it) as one side of a
diagnosis.

Each archived row becomes a :class:`~trace_lib.diagnose.views.RowView`: upstream's ``prompt_sha256``,
``media_set_sha256`` and ``request_sha256`` (public namespace: compared archive to archive), the archived response
with its finish reason and token counts, the archived extraction value with whether a judge was *called* (the
recorded calls, not the ``used_judge`` flag, which upstream also sets when no call was made) and the row credit; the
slice score is the archive's aggregate. The extraction form is the route's (:mod:`trace_lib.archive.extraction_form`):
two archives hold the same form on every route, so their extractions always compare (on aggregate-only benchmarks
they are the only per-row signal); against a campaign they compare only where the archive holds an extracted
answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from trace_lib.archive.extraction_form import comparable, extraction_key
from trace_lib.archive.reader import ArchiveRoot, open_archive
from trace_lib.archive.schema import SliceKey as ArchiveKey
from trace_lib.diagnose.views import EXTRACTED, RowView, SliceKey, SliceView

NAMESPACE = "trace-eval-public-request-v1"


def extraction_form(route: str | None) -> str:
    """What an archive's ``extraction_value_json`` holds on ``route``."""
    if comparable(route):
        return EXTRACTED
    if route is None:
        return "archived extraction value (route unknown)"
    return f"{route} route: the prediction handed to the scorer, not its extracted answer"


@dataclass(frozen=True)
class ArchiveReference:
    """A fetched archive (root or run directory), read slice by slice; ``release`` (optional) says for each run
    whether it is the release's pinned source artifact."""

    archive: ArchiveRoot
    routes: Mapping[str, str] = field(default_factory=dict)  # benchmark -> the suite's scoring route
    release: Any = None

    @classmethod
    def open(cls, root: Path, *, routes: Mapping[str, str] | None = None, run_id: str | None = None,
             release: Any = None) -> ArchiveReference:
        """``routes`` (:func:`~trace_lib.archive.extraction_form.benchmark_routes`) name each benchmark's extraction
        form; ``run_id`` picks one run of a root holding several."""
        return cls(open_archive(root, run_id=run_id), dict(routes or {}), release)

    @property
    def description(self) -> str:
        return f"archive {self.archive.root} ({', '.join(run.run_id for run in self.archive.runs)})"

    def keys(self) -> list[SliceKey]:
        """Every slice of the archive, sorted by model, seed, benchmark."""
        return sorted((SliceKey(k.model_id, k.seed, k.benchmark_id) for k in self.archive.slices()),
                      key=lambda k: (k.model, k.seed, k.benchmark))

    def slice(self, key: SliceKey) -> SliceView | None:
        """The archived slice ``key`` (``None`` when no run holds it).

        Raises:
            UsageError: several runs hold it (``--run-id`` picks one).
        """
        archive_key = ArchiveKey(key.model, key.seed, key.benchmark)
        if not any(archive_key in run.parts for run in self.archive.runs):
            return None
        run = self.archive.run_of(archive_key)
        rows = {}
        for row in self.archive.iter_slice(archive_key):
            extracted = None if row.extraction_value_json is None else extraction_key(row.extraction_value())
            rows[row.source_index] = RowView(
                index=row.source_index, prompt_sha256=row.prompt_sha256, media_set_sha256=row.media_set_sha256,
                request_key=row.request_sha256, response=row.response_text, finish_reason=row.finish_reason,
                prompt_tokens=row.prompt_tokens, completion_tokens=row.completion_tokens, extracted=extracted,
                used_judge=bool(row.judge_outputs()), score=row.score_value if row.has_row_score else None,
            )
        notes = []
        if self.release is not None:
            from trace_lib.archive.provenance import source_check

            notes.append(source_check(self.release, run, model_id=key.model).describe())
        return SliceView(key=key, source=f"archive run {run.run_id} ({run.root})", rows=rows,
                         score=self.archive.aggregate(archive_key).score, request_namespace=NAMESPACE,
                         notes=tuple(notes), extraction_form=extraction_form(self.routes.get(key.benchmark)))
