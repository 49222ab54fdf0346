"""The options shared by the ``trace-repro`` CLI and the pytest plugin: one table, two surfaces.

Each :class:`Option` is declared once (flag, environment variable, default, help); ``add_to_argparse`` and the
pytest plugin add the same spellings. Precedence: flag, then environment, then default. Every other ``TRACE_*``
environment variable the suite reads is an :class:`EnvVar` here, with its default; :data:`ENVIRONMENT` lists them all.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from trace_lib.errors import UsageError


@dataclass(frozen=True)
class Option:
    flag: str  # e.g. "--trace-root"
    help: str
    env: str | None = None  # environment variable read when the flag is absent
    default: Any = None
    type: Callable[[str], Any] = str
    is_switch: bool = False  # a store_true flag
    is_directory: bool = False  # names a directory: a file, FIFO ... there is refused wherever it is resolved

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def resolve(self, given: Any, env: dict[str, str] | None = None) -> Any:
        """The effective value: the flag's, else the environment's (converted), else the default.

        Raises:
            UsageError: the environment's value does not convert, or a directory option names something that
                is not a directory (naming the flag or the variable the value came from).
        """
        if given not in (None, False):
            value, source = given, self.flag
        else:
            environ = os.environ if env is None else env
            if not (self.env and environ.get(self.env)):
                return self.default
            raw, source = environ[self.env], self.env
            if self.is_switch:
                return raw.lower() in ("1", "true", "yes", "on")
            try:
                value = self.type(raw)
            except BadValue as exc:
                raise UsageError(str(exc), field=self.env) from None
            except (TypeError, ValueError):
                raise UsageError(f"invalid value {raw!r}", field=self.env) from None
        if self.is_directory:
            check_directory(value, field=source)
        return value


class BadValue(argparse.ArgumentTypeError, ValueError):
    """A flag value out of its range: argparse prints ``argument --FLAG: <message>`` (one line, exit 2); an
    environment value becomes a :class:`UsageError` naming the variable."""


def _number(text: str, kind: Callable[[str], Any], what: str, ok: Callable[[Any], bool]) -> Any:
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise BadValue(f"must be {what} (found {text!r})") from None
    if kind is float and not math.isfinite(value) or not ok(value):
        raise BadValue(f"must be {what} (found {text!r})")
    return value


# -- the range types of every numeric flag (argparse ``type=``; one place, so every flag says its range the same way)
def positive_number(text: str) -> float:
    """A finite number > 0 (margins, critical values)."""
    return _number(text, float, "a finite number > 0", lambda v: v > 0)


#: The longest time any option may name, in seconds (about 115 days): far beyond any campaign, and far inside what
#: the clocks, sockets and waits under a timeout can hold (``1e10`` overflows a ``time_t`` deadline).
MAX_SECONDS = 10_000_000


def positive_seconds(text: str) -> float:
    """Seconds > 0 and at most :data:`MAX_SECONDS` (timeouts, intervals)."""
    return _number(text, float, f"a number of seconds > 0 and at most {MAX_SECONDS:,}",
                   lambda v: 0 < v <= MAX_SECONDS)


def non_negative_seconds(text: str) -> float:
    """Seconds >= 0 and at most :data:`MAX_SECONDS` (0 means "none" or "at once" where an option says so)."""
    return _number(text, float, f"a number of seconds >= 0 and at most {MAX_SECONDS:,}",
                   lambda v: 0 <= v <= MAX_SECONDS)


def positive_int(text: str) -> int:
    """An integer >= 1 (GPU counts, worker counts, batch sizes, concurrency)."""
    return _number(text, int, "an integer >= 1", lambda v: v >= 1)


def url_problem(text: str, *, schemes: Sequence[str] = ("http", "https"),
                what: str = "an http(s) URL with a host") -> str | None:
    """Why ``text`` is not a URL of one of ``schemes`` that a client can open, or None: it must parse, carry a port
    in range if any, and name a host (a ``file`` URL needs none). ``what`` describes the URL wanted in the reason.
    A malformed one (``http://[::1``) is this reason, not a client's ``ValueError`` traceback."""
    from urllib.parse import urlsplit

    try:
        url = urlsplit(text)
        url.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        return f"not a URL: {exc}"
    scheme = url.scheme.lower()
    if scheme not in schemes or (scheme != "file" and not url.hostname):
        return f"must be {what}"
    return None


def http_urls(text: str) -> str:
    """One or more comma-separated ``http(s)://HOST[:PORT]/...`` URLs (a judge pool, a served model), each one a
    URL the client can open (:func:`url_problem`)."""
    parts = [part.strip() for part in str(text).split(",") if part.strip()]
    if not parts:
        raise BadValue(f"must be an http(s) URL (found {text!r})")
    for part in parts:
        problem = url_problem(part)
        if problem is not None:
            raise BadValue(f"{problem} (found {part!r})")
    return text


#: The most GPUs an estimate is made for (``--gpus``), and the longest mean output it scales to (``--output-tokens``).
MAX_ESTIMATE_GPUS = 4096
MAX_OUTPUT_TOKENS = 1_000_000


def gpu_count(text: str) -> int:
    """``--gpus`` of an estimate: an integer from 1 to :data:`MAX_ESTIMATE_GPUS`."""
    return _number(text, int, f"an integer from 1 to {MAX_ESTIMATE_GPUS}", lambda v: 1 <= v <= MAX_ESTIMATE_GPUS)


def output_tokens(text: str) -> int:
    """``--output-tokens``: an integer from 1 to :data:`MAX_OUTPUT_TOKENS`."""
    return _number(text, int, f"an integer from 1 to {MAX_OUTPUT_TOKENS:,}", lambda v: 1 <= v <= MAX_OUTPUT_TOKENS)


def engines_per_group(text: str) -> int | str:
    """``--engines-per-group``: an integer >= 1 or ``auto``."""
    return "auto" if text == "auto" else _number(text, int, "an integer >= 1 or auto", lambda v: v >= 1)


def non_negative_int(text: str) -> int:
    """An integer >= 0 (decoding seeds)."""
    return _number(text, int, "an integer >= 0", lambda v: v >= 0)


def port_number(text: str) -> int:
    """A TCP port, 1 to 65535."""
    return _number(text, int, "a port number from 1 to 65535", lambda v: 1 <= v <= 65535)


def unit_fraction(text: str) -> float:
    """A number in (0, 1] (a share of GPU memory)."""
    return _number(text, float, "a number > 0 and <= 1", lambda v: 0 < v <= 1)


TRACE_ROOT = Option("--trace-root", "TRACE checkout (or data-only copy) holding rlvr/", env="TRACE_ROOT",
                    is_directory=True)
UNPINNED = Option(
    "--unpinned",
    "validate any release of the same schemas by structure and recomputation, not the paper release's identity",
    env="TRACE_UNPINNED",
    is_switch=True,
    default=False,
)
def open_unit_number(text: str) -> float:
    """A number strictly between 0 and 1 (a probability budget)."""
    return _number(text, float, "a number strictly between 0 and 1", lambda v: 0 < v < 1)


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
    "--campaign-root", "directory of a reproduction campaign (responses, scores, receipts)", env="TRACE_CAMPAIGN_ROOT",
    is_directory=True,
)
JUDGE_URL = Option("--judge-url", "OpenAI-compatible base URL of the Qwen3-32B judge", env="TRACE_JUDGE_URL",
                   type=http_urls)
