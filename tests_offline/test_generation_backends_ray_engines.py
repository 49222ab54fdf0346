"""The campaign scheduler on a local two-node Ray cluster (``ray.cluster_utils.Cluster``): one hf engine actor
per node running the tiny random Qwen2.5-VL on CPU, the driver writing the stores; a mini campaign completes,
and removing one node mid-run loses and duplicates nothing (marker ray_cluster; needs the 'ray' and 'hf'
extras).

Run: ``TRACE_ROOT=<release> python -m pytest tests_offline/test_generation_backends_ray_engines.py -m ray_cluster``.
"""

from __future__ import annotations

import threading
import time

import pytest

from trace_lib.slices import ModelDescriptor
from trace_lib.slices import Slice
from trace_lib.campaign.scheduler import CampaignScheduler, SliceJob
from trace_lib.generation.run import open_slice_store
from trace_lib.generation.store import load_responses, response_path
from trace_lib.testing.tiny_bench import build_tiny_tsv, tiny_tsv_protocol

pytestmark = pytest.mark.ray_cluster

ROWS = 8
SLICES = [Slice("tiny", seed, bench) for seed in (42, 43) for bench in ("tinya", "tinyb")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    pytest.importorskip("ray", reason="ray_cluster lane needs ray (install the 'ray' extra)")
    pytest.importorskip("transformers", reason="ray_cluster lane needs transformers (install the 'hf' extra)")
    import ray
    from ray.cluster_utils import Cluster

    from trace_lib.testing.tiny_qwen import build_tiny_qwen25vl

    model_dir = build_tiny_qwen25vl(tmp_path_factory.mktemp("ray-model") / "tiny", seed=0)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    yield cluster, workers, model_dir
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture(scope="module")
def generation(release):
    from trace_lib.release.suite import load_suite

    return {**load_suite(release).generation, "max_tokens": 8}


def _jobs(campaign, data, generation):
    model = ModelDescriptor("tiny", "/unused", "sha256set:" + "0" * 64, f"org/tiny@{'0' * 40}", "Tiny")
    jobs = []
    for slice_ in SLICES:
        protocol = tiny_tsv_protocol(slice_.benchmark)
        table = data / f"{slice_.benchmark}.tsv"
        if not table.exists():
            build_tiny_tsv(table, style="mcq", rows=ROWS, seed=len(slice_.benchmark))
        jobs.append(SliceJob(slice=slice_, protocol=protocol, load_rows=lambda p=protocol, t=table: p.load(t),
                             image_dir=data / "images", generation=generation,
                             open_store=lambda s=slice_: open_slice_store(campaign, s, model, generation)))
    return jobs


def _check_stores(campaign):
    for slice_ in SLICES:
        rows = load_responses(response_path(campaign, model="tiny", seed=slice_.seed, benchmark=slice_.benchmark))
        assert [r.ordinal for r in rows] == list(range(ROWS))  # every row once
        assert {r.backend for r in rows} == {"hf"}


def test_a_mini_campaign_on_two_nodes_then_a_node_lost_mid_run(cluster, generation, tmp_path):
    from trace_lib.generation.backends.ray_engines import RayEngines

    ray_cluster, workers, model_dir = cluster
    engines = RayEngines(model_path=str(model_dir), served_name="tiny", address=ray_cluster.address, kind="hf",
                         backend_options={"device": "cpu"}, per_actor_in_flight=4)
    try:
        assert len(set(engines.nodes)) == 2  # one actor per node
        results = CampaignScheduler(engines).run(_jobs(tmp_path / "c1", tmp_path / "data", generation))
        assert all(r.ok for r in results), [r.error for r in results if not r.ok]
        _check_stores(tmp_path / "c1")

        victim = next(n for n in workers if n.node_id == engines.nodes[1])
        campaign = tmp_path / "c2"

        def kill_when_started() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                stored = sum(max(0, p.read_bytes().count(b"\n") - 1) for p in campaign.rglob("*.jsonl"))
                if stored >= 4:
                    ray_cluster.remove_node(victim)
                    return
                time.sleep(0.05)

        killer = threading.Thread(target=kill_when_started)
        killer.start()
        results = CampaignScheduler(engines, batch_size=1).run(_jobs(campaign, tmp_path / "data", generation))
        killer.join()
        assert all(r.ok for r in results), [r.error for r in results if not r.ok]
        assert engines.lost == [victim.node_id]
        _check_stores(campaign)
    finally:
        engines.close()


def test_requests_sharing_an_id_are_each_answered(cluster, generation, tmp_path):
    """Request ids need not be unique in a stream (a benchmark's seeds fed raw share their row keys): both seeds
    of a row held by one actor at once are each answered, under the caller's id."""
    from trace_lib.generation.backends.base import RequestFeed
    from trace_lib.generation.backends.ray_engines import RayEngines
    from trace_lib.generation.run import prepare_rows

    ray_cluster, _, model_dir = cluster
    table = build_tiny_tsv(tmp_path / "data" / "tinya.tsv", style="mcq", rows=4, seed=1)
    protocol = tiny_tsv_protocol("tinya")
    rows = protocol.load(table)
    by_seed = [prepare_rows(rows, protocol, tmp_path / "data" / "images", served_name="tiny",
                            generation=generation, seed=seed) for seed in (42, 43)]
    requests = [p.request for pair in zip(*by_seed) for p in pair]  # a row's two seeds side by side
    assert len({r.request_id for r in requests}) == 4
    engines = RayEngines(model_path=str(model_dir), served_name="tiny", address=ray_cluster.address, kind="hf",
                         backend_options={"device": "cpu"}, per_actor_in_flight=4)
    try:
        answered = [r.request_id for r in engines.generate_stream(RequestFeed.of(requests))]
    finally:
        engines.close()
    assert sorted(answered) == sorted(r.request_id for r in requests)  # each id twice


def test_generate_cli_runs_its_engines_on_the_cluster(cluster, release, tmp_path, capsys):
    """``trace-repro generate --ray-address``: the hf engine runs as actors on the cluster's nodes, this process
    writes the store, and a re-run reuses every row."""
    from trace_lib.cli.main import main
    from trace_lib.data.prepare import load_artifact_sources

    ray_cluster, _, model_dir = cluster
    build_tiny_tsv(load_artifact_sources(release)["mmstar"].local_path(tmp_path / "data"), style="mcq", rows=6)
    argv = ["generate", "--trace-root", str(release.path), "--model", "tiny", str(model_dir),
            f"sha256set:{'1' * 64}", f"org/tiny@{'0' * 40}", "Tiny", "--seeds", "43", "--benchmark", "mmstar",
            "--campaign-root", str(tmp_path / "campaign"), "--data-root", str(tmp_path / "data"), "--backend", "hf",
            "--unprepared-data", "--no-progress", "--model-verify", "none", "--ray-address", ray_cluster.address]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "engine actor(s) on Ray nodes" in captured.err and "generated 6" in captured.out
    rows = load_responses(response_path(tmp_path / "campaign", model="tiny", seed=43, benchmark="mmstar"))
    assert [r.ordinal for r in rows] == list(range(6))


def test_an_engine_that_does_not_start_on_an_actor_is_one_line(cluster, release, tmp_path, capsys):
    """An engine actor whose engine cannot start (a model directory that is not there): ``generate`` names it
    in one line, fails the model's slices (exit 1), shows no traceback and leaves no actor behind."""
    import ray

    from trace_lib.cli.main import main

    ray_cluster, _, _ = cluster
    build_tiny_tsv(tmp_path / "data" / "MMStar.tsv", style="mcq", rows=2)
    argv = ["generate", "--trace-root", str(release.path), "--model", "tiny", str(tmp_path / "no-model"),
            f"sha256set:{'1' * 64}", f"org/tiny@{'0' * 40}", "Tiny", "--seeds", "43", "--benchmark", "mmstar",
            "--campaign-root", str(tmp_path / "campaign"), "--data-root", str(tmp_path / "data"), "--backend", "hf",
            "--unprepared-data", "--no-progress", "--model-verify", "none", "--ray-address", ray_cluster.address]
    assert main(argv) == 1
    captured = capsys.readouterr()
    line = next(line for line in captured.err.splitlines() if line.startswith("[generate] tiny: error:"))
    assert "did not start" in line and "--ray-address" in line
    assert "Traceback" not in captured.err
    assert "0/1 slice(s) complete; failed: tiny-seed43-mmstar" in captured.out
    deadline = time.monotonic() + 30  # the actors killed: their CPUs come back
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources()["CPU"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ray.available_resources().get("CPU", 0) == ray.cluster_resources()["CPU"]


def test_engines_that_raise_on_their_actors_are_counted_in_one_line(cluster):
    """An actor's engine raising in its constructor (the openai client without its URL): the driver gets one
    ``EngineStartError`` counting such actors, not a dead actor's traceback."""
    from trace_lib.errors import EngineStartError
    from trace_lib.generation.backends.ray_engines import RayEngines

    ray_cluster, _, _ = cluster
    with pytest.raises(EngineStartError) as caught:
        RayEngines(model_path="unused", served_name="tiny", address=ray_cluster.address, kind="openai",
                   actors=1)
    line = caught.value.render()
    assert line.startswith("--ray-address: 1 of 1 engine actor(s) did not start; first: tiny: the openai engine did "
                           "not start: TypeError:"), line
    assert not caught.value.out_of_memory


def test_two_engine_actors_share_one_gpu(cluster, generation, tmp_path):
    """A fractional GPU per actor (what ``--engines-per-group 2`` asks of Ray for vllm): a node declaring one GPU
    hosts two engine actors, each placed on that GPU, and together they complete the mini campaign."""
    from trace_lib.generation.backends.ray_engines import RayEngines

    ray_cluster, _, model_dir = cluster
    gpu_node = ray_cluster.add_node(num_cpus=2, num_gpus=1)
    ray_cluster.wait_for_nodes()
    engines = RayEngines(model_path=str(model_dir), served_name="tiny", address=ray_cluster.address, kind="hf",
                         backend_options={"device": "cpu"}, gpus_per_actor=0.5, per_actor_in_flight=4)
    try:
        assert engines.nodes == [gpu_node.node_id] * 2
        results = CampaignScheduler(engines).run(_jobs(tmp_path / "c", tmp_path / "data", generation))
        assert all(r.ok for r in results), [r.error for r in results if not r.ok]
        _check_stores(tmp_path / "c")
    finally:
        engines.close()
        ray_cluster.remove_node(gpu_node)


def test_engines_per_gpu_become_fractional_gpu_actors(monkeypatch):
    from trace_lib.errors import UsageError
    from trace_lib.generation.backends import ray_engines as module

    made = []
    monkeypatch.setattr(module, "RayEngines", lambda **kwargs: made.append(kwargs) or kwargs)
    module.ray_engines("vllm", model_path="m", served_name="m", address="auto", options={}, engines_per_gpu=2)
    module.ray_engines("vllm", model_path="m", served_name="m", address="auto", options={}, tensor_parallel_size=2)
    assert [m["gpus_per_actor"] for m in made] == [0.5, 2]
    with pytest.raises(UsageError, match="single-GPU engines"):
        module.ray_engines("vllm", model_path="m", served_name="m", address="auto", options={},
                           tensor_parallel_size=2, engines_per_gpu=2)
