"""``trace-repro generate``: generate every planned slice that is not complete yet, resumably.

One engine per model per GPU group: with several ``--gpu-groups`` and the vllm backend, one worker process per
group is started (``CUDA_VISIBLE_DEVICES`` = the group) and the slices are shared among them, each benchmark (all
its seeds) on one worker, balanced by rows, a model new to a worker counting an engine start, the workers of a
group holding the same models where they can (:func:`~trace_lib.campaign.plan.worker_shares`).
``--engines-per-group N`` starts N such workers per group, each engine with 1/N of the GPU memory: a single
engine leaves the GPU idle between its steps on image-heavy campaigns, and two engines on one H200 fill those
gaps (``benchmarks/campaign_throughput.py``). Responses go to
``<campaign-root>/generation/seed_<S>/<model>/<benchmark>.jsonl`` (see ``trace_lib.generation.store``); a
killed run resumes where it stopped. Exit 0 when every planned slice is complete, 1 when some slice failed, 3 when
an engine found its GPU's memory taken (one line naming the free and asked GiB) or died while it generated (a line
per unfinished slice; its answers kept); a worker that failed so beside other engines on its group runs its share
again alone once they have exited (:func:`supervise_workers`). Ctrl-C or SIGTERM stops it within moments (requests
in flight are cancelled, every answer received is stored): one line, exit 130 or 143.

By default the campaign scheduler (``trace_lib.campaign.scheduler``) streams the pending rows of every selected
slice of a model (all seeds and benchmarks) through the model's engine, so the engine never idles between
slices; ``--schedule per-slice`` generates one slice after another instead. With ``--ray-address ADDR|auto`` the
engines are Ray actors on every node of that cluster (one per GPU group, tensor parallel inside a node; see
``trace_lib.generation.backends.ray_engines``; ``--engines-per-group N`` puts N single-GPU engine actors on each
GPU) and this process stays the single writer of the stores; the model and data paths must be the same on every
node (a shared filesystem).

``--score [overlap|phased] --judge-url URL`` also scores the slices (the campaign scorer, as ``trace-repro score
--campaign-root``): ``overlap`` (the default) each slice the moment its last row is stored, while generation goes
on; ``phased`` (upstream's order) once every slice is generated and every engine closed (with several workers, in
this process after they all exited). ``TRACE_VLLM_LOAD_FORMAT=dummy`` (benchmarks only) loads random weights from
a config-only model directory (with ``--model-verify none``); the store headers say so and those responses get no
verdict.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from trace_lib import options
from trace_lib.campaign.plan import Plan, add_plan_options, plan_from_options, render_gpu_groups, worker_shares
from trace_lib.errors import EngineStartError, TraceReproError, UsageError
from trace_lib.exitcodes import ExitCode
from trace_lib.interrupts import stoppable
from trace_lib.release.locate import locate_release

#: Backends that load the model's local directory (``--model ... LOCAL_PATH``): checked before they start, under
#: ``--model-verify none`` too (``data.model_dirs.local_model_problems``), so none reaches a hub or reads a FIFO;
#: with ``--ray-address`` the directory is the engine nodes', which ``none`` leaves to them.
LOCAL_CHECKPOINT_BACKENDS = ("vllm", "hf")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("generate", help="generate responses for planned slices (resumable)",
                                   description=__doc__)
    add_plan_options(parser.add_argument)
    options.add_to_argparse(parser, options.TRACE_ROOT, options.CAMPAIGN_ROOT, options.BACKEND, options.BASE_URL,
                            options.DEVICE, options.SCHEDULE, options.RAY_ADDRESS, options.MODEL_VERIFY)
    parser.add_argument("--concurrency", type=options.positive_int, default=None,
                        help="openai backend: requests in flight")
    parser.add_argument("--max-model-len", type=options.positive_int, default=None,
                        help="vllm backend (default: upstream's 32768)")
    parser.add_argument("--max-num-seqs", type=options.positive_int, default=None,
                        help="vllm backend (default: upstream's 256)")
    parser.add_argument("--gpu-memory-utilization", type=options.unit_fraction, default=None,
                        help="vllm backend (default: upstream's 0.90)")
    parser.add_argument("--enforce-eager", action="store_true", default=None, help="vllm backend: no CUDA graphs")
    parser.add_argument("--engines-per-group", type=options.engines_per_group, default=1, metavar="N|auto",
                        help="vllm backend: N engine processes share each GPU group, each with 1/N of "
                             "--gpu-memory-utilization and its own benchmarks (default 1; 2 keeps one GPU busier "
                             "when a single engine leaves it idle between steps; auto: from the model's size and "
                             "the GPU's free memory, trace_lib.campaign.engines)")
    parser.add_argument("--unprepared-data", action="store_true",
                        help="generate from data files not recorded in the dataset manifest (tests, debugging); "
                             "the responses are then not bound to a dataset snapshot")
    parser.add_argument("--batch-size", type=options.positive_int, default=64,
                        help="rows per durable append (default 64)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--score", nargs="?", const="overlap", default=None, choices=SCORE_ORDERS,
                        help="score the slices on CPU worker threads, as 'trace-repro score --campaign-root' would "
                             "(judge routes need --judge-url): 'overlap' (the default) scores each slice the moment "
                             "its last row is stored, while generation goes on; 'phased' (upstream's order, pytest's "
                             "--phase all) scores once every slice is generated and every engine closed")
    parser.add_argument("--score-workers", type=options.positive_int, default=2, help="scoring threads (default 2)")
    options.add_to_argparse(parser, options.JUDGE_URL)
    options.add_to_argparse(parser, options.REQUEST_TIMEOUT)
    parser.add_argument("--worker", default=None, metavar="I/N", help=argparse.SUPPRESS)
    parser.set_defaults(run=stoppable(run, label="generate"))


#: ``--score`` orders: each slice as its last row is stored (judging overlaps generation), or all after generation.
SCORE_ORDERS = ("overlap", "phased")


def _resolve_engines(args: argparse.Namespace, plan: Plan, release) -> int:  # noqa: ANN001 - a ReleaseRoot
    """``--engines-per-group`` as a number (``auto`` decided here, once, and logged)."""
    if args.engines_per_group != "auto":
        return args.engines_per_group
    if args.backend != "vllm":
        return 1
    from trace_lib.campaign.engines import choose_engines
    from trace_lib.campaign.estimate import plan_work
    from trace_lib.generation.backends.vllm import GPU_MEMORY_UTILIZATION

    rows = sum(work.rows for work in plan_work(plan, release))  # the suite's rows: what a prepared slice holds
    choice = choose_engines([Path(m.local_path) for m in plan.models], plan.gpu_groups,
                            gpu_memory_utilization=args.gpu_memory_utilization or GPU_MEMORY_UTILIZATION,
                            max_num_seqs=args.max_num_seqs, rows_per_group=rows // max(1, len(plan.gpu_groups)))
    print(f"[generate] --engines-per-group auto: {choice.reason}", file=sys.stderr)
    return choice.engines


def _with_engines(argv: list[str], engines: int) -> list[str]:
    """``argv`` with ``--engines-per-group auto`` replaced by the number chosen (workers must not re-decide
    once their siblings hold GPU memory)."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--engines-per-group=auto":
            out[i] = f"--engines-per-group={engines}"
        elif arg == "--engines-per-group" and i + 1 < len(out) and out[i + 1] == "auto":
            out[i + 1] = str(engines)
    return out