ARCHIVE_ROOT = Option(
    "--archive-root", "a fetched copy of the paper's evaluation archive ('trace-repro fetch-runs --dest DIR')",
    env="TRACE_ARCHIVE_ROOT", is_directory=True,
)
ARCHIVE_RUN_ID = Option(
    "--archive-run-id", "the archive run to read when the archive root holds several runs of one slice",
    env="TRACE_ARCHIVE_RUN_ID",
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
    env="TRACE_BASE_URL", type=http_urls,
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
    default=0.0, type=non_negative_seconds,
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
    return check_choice(value, SCHEDULES, field="--schedule", what="schedule")

MODEL_VERIFY_MODES = ("deep", "shallow", "none")


def check_choice(value: str, choices: tuple[str, ...] | list[str], *, field: str, what: str) -> str:
    """``value`` when it is one of ``choices``.

    Raises:
        UsageError: it is not (a close match suggested only when one is close).
    """
    from trace_lib.errors import did_you_mean

    if value not in choices:
        raise UsageError(f"unknown {what} {value!r}", field=field, hint=did_you_mean(value, choices))
    return value


def check_directory(value: str | os.PathLike[str] | None, *, field: str) -> None:
    """``value`` is absent (None), or a path that is a directory or does not exist yet.

    Raises:
        UsageError: it names something that is not a directory (a file, under a file, a FIFO ...) or that cannot
            be looked up (a symbolic-link loop, a name too long ...).
    """
    if value is None or value == "":
        return
    from trace_lib.outputs import kind

    path = os.fspath(value)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):  # a link to nothing: not a directory to create, nor one to write into
            raise UsageError("is a dangling symbolic link, not a directory", field=field, found=path) from None
        return
    except NotADirectoryError:
        raise UsageError("runs under a file, not a directory", field=field, found=path) from None
    except OSError as exc:  # a symbolic-link loop, a name too long, no permission on a parent ...
        from trace_lib.errors import os_error_line

        raise UsageError(f"cannot be used as a directory: {os_error_line(exc)}", field=field) from None
    import stat as _stat

    if not _stat.S_ISDIR(st.st_mode):
        raise UsageError(f"is {kind(st.st_mode)}, not a directory", field=field, found=path)


