"""Where a TRACE-validation campaign keeps its files: one work directory, one folder per stage and model.

``<work>/`` (``--work-dir``, default ``<campaign-root>/validation``)::

    inputs/<dataset file>                 the downloaded parquet (``prepare --download``)
    dataset/manifest.json, dataset/media/ prepared rows + content-addressed images
    generation/<slug>/                    run_metadata.json, responses.jsonl, receipts/<row:06d>.json
    scoring/<slug>/                       scored_rows.jsonl, judge_pending.jsonl, summary.json, by_task.jsonl, summary.md
    judge/<slug>/                         judge_results.jsonl, receipts/<request_hash>.json

Per-model folders (upstream scores all eight models in one folder) let each model's slice run, resume and be
verified on its own; the numbers are the same because every aggregate is per model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trace_lib import options
from trace_lib.validation import pins


@dataclass(frozen=True)
class ValidationLayout:
    root: Path

    @classmethod
    def resolve(cls, work_dir: str | Path | None = None, campaign_root: str | Path | None = None) -> ValidationLayout:
        """``work_dir``, else ``$TRACE_VALIDATION_DIR``, else ``<campaign_root>/validation``, else
        ``trace-repro-work/validation``."""
        value = work_dir or options.VALIDATION_DIR_ENV.read()
        if not value:
            value = Path(campaign_root) / "validation" if campaign_root else options.DEFAULT_WORK_DIR / "validation"
        return cls(Path(value).expanduser().resolve())

    @property
    def parquet(self) -> Path:
        return self.root / "inputs" / pins.REPRODUCTION_DATASET.file

    @property
    def dataset_dir(self) -> Path:
        return self.root / "dataset"

    @property
    def manifest(self) -> Path:
        return self.dataset_dir / pins.MANIFEST_NAME

    def generation_dir(self, slug: str) -> Path:
        return self.root / "generation" / slug

    def responses(self, slug: str) -> Path:
        return self.generation_dir(slug) / "responses.jsonl"

    def scoring_dir(self, slug: str) -> Path:
        return self.root / "scoring" / slug

    def judge_dir(self, slug: str) -> Path:
        return self.root / "judge" / slug

    def judge_results(self, slug: str) -> Path:
        return self.judge_dir(slug) / "judge_results.jsonl"
