"""The number an official-route slice reports: VLMEvalKit metric flattening, ``report_primary_metric`` and the
campaign's ``auto`` percent scaling.

Mirrors ``VLMEvalKit@a8b12bf1:vlmeval/smp/status_report.py:flatten_summary_metrics``, the
``report_primary_metric`` class methods of ``ImageBaseDataset`` (generic key ranking), ``ImageMCQDataset``
(``split=none|Overall`` x 100), ``MMMUDataset`` (``split=test|Overall`` / ``split=validation|Overall`` x 100) and
``ImageVQADataset`` (``split=none|Overall`` as is), and
``maveryn/trace@rlvr:rlvr/evaluation/scripts/run_official_vlmevalkit_saved_score.py:_primary_score``.

Quirk reproduced on purpose: ``auto`` multiplies by 100 whenever ``|v| <= 1``, so an already-percent value of at
most 1 (a slice scoring <= 1 %) is scaled a second time.

An evaluator's DataFrame result is represented by :class:`MetricTable` (ordered columns, rows of cells).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

from trace_lib.errors import TraceReproError
from trace_lib.extraction.workbook import isna

#: Which dataset class's ``report_primary_metric`` applies.
Reporter = Literal["image_base", "image_mcq", "mmmu", "image_vqa"]
ValueScale = Literal["auto", "fraction", "percent"]


@dataclass(frozen=True)
class MetricTable:
    """A pandas DataFrame an evaluator returns: column names in order and one list of cells per row."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def column(self, name: str) -> list[Any]:
        position = self.columns.index(name)
        return [row[position] for row in self.rows]


@dataclass(frozen=True)
class PrimaryMetric:
    """The selected metric: its key, the raw value, and the reported score in percent."""

    key: str
    raw: Any
    score: float


def _numeric_text(text: str) -> bool:
    """Whether ``float(text)`` parses to a number that is not NaN."""
    try:
        return not math.isnan(float(text))
    except ValueError:
        return False


def is_number(value: Any) -> bool:
    """``status_report.is_number``: finite-or-infinite numbers and numeric strings; never bool or NaN."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return not isna(float(value)) if isinstance(value, float) else True
    return isinstance(value, str) and _numeric_text(value)


def to_number(value: Any) -> Any:
    """``status_report.to_number``: ints stay int, floats float, digit strings int, other numeric strings float."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return int(value) if value.isdigit() else float(value)
    return value


def _safe_key(key: Any) -> str:
    text = str(key).strip()
    return text if text else "value"


def _coerces_to_number(value: Any) -> bool:
    """Whether ``pandas.to_numeric(..., errors='coerce')`` keeps the cell as a non-NaN number."""
    if isinstance(value, (bool, int)):
        return True
    if isinstance(value, float):
        return not math.isnan(value)
    return isinstance(value, str) and _numeric_text(value)


def _flatten_table(table: MetricTable) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    if not table.rows:
        return metrics
    numeric = [c for i, c in enumerate(table.columns) if any(_coerces_to_number(r[i]) for r in table.rows)]
    if not numeric:
        return metrics
    dims = [c for c in table.columns if c not in numeric]
    for row_idx, row in enumerate(table.rows):
        cells = dict(zip(table.columns, row))
        parts = []
        for col in dims:
            value = cells[col]
            if isna(value):
                continue
            text = str(value).strip()
            if text:
                parts.append(f"{_safe_key(col)}={text}")
        prefix = "|".join(parts)
        for col in numeric:
            value = cells[col]
            if not is_number(value):
                continue
            key = _safe_key(col) if not prefix else f"{prefix}|{_safe_key(col)}"
            if key in metrics:
                key = f"{key}#{row_idx}"
            metrics[key] = to_number(value)
    return metrics


