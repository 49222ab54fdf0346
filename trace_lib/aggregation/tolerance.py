"""The reproduction tolerance rule: is a reproduced score an ordinary draw of the canonical seed distribution?

A reproduced score ``x`` (the mean of ``k`` reproduced seeds) passes against the canonical mean ``mu`` of ``n``
seeds iff ``|x - mu| <= z * sqrt(1/k + 1/n) * sigma`` (eval-campaign spec §7.3; one seed: ``sqrt(4/3)``):

- slice (model, benchmark): ``sigma = max(SE_bin, s_pool)``, ``SE_bin = 100*sqrt(p(1-p)/rows)`` at ``p = mu/100``
  with the suite's row count, ``s_pool`` = RMS over the release's models of the canonical seed stddev;
- category (model, category) and overall (model): ``sigma = max(seed pool, binomial)``, the seed pool being the RMS
  of the canonical category/overall stddevs and the binomial term ``sqrt(sum SE_bin^2) / count`` over the
  benchmarks averaged.

Every input (means, stddevs, seed counts, rows, categories) is read from the release at run time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from trace_lib.errors import ReleaseFileError, UsageError
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot
from trace_lib.release.suite import load_suite

#: The default z of the band (spec §7.3: 576/576 canonical seed scores fall inside at z = 3).
DEFAULT_Z = 3.0


@dataclass(frozen=True)
class Sigma:
    """The standard deviation a band is built from, with both candidates kept for the message."""

    binomial: float
    seed_pool: float

    @property
    def value(self) -> float:
        return max(self.binomial, self.seed_pool)

    @property
    def source(self) -> str:
        return "binomial" if self.binomial >= self.seed_pool else "seed pool"


@dataclass(frozen=True)
class Verdict:
    """A reproduced score judged against its canonical mean: ``ok`` iff ``|delta| <= band`` (and rows match)."""

    subject: str  # slice id (``MODEL-seedSEED-BENCHMARK``), or a category / overall label
    reproduced: float  # percent
    canonical: float  # canonical mean over ``canonical_seeds`` seeds, percent
    delta: float  # reproduced - canonical, percentage points
    band: float  # allowed |delta|, percentage points
    z: float
    factor: float  # sqrt(1/k + 1/n)
    sigma: Sigma
    reproduced_seeds: int = 1
    canonical_seeds: int = 3
    rows: int | None = None  # rows the reproduced score was computed over
    expected_rows: int | None = None  # the suite's row count (slices only)
    engine_note: str = ""  # "engine differs from the paper's (...)" when the responses' engine is not the paper's

    @property
    def rows_ok(self) -> bool:
        return self.rows is None or self.expected_rows is None or self.rows == self.expected_rows

    @property
    def ok(self) -> bool:
        return math.isfinite(self.reproduced) and abs(self.delta) <= self.band and self.rows_ok

    @property
    def standardized(self) -> float:
        """``delta`` in units of ``factor * sigma`` (``ok`` on score iff its magnitude is at most ``z``)."""
        return self.delta / (self.factor * self.sigma.value)

    def explain(self) -> str:
        """One line: reproduced, canonical, delta, allowed band, z, sigma, rows and the outcome."""
        mean_of = f"mean of {self.reproduced_seeds} seeds " if self.reproduced_seeds > 1 else ""
        text = (
            f"{self.subject}: reproduced {mean_of}{self.reproduced:.3f} vs canonical {self.canonical:.3f} "
            f"({self.canonical_seeds}-seed mean): delta {self.delta:+.3f} pp, allowed +/-{self.band:.3f} pp "
            f"(z={self.z:g} x sqrt(1/{self.reproduced_seeds}+1/{self.canonical_seeds}) x sigma "
            f"{self.sigma.value:.3f} [{self.sigma.source}; binomial {self.sigma.binomial:.3f}, "
            f"seed pool {self.sigma.seed_pool:.3f}])"
        )
        if self.rows is not None:
            text += f", rows {self.rows}"
            if not self.rows_ok:
                text += f" (expected {self.expected_rows})"
        note = f" [{self.engine_note}]" if self.engine_note else ""
        if self.ok:
            return text + ": within tolerance" + note
        if not math.isfinite(self.reproduced):
            return text + ": FAILED (reproduced score is not finite)" + note
        if not self.rows_ok:
            return text + ": FAILED (row count differs from the suite)" + note
        return text + f": FAILED (|delta| = {abs(self.standardized):.2f} x factor x sigma > z={self.z:g})" + note

    def properties(self) -> list[tuple[str, str]]:
        """JUnit receipt properties of this verdict."""
        props = [
            ("reproduced", repr(self.reproduced)),
            ("canonical_mean", repr(self.canonical)),
            ("delta", repr(self.delta)),
            ("band", repr(self.band)),
            ("z", repr(self.z)),
            ("sigma", repr(self.sigma.value)),
            ("sigma_source", self.sigma.source),
            ("verdict", "ok" if self.ok else "failed"),
        ]
        if self.rows is not None:
            props.append(("rows", str(self.rows)))
        if self.engine_note:
            props.append(("engine_note", self.engine_note))
        return props

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (reports, ``trace-repro score --json``)."""
        return {
            "subject": self.subject,
            "reproduced": self.reproduced,
            "canonical": self.canonical,
            "delta": self.delta,
            "band": self.band,
            "z": self.z,
            "factor": self.factor,
            "sigma": self.sigma.value,
            "sigma_binomial": self.sigma.binomial,
            "sigma_seed_pool": self.sigma.seed_pool,
            "reproduced_seeds": self.reproduced_seeds,
            "canonical_seeds": self.canonical_seeds,
            "rows": self.rows,
            "expected_rows": self.expected_rows,
            "ok": self.ok,
        }


