"""Backend plumbing that needs no engine: vLLM sampling exactly as its server derives it, lazy imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trace_lib.errors import BackendError
from trace_lib.generation.backends.vllm import EngineLoopStats, sampling_kwargs
from trace_lib.release.suite import load_suite

#: What ``ModelConfig.get_diff_sampling_param`` returns for a Qwen2.5-VL-Instruct-like generation_config.
QWEN_DEFAULTS = {"repetition_penalty": 1.05, "temperature": 0.1, "top_p": 0.001, "top_k": 1}


def test_suite_fields_override_the_checkpoint_defaults(release):
    generation = load_suite(release).generation
    sampling = {k: generation[k] for k in ("temperature", "top_p", "top_k", "max_tokens", "presence_penalty",
                                           "repetition_penalty")}
    kwargs = sampling_kwargs({**sampling, "seed": 44}, QWEN_DEFAULTS)
    for name, value in sampling.items():
        assert kwargs[name] == value
    assert kwargs["seed"] == 44
    assert kwargs["min_p"] == 0.0 and kwargs["frequency_penalty"] == 0.0  # not sent: server defaults


def test_unsent_fields_take_the_generation_config_like_the_server():
    kwargs = sampling_kwargs({"max_tokens": 8}, {**QWEN_DEFAULTS, "min_p": 0.05})
    assert (kwargs["temperature"], kwargs["top_k"], kwargs["min_p"], kwargs["repetition_penalty"]) == (0.1, 1, 0.05, 1.05)
    assert kwargs["seed"] is None and kwargs["skip_special_tokens"] is True


def test_unknown_sampling_field_is_refused_not_dropped():
    with pytest.raises(BackendError, match="sampling fields not supported by the vllm backend"):
        sampling_kwargs({"max_tokens": 8, "logit_bias": {}}, {})


def test_backend_modules_import_no_engine():
    code = ("import sys, trace_lib.generation.backends.vllm, trace_lib.generation.backends.hf, "
            "trace_lib.generation.backends.openai, trace_lib.generation.run, trace_lib.testing.tiny_qwen; "
            "print(sorted(m for m in ('torch', 'vllm', 'transformers', 'tokenizers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_fields_neither_sent_nor_in_the_generation_config_take_the_servers_neutral_values():
    assert sampling_kwargs({}, {}) == {
        "repetition_penalty": 1.0, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
        "presence_penalty": 0.0, "frequency_penalty": 0.0, "seed": None, "max_tokens": None,
        "skip_special_tokens": True, "spaces_between_special_tokens": True, "include_stop_str_in_output": False}


@pytest.mark.parametrize("stats,wall_s,line", [
    (EngineLoopStats(), 0.0, "adding 0 requests took 0.0 s (0.0 ms each); 0 engine steps waited 0.0 s"),
    (EngineLoopStats(adding_s=0.25, stepping_s=1.0, steps=4, held=12, requests=5), 0.5,
     "adding 5 requests took 50% of 0.5 s (50.0 ms each); 4 engine steps waited 1.0 s, holding 3 requests on average"),
    (EngineLoopStats(adding_s=2.0, steps=1, held=1, requests=2, rerendered=1, render_wait_s=1.5), 4.0,
     "adding 2 requests (1 rendered again, whole) took 50% of 4.0 s (1000.0 ms each, 1.5 s of it waiting for "
     "render workers); 1 engine steps waited 0.0 s, holding 1 requests on average"),
])
def test_the_loop_stats_summary_line(stats, wall_s, line):
    assert stats.summary(wall_s) == line


def _stub_vllm(monkeypatch, tmp_path, made: list) -> None:
    import tempfile

    from trace_lib.testing.stub_vllm import StubLLM, stub_vllm_module

    module = stub_vllm_module()

    def llm(**kwargs):  # noqa: ANN003, ANN202
        made.append(kwargs)
        return StubLLM()

    module.LLM = llm
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the engine start locks
    monkeypatch.delenv("TRACE_VLLM_LOAD_FORMAT", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # one GPU named: counting them would import torch


def test_an_engine_is_created_with_upstreams_generation_server_defaults(monkeypatch, tmp_path):
    from trace_lib.generation.backends.vllm import VLLMBackend

    made: list[dict] = []
    _stub_vllm(monkeypatch, tmp_path, made)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0, ,3")
    VLLMBackend(model_path=tmp_path / "model", served_name="m")
    assert made == [dict(model=str(tmp_path / "model"), served_model_name="m", trust_remote_code=True,
                         tensor_parallel_size=2, allowed_local_media_path=str(Path("/").resolve()),
                         max_model_len=32768, max_num_seqs=256, max_num_batched_tokens=32768,
                         gpu_memory_utilization=0.90, limit_mm_per_prompt={"image": 24, "video": 3}, dtype="auto",
                         enforce_eager=False)]
    assert sorted(p.name for p in (tmp_path / "trace-repro-engine-start").iterdir()) == ["gpu-0.lock", "gpu-3.lock"]


def test_engine_options_and_further_llm_arguments_reach_the_engine(monkeypatch, tmp_path):
    from trace_lib.generation.backends.vllm import VLLMBackend

    made: list[dict] = []
    _stub_vllm(monkeypatch, tmp_path, made)
    VLLMBackend(model_path="m", served_name="m", tensor_parallel_size=1, allowed_local_media_path=str(tmp_path),
                llm_kwargs={"seed": 3, "dtype": "bfloat16"})
    assert made[0]["allowed_local_media_path"] == str(tmp_path.resolve())
    assert (made[0]["seed"], made[0]["dtype"], made[0]["tensor_parallel_size"]) == (3, "bfloat16", 1)


def test_closing_shuts_down_an_engine_the_backend_created_but_not_one_it_was_given(monkeypatch, tmp_path):
    from trace_lib.generation.backends.vllm import VLLMBackend
    from trace_lib.testing.stub_vllm import StubLLM

    made: list[dict] = []
    _stub_vllm(monkeypatch, tmp_path, made)
    shut: list[str] = []
    owned = VLLMBackend(model_path="m", served_name="m", tensor_parallel_size=1)
    owned.llm.llm_engine.shutdown = lambda: shut.append("engine")
    owned.close()
    core = VLLMBackend(model_path="m", served_name="m", tensor_parallel_size=1)
    core.llm.llm_engine.engine_core.shutdown = lambda: shut.append("core")
    core.close()
    given = StubLLM()
    given.llm_engine.shutdown = lambda: shut.append("given")
    borrowed = VLLMBackend(model_path="m", served_name="m", llm=given)
    borrowed.close()
    assert shut == ["engine", "core"] and owned.llm is core.llm is borrowed.llm is None


def test_an_engine_start_failure_names_too_little_free_gpu_memory():
    from trace_lib.generation.backends.vllm import engine_start_error

    gib = 2 ** 30
    error = engine_start_error(RuntimeError("init failed\nEngine core initialization failed"), served_name="m",
                               gpu_memory_utilization=0.9, memory=lambda: (10 * gib, 80 * gib))
    assert error.message == ("m: the vllm engine did not start: its GPU has 10.0 GiB free of 80.0 GiB and the engine "
                             "asks for 0.9 of it (72.0 GiB) (RuntimeError: Engine core initialization failed)")
    assert error.out_of_memory and error.field == "--gpu-memory-utilization"
    assert error.hint == ("another process holds that memory (a judge, another engine on the GPU); lower "
                          "--gpu-memory-utilization or --engines-per-group, or free the GPU")


def test_the_gpu_memory_is_read_as_free_and_total_bytes(monkeypatch):
    import types

    from trace_lib.generation.backends.vllm import _cuda_memory

    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(
        cuda=types.SimpleNamespace(mem_get_info=lambda: (1.0, 2.0))))
    assert _cuda_memory() == (1, 2) and all(type(n) is int for n in _cuda_memory())


def test_without_vllm_the_backend_says_what_to_install(monkeypatch):
    from trace_lib.generation.backends.vllm import VLLMBackend

    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(BackendError, match="vllm is not importable") as info:
        VLLMBackend(model_path="m", served_name="m")
    assert (info.value.field, info.value.hint) == ("--backend vllm", "install the 'eval' extra on a CUDA host")


def _no_gpu() -> tuple[int, int]:
    raise OSError("no CUDA")


@pytest.mark.parametrize("memory", [lambda: (75 * 2 ** 30, 80 * 2 ** 30), _no_gpu])
def test_an_engine_start_failure_with_memory_to_spare_or_no_gpu_to_ask_is_the_engines_line(memory):
    from trace_lib.generation.backends.vllm import engine_start_error

    error = engine_start_error(ValueError("bad config"), served_name="m", gpu_memory_utilization=0.9, memory=memory)
    assert error.message == "m: the vllm engine did not start: ValueError: bad config" and not error.out_of_memory


def _old_vllm_llm(refuse_at: int | None = None):  # noqa: ANN202
    import itertools
    import types

    added: list[tuple[str, object]] = []
    aborted: list[list[str]] = []

    def add_request(request_id, prompt, params):  # noqa: ANN001, ANN202
        if len(added) == refuse_at:
            raise ValueError("too long")
        added.append((request_id, prompt))

    engine = types.SimpleNamespace(add_request=add_request, abort_request=aborted.append)
    llm = types.SimpleNamespace(llm_engine=engine, request_counter=itertools.count(5),
                                preprocess_chat=lambda conversations, mm_processor_kwargs: [
                                    (c, mm_processor_kwargs) for c in conversations])
    return llm, added, aborted


def test_on_vllm_0_10_conversations_are_rendered_and_added_with_final_only_outputs(monkeypatch):
    import types

    from trace_lib.generation.backends.vllm import enqueue_chat

    monkeypatch.setitem(sys.modules, "vllm.sampling_params",
                        types.SimpleNamespace(RequestOutputKind=types.SimpleNamespace(FINAL_ONLY="final")))
    llm, added, aborted = _old_vllm_llm()
    params = [types.SimpleNamespace(), types.SimpleNamespace()]
    assert enqueue_chat(llm, [["a"], ["b"]], params, {"max_pixels": 9}) == ["5", "6"]
    assert added == [("5", (["a"], {"max_pixels": 9})), ("6", (["b"], {"max_pixels": 9}))]
    assert [p.output_kind for p in params] == ["final", "final"] and aborted == []

    llm, added, aborted = _old_vllm_llm(refuse_at=1)
    with pytest.raises(ValueError, match="too long"):
        enqueue_chat(llm, [["a"], ["b"]], [types.SimpleNamespace(), types.SimpleNamespace()], None)
    assert aborted == [["5"]]  # all or nothing


def test_requests_are_aborted_as_internal_ids_where_the_engine_asks_for_it():
    import types

    from trace_lib.generation.backends.vllm import abort_requests

    calls: list[tuple] = []

    def new(ids, internal=False):  # noqa: ANN001, ANN202
        calls.append((ids, internal))

    def old(ids):  # noqa: ANN001, ANN202
        calls.append((ids,))

    def opaque(ids):  # noqa: ANN001, ANN202
        calls.append(("opaque", ids))

    opaque.__signature__ = "not a signature"  # inspect.signature raises TypeError
    for abort in (new, old, opaque):
        abort_requests(types.SimpleNamespace(abort_request=abort), ["1"])
    assert calls == [(["1"], True), (["1"],), ("opaque", ["1"])]


def test_a_result_is_the_first_completion_of_the_output():
    import types

    from trace_lib.generation.backends.vllm import _result

    first = types.SimpleNamespace(text=None, finish_reason="length", token_ids=[1, 2])
    second = types.SimpleNamespace(text="other", finish_reason="stop", token_ids=[1])
    result = _result("r", types.SimpleNamespace(outputs=[first, second], prompt_token_ids=None))
    assert (result.text, result.finish_reason) == ("", "length")
    assert (result.prompt_tokens, result.completion_tokens) == (None, 2)


@pytest.mark.parametrize("visible,torch_count,count", [
    ("0,1", None, 2), (" 2 , ", None, 1), ("", 0, 1), (None, 0, 1), (None, 3, 3), (None, "missing", 1),
])
def test_the_visible_gpu_count(monkeypatch, visible, torch_count, count):
    import types

    from trace_lib.generation.backends.vllm import _visible_gpu_count

    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    fake = None if torch_count in (None, "missing") else types.SimpleNamespace(
        cuda=types.SimpleNamespace(device_count=lambda: torch_count))
    monkeypatch.setitem(sys.modules, "torch", fake)  # None: not importable
    assert _visible_gpu_count() == count


def test_by_default_the_engine_holds_four_times_max_num_seqs_added_max_num_seqs_at_a_time(monkeypatch):
    from trace_lib.generation.backends.base import RequestFeed
    from trace_lib.generation.backends.vllm import VLLMBackend
    from trace_lib.generation.request import ChatRequest
    from trace_lib.testing.stub_vllm import StubLLM, stub_vllm_module

    monkeypatch.setitem(sys.modules, "vllm", stub_vllm_module())
    backend = VLLMBackend(model_path="m", served_name="m", llm=StubLLM(per_step=4), max_num_seqs=8)
    requests = [ChatRequest(f"r{i}", ({"role": "user", "content": [{"type": "text", "text": "q"}]},),
                            {"max_tokens": 4, "seed": 1}, {}) for i in range(100)]
    assert len(list(backend.generate_stream(RequestFeed.of(requests)))) == 100
    assert backend.llm.most_held == 32 and {len(b) for b in backend.llm.batches[:-1]} == {8}


def test_an_engine_that_goes_idle_holding_requests_is_an_error(monkeypatch):
    from trace_lib.generation.backends.vllm import VLLMBackend
    from trace_lib.generation.request import ChatRequest
    from trace_lib.testing.stub_vllm import StubLLM, stub_vllm_module

    monkeypatch.setitem(sys.modules, "vllm", stub_vllm_module())
    llm = StubLLM()
    steps = iter([[]])
    llm.llm_engine.step = lambda: next(steps)
    llm.llm_engine.has_unfinished_requests = lambda: False
    backend = VLLMBackend(model_path="m", served_name="m", llm=llm)
    request = ChatRequest("r", ({"role": "user", "content": [{"type": "text", "text": "q"}]},), {"seed": 1}, {})
    with pytest.raises(BackendError, match="engine finished without answering every request"):
        list(backend.generate([request]))


def test_a_lone_refused_request_is_offered_to_the_engine_once(monkeypatch):
    from trace_lib.generation.backends.base import RequestsFailed
    from trace_lib.generation.backends.vllm import VLLMBackend
    from trace_lib.generation.request import ChatRequest
    from trace_lib.testing.stub_vllm import StubLLM, stub_vllm_module

    monkeypatch.setitem(sys.modules, "vllm", stub_vllm_module())
    llm = StubLLM(refuse="TOO LONG")
    offered: list[int] = []
    enqueue = llm.enqueue_chat
    llm.enqueue_chat = lambda conversations, **kwargs: offered.append(len(conversations)) or enqueue(conversations,
                                                                                                      **kwargs)
    backend = VLLMBackend(model_path="m", served_name="m", llm=llm)
    text = {"type": "text", "text": "TOO LONG"}
    request = ChatRequest("r", ({"role": "user", "content": [text]},), {"seed": 1}, {})
    with pytest.raises(RequestsFailed, match="refused by the engine"):
        list(backend.generate([request]))
    assert offered == [1]
