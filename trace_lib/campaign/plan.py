"""The campaign plan: suite x models x seeds -> slices, plus run tag, deltas, GPU plan and tolerance budget.

Public API (``tests_reproduction`` parametrizes over it)::

    plan = build_plan(release, models=..., seeds=..., benchmarks=...)   # or plan_from_options(release, ns)
    plan.slices          # tuple[Slice], model-major, then seed, then benchmark in suite order
    slice.id             # "trace-qwen2.5-vl-3b-seed42-mathvista" (pytest ids, -k selection)
    plan.model(slug)     # the ModelDescriptor of a slice's model
    plan.rows(slice)     # the suite's row count of the slice's benchmark
    plan.render(power)   # the --print-config text (starts nothing, writes nothing)
    plan.power(release)  # each planned test's predicted band and minimum detectable shift

``add_plan_options(register)`` declares the plan flags once for both surfaces: pass ``parser.add_argument``
(argparse) or ``group.addoption`` (pytest); ``plan_from_options`` reads them back from either namespace.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from trace_lib import options
from trace_lib.campaign.models import (
    ModelDescriptor, parse_descriptors, release_judge, release_models, select_release_models,
)
from trace_lib.errors import UsageError
from trace_lib.release.locate import ReleaseRoot
from trace_lib.release.suite import Suite, load_seeds, load_suite
from trace_lib.slices import Slice

if TYPE_CHECKING:
    from trace_lib.aggregation.verdict import PlannedTest

#: The environment variables of the plan flags (defined, with their defaults, in trace_lib.options).
MODEL_ROOT_ENV, DATA_ROOT_ENV = options.MODEL_ROOT_ENV.name, options.DATA_ROOT_ENV.name
RUN_TAG_ENV, GPU_GROUPS_ENV = options.RUN_TAG_ENV.name, options.GPU_GROUPS_ENV.name


@dataclass(frozen=True)
class Delta:
    """A declared matched comparison ``LABEL=MINUEND_SLUG=SUBTRAHEND_SLUG`` (summaries only)."""

    label: str
    minuend: str
    subtrahend: str

    @property
    def raw(self) -> str:
        return f"{self.label}={self.minuend}={self.subtrahend}"


@dataclass(frozen=True)
class Plan:
    """A resolved campaign: what would run, where, and how it is judged."""

    suite: Suite
    run_tag: str
    seeds: tuple[int, ...]
    models: tuple[ModelDescriptor, ...]
    benchmarks: tuple[str, ...]  # selected suite keys, suite order
    judge: ModelDescriptor | None = None
    deltas: tuple[Delta, ...] = ()
    gpu_groups: tuple[tuple[int, ...], ...] = ((0,),)
    tensor_parallel_size: int | None = None  # None: the size of each GPU group
    tolerance_alpha: float = 0.05  # family-wise false-alarm budget over the plan's family (--alpha)
    margin: float = 2.0  # equivalence margin in points (--margin)
    campaign_root: Path | None = None
    data_root: Path | None = None
    model_root: Path | None = None
    release_label: str = ""  # how the release is named (``bundled pinned snapshot (...)`` or its directory)
    _slices: tuple[Slice, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        slices = tuple(Slice(m.slug, s, b) for m in self.models for s in self.seeds for b in self.benchmarks)
        object.__setattr__(self, "_slices", slices)

    @property
    def slices(self) -> tuple[Slice, ...]:
        return self._slices

    def model(self, slug: str) -> ModelDescriptor:
        for desc in self.models:
            if desc.slug == slug:
                return desc
        raise KeyError(slug)

    def rows(self, slice_: Slice) -> int:
        return self.suite.benchmark(slice_.benchmark).rows

    def power(self, release: ReleaseRoot) -> tuple[str, list[PlannedTest]]:
        """The rule line and each planned test's predicted band and minimum detectable shift at 80% power
        (:func:`trace_lib.aggregation.verdict.planned_power`)."""
        from trace_lib.aggregation.canonical import load_canonical
        from trace_lib.aggregation.verdict import Rule, VerdictPlan, planned_power

        canonical = load_canonical(release)
        rule = Rule.for_plan(canonical, VerdictPlan.of(self), alpha=self.tolerance_alpha, margin=self.margin)
        return rule.describe(), planned_power(canonical, self, alpha=self.tolerance_alpha)

    @property
    def tp_size(self) -> int:
        return self.tensor_parallel_size or len(self.gpu_groups[0])

    def render(self, power: tuple[str, Sequence[PlannedTest]] | None = None) -> str:
        """The ``--print-config`` text: suite, run tag, seeds, models, deltas, decoding, GPU plan, slices.

        With ``power`` (:meth:`power`), the rule line and, per slice, the canonical mean's predicted band and
        minimum detectable shift (MDS, 80% power) for one seed; then every other planned test (means, categories,
        overall, the claims) with its MDS; models without canonical scores say so.
        """
        gen = self.suite.generation
        lines = [
            f"suite={self.suite.suite_id}",
            f"suite_sha256={self.suite.sha256}",
            *([f"release={self.release_label}"] if self.release_label else []),
            f"run_tag={self.run_tag}",
            f"seeds={' '.join(str(s) for s in self.seeds)}",
            *(m.render() for m in self.models),
        ]
        if self.judge is not None:
            lines.append("judge=" + self.judge.render().removeprefix("model="))
        lines += [f"delta={d.raw}" for d in self.deltas]
        lines += [
            f"generation=temp{gen['temperature']:g},top_p{gen['top_p']:g},top_k{gen['top_k']},max{gen['max_tokens']}",
            f"media={gen['media_transport']},{gen['min_image_pixels']},{gen['max_image_pixels']}",
            f"benchmarks={len(self.benchmarks)} ({' '.join(self.benchmarks)})",
            f"slices={len(self.slices)} ({len(self.models)} models x {len(self.seeds)} seeds x "
            f"{len(self.benchmarks)} benchmarks; {sum(self.suite.benchmark(b).rows for b in self.benchmarks)} "
            f"rows per model and seed)",
            f"gpu_groups={render_gpu_groups(self.gpu_groups)} ({len(self.gpu_groups)} engine(s), "
            f"tensor_parallel_size={self.tp_size})",
            f"verdict={power[0]}" if power is not None else
            f"alpha={self.tolerance_alpha:g} margin={self.margin:g}",
            f"campaign_root={self.campaign_root or '(not set)'}",
            f"data_root={self.data_root or '(not set)'}",
        ]
        tests = {t.test_id: t for t in power[1]} if power is not None else {}
        lines += [f"slice={s.id} rows={self.rows(s)}{_band_text(tests, s, power is not None)}" for s in self.slices]
        if power is not None:
            lines += [f"test={t.test_id} kind={t.kind} band=+-{t.band:.2f} mds={t.mds:.2f}" for t in power[1]
                      if t.kind != "slice"]
        return "\n".join(lines)


def _band_text(tests: Mapping[str, PlannedTest], slice_: Slice, judged: bool) -> str:
    if not judged:
        return ""
    test = tests.get(slice_.id)
    if test is None:
        return " canonical=none (not a release model)"
    return f" band=+-{test.band:.2f} mds={test.mds:.2f}"


def worker_shares(plan: Plan, workers: int, per_group: int = 1) -> list[list[Slice]]:
    """The plan's slices split over ``workers`` engine processes (:func:`deal_slices` by the suite's rows), worker
    ``i`` on GPU group ``i // per_group`` (:func:`side_by_side`)."""
    return side_by_side(deal_slices(plan.slices, plan.rows, workers), per_group)


