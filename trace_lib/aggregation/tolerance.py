"""The single-draw tolerance band of the TRACE validation table (``trace_lib.validation.tolerance``).

The evaluation campaign's verdicts live in :mod:`trace_lib.aggregation.verdict` (row-level variance, three
outcomes). The validation has one canonical draw per model and no per-row canonical credits, so its band stays
``|x - mu| <= f * z_a * SE_bin`` (``f = sqrt(1/1 + 1/1)``, ``SE_bin = 100 sqrt(p(1-p)/rows)`` at the canonical
``p``: the Jensen bound of a mean of per-row credits, known without estimation error), with ``z_a`` the normal
critical value of the budget's per-test level (:mod:`trace_lib.aggregation.budget`) or an explicit
``--tolerance-z``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from trace_lib.aggregation.budget import Criterion, t_two_sided_tail

#: The pre-budget z (spec §7.3), now only the validation's explicit override default.
DEFAULT_Z = 3.0


@dataclass(frozen=True)
class Sigma:
    """The standard deviation a band is built from: the binomial bound (and a seed pool, 0 for the validation)."""

    binomial: float
    seed_pool: float = 0.0
    pool_dof: float = 0

    @property
    def value(self) -> float:
        return max(self.binomial, self.seed_pool)

    @property
    def source(self) -> str:
        return "binomial" if self.binomial >= self.seed_pool else "seed pool"


@dataclass(frozen=True)
class Verdict:
    """A reproduced score judged against its canonical value: ``ok`` iff ``|delta| <= band`` (and rows match)."""

    subject: str
    reproduced: float  # percent
    canonical: float  # percent
    delta: float  # reproduced - canonical, percentage points
    band: float  # allowed |delta|, percentage points
    z: float
    factor: float  # sqrt(1/k + 1/n)
    sigma: Sigma
    reproduced_seeds: int = 1
    canonical_seeds: int = 1
    rows: int | None = None
    expected_rows: int | None = None
    criterion: Criterion | None = None
    engine_note: str = ""

    @property
    def rows_ok(self) -> bool:
        return self.rows is None or self.expected_rows is None or self.rows == self.expected_rows

    @property
    def ok(self) -> bool:
        return math.isfinite(self.reproduced) and abs(self.delta) <= self.band and self.rows_ok

    @property
    def p_value(self) -> float:
        """Two-sided normal p-value of ``delta`` against ``factor * sigma``."""
        if not math.isfinite(self.delta):
            return 0.0
        scale = self.factor * self.sigma.value
        return t_two_sided_tail(abs(self.delta) / scale, math.inf) if scale > 0 else 0.0

    def explain(self) -> str:
        """One line: reproduced, canonical, delta, allowed band, the rule and the outcome."""
        text = (f"{self.subject}: reproduced {self.reproduced:.3f} vs canonical {self.canonical:.3f}: delta "
                f"{self.delta:+.3f} pp, allowed +/-{self.band:.3f} pp (z={self.z:.3f} x sqrt(1/"
                f"{self.reproduced_seeds}+1/{self.canonical_seeds}) x binomial {self.sigma.binomial:.3f})")
        if self.criterion is not None and self.criterion.method == "sidak":
            text += (f" [alpha={self.criterion.alpha:g} over {self.criterion.family_size} tests, per-test "
                     f"{self.criterion.per_test_alpha:.2g}]")
        if self.rows is not None:
            text += f", rows {self.rows}" + ("" if self.rows_ok else f" (expected {self.expected_rows})")
        note = f" [{self.engine_note}]" if self.engine_note else ""
        if self.ok:
            return text + ": within tolerance" + note
        if not math.isfinite(self.reproduced):
            return text + ": FAILED (reproduced score is not finite)" + note
        if not self.rows_ok:
            return text + ": FAILED (row count differs from the suite)" + note
        return text + f": FAILED (p = {self.p_value:.2g})" + note

    def properties(self) -> list[tuple[str, str]]:
        """JUnit receipt properties of this verdict."""
        props = [("reproduced", repr(self.reproduced)), ("canonical_mean", repr(self.canonical)),
                 ("delta", repr(self.delta)), ("band", repr(self.band)), ("z", repr(self.z)),
                 ("sigma", repr(self.sigma.value)), ("sigma_source", self.sigma.source),
                 ("verdict", "ok" if self.ok else "failed"), ("p_value", repr(self.p_value))]
        if self.criterion is not None:
            props += self.criterion.properties()
        if self.rows is not None:
            props.append(("rows", str(self.rows)))
        if self.engine_note:
            props.append(("engine_note", self.engine_note))
        return props

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"subject": self.subject, "reproduced": self.reproduced, "canonical": self.canonical,
                "delta": self.delta, "band": self.band, "z": self.z, "factor": self.factor,
                "sigma": self.sigma.value, "sigma_binomial": self.sigma.binomial, "rows": self.rows,
                "expected_rows": self.expected_rows, "ok": self.ok, "p_value": self.p_value,
                "alpha": self.criterion.alpha if self.criterion else None,
                "family_size": self.criterion.family_size if self.criterion else None,
                "per_test_alpha": self.criterion.per_test_alpha if self.criterion else None,
                "method": self.criterion.method if self.criterion else None}


def binomial_se(mean_percent: float, rows: int) -> float:
    """``100*sqrt(p(1-p)/rows)`` at ``p = mean_percent/100`` (clamped into [0, 1])."""
    p = min(1.0, max(0.0, mean_percent / 100.0))
    return 100.0 * math.sqrt(p * (1.0 - p) / rows)


def budget_verdict(criterion: Criterion, *, subject: str, reproduced: float, canonical: float, factor: float,
                   sigma: Sigma, reproduced_seeds: int = 1, canonical_seeds: int = 1, rows: int | None = None,
                   expected_rows: int | None = None) -> Verdict:
    """The verdict of ``reproduced`` against ``canonical`` with band ``factor * z * sigma`` (``z`` the criterion's
    normal critical value, or its fixed z)."""
    z = criterion.binomial_z()
    return Verdict(subject, reproduced, canonical, reproduced - canonical, factor * z * sigma.value, z, factor,
                   sigma, reproduced_seeds, canonical_seeds, rows, expected_rows, criterion)