def validate(namespace: Any, *, backends: Sequence[str]) -> None:
    """Every shared option of ``namespace`` (flag or environment) converted and checked once, up front: the
    values, the choices (--backend, --schedule, --model-verify) and the directories (--campaign-root,
    --archive-root, --trace-root must not name a file: :attr:`Option.is_directory`, checked as they resolve).

    Raises:
        UsageError: the first bad value (one line naming the flag or environment variable).
    """
    values = {opt.dest: resolve(namespace, opt) for opt in (*COMMON, *REPRODUCTION)}
    check_choice(values[BACKEND.dest], list(backends), field=BACKEND.flag, what="backend")
    check_schedule(values[SCHEDULE.dest])
    check_choice(values[MODEL_VERIFY.dest], MODEL_VERIFY_MODES, field=MODEL_VERIFY.flag, what="--model-verify mode")


RAY_ADDRESS = Option(
    "--ray-address", "run the engines as Ray actors on this cluster (ADDR or 'auto'): one per GPU group on every "
    "node, this process writing the stores", env="TRACE_RAY_ADDRESS",
)

REQUEST_TIMEOUT = Option(
    "--request-timeout", "openai backend: seconds to wait for one answer before retrying it (default 300)",
    env="TRACE_REQUEST_TIMEOUT", type=positive_seconds,
)

#: Options of the slice-running surfaces, beside COMMON and the plan flags.
REPRODUCTION: tuple[Option, ...] = (BACKEND, BASE_URL, DEVICE, MODEL_VERIFY, PRINT_CONFIG, ARCHIVE_ROOT, ARCHIVE_RUN_ID,
                                    SLICE_TIMEOUT, SCHEDULE, RAY_ADDRESS, REQUEST_TIMEOUT, INCONCLUSIVE)


def add_option(add: Callable[..., Any], opt: Option) -> None:
    """Add ``opt`` through ``add`` (argparse's ``add_argument`` or pytest's ``addoption``) with its shared spelling
    and help: the help names its environment variable, and a ``%`` in it is escaped (both %-format help texts)."""
    text = (opt.help + (f" (env {opt.env})" if opt.env else "")).replace("%", "%%")
    if opt.is_switch:
        add(opt.flag, action="store_true", default=None, help=text)
    else:
        add(opt.flag, type=opt.type, default=None, help=text)