def side_by_side(shares: list[list[Slice]], per_group: int) -> list[list[Slice]]:
    """``shares`` placed on GPU groups of ``per_group`` workers (worker ``i`` on group ``i // per_group``): those
    holding the same models side by side, so engines that share a GPU start the same model and the second finds it
    compiled (docs/performance.md, run 38); and, when some shares are empty, the others spread over the groups as
    evenly as they go, so no GPU runs two engines while another idles. Shares need slices with a ``model``."""
    if per_group <= 1:
        return list(shares)
    held = sorted((share for share in shares if share), key=lambda share: sorted({s.model for s in share}))
    slots = [min(per_group, len(shares) - start) for start in range(0, len(shares), per_group)]
    counts = [0] * len(slots)
    for _ in held:  # the next share to the emptiest group with room
        group = min((g for g in range(len(slots)) if counts[g] < slots[g]), key=lambda g: (counts[g], g))
        counts[group] += 1
    placed, at = [], 0
    for count, room in zip(counts, slots):
        placed += held[at:at + count] + [[] for _ in range(room - count)]
        at += count
    return placed


#: What one more model costs a worker that already has another, in rows: an engine start for a model new to the
#: machine (114 s at the 3B shape, docs/performance.md run 38) at about 35 rows/s of one engine.
START_COST_ROWS = 4000


