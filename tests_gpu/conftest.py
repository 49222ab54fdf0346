"""Shared requirements of the GPU lane: what a vLLM test needs, checked once per module, skipped with the reason."""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest


def vllm_gpu_skip_reason() -> str | None:
    """Why a vLLM-on-GPU test cannot run here, or None when it can (imports torch only when vllm is present)."""
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed"
    if shutil.which("nvidia-smi") is None:
        return "no NVIDIA GPU (nvidia-smi not found)"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device visible"
    return None


@pytest.fixture(scope="module")
def vllm_gpu() -> None:
    """Skip the module's tests with the reason when vLLM or a CUDA GPU is missing; engines use spawned workers."""
    reason = vllm_gpu_skip_reason()
    if reason:
        pytest.skip(reason)
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """The tiny random Qwen2.5-VL (``trace_lib.testing.tiny_qwen``), built once per module."""
    from trace_lib.testing.tiny_qwen import build_tiny_qwen25vl

    return build_tiny_qwen25vl(tmp_path_factory.mktemp("model") / "tiny-qwen25vl")
