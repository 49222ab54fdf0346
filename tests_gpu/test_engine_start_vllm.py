"""An engine that finds its GPU's memory taken, through the real vLLM (marker gpu): the one-line error names the
free and asked GiB, and ``generate --engines-per-group 2`` whose engines are refused the GPU's memory (run 33's
failure, docs/performance.md) runs each worker's share again alone once the others have exited, and completes
every slice.

Run on a CUDA host with vllm installed:
``TRACE_ROOT=<release> python -m pytest tests_gpu/test_engine_start_vllm.py -m gpu -v``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import trace_lib

pytestmark = [pytest.mark.gpu]

ROWS = 8
RERUN_LINE = "running its share again alone"


@pytest.fixture(scope="module", autouse=True)
def _requirements(vllm_gpu):
    """Every test here needs vLLM on a CUDA GPU (tests_gpu/conftest.py)."""


class GpuMemoryHold:
    """GPU memory this test process takes, so that an engine finds it taken; released on :meth:`release`."""

    def __init__(self) -> None:
        self._held: list = []

    def hold(self, leave: float) -> float:
        """Take memory until ``leave`` of the GPU is free; the free fraction after."""
        import torch

        free, total = torch.cuda.mem_get_info()
        if free > leave * total:
            self._held.append(torch.empty(int(free - leave * total), dtype=torch.uint8, device="cuda"))
        free, total = torch.cuda.mem_get_info()
        return free / total

    def release(self) -> None:
        import torch

        self._held.clear()
        torch.cuda.empty_cache()


@pytest.fixture
def gpu_memory():
    held = GpuMemoryHold()
    yield held
    held.release()


def test_an_engine_asking_more_than_is_free_gets_one_line_with_the_figures(tiny_model, gpu_memory):
    from trace_lib.errors import EngineStartError
    from trace_lib.generation.backends.base import create_backend

    assert gpu_memory.hold(0.3) < 0.32
    with pytest.raises(EngineStartError) as caught:
        create_backend("vllm", model_path=str(tiny_model), served_name="tiny", gpu_memory_utilization=0.5)
    line = caught.value.render()
    assert caught.value.out_of_memory, line
    assert line.startswith("--gpu-memory-utilization: tiny: the vllm engine did not start: its GPU has ") and \
        "and the engine asks for 0.5 of it" in line and "\n" not in line


def test_workers_refused_the_gpus_memory_run_their_share_again_alone(release, tiny_model, gpu_memory, tmp_path):
    """Both engines ask 0.25 of a GPU with 0.2 free: both workers exit 3; the memory is given back when the
    supervisor says it reruns, and each worker's rerun (alone, resuming) stores every row."""
    from trace_lib.generation.store import load_responses, response_path
    from trace_lib.testing.tiny_bench import build_tiny_tsv

    build_tiny_tsv(tmp_path / "data" / "MMStar.tsv", style="mcq", rows=ROWS)
    build_tiny_tsv(tmp_path / "data" / "RealWorldQA.tsv", style="mcq", rows=ROWS)
    free = gpu_memory.hold(0.2)
    assert free < 0.22
    argv = [sys.executable, "-m", "trace_lib", "generate", "--trace-root", str(release.path), "--model", "tiny",
            str(tiny_model), f"sha256set:{'1' * 64}", f"org/tiny@{'0' * 40}", "Tiny", "--seeds", "42",
            "--benchmark", "mmstar", "--benchmark", "realworldqa", "--campaign-root", str(tmp_path / "campaign"),
            "--data-root", str(tmp_path / "data"), "--unprepared-data", "--no-progress", "--model-verify", "none",
            "--backend", "vllm", "--engines-per-group", "2", "--gpu-memory-utilization", "0.5"]
    env = dict(os.environ, VLLM_WORKER_MULTIPROC_METHOD="spawn", TOKENIZERS_PARALLELISM="false")
    lines: list[str] = []
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env) as proc:
        timer = threading.Timer(540, proc.kill)
        timer.start()
        try:
            for line in proc.stderr:
                lines.append(line)
                if RERUN_LINE in line:
                    gpu_memory.release()  # the rerun's engine imports vLLM for seconds before it asks
        finally:
            timer.cancel()
        code = proc.wait()
    err = "".join(lines)
    assert code == 0, f"free {free:.2f}; exit {code}\n{err[-6000:]}"
    assert err.count("its GPU has ") >= 2 and err.count(RERUN_LINE) == 2, err[-6000:]
    assert "2/2 worker(s) done" in err
    ours = f'File "{Path(trace_lib.__file__).parent}'
    assert ours not in err  # vLLM's engine core logs its own traceback; ours is the one-line error
    for benchmark in ("mmstar", "realworldqa"):
        rows = load_responses(response_path(tmp_path / "campaign", model="tiny", seed=42, benchmark=benchmark))
        assert [r.ordinal for r in rows] == list(range(ROWS))
