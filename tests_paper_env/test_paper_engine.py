"""trace-repro on the paper's engine (vllm 0.10.2, torch 2.8.0, transformers 4.57.6), without a GPU: the engine
record, SamplingParams, request bodies, vLLM's own chat rendering and prompt token ids, the vllm backend driving
0.10.2's ``LLM`` API, and the hf backend / tiny-model builder on transformers 4.57.6."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from types import SimpleNamespace

import pytest

#: SamplingParams fields that decide what is sampled (all must equal what vLLM's server builds).
SAMPLING_FIELDS = ("n", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty",
                   "frequency_penalty", "seed", "max_tokens", "min_tokens", "stop", "stop_token_ids", "ignore_eos",
                   "logprobs", "skip_special_tokens", "spaces_between_special_tokens", "include_stop_str_in_output")


@pytest.fixture(scope="module")
def pre(tiny_model):
    from trace_lib.testing.vllm_cpu import VLLMPreprocessor

    return VLLMPreprocessor(tiny_model, max_model_len=4096)


def test_this_environment_is_the_papers(paper_record, receipt):
    for name, value in paper_record.properties():
        receipt(name, value)
    assert paper_record.matches_paper, paper_record.drift()
    assert paper_record.engine.cuda is not None and "cuda" not in paper_record.unchecked


def _server_sampling_params(body, defaults):
    """What vLLM's OpenAI server builds from ``body`` (``ChatCompletionRequest.to_sampling_params``)."""
    import inspect

    from vllm.entrypoints.openai.protocol import ChatCompletionRequest

    request = ChatCompletionRequest(**body)
    params = inspect.signature(request.to_sampling_params).parameters
    kwargs = {"default_sampling_params": defaults}
    if "logits_processor_pattern" in params:
        kwargs["logits_processor_pattern"] = None
    return request.to_sampling_params(body["max_tokens"], **kwargs)


def test_sampling_params_equal_what_vllm_serve_builds_from_the_same_body(requests, pre):
    from vllm import SamplingParams

    from trace_lib.generation.backends.vllm import sampling_kwargs

    defaults = pre.default_sampling()
    assert defaults, "the tiny checkpoint's generation config must differ from the suite (see tiny_qwen)"
    for request in requests:
        ours = SamplingParams.from_optional(**sampling_kwargs(request.sampling, defaults))
        theirs = _server_sampling_params(request.payload("tiny"), defaults)
        assert {f: getattr(ours, f) for f in SAMPLING_FIELDS} == {f: getattr(theirs, f) for f in SAMPLING_FIELDS}
        assert ours.seed == request.seed and ours.temperature == request.sampling["temperature"]


def test_openai_request_bodies_are_the_payload_and_vllm_0_10_2_keeps_every_field(requests):
    from vllm.entrypoints.openai.protocol import ChatCompletionRequest

    from trace_lib.generation.backends.openai import OpenAIBackend
    from trace_lib.testing.openai_server import OpenAIStubServer

    with OpenAIStubServer(lambda route, body: "B", model="tiny") as stub:
        backend = OpenAIBackend(model_path="unused", served_name="tiny", base_url=stub.url, concurrency=2)
        try:
            results = list(backend.generate(requests))
        finally:
            backend.close()
        bodies = {json.dumps(body, sort_keys=True) for _, body in stub.requests}
    assert len(results) == len(requests)
    assert bodies == {json.dumps(r.payload("tiny"), sort_keys=True) for r in requests}
    for request in requests:
        body = request.payload("tiny")
        assert set(body) <= set(ChatCompletionRequest.model_fields), set(body) - set(ChatCompletionRequest.model_fields)
        parsed = ChatCompletionRequest(**body)
        assert parsed.mm_processor_kwargs == body["mm_processor_kwargs"] and parsed.seed == request.seed


def test_vllm_renders_the_prompt_transformers_renders(requests, pre, tiny_model):
    """vLLM 0.10.2's own chat rendering + multimodal processor give the hf backend's token ids (4.57.6)."""
    from transformers import AutoProcessor

    from trace_lib.testing.hf_prompt_ids import hf_prompt_ids

    processor = AutoProcessor.from_pretrained(tiny_model)
    image_pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    for request in requests[:3]:
        rendered = pre.prompts([request.messages_json()], request.mm_processor_kwargs)[0]
        expected = hf_prompt_ids(processor, request.messages_json(), request.mm_processor_kwargs)
        assert rendered.prompt_token_ids == expected, request.request_id
        images = len(request.image_paths())
        assert rendered.template_token_ids.count(image_pad) == images
        assert (rendered.prompt_token_ids.count(image_pad) > images) == (images > 0)
    small = dict(requests[1].mm_processor_kwargs, max_pixels=28 * 28 * 4)  # the bounds reach vLLM's processor
    fewer = pre.prompts([requests[1].messages_json()], small)[0]
    assert len(fewer.prompt_token_ids) < len(pre.prompts([requests[1].messages_json()],
                                                          requests[1].mm_processor_kwargs)[0].prompt_token_ids)


@pytest.mark.skipif(not os.environ.get("TRACE_REFERENCE_PYTHON"),
                    reason="TRACE_REFERENCE_PYTHON (an interpreter with the current engine's transformers 5.x) not set")
