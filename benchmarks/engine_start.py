"""What one engine start costs on this machine, and what the compile caches save (issue 28 item 6).

A campaign starts an engine per model and worker. Runs 36-37 saw a machine's first start take 1.5-1.9x its next;
this script finds out which cache makes the difference, and so how a campaign's later models (new checkpoints, new
paths) start. vLLM keys its torch.compile cache by the engine's configuration, the model's path included
(``ModelConfig.compute_hash``); Inductor and Triton key theirs by the graph and the kernels. Run 38
(docs/performance.md) measured 147 s cold, 114 s for a new path and 80 s warm at the 3B shape: ``trace-repro plan
--estimate --engine-caches`` charges the difference.

Starts of ``trace-repro generate`` (one engine, ``--rows`` rows of one benchmark, no scoring, dummy weights at the
``--shape`` release's layers), each in a new process, as a campaign's workers are, one after another:

- ``first``: model A, with the caches as the machine has them (a fresh machine: none);
- ``again``: model A once more, every cache warm;
- ``new-path``: model B, A's files at another path: vLLM's compile cache misses, Inductor's and Triton's hit;
- ``no-cache``: model A with empty ``VLLM_CACHE_ROOT``, ``TORCHINDUCTOR_CACHE_DIR`` and ``TRITON_CACHE_DIR``:
  every compile cache missing on a machine that has started engines before;
- ``beside`` (asked for by name, after ``first`` or ``again``): model A warm once more, while another ``generate``
  of model A generates ``--load-rows`` rows on the same GPU: how long a worker's later start takes beside a
  generating neighbour, against the start alone (``again``): ``plan --estimate``'s ``beside_factor``.

Printed per start: the caches it found (``cold``, ``new-model`` or ``warm``, read from what it wrote into vLLM's
cache root: ``trace_lib.generation.backends.vllm_caches``), seconds until the engine is up (the worker's drift
line, as ``mini_campaign.py`` times it), the run's wall seconds, and vLLM's own figures read from the log (weights,
torch.compile, CUDA graphs, the engine's init) and whether it loaded compiled graphs from its cache.
``--calibration FILE`` records the first start found in each state as ``engine_start`` (the warm start and what the
others add to it, for ``trace-repro plan --estimate --engine-caches STATE``) and, with ``again`` and ``beside``,
their ratio as ``beside_factor``. ``--dry-run`` runs the stub ``vllm`` package (no figures, a check of the
script).

    python benchmarks/engine_start.py --work-dir DIR [--shape 3b|7b] [--starts first,again,new-path,no-cache]
        [--rows 8] [--load-rows 4000] [--generation-memory auto|SHARE] [--timeout 300] [--calibration FILE]
        [--dry-run]

``--generation-memory auto`` (the default) gives each engine run 38's 0.26 of the GPU, or more where the shape's
weights, vLLM's overhead and :data:`KV_SEQUENCES` sequences of ``--max-model-len`` need more (the 7B shape on an
80 GB GPU, where 0.26 leaves too little KV cache for one 32,768-token sequence). A start that fails is a row that
says so, and the script exits 1.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import mini_campaign as mc  # noqa: E402

from trace_lib.campaign.engines import engine_need_bytes, model_size  # noqa: E402
from trace_lib.campaign.estimate import DEFAULT_RATES, record_calibration  # noqa: E402
from trace_lib.generation.backends.vllm_caches import caches_found, snapshot, vllm_cache_root  # noqa: E402

STARTS = ("first", "again", "new-path", "no-cache", "beside")
DEFAULT_STARTS = STARTS[:4]
WARMS_MODEL_A = ("first", "again")  # starts after which model A is compiled in the machine's caches
BENCHMARK = "realworldqa"  # no judge: nothing but generation runs
#: vLLM 0.24's log lines (engine core and model runner), one figure each.
VLLM_FIGURES = {
    "weights_s": re.compile(r"Model loading took [\d.]+ GiB(?: memory)? and ([\d.]+) seconds"),
    "compile_s": re.compile(r"torch\.compile took ([\d.]+) s in total"),
    "graphs_s": re.compile(r"Graph capturing finished in ([\d.]+) secs"),
    "init_engine_s": re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
}
CACHE_HIT = "Directly load the compiled graph(s)"
CACHE_ENV = ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
DEFAULT_SHARE = 0.26  # run 38's, on an H200: room for a neighbour (beside)
KV_SEQUENCES = 4  # full-length sequences an engine's KV cache must hold under --generation-memory auto


@dataclass
class Start:
    """One measured start: its name, the caches it found, seconds to the engine up, the run's wall seconds, vLLM's
    figures."""

    name: str
    caches: str
    up_s: float | None
    wall_s: float
    weights_s: float | None = None
    compile_s: float | None = None
    graphs_s: float | None = None
    init_engine_s: float | None = None
    compile_cache_hit: bool = False
    note: str = ""
    exit_code: int = 0  # the start's generate, or the neighbour's of a beside start
    overlapped: bool = True  # beside: the neighbour still generated when this start was up


def vllm_figures(log: str) -> dict:
    """vLLM's own start-up figures in ``log`` (:data:`VLLM_FIGURES`; None where a line is absent) and whether it
    loaded compiled graphs from its cache."""
    out: dict = {name: (float(m.group(1)) if (m := pattern.search(log)) else None)
                 for name, pattern in VLLM_FIGURES.items()}
    out["compile_cache_hit"] = CACHE_HIT in log
    return out


def _generate(name: str, model: Path, data_root: Path, ctx: dict) -> tuple[list[str], Path]:
    """The argv of one engine's ``generate`` into a fresh ``campaign-<name>``, and its log's path."""
    args, work = ctx["args"], ctx["work"]
    campaign = work / f"campaign-{name}"
    shutil.rmtree(campaign, ignore_errors=True)
    argv = [*mc.generate_argv(ctx["release"], model, campaign, data_root, [BENCHMARK]), "--backend", "vllm",
            "--engines-per-group", "1", "--gpu-memory-utilization", str(args.generation_memory),
            "--max-model-len", str(args.max_model_len)]
    return argv, work / f"generate-{name}.log"


def measure(name: str, ctx: dict) -> Start:
    """Start ``name`` (module docstring) once and read its figures."""
    if name == "beside":
        return measure_beside(ctx)
    env = dict(ctx["env"], TRACE_VLLM_LOAD_FORMAT="dummy")
    if name == "no-cache":
        empty = ctx["work"] / "empty-caches"
        shutil.rmtree(empty, ignore_errors=True)
        env.update({var: str(empty / var.lower()) for var in CACHE_ENV})
    return _start(name, ctx["models"]["b" if name == "new-path" else "a"], env, ctx)


def _start(name: str, model: Path, env: dict, ctx: dict) -> Start:
    """One ``generate`` of ``model``'s ``--rows`` rows, timed: the caches it found and vLLM's figures."""
    argv, log = _generate(name, model, ctx["data_root"], ctx)
    root = vllm_cache_root(env)
    before = snapshot(root)
    wall, ups, code = mc.run_timed(argv, env, log, ctx["args"].timeout)
    return Start(name, caches_found(before, snapshot(root)), ups[0] if ups else None, wall,
                 **vllm_figures(log.read_text(errors="replace")),
                 note=f"failed: generate exited {code} (log {log})" if code else "", exit_code=code)


def measure_beside(ctx: dict) -> Start:
    """``beside``: once a neighbour ``generate`` of model A (``--load-rows`` rows) has its engine up, model A's
    warm start as ``again`` measures it; noted when the neighbour was done before that start was up."""
    args = ctx["args"]
    load_data = ctx["work"] / "data-load"
    mc.build_data(ctx["release"], load_data, [BENCHMARK], args.load_rows)
    env = dict(ctx["env"], TRACE_VLLM_LOAD_FORMAT="dummy")
    argv, log = _generate("beside-load", ctx["models"]["a"], load_data, ctx)
    load = mc.TimedRun(argv, env, log)
    try:
        while not load.ups and load.proc.poll() is None and time.monotonic() - load.t0 < args.timeout:
            time.sleep(0.5)
        if not load.ups:
            load.wait(args.timeout)  # ended or out of time: stopped, and why raised
            raise SystemExit(f"beside: the neighbour's engine never came up (log {log})")
        print(f"[beside] neighbour engine up at {load.ups[0]:.1f} s; starting beside it", flush=True)
        t = time.monotonic()
        start = _start("beside", ctx["models"]["a"], env, ctx)
        load_s, _, code = load.wait(args.timeout)
    finally:
        load.stop()  # if it still runs: this script stopped, or the start failed
    notes = [start.note] if start.note else []
    notes += [f"the neighbour exited {code} (log {log})"] if code else []
    done_before = t + (start.up_s or 0.0) - (load.t0 + load_s)
    if start.up_s is not None and done_before > 0:
        notes.append(f"the neighbour was done {done_before:.0f} s before this start was up: raise --load-rows")
    return replace(start, note="; ".join(notes), exit_code=start.exit_code or code,
                   overlapped=not (start.up_s is not None and done_before > 0))


def _came_up(start: Start | None) -> bool:
    return start is not None and start.up_s is not None and not start.exit_code


def beside_factor(starts: list[Start]) -> float | None:
    """The ``beside`` start over the ``again`` start alone; None unless both came up and the neighbour generated
    throughout."""
    by_name = {s.name: s for s in starts}
    beside, alone = by_name.get("beside"), by_name.get("again")
    if not (_came_up(beside) and _came_up(alone) and beside.overlapped):
        return None
    return beside.up_s / alone.up_s


def calibration_section(starts: list[Start], stamp: dict) -> dict:
    """``engine_start``'s values: the first start measured in each cache state (seconds to the engine up), and
    :func:`beside_factor` where there is one."""
    section: dict = {}
    for s in starts:
        if _came_up(s) and s.name != "beside":  # beside a neighbour: not a start in a cache state
            section.setdefault(s.caches, round(s.up_s, 1))
    if (factor := beside_factor(starts)) is not None:
        section["beside_factor"] = round(factor, 3)
    return {**section, **stamp} if section else {}


def table(starts: list[Start]) -> list[str]:
    """The printed table: one row per start, each against the first."""
    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    first = starts[0].up_s if starts else None
    lines = ["| start | caches | engine up s | vs first | wall s | weights s | torch.compile s | CUDA graphs s "
             "| init engine s | compiled graphs from cache |", "| --- " * 10 + "|"]
    for s in starts:
        ratio = f"{s.up_s / first:.2f}" if s.up_s and first else "-"
        lines.append(f"| {s.name} | {s.caches} | {cell(s.up_s)} | {ratio} | {s.wall_s:.1f} | {cell(s.weights_s)} | "
                     f"{cell(s.compile_s)} | {cell(s.graphs_s)} | {cell(s.init_engine_s)} | "
                     f"{'yes' if s.compile_cache_hit else 'no'} |")
    by_name = {s.name: s for s in starts}
    if (factor := beside_factor(starts)) is not None:
        lines.append(f"beside a generating engine / alone (again): {factor:.2f} ({by_name['beside'].up_s:.1f} s "
                     f"against {by_name['again'].up_s:.1f} s; plan --estimate's default "
                     f"{DEFAULT_RATES.start_beside_factor:g})")
    lines += [f"note ({s.name}): {s.note}" for s in starts if s.note]
    return lines


def generation_share(model: Path, max_model_len: int, gpu_total_bytes: int | None) -> float:
    """``--generation-memory auto``: :data:`DEFAULT_SHARE`, or the share of a ``gpu_total_bytes`` GPU that holds
    ``model``'s weights, vLLM's overhead and :data:`KV_SEQUENCES` sequences of ``max_model_len`` tokens, if more
    (rounded up to 0.01); the default where the GPU's size is unknown."""
    if not gpu_total_bytes:
        return DEFAULT_SHARE
    need = engine_need_bytes(model_size(model), KV_SEQUENCES * max_model_len)
    return max(DEFAULT_SHARE, math.ceil(100 * need / gpu_total_bytes) / 100)


