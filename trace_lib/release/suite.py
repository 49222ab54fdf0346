"""Typed views of the evaluation suite and of the evaluated models, read from the release.

Row counts, routes, categories, decoding settings and model identities all live in the release files; these
dataclasses only give them names. Structural validation belongs to ``trace_lib.preflight``; here a missing
field is a :class:`~trace_lib.errors.ReleaseFileError` naming the file and field.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from trace_lib.jsonio import required
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




def load_suite(release: ReleaseRoot) -> Suite:
    """The evaluation suite of ``release`` (``rlvr/evaluation/trace_eval/suite.v1.json``)."""
    rel = identity.SUITE
    doc = release.read_json(rel)
    benches = []
    for i, item in enumerate(required(doc, "benchmarks", file=rel)):
        where = f"benchmarks[{i}]."
        benches.append(
            Benchmark(
                **{
                    name: required(item, name, file=rel, where=where)
                    for name in (
                        "key", "display", "official_alias", "category", "route", "rows",
                        "answer_contract", "score_contract",
                    )
                }
            )
        )
    return Suite(
        suite_id=required(doc, "suite_id", file=rel),
        benchmarks=tuple(benches),
        categories=MappingProxyType({k: tuple(v) for k, v in required(doc, "categories", file=rel).items()}),
        routes=MappingProxyType({k: tuple(v) for k, v in required(doc, "routes", file=rel).items()}),
        generation=MappingProxyType(dict(required(doc, "generation", file=rel))),
        vlmevalkit_commit=required(required(doc, "vlmevalkit", file=rel), "commit", file=rel, where="vlmevalkit."),
        sha256=release.sha256(rel),
    )


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
