"""Backend plumbing that needs no engine: vLLM sampling exactly as its server derives it, lazy imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trace_lib.errors import BackendError
from trace_lib.generation.backends.vllm import sampling_kwargs
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