def test_prompt_token_ids_equal_the_current_engines_transformers(requests, pre, tiny_model, tmp_path):
    """The same checkpoint and requests give the same ids under transformers 5.x (the GPU lane ties vLLM 0.24's
    prompt token counts to that processor)."""
    subset = requests[:3]
    spec = tmp_path / "requests.json"
    spec.write_text(json.dumps([{"messages": r.messages_json(), "mm_processor_kwargs": dict(r.mm_processor_kwargs)}
                                for r in subset]))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_repo_root()),
                                                                       os.environ.get("TRACE_REFERENCE_PYTHONPATH")]))}
    done = subprocess.run([os.environ["TRACE_REFERENCE_PYTHON"], "-m", "trace_lib.testing.hf_prompt_ids",
                           str(tiny_model), str(spec)], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    reference = json.loads(done.stdout.splitlines()[-1])
    ours = [p.prompt_token_ids for p in pre.prompts([r.messages_json() for r in subset],
                                                    subset[0].mm_processor_kwargs)]
    assert ours == reference


def _repo_root():
    from pathlib import Path

    return Path(__file__).resolve().parents[1]


class _Engine:
    """The parts of vLLM 0.10.2's ``LLMEngine`` the vllm backend and ``LLM.preprocess_chat`` use; ``step``
    answers every request at once with its preprocessed prompt length."""

    def __init__(self, pre) -> None:
        from vllm.transformers_utils.tokenizer_group import TokenizerGroup

        self.model_config = pre.model_config
        self._pre = pre
        self._group = TokenizerGroup(tokenizer_id=pre.model_config.model, enable_lora=False, max_num_seqs=1,
                                     max_input_length=None, trust_remote_code=True)
        self.added: dict[str, tuple] = {}
        self.aborted: list[str] = []

    def get_model_config(self):
        return self.model_config

    def get_tokenizer_group(self):
        return self._group

    def add_request(self, request_id, prompt, params, **kwargs):
        assert not kwargs
        self.added[request_id] = (self._pre._input.preprocess(prompt)["prompt_token_ids"], params)

    def has_unfinished_requests(self):
        return bool(self.added)

    def step(self):
        out = []
        for request_id, (ids, params) in list(self.added.items()):
            completion = SimpleNamespace(text=f"seed={params.seed} n={len(ids)}", finish_reason="stop",
                                         token_ids=[1, 2, 3])
            out.append(SimpleNamespace(request_id=request_id, finished=True, prompt_token_ids=ids,
                                       outputs=[completion]))
            del self.added[request_id]
        return out

    def abort_request(self, request_ids):  # 0.10.2's signature: no ``internal``
        self.aborted += list(request_ids)


def test_vllm_backend_drives_the_0_10_2_llm_api(requests, pre):
    """0.10.2's ``LLM`` has no ``enqueue_chat``: the backend renders with ``LLM.preprocess_chat`` and adds
    final-only requests; every result maps back to its request with vLLM's prompt length."""
    from vllm import LLM
    from vllm.sampling_params import RequestOutputKind
    from vllm.utils import Counter

    from trace_lib.generation.backends.vllm import VLLMBackend, abort_requests

    assert not hasattr(LLM, "enqueue_chat")
    llm = object.__new__(LLM)
    llm.llm_engine = _Engine(pre)
    llm.request_counter = Counter()
    backend = VLLMBackend(model_path="unused", served_name="tiny", llm=llm)
    seen_params = []
    original = llm.llm_engine.add_request

    def add_request(request_id, prompt, params, **kwargs):
        seen_params.append(params)
        original(request_id, prompt, params, **kwargs)

    llm.llm_engine.add_request = add_request
    results = {r.request_id: r for r in backend.generate(requests)}
    assert sorted(results) == sorted(r.request_id for r in requests)
    for request in requests:
        expected = pre.prompts([request.messages_json()], request.mm_processor_kwargs)[0].prompt_token_ids
        assert results[request.request_id].prompt_tokens == len(expected)
        assert results[request.request_id].text == f"seed={request.seed} n={len(expected)}"
    assert {p.output_kind for p in seen_params} == {RequestOutputKind.FINAL_ONLY}
    abort_requests(llm.llm_engine, ["7"])
    assert llm.llm_engine.aborted == ["7"]


def test_hf_backend_and_tiny_builder_on_transformers_4_57(requests, tiny_model, pre):
    import transformers

    from trace_lib.generation.backends.hf import HFBackend

    config = json.loads((tiny_model / "config.json").read_text())
    assert config["transformers_version"] == transformers.__version__
    assert config["text_config"]["rope_scaling"]["mrope_section"] == [8, 12, 12]
    short = [dataclasses.replace(r, sampling={**r.sampling, "max_tokens": 6}) for r in requests[:3]]
    backend = HFBackend(model_path=str(tiny_model), served_name="tiny")
    try:
        first = list(backend.generate(short))
        again = list(backend.generate(short[:1]))
    finally:
        backend.close()
    assert [r.request_id for r in first] == [r.request_id for r in short]
    assert again[0].text == first[0].text  # the request's seed fixes the sample
    for request, result in zip(short, first):
        expected = pre.prompts([request.messages_json()], request.mm_processor_kwargs)[0].prompt_token_ids
        assert result.prompt_tokens == len(expected)
        assert 1 <= result.completion_tokens <= 6 and result.finish_reason in ("stop", "length")
