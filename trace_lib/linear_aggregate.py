"""Each benchmark's aggregate as a linear function of independent units: the basis of its row-level variance.

Every suite aggregate is, given the items, exactly ``score_s = const + sum_u w_u * y_u[s]`` on the 0-100 scale,
with units ``u`` that are independent given the items (a row, or a WeMath composite problem) and ``y_u[s]`` the
unit's value at decoding seed ``s`` computed from that seed's per-row credits alone:

- a mean of per-row credits (22 benchmarks, fractional credits included, e.g. ChartQAPro's relaxed accuracy,
  CharXiv's judge scores): unit = row, ``y = credit``, ``w = 100 / n``;
- TableVQA-Bench: the mean of five split accuracies, FinTabNetQA counted twice (relieved and exact): unit = row,
  ``y = credit (+ exact_score on fintabnetqa)``, ``w = 100 / (5 * n_split)``;
- WeMath ``Score (Strict)``: ``100 * (1 - sum_p g_p / 525)`` over composite problems ``p`` (a 2- or 3-step
  problem with its multi-step row), ``g_p = 0.5 [IG] + [RM] + [IK]``: unit = problem, ``w = -100 / 525``.

So the conditional sampling variance of one seed's score is ``sum_u w_u^2 var(y_u)`` (no delta-method error), and
the per-unit sample variance over seeds estimates it without bias. :class:`RowAggregate` names the per-row fields
an aggregate needs beside ``credit`` (``trace-repro benchmarks --json`` lists them), each a :class:`RowField` with
the values its protocol's scorer writes there: :class:`~trace_lib.aggregation.credits.CreditTable` refuses any
other value when the credits are read (a credits file, a campaign's ``records.jsonl``), so an implausible field
never enters an aggregate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np


@dataclass(frozen=True)
class Linear:
    """``score[s] = const + weights @ values[:, s]``; units independent given the items.

    ``upper[u]`` bounds ``values[u, :]`` (from 0) and ``group[u]`` labels units of equal weight and bound: the
    one-seed bound ``var(y) <= m (upper - m)`` is summed per group at the group's mean (Jensen).
    """

    const: float
    weights: np.ndarray  # (U,)
    values: np.ndarray  # (U, S)
    upper: np.ndarray  # (U,)
    group: np.ndarray  # (U,) int

    def scores(self) -> np.ndarray:
        """The per-seed scores ``(S,)``."""
        return self.const + self.weights @ self.values

    def paired(self, other: Linear) -> Linear:
        """``self - other`` unit by unit (same items, same seeds): the linearisation of a paired delta."""
        if self.values.shape != other.values.shape or not np.array_equal(self.weights, other.weights):
            raise ValueError("paired linearisations need the same units and seeds")
        return Linear(self.const - other.const, self.weights, self.values - other.values, self.upper + other.upper,
                      self.group)


Linearize = Callable[[np.ndarray, Mapping[str, np.ndarray]], Linear]


@dataclass(frozen=True)
class RowField:
    """A per-row field an aggregate reads besides ``credit`` (``records.jsonl``: a key of ``detail``) and its domain,
    the values its protocol's scorer writes there.

    ``expected`` names the domain in the error line; ``accepts(value)`` tells a present value (not None, not NaN)
    inside it. ``required``: True, a cell must hold a value; False, it may be missing; ``(field, value)``, it must
    where the row's ``field`` holds ``value`` (the rows the aggregate reads it on). ``per_row``: the value belongs to
    the dataset row, so every seed holds the same (the aggregate reads the first seed's: :func:`first_seed`).
    """

    name: str
    expected: Any
    accepts: Callable[[Any], bool]
    required: bool | tuple[str, Any] = True
    per_row: bool = False

    def required_on(self, row: Callable[[str], Any]) -> bool:
        """Whether a row must hold this field; ``row(name)`` reads another field of the same row."""
        if isinstance(self.required, tuple):
            other, value = self.required
            return row(other) == value
        return self.required


def one_of(*values: Any) -> Callable[[Any], bool]:
    """A domain of these values (numbers by value, so ``1.0`` is ``1``; never a boolean, which no scorer writes)."""
    def accepts(value: Any) -> bool:
        if not (isinstance(value, str) or _is_number(value)):
            return False
        return any(_is_number(value) == _is_number(v) and value == v for v in values)

    return accepts


def is_text(value: Any) -> bool:
    """A domain of strings."""
    return isinstance(value, str)


def is_text_or_number(value: Any) -> bool:
    """A domain of strings and finite numbers (an identifier a dataset column holds: ``1``, ``1.0`` or ``"p1"``)."""
    return isinstance(value, (str, int, np.integer)) and not isinstance(value, (bool, np.bool_)) or (
        isinstance(value, (float, np.floating)) and math.isfinite(value))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def is_missing(value: Any) -> bool:
    """An absent or null cell, or a NaN (Parquet's null of a float column)."""
    return value is None or isinstance(value, (float, np.floating)) and math.isnan(value)


@dataclass(frozen=True)
class RowAggregate:
    """How a benchmark's reported score is built from per-row credits (see the module docstring)."""

    kind: str  # "mean", "split-macro-mean", "composite-problems"
    row_fields: tuple[RowField, ...]  # per-row fields needed besides ``credit``, each with its domain
    description: str
    linearize: Linearize  # credits (n, S), {field: (n, S) array} -> Linear, rows in index order

    @property
    def fields(self) -> tuple[str, ...]:
        """The names of :attr:`row_fields`."""
        return tuple(f.name for f in self.row_fields)

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "fields": ["credit", *self.fields], "description": self.description}


def _mean(credits: np.ndarray, extra: Mapping[str, np.ndarray]) -> Linear:
    n = credits.shape[0]
    return Linear(0.0, np.full(n, 100.0 / n), credits, np.ones(n), np.zeros(n, dtype=int))


#: The default aggregate: ``100 * mean(credit)`` over the rows.
MEAN = RowAggregate("mean", (), "100 x mean of per-row credits in [0, 1]", _mean)


def first_seed(column: np.ndarray) -> np.ndarray:
    """A per-row field that does not change with the seed (split, key, problem id): its first seed's value."""
    return column[:, 0]


def numeric(column: np.ndarray) -> np.ndarray:
    """A numeric per-row field, missing cells as 0.

    Raises:
        ValueError: a cell that is not a finite number (a string, an infinity); TypeError: a list or an object.
    """
    out = np.zeros(column.shape, dtype=float)
    for pos, value in np.ndenumerate(column):
        if value is not None and value == value:
            number = float(value)
            if not math.isfinite(number):
                raise ValueError(f"row {pos[0]}: {value!r} is not a finite number")
            out[pos] = number
    return out
