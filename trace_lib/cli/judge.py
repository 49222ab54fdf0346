"""``trace-repro judge serve|stop``: the Qwen3-32B judge pool, one ``vllm serve`` per GPU group, as upstream's launcher.

Serve:  ``trace-repro judge serve --model-root M [--gpu-groups '0 1 2 3 4 5 6 7' | '0,1;2,3'] [--port-start 18100]``
        (weights at ``M/qwen3-32b-judge`` or ``--judge-model DIR``; upstream's judge flags, the release's no-think
        chat template; waits until every ``/v1/models`` answers, prints the ``--judge-url`` of the pool and exits,
        leaving the servers running; logs, ``pids.txt`` and ``endpoints.txt`` in ``--log-dir``)
Stop:   ``trace-repro judge stop [--log-dir DIR]`` (SIGTERM, then SIGKILL after ``--grace`` seconds)

Exit 0 when the pool is up (serve) or stopped (stop), 2 on bad input (one ``error:`` line: weights missing, port
taken, chat template absent from a data-only release copy, a server that died while starting), 130 on Ctrl-C
(everything started is stopped first).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trace_lib import options
from trace_lib.exitcodes import ExitCode

LOG_DIR_ENV = options.JUDGE_LOG_DIR_ENV.name


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from trace_lib.campaign.plan import MODEL_ROOT_ENV
    from trace_lib.scoring import judge_pool as jp

    parser = subparsers.add_parser("judge", help="start or stop the Qwen3-32B judge pool (vllm serve per GPU group)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(run=lambda args: (parser.print_help(), ExitCode.USAGE)[1])
    actions = parser.add_subparsers(dest="judge_command", metavar="ACTION")
    serve = actions.add_parser("serve", help="start one vllm serve per GPU group and wait until all are ready")
    options.add_to_argparse(serve, options.TRACE_ROOT)
    serve.add_argument("--model-root", default=None, metavar="DIR",
                       help=f"directory of the release models; the judge is <DIR>/qwen3-32b-judge "
                            f"(env {MODEL_ROOT_ENV})")
    serve.add_argument("--judge-model", default=None, metavar="DIR", help="the judge weights directory itself")
    serve.add_argument("--gpu-groups", default="0 1 2 3 4 5 6 7",
                       help="one server per group: '0 1 2 3' (one GPU each) or '0,1;2,3' (TP over a group)")
    serve.add_argument("--port-start", type=options.port_number, default=jp.JUDGE_PORT_START,
                       help=f"port of the first server; server i listens on port-start + i "
                            f"(default {jp.JUDGE_PORT_START})")
    serve.add_argument("--host", default=jp.JUDGE_HOST)
    serve.add_argument("--chat-template", default=None, metavar="FILE",
                       help=f"default: the release's {jp.CHAT_TEMPLATE_REL} (SHA-256 checked against the release)")
    serve.add_argument("--gpu-memory-utilization", type=options.unit_fraction, default=None, metavar="F",
                       help="each server's share of its GPUs' memory (default upstream's 0.90); less leaves the "
                            "rest to generation engines on the same GPUs (docs/judge.md, 'Sharing a GPU')")
    serve.add_argument("--vllm", default="vllm", metavar="EXE", help="the vllm executable (default: vllm on PATH)")
    serve.add_argument("--ready-timeout", type=options.positive_seconds, default=jp.READY_TIMEOUT_S, metavar="S",
                       help=f"seconds to wait for every /v1/models (default {jp.READY_TIMEOUT_S:g})")
    serve.add_argument("--log-dir", default=None, metavar="DIR",
                       help=f"logs, pids.txt, endpoints.txt (env {LOG_DIR_ENV}; default trace-repro-work/judge)")
    serve.set_defaults(run=run_serve)
    stop = actions.add_parser("stop", help="stop the pool recorded in --log-dir/pids.txt")
    stop.add_argument("--log-dir", default=None, metavar="DIR",
                      help=f"the pool's log directory (env {LOG_DIR_ENV}; default trace-repro-work/judge)")
    stop.add_argument("--grace", type=options.non_negative_seconds, default=jp.STOP_GRACE_S, metavar="S",
                      help=f"seconds between SIGTERM and SIGKILL (default {jp.STOP_GRACE_S:g})")
    stop.set_defaults(run=run_stop)


def _log_dir(value: str | None) -> Path:
    from trace_lib.options import work_root

    return work_root(value, LOG_DIR_ENV, "judge", directory="--log-dir")


def run_serve(args: argparse.Namespace) -> ExitCode:
    from trace_lib.outputs import check_output_dir
    from trace_lib.release.locate import locate_release
    from trace_lib.scoring import judge_pool as jp

    check_output_dir(_log_dir(args.log_dir), flag="--log-dir")
    jp.check_host(args.host)
    release = locate_release(options.given(args, options.TRACE_ROOT))
    spec = jp.pool_spec(release, model_root=args.model_root, judge_model=args.judge_model, gpu_groups=args.gpu_groups,
                        port_start=args.port_start, host=args.host, chat_template=args.chat_template,
                        vllm=args.vllm, ready_timeout_s=args.ready_timeout, log_dir=_log_dir(args.log_dir),
                        gpu_memory_utilization=args.gpu_memory_utilization)
    from trace_lib.interrupts import stop_on_signals

    try:
        with stop_on_signals():  # SIGTERM stops the servers started so far, as Ctrl-C does
            pool = jp.start_pool(spec, out=sys.stdout)
    except KeyboardInterrupt as exc:
        print("interrupted: every server started was stopped", file=sys.stderr)
        return getattr(exc, "exit_code", 130)  # type: ignore[return-value]
    print(f"[judge] ready: {len(pool.servers)} endpoint(s); "
          f"stop with 'trace-repro judge stop --log-dir {spec.log_dir}'")
    print(f"--judge-url {pool.judge_url}")
    return ExitCode.OK


def run_stop(args: argparse.Namespace) -> ExitCode:
    from trace_lib.scoring import judge_pool as jp

    log_dir = _log_dir(args.log_dir)
    stopped = jp.stop_pool(log_dir, grace_s=args.grace, out=sys.stdout)
    print(f"[judge] stopped {len(stopped)} server(s)")
    kept = jp.read_pids(log_dir) if (log_dir / jp.PIDS_FILE).stat().st_size else []
    if kept:  # running processes this suite did not start: left alone, and left in the record
        print(f"[judge] kept {len(kept)} line(s) in {log_dir / jp.PIDS_FILE}: running, but not servers this suite "
              "started; not signalled (check them, then remove the line)", file=sys.stderr)
        return ExitCode.FINDINGS
    return ExitCode.OK