def _share(text: str) -> float | None:
    if text == "auto":
        return None
    try:
        share = float(text)
    except ValueError:
        share = -1.0
    if not 0 < share <= 1:
        raise argparse.ArgumentTypeError(f"auto or a share of the GPU in (0, 1]; got {text!r}")
    return share


def _starts(text: str) -> list[str]:
    names = [n for n in text.split(",") if n]
    unknown = sorted(set(names) - set(STARTS))
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"starts are {', '.join(STARTS)}; got {text!r}")
    if "beside" in names and not set(names[:names.index("beside")]) & set(WARMS_MODEL_A):
        raise argparse.ArgumentTypeError(f"beside starts model A warm: put {' or '.join(WARMS_MODEL_A)} before it")
    return names


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--shape", choices=("3b", "7b"), default="3b")
    parser.add_argument("--starts", type=_starts, default=list(DEFAULT_STARTS), metavar="NAME[,NAME...]",
                        help=f"of {', '.join(STARTS)} (default: {','.join(DEFAULT_STARTS)})")
    parser.add_argument("--rows", type=int, default=8, help="rows generated after each start")
    parser.add_argument("--load-rows", type=int, default=4000,
                        help="rows the neighbour of the beside start generates (it must outlast that start)")
    parser.add_argument("--generation-memory", type=_share, default=None, metavar="auto|SHARE",
                        help="each engine's share of the GPU (default auto: module docstring)")
    parser.add_argument("--max-model-len", type=int, default=32768, help="upstream's 32768")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds one start's run may take")
    parser.add_argument("--calibration", default=None, metavar="FILE",
                        help="record the start in each cache state here (trace-repro plan --estimate)")
    parser.add_argument("--dry-run", action="store_true", help="the stub vllm package (no figures)")
    parser.add_argument("--trace-root", default=None)
    args = parser.parse_args(argv)
    from trace_lib.release.locate import locate_release

    release = locate_release(args.trace_root)
    work = Path(args.work_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    data_root = work / "data"
    mc.build_data(release, data_root, [BENCHMARK], args.rows)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               VLLM_WORKER_MULTIPROC_METHOD="spawn")
    if args.dry_run:
        from trace_lib.testing.stub_vllm import write_stub_vllm_package

        write_stub_vllm_package(work / "stub-vllm")
        env["PYTHONPATH"] = os.pathsep.join([str(work / "stub-vllm"), env["PYTHONPATH"]])
        env["CUDA_VISIBLE_DEVICES"] = "0"
    ctx = {"args": args, "release": release, "work": work, "data_root": data_root, "env": env,
           "models": {name: mc.model_dir(work, args.dry_run, args.shape, f"-{name}") for name in ("a", "b")}}
    if args.generation_memory is None:
        from trace_lib.reports.status import query_gpus

        totals = [g["memory_total_mib"] * 2**20 for g in query_gpus()] if not args.dry_run else []
        args.generation_memory = generation_share(ctx["models"]["a"], args.max_model_len, min(totals, default=None))
        print(f"[memory] each engine gets {args.generation_memory:g} of the GPU "
              f"({min(totals, default=0) / 2**30:.1f} GiB; --generation-memory auto)", flush=True)
    starts = []
    for name in args.starts:
        t = time.monotonic()
        starts.append(measure(name, ctx))
        up = starts[-1].up_s
        print(f"[{name}] engine up in {'-' if up is None else f'{up:.1f}'} s; run {time.monotonic() - t:.0f} s",
              flush=True)
    (work / "engine_start.json").write_text(json.dumps([asdict(s) for s in starts], indent=2), encoding="utf-8")
    print("\n".join(table(starts)), flush=True)
    if args.calibration and not args.dry_run:
        import datetime as dt

        stamp = {"measured_by": "benchmarks/engine_start.py",
                 "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
        section = calibration_section(starts, {"shape": args.shape, **stamp})
        if "warm" in section:  # plan --estimate sets the other states against the warm start
            record_calibration(Path(args.calibration), "engine_start", section)
            print(f"[calibration] engine_start -> {args.calibration}", flush=True)
        else:
            print("[calibration] not written: no start that came up found the caches warm (run 'again')",
                  flush=True)
    failed = [s.name for s in starts if s.exit_code]
    if failed:
        print(f"[engine_start] failed start(s): {', '.join(failed)} (notes above)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
