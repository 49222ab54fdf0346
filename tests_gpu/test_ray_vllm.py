"""The campaign scheduler with vllm engine actors on Ray (marker gpu): a local one-node Ray instance, one actor per
GPU (placement group of one GPU bundle), the tiny random Qwen2.5-VL, two seeds x two tables streamed, the driver
writing the stores. Needs CUDA, vllm and ray.

Run: ``TRACE_ROOT=<release> python -m pytest tests_gpu/test_ray_vllm.py -m gpu -v``.
"""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = pytest.mark.gpu

ROWS = 16


def test_vllm_actors_on_ray_stream_a_mini_campaign(vllm_gpu, release, tmp_path):
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed (install the 'ray' extra)")
    import ray

    from trace_lib.slices import ModelDescriptor
    from trace_lib.slices import Slice
    from trace_lib.campaign.scheduler import CampaignScheduler, SliceJob
    from trace_lib.generation.backends.ray_engines import ray_engines
    from trace_lib.generation.run import open_slice_store
    from trace_lib.generation.store import load_responses, response_path
    from trace_lib.release.suite import load_suite
    from trace_lib.testing.tiny_bench import build_tiny_tsv, tiny_tsv_protocol
    from trace_lib.testing.tiny_qwen import build_tiny_qwen25vl

    model_dir = build_tiny_qwen25vl(tmp_path / "model")
    data = tmp_path / "data"
    generation = {**load_suite(release).generation, "max_tokens": 32}
    model = ModelDescriptor("tiny", str(model_dir), "sha256set:" + "0" * 64, f"org/tiny@{'0' * 40}", "Tiny")
    slices = [Slice("tiny", seed, key) for seed in (42, 43) for key in ("tinya", "tinyb")]
    jobs = []
    for slice_ in slices:
        table = data / f"{slice_.benchmark}.tsv"
        if not table.exists():
            build_tiny_tsv(table, style="mcq", rows=ROWS, seed=len(jobs))
        protocol = tiny_tsv_protocol(slice_.benchmark)
        jobs.append(SliceJob(slice=slice_, protocol=protocol, load_rows=lambda p=protocol, t=table: p.load(t),
                             image_dir=data / "images", generation=generation,
                             open_store=lambda s=slice_: open_slice_store(tmp_path / "c", s, model, generation)))
    engines = ray_engines("vllm", model_path=str(model_dir), served_name="tiny", address="local",
                          options={"allowed_local_media_path": str(data.resolve()), "max_model_len": 8192,
                                   "gpu_memory_utilization": 0.25, "tensor_parallel_size": 1},
                          tensor_parallel_size=1)
    try:
        assert len(engines.actors) >= 1
        results = CampaignScheduler(engines).run(jobs)
        assert all(r.ok for r in results), [r.error for r in results if not r.ok]
        for slice_ in slices:
            rows = load_responses(response_path(tmp_path / "c", model="tiny", seed=slice_.seed,
                                                benchmark=slice_.benchmark))
            assert [r.ordinal for r in rows] == list(range(ROWS)) and {r.backend for r in rows} == {"vllm"}
    finally:
        engines.close()
        ray.shutdown()
