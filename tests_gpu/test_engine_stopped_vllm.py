"""An engine whose engine core dies while it generates, through the real vLLM (marker gpu): the stream ends in one
:class:`~trace_lib.errors.EngineStoppedError` line after the answers it gave, not vLLM's traceback (run 36's
failure, docs/performance.md, where the engine core ran out of memory beside a judge that grew). The test kills
the engine core it started (a child of this process) with SIGKILL once the first answer is in. vLLM's client then
marks the engine dead but leaves ``step()`` waiting for ever (run 37); the backend's wake
(``generation/backends/vllm_liveness.py``) must end the stream within seconds.

Run on a CUDA host with vllm installed:
``TRACE_ROOT=<release> python -m pytest tests_gpu/test_engine_stopped_vllm.py -m gpu -v``.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu]


@pytest.fixture(scope="module", autouse=True)
def _requirements(vllm_gpu):
    """Every test here needs vLLM on a CUDA GPU (tests_gpu/conftest.py)."""


def engine_core_children() -> list[int]:
    """Pids of this process's children that run a vLLM engine core (spawned: ``spawn_main``; titled
    ``VLLM::EngineCore`` when setproctitle is there); its multiprocessing resource tracker is left out."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and ("EngineCore" in cmdline or "spawn_main" in cmdline) \
                and "resource_tracker" not in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.timeout(200)  # below the lane's own limit, so a stall is reported with its stacks
def test_a_killed_engine_core_ends_the_stream_in_one_line_after_its_answers(tiny_model):
    from trace_lib.errors import EngineStoppedError
    from trace_lib.generation.backends.base import RequestFeed, create_backend
    from trace_lib.generation.request import ChatRequest

    backend = create_backend("vllm", model_path=str(tiny_model), served_name="tiny", gpu_memory_utilization=0.2,
                             enforce_eager=True)
    try:
        cores = engine_core_children()
        assert cores, "no engine core process among this process's children"
        requests = [ChatRequest(f"r{i}", ({"role": "user", "content": [{"type": "text", "text": f"count {i}"}]},),
                                {"temperature": 1.0, "max_tokens": 256, "seed": i},
                                {"min_pixels": 3136, "max_pixels": 12845056}) for i in range(4000)]
        answered = 0
        killed = None
        with pytest.raises(EngineStoppedError) as caught:
            for _ in backend.generate_stream(RequestFeed.of(requests), in_flight=512):
                answered += 1
                if answered == 1:
                    for pid in cores:
                        os.kill(pid, signal.SIGKILL)
                    killed = time.monotonic()
        assert killed is not None and time.monotonic() - killed < 30, "the stream outlived its engine core by 30 s"
        line = caught.value.render()
        assert caught.value.machine_failure and "\n" not in line, line
        assert line.startswith(f"vllm: tiny: the vllm engine stopped while it generated, after {answered} answer(s)")
        assert answered < len(requests)
    finally:
        try:
            backend.close()
        except Exception:  # noqa: BLE001 - a dead engine may not shut down cleanly; the lane goes on
            pass
