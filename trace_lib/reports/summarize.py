"""Campaign summary against the release (``trace-repro summarize``): Markdown, a spreadsheet and a plot.

:func:`build_campaign_summary` reads every receipt-verified ``scores.json`` of the selected slices and judges:

- each seed score against the canonical 3-seed mean (the slice rule of :mod:`trace_lib.aggregation.tolerance`);
- each (model, benchmark) mean of the reproduced seeds against the canonical mean (``sqrt(1/k + 1/3)``);
- each complete (model, seed)'s category and overall scores (means computed by
  :mod:`trace_lib.aggregation.summaries`, exactly as the release computes its own);
- the campaign-level verdict (:mod:`trace_lib.aggregation.campaign_checks`): slices outside their bands against
  what chance allows under the budget, and per complete (model, seed) a count and a direction check.

The budget (``alpha``) is spread over the family of the summarized campaign (its canonical models x seeds x
benchmarks, with means, categories, overalls and campaign checks): :meth:`ToleranceRule.with_budget`.

Writers: :func:`write_markdown`, :func:`write_workbook` (pandas + openpyxl) and :func:`write_plot` (matplotlib:
reproduced minus canonical per benchmark, with the tolerance band); the last two need the ``report`` extra and
import it only when called.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from trace_lib.aggregation.summaries import category_scores, overall_scores
from trace_lib.aggregation.budget import SCREEN_ALPHA
from trace_lib.aggregation.campaign_checks import CampaignVerdict, campaign_verdict
from trace_lib.aggregation.tolerance import ToleranceRule, Verdict
from trace_lib.atomic import atomic_output, write_text_atomic
from trace_lib.environment.engine import campaign_engine_line, engine_drift_text, read_stored_engine
from trace_lib.errors import UsageError
from trace_lib.release.suite import Suite
from trace_lib.reports.collect import (CampaignReader, SliceState, current_protocol_versions, expected_slices,
                                      response_file)


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
    canonical_stddev: float | None
    verdict: Verdict | None


@dataclass(frozen=True)
class AggregateScore:
    """A category or overall score of one complete (model, seed)."""

    model: str
    seed: int
    level: str  # "overall" or the category name
    score: float
    verdict: Verdict | None


@dataclass(frozen=True)
class CampaignSummary:
    """Everything the three writers render."""

    campaign_root: str
    suite_id: str
    suite_sha256: str
    z: float
    models: tuple[str, ...]
    labels: Mapping[str, str]
    seeds: tuple[int, ...]
    benchmarks: tuple[str, ...]
    seed_scores: tuple[SeedScore, ...]
    benchmark_means: tuple[BenchmarkMean, ...]
    aggregates: tuple[AggregateScore, ...]
    missing: tuple[SliceState, ...]
    campaign: CampaignVerdict | None = None
    release: str = ""  # how the release is named (``bundled pinned snapshot (...)`` or its directory)

    @property
    def ok(self) -> bool:
        """Every verdict within and every campaign check within (coverage is separate: ``missing``)."""
        return not self.failures and (self.campaign is None or self.campaign.ok)
    engine_line: str = ""  # the responses' engines against the paper's (trace_lib.environment.engine)

    @property
    def verdicts(self) -> list[Verdict]:
        items: list[Any] = [*self.seed_scores, *self.benchmark_means, *self.aggregates]
        return [i.verdict for i in items if i.verdict is not None]

    @property
    def failures(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]

    @property
    def expected_slices(self) -> int:
        return len(self.seed_scores) + len(self.missing)


def build_campaign_summary(
    root: Path,
    suite: Suite,
    rule: ToleranceRule,
    *,
    models: Sequence[str],
    seeds: Sequence[int],
    benchmarks: Sequence[str] | None = None,
    labels: Mapping[str, str] | None = None,
    reader: CampaignReader | None = None,
    release: str = "",
) -> CampaignSummary:
    """Collect, aggregate and judge the selected slices of ``root`` (unverified slices are listed as missing)."""
    keys = tuple(benchmarks) if benchmarks else suite.keys
    reader = reader or CampaignReader(Path(root), {b.key: b.rows for b in suite.benchmarks})
    versions = current_protocol_versions(keys)
    seed_scores: list[SeedScore] = []
    missing: list[SliceState] = []
    engines: dict[str, Any] = {}
    for key in expected_slices(models, seeds, keys):
        state = reader.score(key, protocol_versions=versions)
        if not state.complete or state.score is None:
            missing.append(state)
            continue
        bench = suite.benchmark(key.benchmark)
        verdict = None
        engine = read_stored_engine(response_file(Path(root), key))
        engines[key.id] = engine
        if (key.model, key.benchmark) in rule.benchmarks:
            verdict = rule.check_slice(key.model, key.benchmark, state.score, seed=key.seed, rows=state.rows)
            verdict = dataclasses.replace(verdict, engine_note=engine_drift_text(engine))
        seed_scores.append(SeedScore(bench.category, bench.key, bench.display, key.model, key.seed, state.rows,
                                     state.score, verdict, state.path))
    complete = [(m, s) for m in models for s in seeds
                if tuple(keys) == tuple(suite.keys)
                and sum(1 for x in seed_scores if x.model == m and x.seed == s and x.verdict) == len(suite.keys)]
    campaign = campaign_verdict([(s.model, s.seed, s.verdict) for s in seed_scores if s.verdict is not None],
                                rule.budget, complete_groups=complete)
    return CampaignSummary(
        campaign_root=str(root), suite_id=suite.suite_id, suite_sha256=suite.sha256,
        z=rule.z if rule.z is not None else math.nan, models=tuple(models),
        labels=dict(labels or {}), seeds=tuple(seeds), benchmarks=keys, seed_scores=tuple(seed_scores),
        benchmark_means=tuple(_benchmark_means(seed_scores, suite, rule, models, keys)),
        aggregates=tuple(aggregate_scores(seed_scores, suite, rule)), missing=tuple(missing), campaign=campaign,
        release=release,
        engine_line=campaign_engine_line(engines),
    )


def summary_rule(rule: ToleranceRule, suite: Suite, *, models: Sequence[str], seeds: Sequence[int],
                 benchmarks: Sequence[str], alpha: float, z: float | None) -> ToleranceRule:
    """``rule`` with the budget spread over the summarized campaign's family (``z``: fixed, alpha implied)."""
    family = rule.family(models=sum(1 for m in models if m in rule.model_ids), seeds=len(seeds),
                         benchmarks=len(benchmarks), full_suite=tuple(benchmarks) == tuple(suite.keys))
    return rule.with_budget(alpha=alpha, z=z, family=family)


