"""Diagnosis reports: ``diagnose.json`` (machine-readable), ``diagnose.md`` (one table row per slice, then the
diverging slices' examples and statistics) and ``diagnose-<model>.png`` (score delta per benchmark over its band)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from trace_lib.atomic import FileSet, atomic_outputs, json_document, staged_or_atomic
from trace_lib.diagnose.attribution import STAGES, SliceDiagnosis


def diagnosis_to_dict(d: SliceDiagnosis) -> dict[str, Any]:
    """One slice's diagnosis as JSON-ready data."""
    return {
        "slice": d.key.id, "model": d.key.model, "seed": d.key.seed, "benchmark": d.key.benchmark,
        "left": d.left_source, "right": d.right_source,
        "compared_rows": d.compared_rows, "identical_rows": d.identical_rows,
        "first_stage": d.first_stage, "counts": dict(d.counts),
        "left_score": d.left_score, "right_score": d.right_score, "delta": d.delta, "band": d.band,
        "within_band": d.within_band,
        "left_stats": asdict(d.left_stats), "right_stats": asdict(d.right_stats),
        "examples": [asdict(e) for e in d.examples], "notes": list(d.notes),
        "not_comparable": dict(d.not_comparable),
        "rows": [{"index": r.index, "stage": r.stage, "reason": r.reason} for r in d.rows],
    }


def _num(value: float | None, digits: int = 2, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def render_markdown(diagnoses: Sequence[SliceDiagnosis], *, left: str, right: str) -> str:
    """The Markdown report: a summary table, then details for every slice that diverges."""
    lines = [
        "# trace-repro diagnose", "",
        f"- left (under question): {left}", f"- right (reference): {right}",
        "- stages, in pipeline order: " + ", ".join(STAGES),
        "- delta = left - right (percentage points); band = what sampling alone explains between two single-seed runs (tolerance rule, factor sqrt(2))", "",
        "| slice | compared | identical | first stage | " + " | ".join(STAGES) + " | left | right | delta | band | in band |",
        "|" + "---|" * (9 + len(STAGES)),
    ]
    for d in diagnoses:
        counts = " | ".join(str(d.counts.get(stage, "")) for stage in STAGES)
        within = {None: "-", True: "yes", False: "**no**"}[d.within_band]
        lines.append(f"| {d.key.id} | {d.compared_rows} | {d.identical_rows} | {d.first_stage or 'none'} | {counts} | "
                     f"{_num(d.left_score)} | {_num(d.right_score)} | {_num(d.delta, sign=True)} | {_num(d.band)} | "
                     f"{within} |")
    for d in diagnoses:
        if d.first_stage is None and not d.notes:
            continue
        lines += ["", f"## {d.key.id}", "", d.headline()]
        for note in d.notes:
            lines.append(f"- note: {note}")
        lines += ["", "| statistic | left | right |", "|---|---|---|"]
        for name, label, digits in (("mean_chars", "mean response chars", 1),
                                    ("length_stop_rate", "finish_reason == length", 3),
                                    ("mean_prompt_tokens", "mean prompt tokens", 1),
                                    ("mean_completion_tokens", "mean completion tokens", 1)):
            lines.append(f"| {label} | {_num(getattr(d.left_stats, name), digits)} | "
                         f"{_num(getattr(d.right_stats, name), digits)} |")
        if d.examples:
            lines += ["", "| row | stage | reason | left | right |", "|---|---|---|---|---|"]
            for e in d.examples:
                cells = [_cell(e.left), _cell(e.right)]
                lines.append(f"| {e.index} | {e.stage} | {e.reason} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def _cell(value: str | None) -> str:
    if value is None:
        return "-"
    return "`" + value.replace("|", "\\|").replace("\n", " ").replace("`", "'") + "`"


def write_plots(diagnoses: Sequence[SliceDiagnosis], out_dir: Path, *, into: FileSet | None = None) -> list[Path]:
    """One PNG per model: left - right score delta per benchmark (a dot per seed) over its grey band.

    Returns the written paths; nothing when matplotlib is not installed (the caller says so)."""
    try:
        import matplotlib
    except ImportError:
        return []
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    written = []
    for model in sorted({d.key.model for d in diagnoses}):
        scored = [d for d in diagnoses if d.key.model == model and d.delta is not None]
        if not scored:
            continue
        keys = sorted({d.key.benchmark for d in scored})
        fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(keys) + 2), 3.2))
        for x, key in enumerate(keys):
            for d in (d for d in scored if d.key.benchmark == key):
                if d.band is not None:
                    ax.bar(x, 2 * d.band, bottom=-d.band, width=0.7, color="0.88", edgecolor="0.7", linewidth=0.5)
                colour = {True: "tab:green", False: "tab:red", None: "tab:blue"}[d.within_band]
                ax.plot(x, d.delta, "o", ms=4, color=colour)
        ax.axhline(0.0, color="0.3", linewidth=0.6)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(keys, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("left - right (pp)", fontsize=7)
        ax.set_title(f"{model}: score delta per benchmark and seed over the sampling band", fontsize=8)
        fig.tight_layout()
        path = Path(out_dir) / f"diagnose-{model}.png"
        try:
            with staged_or_atomic(path, into=into) as handle:
                fig.savefig(handle, format="png", dpi=110)
        finally:
            plt.close(fig)
        written.append(path)
    return written


def write_reports(diagnoses: Sequence[SliceDiagnosis], out_dir: Path, *, left: str, right: str,
                  plot: bool = True) -> list[Path]:
    """Write ``diagnose.json``, ``diagnose.md`` and (with matplotlib) the per-model PNGs into ``out_dir``, all or
    none of them (:func:`~trace_lib.atomic.atomic_outputs`)."""
    out_dir = Path(out_dir)
    doc = {"schema_version": "trace-repro-diagnose-v1", "left": left, "right": right, "candidate": left,
           "reference": right, "stages": list(STAGES),
           "slices": [diagnosis_to_dict(d) for d in diagnoses]}
    paths = [out_dir / "diagnose.json", out_dir / "diagnose.md"]
    with atomic_outputs() as files:
        with files.output(paths[0]) as handle:
            handle.write(json_document(doc, paths[0], indent=2, ensure_ascii=False).encode("utf-8"))
        with files.output(paths[1]) as handle:
            handle.write(render_markdown(diagnoses, left=left, right=right).encode("utf-8"))
        if plot:
            paths += write_plots(diagnoses, out_dir, into=files)
    return paths

