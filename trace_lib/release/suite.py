"""Typed views of the evaluation suite and of the evaluated models, read from the release.

Row counts, routes, categories, decoding settings and model identities all live in the release files; these
dataclasses only give them names. Structural validation belongs to ``trace_lib.preflight``; here a missing
field is a :class:`~trace_lib.errors.ReleaseFileError` naming the file and field.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from trace_lib.errors import ReleaseFileError
from trace_lib.jsonio import MAX_INT, required
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot


@dataclass(frozen=True)
class Benchmark:
    """One ``trace_eval_v1`` benchmark as the suite declares it."""

    key: str
    display: str
    official_alias: str
    category: str
    route: str
    rows: int
    answer_contract: str
    score_contract: str


@dataclass(frozen=True)
class Suite:
    """The ``trace_eval_v1`` suite: benchmarks in suite order, categories, routes and decoding settings."""

    suite_id: str
    benchmarks: tuple[Benchmark, ...]
    categories: Mapping[str, tuple[str, ...]]
    routes: Mapping[str, tuple[str, ...]]
    generation: Mapping[str, Any]
    vlmevalkit_commit: str
    sha256: str

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(b.key for b in self.benchmarks)

    def benchmark(self, key: str) -> Benchmark:
        for bench in self.benchmarks:
            if bench.key == key:
                return bench
        raise KeyError(key)

    @property
    def rows_per_model_seed(self) -> int:
        return sum(b.rows for b in self.benchmarks)


@dataclass(frozen=True)
class EvalModel:
    """One evaluated model as ``results.json`` records it."""

    model_id: str
    display_name: str
    repository_id: str
    revision: str
    parameter_scale: str




#: A benchmark key names files and directories: lower-case letters, digits and ``_``.
_KEY = re.compile(r"[a-z0-9][a-z0-9_]*")
#: The decoding fields the campaign reads from ``generation``, each a number.
_GENERATION_NUMBERS = ("temperature", "top_p", "top_k", "presence_penalty", "repetition_penalty", "max_tokens")


def load_suite(release: ReleaseRoot) -> Suite:
    """The evaluation suite of ``release`` (``rlvr/evaluation/trace_eval/suite.v1.json``), each field of the type
    the campaign uses it as.

    Raises:
        ReleaseFileError: a field missing or of another type (a key that is not a file name, rows not a count,
            a temperature that is not a number), file and field named.
    """
    rel = identity.SUITE
    doc = release.read_json(rel)
    benches = []
    for i, item in enumerate(_typed(required(doc, "benchmarks", file=rel), list, rel, "benchmarks", "a list")):
        where = f"benchmarks[{i}]."
        fields = {name: required(item, name, file=rel, where=where)
                  for name in ("key", "display", "official_alias", "category", "route", "rows", "answer_contract",
                               "score_contract")}
        for name, value in fields.items():
            if name != "rows":
                _typed(value, str, rel, where + name, "a string")
        if not _KEY.fullmatch(fields["key"]):
            raise ReleaseFileError("not a benchmark key (lower-case letters, digits, '_')", file=rel,
                                   field=where + "key", found=fields["key"])
        rows = fields["rows"]
        if isinstance(rows, bool) or not isinstance(rows, int) or not 0 <= rows <= MAX_INT:
            raise ReleaseFileError("not a row count", file=rel, field=where + "rows", found=rows)
        benches.append(Benchmark(**fields))
    generation = _typed(required(doc, "generation", file=rel), dict, rel, "generation", "an object")
    for name in _GENERATION_NUMBERS:
        value = generation.get(name)
        if name in generation and (isinstance(value, bool) or not isinstance(value, (int, float))
                                   or not math.isfinite(value)):
            raise ReleaseFileError("not a number", file=rel, field=f"generation.{name}", found=value)
    return Suite(
        suite_id=_typed(required(doc, "suite_id", file=rel), str, rel, "suite_id", "a string"),
        benchmarks=tuple(benches),
        categories=_lists(required(doc, "categories", file=rel), rel, "categories"),
        routes=_lists(required(doc, "routes", file=rel), rel, "routes"),
        generation=MappingProxyType(dict(generation)),
        vlmevalkit_commit=required(required(doc, "vlmevalkit", file=rel), "commit", file=rel, where="vlmevalkit."),
        sha256=release.sha256(rel),
    )


def _typed(value: Any, kind: type, file: str, field: str, what: str) -> Any:
    if not isinstance(value, kind):
        raise ReleaseFileError(f"not {what}", file=file, field=field, found=type(value).__name__)
    return value


def _lists(value: Any, file: str, field: str) -> Mapping[str, tuple[str, ...]]:
    """An object of string lists (``categories``, ``routes``), read-only."""
    _typed(value, dict, file, field, "an object")
    for name, keys in value.items():
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise ReleaseFileError("not a list of benchmark keys", file=file, field=f"{field}.{name}")
    return MappingProxyType({k: tuple(v) for k, v in value.items()})


def load_eval_models(release: ReleaseRoot) -> tuple[EvalModel, ...]:
    """The evaluated models, in ``results.json`` order."""
    rel = identity.RESULTS
    doc = release.read_json(rel)
    models = []
    for i, item in enumerate(required(doc, "models", file=rel)):
        where = f"models[{i}]."
        models.append(
            EvalModel(
                model_id=required(item, "model_id", file=rel, where=where),
                display_name=required(item, "display_name", file=rel, where=where),
                repository_id=required(item, "repository_id", file=rel, where=where),
                revision=required(item, "repository_revision", file=rel, where=where),
                parameter_scale=required(item, "parameter_scale", file=rel, where=where),
            )
        )
    return tuple(models)


def load_seeds(release: ReleaseRoot) -> tuple[int, ...]:
    """The decoding seeds of the campaign (``results.json`` ``seeds``)."""
    return tuple(required(release.read_json(identity.RESULTS), "seeds", file=identity.RESULTS))
