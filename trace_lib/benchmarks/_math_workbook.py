"""The prediction workbook and the scorers' intermediate workbooks, as the eight chart/math scorers read them.

Upstream writes every slice's responses into ``<ALIAS>_predictions.xlsx`` (the dataset's columns without media,
``index`` as text, ``prediction`` = the raw response; ``run_external_benchmark_generation_api_queue.py:
_finalize_spec``) and the scorers read it back with ``pandas.read_excel``; several scorers then write a judged
or adapted table and read *that* back too. Each write/read runs the real libraries through
:mod:`trace_lib.extraction.workbook`, one table at a time (``read_excel`` re-types whole columns).

Tables are column-oriented: ``{column: [cell, ...]}`` in dataset row order.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from trace_lib.benchmarks.protocol import DataRow, Row
from trace_lib.extraction.workbook import COMPACT_MEDIA_COLUMNS, roundtrip_table

Table = dict[str, list[Any]]


def prediction_workbook(
    rows: Sequence[Row],
    responses: Sequence[str | None],
    *,
    columns: Sequence[str] | None = None,
    resaved: bool = False,
) -> Table:
    """The prediction workbook as the scorer reads it: ``columns`` (default: every non-media dataset column)
    plus ``prediction``.

    ``resaved``: the official route's queue-column filter re-saved the workbook with openpyxl before
    ``dataset.evaluate`` read it (formula cells then read back as NaN instead of 0). A response of None (a
    generation that produced nothing) is written as an empty cell.
    """
    names = list(columns) if columns is not None else list(dict.fromkeys(k for row in rows for k in row))
    table: Table = {}
    for name in names:
        if str(name).lower() in COMPACT_MEDIA_COLUMNS or name == "prediction":
            continue
        if name == "index":
            table[name] = [str(row["index"]) for row in rows]  # the queue writes str(index)
        elif any(name in row for row in rows):
            table[name] = [row.get(name, math.nan) for row in rows]
    table["prediction"] = ["" if r is None else r for r in responses]
    return roundtrip_table(table, resaved=resaved)


def reread(table: Mapping[str, Sequence[Any]], *, cycles: int = 1) -> Table:
    """A scorer's own table after ``to_excel`` + ``read_excel`` (``cycles`` times)."""
    return roundtrip_table(table, cycles=cycles)


def records(table: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """The table's rows as dicts (``DataFrame.iterrows`` order)."""
    names = list(table)
    length = len(table[names[0]]) if names else 0
    return [DataRow({name: table[name][i] for name in names}) for i in range(length)]


def to_json_double(value: float) -> float:
    """A metric as ``DataFrame.to_json`` writes it (10 decimal places) and ``json.loads`` reads it back."""
    return float(f"{value:.10f}")