@dataclass(frozen=True)
class CanonicalSummary:
    """A canonical mean and sample stddev over ``seeds`` seeds (one ``*_summaries`` entry of results.json)."""

    mean: float
    stddev: float
    seeds: int


def binomial_se(mean_percent: float, rows: int) -> float:
    """``100*sqrt(p(1-p)/rows)`` at ``p = mean_percent/100`` (clamped into [0, 1])."""
    p = min(1.0, max(0.0, mean_percent / 100.0))
    return 100.0 * math.sqrt(p * (1.0 - p) / rows)


def _rms(values: list[float]) -> float:
    return math.sqrt(sum(v * v for v in values) / len(values)) if values else 0.0


@dataclass(frozen=True)
class ToleranceRule:
    """The tolerance bands of one release (build with :func:`load_tolerance_rule`)."""

    z: float
    rows: Mapping[str, int]  # benchmark -> suite rows
    categories: Mapping[str, tuple[str, ...]]  # category -> benchmarks
    benchmarks: Mapping[tuple[str, str], CanonicalSummary]  # (model_id, benchmark)
    category_summaries: Mapping[tuple[str, str], CanonicalSummary]  # (model_id, category)
    overall_summaries: Mapping[str, CanonicalSummary]  # model_id

    # -- pooled seed stddevs -----------------------------------------------------------------------------------
    def seed_pool(self, benchmark: str) -> float:
        """RMS over the release's models of the canonical seed stddev of ``benchmark``."""
        return _rms([s.stddev for (_, b), s in self.benchmarks.items() if b == benchmark])

    def category_pool(self, category: str) -> float:
        return _rms([s.stddev for (_, c), s in self.category_summaries.items() if c == category])

    def overall_pool(self) -> float:
        return _rms([s.stddev for s in self.overall_summaries.values()])

    # -- lookups -----------------------------------------------------------------------------------------------
    @property
    def model_ids(self) -> tuple[str, ...]:
        return tuple(self.overall_summaries)

    def _summary(self, table: Mapping[Any, CanonicalSummary], key: Any, what: str) -> CanonicalSummary:
        try:
            return table[key]
        except KeyError:
            raise UsageError(
                f"no canonical {what} for {key!r} in the release",
                file=identity.RESULTS,
                hint=f"canonical models: {', '.join(self.model_ids)}",
            ) from None

    def _benchmark_rows(self, benchmark: str) -> int:
        if benchmark not in self.rows:
            raise UsageError(f"unknown benchmark {benchmark!r}", file=identity.SUITE, field="benchmarks")
        return self.rows[benchmark]

    # -- sigmas ------------------------------------------------------------------------------------------------
    def slice_sigma(self, model_id: str, benchmark: str) -> Sigma:
        canonical = self._summary(self.benchmarks, (model_id, benchmark), "benchmark summary")
        return Sigma(binomial_se(canonical.mean, self._benchmark_rows(benchmark)), self.seed_pool(benchmark))

    def _binomial_of_mean(self, model_id: str, benchmarks: tuple[str, ...]) -> float:
        total = sum(self.slice_sigma(model_id, b).binomial ** 2 for b in benchmarks)
        return math.sqrt(total) / len(benchmarks)

    def category_sigma(self, model_id: str, category: str) -> Sigma:
        if category not in self.categories:
            raise UsageError(f"unknown category {category!r}", file=identity.SUITE, field="categories")
        return Sigma(self._binomial_of_mean(model_id, self.categories[category]), self.category_pool(category))

    def overall_sigma(self, model_id: str) -> Sigma:
        return Sigma(self._binomial_of_mean(model_id, tuple(self.rows)), self.overall_pool())

    # -- verdicts ----------------------------------------------------------------------------------------------
    def _verdict(
        self,
        subject: str,
        reproduced: float,
        canonical: CanonicalSummary,
        sigma: Sigma,
        reproduced_seeds: int,
        rows: int | None = None,
        expected_rows: int | None = None,
    ) -> Verdict:
        if reproduced_seeds < 1:
            raise ValueError(f"{subject}: reproduced_seeds must be >= 1, got {reproduced_seeds}")
        factor = math.sqrt(1.0 / reproduced_seeds + 1.0 / canonical.seeds)
        return Verdict(
            subject=subject,
            reproduced=float(reproduced),
            canonical=canonical.mean,
            delta=float(reproduced) - canonical.mean,
            band=self.z * factor * sigma.value,
            z=self.z,
            factor=factor,
            sigma=sigma,
            reproduced_seeds=reproduced_seeds,
            canonical_seeds=canonical.seeds,
            rows=rows,
            expected_rows=expected_rows,
        )

    def check_slice(
        self,
        model_id: str,
        benchmark: str,
        reproduced: float,
        *,
        seed: int | None = None,
        rows: int | None = None,
        reproduced_seeds: int = 1,
        subject: str | None = None,
    ) -> Verdict:
        """Judge one reproduced benchmark score of ``model_id`` (one seed, or the mean of ``reproduced_seeds``).

        Raises:
            UsageError: ``model_id`` or ``benchmark`` has no canonical summary in the release.
        """
        canonical = self._summary(self.benchmarks, (model_id, benchmark), "benchmark summary")
        if subject is None:
            subject = f"{model_id}-seed{seed}-{benchmark}" if seed is not None else f"{model_id}-{benchmark}"
        return self._verdict(
            subject,
            reproduced,
            canonical,
            self.slice_sigma(model_id, benchmark),
            reproduced_seeds,
            rows,
            self._benchmark_rows(benchmark),
        )

    def check_category(
        self, model_id: str, category: str, reproduced: float, *, seed: int | None = None, reproduced_seeds: int = 1
    ) -> Verdict:
        """Judge a reproduced category score (mean of the category's benchmarks) of ``model_id``."""
        canonical = self._summary(self.category_summaries, (model_id, category), "category summary")
        where = f"-seed{seed}" if seed is not None else ""
        return self._verdict(
            f"{model_id}{where}-category[{category}]",
            reproduced,
            canonical,
            self.category_sigma(model_id, category),
            reproduced_seeds,
        )

    def check_overall(
        self, model_id: str, reproduced: float, *, seed: int | None = None, reproduced_seeds: int = 1
    ) -> Verdict:
        """Judge a reproduced overall score (unweighted mean of every benchmark) of ``model_id``."""
        canonical = self._summary(self.overall_summaries, model_id, "overall summary")
        where = f"-seed{seed}" if seed is not None else ""
        return self._verdict(
            f"{model_id}{where}-overall", reproduced, canonical, self.overall_sigma(model_id), reproduced_seeds
        )


