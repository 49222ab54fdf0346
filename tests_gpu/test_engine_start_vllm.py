"""An engine that finds its GPU's memory taken, through the real vLLM (marker gpu): the one-line error names the
free and asked GiB, and ``generate --engines-per-group 2`` whose second engine does not fit beside the first runs
that worker's share again alone and completes every slice (the failure of run 33, docs/performance.md).

Run on a CUDA host with vllm installed:
``TRACE_ROOT=<release> python -m pytest tests_gpu/test_engine_start_vllm.py -m gpu -v``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import trace_lib

pytestmark = [pytest.mark.gpu]

#: Rows per benchmark: enough that the first worker still generates when the second engine starts (at 3 rows the
#: first worker had exited by then and both engines fitted, one after the other: the 2026-12-03 run).
ROWS = 64


@pytest.fixture(scope="module", autouse=True)
def _requirements(vllm_gpu):
    """Every test here needs vLLM on a CUDA GPU (tests_gpu/conftest.py)."""


@pytest.fixture
def hold_gpu_memory():
    """``hold(leave)``: this process takes GPU memory until ``leave`` of the total is free (released after)."""
    import torch

    held = []

    def hold(leave: float) -> float:
        free, total = torch.cuda.mem_get_info()
        if free > leave * total:
            held.append(torch.empty(int(free - leave * total), dtype=torch.uint8, device="cuda"))
        free, total = torch.cuda.mem_get_info()
        return free / total

    yield hold
    held.clear()
    torch.cuda.empty_cache()


def test_an_engine_asking_more_than_is_free_gets_one_line_with_the_figures(tiny_model, hold_gpu_memory):
    from trace_lib.errors import EngineStartError
    from trace_lib.generation.backends.base import create_backend

    assert hold_gpu_memory(0.3) < 0.32
    with pytest.raises(EngineStartError) as caught:
        create_backend("vllm", model_path=str(tiny_model), served_name="tiny", gpu_memory_utilization=0.5)
    line = caught.value.render()
    assert caught.value.out_of_memory, line
    assert line.startswith("--gpu-memory-utilization: tiny: the vllm engine did not start: its GPU has ") and \
        "and the engine asks for 0.5 of it" in line and "\n" not in line


def test_a_second_engine_that_does_not_fit_runs_its_share_alone_after(release, tiny_model, hold_gpu_memory,
                                                                      tmp_path):
    from trace_lib.generation.store import load_responses, response_path
    from trace_lib.testing.tiny_bench import build_tiny_tsv

    build_tiny_tsv(tmp_path / "data" / "MMStar.tsv", style="mcq", rows=ROWS)
    build_tiny_tsv(tmp_path / "data" / "RealWorldQA.tsv", style="mcq", rows=ROWS)
    free = hold_gpu_memory(0.45)  # room for one engine at 0.25 of the GPU, not for two
    argv = [sys.executable, "-m", "trace_lib", "generate", "--trace-root", str(release.path), "--model", "tiny",
            str(tiny_model), f"sha256set:{'1' * 64}", f"org/tiny@{'0' * 40}", "Tiny", "--seeds", "42",
            "--benchmark", "mmstar", "--benchmark", "realworldqa", "--campaign-root", str(tmp_path / "campaign"),
            "--data-root", str(tmp_path / "data"), "--unprepared-data", "--no-progress", "--model-verify", "none",
            "--backend", "vllm", "--engines-per-group", "2", "--gpu-memory-utilization", "0.5"]
    env = dict(os.environ, VLLM_WORKER_MULTIPROC_METHOD="spawn", TOKENIZERS_PARALLELISM="false")
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=540)
    err = done.stderr
    assert done.returncode == 0, f"free {free:.2f}; exit {done.returncode}\n{err[-6000:]}"
    assert "its GPU has " in err and "running its share again alone" in err, (
        f"no engine was refused: the first worker finished before the second engine started (raise ROWS)\n"
        f"{err[-6000:]}")
    assert "2/2 worker(s) done" in err
    ours = f'File "{Path(trace_lib.__file__).parent}'
    assert ours not in err  # vLLM's engine core logs its own traceback; ours is the one-line error
    for benchmark in ("mmstar", "realworldqa"):
        rows = load_responses(response_path(tmp_path / "campaign", model="tiny", seed=42, benchmark=benchmark))
        assert [r.ordinal for r in rows] == list(range(ROWS))
