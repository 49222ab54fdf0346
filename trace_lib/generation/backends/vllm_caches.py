"""Which of vLLM's on-disk caches an engine start found: ``cold``, ``new-model`` or ``warm``.

vLLM 0.24 keeps two caches under ``$VLLM_CACHE_ROOT`` (default ``$XDG_CACHE_HOME/vllm``, else ``~/.cache/vllm``)
that set how long an engine takes to start (docs/performance.md, run 38: 147, 114 and 80 s at the 3B shape):

- ``modelinfos/<module>-<class>.json``: the model class, inspected once in a subprocess; kept per machine and
  architecture (both release shapes are one architecture);
- ``torch_compile_cache/<hash>/`` and ``torch_compile_cache/torch_aot_compile/<hash>/``: the compiled model, keyed
  by the engine's configuration, the model's path included (``ModelConfig.compute_hash``), so every new
  checkpoint path compiles again.

A start that wrote a model-info file was ``cold`` (the machine's first of this architecture); one that wrote only a
compiled model was ``new-model``; one that wrote neither found both caches ``warm``. Reading the directories never
imports vLLM.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

#: The cache states of an engine start, from slowest to fastest.
ENGINE_CACHES = ("cold", "new-model", "warm")
AOT_DIR = "torch_aot_compile"


def vllm_cache_root(env: Mapping[str, str] | None = None) -> Path:
    """``$VLLM_CACHE_ROOT``, else ``$XDG_CACHE_HOME/vllm``, else ``~/.cache/vllm`` (vLLM's own rule)."""
    env = os.environ if env is None else env
    if env.get("VLLM_CACHE_ROOT"):
        return Path(os.path.expanduser(env["VLLM_CACHE_ROOT"]))
    return Path(os.path.expanduser(env.get("XDG_CACHE_HOME") or "~/.cache")) / "vllm"


@dataclass(frozen=True)
class CacheSnapshot:
    """The entries of vLLM's two start-up caches at one moment (names relative to the cache root)."""

    model_infos: frozenset[str]
    compiled: frozenset[str]


def _names(directory: Path, skip: str = "") -> set[str]:
    try:
        return {entry.name for entry in os.scandir(directory) if entry.name != skip}
    except OSError:  # absent or unreadable: nothing cached there
        return set()


def snapshot(root: Path) -> CacheSnapshot:
    """What ``root`` (a vLLM cache root) holds now; an absent root holds nothing."""
    compile_dir = root / "torch_compile_cache"
    compiled = _names(compile_dir, skip=AOT_DIR) | {f"{AOT_DIR}/{n}" for n in _names(compile_dir / AOT_DIR)}
    return CacheSnapshot(frozenset(_names(root / "modelinfos")), frozenset(compiled))


def caches_found(before: CacheSnapshot, after: CacheSnapshot) -> str:
    """The state an engine start between ``before`` and ``after`` found (module docstring)."""
    if after.model_infos - before.model_infos:
        return "cold"
    if after.compiled - before.compiled:
        return "new-model"
    return "warm"
