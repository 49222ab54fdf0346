"""Campaign progress (``trace-repro status``): durable rows, verified score slices, rate and ETA, GPUs.

A snapshot counts, per (model, seed): rows stored in the response files (capped at the suite rows), benchmarks
fully generated, ``scores.json`` files present with a finite score (``observed_score_files``, whatever their row
count or receipts), and those that also pass the receipt checks of ``trace-repro verify --phase score``
(``score_slices``). The generation rate needs two observations: :func:`build_status` takes the previous snapshot
(``--watch``); without one, the rate and ETA are ``None``. ``complete`` = every row durable and every slice
receipt-verified.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from trace_lib.decoding import ascii_digits
from trace_lib.reports.collect import CampaignReader, current_protocol_versions, expected_slices
from trace_lib.release.suite import Suite


@dataclass(frozen=True)
class ModelSeedProgress:
    """Progress of one (model, seed)."""

    model: str
    seed: int
    durable_rows: int
    expected_rows: int
    generation_benchmarks: int
    expected_benchmarks: int
    score_slices: int
    observed_score_files: int

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "model_slug": self.model, "durable_rows": self.durable_rows,
                "expected_rows": self.expected_rows, "generation_benchmarks": self.generation_benchmarks,
                "expected_benchmarks": self.expected_benchmarks, "score_slices": self.score_slices,
                "observed_score_files": self.observed_score_files, "expected_score_slices": self.expected_benchmarks}


@dataclass(frozen=True)
class StatusReport:
    """One snapshot of a campaign's progress."""

    suite: str
    suite_sha256: str
    campaign_root: str
    models: tuple[str, ...]
    seeds: tuple[int, ...]
    benchmarks: tuple[str, ...]
    rows_per_model_seed: int
    records: tuple[ModelSeedProgress, ...]
    observed_at: float
    rows_per_second: float | None = None
    gpus: tuple[dict[str, Any], ...] = ()
    warnings: tuple[str, ...] = field(default=())

    @property
    def durable_rows(self) -> int:
        return sum(r.durable_rows for r in self.records)

    @property
    def expected_rows(self) -> int:
        return sum(r.expected_rows for r in self.records)

    @property
    def score_slices(self) -> int:
        return sum(r.score_slices for r in self.records)

    @property
    def observed_score_files(self) -> int:
        return sum(r.observed_score_files for r in self.records)

    @property
    def expected_score_slices(self) -> int:
        return sum(r.expected_benchmarks for r in self.records)

    @property
    def generation_eta_seconds(self) -> float | None:
        remaining = self.expected_rows - self.durable_rows
        if remaining == 0:
            return 0.0
        if not self.rows_per_second:
            return None
        return remaining / self.rows_per_second

    @property
    def complete(self) -> bool:
        return self.durable_rows == self.expected_rows and self.score_slices == self.expected_score_slices

    def to_json(self) -> dict[str, Any]:
        return {
            "suite": self.suite, "suite_manifest_sha256": self.suite_sha256, "campaign_root": self.campaign_root,
            "models": list(self.models), "seeds": list(self.seeds), "benchmarks": len(self.benchmarks),
            "rows_per_model_seed": self.rows_per_model_seed, "durable_rows": self.durable_rows,
            "expected_rows": self.expected_rows, "recent_rows_per_second": self.rows_per_second,
            "generation_eta_seconds": self.generation_eta_seconds, "score_slices": self.score_slices,
            "observed_score_files": self.observed_score_files, "expected_score_slices": self.expected_score_slices,
            "records": [r.to_dict() for r in self.records], "gpus": list(self.gpus), "warnings": list(self.warnings),
            "complete": self.complete,
        }

    def lines(self) -> list[str]:
        pct = 100.0 * self.durable_rows / self.expected_rows if self.expected_rows else 100.0
        rate = "rate needs --watch" if self.rows_per_second is None else f"{self.rows_per_second:.2f} rows/s"
        eta = self.generation_eta_seconds
        eta_text = "ETA -" if eta is None else f"ETA {_duration(eta)}"
        out = [
            f"[trace-repro status] generation {self.durable_rows}/{self.expected_rows} rows ({pct:.1f}%), {rate}, "
            f"{eta_text}; scores {self.score_slices}/{self.expected_score_slices} slices verified "
            f"({self.observed_score_files} scores.json present); complete={str(self.complete).lower()}"
        ]
        for r in self.records:
            out.append(f"[trace-repro status:slice] {r.model} seed {r.seed}: rows {r.durable_rows}/{r.expected_rows}, "
                       f"benchmarks generated {r.generation_benchmarks}/{r.expected_benchmarks}, "
                       f"scores verified {r.score_slices}/{r.expected_benchmarks} "
                       f"({r.observed_score_files} scores.json present)")
        for gpu in self.gpus:
            out.append(f"[trace-repro status:gpus] GPU {gpu['index']}: {gpu['utilization']}% util, "
                       f"{gpu['memory_used_mib']}/{gpu['memory_total_mib']} MiB")
        out += [f"[trace-repro status:warning] {w}" for w in self.warnings]
        return out


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def query_gpus() -> tuple[dict[str, Any], ...]:
    """Utilisation and memory of each GPU from ``nvidia-smi`` (empty when it is absent or fails)."""
    if shutil.which("nvidia-smi") is None:
        return ()
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used,memory.total",
             "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    gpus = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4 and all(ascii_digits(p) for p in parts):
            index, util, used, total = map(int, parts)
            gpus.append({"index": index, "utilization": util, "memory_used_mib": used, "memory_total_mib": total})
    return tuple(gpus)