def _summaries(doc: Any, name: str, key_fields: tuple[str, ...]) -> dict[Any, CanonicalSummary]:
    where = f"scores.{name}"
    try:
        entries = doc["scores"][name]
    except (KeyError, TypeError):
        raise ReleaseFileError("required field is missing", file=identity.RESULTS, field=where) from None
    out: dict[Any, CanonicalSummary] = {}
    for i, entry in enumerate(entries):
        try:
            key = tuple(entry[f] for f in key_fields)
            summary = CanonicalSummary(float(entry["mean"]), float(entry["stddev"]), int(entry["seed_count"]))
        except (KeyError, TypeError, ValueError):
            raise ReleaseFileError(
                "entry lacks a key, mean, stddev or seed_count", file=identity.RESULTS, field=f"{where}[{i}]"
            ) from None
        out[key[0] if len(key) == 1 else key] = summary
    return out


def load_tolerance_rule(release: ReleaseRoot, *, z: float = DEFAULT_Z) -> ToleranceRule:
    """The tolerance rule of ``release`` at ``z``, from ``results.json`` summaries and the suite's rows.

    Raises:
        UsageError: ``z`` is not a positive finite number.
        ReleaseFileError: a summary entry lacks a field.
    """
    if not (math.isfinite(z) and z > 0):
        raise UsageError("z must be a positive number", field="--tolerance-z", found=z)
    suite = load_suite(release)
    doc = release.read_json(identity.RESULTS)
    return ToleranceRule(
        z=float(z),
        rows=MappingProxyType({b.key: b.rows for b in suite.benchmarks}),
        categories=MappingProxyType(dict(suite.categories)),
        benchmarks=MappingProxyType(_summaries(doc, "benchmark_summaries", ("model_id", "benchmark_id"))),
        category_summaries=MappingProxyType(_summaries(doc, "category_summaries", ("model_id", "category_name"))),
        overall_summaries=MappingProxyType(_summaries(doc, "overall_summaries", ("model_id",))),
    )


def canonical_seed_verdicts(release: ReleaseRoot, rule: ToleranceRule) -> tuple[list[Verdict], list[Verdict]]:
    """The rule applied to the release's own seed scores (spec §7.3 self-consistency): every canonical benchmark
    score and every canonical overall score against its 3-seed mean. Returns (slice verdicts, overall verdicts)."""
    doc = release.read_json(identity.RESULTS)
    try:
        benchmark_scores = doc["scores"]["benchmark_scores"]
        overall_scores = doc["scores"]["overall_scores"]
        slices = [
            rule.check_slice(e["model_id"], e["benchmark_id"], e["score"], seed=e["seed"], rows=e["evaluated_rows"])
            for e in benchmark_scores
        ]
        overalls = [rule.check_overall(e["model_id"], e["score"], seed=e["seed"]) for e in overall_scores]
    except (KeyError, TypeError):
        raise ReleaseFileError(
            "score entries lack model_id, benchmark_id, seed, score or evaluated_rows", file=identity.RESULTS
        ) from None
    return slices, overalls
