"""Judging overlapped with generation (``generate --score overlap``) against upstream's order (``--score phased``,
and ``generate`` then ``score --campaign-root``): the same records and scores, byte for byte; a run SIGKILLed while
it generates or while it judges resumes with nothing lost and nothing generated twice, in both designs. Loopback
model and judge stubs (trace_lib.testing.scored_campaign), two judge-route benchmarks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trace_lib.cli.main import main
from trace_lib.testing import scored_campaign as sc
from trace_lib.testing.crash import sigkill_once
from trace_lib.testing.openai_server import OpenAIStubServer

ROWS = 8


class _Stubs:
    """The model and judge stubs, each answer delayed by what ``delay`` holds (set per phase of a test); with
    ``hold_last`` the model's ``hold_last``-th request waits (at most 1.5 s) until the judge has been asked, and
    ``judged_before_last`` says whether it was (judging overlapped generation)."""

    def __init__(self, hold_last: int | None = None) -> None:
        import threading

        self.delay = {"model": 0.0, "judge": 0.0}
        self.hold_last, self.asked, self.judged_before_last = hold_last, threading.Event(), None
        self._count, self._lock = 0, threading.Lock()
        self.model = OpenAIStubServer(self._model, model=sc.MODEL_ID)
        self.judge = OpenAIStubServer(self._judge, model="qwen3-32b-judge")

    def _model(self, route, body):  # noqa: ANN001, ANN202
        with self._lock:
            self._count += 1
            last = self._count == self.hold_last
        if last:
            self.judged_before_last = self.asked.wait(1.5)
        return sc.model_answer(route, body, self.delay["model"])

    def _judge(self, route, body):  # noqa: ANN001, ANN202
        self.asked.set()
        return sc.judge_answer(route, body, self.delay["judge"])

    def __enter__(self) -> _Stubs:
        self.model.__enter__()
        self.judge.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.model.__exit__(*exc)
        self.judge.__exit__(*exc)


@pytest.fixture(scope="module")
def reference(release, tmp_path_factory):
    """The campaign scored in upstream's order: ``generate``, then ``score --campaign-root``."""
    root = tmp_path_factory.mktemp("reference")
    sc.build_data(root / "data", rows=ROWS)
    with _Stubs() as stubs:
        assert main(sc.generate_argv(release, root, stubs.model.url)) == 0
        main(sc.score_argv(release, root, stubs.judge.url))  # exit 1: no canonical score to compare (scored all)
        assert stubs.judge.requests, "the judge routes asked the judge"
    return root


def test_overlapped_phased_and_generate_then_score_give_the_same_bytes(release, reference, tmp_path, capsys):
    expected = sc.outputs(reference)
    assert len([k for k in expected if k.endswith("records.jsonl")]) == len(sc.BENCHMARKS)
    sc.build_data(tmp_path / "data", rows=ROWS)
    for order in ("overlap", "phased"):
        with _Stubs(hold_last=ROWS * len(sc.BENCHMARKS)) as stubs:
            assert main(sc.generate_argv(release, tmp_path, stubs.model.url, score=order,
                                         judge_url=stubs.judge.url)) == 0
            out = capsys.readouterr().out
            assert out.count("[score] ") == len(sc.BENCHMARKS), out
            # overlap: a slice is judged while the last row is still being generated; phased: only after it
            assert stubs.judged_before_last is (order == "overlap")
            got = sc.outputs(tmp_path)
            assert got.keys() == expected.keys()
            assert {k: v for k, v in got.items() if k.startswith("scoring/")} == sc.scoring(reference)
            assert sorted_pairs(tmp_path) == sorted_pairs(reference)
            shutil.rmtree(tmp_path / "campaign")


def sorted_pairs(root: Path) -> dict:
    return {k: sorted(v) for k, v in sc.responses(root).items()}


@pytest.mark.parametrize("order", ["overlap", "phased"])
@pytest.mark.parametrize("during", ["generation", "judging"])
def test_sigkill_then_resume_loses_nothing_and_generates_nothing_twice(release, reference, tmp_path, order, during):
    sc.build_data(tmp_path / "data", rows=ROWS)
    total = ROWS * len(sc.BENCHMARKS)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(sc.__file__).resolve().parents[2]),
                                                                    os.environ.get("PYTHONPATH")])))
    with _Stubs() as stubs:
        stubs.delay["model" if during == "generation" else "judge"] = 0.05
        argv = sc.generate_argv(release, tmp_path, stubs.model.url, score=order, judge_url=stubs.judge.url)
        child = subprocess.Popen([sys.executable, "-m", "trace_lib", *argv], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        if during == "generation":
            sigkill_once(child, lambda: sc.stored_rows(tmp_path), 4)
        else:
            sigkill_once(child, lambda: len(stubs.judge.requests), 2)
        stored = sc.stored_rows(tmp_path)
        assert stored < total if during == "generation" else stored >= (total if order == "phased" else 1)
        sent = len(stubs.model.requests)
        stubs.delay.update(model=0.0, judge=0.0)
        assert main(argv) == 0  # the resumed run
        assert len(stubs.model.requests) - sent == total - stored  # only the rows not stored are generated again
    assert sorted_pairs(tmp_path) == sorted_pairs(reference)
    for pairs in sc.responses(tmp_path).values():
        assert len(pairs) == len({key for key, _ in pairs}) == ROWS  # every row once
    assert sc.scoring(tmp_path) == sc.scoring(reference)