def deal_slices(slices: Sequence[Slice], rows: Callable[[Slice], int], workers: int, *,
                start_rows: int = START_COST_ROWS) -> list[list[Slice]]:
    """``slices`` split over ``workers`` engine processes. Each (model, benchmark) goes whole to one worker, so its
    seeds share that engine's caches in lockstep; the largest (rows x seeds) go first, each to the worker whose load
    it leaves lowest, so the workers finish close together. A worker starts an engine per model it holds, so a
    model it does not hold yet adds ``start_rows`` to its load, unless the worker holds nothing yet (every worker
    starts one engine). The paper campaign's 16 workers (8 GPUs, 2 engines each) then hold one model each, not 2-4.
    Each share keeps the order of ``slices``. Slices need ``model`` and ``benchmark``; ``rows`` weighs one."""
    order = {slice_: i for i, slice_ in enumerate(slices)}
    groups: dict[tuple[str, str], list[Slice]] = {}
    for slice_ in slices:
        groups.setdefault((slice_.model, slice_.benchmark), []).append(slice_)
    weighted = sorted(((sum(rows(s) for s in group), group) for group in groups.values()),
                      key=lambda item: (-item[0], order[item[1][0]]))
    loads, shares = [0] * workers, [[] for _ in range(workers)]
    held: list[set[str]] = [set() for _ in range(workers)]

    def start(worker: int, model: str) -> int:
        return 0 if model in held[worker] or not held[worker] else start_rows

    for weight, group in weighted:
        model = group[0].model
        best = min(range(workers), key=lambda w: (loads[w] + start(w, model), w))
        loads[best] += weight + start(best, model)
        held[best].add(model)
        shares[best] += group
    return [sorted(share, key=order.__getitem__) for share in shares]


# -- parsing ---------------------------------------------------------------------------------------------------

def render_gpu_groups(groups: Sequence[Sequence[int]]) -> str:
    return ";".join(options.cuda_visible_devices(group) for group in groups)


def parse_seeds(values: Sequence[Any]) -> tuple[int, ...]:
    """Seeds as upstream accepts them: digits only, unique.

    Raises:
        UsageError: a non-numeric or repeated seed.
    """
    seeds = []
    for value in values:
        text = str(value)
        if not re.fullmatch(r"[0-9]+", text):
            raise UsageError("invalid seed", field="--seeds", found=text, expected="a non-negative integer")
        if int(text) in seeds:
            raise UsageError("duplicate seed", field="--seeds", found=text)
        seeds.append(int(text))
    if not seeds:
        raise UsageError("no seed given", field="--seeds")
    return tuple(seeds)


