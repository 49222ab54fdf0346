"""The options shared by the ``trace-repro`` CLI and the pytest plugin: one table, two surfaces.

Each :class:`Option` is declared once (flag, environment variable, default, help); ``add_to_argparse`` and the
pytest plugin add the same spellings. Precedence: flag, then environment, then default.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass
from typing import Any, Callable

from trace_lib.errors import UsageError


@dataclass(frozen=True)
class Option:
    flag: str  # e.g. "--trace-root"
    help: str
    env: str | None = None  # environment variable read when the flag is absent
    default: Any = None
    type: Callable[[str], Any] = str
    is_switch: bool = False  # a store_true flag

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def resolve(self, given: Any, env: dict[str, str] | None = None) -> Any:
        """The effective value: the flag's, else the environment's (converted), else the default."""
        if given not in (None, False):
            return given
        environ = os.environ if env is None else env
        if self.env and environ.get(self.env):
            raw = environ[self.env]
            if self.is_switch:
                return raw.lower() in ("1", "true", "yes", "on")
            try:
                return self.type(raw)
            except (TypeError, ValueError):
                raise UsageError(f"invalid value {raw!r}", field=self.env) from None
        return self.default


def positive_number(text: str) -> float:
    """A finite number > 0 (argparse turns the ValueError into a one-line usage error)."""
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(text)
    return value


def non_negative_number(text: str) -> float:
    """A finite number >= 0 (0 means "no limit" where an option says so)."""
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(text)
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (GPU counts, worker counts)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


TRACE_ROOT = Option("--trace-root", "TRACE checkout (or data-only copy) holding rlvr/", env="TRACE_ROOT")
UNPINNED = Option(
    "--unpinned",
    "validate any release of the same schemas by structure and recomputation, not the paper release's identity",
    env="TRACE_UNPINNED",
    is_switch=True,
    default=False,
)
def open_unit_number(text: str) -> float:
    """A number strictly between 0 and 1 (a probability budget)."""
    value = float(text)
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise ValueError(text)
    return value


ALPHA = Option(
    "--alpha",
    "family-wise false-alarm budget of the verdicts over the planned campaign (default 0.05: a faithful re-run "
    "reports anything 'differs' with probability <= 0.05; see docs/tolerance.md)",
    env="TRACE_TOLERANCE_ALPHA",
    default=0.05,
    type=open_unit_number,
)
MARGIN = Option(
    "--margin",
    "equivalence margin in points: a number is 'reproduced' when its 90% interval lies inside +-MARGIN of the "
    "paper's (default 2.0; see docs/tolerance.md)",
    env="TRACE_MARGIN",
    default=2.0,
    type=positive_number,
)
INCONCLUSIVE = Option(
    "--inconclusive",
    "how an inconclusive verdict is reported in pytest: fail (default: never a pass), skip or xfail",
    env="TRACE_INCONCLUSIVE",
    default="fail",
)
TOLERANCE_Z = Option(
    "--tolerance-z",
    "TRACE validation only: explicit critical value of the validation band, overriding --alpha (evaluation "
    "verdicts take --alpha and --margin)",
    env="TRACE_TOLERANCE_Z",
    default=None,
    type=positive_number,
)
CAMPAIGN_ROOT = Option(
    "--campaign-root", "directory of a reproduction campaign (responses, scores, receipts)", env="TRACE_CAMPAIGN_ROOT"
)
JUDGE_URL = Option("--judge-url", "OpenAI-compatible base URL of the Qwen3-32B judge", env="TRACE_JUDGE_URL")
ARCHIVE_ROOT = Option(
    "--archive-root", "a fetched copy of the paper's evaluation archive ('trace-repro fetch-runs --dest DIR')",
    env="TRACE_ARCHIVE_ROOT",
)

#: Options every surface shares; subcommand-specific flags live with their subcommand.
COMMON: tuple[Option, ...] = (TRACE_ROOT, UNPINNED, ALPHA, MARGIN, TOLERANCE_Z, CAMPAIGN_ROOT, JUDGE_URL)

# -- running slices (``pytest tests_reproduction`` and the tiny-model lanes); plan flags live in campaign.plan --
BACKEND = Option(
    "--backend", "generation engine for slices: vllm, openai (a served model, --base-url) or hf", env="TRACE_BACKEND",
    default="vllm",
)
BASE_URL = Option(
    "--base-url", "openai backend: http://HOST:PORT/v1 of the served model under test (comma-separated pool)",
    env="TRACE_BASE_URL",
)
DEVICE = Option("--device", "hf backend: torch device", env="TRACE_DEVICE", default="cpu")
PRINT_CONFIG = Option(
    "--print-config", "print the resolved plan (like 'trace-repro plan') and exit without running anything",
    is_switch=True, default=False,
)

MODEL_VERIFY = Option(
    "--model-verify", "check model directories against their revision markers before loading: deep (re-hash "
    "files), shallow (marker only) or none", env="TRACE_MODEL_VERIFY", default="deep",
)

#: A reproduction item (slice, overall, validation) loads an engine and generates thousands of rows: far beyond
#: pytest.ini's 300 s per-test ``timeout``, which stays for every other lane.
SLICE_TIMEOUT = Option(
    "--slice-timeout", "per-test time limit in seconds for tests_reproduction items (slices, overall, validation); "
    "0 = none, the default (pytest.ini's 300 s applies to the other lanes only)", env="TRACE_SLICE_TIMEOUT",
    default=0.0, type=non_negative_number,
)

SCHEDULE = Option(
    "--schedule", "generation order: stream (every pending slice of a model through one engine at once, "
    "generated ahead of the tests) or per-slice (one slice after another)", env="TRACE_SCHEDULE", default="stream",
)
SCHEDULES = ("stream", "per-slice")


def check_schedule(value: str) -> str:
    """``value`` when it names a schedule.

    Raises:
        UsageError: an unknown schedule.
    """
    if value not in SCHEDULES:
        raise UsageError("unknown schedule", field="--schedule", found=value, expected=" or ".join(SCHEDULES))
    return value

RAY_ADDRESS = Option(
    "--ray-address", "run the engines as Ray actors on this cluster (ADDR or 'auto'): one per GPU group on every "
    "node, this process writing the stores", env="TRACE_RAY_ADDRESS",
)

#: Options of the slice-running surfaces, beside COMMON and the plan flags.
REPRODUCTION: tuple[Option, ...] = (BACKEND, BASE_URL, DEVICE, MODEL_VERIFY, PRINT_CONFIG, ARCHIVE_ROOT, SLICE_TIMEOUT,
                                    SCHEDULE, RAY_ADDRESS, INCONCLUSIVE)


def add_to_argparse(parser: argparse.ArgumentParser, *options: Option) -> None:
    """Add ``options`` to an argparse parser with their shared spelling and help."""
    for opt in options:
        env_note = f" (env {opt.env})" if opt.env else ""
        if opt.is_switch:
            parser.add_argument(opt.flag, action="store_true", default=None, help=opt.help + env_note)
        else:
            parser.add_argument(opt.flag, type=opt.type, default=None, help=opt.help + env_note)


def reject_tolerance_z(namespace: Any) -> None:
    """Evaluation verdicts have no fixed z: ``--tolerance-z`` there is a one-line usage error.

    Raises:
        UsageError: ``--tolerance-z`` (or ``TRACE_TOLERANCE_Z``) is set.
    """
    if resolve(namespace, TOLERANCE_Z) is not None:
        raise UsageError("--tolerance-z no longer applies to evaluation verdicts", field="--tolerance-z",
                         hint="the family-wise budget is --alpha and the equivalence margin --margin "
                              "(docs/tolerance.md)")


def resolve(namespace: Any, option: Option) -> Any:
    """The effective value of ``option`` from a parsed namespace (or pytest config.option)."""
    return option.resolve(getattr(namespace, option.dest, None))
