"""The paper's archive (``trace-repro fetch-runs``) as the reference side of a diagnosis.

Each archived row becomes a :class:`~trace_lib.diagnose.views.RowView`: upstream's ``prompt_sha256`` and
``media_set_sha256``, the archived response with its finish reason and token counts, the archived extraction
(its value where the benchmark's route archives an extracted answer, :mod:`trace_lib.archive.extraction_form`;
whether a judge was called) and the row credit; the slice score is the archive's
aggregate. Request hashes are in upstream's public namespace, so they are compared only archive to archive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from trace_lib.archive.extraction_form import NOT_COMPARABLE_NOTE, comparable, extraction_key
from trace_lib.archive.reader import ArchiveRoot, open_archive
from trace_lib.diagnose.views import RowView, SliceKey, SliceView
from trace_lib.errors import UsageError

NAMESPACE = "trace-eval-public-request-v1"


@dataclass(frozen=True)
class ArchiveReference:
    """A fetched archive, read slice by slice."""

    archive: ArchiveRoot
    routes: Mapping[str, str] = field(default_factory=dict)  # benchmark -> the suite's scoring route

    @classmethod
    def open(cls, root: Path, *, routes: Mapping[str, str] | None = None) -> ArchiveReference:
        """``routes`` (:func:`~trace_lib.archive.extraction_form.benchmark_routes`) says which benchmarks archive
        an extracted answer; without a route a benchmark's archived extraction is not compared."""
        return cls(open_archive(root), dict(routes or {}))

    @property
    def description(self) -> str:
        return f"archive {self.archive.root} ({', '.join(run.run_id for run in self.archive.runs)})"

    def slice(self, key: SliceKey) -> SliceView | None:
        """The archived slice ``key`` (``None`` when the archive does not hold it)."""
        try:
            archive_key = self.archive.find(key.model, key.seed, key.benchmark)
        except UsageError:
            return None
        rows = {}
        compare = comparable(self.routes.get(key.benchmark))
        for row in self.archive.iter_slice(archive_key):
            extracted = None
            if compare and row.extraction_value_json is not None:
                extracted = extraction_key(row.extraction_value())
            rows[row.source_index] = RowView(
                index=row.source_index, prompt_sha256=row.prompt_sha256, media_set_sha256=row.media_set_sha256,
                request_key=row.request_sha256, response=row.response_text, finish_reason=row.finish_reason,
                prompt_tokens=row.prompt_tokens, completion_tokens=row.completion_tokens, extracted=extracted,
                used_judge=bool(row.judge_outputs()), score=row.score_value if row.has_row_score else None,
            )
        return SliceView(key=key, source=self.description, rows=rows,
                         score=self.archive.aggregate(archive_key).score,
                         request_namespace=NAMESPACE, notes=() if compare else (NOT_COMPARABLE_NOTE,))
