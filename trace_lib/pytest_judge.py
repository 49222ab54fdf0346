"""pytest plugin: ``--phase generate|score|all`` and ``--judge-serve``, ordered as upstream's launcher orders them.

- ``--phase generate``: every selected slice generates and its coverage and identity are verified; nothing needs a
  judge (slice tests then skip with "scored in --phase score").
- ``--phase score``: responses must be complete; slices score and assert (with ``--judge-serve`` the judge pool is
  started first, for the whole session).
- ``--phase all`` (default): both. With ``--judge-serve``, the controller first runs the same session in a child
  ``pytest ... --phase generate`` (every GPU generates; under xdist every worker exits, releasing its engine), then
  starts the judge pool on ``--judge-gpu-groups`` (default: ``--gpu-groups``) and continues as ``--phase score``.
  Without ``--judge-serve`` the judge is external (``--judge-url``) and each slice generates then scores.

The pool (:mod:`trace_lib.scoring.judge_pool`) is stopped at the end of the session, also when it fails or is
interrupted (``pytest_unconfigure`` runs on Ctrl-C, and SIGTERM is turned into the same interruption). Its URL
reaches xdist workers through ``TRACE_JUDGE_URL``; the effective phase through ``TRACE_REPRO_SESSION_PHASE``.
Every test's receipt records ``phase``.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
from typing import Any, Iterator

import pytest

from trace_lib import options

PHASES = ("generate", "score", "all")
PHASE_ENV = options.PHASE_ENV.name
SESSION_PHASE_ENV = options.SESSION_PHASE_ENV.name  # set by the controller for the session (and its xdist workers)
_POOL = pytest.StashKey[Any]()
_SAVED_ENV = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trace-repro judge", "phases and the session's judge pool")
    group.addoption("--phase", dest="trace_phase", choices=PHASES, default=None,
                    help=f"generate, score or all (default; env {PHASE_ENV}): all generates everything first, then "
                         "judges (with --judge-serve the judge starts only after the last generation)")
    group.addoption("--judge-serve", action="store_true", default=False,
                    help="start the Qwen3-32B judge pool (one vllm serve per --judge-gpu-groups group) for the session")
    group.addoption("--judge-gpu-groups", default=None,
                    help="GPU groups of the judge pool ('0 1 2 3' or '0,1;2,3'; default: --gpu-groups, else '0')")
    group.addoption("--judge-model", default=None, help="judge weights (default <model-root>/qwen3-32b-judge)")
    group.addoption("--judge-port-start", type=int, default=None, help="first judge port (default 18100)")
    group.addoption("--judge-chat-template", default=None,
                    help="default: the release's rlvr/examples/prompts/chat_template_no_think.jinja")
    group.addoption("--judge-vllm", default="vllm", help="the vllm executable (default: vllm on PATH)")
    group.addoption("--judge-ready-timeout", type=float, default=None, help="seconds to wait for readiness (900)")
    group.addoption("--judge-log-dir", default=None,
                    help="judge logs and pids.txt (default <campaign-root>/logs/judge, else trace-repro-work/judge)")


def session_phase(config: pytest.Config) -> str:
    """The phase this process runs: the controller's decision, else ``--phase``, else ``$TRACE_PHASE``, else all."""
    value = os.environ.get(SESSION_PHASE_ENV) or config.getoption("trace_phase", None) or os.environ.get(PHASE_ENV)
    value = value or "all"
    if value not in PHASES:
        raise pytest.UsageError(f"{PHASE_ENV}: invalid phase {value!r} (expected one of: {', '.join(PHASES)})")
    return value


def pytest_configure(config: pytest.Config) -> None:
    session_phase(config)  # a bad $TRACE_PHASE is a usage error before collection
    if config.getoption("judge_serve", False) and config.getoption("judge_url", None):
        raise pytest.UsageError("--judge-serve starts the judge itself; drop --judge-url (or drop --judge-serve)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    phase = session_phase(config)
    requested = config.getoption("trace_phase", None) or os.environ.get(PHASE_ENV) or "all"
    for item in items:
        item.user_properties.append(("phase", phase))
        if requested != phase:
            item.user_properties.append(("phase_requested", requested))


def _child_args(args: list[str]) -> list[str]:
    """The session's arguments for the generate child: its JUnit receipt goes to ``<name>.generate.xml``."""
    out: list[str] = []
    rename = False
    for arg in args:
        if rename:
            out.append(_generate_receipt(arg))
            rename = False
            continue
        for flag in ("--junitxml", "--junit-xml"):
            if arg == flag:
                rename = True
            elif arg.startswith(flag + "="):
                arg = f"{flag}={_generate_receipt(arg.split('=', 1)[1])}"
        out.append(arg)
    return out + ["--phase", "generate"]


def _generate_receipt(path: str) -> str:
    stem, dot, ext = path.rpartition(".")
    return f"{stem}.generate.{ext}" if dot else f"{path}.generate"


def run_generate_phase(config: pytest.Config) -> int:
    """Run this session's selection as ``--phase generate`` in a child pytest (same arguments, same directory);
    returns its exit code."""
    env = {k: v for k, v in os.environ.items() if k != SESSION_PHASE_ENV}
    args = _child_args([str(a) for a in config.invocation_params.args])
    print(f"\n[trace-repro] phase generate: {sys.executable} -m pytest {' '.join(args)}", flush=True)
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=str(config.invocation_params.dir),
                          env=env, check=False).returncode