def parse_delta(text: str, slugs: Sequence[str]) -> Delta:
    """``LABEL=MINUEND_SLUG=SUBTRAHEND_SLUG`` (split on the first two ``=``); both slugs must be planned.

    Raises:
        UsageError: wrong shape or an unknown slug.
    """
    parts = text.split("=", 2)
    if len(parts) != 3 or not all(parts):
        raise UsageError("invalid delta", field="--delta", found=text, expected="LABEL=MINUEND_SLUG=SUBTRAHEND_SLUG")
    label, minuend, subtrahend = parts
    for slug in (minuend, subtrahend):
        if slug not in slugs:
            raise UsageError(f"delta names unknown model {slug!r}", field="--delta", hint=f"known: {', '.join(slugs)}")
    return Delta(label, minuend, subtrahend)


def select_benchmarks(suite: Suite, keys: Sequence[str] | None) -> tuple[str, ...]:
    """The selected suite keys in suite order (all when ``keys`` is empty).

    Raises:
        UsageError: a key that is not in the suite (with close matches).
    """
    if not keys:
        return suite.keys
    from trace_lib.errors import did_you_mean

    for key in keys:
        if key not in suite.keys:
            raise UsageError(f"unknown benchmark {key!r}", field="--benchmark", hint=did_you_mean(key, suite.keys))
    wanted = set(keys)
    return tuple(k for k in suite.keys if k in wanted)