def add_to_argparse(parser: argparse.ArgumentParser, *options: Option) -> None:
    """Add ``options`` to an argparse parser (:func:`add_option`)."""
    for opt in options:
        add_option(parser.add_argument, opt)


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


def given(namespace: Any, option: Option) -> Any:
    """The flag's own value in a parsed namespace (None when absent), for a resolver that reads ``option.env``
    itself and names in its errors the source it used (:func:`trace_lib.release.locate.locate_release`)."""
    return getattr(namespace, option.dest, None)


# -- environment variables without a shared Option ---------------------------------------------------------------
#: Where models, data, campaigns and judge logs go when no flag or environment variable says otherwise.
DEFAULT_WORK_DIR = Path("trace-repro-work")


@dataclass(frozen=True)
class EnvVar:
    """A ``TRACE_*`` environment variable read beside a surface-specific flag (or none): name, meaning, default."""

    name: str
    help: str
    default: Any = None

    def read(self, env: dict[str, str] | None = None) -> Any:
        """The variable's value when set and non-empty, else its default."""
        value = (os.environ if env is None else env).get(self.name)
        return value if value else self.default

    def enabled(self, env: dict[str, str] | None = None) -> bool:
        """True when the variable is ``1`` (a debugging switch)."""
        return (os.environ if env is None else env).get(self.name) == "1"


MODEL_ROOT_ENV = EnvVar("TRACE_MODEL_ROOT", "directory of the release models (--model-root)",
                        default=DEFAULT_WORK_DIR / "models")
DATA_ROOT_ENV = EnvVar("TRACE_DATA_ROOT", "prepared benchmark data (--data-root)", default=DEFAULT_WORK_DIR / "data")
RUN_TAG_ENV = EnvVar("TRACE_RUN_TAG", "campaign name (--run-tag; default <suite>_temp<T>_seed<seeds>)")
GPU_GROUPS_ENV = EnvVar("TRACE_GPU_GROUPS", "one engine per GPU group, e.g. '0,1;2,3' (--gpu-groups)", default="0")
PHASE_ENV = EnvVar("TRACE_PHASE", "pytest reproduction phase: generate, score or all (--phase)", default="all")
SESSION_PHASE_ENV = EnvVar("TRACE_REPRO_SESSION_PHASE",
                           "set by the pytest controller for its session and xdist workers (never by a user)")
JUDGE_LOG_DIR_ENV = EnvVar("TRACE_JUDGE_LOG_DIR", "where the judge pool writes its server logs (--judge-log-dir)",
                           default=DEFAULT_WORK_DIR / "judge")
JUDGE_CONCURRENCY_ENV = EnvVar("TRACE_JUDGE_CONCURRENCY", "judge sequences (prompts) in flight per judge endpoint, "
                               "shared by every slice and client of the process (default 192: upstream's "
                               "--max-num-seqs 128 and half again as headroom)", default="192")
VALIDATION_DIR_ENV = EnvVar("TRACE_VALIDATION_DIR", "TRACE-validation work directory (--work-dir; default "
                            "<campaign-root>/validation or trace-repro-work/validation)")
JUDGE_TOKENIZER_ENV = EnvVar("TRACE_JUDGE_TOKENIZER", "local Qwen3-32B checkpoint whose chat template renders "
                             "validation judge prompts (--judge-tokenizer; default <model-root>/qwen3-32b-judge)")
VALIDATION_BACKEND_ENV = EnvVar("TRACE_VALIDATION_BACKEND", "engine of the validation reproduction test",
                                default="vllm")
VALIDATION_BACKEND_OPTIONS_ENV = EnvVar("TRACE_VALIDATION_BACKEND_OPTIONS",
                                        "engine options of the validation reproduction test (a JSON object)",
                                        default="{}")
