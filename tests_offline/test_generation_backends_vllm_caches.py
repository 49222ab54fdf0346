"""Which of vLLM's start-up caches an engine start found (trace_lib.generation.backends.vllm_caches), read from
directories laid out as vLLM 0.24 writes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from trace_lib.generation.backends.vllm_caches import caches_found, snapshot, vllm_cache_root

pytestmark = pytest.mark.offline

MODEL_INFO = "vllm-model_executor-models-qwen2_5_vl-Qwen2_5_VLForConditionalGeneration.json"


def _inspected(root: Path) -> None:
    (root / "modelinfos").mkdir(parents=True, exist_ok=True)
    (root / "modelinfos" / MODEL_INFO).write_text('{"hash": "0", "modelinfo": {}}', encoding="utf-8")


def _compiled(root: Path, config_hash: str, aot_hash: str) -> None:
    backbone = root / "torch_compile_cache" / config_hash / "rank_0_0" / "backbone"
    backbone.mkdir(parents=True, exist_ok=True)
    (backbone / "cache_key_factors.json").write_text("{}", encoding="utf-8")
    (root / "torch_compile_cache" / "torch_aot_compile" / aot_hash).mkdir(parents=True, exist_ok=True)


def test_the_cache_root_follows_vllms_rule(tmp_path):
    assert vllm_cache_root({"VLLM_CACHE_ROOT": str(tmp_path / "v")}) == tmp_path / "v"
    assert vllm_cache_root({"XDG_CACHE_HOME": str(tmp_path / "x")}) == tmp_path / "x" / "vllm"
    assert vllm_cache_root({}) == Path.home() / ".cache" / "vllm"


def test_a_machines_first_start_is_cold_a_new_path_compiles_and_a_repeat_is_warm(tmp_path):
    root = tmp_path / "vllm"
    empty = snapshot(root)  # an absent root holds nothing
    assert empty.model_infos == frozenset() and empty.compiled == frozenset()
    _inspected(root)
    _compiled(root, "166c46ac1f", "6669633078b8")
    first = snapshot(root)
    assert caches_found(empty, first) == "cold"
    assert first.compiled == {"166c46ac1f", "torch_aot_compile/6669633078b8"}
    (root / "torch_compile_cache" / "166c46ac1f" / "rank_0_0" / "backbone" / "more.py").write_text("")
    assert caches_found(first, snapshot(root)) == "warm"  # files inside a known entry: the cache was hit
    _compiled(root, "4b3fcbc7ff", "e0b3e8531b3c")  # the same model at another path
    assert caches_found(first, snapshot(root)) == "new-model"
    before = snapshot(root)
    (root / "torch_compile_cache" / "torch_aot_compile" / "f00d").mkdir()  # only an AOT entry is new
    assert caches_found(before, snapshot(root)) == "new-model"


def test_an_unreadable_cache_directory_counts_as_empty(tmp_path):
    root = tmp_path / "vllm"
    root.mkdir()
    (root / "modelinfos").write_text("not a directory", encoding="utf-8")
    assert snapshot(root).model_infos == frozenset()
