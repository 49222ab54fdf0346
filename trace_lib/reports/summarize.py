"""Campaign summary against the release (``trace-repro summarize``): Markdown, a spreadsheet and a plot.

:func:`build_campaign_summary` reads every receipt-verified slice of the selection, judges it with
:func:`trace_lib.campaign.verdicts.judge_campaign` (the verdicts ``score`` and ``tests_reproduction`` give: each
seed's slice, each model-benchmark mean, categories, overall and the paper's claims; reproduced, differs or
inconclusive, docs/tolerance.md) under the family of the plan the flags give, and the writers render it:
:func:`write_markdown`, :func:`write_workbook` (pandas + openpyxl) and :func:`write_plot` (matplotlib: each
difference with its 90% interval against the margin, coloured by outcome); the last two need the ``report`` extra
and import it only when called. Inconclusive is never shown as a pass; with no test judged the summary says that
nothing was verified.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from trace_lib.aggregation.verdict import OUTCOMES, Verdict, VerdictSet, cell_linear, slice_id
from trace_lib.atomic import FileSet, atomic_outputs, staged_or_atomic
from trace_lib.environment.engine import campaign_engine_line, engine_drift_text, read_stored_engine
from trace_lib.errors import UsageError
from trace_lib.release.suite import Suite
from trace_lib.reports.collect import SliceState, expected_slices, response_file, scores_file

#: What each outcome reads as in tables (inconclusive is never "ok").
MARKS = {"reproduced": "reproduced", "differs": "**DIFFERS**", "inconclusive": "*inconclusive*"}


@dataclass(frozen=True)
class SeedScore:
    """One reproduced slice score and its verdict (None when the model has no canonical scores)."""

    category: str
    benchmark: str
    display: str
    model: str
    seed: int
    rows: int
    score: float
    verdict: Verdict | None
    scores_path: str
    engine_note: str = ""


@dataclass(frozen=True)
class BenchmarkMean:
    """The mean of a model's reproduced seeds on one benchmark, against the canonical mean."""

    category: str
    benchmark: str
    display: str
    model: str
    seeds: int
    mean: float
    stddev: float  # sample stddev over the reproduced seeds (0.0 for one seed)
    verdict: Verdict | None


@dataclass(frozen=True)
class CampaignSummary:
    """Everything the three writers render."""

    campaign_root: str
    suite_id: str
    suite_sha256: str
    models: tuple[str, ...]
    labels: Mapping[str, str]
    seeds: tuple[int, ...]
    benchmarks: tuple[str, ...]
    seed_scores: tuple[SeedScore, ...]
    benchmark_means: tuple[BenchmarkMean, ...]
    missing: tuple[SliceState, ...]
    result: VerdictSet
    release: str = ""  # how the release is named (``bundled pinned snapshot (...)`` or its directory)
    engine_line: str = ""  # the responses' engines against the paper's (trace_lib.environment.engine)

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        return self.result.verdicts

    def of_kind(self, *kinds: str) -> list[Verdict]:
        return [v for v in self.verdicts if v.kind in kinds]

    @property
    def status(self) -> str:
        """reproduced, differs, inconclusive or "nothing verified" (:attr:`VerdictSet.status`)."""
        return self.result.status

    @property
    def ok(self) -> bool:
        """Every expected slice scored and every verdict reproduced."""
        return not self.missing and self.status == "reproduced"

    @property
    def expected_slices(self) -> int:
        return len(self.seed_scores) + len(self.missing)