VALIDATION_BASE_URL_ENV = EnvVar("TRACE_VALIDATION_BASE_URL",
                                 "openai backend of the validation reproduction test: the server's /v1 base URL")
REFERENCE_PYTHON_ENV = EnvVar("TRACE_REFERENCE_PYTHON", "paper_env lane: an interpreter with the current engine")
REFERENCE_PYTHONPATH_ENV = EnvVar("TRACE_REFERENCE_PYTHONPATH", "paper_env lane: that interpreter's extra path")
DEBUG_ENV = EnvVar("TRACE_REPRO_DEBUG", "1: show tracebacks instead of one-line errors")
JUDGE_PREFIX_ORDER_ENV = EnvVar("TRACE_JUDGE_PREFIX_ORDER", "0: judge prompts go out in the protocol's order "
                                "(default 1: sorted, for the prefix cache)", default="1")
CALIBRATION_ENV = EnvVar("TRACE_CALIBRATION", "the rates file plan --estimate reads (--calibration)")
#: For benchmarks only: ``dummy`` loads random weights (a config-only model directory is enough). Responses then
#: say so in their store header (``engine.load_format``), cannot be resumed on real weights, and get no verdict.
VLLM_LOAD_FORMAT_ENV = EnvVar("TRACE_VLLM_LOAD_FORMAT", "benchmarks only: the vllm backend's vLLM load_format "
                              "('dummy': random weights; responses are marked and get no verdict)", default="auto")
#: Load formats whose weights are not the checkpoint's (random): their responses measure speed, never accuracy.
RANDOM_WEIGHT_LOAD_FORMATS = ("dummy",)

#: Every ``TRACE_*`` environment variable, by name: each Option with an ``env`` and each EnvVar of this module.
ENVIRONMENT: dict[str, Option | EnvVar] = {
    **{v.env: v for v in list(globals().values()) if isinstance(v, Option) and v.env},
    **{v.name: v for v in list(globals().values()) if isinstance(v, EnvVar)},
}


def parse_gpu_groups(text: str) -> tuple[tuple[int, ...], ...]:
    """``"0,1;2,3"`` -> ((0, 1), (2, 3)); without ``;``, whitespace separates single-GPU groups (``"0 1"``).

    Raises:
        UsageError: empty text, a non-integer id, or a GPU in two groups.
    """
    text = text.strip()
    chunks = text.split(";") if ";" in text else text.split()
    groups = []
    for chunk in chunks:
        ids = [c.strip() for c in chunk.split(",") if c.strip()]
        if not ids or not all(re.fullmatch(r"[0-9]+", c) for c in ids):
            raise UsageError("invalid GPU group", field="--gpu-groups", found=text,
                             expected="e.g. '0' or '0 1 2 3' or '0,1;2,3'")
        groups.append(tuple(int(c) for c in ids))
    flat = [g for group in groups for g in group]
    if not groups:
        raise UsageError("no GPU group", field="--gpu-groups", found=text)
    if len(flat) != len(set(flat)):
        raise UsageError("a GPU appears in two groups", field="--gpu-groups", found=text)
    return tuple(groups)


def cuda_visible_devices(group: Sequence[int]) -> str:
    """One GPU group of :func:`parse_gpu_groups` as a ``CUDA_VISIBLE_DEVICES`` value: ``(0, 1)`` -> ``"0,1"``."""
    return ",".join(str(gpu) for gpu in group)


def work_root(flag: str | os.PathLike[str] | None, env: str, leaf: str, *, directory: str | None = None) -> Path:
    """Flag, then environment variable ``env``, then ``trace-repro-work/<leaf>``.

    Raises:
        UsageError: ``directory`` (the flag's name) is given and the value names something that is not a
            directory (naming the flag, or ``env`` when the value came from it).
    """
    value = flag or os.environ.get(env)
    if directory is not None:
        check_directory(value, field=directory if flag else env)
    return Path(value) if value else DEFAULT_WORK_DIR / leaf