def _benchmark_means(
    seed_scores: Sequence[SeedScore], suite: Suite, rule: ToleranceRule, models: Sequence[str], keys: Sequence[str]
) -> list[BenchmarkMean]:
    out = []
    for model in models:
        for key in keys:
            values = [s.score for s in seed_scores if s.model == model and s.benchmark == key]
            if not values:
                continue
            bench = suite.benchmark(key)
            mean = statistics.fmean(values)
            canonical = rule.benchmarks.get((model, key))
            verdict = None
            if canonical is not None:
                verdict = rule.check_slice(model, key, mean, reproduced_seeds=len(values),
                                           subject=f"{model}-{key} (mean of {len(values)} seed(s))")
            out.append(BenchmarkMean(bench.category, key, bench.display, model, len(values), mean,
                                     statistics.stdev(values) if len(values) > 1 else 0.0,
                                     canonical.stddev if canonical else None, verdict))
    return out


def aggregate_scores(seed_scores: Sequence[SeedScore], suite: Suite, rule: ToleranceRule) -> list[AggregateScore]:
    """Category and overall scores (and verdicts) of every (model, seed) that has all suite benchmarks."""
    by_model_seed: dict[tuple[str, int], dict[tuple[str, int, str], float]] = {}
    for s in seed_scores:
        by_model_seed.setdefault((s.model, s.seed), {})[(s.model, s.seed, s.benchmark)] = s.score
    out = []
    for (model, seed), scores in by_model_seed.items():
        if len(scores) != len(suite.keys):
            continue  # categories and overall need every suite benchmark of this (model, seed)
        canonical = model in rule.overall_summaries
        for (_, _, category), value in category_scores(scores, suite).items():
            verdict = rule.check_category(model, category, value, seed=seed) if canonical else None
            out.append(AggregateScore(model, seed, category, value, verdict))
        value = overall_scores(scores, suite)[(model, seed)]
        out.append(AggregateScore(model, seed, "overall", value,
                                  rule.check_overall(model, value, seed=seed) if canonical else None))
    return out