def build_status(
    root: Path,
    suite: Suite,
    *,
    models: Sequence[str],
    seeds: Sequence[int],
    benchmarks: Sequence[str] | None = None,
    reader: CampaignReader | None = None,
    previous: StatusReport | None = None,
    gpus: tuple[dict[str, Any], ...] = (),
    low_gpu_threshold: int = 10,
    now: float | None = None,
) -> StatusReport:
    """A progress snapshot of ``root`` (``previous``: the last snapshot of a watch loop, for the rate)."""
    keys = tuple(benchmarks) if benchmarks else suite.keys
    reader = reader or CampaignReader(Path(root), {b.key: b.rows for b in suite.benchmarks})
    versions = current_protocol_versions(keys)
    records = []
    odd: list[str] = []
    for model in models:
        for seed in seeds:
            durable = generated = verified = observed = 0
            for key in expected_slices([model], [seed], keys):
                odd += reader.odd_files(key)
                rows = reader.durable_rows(key)
                durable += rows
                generated += rows == reader.rows[key.benchmark]
                state = reader.score(key, protocol_versions=versions)
                verified += state.complete
                observed += state.score is not None  # every scores.json with a score, verified or not
            records.append(ModelSeedProgress(model, seed, durable, sum(reader.rows[k] for k in keys), generated,
                                             len(keys), verified, observed))
    observed_at = time.time() if now is None else now
    rate = None
    if previous is not None and observed_at > previous.observed_at:
        rate = max(0.0, (sum(r.durable_rows for r in records) - previous.durable_rows)
                   / (observed_at - previous.observed_at))
    report = StatusReport(suite.suite_id, suite.sha256, str(root), tuple(models), tuple(seeds), keys,
                          sum(reader.rows[k] for k in keys), tuple(records), observed_at, rate, gpus)
    warnings = [f"{line} (counted as absent; move it away to regenerate or rescore the slice)" for line in odd]
    if gpus and report.durable_rows < report.expected_rows and all(g["utilization"] < low_gpu_threshold for g in gpus):
        warnings.append(f"generation is incomplete while every GPU is below {low_gpu_threshold}% utilisation")
    if warnings:
        report = StatusReport(**{**report.__dict__, "warnings": tuple(warnings)})
    return report
