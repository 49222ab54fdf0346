"""Ctrl-C and SIGTERM against ``trace-repro generate`` with an endpoint that stops answering: the command returns
within moments (requests in flight are cancelled, not waited for through 5 x 300 s of retries), prints one line,
exits 130 / 143, keeps every row answered before the signal, and a resumed run completes the slice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from trace_lib.cli.main import main
from trace_lib.generation.store import load_responses, response_path
from trace_lib.interrupts import Interrupted, stop_on_signals
from trace_lib.testing.child_pytest import child_pytest_argv, child_pytest_env
from trace_lib.testing.discarded_signal import signal_python_discards
from trace_lib.testing.openai_server import OpenAIStubServer
from trace_lib.testing.tiny_bench import build_tiny_tsv

ROWS = 6
ANSWERED = 3  # the endpoint answers this many requests, then hangs on every other one
REPO = Path(__file__).resolve().parents[1]


def _argv(release, tmp_path: Path, url: str) -> list[str]:  # noqa: ANN001
    return ["generate", "--trace-root", str(release.path), "--model", "tiny", str(tmp_path / "model"),
            f"sha256set:{'1' * 64}", f"org/tiny@{'0' * 40}", "Tiny", "--seeds", "43", "--benchmark", "mmstar",
            "--campaign-root", str(tmp_path / "campaign"), "--data-root", str(tmp_path / "data"),
            "--backend", "openai", "--base-url", url, "--unprepared-data", "--no-progress", "--batch-size", "1",
            "--concurrency", "2"]


class _Hanging:
    """Answers the first ``ANSWERED`` requests, then holds each later one until released; ``hung`` is set once
    two requests (the client's concurrency) are held."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen = self.held = 0
        self.hung, self.release = threading.Event(), threading.Event()

    def __call__(self, route: str, body: dict) -> str:
        with self.lock:
            self.seen += 1
            hold = self.seen > ANSWERED
            self.held += hold
            if self.held >= 2:
                self.hung.set()
        if hold:
            self.release.wait(timeout=120)
        return "The answer is B."


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_signal_with_requests_hanging_returns_at_once_and_resume_completes(release, tmp_path, sig):
    build_tiny_tsv(tmp_path / "data" / "MMStar.tsv", style="mcq", rows=ROWS)
    responder = _Hanging()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    with OpenAIStubServer(responder, model="tiny") as server:
        child = subprocess.Popen([sys.executable, "-m", "trace_lib", *_argv(release, tmp_path, server.url)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert responder.hung.wait(timeout=60), "the endpoint never saw the requests it holds"
            sent = time.monotonic()
            child.send_signal(sig)
            out, err = child.communicate(timeout=60)
            took = time.monotonic() - sent
        finally:
            responder.release.set()
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == 128 + sig, err
    assert took < 15, f"stopping took {took:.1f} s: the requests in flight were waited for"  # not 5 x 300 s
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1] == (f"[generate] stopped by {signal.Signals(sig).name}: everything stored so far is kept; "
                         "re-run to resume")
    assert "Traceback" not in err
    path = response_path(tmp_path / "campaign", model="tiny", seed=43, benchmark="mmstar")
    stored = load_responses(path)  # intact: parses, no row twice
    assert len(stored) == ANSWERED and path.read_bytes().count(b"\n") == ANSWERED + 1
    assert not path.with_name(path.name + ".lock").exists()
    with OpenAIStubServer(lambda route, body: "The answer is B.", model="tiny") as server:
        assert main(_argv(release, tmp_path, server.url)) == 0
        assert len(server.requests) == ROWS - ANSWERED  # only the rows not stored are asked again
    assert [r.ordinal for r in load_responses(path)] == list(range(ROWS))


def test_sigterm_raises_like_ctrl_c_inside_the_block_only():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as info:
        with stop_on_signals():
            signal.raise_signal(signal.SIGTERM)
    assert (info.value.name, info.value.exit_code, isinstance(info.value, KeyboardInterrupt)) == ("SIGTERM", 143, True)
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_signal_python_discarded_is_raised_by_the_next_wait_and_not_printed(sig, monkeypatch):
    from types import SimpleNamespace

    from trace_lib.interrupts import pause

    reported: list = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    with pytest.raises(Interrupted) as info:
        with stop_on_signals():
            signal_python_discards(sig)  # the handler's Interrupted goes nowhere ...
            pause(30)  # ... and the wait raises it at once instead of sleeping
    assert info.value.signum == sig and reported == []  # nor is it reported as ignored
    with stop_on_signals():
        sys.unraisablehook(SimpleNamespace(exc_value=ValueError("other")))  # anything else reaches the old hook
    assert sys.unraisablehook == reported.append and [type(u.exc_value) for u in reported] == [ValueError]


def test_request_timeout_needs_the_openai_backend(release, tmp_path, capsys):
    argv = _argv(release, tmp_path, "http://127.0.0.1:9/v1")
    argv[argv.index("openai")] = "hf"
    assert main([*argv, "--request-timeout", "5"]) == 2
    assert "--request-timeout: a request timeout needs the openai backend" in capsys.readouterr().err


def test_request_timeout_reaches_the_openai_backend_from_the_flag_or_the_environment(release, tmp_path, monkeypatch):
    import argparse

    from trace_lib.campaign.plan import build_plan
    from trace_lib.cli.generate import _backend_options
    from trace_lib.generation.backends.base import create_backend

    plan = build_plan(release, model_ids=["trace-qwen2.5-vl-3b"], seeds=[42], benchmarks=["mmstar"], data_root=tmp_path)
    args = argparse.Namespace(backend="openai", base_url="http://127.0.0.1:9/v1", device=None, concurrency=None,
                              request_timeout=7.5)
    chosen = _backend_options(args, plan)
    assert chosen == {"base_url": "http://127.0.0.1:9/v1", "timeout_s": 7.5}
    assert create_backend("openai", model_path="x", served_name="m", **chosen).timeout_s == 7.5
    monkeypatch.setenv("TRACE_REQUEST_TIMEOUT", "12")
    assert _backend_options(argparse.Namespace(**{**vars(args), "request_timeout": None}), plan)["timeout_s"] == 12.0


_JUDGED_SCORE = """
import sys, types
from trace_lib.benchmarks import registry
from trace_lib.benchmarks.protocol import Protocol
from trace_lib.cli.main import main
from trace_lib.testing.synthetic_campaign import toy_mcq_protocol

toy = toy_mcq_protocol("erqa", judge="always")
def score(rows, responses, ctx):  # every row asks the judge (the persistent client's completions route)
    replies = ctx.judge.complete([f"Extract the letter: {r}" for r in responses], max_tokens=16)
    return toy.score(rows, [f"answer {reply.text}" for reply in replies], ctx)
module = types.ModuleType("toy_judged")
module.PROTOCOL = Protocol(key="erqa", upstream=toy.upstream, version="toy-judged-1", load=toy.load,
                           build_prompt=toy.build_prompt, score=score, judge="always")
sys.modules[module.__name__] = module
registry.PROTOCOLS["erqa"] = "toy_judged:PROTOCOL"
sys.exit(main(sys.argv[1:]))
"""


def _hanging_judge(*, batches: int):
    """A stub judge responder that holds every request until ``release_all`` is set; ``held`` is set once
    ``batches`` requests are waiting. Returns (responder, held, release_all)."""
    lock, seen = threading.Lock(), []
    held, release_all = threading.Event(), threading.Event()

    def hang(route: str, body: dict) -> str:
        with lock:
            seen.append(route)
            if len(seen) == batches:
                held.set()
        release_all.wait(timeout=120)
        return "B"

    return hang, held, release_all


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_signal_while_the_judge_hangs_stops_score_at_once_and_writes_nothing(release, tmp_path, sig):
    """Judge requests in flight are ended (the transport's sockets shut down), not waited for up to the client's
    120 s timeout and its retries: exit 128 + signum, one line, no score output."""
    from trace_lib.testing.synthetic_campaign import toy_responses, toy_rows, write_response_file, write_toy_dataset

    rows = toy_rows(200, seed=3)  # four judge batches of 64: requests in the judge's worker threads
    dataset = write_toy_dataset(tmp_path / "erqa.jsonl", 200, seed=3)
    responses = write_response_file(tmp_path / "responses.jsonl", model="trace-qwen2.5-vl-3b", seed=42,
                                    benchmark="erqa", rows=rows, texts=toy_responses(rows, 0.5))
    hang, held, release_all = _hanging_judge(batches=4)

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               TRACE_JUDGE_CONCURRENCY="256")  # a judge window holding all four batches (200 sequences) at once
    out = tmp_path / "out"
    with OpenAIStubServer(hang, model="qwen3-32b-judge") as server:
        argv = ["score", "--trace-root", str(release.path), "--benchmark", "erqa", "--dataset", str(dataset),
                "--responses", str(responses), "--out", str(out), "--judge-url", server.url]
        child = subprocess.Popen([sys.executable, "-c", _JUDGED_SCORE, *argv], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert held.wait(timeout=60), "the judge never saw the four batches"
            sent = time.monotonic()
            child.send_signal(sig)
            _, err = child.communicate(timeout=60)
            took = time.monotonic() - sent
        finally:
            release_all.set()
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == 128 + sig, err
    assert took < 10, f"stopping took {took:.1f} s: the judge requests in flight were waited for"
    assert [line for line in err.splitlines() if line.strip()] == [
        f"[score] stopped by {signal.Signals(sig).name}: everything stored so far is kept; re-run to resume"]
    assert not (out / "scores.json").exists() and not list(out.glob("**/*.json*"))


_HANGING_JUDGE_TEST = """
import os
from trace_lib.scoring.judge import OpenAIJudge

def test_judges_two_hundred_rows():  # four batches of 64: requests in the judge's worker threads
    OpenAIJudge(os.environ["HANG_JUDGE_URL"], model="qwen3-32b-judge").complete([f"p{i}" for i in range(200)])
"""


def test_ctrl_c_in_the_pytest_score_phase_ends_the_hanging_judge_requests_at_once(tmp_path):
    """The pytest session stops like pytest's own Ctrl-C (exit 2, "Interrupted") within moments, not after
    the judge client's 120 s timeout and its retries."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "conftest.py").write_text('pytest_plugins = ["trace_lib.pytest_plugin"]\n')
    (project / "test_hang.py").write_text(_HANGING_JUDGE_TEST)
    hang, held, release_all = _hanging_judge(batches=4)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TRACE_"))}
    with OpenAIStubServer(hang, model="qwen3-32b-judge") as server:
        env.update(PYTHONPATH=str(REPO), HANG_JUDGE_URL=server.url,
                   TRACE_JUDGE_CONCURRENCY="256")  # a judge window holding all four batches at once
        child = subprocess.Popen(child_pytest_argv("-q", "-p", "no:cacheprovider", "--phase", "score", "test_hang.py"),
                                 cwd=project, env=child_pytest_env(env),
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert held.wait(timeout=60), "the judge never saw the four batches"
            sent = time.monotonic()
            child.send_signal(signal.SIGINT)
            out, _ = child.communicate(timeout=60)
            took = time.monotonic() - sent
        finally:
            release_all.set()
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == 2 and "Interrupted" in out, out
    # The judge holds every request until the test ends, so waiting for them would take the client's 120 s timeout
    # (and its retries); a pytest session's own teardown takes 6-7 s alone and 10-15 s on a loaded 2-core machine.
    assert took < 60, f"stopping took {took:.1f} s: the judge requests in flight were waited for"


def test_a_block_puts_back_the_handlers_it_found_and_the_next_block_forgets_the_last_signal():
    """Both handlers in place before a block are back after it; the next block neither raises the old signal nor
    cuts a back-off short."""
    from trace_lib.interrupts import pause, raise_if_stopped

    def mine(signum: int, frame: object) -> None:
        raise AssertionError("the block's own handler should have taken it")

    previous = {signum: signal.signal(signum, mine) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        with pytest.raises(Interrupted):
            with stop_on_signals():
                signal.raise_signal(signal.SIGINT)
        assert [signal.getsignal(signum) for signum in previous] == [mine, mine]
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    with stop_on_signals():
        raise_if_stopped()
        started = time.monotonic()
        pause(0.2)
        assert time.monotonic() - started >= 0.15


def test_outside_the_main_thread_the_blocks_do_nothing():
    """Only the main thread can install handlers: elsewhere both blocks just run their body."""
    from trace_lib.interrupts import signals_held

    ran: list = []

    def worker() -> None:
        try:
            with stop_on_signals():
                with signals_held():
                    ran.append("body")
        except BaseException as exc:  # noqa: BLE001 - what a worker's block raised is the finding
            ran.append(exc)

    before = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(timeout=10)
    assert ran == ["body"] and signal.getsignal(signal.SIGINT) is before


def test_signals_held_delivers_the_first_signal_after_the_block_to_the_handler_in_place():
    """Inside the block SIGTERM and SIGINT wait (the block's body finishes); after it the handlers are back and the
    first signal that came reaches them, once; a block without a signal delivers nothing."""
    from trace_lib.interrupts import signals_held

    done: list = []
    with pytest.raises(Interrupted) as info:
        with stop_on_signals():
            with signals_held():
                signal.raise_signal(signal.SIGTERM)
                signal.raise_signal(signal.SIGINT)
                done.append("written")
            done.append("not reached")
    assert (info.value.signum, info.value.args, done) == (signal.SIGTERM, (signal.SIGTERM,), ["written"])
    seen: list = []

    def mine(signum: int, frame: object) -> None:
        seen.append(signum)

    previous = signal.signal(signal.SIGINT, mine)
    try:
        with signals_held():
            pass
        assert seen == [] and signal.getsignal(signal.SIGINT) is mine
        with signals_held():
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)
            assert seen == []
        assert seen == [signal.SIGINT] and signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_cancel_hook_takes_the_first_signal_and_the_second_raises_and_a_back_off_ends_at_once():
    """With a cancel hook registered the first signal only calls it (no raise), a second raises; a back-off that
    starts after the first signal ends at once, raising it."""
    from trace_lib.interrupts import cancel_on_stop, pause

    cancelled: list = []
    with pytest.raises(Interrupted) as info:
        with stop_on_signals():
            with cancel_on_stop(lambda: cancelled.append("cancel")):
                signal.raise_signal(signal.SIGTERM)
                assert cancelled == ["cancel"]
                signal.raise_signal(signal.SIGINT)
    assert cancelled == ["cancel"] and info.value.signum == signal.SIGINT
    started = time.monotonic()
    with pytest.raises(Interrupted) as info:
        with stop_on_signals():
            with cancel_on_stop(lambda: None):
                signal.raise_signal(signal.SIGTERM)
                pause(30)
    assert info.value.signum == signal.SIGTERM and time.monotonic() - started < 10