# -- writers -----------------------------------------------------------------------------------------------------

def _fmt(value: float | None, digits: int = 2, sign: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _mark(verdict: Verdict | None) -> str:
    if verdict is None:
        return "n/a"
    return "ok" if verdict.ok else "**OUT**"


def render_markdown(summary: CampaignSummary) -> str:
    """The Markdown report: coverage, overall, benchmark means against canonical, and every failure."""
    label = lambda m: summary.labels.get(m, m)  # noqa: E731
    seeds = " ".join(map(str, summary.seeds))
    lines = [
        "# TRACE eval reproduction summary",
        "",
        f"- campaign: `{summary.campaign_root}`",
        f"- suite: `{summary.suite_id}` (sha256 `{summary.suite_sha256}`); seeds: {seeds}",
        *([f"- release: {summary.release}"] if summary.release else []),
        f"- coverage: {len(summary.seed_scores)}/{summary.expected_slices} slices scored and receipt-verified",
        f"- {summary.engine_line}",
        _tolerance_line(summary),
        "",
    ]
    if summary.campaign is not None:
        c = summary.campaign
        lines += ["## Campaign verdict", "", f"**{'within tolerance' if c.ok else 'FAILED'}**", ""] + c.lines() + [""]
        if c.groups:
            lines += ["| Model | Seed | Outside 95% band (chance) | Direction S (p) | Deltas > 0 | Mean delta | Verdict |",
                      "|---|---:|---:|---:|---:|---:|---|"]
            for g in c.groups:
                lines.append(f"| {label(g.model)} | {g.seed} | {g.outside_screen}/{g.slices} ({g.expected_screen:.1f}) "
                             f"| {g.stouffer:+.2f} ({g.direction_p:.2g}) | {g.positive}/{g.slices} | "
                             f"{_fmt(g.mean_delta, sign=True)} | {'ok' if g.ok else '**' + g.pattern.upper() + '**'} |")
            lines.append("")
    overall = [a for a in summary.aggregates if a.level == "overall"]
    if overall:
        lines += ["## Overall (complete model-seeds)", "", "| Model | Seed | Overall | Canonical mean | Delta | Band | Verdict |",
                  "|---|---:|---:|---:|---:|---:|---|"]
        for a in overall:
            v = a.verdict
            lines.append(f"| {label(a.model)} | {a.seed} | {_fmt(a.score)} | {_fmt(v.canonical if v else None)} | "
                         f"{_fmt(v.delta if v else None, sign=True)} | {_fmt(v.band if v else None)} | {_mark(v)} |")
        lines.append("")
    lines += ["## Benchmark means", "",
              "Cells: reproduced mean +/- std over k seeds (delta vs canonical mean; allowed band), verdict.", ""]
    header = "| Category | Benchmark | " + " | ".join(label(m) for m in summary.models) + " |"
    lines += [header, "|---|---|" + "---|" * len(summary.models)]
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
            extra = f" ({_fmt(v.delta, sign=True)}; +/-{_fmt(v.band)}) {_mark(v)}" if v else " (no canonical)"
            cells.append(f"{_fmt(b.mean)} +/- {_fmt(b.stddev)} k={b.seeds}{extra}")
        lines.append(f"| {row[0].category} | {row[0].display} | " + " | ".join(cells) + " |")
    lines.append("")
    failed_groups = summary.campaign.failed_groups if summary.campaign else []
    if summary.failures or failed_groups:
        lines += ["## Outside tolerance", ""] + [f"- {v.explain()}" for v in summary.failures]
        lines += [f"- {g.explain()}" for g in failed_groups] + [""]
    if summary.missing:
        lines += ["## Not scored or not verified", ""]
        lines += [f"- `{m.key.id}`: {m.detail}" for m in summary.missing[:50]]
        if len(summary.missing) > 50:
            lines.append(f"- ... and {len(summary.missing) - 50} more (see `trace-repro verify --phase score`)")
        lines.append("")
    return "\n".join(lines)


def _tolerance_line(summary: CampaignSummary) -> str:
    within = f"{len(summary.verdicts) - len(summary.failures)}/{len(summary.verdicts)} verdicts within"
    if summary.campaign is None:
        return f"- tolerance: z = {summary.z:g}; {within}"
    return (f"- tolerance: |reproduced - canonical mean| <= sqrt(1/k + 1/3) x max(z x binomial SE, t x pooled seed "
            f"stddev); {summary.campaign.criterion.describe()}; {within}")


def write_markdown(summary: CampaignSummary, path: Path) -> Path:
    write_text_atomic(path, render_markdown(summary) + "\n")
    return Path(path)


def _verdict_columns(v: Verdict | None) -> dict[str, Any]:
    if v is None:
        return {"canonical_mean": None, "delta": None, "band": None, "z": None, "sigma": None, "within_tolerance": None}
    return {"canonical_mean": v.canonical, "delta": v.delta, "band": v.band, "z": v.z, "sigma": v.sigma.value,
            "within_tolerance": v.ok}


def summary_frames(summary: CampaignSummary) -> dict[str, Any]:
    """The spreadsheet's sheets as pandas DataFrames (``seed_values``, ``benchmark_means``, ``aggregates``,
    ``metadata``)."""
    import pandas as pd

    seed_values = pd.DataFrame([
        {"category": s.category, "benchmark_key": s.benchmark, "benchmark": s.display, "model_slug": s.model,
         "model": summary.labels.get(s.model, s.model), "seed": s.seed, "rows": s.rows, "score": s.score,
         **_verdict_columns(s.verdict), "score_path": s.scores_path}
        for s in summary.seed_scores
    ])
    benchmark_means = pd.DataFrame([
        {"category": b.category, "benchmark_key": b.benchmark, "benchmark": b.display, "model_slug": b.model,
         "seeds": b.seeds, "mean": b.mean, "std": b.stddev, "canonical_std": b.canonical_stddev,
         **_verdict_columns(b.verdict)}
        for b in summary.benchmark_means
    ])
    aggregates = pd.DataFrame([
        {"model_slug": a.model, "seed": a.seed, "level": a.level, "score": a.score, **_verdict_columns(a.verdict)}
        for a in summary.aggregates
    ])
    metadata = pd.DataFrame(
        [("suite", summary.suite_id), ("suite_sha256", summary.suite_sha256), ("campaign_root", summary.campaign_root),
         ("seeds", " ".join(map(str, summary.seeds))), ("tolerance_z", summary.z),
         *_budget_rows(summary),
         ("slices_scored", len(summary.seed_scores)), ("slices_expected", summary.expected_slices),
         *((f"model/{m}", summary.labels.get(m, m)) for m in summary.models)],
        columns=["key", "value"],
    )
    return {"seed_values": seed_values, "benchmark_means": benchmark_means, "aggregates": aggregates,
            "metadata": metadata}


def _budget_rows(summary: CampaignSummary) -> list[tuple[str, Any]]:
    if summary.campaign is None:
        return []
    c, crit = summary.campaign, summary.campaign.criterion
    rows: list[tuple[str, Any]] = [
        ("tolerance_method", crit.method), ("tolerance_alpha", crit.alpha), ("tolerance_family_size", crit.family_size),
        ("tolerance_per_test_alpha", crit.per_test_alpha), ("campaign_verdict", "ok" if c.ok else "failed"),
        ("slices_outside_band", c.outside), ("slices_outside_band_expected", c.expected_outside),
        ("slices_outside_95", c.outside_screen), ("slices_outside_95_expected", c.expected_screen),
    ]
    rows += [(f"campaign/{g.model}/seed{g.seed}", g.explain()) for g in c.groups]
    return rows


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(f"{module} is not installed", field="summarize",
                         hint="pip install 'trace-repro[report]' (openpyxl, matplotlib)") from None


def write_workbook(summary: CampaignSummary, path: Path) -> Path:
    """The ``.xlsx`` spreadsheet (one sheet per frame of :func:`summary_frames`)."""
    _require("openpyxl")
    import pandas as pd

    frames = summary_frames(summary)

    with atomic_output(path) as handle, pd.ExcelWriter(handle, engine="openpyxl") as writer:
        for name, frame in frames.items():
            frame.to_excel(writer, sheet_name=name, index=False)
    return Path(path)


def _chance_text(summary: CampaignSummary, model: str) -> str:
    """Observed vs chance-expected slices outside each band for ``model`` (the plot's title)."""
    verdicts = [s.verdict for s in summary.seed_scores if s.model == model and s.verdict is not None]
    if not verdicts or summary.campaign is None:
        return f"band z={summary.z:g}"
    a = summary.campaign.criterion.per_test_alpha
    screen = sum(1 for v in verdicts if abs(v.delta) > v.band_at(SCREEN_ALPHA))
    out = sum(1 for v in verdicts if not v.ok)
    failed = [f"seed {g.seed} {g.pattern}" for g in summary.campaign.failed_groups if g.model == model]
    return (f"outside 95% band {screen} (chance {len(verdicts) * SCREEN_ALPHA:.1f}), outside family-wise band "
            f"{out} (chance {len(verdicts) * a:.3f}); campaign checks: {', '.join(failed) or 'within'}")


def write_plot(summary: CampaignSummary, path: Path) -> Path:
    """A PNG with one panel per model: reproduced minus canonical mean per benchmark (seed dots, mean diamond)
    over the light family-wise band and the darker nominal 95% band, with observed vs chance counts per band."""
    matplotlib = _require("matplotlib")
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    models = [m for m in summary.models if any(s.model == m and s.verdict for s in summary.seed_scores)] or ["-"]
    keys = list(summary.benchmarks)
    fig, axes = plt.subplots(len(models), 1, figsize=(max(8.0, 0.45 * len(keys) + 2), 2.8 * len(models)),
                             squeeze=False)
    for ax, model in zip(axes[:, 0], models):
        scores = [s for s in summary.seed_scores if s.model == model and s.verdict is not None]
        for x, key in enumerate(keys):
            here = [s for s in scores if s.benchmark == key]
            if not here:
                continue
            band = here[0].verdict.band  # type: ignore[union-attr]
            screen = here[0].verdict.band_at(SCREEN_ALPHA)  # type: ignore[union-attr]
            ax.bar(x, 2 * band, bottom=-band, width=0.7, color="0.92", edgecolor="0.7", linewidth=0.5,
                   label="family-wise band" if x == 0 else None)
            ax.bar(x, 2 * screen, bottom=-screen, width=0.7, color="0.80", linewidth=0,
                   label="nominal 95% band" if x == 0 else None)
            for s in here:
                ax.plot(x, s.verdict.delta, "o", ms=4, color="tab:green" if s.verdict.ok else "tab:red")  # type: ignore[union-attr]
            mean = next((b for b in summary.benchmark_means if b.model == model and b.benchmark == key), None)
            if mean is not None and mean.verdict is not None and mean.seeds > 1:
                ax.plot(x, mean.verdict.delta, "D", ms=4, color="black")
        ax.axhline(0.0, color="0.3", linewidth=0.6)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(keys, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("reproduced - canonical (pp)", fontsize=7)
        ax.set_title(f"{summary.labels.get(model, model)}: seed scores vs canonical 3-seed mean; {_chance_text(summary, model)}",
                     fontsize=8)
        ax.legend(loc="upper right", fontsize=6)
    fig.tight_layout()

    try:
        with atomic_output(path) as handle:
            fig.savefig(handle, format="png", dpi=110)
    finally:
        plt.close(fig)
    return Path(path)


def write_reports(summary: CampaignSummary, out_dir: Path, *, stem: str = "summary", xlsx: bool = True,
                  plot: bool = True) -> list[Path]:
    """Write ``<stem>.md`` (always), ``<stem>.xlsx`` and ``<stem>.png`` into ``out_dir``.

    Raises:
        UsageError: ``out_dir`` or one of its parents exists and is not a directory.
    """
    for folder in (Path(out_dir), *Path(out_dir).parents):
        if folder.exists() and not folder.is_dir():
            raise UsageError("not a directory", file=str(folder), field="--out",
                             hint="choose a directory for the summary files")
    out = [write_markdown(summary, Path(out_dir) / f"{stem}.md")]
    if xlsx:
        out.append(write_workbook(summary, Path(out_dir) / f"{stem}.xlsx"))
    if plot:
        out.append(write_plot(summary, Path(out_dir) / f"{stem}.png"))
    return out
