"""Per-row credits of a reproduction, one row per (model_id, seed, benchmark_id, index): what every verdict reads.

A :class:`CreditTable` holds numpy columns ``model_id``, ``seed``, ``benchmark_id``, ``index`` (str), ``credit``
(float in [0, 1]) and ``extra`` (the per-row fields a benchmark's aggregate needs beside the credit:
:mod:`trace_lib.linear_aggregate`). It comes from a JSONL or Parquet file (``trace-repro verdict --credits``), from
a campaign's ``records.jsonl`` files (:func:`trace_lib.campaign.verdicts.campaign_credits`) or from dicts; it is validated on construction,
so a bad file is one :class:`~trace_lib.errors.InputError` naming the file and the field. Each field a row's
benchmark aggregates holds a value of its domain (:class:`~trace_lib.linear_aggregate.RowField`, declared with the
aggregate), and a field of the dataset row holds the same value at every seed (:meth:`CreditTable.cells`).

    table = CreditTable.from_jsonl("credits.jsonl")
    for (model, benchmark), cell in table.cells().items():   # credits (rows x seeds), extra, seeds, index
        ...
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from trace_lib.decoding import ascii_digits, check_input_file
from trace_lib.errors import InputError
from trace_lib.jsonio import MAX_INT, loads_strict, strict_error
from trace_lib.linear_aggregate import RowField, is_missing

#: The key columns and the credit column, in file order.
KEY_COLUMNS = ("model_id", "seed", "benchmark_id", "index")
COLUMNS = (*KEY_COLUMNS, "credit")


@dataclass(frozen=True)
class Cell:
    """One (model, benchmark): credits ``(rows, seeds)`` in index order, the seeds, and the extra fields."""

    model_id: str
    benchmark_id: str
    seeds: tuple[int, ...]
    index: tuple[str, ...]
    credits: np.ndarray  # (n, S)
    extra: Mapping[str, np.ndarray]  # field -> (n, S) object array

    def select(self, seeds: Sequence[int]) -> Cell:
        """The same cell restricted to ``seeds`` (in that order)."""
        cols = [self.seeds.index(s) for s in seeds]
        return Cell(self.model_id, self.benchmark_id, tuple(seeds), self.index, self.credits[:, cols],
                    {k: v[:, cols] for k, v in self.extra.items()})


@dataclass(frozen=True)
class CreditTable:
    """Long-form per-row credits (see the module docstring); ``source`` names the file in error messages."""

    model_id: np.ndarray
    seed: np.ndarray
    benchmark_id: np.ndarray
    index: np.ndarray
    credit: np.ndarray
    extra: Mapping[str, np.ndarray] = field(default_factory=dict)
    source: str = "credits"

    def __post_init__(self) -> None:
        n = len(self.credit)
        for name in ("model_id", "seed", "benchmark_id", "index"):
            if len(getattr(self, name)) != n:
                raise InputError(f"column has {len(getattr(self, name))} values, credit has {n}", file=self.source,
                                 field=name)
        bad = ~np.isfinite(self.credit) | (self.credit < 0.0) | (self.credit > 1.0)
        if bad.any():
            at = int(np.flatnonzero(bad)[0])
            raise InputError("credit outside [0, 1]", file=self.source, field=f"{self._where(at)}.credit",
                             found=float(self.credit[at]))
        if n:
            order = self._order()
            same = np.ones(n - 1, dtype=bool)
            for column in (self.model_id, self.seed, self.benchmark_id, self.index):
                ordered = column[order]
                same &= ordered[1:] == ordered[:-1]
            if same.any():
                at = int(order[1:][same][0])
                raise InputError("duplicate row (model_id, seed, benchmark_id, index)", file=self.source,
                                 field=self._where(at))
        self._check_row_fields()

    def _check_row_fields(self) -> None:
        """Every field a row's benchmark aggregates lies in its domain, and is there where the aggregate reads it
        (a column absent altogether is :func:`~trace_lib.aggregation.verdict.cell_linear`'s line: it names them
        all)."""
        if not self.extra or not len(self):
            return
        for bench in dict.fromkeys(self.benchmark_id.tolist()):
            fields = [f for f in row_fields(bench) if f.name in self.extra]
            if not fields:
                continue
            for at in np.flatnonzero(self.benchmark_id == bench).tolist():
                for spec in fields:
                    value = self.extra[spec.name][at]
                    where = f"{self._where(at)}.{spec.name}"
                    if is_missing(value):
                        if spec.required_on(lambda name, at=at: _cell(self.extra, name, at)):
                            when = f" on rows with {spec.required[0]} {spec.required[1]!r}" if isinstance(
                                spec.required, tuple) else ""
                            raise InputError(f"required field is {'missing' if value is None else 'NaN'} ({bench}'s "
                                             f"aggregate reads it{when})", file=self.source, field=where)
                    elif not spec.accepts(value):
                        raise InputError(f"value outside what {bench}'s scorer writes", file=self.source,
                                         field=where, expected=spec.expected, found=_plain(value))

    def _order(self) -> np.ndarray:
        """Positions sorted by (model_id, benchmark_id, seed, index)."""
        return np.lexsort((self.index.astype(str), self.seed, self.benchmark_id.astype(str),
                           self.model_id.astype(str)))

    def _where(self, at: int) -> str:
        return (f"row {at + 1} ({self.model_id[at]}, seed {self.seed[at]}, {self.benchmark_id[at]}, "
                f"index {self.index[at]})")

    def __len__(self) -> int:
        return len(self.credit)

    # -- constructors ---------------------------------------------------------------------------------------
    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], *, source: str = "credits") -> CreditTable:
        """From dicts with the :data:`COLUMNS` (and any extra fields)."""
        rows = list(records)
        names: dict[str, None] = dict.fromkeys(COLUMNS)
        for number, row in enumerate(rows, 1):
            if not isinstance(row, Mapping):
                raise InputError("a row is not an object", file=source, field=f"row {number}")
            names.update(dict.fromkeys(row))
        columns = {name: [row.get(name) for row in rows] for name in names}
        return cls._from_columns(columns, source)

    @classmethod
    def _from_columns(cls, columns: Mapping[str, Sequence[Any]], source: str) -> CreditTable:
        missing = [c for c in COLUMNS if c not in columns]
        if missing:
            raise InputError("required column is missing", file=source, field=missing[0],
                             expected=list(COLUMNS))
        for name in COLUMNS:
            nulls = [i for i, v in enumerate(columns[name]) if v is None or (isinstance(v, float) and math.isnan(v))]
            if nulls:
                what = "missing" if columns[name][nulls[0]] is None else "NaN"  # absent or null; or a NaN
                raise InputError(f"required field is {what}", file=source, field=f"row {nulls[0] + 1}.{name}")
        try:
            seed = np.asarray([_as_int(v) for v in columns["seed"]], dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            at = next(i for i, v in enumerate(columns["seed"]) if not _is_int(v))
            raise InputError(f"seed is not an integer in 0..{MAX_INT}", file=source, field=f"row {at + 1}.seed",
                             found=columns["seed"][at]) from None
        try:
            credit = np.asarray([_as_float(v) for v in columns["credit"]], dtype=float)
        except (TypeError, ValueError):
            at = next(i for i, v in enumerate(columns["credit"]) if not _is_float(v))
            raise InputError("credit is not a number", file=source, field=f"row {at + 1}.credit",
                             found=columns["credit"][at]) from None
        for name, kinds in (("model_id", (str,)), ("benchmark_id", (str,)), ("index", (str, int))):
            bad = next((i for i, v in enumerate(columns[name])
                        if isinstance(v, bool) or not isinstance(v, kinds)), None)  # a dict or list is no key
            if bad is not None:
                raise InputError(f"{name} is not {' or '.join('a string' if k is str else 'an integer' for k in kinds)}",
                                 file=source, field=f"row {bad + 1}.{name}", found=columns[name][bad])
        text = {name: np.asarray([str(v) for v in columns[name]], dtype=object)
                for name in ("model_id", "benchmark_id", "index")}
        extra = {name: np.asarray(list(values), dtype=object) for name, values in columns.items()
                 if name not in COLUMNS}
        return cls(text["model_id"], seed, text["benchmark_id"], text["index"], credit, extra, source)

    @classmethod
    def from_jsonl(cls, path: str | Path) -> CreditTable:
        """One JSON object per line.

        Raises:
            InputError: unreadable file, a line that is not a JSON object, or a bad field.
        """
        from trace_lib.decoding import iter_lines

        label = str(path)
        rows = []
        try:  # UTF-8 without a BOM, a bad byte named by its offset (decoding's one policy)
            for number, line in iter_lines(path):
                if not line.strip():
                    continue
                try:
                    rows.append(loads_strict(line))
                except ValueError as exc:  # not JSON, a repeated key, NaN/Infinity, nesting too deep
                    raise InputError(strict_error(exc), file=label, field=f"line {number}") from None
        except OSError as exc:
            raise InputError(f"cannot read file: {exc.strerror}", file=label) from None
        return cls.from_records(rows, source=label)

    @classmethod
    def from_parquet(cls, path: str | Path) -> CreditTable:
        """A Parquet table with the :data:`COLUMNS` (extra columns are the aggregate fields).

        Raises:
            InputError: unreadable or not Parquet, or a bad field.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        label = str(path)
        try:
            table = pq.read_table(path)
        except OSError as exc:
            raise InputError(f"cannot read file: {getattr(exc, 'strerror', None) or exc}", file=label) from None
        except (pa.ArrowInvalid, ValueError) as exc:
            raise InputError(f"not a Parquet file ({str(exc).splitlines()[0][:120]})", file=label) from None
        return cls._from_columns({name: table.column(name).to_pylist() for name in table.column_names}, label)

    @classmethod
    def read(cls, path: str | Path) -> CreditTable:
        """JSONL or Parquet, by the file's magic bytes (``PAR1``)."""
        try:
            check_input_file(path)  # a FIFO or device is refused, never opened (it could block)
            with open(path, "rb") as handle:
                magic = handle.read(4)
        except OSError as exc:
            raise InputError(f"cannot read file: {exc.strerror}", file=str(path)) from None
        if not magic:
            raise InputError("empty file: no credit rows", file=str(path))
        return cls.from_parquet(path) if magic == b"PAR1" else cls.from_jsonl(path)

    @classmethod
    def concat(cls, tables: Sequence[CreditTable], *, source: str = "credits") -> CreditTable:
        names = sorted({k for t in tables for k in t.extra})
        n = [len(t) for t in tables]
        extra = {k: np.concatenate([t.extra.get(k, np.full(m, None, dtype=object)) for t, m in zip(tables, n)])
                 if tables else np.empty(0, dtype=object) for k in names}
        cat = (lambda name, dtype: np.concatenate([getattr(t, name) for t in tables]).astype(dtype)  # noqa: E731
               if tables else np.empty(0, dtype=dtype))
        return cls(cat("model_id", object), cat("seed", np.int64), cat("benchmark_id", object), cat("index", object),
                   cat("credit", float), extra, source)

    # -- writers --------------------------------------------------------------------------------------------
    def to_records(self) -> list[dict[str, Any]]:
        out = []
        for i in range(len(self)):
            row = {"model_id": str(self.model_id[i]), "seed": int(self.seed[i]),
                   "benchmark_id": str(self.benchmark_id[i]), "index": str(self.index[i]),
                   "credit": float(self.credit[i])}
            row.update({k: _plain(v[i]) for k, v in self.extra.items() if v[i] is not None})
            out.append(row)
        return out

    def to_jsonl(self, path: str | Path) -> Path:
        from trace_lib.atomic import write_text_atomic

        write_text_atomic(Path(path), "".join(json.dumps(r, sort_keys=True) + "\n" for r in self.to_records()))
        return Path(path)

    def to_parquet(self, path: str | Path) -> Path:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from trace_lib.atomic import atomic_output

        columns: dict[str, Any] = {"model_id": self.model_id.astype(str), "seed": self.seed,
                                   "benchmark_id": self.benchmark_id.astype(str), "index": self.index.astype(str),
                                   "credit": self.credit}
        for name, values in self.extra.items():
            columns[name] = [_plain(v) for v in values]
        with atomic_output(Path(path)) as handle:
            pq.write_table(pa.table(columns), handle)
        return Path(path)

    # -- views ----------------------------------------------------------------------------------------------
    def cells(self) -> dict[tuple[str, str], Cell]:
        """``(model_id, benchmark_id) -> Cell`` with rows in index order.

        Raises:
            InputError: the seeds of a cell do not hold the same row indices.
        """
        out: dict[tuple[str, str], Cell] = {}
        if not len(self):
            return out
        order = self._order()
        model, bench, seed, index = (self.model_id[order], self.benchmark_id[order], self.seed[order],
                                     self.index[order])
        breaks = np.flatnonzero((model[1:] != model[:-1]) | (bench[1:] != bench[:-1])) + 1
        for lo, hi in zip(np.r_[0, breaks], np.r_[breaks, len(order)]):
            rows = order[lo:hi]
            seeds = tuple(int(s) for s in np.unique(seed[lo:hi]))
            per_seed = [rows[seed[lo:hi] == s] for s in seeds]
            first = self.index[per_seed[0]]
            for s, these in zip(seeds, per_seed):
                if len(these) != len(first) or not np.array_equal(self.index[these], first):
                    raise InputError(f"seed {s} holds {len(these)} rows, seed {seeds[0]} holds {len(first)}, or "
                                     "their indices differ (every seed must score the same rows)", file=self.source,
                                     field=f"{model[lo]}/{bench[lo]}.index")
            matrix = np.stack(per_seed, axis=1)  # (n, S) positions into the table
            extra = {k: v[matrix] for k, v in self.extra.items()}
            for spec in row_fields(str(bench[lo])):
                if spec.per_row and spec.name in extra:
                    self._check_same_across_seeds(spec, extra[spec.name], matrix, seeds)
            out[(str(model[lo]), str(bench[lo]))] = Cell(
                str(model[lo]), str(bench[lo]), seeds, tuple(str(i) for i in first), self.credit[matrix], extra)
        return out

    def _check_same_across_seeds(self, spec: RowField, values: np.ndarray, matrix: np.ndarray,
                                 seeds: tuple[int, ...]) -> None:
        """A field of the dataset row (``spec.per_row``) holds one value at every seed: the aggregate reads the
        first seed's, so another value at a later seed would be ignored silently."""
        for row, column in np.argwhere(values[:, 1:] != values[:, :1]).tolist():
            at = int(matrix[row, column + 1])
            raise InputError(f"a field of the dataset row differs between seeds (the aggregate reads seed "
                             f"{seeds[0]}'s)", file=self.source, field=f"{self._where(at)}.{spec.name}",
                             expected=_plain(values[row, 0]), found=_plain(values[row, column + 1]))