def build_campaign_summary(
    root: Path,
    release: Any,
    suite: Suite,
    judged: Any,
    *,
    models: Sequence[str],
    seeds: Sequence[int],
    benchmarks: Sequence[str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> CampaignSummary:
    """Collect the selected slices of ``root`` with their verdicts ``judged`` (the
    :class:`~trace_lib.campaign.verdicts.CampaignVerdicts` of :func:`~trace_lib.campaign.verdicts.judge_campaign`
    over the same selection; unverified slices are listed as missing). Reports render verdicts, they do not make
    them."""
    keys = tuple(benchmarks) if benchmarks else suite.keys
    wanted = expected_slices(models, seeds, keys)
    by_id = judged.result.by_id()
    missing_ids = {m.key.id for m in judged.missing}
    cells = judged.credits.cells()
    engines: dict[str, Any] = {}
    seed_scores: list[SeedScore] = []
    scores: dict[tuple[str, str], dict[int, float]] = {}
    for (model, bench), cell in cells.items():
        scores[(model, bench)] = dict(zip(cell.seeds, (float(x) for x in cell_linear(cell).scores())))
    for key in wanted:
        if key.id in missing_ids:
            continue
        bench = suite.benchmark(key.benchmark)
        engine = read_stored_engine(response_file(Path(root), key))
        engines[key.id] = engine
        score = scores.get((key.model, key.benchmark), {}).get(key.seed, math.nan)
        verdict = by_id.get(slice_id(key.model, key.seed, key.benchmark))
        seed_scores.append(SeedScore(bench.category, bench.key, bench.display, key.model, key.seed,
                                     len(cells[(key.model, key.benchmark)].index), score,
                                     verdict.noted(engine_drift_text(engine)) if verdict else None,
                                     str(scores_file(Path(root), key)),
                                     engine_drift_text(engine)))
    means = []
    for model in models:
        for key in keys:
            values = list(scores.get((model, key), {}).values())
            if not values:
                continue
            bench = suite.benchmark(key)
            means.append(BenchmarkMean(bench.category, key, bench.display, model, len(values),
                                       statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0,
                                       by_id.get(f"{model}-{key}")))
    return CampaignSummary(
        campaign_root=str(root), suite_id=suite.suite_id, suite_sha256=suite.sha256, models=tuple(models),
        labels=dict(labels or {}), seeds=tuple(seeds), benchmarks=keys, seed_scores=tuple(seed_scores),
        benchmark_means=tuple(means), missing=judged.missing, result=judged.result,
        release=getattr(release, "label", ""), engine_line=campaign_engine_line(engines),
    )


# -- writers -----------------------------------------------------------------------------------------------------

def _fmt(value: float | None, digits: int = 2, sign: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _mark(verdict: Verdict | None) -> str:
    return "n/a" if verdict is None else MARKS[verdict.outcome]


def _counts_table(summary: CampaignSummary) -> list[str]:
    lines = ["| Tests | " + " | ".join(OUTCOMES) + " |", "|---|" + "---:|" * len(OUTCOMES)]
    for kind in ("slice", "mean", "category", "overall", "claim"):
        found = summary.of_kind(kind)
        if found:
            lines.append(f"| {kind} | " + " | ".join(str(sum(v.outcome == o for v in found)) for o in OUTCOMES)
                         + " |")
    return lines


def render_markdown(summary: CampaignSummary) -> str:
    """The Markdown report: the verdict, coverage, overall and categories, benchmark means, claims, every test
    that differs or is inconclusive, and what is missing."""
    label = lambda m: summary.labels.get(m, m)  # noqa: E731
    counts = summary.result.counts()
    status = summary.status
    lines = [
        "# TRACE eval reproduction summary",
        "",
        f"- campaign: `{summary.campaign_root}`",
        f"- suite: `{summary.suite_id}` (sha256 `{summary.suite_sha256}`); seeds: {' '.join(map(str, summary.seeds))}",
        *([f"- release: {summary.release}"] if summary.release else []),
        f"- coverage: {len(summary.seed_scores)}/{summary.expected_slices} slices scored and receipt-verified",
        f"- {summary.engine_line}",
        f"- rule: {summary.result.rule.describe()}",
        "",
        "## Verdict",
        "",
    ]
    if status == "nothing verified":
        lines += ["**nothing verified**: no test could be judged (no slice of a release model is scored and "
                  "verified)", ""]
    else:
        lines += [f"**{status}**: {counts['reproduced']} reproduced, {counts['differs']} differs, "
                  f"{counts['inconclusive']} inconclusive (inconclusive: the data cannot tell; not a pass)", ""]
        lines += _counts_table(summary) + [""]
    unstable = sorted(((k, e) for k, e in summary.result.cells.items() if e.unstable), key=lambda item: item[1].p_value)
    if unstable:
        lines += ["Seed-unstable cells (seed spread beyond the row-level variance; their bands carry the excess):", ""]
        lines += [f"- {label(m)} {b}: spread {e.spread:.2f} vs expected {e.expected:.2f} (p = {e.p_value:.2g})"
                  for (m, b), e in unstable] + [""]
    aggregates = summary.of_kind("overall", "category")
    if aggregates:
        lines += ["## Overall and categories (mean of the reproduced seeds)", "",
                  "| Model | Level | Reproduced | Canonical | Difference | 90% interval | Band | Verdict |",
                  "|---|---|---:|---:|---:|---|---:|---|"]
        for v in aggregates:
            lines.append(f"| {label(v.model_id)} | {v.benchmark_id} | {_fmt(v.estimate)} | {_fmt(v.canonical)} | "
                         f"{_fmt(v.difference, sign=True)} | [{_fmt(v.interval[0], sign=True)}, "
                         f"{_fmt(v.interval[1], sign=True)}] | +/-{_fmt(v.band)} | {_mark(v)} |")
        lines.append("")
    lines += ["## Benchmark means", "",
              "Cells: reproduced mean +/- std over k seeds (difference vs canonical mean; 90% interval), verdict.", ""]
    lines += ["| Category | Benchmark | " + " | ".join(label(m) for m in summary.models) + " |",
              "|---|---|" + "---|" * len(summary.models)]
    means = {(b.model, b.benchmark): b for b in summary.benchmark_means}
    for key in summary.benchmarks:
        row = [m for m in summary.benchmark_means if m.benchmark == key]
        if not row:
            continue
        cells = []
        for model in summary.models:
            b = means.get((model, key))
            if b is None:
                cells.append("-")
                continue
            v = b.verdict
            extra = (f" ({_fmt(v.difference, sign=True)}; [{_fmt(v.interval[0], sign=True)}, "
                     f"{_fmt(v.interval[1], sign=True)}]) {_mark(v)}") if v else " (no mean test)"
            cells.append(f"{_fmt(b.mean)} +/- {_fmt(b.stddev)} k={b.seeds}{extra}")
        lines.append(f"| {row[0].category} | {row[0].display} | " + " | ".join(cells) + " |")
    lines.append("")
    claims = summary.of_kind("claim")
    if claims:
        lines += ["## The paper's claims (model minus base, paired by row and seed)", "",
                  "| Claim | Reproduced delta | Canonical delta | Difference | 90% interval | Sign | Verdict |",
                  "|---|---:|---:|---:|---|---|---|"]
        for v in claims:
            lines.append(f"| {v.test_id} | {_fmt(v.estimate, sign=True)} | {_fmt(v.canonical, sign=True)} | "
                         f"{_fmt(v.difference, sign=True)} | [{_fmt(v.interval[0], sign=True)}, "
                         f"{_fmt(v.interval[1], sign=True)}] | {v.sign['outcome'] if v.sign else '-'} | {_mark(v)} |")
        lines.append("")
    for outcome, title in (("differs", "Differs"), ("inconclusive", "Inconclusive")):
        found = [v for v in summary.verdicts if v.outcome == outcome]
        if found:
            lines += [f"## {title}", ""] + [f"- {v.explain()}" for v in found[:200]]
            if len(found) > 200:
                lines.append(f"- ... and {len(found) - 200} more (see the workbook)")
            lines.append("")
    if summary.missing:
        lines += ["## Not scored or not verified", ""]
        lines += [f"- `{m.key.id}`: {m.detail}" for m in summary.missing[:50]]
        if len(summary.missing) > 50:
            lines.append(f"- ... and {len(summary.missing) - 50} more (see `trace-repro verify --phase score`)")
        lines.append("")
    return "\n".join(lines)


def write_markdown(summary: CampaignSummary, path: Path, *, into: FileSet | None = None) -> Path:
    with staged_or_atomic(path, into=into) as handle:
        handle.write((render_markdown(summary) + "\n").encode("utf-8"))
    return Path(path)


def _verdict_columns(v: Verdict | None) -> dict[str, Any]:
    names = ("outcome", "canonical", "difference", "interval_low", "interval_high", "se", "band", "margin", "mds",
             "seed_unstable")
    if v is None:
        return dict.fromkeys(names)
    return {"outcome": v.outcome, "canonical": v.canonical, "difference": v.difference,
            "interval_low": v.interval[0], "interval_high": v.interval[1], "se": v.se, "band": v.band,
            "margin": v.margin, "mds": v.mds, "seed_unstable": v.seed_unstable is not None}


def summary_frames(summary: CampaignSummary) -> dict[str, Any]:
    """The spreadsheet's sheets as pandas DataFrames (``seed_values``, ``benchmark_means``, ``aggregates``,
    ``claims``, ``metadata``)."""
    import pandas as pd

    seed_values = pd.DataFrame([
        {"category": s.category, "benchmark_key": s.benchmark, "benchmark": s.display, "model_slug": s.model,
         "model": summary.labels.get(s.model, s.model), "seed": s.seed, "rows": s.rows, "score": s.score,
         **_verdict_columns(s.verdict), "score_path": s.scores_path}
        for s in summary.seed_scores
    ])
    benchmark_means = pd.DataFrame([
        {"category": b.category, "benchmark_key": b.benchmark, "benchmark": b.display, "model_slug": b.model,
         "seeds": b.seeds, "mean": b.mean, "std": b.stddev, **_verdict_columns(b.verdict)}
        for b in summary.benchmark_means
    ])
    aggregates = pd.DataFrame([
        {"model_slug": v.model_id, "level": v.benchmark_id, "seeds": v.reproduced_seeds, "score": v.estimate,
         **_verdict_columns(v)} for v in summary.of_kind("category", "overall")
    ])
    claims = pd.DataFrame([
        {"test_id": v.test_id, "model_slug": v.model_id, "level": v.benchmark_id, "delta": v.estimate,
         **_verdict_columns(v), "sign": v.sign["outcome"] if v.sign else None} for v in summary.of_kind("claim")
    ])
    rule = summary.result.rule
    metadata = pd.DataFrame(
        [("suite", summary.suite_id), ("suite_sha256", summary.suite_sha256), ("campaign_root", summary.campaign_root),
         ("seeds", " ".join(map(str, summary.seeds))), ("status", summary.status),
         *((f"tests_{o}", n) for o, n in summary.result.counts().items()),
         ("alpha", rule.alpha), ("family_size", rule.family_size), ("per_test_alpha", rule.per_test_alpha),
         ("margin", rule.margin), ("slices_scored", len(summary.seed_scores)),
         ("slices_expected", summary.expected_slices),
         *((f"model/{m}", summary.labels.get(m, m)) for m in summary.models)],
        columns=["key", "value"],
    )
    return {"seed_values": seed_values, "benchmark_means": benchmark_means, "aggregates": aggregates,
            "claims": claims, "metadata": metadata}


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(f"{module} is not installed", field="summarize",
                         hint="pip install 'trace-repro[report]' (openpyxl, matplotlib)") from None


def write_workbook(summary: CampaignSummary, path: Path, *, into: FileSet | None = None) -> Path:
    """The ``.xlsx`` spreadsheet (one sheet per frame of :func:`summary_frames`)."""
    _require("openpyxl")
    import pandas as pd

    frames = summary_frames(summary)
    with staged_or_atomic(path, into=into) as handle, pd.ExcelWriter(handle, engine="openpyxl") as writer:
        for name, frame in frames.items():
            frame.to_excel(writer, sheet_name=name, index=False)
    return Path(path)


#: Plot colours per outcome.
COLOURS = {"reproduced": "tab:green", "differs": "tab:red", "inconclusive": "tab:orange"}


def write_plot(summary: CampaignSummary, path: Path, *, into: FileSet | None = None) -> Path:
    """A PNG with one panel per model: each benchmark's mean difference (diamond) with its 90% interval and the
    seeds' differences (dots), coloured by outcome, against the +-margin lines; the panel title counts outcomes."""
    matplotlib = _require("matplotlib")
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    models = [m for m in summary.models if any(s.model == m and s.verdict for s in summary.seed_scores)] or ["-"]
    keys = list(summary.benchmarks)
    margin = summary.result.rule.margin
    fig, axes = plt.subplots(len(models), 1, figsize=(max(8.0, 0.45 * len(keys) + 2), 2.8 * len(models)),
                             squeeze=False)
    for ax, model in zip(axes[:, 0], models):
        scores = [s for s in summary.seed_scores if s.model == model and s.verdict is not None]
        for x, key in enumerate(keys):
            for s in (s for s in scores if s.benchmark == key):
                ax.plot(x - 0.15, s.verdict.difference, "o", ms=3, color=COLOURS[s.verdict.outcome])  # type: ignore[union-attr]
            mean = next((b for b in summary.benchmark_means if b.model == model and b.benchmark == key), None)
            if mean is not None and mean.verdict is not None:
                v = mean.verdict
                lo, hi = v.interval
                ax.errorbar(x + 0.15, v.difference, yerr=[[v.difference - lo], [hi - v.difference]], fmt="D", ms=4,
                            color=COLOURS[v.outcome], capsize=2, linewidth=1)
        ax.axhspan(-margin, margin, color="0.92", zorder=0, label=f"+-margin {margin:g}")
        ax.axhline(0.0, color="0.3", linewidth=0.6)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(keys, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("reproduced - canonical (pp)", fontsize=7)
        own = [v for v in summary.verdicts if v.model_id == model]
        tally = ", ".join(f"{sum(v.outcome == o for v in own)} {o}" for o in OUTCOMES)
        ax.set_title(f"{summary.labels.get(model, model)}: seed (dots) and mean (diamond, 90% interval) differences; "
                     f"{tally}", fontsize=8)
        handles = [plt.Line2D([], [], marker="o", linestyle="", color=c, label=o) for o, c in COLOURS.items()]
        ax.legend(handles=handles, loc="upper right", fontsize=6)
    fig.tight_layout()
    try:
        with staged_or_atomic(path, into=into) as handle:
            fig.savefig(handle, format="png", dpi=110)
    finally:
        plt.close(fig)
    return Path(path)


def write_reports(summary: CampaignSummary, out_dir: Path, *, stem: str = "summary", xlsx: bool = True,
                  plot: bool = True) -> list[Path]:
    """Write ``<stem>.md`` (always), ``<stem>.xlsx`` and ``<stem>.png`` into ``out_dir``, all or none of them
    (:func:`~trace_lib.atomic.atomic_outputs`: no new report beside an old one).

    Raises:
        UsageError: ``out_dir`` or one of its parents exists and is not a directory.
    """
    for folder in (Path(out_dir), *Path(out_dir).parents):
        if folder.exists() and not folder.is_dir():
            raise UsageError("not a directory", file=str(folder), field="--out",
                             hint="choose a directory for the summary files")
    with atomic_outputs() as files:
        out = [write_markdown(summary, Path(out_dir) / f"{stem}.md", into=files)]
        if xlsx:
            out.append(write_workbook(summary, Path(out_dir) / f"{stem}.xlsx", into=files))
        if plot:
            out.append(write_plot(summary, Path(out_dir) / f"{stem}.png", into=files))
    return out
