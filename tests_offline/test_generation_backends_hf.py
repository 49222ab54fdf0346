"""Whole slices through the hf backend on CPU with the tiny random Qwen2.5-VL (marker cpu_model).

Decoding is the suite's except ``max_tokens`` (16 here, to keep CPU time in seconds).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.cpu_model

ROWS = 6


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    pytest.importorskip("torch", reason="cpu_model lane needs torch (install the 'hf' extra)")
    pytest.importorskip("transformers", reason="cpu_model lane needs transformers (install the 'hf' extra)")
    from trace_lib.testing.tiny_qwen import build_tiny_qwen25vl

    return build_tiny_qwen25vl(tmp_path_factory.mktemp("tiny") / "tiny-qwen25vl", seed=0)


@pytest.fixture(scope="module")
def backend(tiny_model):
    from trace_lib.generation.backends.base import create_backend

    hf = create_backend("hf", model_path=str(tiny_model), served_name="tiny")
    yield hf
    hf.close()


@pytest.fixture(scope="module")
def generation(release):
    from trace_lib.release.suite import load_suite

    return {**load_suite(release).generation, "max_tokens": 16}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from trace_lib.testing.tiny_bench import build_tiny_tsv

    root = tmp_path_factory.mktemp("data")
    build_tiny_tsv(root / "tiny.tsv", style="mcq", rows=ROWS)
    return root


def _run(seed, campaign, backend, data, generation):
    from trace_lib.slices import ModelDescriptor
    from trace_lib.slices import Slice
    from trace_lib.generation.run import open_slice_store, run_generation
    from trace_lib.generation.store import load_responses
    from trace_lib.testing.tiny_bench import tiny_tsv_protocol

    model = ModelDescriptor("tiny", "unused", "sha256set:" + "0" * 64, f"org/tiny@{'0' * 40}", "Tiny")
    slice_ = Slice("tiny", seed, "tiny")
    protocol = tiny_tsv_protocol("tiny")
    with open_slice_store(campaign, slice_, model, generation) as store:
        result = run_generation(slice_, protocol.load(data / "tiny.tsv"), protocol, backend, store, data / "images",
                                generation=generation, progress=False)
    return result, load_responses(store.path)


def test_hf_backend_generates_a_whole_slice(backend, data, generation, tmp_path):
    result, rows = _run(42, tmp_path, backend, data, generation)
    assert result.complete and result.generated == ROWS
    assert [r.ordinal for r in rows] == list(range(ROWS))
    assert all(r.finish_reason in ("stop", "length") and 0 < r.completion_tokens <= 16 for r in rows)
    assert all(r.prompt_tokens > 20 and r.backend == "hf" for r in rows)


def test_seeded_sampling_is_reproducible_and_seed_dependent(backend, data, generation, tmp_path):
    _, first = _run(42, tmp_path / "a", backend, data, generation)
    _, again = _run(42, tmp_path / "b", backend, data, generation)
    _, other = _run(43, tmp_path / "c", backend, data, generation)
    assert [r.response for r in first] == [r.response for r in again]
    # the checkpoint's generation_config says top_k=1 / top_p=0.001: only explicit suite sampling makes seeds matter
    assert [r.response for r in first] != [r.response for r in other]


def test_checkpoint_template_adds_the_default_system_turn(backend, data, generation):
    from trace_lib.generation.run import prepare_rows
    from trace_lib.testing.tiny_bench import tiny_tsv_protocol

    protocol = tiny_tsv_protocol("tiny")
    row = prepare_rows(protocol.load(data / "tiny.tsv")[:1], protocol, data / "images", served_name="tiny",
                       generation=generation, seed=42)[0]
    text = backend.processor.apply_chat_template(row.request.messages_json(), tokenize=False,
                                                 add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                           "<|vision_start|><|image_pad|><|vision_end|>Question:")
    assert text.endswith("<|im_end|>\n<|im_start|>assistant\n")


@pytest.mark.parametrize("key,style,rows", [("mmstar", "mcq", 5), ("mathvista", "vqa", 4), ("blink", "multi_image_mcq", 3)])
def test_real_protocols_run_whole_slices(backend, generation, tmp_path, key, style, rows):
    """The benchmark's own loader and prompt builder over a tiny table in its native format, end to end."""
    from trace_lib.benchmarks.registry import get_protocol
    from trace_lib.slices import ModelDescriptor
    from trace_lib.slices import Slice
    from trace_lib.generation.run import open_slice_store, run_generation
    from trace_lib.generation.store import load_responses
    from trace_lib.testing.tiny_bench import build_tiny_tsv

    protocol = get_protocol(key)
    table = build_tiny_tsv(tmp_path / "data" / f"{key}.tsv", style=style, rows=rows)
    model = ModelDescriptor("tiny", "unused", "sha256set:" + "0" * 64, f"org/tiny@{'0' * 40}", "Tiny")
    slice_ = Slice("tiny", 42, key)
    with open_slice_store(tmp_path / "campaign", slice_, model, generation) as store:
        result = run_generation(slice_, protocol.load(table), protocol, backend, store, tmp_path / "images",
                                generation=generation, progress=False)
    stored = load_responses(store.path)
    assert result.complete and len(stored) == rows
    assert all(r.prompt and r.completion_tokens > 0 for r in stored)



def test_data_url_images_generate_exactly_like_file_urls(backend, data, generation):
    """TRACE validation sends images as base64 data URLs: the hf backend reads them as the same pixels."""
    import base64
    import dataclasses

    from trace_lib.generation.run import prepare_rows
    from trace_lib.testing.tiny_bench import tiny_tsv_protocol

    protocol = tiny_tsv_protocol("tiny")
    request = prepare_rows(protocol.load(data / "tiny.tsv")[:1], protocol, data / "images", served_name="tiny",
                           generation=generation, seed=42)[0].request
    (path,) = request.image_paths()
    data_url = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()
    messages = request.messages_json()
    for part in messages[0]["content"]:
        if part.get("type") == "image_url":
            part["image_url"]["url"] = data_url
    as_data = dataclasses.replace(request, messages=tuple(messages))
    (from_file,) = backend.generate([request])
    (from_data,) = backend.generate([as_data])
    assert (from_data.text, from_data.prompt_tokens) == (from_file.text, from_file.prompt_tokens)


def test_a_model_that_runs_out_of_memory_is_one_line_after_the_rows_it_answered(backend, data, generation,
                                                                                  tmp_path, monkeypatch):
    """torch's out of memory in the middle of a slice: :class:`EngineStoppedError` (exit 3 in the CLI) naming the
    answers before it, which are stored (a re-run resumes), not the model's traceback."""
    import torch

    from trace_lib.errors import EngineStoppedError
    from trace_lib.generation.store import load_responses, response_path

    real = backend.model.generate
    calls = []

    def generate(**kwargs):  # noqa: ANN003, ANN202
        calls.append(1)
        if len(calls) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.58 GiB.")
        return real(**kwargs)

    monkeypatch.setattr(backend.model, "generate", generate)
    with pytest.raises(EngineStoppedError) as caught:
        _run(42, tmp_path / "campaign", backend, data, generation)
    line = caught.value.render()
    assert caught.value.machine_failure and "\n" not in line
    assert line.startswith(f"hf: tiny: the hf engine stopped while it generated, after 2 answer(s) with {ROWS - 2} "
                           "request(s) in flight (OutOfMemoryError: CUDA out of memory. Tried to allocate 1.58 GiB.)")
    stored = load_responses(response_path(tmp_path / "campaign", model="tiny", seed=42, benchmark="tiny"))
    assert len(stored) == 2