def _pool_spec(config: pytest.Config):  # noqa: ANN202 - judge_pool.PoolSpec
    from pathlib import Path

    from trace_lib.release.locate import locate_release
    from trace_lib.scoring import judge_pool as jp

    release = locate_release(options.given(config.option, options.TRACE_ROOT))
    groups = (config.getoption("judge_gpu_groups") or getattr(config.option, "gpu_groups", None)
              or os.environ.get(options.GPU_GROUPS_ENV.name) or "0")
    log_dir = config.getoption("judge_log_dir")
    if not log_dir:
        campaign = options.resolve(config.option, options.CAMPAIGN_ROOT)
        log_dir = str(Path(campaign) / "logs" / "judge") if campaign else None
    from trace_lib.options import work_root

    return jp.pool_spec(
        release, model_root=getattr(config.option, "model_root", None), judge_model=config.getoption("judge_model"),
        gpu_groups=groups, port_start=config.getoption("judge_port_start") or jp.JUDGE_PORT_START,
        chat_template=config.getoption("judge_chat_template"), vllm=config.getoption("judge_vllm"),
        ready_timeout_s=config.getoption("judge_ready_timeout") or jp.READY_TIMEOUT_S,
        log_dir=work_root(log_dir, options.JUDGE_LOG_DIR_ENV.name, "judge", directory="--judge-log-dir"),
    )


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Controller only (before xdist starts workers): generate phase in a child session, then the judge pool."""
    from trace_lib.errors import TraceReproError
    from trace_lib.scoring import judge_pool as jp

    config = session.config
    if hasattr(config, "workerinput") or not config.getoption("judge_serve", False):
        return
    phase = session_phase(config)
    if phase == "generate":
        return
    saved = {k: os.environ.get(k) for k in (SESSION_PHASE_ENV, options.JUDGE_URL.env)}
    config.stash[_SAVED_ENV] = saved
    if phase == "all":
        code = run_generate_phase(config)
        if code not in (int(pytest.ExitCode.OK), int(pytest.ExitCode.TESTS_FAILED),
                        int(pytest.ExitCode.NO_TESTS_COLLECTED)):
            pytest.exit(f"phase generate ended with exit code {code}; the judge was not started", returncode=code)
        print(f"[trace-repro] phase generate done (exit {code}); starting the judge pool", flush=True)
    os.environ[SESSION_PHASE_ENV] = "score"
    try:
        spec = _pool_spec(config)
        pool = jp.start_pool(spec, out=sys.stdout)
    except TraceReproError as exc:
        pytest.exit(f"judge pool: {exc.render()}", returncode=int(pytest.ExitCode.USAGE_ERROR))
    config.stash[_POOL] = pool
    atexit.register(pool.stop)  # a safety net; pytest_unconfigure stops it first (stopping twice is harmless)
    if threading.current_thread() is threading.main_thread():
        # a batch scheduler's SIGTERM unwinds the session like Ctrl-C, so pytest_unconfigure stops the pool
        signal.signal(signal.SIGTERM, _terminate)
    os.environ[options.JUDGE_URL.env] = pool.judge_url
    config.option.judge_url = pool.judge_url
    print(f"[trace-repro] judge pool ready: --judge-url {pool.judge_url} (logs {spec.log_dir})", flush=True)


def _terminate(signum: int, frame: Any) -> None:  # noqa: ARG001
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Iterator[None]:
    """The tests run under :func:`trace_lib.interrupts.stop_on_signals`, as ``trace-repro score`` does: Ctrl-C or
    SIGTERM ends the judge requests in flight at once (the judge transport's cancel hook) and the session stops
    like pytest's own Ctrl-C, instead of waiting for those requests up to the judge client's timeout."""
    from trace_lib.interrupts import stop_on_signals

    with stop_on_signals():
        yield


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the session's pool (normal end, failure, Ctrl-C) and restore the environment."""
    pool = config.stash.get(_POOL, None)
    if pool is not None:
        pool.stop(out=sys.stdout)
        del config.stash[_POOL]
    saved = config.stash.get(_SAVED_ENV, None)
    if saved is not None:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        del config.stash[_SAVED_ENV]


@pytest.fixture(scope="session")
def trace_phase(pytestconfig: pytest.Config) -> str:
    """The phase this session runs (``generate``, ``score`` or ``all``)."""
    return session_phase(pytestconfig)
