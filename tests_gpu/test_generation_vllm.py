"""Tiny-model slices through the real engines (marker gpu): offline ``vllm.LLM`` and a real ``vllm serve`` on
loopback through the openai backend.

Run on a CUDA host with vllm installed:
``TRACE_ROOT=<release> python -m pytest tests_gpu/test_generation_vllm.py -m gpu -v``.
Decoding is the suite's except ``max_tokens`` (64, to keep the random tiny model's outputs short).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu]

ROWS = 64
GPU_MEMORY = 0.25  # both engines fit side by side on one GPU


@pytest.fixture(scope="module", autouse=True)
def _requirements(vllm_gpu):
    """Every test here needs vLLM on a CUDA GPU (tests_gpu/conftest.py)."""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from trace_lib.testing.tiny_bench import build_tiny_tsv

    root = tmp_path_factory.mktemp("data")
    build_tiny_tsv(root / "tiny.tsv", style="mcq", rows=ROWS)
    build_tiny_tsv(root / "pairs.tsv", style="multi_image_mcq", rows=8)
    return root


@pytest.fixture(scope="module")
def generation(release):
    from trace_lib.release.suite import load_suite

    return {**load_suite(release).generation, "max_tokens": 64}


def _slice(backend, data, campaign, generation, *, table="tiny.tsv", seed=42):
    from trace_lib.slices import ModelDescriptor
    from trace_lib.slices import Slice
    from trace_lib.generation.run import open_slice_store, run_generation
    from trace_lib.generation.store import load_responses
    from trace_lib.testing.tiny_bench import tiny_tsv_protocol

    model = ModelDescriptor("tiny", "unused", "sha256set:" + "0" * 64, f"org/tiny@{'0' * 40}", "Tiny")
    slice_ = Slice("tiny", seed, Path(table).stem)
    protocol = tiny_tsv_protocol(slice_.benchmark)
    with open_slice_store(campaign, slice_, model, generation) as store:
        result = run_generation(slice_, protocol.load(data / table), protocol, backend, store, data / "images",
                                generation=generation, progress=False)
    return result, load_responses(store.path)


@pytest.fixture(scope="module")
def offline(tiny_model, data, generation, tmp_path_factory):
    """Both tables through the vllm backend; the engine is released afterwards."""
    from trace_lib.generation.backends.base import create_backend

    backend = create_backend("vllm", model_path=str(tiny_model), served_name="tiny",
                             allowed_local_media_path=str(data.resolve()),
                             gpu_memory_utilization=GPU_MEMORY)  # other engine flags: upstream's server values
    campaign = tmp_path_factory.mktemp("offline")
    try:
        yield {table: _slice(backend, data, campaign, generation, table=table) for table in ("tiny.tsv", "pairs.tsv")}
    finally:
        backend.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tiny_model, data, tmp_path_factory):
    """A real ``vllm serve`` (OpenAI API server) for the tiny model on 127.0.0.1, stopped at teardown."""
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "vllm.log"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model),
           "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), "--trust-remote-code",
           "--max-model-len", "32768", "--max-num-seqs", "256", "--max-num-batched-tokens", "32768",
           "--gpu-memory-utilization", str(GPU_MEMORY), "--limit-mm-per-prompt", json.dumps({"image": 24, "video": 3}),
           "--allowed-local-media-path", str(data.resolve())]  # upstream's generation-server flags (spec §3.1)
    env = dict(os.environ, VLLM_WORKER_MULTIPROC_METHOD="spawn", TOKENIZERS_PARALLELISM="false")
    with open(log, "wb") as handle:
        proc = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 600
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}; log: {log}\n{log.read_text()[-4000:]}",
                            pytrace=False)
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as response:
                    if "tiny" in response.read().decode():
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve not ready after 600 s; log: {log}", pytrace=False)
            time.sleep(2)
        yield url
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


def test_vllm_backend_generates_whole_slices(offline):
    for table, rows_expected in (("tiny.tsv", ROWS), ("pairs.tsv", 8)):
        result, rows = offline[table]
        assert result.complete and result.generated == rows_expected
        assert [r.ordinal for r in rows] == list(range(rows_expected))
        assert all(r.finish_reason in ("stop", "length") and 0 < r.completion_tokens <= 64 for r in rows)
        assert all(r.backend == "vllm" for r in rows)


def test_vllm_sees_the_prompt_transformers_sees(offline, tiny_model, data, generation):
    """Same chat template, same image resizing: vLLM's prompt token count equals the HF processor's."""
    from PIL import Image
    from transformers import AutoProcessor

    from trace_lib.generation.run import prepare_rows
    from trace_lib.testing.tiny_bench import tiny_tsv_protocol

    processor = AutoProcessor.from_pretrained(tiny_model)
    for table in ("tiny.tsv", "pairs.tsv"):
        protocol = tiny_tsv_protocol(Path(table).stem)
        prepared = prepare_rows(protocol.load(data / table), protocol, data / "images", served_name="tiny",
                                generation=generation, seed=42)
        stored = {r.row_key: r for r in offline[table][1]}
        for row in prepared:
            text = processor.apply_chat_template(row.request.messages_json(), tokenize=False,
                                                 add_generation_prompt=True)
            images = [Image.open(p).convert("RGB") for p in row.request.image_paths()]
            inputs = processor(text=[text], images=images, return_tensors="pt", **row.request.mm_processor_kwargs)
            assert stored[row.request.request_id].prompt_tokens == inputs["input_ids"].shape[1], row.request.request_id


def test_vllm_serve_through_the_openai_backend(server, offline, data, generation, tmp_path):
    """The same slices through a real ``vllm serve``: complete, and the server renders identical prompts."""
    from trace_lib.generation.backends.base import create_backend

    backend = create_backend("openai", model_path="unused", served_name="tiny", base_url=server, concurrency=32)
    try:
        for table in ("tiny.tsv", "pairs.tsv"):
            result, rows = _slice(backend, data, tmp_path, generation, table=table)
            assert result.complete
            offline_tokens = {r.row_key: r.prompt_tokens for r in offline[table][1]}
            assert {r.row_key: r.prompt_tokens for r in rows} == offline_tokens
            assert all(r.backend == "openai" and r.finish_reason in ("stop", "length") for r in rows)
    finally:
        backend.close()


def test_request_hash_matches_between_backends(offline, server, data, generation, tmp_path):
    """Stored request hashes do not depend on the backend (they hash the upstream payload)."""
    from trace_lib.generation.backends.base import create_backend

    backend = create_backend("openai", model_path="unused", served_name="tiny", base_url=server)
    try:
        _, rows = _slice(backend, data, tmp_path, generation, table="pairs.tsv")
    finally:
        backend.close()
    assert [r.request_hash for r in rows] == [r.request_hash for r in offline["pairs.tsv"][1]]