def _without_score(argv: list[str]) -> list[str]:
    """``argv`` without ``--score [ORDER]`` (the workers of a phased run only generate)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            if arg in SCORE_ORDERS:
                continue
        if arg == "--score":
            skip = True
            continue
        if arg.startswith("--score="):
            continue
        out.append(arg)
    return out


def _worker_share(args: argparse.Namespace) -> tuple[int, int]:
    if not args.worker:
        return 0, 1
    try:
        index, count = (int(x) for x in args.worker.split("/"))
    except ValueError:
        raise UsageError("invalid worker spec", field="--worker", found=args.worker, expected="I/N") from None
    if not 0 <= index < count:
        raise UsageError("invalid worker spec", field="--worker", found=args.worker)
    return index, count


def worker_commands(plan: Plan, argv: list[str], engines_per_group: int) -> list[tuple[list[str], str]]:
    """``(command, CUDA_VISIBLE_DEVICES)`` of each ``generate --worker i/N`` process: ``engines_per_group`` per GPU
    group, numbered group by group."""
    count = len(plan.gpu_groups) * engines_per_group
    return [([sys.executable, "-m", "trace_lib", *argv, "--worker", f"{g * engines_per_group + e}/{count}"],
             options.cuda_visible_devices(group))
            for g, group in enumerate(plan.gpu_groups) for e in range(engines_per_group)]


def _spawn_workers(plan: Plan, argv: list[str], engines_per_group: int) -> ExitCode:
    """Run the ``generate --worker i/N`` processes (:func:`worker_commands`) to the end
    (:func:`supervise_workers`; a worker's share is run again alone only where engines share a GPU group)."""
    return supervise_workers(worker_commands(plan, argv, engines_per_group), rerun_alone=engines_per_group > 1)


def supervise_workers(commands: list[tuple[list[str], str]], *, rerun_alone: bool) -> ExitCode:
    """Start every ``(command, CUDA_VISIBLE_DEVICES)`` worker, wait for all of them, and, with ``rerun_alone``,
    run once more, one at a time, each worker that exited SYSTEM (its engine found its GPU's memory taken, or ran
    out of it and stopped: by the other engines on its group, which are gone by then; what it stored is resumed).
    OK when every worker ended OK, SYSTEM when one still ended SYSTEM, else FINDINGS; one line per worker that did
    not end OK."""
    procs = []
    for index, (cmd, gpus) in enumerate(commands):
        print(f"[generate] worker {index}: GPUs {gpus}", file=sys.stderr)
        procs.append(subprocess.Popen(cmd, env=dict(os.environ, CUDA_VISIBLE_DEVICES=gpus)))
    codes = _wait_all(procs)
    for index, code in enumerate(codes):
        if code == ExitCode.SYSTEM and rerun_alone:
            cmd, gpus = commands[index]
            print(f"[generate] worker {index} (GPUs {gpus}) exited {code}: the machine failed under it (its line "
                  "above says how; most often its engine found the GPU's memory taken by the others); running its "
                  "share again alone", file=sys.stderr)
            codes[index] = _wait_all([subprocess.Popen(cmd, env=dict(os.environ, CUDA_VISIBLE_DEVICES=gpus))])[0]
    failed = {i: c for i, c in enumerate(codes) if c != ExitCode.OK}
    for index, code in failed.items():
        print(f"[generate] worker {index} (GPUs {commands[index][1]}) exited {code}: its slices are incomplete "
              "(its lines above say why; re-run to resume)", file=sys.stderr)
    print(f"[generate] {len(codes) - len(failed)}/{len(codes)} worker(s) done", file=sys.stderr)
    if not failed:
        return ExitCode.OK
    return ExitCode.SYSTEM if ExitCode.SYSTEM in failed.values() else ExitCode.FINDINGS


def _wait_all(procs: list[subprocess.Popen]) -> list[int]:
    """Every process's exit code; Ctrl-C stops them all (terminate, wait) and goes on up."""
    from trace_lib.interrupts import pause

    try:
        for p in procs:
            while p.poll() is None:
                pause(0.2)  # not p.wait(): a stop signal Python discarded is raised here again
        return [p.returncode for p in procs]
    except KeyboardInterrupt:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        raise


def _backend_options(args: argparse.Namespace, plan: Plan) -> dict:
    """The campaign's backend options (:func:`~trace_lib.campaign.run_slice.backend_options`) plus the engine
    flags given on the command line (unset flags keep the backend's upstream defaults)."""
    from trace_lib.campaign.run_slice import backend_options

    chosen = backend_options(args.backend, plan, base_url=options.resolve(args, options.BASE_URL),
                             device=options.resolve(args, options.DEVICE),
                             request_timeout=options.resolve(args, options.REQUEST_TIMEOUT))
    flags = {
        "vllm": ("max_model_len", "max_num_seqs", "gpu_memory_utilization", "enforce_eager"),
        "openai": ("concurrency",),
    }.get(args.backend, ())
    chosen.update({name: getattr(args, name) for name in flags if getattr(args, name) is not None})
    engines = getattr(args, "engines_per_group", 1)
    if args.backend == "vllm" and engines > 1:  # the group's memory is shared by its engines
        from trace_lib.generation.backends.vllm import GPU_MEMORY_UTILIZATION

        chosen["gpu_memory_utilization"] = chosen.get("gpu_memory_utilization", GPU_MEMORY_UTILIZATION) / engines
    return chosen


def run(args: argparse.Namespace) -> ExitCode:
    from trace_lib.data.manifest import load_manifest, manifest_path
    from trace_lib.data.model_dirs import local_model_problems, verify_model_dir
    from trace_lib.generation.backends.base import create_backend
    from trace_lib.environment.engine import engine_drift_text, generation_engine

    args.backend = options.resolve(args, options.BACKEND)
    args.schedule = options.check_schedule(options.resolve(args, options.SCHEDULE))
    args.model_verify = options.resolve(args, options.MODEL_VERIFY)
    options.check_choice(args.model_verify, options.MODEL_VERIFY_MODES, field=options.MODEL_VERIFY.flag,
                         what="--model-verify mode")
    from trace_lib.generation.backends.base import BACKENDS

    options.check_choice(args.backend, list(BACKENDS), field="--backend", what="backend")
    release = locate_release(options.given(args, options.TRACE_ROOT))
    plan = plan_from_options(release, args, with_judge=False)
    if plan.campaign_root is None:
        raise UsageError("no campaign root", field="--campaign-root", hint="pass --campaign-root DIR or set "
                         "TRACE_CAMPAIGN_ROOT")
    from trace_lib.outputs import check_output_dir

    check_output_dir(plan.campaign_root, flag="--campaign-root")  # before any engine or request
    from trace_lib.data.prepare import load_artifact_sources

    sources = load_artifact_sources(release)
    index, count = _worker_share(args)
    ray_address = options.resolve(args, options.RAY_ADDRESS)
    engines = args.engines_per_group = _resolve_engines(args, plan, release)
    if args.request_timeout is not None and args.backend != "openai":
        raise UsageError("a request timeout needs the openai backend", field="--request-timeout",
                         found=args.request_timeout, hint="drop it, or pass --backend openai")
    if engines > 1 and args.backend != "vllm":
        raise UsageError("several engines per GPU group need the vllm backend", field="--engines-per-group",
                         found=engines)
    if args.backend == "vllm" and len(plan.gpu_groups) * engines > 1 and count == 1 and not ray_address:
        print(f"[generate] {len(plan.gpu_groups)} GPU group(s) ({render_gpu_groups(plan.gpu_groups)}): "
              f"{engines} worker(s) per group", file=sys.stderr)
        if "generate" not in sys.argv[1:]:
            raise UsageError("several engine workers need the command line entry point", field="--gpu-groups",
                             hint="run 'trace-repro generate ...' (it starts the workers)")
        argv = _with_engines(sys.argv[sys.argv.index("generate", 1):], engines)
        if args.score != "phased":  # each worker scores its own slices as they complete
            return _spawn_workers(plan, argv, engines)
        # upstream's order: every worker generates (and exits, freeing its engine), then this process scores
        scoring = _Scoring(args, plan.campaign_root, Path(plan.data_root).resolve(), sources, plan.slices)
        code = _spawn_workers(plan, _without_score(argv), engines)
        failures = scoring.score_stored(plan.slices)
        print(f"[generate] scored {len(plan.slices) - len(failures)}/{len(plan.slices)} slice(s)"
              + (f"; not scored: {' '.join(failures)}" if failures else ""))
        return ExitCode.FINDINGS if failures or code != ExitCode.OK else ExitCode.OK

    data_root = Path(plan.data_root).resolve()
    mpath = manifest_path(data_root)
    manifest = load_manifest(mpath) if mpath.exists() else None
    mine = worker_shares(plan, count, per_group=engines)[index]
    failures: list[str] = []
    machine_failed = False  # an engine refused its GPU's memory or stopped: exit SYSTEM (the supervisor may rerun us)
    # slices are scored on CPU threads while generation goes on (--score overlap) or after it (--score phased); each
    # engine is closed as soon as its model is done
    scoring = _Scoring(args, plan.campaign_root, data_root, sources, mine) if args.score else None
    try:
        for model in plan.models:
            slices = [s for s in mine if s.model == model.slug]
            if not slices:
                continue
            if args.backend in LOCAL_CHECKPOINT_BACKENDS and not (ray_address and args.model_verify == "none"):
                problems = (verify_model_dir(model, deep=args.model_verify == "deep").problems
                            if args.model_verify != "none" else local_model_problems(Path(model.local_path)))
                if problems:
                    for problem in problems:
                        print(f"[generate] {model.slug}: {problem}", file=sys.stderr)
                    failures += [s.id for s in slices]
                    continue
            backend_opts = _backend_options(args, plan)
            try:
                if ray_address:
                    from trace_lib.generation.backends.ray_engines import ray_engines

                    backend = ray_engines(args.backend, model_path=model.local_path, served_name=model.slug,
                                          address=ray_address, options=backend_opts,
                                          tensor_parallel_size=plan.tp_size, engines_per_gpu=engines)
                    print(f"[generate] {model.slug}: {len(backend.actors)} engine actor(s) on Ray nodes "
                          f"{' '.join(sorted(set(backend.nodes)))}", file=sys.stderr)
                else:
                    backend = create_backend(args.backend, model_path=model.local_path, served_name=model.slug,
                                             **backend_opts)
            except EngineStartError as exc:  # this model's slices fail; the next model may still start
                print(f"[generate] {model.slug}: error: {exc.render()}", file=sys.stderr)
                failures += [s.id for s in slices]
                machine_failed = machine_failed or exc.machine_failure
                continue
            engine = generation_engine(release, args.backend, base_url=backend_opts.get("base_url"))
            if engine.get("matches_paper") is not True:
                print(f"[generate] {model.slug}: {engine_drift_text(engine)}", file=sys.stderr)
            try:
                jobs = []
                for slice_ in slices:
                    try:
                        jobs.append(_slice_job(slice_, plan, model, sources, manifest, data_root, args, engine))
                    except TraceReproError as exc:
                        failures.append(slice_.id)
                        print(f"[generate] {slice_.id}: error: {exc.render()}", file=sys.stderr)
                if args.schedule == "per-slice":
                    results = [_run_one(job, backend, args, scoring) for job in jobs]
                else:
                    results = _stream(jobs, backend, model.slug, args, scoring)
                failures += [r.slice.id for r in results if not r.ok]
                machine_failed = machine_failed or any(getattr(r.error, "machine_failure", False) for r in results)
            finally:
                backend.close()
    except BaseException:
        if scoring is not None:
            scoring.deferred.clear()  # phased: nothing is scored after a generation that crashed or was stopped
        raise
    finally:
        if scoring is not None:
            failures += scoring.wait()
    done = len(mine) - len(failures)
    print(f"[generate] {done}/{len(mine)} slice(s) complete" + (f"; failed: {' '.join(failures)}" if failures else ""))
    if machine_failed:
        return ExitCode.SYSTEM
    return ExitCode.FINDINGS if failures else ExitCode.OK


def _slice_job(slice_, plan, model, sources, manifest, data_root, args, engine):  # noqa: ANN001, ANN202
    """The scheduler job of one slice (:func:`~trace_lib.campaign.jobs.slice_job`; ``engine`` recorded in its
    store's header).

    Raises:
        UsageError: the benchmark is not prepared (and ``--unprepared-data`` is not given).
        ProtocolNotImplementedError: the benchmark has no protocol.
    """
    from trace_lib.benchmarks.registry import get_protocol
    from trace_lib.campaign.jobs import dataset_entry, slice_job

    entry = dataset_entry(manifest, slice_.benchmark, allow_unprepared=args.unprepared_data)
    return slice_job(slice_, get_protocol(slice_.benchmark), model=model, source=sources[slice_.benchmark],
                     campaign_root=plan.campaign_root, data_root=data_root, generation=plan.suite.generation,
                     dataset=entry, engine=lambda: engine, expected_rows=plan.rows(slice_))


def _report(result) -> None:  # noqa: ANN001
    if result.ok:
        print(f"[generate] {result.run.summary()}", flush=True)
    else:
        message = result.error.render() if isinstance(result.error, TraceReproError) else repr(result.error)
        print(f"[generate] {result.slice.id}: error: {message}", file=sys.stderr, flush=True)


def _run_one(job, backend, args, scoring=None):  # noqa: ANN001, ANN202
    """The per-slice path: one slice through :func:`~trace_lib.campaign.jobs.run_job`."""
    from trace_lib.campaign.jobs import run_job
    from trace_lib.campaign.scheduler import SliceResult

    try:
        run, _ = run_job(job, backend, progress=not args.no_progress, batch_size=args.batch_size)
        result = SliceResult(job.slice, run=run)
    except TraceReproError as exc:
        result = SliceResult(job.slice, error=exc)
    _report(result)
    if scoring is not None:
        scoring.submit(result)
    return result


def _stream(jobs, backend, description: str, args, scoring=None):  # noqa: ANN001, ANN202
    """Every job of one model through the campaign scheduler, one summary line per slice as it completes."""
    from trace_lib.campaign.scheduler import CampaignProgress, CampaignScheduler

    progress = None
    if not args.no_progress:
        progress = CampaignProgress(description, expected_rows=sum(j.expected_rows or 0 for j in jobs),
                                    slices=len(jobs))
    def complete(result) -> None:  # noqa: ANN001
        _report(result)
        if scoring is not None:
            scoring.submit(result)

    scheduler = CampaignScheduler(backend, batch_size=args.batch_size, on_complete=complete, progress=progress)
    return scheduler.run(jobs)


class _Scoring:
    """Scores completed slices on worker threads (``--score``): one ``[score]`` line per slice.

    Raises:
        UsageError: a planned benchmark is judged and no judge URL is set (before anything is generated).
        JudgeError: the judge endpoint does not serve the judge.
    """

    def __init__(self, args, campaign_root, data_root, sources, slices) -> None:  # noqa: ANN001
        from concurrent.futures import ThreadPoolExecutor

        from trace_lib.benchmarks.registry import get_protocol
        from trace_lib.campaign.scorer import CampaignScorer

        judge_url = options.resolve(args, options.JUDGE_URL)
        judged = sorted({s.benchmark for s in slices if get_protocol(s.benchmark).judge != "none"})
        if judged and not judge_url:
            raise UsageError(f"judge URL not set (--judge-url / TRACE_JUDGE_URL) for judge route {judged[0]}",
                             field="--score", hint="pass --judge-url URL, or drop --score and run 'trace-repro "
                                                   "score' later")
        self.scorer = CampaignScorer(campaign_root, data_root, sources, judge_url)
        if judged:
            self.scorer.judge.check()  # an unreachable judge stops the run here, before any row is generated
        self.pool = ThreadPoolExecutor(max_workers=args.score_workers, thread_name_prefix="trace-repro-score")
        self.phased = args.score == "phased"
        self.deferred: list = []  # phased: (slice, responses path) of every completed slice, scored in wait()
        self.futures: list = []

    def submit(self, result) -> None:  # noqa: ANN001
        """A completed slice: scored now (overlap) or once generation is over (phased)."""
        if result.ok:
            if self.phased:
                self.deferred.append((result.slice, result.run.path))
            else:
                self._submit(result.slice, result.run.path)

    def _submit(self, slice_, path) -> None:  # noqa: ANN001
        self.futures.append((slice_, self.pool.submit(self._score, slice_, path)))

    def _score(self, slice_, path) -> str:  # noqa: ANN001
        scored = self.scorer.score(slice_, path)
        return f"[score] {slice_.id}: {scored.score.score:.3f} over {scored.score.rows} rows -> {scored.scores_path}"

    def score_stored(self, slices) -> list[str]:  # noqa: ANN001
        """Phased scoring after worker processes generated ``slices``: each one whose response file exists is
        scored; returns the ids not scored (no file, incomplete, or an error)."""
        from trace_lib.generation.store import response_path

        missing = []
        for slice_ in slices:
            path = response_path(self.scorer.campaign_root, model=slice_.model, seed=slice_.seed,
                                 benchmark=slice_.benchmark)
            if path.is_file():
                self.deferred.append((slice_, path))
            else:
                missing.append(slice_.id)
        return missing + self.wait()

    def wait(self) -> list[str]:
        """Score what was deferred (phased), then wait for every submitted slice; returns the ids of those that
        could not be scored."""
        for slice_, path in self.deferred:
            self._submit(slice_, path)
        self.deferred = []
        failed = []
        for slice_, future in self.futures:
            try:
                print(future.result(), flush=True)
            except TraceReproError as exc:
                failed.append(slice_.id)
                print(f"[score] {slice_.id}: error: {exc.render()}", file=sys.stderr, flush=True)
        self.pool.shutdown()
        return failed