def _check_run_tag(tag: str) -> str:
    """A run tag names directories and files: letters, digits, ``.``, ``_`` and ``-`` only, no leading dot."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", tag):
        raise UsageError("invalid run tag", field="--run-tag", found=tag,
                         expected="letters, digits, '.', '_' or '-' (it names directories)")
    return tag


def default_run_tag(suite: Suite, seeds: Sequence[int]) -> str:
    """``<suite>_temp<T without dot>_seed<seeds joined by _>``, e.g. ``trace_eval_v1_temp06_seed42_43_44``."""
    temperature = f"{suite.generation['temperature']:g}".replace(".", "")
    return f"{suite.suite_id}_temp{temperature}_seed{'_'.join(str(s) for s in seeds)}"


# -- building --------------------------------------------------------------------------------------------------

def build_plan(
    release: ReleaseRoot,
    *,
    models: Sequence[ModelDescriptor] | None = None,
    model_ids: Sequence[str] = (),
    model_root: Path | None = None,
    seeds: Sequence[Any] | None = None,
    benchmarks: Sequence[str] | None = None,
    run_tag: str | None = None,
    deltas: Sequence[str] = (),
    gpu_groups: str | None = None,
    tensor_parallel_size: int | None = None,
    tolerance_alpha: float = 0.05,
    margin: float = 2.0,
    campaign_root: Path | None = None,
    data_root: Path | None = None,
    with_judge: bool = True,
) -> Plan:
    """Resolve a campaign plan; nothing is started or written.

    ``models`` (parsed ``--model`` descriptors) replace the release's models; otherwise the release's models
    (all, or those named in ``model_ids``) at ``<model_root>/<model_id>``. Seeds default to the release's.

    Raises:
        UsageError: unknown benchmark/model, bad seed, delta, GPU groups or tensor-parallel size.
    """
    suite = load_suite(release)
    root = options.work_root(model_root, MODEL_ROOT_ENV, "models", directory="--model-root")
    if models:
        if model_ids:
            raise UsageError("--model and --model-id cannot be combined", field="--model-id")
        chosen = tuple(models)
    else:
        everything = release_models(release, root)
        chosen = select_release_models(everything, model_ids) if model_ids else everything
    seed_list = parse_seeds(seeds if seeds else load_seeds(release))
    groups = options.parse_gpu_groups(gpu_groups or os.environ.get(GPU_GROUPS_ENV) or options.GPU_GROUPS_ENV.default)
    if tensor_parallel_size is not None:
        if tensor_parallel_size < 1 or any(tensor_parallel_size > len(g) for g in groups):
            raise UsageError("tensor parallel size exceeds a GPU group", field="--tensor-parallel-size",
                             found=tensor_parallel_size, expected=f"1..{min(len(g) for g in groups)}")
    elif len({len(g) for g in groups}) != 1:
        raise UsageError("GPU groups differ in size; pass --tensor-parallel-size", field="--gpu-groups",
                         found=render_gpu_groups(groups))
    slugs = [m.slug for m in chosen]
    return Plan(
        suite=suite,
        run_tag=_check_run_tag(run_tag or os.environ.get(RUN_TAG_ENV) or default_run_tag(suite, seed_list)),
        seeds=seed_list,
        models=chosen,
        benchmarks=select_benchmarks(suite, benchmarks),
        judge=release_judge(release, root) if with_judge else None,
        deltas=tuple(parse_delta(d, slugs) for d in deltas),
        gpu_groups=groups,
        tensor_parallel_size=tensor_parallel_size,
        tolerance_alpha=tolerance_alpha,
        margin=margin,
        campaign_root=Path(campaign_root) if campaign_root else None,
        data_root=Path(data_root) if data_root else None,
        model_root=root,
        release_label=release.label,
    )


Register = Callable[..., Any]


def add_plan_options(register: Register) -> None:
    """Declare the plan flags through ``register`` (``ArgumentParser.add_argument`` or pytest ``addoption``)."""
    register("--model", nargs=5, action="append", default=None,
             metavar=("SLUG", "LOCAL_PATH", "IMMUTABLE_REVISION", "OWNER/REPO@REVISION", "LABEL"),
             help="a model to evaluate (repeatable); replaces the release's models")
    register("--model-id", action="append", default=None, metavar="MODEL_ID",
             help="evaluate only this release model (repeatable); its directory is <model-root>/<model_id>")
    register("--model-root", default=None, metavar="DIR",
             help=f"directory of the release models (env {MODEL_ROOT_ENV}; default {options.DEFAULT_WORK_DIR}/models)")
    register("--seeds", nargs="+", default=None, metavar="SEED", help="decoding seeds (default: the release's)")
    register("--benchmark", action="append", default=None, metavar="KEY",
             help="restrict to this suite benchmark (repeatable; default: all)")
    register("--run-tag", default=None, metavar="TAG",
             help=f"campaign name (env {RUN_TAG_ENV}; default <suite>_temp<T>_seed<seeds>)")
    register("--delta", action="append", default=None, metavar="LABEL=MINUEND=SUBTRAHEND",
             help="a matched comparison column for summaries (repeatable)")
    register("--gpu-groups", default=None, metavar="GROUPS",
             help=f"one engine per group, e.g. '0,1;2,3' (env {GPU_GROUPS_ENV}; default '0')")
    register("--tensor-parallel-size", type=options.positive_int, default=None, metavar="N",
             help="tensor parallel size per engine (default: the group size)")
    register("--data-root", default=None, metavar="DIR",
             help=f"prepared benchmark data (env {DATA_ROOT_ENV}; default {options.DEFAULT_WORK_DIR}/data)")


def plan_from_options(release: ReleaseRoot, namespace: Any, *, with_judge: bool = True) -> Plan:
    """Build the plan from a namespace that went through :func:`add_plan_options` (argparse or pytest)."""
    groups = getattr(namespace, "model", None) or []
    campaign_root = options.resolve(namespace, options.CAMPAIGN_ROOT)
    return build_plan(
        release,
        models=parse_descriptors(groups) if groups else None,
        model_ids=getattr(namespace, "model_id", None) or (),
        model_root=getattr(namespace, "model_root", None),
        seeds=getattr(namespace, "seeds", None),
        benchmarks=getattr(namespace, "benchmark", None),
        run_tag=getattr(namespace, "run_tag", None),
        deltas=getattr(namespace, "delta", None) or (),
        gpu_groups=getattr(namespace, "gpu_groups", None),
        tensor_parallel_size=getattr(namespace, "tensor_parallel_size", None),
        tolerance_alpha=options.resolve(namespace, options.ALPHA),
        margin=options.resolve(namespace, options.MARGIN),
        campaign_root=Path(campaign_root) if campaign_root else None,
        data_root=options.work_root(getattr(namespace, "data_root", None), DATA_ROOT_ENV, "data",
                                     directory="--data-root"),
        with_judge=with_judge,
    )