def row_fields(benchmark_id: str) -> tuple[RowField, ...]:
    """The per-row fields ``benchmark_id``'s aggregate reads, with their domains (none for a benchmark outside the
    suite or not implemented: the verdict names those)."""
    from trace_lib.benchmarks.registry import PROTOCOLS, get_protocol
    from trace_lib.errors import ProtocolNotImplementedError

    if benchmark_id not in PROTOCOLS:
        return ()
    try:
        return get_protocol(benchmark_id).row_aggregate.row_fields
    except ProtocolNotImplementedError:
        return ()


def _cell(extra: Mapping[str, np.ndarray], name: str, at: int) -> Any:
    column = extra.get(name)
    return None if column is None else column[at]


def _is_int(value: Any) -> bool:
    try:
        _as_int(value)
        return True
    except (TypeError, ValueError):
        return False


def _as_int(value: Any) -> int:
    """``value`` as a seed: an integer in ``0..MAX_INT`` (an integral float or a digit string as one).

    Raises:
        TypeError, ValueError: anything else.
    """
    if isinstance(value, bool):
        raise TypeError(value)
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(value)
    elif isinstance(value, str) and not ascii_digits(value.strip()):
        raise ValueError(value)
    number = int(value)
    if not 0 <= number <= MAX_INT:
        raise ValueError(value)
    return number


def _is_float(value: Any) -> bool:
    try:
        _as_float(value)
        return True
    except (TypeError, ValueError):
        return False


def _as_float(value: Any) -> float:
    if isinstance(value, (bool, str)):
        raise TypeError(value)
    return float(value)


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
