"""How long a planned campaign takes, per phase, before it starts: ``trace-repro plan --estimate [--gpus N]``.

The estimate is arithmetic on three inputs:

- the work: the plan's rows per slice (the suite's row counts), and the judge requests each protocol implies per
  row (:data:`JUDGE_REQUESTS_PER_ROW`: measured on synthetic responses by ``benchmarks/judge_throughput.py`` for
  the routes that ask the judge on every row; a stated fallback rate for the routes that ask it only when rule
  extraction fails);
- the rates of one GPU: generation rows/s by model shape with one engine and with two engines on the GPU, their
  start-up seconds, judge requests/s, and the CPU's scoring rows/s (:class:`Rates`), read from a calibration file
  the GPU benchmarks write
  (``--calibration FILE``; default ``$TRACE_CALIBRATION`` or ``trace-repro-work/calibration.json``), else the
  stated H200 defaults (:data:`DEFAULT_RATES`, the figures of docs/performance.md);
- the GPUs: generation and then the judge use all of them (upstream's phased order), so each phase's rate is the
  one-GPU rate times ``--gpus``.

``generation`` is the GPU's that finishes last: the slices dealt over ``gpus`` x engines-per-GPU workers and placed
on the GPUs as ``generate`` does (:func:`~trace_lib.campaign.plan.deal_slices`,
:func:`~trace_lib.campaign.plan.side_by_side`), at the engines per GPU that ``generate --engines-per-group auto``
would run (:func:`engines_for`: one engine for a GPU's share of the campaign's rows below
:data:`~trace_lib.campaign.engines.MIN_ROWS_FOR_SECOND_ENGINE`, else two) unless given. Each worker runs its models
one after another, a start and then the model's rows each; the starts on a GPU take turns, as ``generate``'s do;
two engines generating together run at half the GPU's two-engine rate each, an engine generating alone at the
one-engine rate (:func:`_gpu_generation`). A start is the one-engine start (the second engine's first: what the
two-engine start adds) plus what vLLM's caches cost it (``--engine-caches``,
:mod:`~trace_lib.generation.backends.vllm_caches`): a GPU's first finds the state given (default ``new-model``: the
machine has run vLLM, the checkpoints are new to it), a model the GPU started before is warm, any other
``new-model`` (or ``warm``, when that was given);
``judge = start + requests / (rate x gpus)``; ``scoring = rows / scoring rate`` (one CPU core, the protocols' own
work). The total is their sum. :func:`compare_progress` sets the estimate against a campaign's progress
(``trace-repro status``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from trace_lib import options
from trace_lib.errors import InputError
from trace_lib.generation.backends.vllm_caches import ENGINE_CACHES

CALIBRATION_ENV = options.CALIBRATION_ENV.name
CALIBRATION_LEAF = "calibration.json"
#: Seconds of estimated work done before the elapsed time is set against it (start-up dominates before).
PACE_AFTER_S = 600.0

#: Judge requests per row by protocol judge use; ``always`` routes measured per benchmark below.
FALLBACK_REQUESTS_PER_ROW = 0.2
JUDGE_REQUESTS_PER_ROW: dict[str, float] = {
    # every row, measured on benchmarks/score_speed.py's synthetic responses (60 rows, seed 42)
    "charxivreason": 1.0, "erqa": 1.0, "spatialvizbench_cot": 1.0, "logicvista": 1.0,
    "mathverse": 1.75,  # answer extraction, then the judgement of the extracted answer
    "mme_reasoning": 1.38,  # per question type: one or two judge prompts
}


@dataclass(frozen=True)
class Rates:
    """One GPU's (and one core's) measured rates; ``source`` says where they came from."""

    generation_rows_per_s: Mapping[str, float]  # by model shape ("3b", "7b"), two engines per GPU
    judge_requests_per_s: float
    scoring_rows_per_s: float
    engine_start_s: float  # two engines on a GPU, until the second is up
    judge_start_s: float
    source: str = "defaults"
    generation_output_tokens: Mapping[str, int] = field(default_factory=dict)  # output tokens/row they were at
    one_engine_rows_per_s: Mapping[str, float] = field(default_factory=dict)  # by shape; absent: the two-engine rate
    one_engine_start_s: float | None = None  # None: engine_start_s
    #: seconds a start adds to a warm one, by the caches it finds (vllm_caches.ENGINE_CACHES)
    start_extra_s: Mapping[str, float] = field(default_factory=lambda: {"warm": 0.0})
    #: how much longer a later model's start takes while another engine on its GPU generates
    start_beside_factor: float = 1.0

    def generation(self, shape: str, engines: int) -> tuple[float, float]:
        """``(rows/s, start-up s)`` of one GPU generating ``shape`` with ``engines`` (1 or 2) engines.

        Raises:
            ValueError: no rate for ``shape``.
        """
        if shape not in self.generation_rows_per_s:
            raise ValueError(f"no generation rate for shape {shape!r}")
        if engines >= 2:
            return self.generation_rows_per_s[shape], self.engine_start_s
        return (self.one_engine_rows_per_s.get(shape, self.generation_rows_per_s[shape]),
                self.engine_start_s if self.one_engine_start_s is None else self.one_engine_start_s)

    def start_extra(self, caches: str) -> float:
        """What a start that finds ``caches`` adds to a warm one (0 where it was not measured)."""
        return self.start_extra_s.get(caches, 0.0)


#: One H200 (docs/performance.md): generation at the 3B / 7B release shapes with two engines on the GPU and with one
#: (issue 28's run, 256-token outputs; starts 124 s and 67 s at 3B, taken as warm ones; run 4 of 2026-12-02
#: measured 43.3 / 35.5 rows/s at 7B); what a start's caches add to a warm one (engine_start.py, run 38, 3B: 80.1 s
#: warm, 114.4 s for a new model path, 146.7 s for the machine's first); the 32B-shaped judge's saturation on the
#: suite's judge prompts (judge_throughput.py, 2026-12-01: 8.50 requests/s; a campaign's full-size slices keep it
#: saturated) and its start-up (142-175 s); 32,805 rows scored in 7.16 s CPU (score_campaign_speed.py); a warm
#: start beside a generating engine 1.09x (3B) and 1.25x (7B) the start alone (engine_start.py, 2026-12-07): 1.17.
DEFAULT_RATES = Rates(
    generation_rows_per_s={"3b": 61.4, "7b": 43.5},
    judge_requests_per_s=8.5,
    scoring_rows_per_s=4580.0,
    engine_start_s=124.0,
    judge_start_s=175.0,
    source="defaults (one H200, docs/performance.md)",
    generation_output_tokens={"3b": 256, "7b": 256},
    one_engine_rows_per_s={"3b": 40.7, "7b": 35.4},
    one_engine_start_s=67.0,
    start_extra_s={"cold": 66.6, "new-model": 34.3, "warm": 0.0},
    start_beside_factor=1.17,
)


#: What the defaults are worth: measured/estimated of the mini campaigns of docs/performance.md on their defaults
#: (runs 5, 6, 33, 36) and with a calibration from the machine they ran on (runs 36-37, another campaign size, each
#: start set against the caches it found: run 38).
DEFAULTS_NOTE = ("default rates (measured on other machines) have put mini campaigns on one H200 at 0.6-1.5x the "
                 "estimate: a GPU's generation rate and engine start vary between machines of one kind (23-48 "
                 "rows/s, warm starts 54-80 s); rates the benchmarks write on this machine (--calibration) came "
                 "within 20%")
#: The share of the estimate spent starting engines above which it is called out (:func:`start_share_note`).
START_SHARE_NOTED = 0.10


def start_share_note(start_s: float, total_s: float, starts: int, caches: str,
                     start_by_caches: Mapping[str, float]) -> str | None:
    """A note when engine starts are more than :data:`START_SHARE_NOTED` of the estimate: they were taken with
    ``caches`` (``--engine-caches``); ``start_by_caches`` (every state's total start seconds) says what the other
    states would make of them."""
    if total_s <= 0 or start_s / total_s <= START_SHARE_NOTED:
        return None
    others = ", ".join(f"{state} {seconds:.0f} s" for state, seconds in start_by_caches.items() if state != caches)
    return (f"{starts} engine start(s) are {start_s / total_s:.0%} of this estimate ({start_s:.0f} s, the first "
            f"finding vLLM's caches {caches}: --engine-caches; {others})")


def calibration_path(flag: str | Path | None = None) -> Path:
    """``flag``, else ``$TRACE_CALIBRATION``, else ``trace-repro-work/calibration.json``."""
    from trace_lib.options import work_root

    return work_root(flag, CALIBRATION_ENV, CALIBRATION_LEAF)


def calibrated_rates(flag: str | Path | None) -> Rates:
    """The rates of ``--calibration FLAG`` (:func:`calibration_path`): a file the user named (the flag or
    ``$TRACE_CALIBRATION``) must be there; the default location may be absent (the defaults); ``/dev/null`` is
    the defaults on purpose."""
    import os

    return load_rates(calibration_path(flag), required=bool(flag or os.environ.get(CALIBRATION_ENV)))


#: A calibration figure (rows/s, requests/s, seconds) lies in this range, so every estimate stays finite.
CALIBRATION_RANGE = (1e-6, 1e9)


def _positive(path: Path, where: str, value: Any) -> float:
    low, high = CALIBRATION_RANGE
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:  # NaN fails too
        raise InputError(f"not a number from {low:g} to {high:g}", file=str(path), field=where,
                         found=value if not isinstance(value, int) or abs(value) < 10 ** 20 else "a huge integer")
    return float(value)


def _tokens(path: Path, where: str, value: Any) -> int:
    from trace_lib.options import MAX_OUTPUT_TOKENS

    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_OUTPUT_TOKENS:
        raise InputError(f"not an integer from 1 to {MAX_OUTPUT_TOKENS:,}", file=str(path), field=where,
                         found=value if not isinstance(value, int) or abs(value) < 10 ** 20 else "a huge integer")
    return value


#: Each section's fields a calibration file may hold: the figures read, and what the benchmarks record beside them.
_STAMP_FIELDS = {"measured_by", "measured_at", "path", "shape", "measured_start_s", "start_caches", "answer_tokens",
                 "measured_path", "prompt_tokens_per_s", "output_tokens_per_s", "requests_per_row", "stub"}
#: Sections the benchmarks write for the record only (``mini_campaign.py``'s designs), not read as rates.
_RECORD_SECTIONS = {"mini_campaign"}


def load_rates(path: Path | None, *, required: bool = False) -> Rates:
    """The defaults, overridden by what the calibration file at ``path`` holds (an absent file: the defaults,
    unless ``required``; ``None`` or ``/dev/null``: the defaults).

    Sections: ``judge`` (``requests_per_s``, ``start_s``), ``generation_<shape>`` (``rows_per_s`` and
    ``start_s`` with two engines on the GPU, ``one_engine_rows_per_s`` and ``one_engine_start_s`` with one, warm
    starts; ``max_tokens``), ``engine_start`` (one engine's start by the caches it found, ``warm`` and any of
    ``cold``, ``new-model``: the warm start and what the others add to it; ``beside_factor``, a warm start beside
    a generating engine over the start alone; ``benchmarks/engine_start.py``),
    ``scoring`` (``rows_per_s``). A ``generation_<shape>`` ``one_engine_start_s`` wins over ``engine_start``'s
    warm one (the campaign's own path), wherever the sections stand in the file.

    Raises:
        InputError: a required file missing, not a regular file, not strict JSON, an unknown section or field,
            or a value out of :data:`CALIBRATION_RANGE` (file and field named).
    """
    import os

    from trace_lib.decoding import check_input_file, read_text
    from trace_lib.jsonio import loads_strict, strict_error

    if path is None or str(path) == os.devnull:
        return DEFAULT_RATES
    path = Path(path)
    try:
        text = read_text(check_input_file(path))  # a FIFO or directory is refused, never opened
    except FileNotFoundError:
        if required:
            raise InputError("calibration file not found", file=str(path),
                             hint="pass a file the benchmarks wrote (--calibration), or none for the defaults") from None
        return DEFAULT_RATES
    try:
        data = loads_strict(text)
    except ValueError as exc:
        raise InputError(strict_error(exc), file=str(path)) from None
    if not isinstance(data, dict):
        raise InputError("not a JSON object", file=str(path))
    rates = DEFAULT_RATES
    generation = dict(rates.generation_rows_per_s)
    one_engine = dict(rates.one_engine_rows_per_s)
    tokens = dict(rates.generation_output_tokens)
    for name, section in sorted(data.items(), key=lambda item: item[0] != "engine_start"):  # engine_start first
        if not isinstance(section, dict):
            raise InputError("not a JSON object", file=str(path), field=name)
        _check_fields(path, name, section)
        if name == "judge":
            if "requests_per_s" in section:
                rates = replace(rates, judge_requests_per_s=_positive(path, "judge.requests_per_s",
                                                                      section["requests_per_s"]))
            if "start_s" in section:
                rates = replace(rates, judge_start_s=_positive(path, "judge.start_s", section["start_s"]))
        elif name.startswith("generation_"):
            shape = name.removeprefix("generation_")
            if "rows_per_s" in section:
                generation[shape] = _positive(path, f"{name}.rows_per_s", section["rows_per_s"])
            if "one_engine_rows_per_s" in section:
                one_engine[shape] = _positive(path, f"{name}.one_engine_rows_per_s",
                                              section["one_engine_rows_per_s"])
            if "one_engine_start_s" in section:
                rates = replace(rates, one_engine_start_s=_positive(path, f"{name}.one_engine_start_s",
                                                                    section["one_engine_start_s"]))
            if "max_tokens" in section:
                tokens[shape] = _tokens(path, f"{name}.max_tokens", section["max_tokens"])
            if "start_s" in section:
                rates = replace(rates, engine_start_s=_positive(path, f"{name}.start_s", section["start_s"]))
        elif name == "engine_start":
            measured = {state: _positive(path, f"{name}.{state}", section[state])
                        for state in ENGINE_CACHES if state in section}
            if measured and "warm" not in measured:
                raise InputError("a start by caches needs the warm one to set the others against", file=str(path),
                                 field=f"{name}.warm")
            if measured:
                extra = {state: max(seconds - measured["warm"], 0.0) for state, seconds in measured.items()}
                rates = replace(rates, one_engine_start_s=measured["warm"],
                                start_extra_s={**rates.start_extra_s, **extra})
            if "beside_factor" in section:
                rates = replace(rates, start_beside_factor=_positive(path, f"{name}.beside_factor",
                                                                     section["beside_factor"]))
        elif name == "scoring" and "rows_per_s" in section:
            rates = replace(rates, scoring_rows_per_s=_positive(path, "scoring.rows_per_s", section["rows_per_s"]))
    return replace(rates, generation_rows_per_s=generation, one_engine_rows_per_s=one_engine,
                   generation_output_tokens=tokens,
                   source=f"calibration {path} (defaults for what it lacks)")


#: The figures each section holds (``generation_<shape>`` for every shape).
_SECTION_FIELDS = {
    "judge": {"requests_per_s", "start_s"},
    "generation_": {"rows_per_s", "start_s", "one_engine_rows_per_s", "one_engine_start_s", "max_tokens"},
    "engine_start": {*ENGINE_CACHES, "beside_factor"},
    "scoring": {"rows_per_s"},
}


def _check_fields(path: Path, name: str, section: Mapping[str, Any]) -> None:
    """An unknown section or field (a typo would be ignored silently) is one line with what is known."""
    from trace_lib.errors import did_you_mean

    if name in _RECORD_SECTIONS:
        return
    shapes = [f"generation_{shape}" for shape in DEFAULT_RATES.generation_rows_per_s]  # model_shape's shapes
    kind = "generation_" if name in shapes else name
    if kind not in _SECTION_FIELDS or (kind == "generation_" and name not in shapes):
        known = [k for k in _SECTION_FIELDS if k != "generation_"] + [*shapes, *_RECORD_SECTIONS]
        raise InputError(f"unknown section {name!r}", file=str(path), field=name, hint=did_you_mean(name, known))
    allowed = _SECTION_FIELDS[kind] | _STAMP_FIELDS
    for field_name in section:
        if field_name not in allowed:
            raise InputError(f"unknown field {field_name!r}", file=str(path), field=f"{name}.{field_name}",
                             hint=did_you_mean(field_name, sorted(allowed)))


def record_calibration(path: Path, section: str, values: Mapping[str, Any]) -> None:
    """Set ``section`` of the calibration file at ``path`` to ``values`` (other sections kept; atomic).

    Raises:
        InputError: the file is there but cannot be read as a JSON object: it is left as it is, since writing
            the one section would lose the others.
    """
    from trace_lib.atomic import write_json_atomic
    from trace_lib.jsonio import loads_strict, strict_error

    path = Path(path)
    data: dict[str, Any] = {}
    if path.is_file():
        try:
            loaded = loads_strict(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else strict_error(exc)
            raise InputError(f"calibration file unreadable ({reason}); its sections would be lost, so it is left "
                             "as it is", file=str(path), field=section,
                             hint="move it away or mend it, then run again") from None
        if not isinstance(loaded, dict):
            raise InputError("calibration file is not a JSON object; left as it is", file=str(path), field=section)
        data = loaded
    data[section] = dict(values)
    write_json_atomic(path, data, indent=2, sort_keys=True)


def model_shape(slug: str, repository: str = "") -> str:
    """``3b`` for a model whose slug or repository names 3B, else ``7b`` (6 of the paper's 8 models)."""
    text = f"{slug} {repository}".lower()
    return "3b" if "3b" in text else "7b"


def judge_requests_per_row(benchmark: str, judge_use: str) -> float:
    """The judge requests one row of ``benchmark`` implies, by its protocol's judge use (module docstring)."""
    if judge_use == "none":
        return 0.0
    if judge_use == "always":
        return JUDGE_REQUESTS_PER_ROW.get(benchmark, 1.0)
    return FALLBACK_REQUESTS_PER_ROW


@dataclass(frozen=True)
class Phase:
    """One phase: its work (rows or judge requests), the rate it runs at on all GPUs, its start-up and seconds."""

    name: str
    work: float
    unit: str
    rate: float
    start_s: float

    @property
    def seconds(self) -> float:
        return self.start_s + (self.work / self.rate if self.work else 0.0)


@dataclass(frozen=True)
class Estimate:
    """The per-phase estimate of a campaign on ``gpus`` GPUs."""

    phases: tuple[Phase, ...]
    gpus: int
    rates: Rates
    notes: tuple[str, ...] = ()
    engine_caches: str = "new-model"  # what the first model's engine start was taken to find

    @property
    def total_s(self) -> float:
        return sum(p.seconds for p in self.phases)

    def phase(self, name: str) -> Phase:
        return next(p for p in self.phases if p.name == name)

    def lines(self) -> list[str]:
        out = [f"estimate on {self.gpus} GPU(s), rates from {self.rates.source}:"]
        for p in self.phases:
            start = f" + {p.start_s:.0f} s start-up" if p.start_s else ""
            out.append(f"  {p.name:<10} {p.work:>12,.0f} {p.unit:<15} at {p.rate:>9,.1f}/s{start}: "
                       f"{format_duration(p.seconds)}")
        out.append(f"  {'total':<10} {format_duration(self.total_s)} (phases one after another, upstream's order)")
        out += [f"  note: {n}" for n in self.notes]
        return out

    def to_json(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "rates_source": self.rates.source, "engine_caches": self.engine_caches,
                "total_s": round(self.total_s, 1),
                "phases": [{"name": p.name, "work": p.work, "unit": p.unit, "rate_per_s": p.rate,
                            "start_s": p.start_s, "seconds": round(p.seconds, 1)} for p in self.phases]}


def format_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


@dataclass(frozen=True)
class SliceWork:
    """What one slice costs: its model's shape, its rows and the judge requests its protocol implies; its
    benchmark keeps a benchmark's seeds on one engine, as ``generate`` deals them (none: the slice alone)."""

    model: str
    shape: str
    rows: int
    judge_requests: float
    benchmark: str = ""


def engines_for(rows_per_gpu: float, engines_per_gpu: int | None = None) -> int:
    """Engines per GPU for a GPU's share of the campaign's rows: ``engines_per_gpu`` when given, else the rows part
    of ``generate --engines-per-group auto`` (:func:`~trace_lib.campaign.engines.rows_pay_for_second_engine`; its
    memory part allows two at both release shapes on the GPUs the defaults were measured on)."""
    from trace_lib.campaign.engines import MAX_ENGINES_PER_GPU, rows_pay_for_second_engine

    if engines_per_gpu is not None:
        return max(1, min(engines_per_gpu, MAX_ENGINES_PER_GPU))
    return 2 if rows_pay_for_second_engine(rows_per_gpu) else 1


def add_engine_caches_option(parser: Any) -> None:
    """``--engine-caches STATE`` (``plan --estimate``, ``status``): the first model's start state."""
    parser.add_argument("--engine-caches", choices=ENGINE_CACHES, default="new-model",
                        help="what vLLM's caches hold when the first model's engine starts: cold (a machine that "
                             "never ran vLLM), new-model (the default: vLLM has run here, the checkpoints are new "
                             "to it), warm (these models started here before: a rerun)")


def start_caches(caches: str, index: int) -> str:
    """The caches the ``index``-th model's start finds when the first finds ``caches`` (module docstring)."""
    return caches if index == 0 or caches == "warm" else "new-model"


@dataclass(frozen=True)
class _Dealt:
    """A slice of work as :func:`~trace_lib.campaign.plan.deal_slices` deals it (a benchmark-less one alone)."""

    index: int
    model: str
    benchmark: str


def _gpu_rows(work: Sequence[SliceWork], gpus: int, engines: int,
              start_rows: int | None) -> list[list[dict[str, int]]]:
    """Each GPU's engine processes' rows by model (in the order each runs them): ``work`` dealt over ``gpus`` x
    ``engines`` workers and placed on the GPUs as ``generate`` does (``start_rows``: the deal's start cost; None:
    ``generate``'s)."""
    from trace_lib.campaign.plan import START_COST_ROWS, deal_slices, side_by_side

    items = [_Dealt(i, w.model, w.benchmark or f"#{i}") for i, w in enumerate(work)]
    start_rows = START_COST_ROWS if start_rows is None else start_rows
    workers = []
    for share in side_by_side(deal_slices(items, lambda item: work[item.index].rows, gpus * engines,
                                          start_rows=start_rows), engines):
        rows_by_model: dict[str, int] = {}
        for item in share:
            rows_by_model[item.model] = rows_by_model.get(item.model, 0) + work[item.index].rows
        workers.append(rows_by_model)
    return [workers[g * engines:(g + 1) * engines] for g in range(gpus)]


@dataclass
class _Engine:
    """One engine process of a GPU in :func:`_gpu_generation`: its models' ``(model, rows, shape)`` in order."""

    models: list[tuple[str, float, str]]
    at: int = 0  # the model it is on
    state: str = "waiting"  # for the GPU's start lock; then "starting", "generating", and "done" after its last
    left: float = 0.0  # start seconds or rows left
    asked_at: float = 0.0  # when it asked for the start lock
    start_s: float = 0.0  # seconds from asking for the lock to its engine up, over its models
    done_s: float = 0.0


def _gpu_generation(engine_rows: Sequence[Mapping[str, int]], shapes: Mapping[str, str], rates: Rates,
                    output_tokens: int | None, caches: str) -> tuple[float, float, int]:
    """``(seconds, start seconds, engine starts)`` of one GPU's generation: of its engine that finishes last.

    Each engine runs its models one after another, each a start and then its rows. Starts on a GPU take its lock
    one at a time, as ``generate``'s engines do (:func:`~trace_lib.generation.backends.vllm.engine_start_lock`), in
    the order they asked. A start is the one-engine start, except the second engine's first, which is what the
    two-engine start adds to it (the second finds the model compiled). Each adds what its caches cost
    (:func:`start_caches`): the GPU's first start finds ``caches``; a model started on the GPU before is warm;
    any other is a later model, which takes ``start_beside_factor`` times as long for as long as its neighbour
    generates (an engine's first start was measured beside its neighbour already). While two engines generate each
    runs at half the GPU's two-engine rate; an engine generating alone (its neighbour waiting, starting or done)
    runs at the one-engine rate. A start's seconds count from asking for the lock.
    """
    busy = [rows for rows in engine_rows if rows]
    if not busy:
        return 0.0, 0.0, 0
    engines = [_Engine([(model, float(rows), shapes[model]) for model, rows in rows_by_model.items()])
               for rows_by_model in busy]
    started: list[str] = []  # models whose engines started on this GPU, in order

    def start_seconds(engine: _Engine) -> float:
        model, _, shape = engine.models[engine.at]
        one = rates.generation(shape, 1)[1]
        if not started:  # the GPU's first start
            return one + rates.start_extra(caches)
        base = max(rates.engine_start_s - one, 0.0) if engine.at == 0 else one
        return base + rates.start_extra("warm" if model in started else start_caches(caches, 1))

    def rows_per_s(engine: _Engine, generating: int) -> float:
        shape = engine.models[engine.at][2]
        measured_at = rates.generation_output_tokens.get(shape)
        scale = measured_at / output_tokens if output_tokens and measured_at else 1.0
        return rates.generation(shape, generating)[0] / generating * scale

    def settle(now: float) -> None:
        """Finish what is finished at ``now`` and hand the free lock on, until nothing changes."""
        changed = True
        while changed:
            changed = False
            for e in engines:
                if e.state == "starting" and e.left <= 0:
                    e.start_s += now - e.asked_at
                    e.state, e.left, changed = "generating", e.models[e.at][1], True
                if e.state == "generating" and e.left <= 0:
                    e.at += 1
                    if e.at == len(e.models):
                        e.state, e.done_s = "done", now
                    else:
                        e.state, e.asked_at = "waiting", now
                    changed = True
            waiting = sorted((e.asked_at, i) for i, e in enumerate(engines) if e.state == "waiting")
            if waiting and not any(e.state == "starting" for e in engines):
                e = engines[waiting[0][1]]
                e.state, e.left, changed = "starting", start_seconds(e), True
                started.append(e.models[e.at][0])

    now = 0.0
    settle(now)
    while moving := [e for e in engines if e.state in ("starting", "generating")]:
        generating = sum(e.state == "generating" for e in moving)
        beside = 1.0 / rates.start_beside_factor if generating else 1.0  # a later start beside a generating engine
        speed = [(beside if e.at else 1.0) if e.state == "starting" else rows_per_s(e, generating)
                 for e in moving]
        step = min(e.left / v for e, v in zip(moving, speed))
        now += step
        for e, v in zip(moving, speed):
            e.left = 0.0 if e.left <= step * v * (1 + 1e-12) else e.left - step * v
        settle(now)
    last = max(engines, key=lambda e: e.done_s)
    return last.done_s, last.start_s, len(last.models)


def _generation(gpu_rows: Sequence[Sequence[Mapping[str, int]]], shapes: Mapping[str, str], rates: Rates,
                output_tokens: int | None, caches: str) -> tuple[float, float, int]:
    """``(seconds, start seconds, engine starts)`` of the GPU that finishes last (:func:`_gpu_generation`)."""
    return max((_gpu_generation(engine_rows, shapes, rates, output_tokens, caches) for engine_rows in gpu_rows),
               default=(0.0, 0.0, 0))


def estimate(work: Sequence[SliceWork], rates: Rates, *, gpus: int, output_tokens: int | None = None,
             engines_per_gpu: int | None = None, engine_caches: str = "new-model",
             start_rows: int | None = None) -> Estimate:
    """The phases of ``work`` on ``gpus`` GPUs (module docstring). ``output_tokens``: the mean output tokens per
    row to expect, scaling the generation rates from the output length they were measured at.
    ``engines_per_gpu``: 1 or 2 engines per GPU; None: :func:`engines_for` of the campaign's rows.
    ``engine_caches``: what vLLM's caches hold for the first model's start (:data:`ENGINE_CACHES`).
    ``start_rows``: the deal's start cost (None: ``generate``'s, :data:`~trace_lib.campaign.plan.START_COST_ROWS`;
    0: the deal by rows alone, ``benchmarks/deal_starts.py``'s baseline).

    Raises:
        ValueError: ``gpus`` below 1, a shape without a generation rate, or an unknown ``engine_caches``.
    """
    if gpus < 1:
        raise ValueError("gpus must be at least 1")
    if engine_caches not in ENGINE_CACHES:
        raise ValueError(f"engine_caches is one of {', '.join(ENGINE_CACHES)}, not {engine_caches!r}")
    notes = []
    rows = sum(w.rows for w in work)
    engines = engines_for(rows / gpus, engines_per_gpu)  # decided once for the campaign, as generate does
    gpu_rows = _gpu_rows(work, gpus, engines, start_rows)  # dealt once; each state costs the same rows
    shapes = {w.model: w.shape for w in work}
    by_caches = {state: _generation(gpu_rows, shapes, rates, output_tokens, state) for state in ENGINE_CACHES}
    generation_s, start_s, starts = by_caches[engine_caches]
    effective = rows / max(generation_s - start_s, 1e-9) if rows else 1.0
    notes.append(f"{engines} engine(s) per GPU" + (
        "" if engines_per_gpu is not None else f" (generate --engines-per-group auto's rows rule: "
                                               f"{rows / gpus:,.0f} rows per GPU)"))
    if output_tokens is None and rates.generation_output_tokens:
        lengths = sorted(set(rates.generation_output_tokens.values()))
        notes.append(f"generation rates were measured at {'/'.join(map(str, lengths))} output tokens per row; pass "
                     "--output-tokens N for your models' mean")
    if rates.source == DEFAULT_RATES.source:
        notes.append(DEFAULTS_NOTE)
    requests = sum(w.judge_requests for w in work)
    phases = (
        Phase("generation", rows, "rows", effective, start_s),
        Phase("judge", requests, "judge requests", rates.judge_requests_per_s * gpus,
              rates.judge_start_s if requests else 0.0),
        Phase("scoring", rows, "rows (CPU)", rates.scoring_rows_per_s, 0.0),
    )
    start_note = start_share_note(start_s, Estimate(phases, gpus, rates).total_s, starts, engine_caches,
                                  {state: start for state, (_, start, _) in by_caches.items()})
    return Estimate(phases, gpus, rates, tuple(notes) + ((start_note,) if start_note else ()), engine_caches)


def slice_work(suite: Any, slices: Sequence[tuple[str, int, str]],
               repositories: Mapping[str, str] | None = None, *, rows_per_slice: int | None = None) -> list[SliceWork]:
    """A :class:`SliceWork` per ``(model, seed, benchmark)``: the suite's rows (at most ``rows_per_slice``: a mini
    campaign), the protocol's judge use, the model's shape from its slug (or ``repositories[slug]``)."""
    from trace_lib.benchmarks.registry import get_protocol
    from trace_lib.errors import ProtocolNotImplementedError

    uses: dict[str, str] = {}
    out = []
    for model, _seed, benchmark in slices:
        if benchmark not in uses:
            try:
                uses[benchmark] = get_protocol(benchmark).judge
            except ProtocolNotImplementedError:
                uses[benchmark] = "none"
        rows = suite.benchmark(benchmark).rows
        if rows_per_slice is not None:
            rows = min(rows, rows_per_slice)
        out.append(SliceWork(model, model_shape(model, (repositories or {}).get(model, "")), rows,
                             rows * judge_requests_per_row(benchmark, uses[benchmark]), benchmark))
    return out


def plan_work(plan: Any, release: Any, *, rows_per_slice: int | None = None) -> list[SliceWork]:
    """:func:`slice_work` of every slice of ``plan``."""
    from trace_lib.release.suite import load_suite

    return slice_work(load_suite(release), [(s.model, s.seed, s.benchmark) for s in plan.slices],
                      {m.slug: m.source for m in plan.models}, rows_per_slice=rows_per_slice)


def campaign_started_at(root: Path) -> float | None:
    """The earliest ``created_at`` of the response files under ``root`` (POSIX seconds), None when there are none."""
    import datetime as dt

    from trace_lib.errors import TraceReproError
    from trace_lib.generation.store import load_header

    first = None
    for path in (Path(root) / "generation").glob("seed_*/*/*.jsonl"):
        try:
            stamp = dt.datetime.fromisoformat(str(load_header(path).get("created_at"))).timestamp()
        except (TraceReproError, OSError, ValueError, TypeError):
            continue
        first = stamp if first is None else min(first, stamp)
    return first


@dataclass(frozen=True)
class Progress:
    """Done so far: rows generated, slices scored, of how many; seconds since the campaign began."""

    rows_done: int
    rows_total: int
    slices_scored: int
    slices_total: int
    elapsed_s: float | None


def compare_progress(est: Estimate, progress: Progress) -> list[str]:
    """Lines setting ``progress`` against ``est``: the estimate's seconds for the work done so far (generation
    by rows, judge + scoring by scored slices), the elapsed time against it, and what remains."""
    gen, judge, scoring = (est.phase(n) for n in ("generation", "judge", "scoring"))
    rows_frac = progress.rows_done / progress.rows_total if progress.rows_total else 1.0
    scored_frac = progress.slices_scored / progress.slices_total if progress.slices_total else 1.0
    done_s = gen.seconds * rows_frac + (judge.seconds + scoring.seconds) * scored_frac
    left_s = est.total_s - done_s
    lines = [f"estimate: {format_duration(est.total_s)} in all on {est.gpus} GPU(s) (generation "
             f"{format_duration(gen.seconds)}, judge {format_duration(judge.seconds)}, scoring "
             f"{format_duration(scoring.seconds)}); done: {rows_frac:.0%} of rows, {scored_frac:.0%} of slices scored "
             f"= {format_duration(done_s)} of the estimate; {format_duration(left_s)} left by the estimate"]
    if progress.elapsed_s is not None and done_s >= min(PACE_AFTER_S, 0.05 * est.total_s):  # not on a first row
        pace = progress.elapsed_s / done_s
        lines.append(f"elapsed {format_duration(progress.elapsed_s)} for that work: {pace:.2f}x the estimate"
                     + ("" if 0.8 <= pace <= 1.25 else " (recalibrate: run the GPU benchmarks with --calibration)"))
    return lines