def _flatten_any(obj: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(obj, MetricTable):
        for key, value in _flatten_table(obj).items():
            merged = key if not prefix else f"{prefix}|{key}"
            if merged in out:
                merged = f"{merged}#dup"
            out[merged] = value
        return
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            key = _safe_key(key)
            _flatten_any(value, key if not prefix else f"{prefix}|{key}", out)
        return
    if isinstance(obj, (list, tuple)):
        if not obj:
            return
        if all(is_number(x) for x in obj):
            if len(obj) == 1:
                key = prefix or "value"
                if key in out:
                    key = f"{key}#0"
                out[key] = to_number(obj[0])
            else:
                for idx, value in enumerate(obj):
                    key = f"{prefix}|{idx}" if prefix else str(idx)
                    if key in out:
                        key = f"{key}#dup"
                    out[key] = to_number(value)
        else:
            for idx, value in enumerate(obj):
                _flatten_any(value, f"{prefix}|{idx}" if prefix else str(idx), out)
        return
    if is_number(obj):
        key = prefix or "value"
        if key in out:
            key = f"{key}#dup"
        out[key] = to_number(obj)


def flatten_summary_metrics(result: MetricTable | Mapping[str, Any] | None) -> dict[str, Any]:
    """An evaluator result flattened to ``{key: number}`` (``col=value|...|metric`` keys for tables)."""
    if result is None:
        return {}
    if isinstance(result, MetricTable):
        return _flatten_table(result)
    out: dict[str, Any] = {}
    _flatten_any(result, "", out)
    return out


def choose_primary_metric_key(metrics: Mapping[str, Any]) -> str | None:
    """``image_base._choose_primary_metric_key``: rank overall > acc > score, split bonuses, ties by name."""
    if not metrics:
        return None
    scored = []
    for key in metrics:
        lower = str(key).lower()
        score = 0
        if lower == "overall":
            score = 100
        elif lower.endswith("|overall"):
            score = 95
        elif "overall" in lower:
            score = 90
        elif lower == "acc" or lower.endswith("|acc"):
            score = 80
        elif "acc" in lower:
            score = 70
        elif lower == "score" or lower.endswith("|score"):
            score = 60
        elif "score" in lower:
            score = 50
        if "split=test" in lower:
            score += 4
        elif "split=validation" in lower:
            score += 3
        elif "split=val" in lower:
            score += 2
        elif "split=dev" in lower:
            score += 1
        scored.append((score, str(key)))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return scored[0][1]


def report_primary_metric(reporter: Reporter, metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The dataset class's ``report_primary_metric`` on flattened metrics (usually one entry, maybe none)."""
    if not isinstance(metrics, Mapping) or not metrics:
        return {}
    if reporter == "mmmu":
        if "split=test|Overall" in metrics:
            return {"Overall Acc (test)": metrics["split=test|Overall"] * 100}
        if "split=validation|Overall" in metrics:
            return {"Overall Acc (val)": metrics["split=validation|Overall"] * 100}
        reporter = "image_mcq"
    if reporter == "image_mcq" and "split=none|Overall" in metrics:
        return {"Overall Acc": metrics["split=none|Overall"] * 100}
    if reporter == "image_vqa" and "split=none|Overall" in metrics:
        return {"Overall Acc": metrics["split=none|Overall"]}
    key = choose_primary_metric_key(metrics)
    if key is not None and is_number(metrics.get(key)):
        return {str(key): to_number(metrics[key])}
    return {}


def scale_value(raw: Any, scale: ValueScale = "auto") -> float:
    """``_primary_score`` scaling: ``'%'``-strings kept; ``auto`` multiplies by 100 only when ``|v| <= 1``.

    Raises:
        TraceReproError: the value is not finite (upstream raises ``ValueError``).
    """
    percent_text = isinstance(raw, str) and raw.strip().endswith("%")
    value = float(raw.strip()[:-1] if percent_text else raw)
    if not math.isfinite(value):
        raise TraceReproError("primary metric is not finite", found=raw)
    if scale == "fraction" or (scale == "auto" and not percent_text and abs(value) <= 1.0):
        return value * 100.0
    return value


def primary_score(
    reporter: Reporter, result: MetricTable | Mapping[str, Any], *, scale: ValueScale = "auto"
) -> PrimaryMetric:
    """The reported slice number (percent) of an evaluator result, as the official wrapper selects it.

    Raises:
        TraceReproError: not exactly one primary metric, or a non-finite one.
    """
    official = report_primary_metric(reporter, flatten_summary_metrics(result))
    if len(official) != 1:
        raise TraceReproError("evaluator did not report exactly one primary metric", found=sorted(official))
    key, raw = next(iter(official.items()))
    return PrimaryMetric(key=str(key), raw=raw, score=scale_value(raw, scale))


#: ``multiple_choice.MMB_abbrs``: category names ``report_acc`` abbreviates.
MMB_ABBREVIATIONS = {
    "coarse_perception": "CP",
    "finegrained_perception (instance-level)": "FP-S",
    "finegrained_perception (cross-instance)": "FP-C",
    "logic_reasoning": "LR",
    "relation_reasoning": "RR",
    "attribute_reasoning": "AR",
}


def _sorted_groups(values: Sequence[Any], field: str) -> list[Any]:
    try:
        return sorted(set(values))
    except TypeError:
        raise TraceReproError("group column mixes text and missing values; upstream's report_acc cannot sort it",
                              field=field) from None


def report_acc(
    hits: Sequence[float],
    *,
    split: Sequence[Any] | None = None,
    l2_category: Sequence[Any] | None = None,
    category: Sequence[Any] | None = None,
) -> MetricTable:
    """``multiple_choice.report_acc``: one row per split (``none`` without a split column), ``Overall`` then
    one column per ``l2-category`` and ``category`` value (sorted), each the mean hit within the split."""
    splits_of_rows = list(split) if split is not None else ["none"] * len(hits)
    splits = _unique(splits_of_rows) if split is not None else ["none"]
    table: dict[str, list[Any]] = {"split": splits}

    def means(mask: Sequence[bool]) -> list[float]:
        return [mean([h for h, m, s in zip(hits, mask, splits_of_rows) if m and s == sp]) for sp in splits]

    table["Overall"] = means([True] * len(hits))
    for field, groups in (("l2-category", l2_category), ("category", category)):
        if groups is None:
            continue
        for ability in _sorted_groups(groups, field):
            name = MMB_ABBREVIATIONS.get(ability, ability) if isinstance(ability, str) else ability
            table[name] = means([g == ability for g in groups])
    names = tuple(str(c) for c in table)
    return MetricTable(columns=names, rows=tuple(zip(*table.values())))


def _unique(values: Sequence[Any]) -> list[Any]:
    """``list(set(values))`` with a stable order (upstream's order is hash-dependent; keys do not depend on it)."""
    return list(dict.fromkeys(values))


def mean(values: Sequence[float]) -> float:
    """``numpy.mean`` of a list of 0/1 hits as Python computes it: ``sum / len`` (NaN when empty).

    numpy's pairwise summation and Python's left-to-right sum agree exactly on integer-valued hits.
    """
    if not values:
        return math.nan
    return math.fsum(values) / len(values)
