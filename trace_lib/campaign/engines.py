"""How many engines share one GPU: ``trace-repro generate --engines-per-group auto``.

The rule: the largest N <= :data:`MAX_ENGINES_PER_GPU` such that each of N engines, given ``1/N`` of
``gpu_memory_utilization`` x the GPU's free memory, holds

- the model's weights (the ``*.safetensors`` files' size, else the parameter count ``config.json`` implies, in
  bfloat16),
- :data:`ENGINE_OVERHEAD_BYTES` (activations, CUDA graphs, the vision encoder's profiling run),
- KV cache for ``max_num_seqs`` sequences of :data:`KV_RESERVE_TOKENS` tokens (``config.json``: layers x KV heads
  x head size x 2 (K and V) x 2 bytes per token),

and 1 when even one engine does not, for a group of several GPUs (tensor parallel) or without ``nvidia-smi``.
Two engines were measured faster than one at both release shapes on an H200 (docs/performance.md). Three were
1.08x two side by side at 3B, and 2-3% above two (other runs) at 7B, where the GPU is already busy. Their start is
21-180 s longer, which only 19,000-164,000 rows per GPU repay: hence the cap (pass ``--engines-per-group 3`` by
hand). A second engine also has to pay for its start: a GPU group with fewer than :data:`MIN_ROWS_FOR_SECOND_ENGINE`
rows to generate gets one engine whatever the memory allows. On one H200 (~140 GiB free, 0.90) the rule gives 2 for
the 3B and the 7B shapes; on an 80 GB GPU, 2 for 3B and 1 for 7B.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from trace_lib.errors import InputError
from trace_lib.jsonio import loads_strict, strict_error

MAX_ENGINES_PER_GPU = 2
ENGINE_OVERHEAD_BYTES = 4 * 2**30
KV_RESERVE_TOKENS = 2048
BYTES_PER_PARAMETER = 2  # bfloat16
DEFAULT_MAX_NUM_SEQS = 256  # the vllm backend's default (upstream's)
#: Rows a GPU group needs before a second engine pays for its start. The second engine of a GPU comes up 42-47 s
#: after the first (the starts are serialised; H200, mini campaign of docs/performance.md) while one 3B engine
#: generates ~34 rows/s (226 output tokens a row): a second engine gains only on work that one engine alone would
#: need longer than that start for, ~45 s x 34 rows/s = 1,530 rows; doubled for margin. Measured: 384 rows took 50.8 s
#: to generate with two engines and 11.2 s with one.
MIN_ROWS_FOR_SECOND_ENGINE = 3000


@dataclass(frozen=True)
class ModelSize:
    """What one engine of a model needs to hold: weight bytes and KV-cache bytes per token."""

    weight_bytes: int
    kv_bytes_per_token: int


@dataclass(frozen=True)
class EngineChoice:
    """The chosen engines per GPU and the figures behind it (``reason`` is one line for the log)."""

    engines: int
    reason: str


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    text = config.get("text_config")
    return text if isinstance(text, Mapping) and "num_hidden_layers" in text else config


def config_parameters(config: Mapping[str, Any]) -> int:
    """The parameters ``config.json`` implies: embeddings (twice when untied), per layer attention (q, k, v, o with
    biases ignored) and a gated MLP, and a Qwen2.5-VL vision tower (``vision_config``) when present."""
    text = _text_config(config)
    hidden, layers = int(text["hidden_size"]), int(text["num_hidden_layers"])
    heads = int(text["num_attention_heads"])
    kv_heads = int(text.get("num_key_value_heads", heads))
    head_dim = int(text.get("head_dim") or hidden // heads)
    inter, vocab = int(text["intermediate_size"]), int(text.get("vocab_size") or config.get("vocab_size") or 0)
    tied = bool(text.get("tie_word_embeddings", config.get("tie_word_embeddings", False)))
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    total = layers * (attention + 3 * hidden * inter) + vocab * hidden * (1 if tied else 2)
    vision = config.get("vision_config")
    if isinstance(vision, Mapping) and "depth" in vision:
        width, v_inter = int(vision["hidden_size"]), int(vision["intermediate_size"])
        total += int(vision["depth"]) * (4 * width * width + 3 * width * v_inter)
        total += 4 * width * 4 * width + 4 * width * int(vision.get("out_hidden_size", hidden))  # the merger
    return total


def kv_bytes_per_token(config: Mapping[str, Any]) -> int:
    """Layers x KV heads x head size x 2 (K and V) x 2 bytes."""
    text = _text_config(config)
    heads = int(text["num_attention_heads"])
    head_dim = int(text.get("head_dim") or int(text["hidden_size"]) // heads)
    return int(text["num_hidden_layers"]) * int(text.get("num_key_value_heads", heads)) * head_dim * 2 * 2


def model_size(model_dir: Path) -> ModelSize:
    """The weights and KV bytes per token of the checkpoint in ``model_dir``.

    Raises:
        InputError: no readable ``config.json``, or one without the layer fields.
    """
    from trace_lib.decoding import read_text

    path = Path(model_dir) / "config.json"
    try:  # as every input: a FIFO is one line, never opened (reading it blocked 'generate --engines-per-group auto')
        config = loads_strict(read_text(path))
    except (OSError, ValueError) as exc:
        reason = strict_error(exc) if isinstance(exc, ValueError) else exc.strerror or type(exc).__name__
        raise InputError(f"model config unreadable ({reason})", file=str(path)) from None
    try:
        weights = sum(p.stat().st_size for p in Path(model_dir).glob("*.safetensors"))
        weights = weights or config_parameters(config) * BYTES_PER_PARAMETER
        return ModelSize(int(weights), kv_bytes_per_token(config))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError("model config lacks the layer shapes", file=str(path), field=str(exc)) from None


def engine_need_bytes(size: ModelSize, kv_tokens: int) -> int:
    """What one engine of ``size`` holds: its weights, :data:`ENGINE_OVERHEAD_BYTES` and KV cache for ``kv_tokens``
    tokens."""
    return size.weight_bytes + ENGINE_OVERHEAD_BYTES + kv_tokens * size.kv_bytes_per_token


def share_shortfall(size: ModelSize, kv_tokens: int, share: float, gpu_total_bytes: int) -> str | None:
    """None when ``share`` of a GPU of ``gpu_total_bytes`` holds one engine of ``size`` with ``kv_tokens`` tokens
    of KV cache (:func:`engine_need_bytes`), else what it lacks, in a phrase with the figures."""
    need, have = engine_need_bytes(size, kv_tokens), share * gpu_total_bytes
    if have >= need:
        return None
    gib = 2**30
    return (f"{share:g} of this {gpu_total_bytes / gib:.1f} GiB GPU is {have / gib:.1f} GiB, less than the "
            f"{need / gib:.1f} GiB one engine needs (weights {size.weight_bytes / gib:.1f} + "
            f"{ENGINE_OVERHEAD_BYTES / gib:.0f} overhead + KV for {kv_tokens:,} tokens)")


def engines_per_gpu(size: ModelSize, free_bytes: int, *, gpu_memory_utilization: float,
                    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS) -> EngineChoice:
    """The module's rule for one GPU with ``free_bytes`` free."""
    need = engine_need_bytes(size, max_num_seqs * KV_RESERVE_TOKENS)
    budget = free_bytes * gpu_memory_utilization
    engines = max([n for n in range(1, MAX_ENGINES_PER_GPU + 1) if budget / n >= need] or [1])
    gib = 2**30
    return EngineChoice(engines, f"{engines} engine(s) per GPU: each needs {need / gib:.1f} GiB (weights "
                                 f"{size.weight_bytes / gib:.1f} + {ENGINE_OVERHEAD_BYTES / gib:.0f} overhead + KV for "
                                 f"{max_num_seqs} x {KV_RESERVE_TOKENS} tokens), {budget / gib:.1f} GiB usable "
                                 f"({gpu_memory_utilization:g} of {free_bytes / gib:.1f} GiB free); at most "
                                 f"{MAX_ENGINES_PER_GPU}")


def rows_pay_for_second_engine(rows_per_group: int | float) -> bool:
    """Whether a GPU group's rows are enough for a second engine to pay for its start."""
    return rows_per_group >= MIN_ROWS_FOR_SECOND_ENGINE


def choose_engines(model_dirs: list[Path], gpu_groups: tuple[tuple[int, ...], ...], *, gpu_memory_utilization: float,
                   max_num_seqs: int | None = None, gpus: tuple[dict[str, Any], ...] | None = None,
                   rows_per_group: int | None = None) -> EngineChoice:
    """``auto`` for a campaign: the rule for its largest model on its GPU with the least free memory (1 for
    tensor-parallel groups, when ``nvidia-smi`` lists none of the plan's GPUs, or when a group has fewer than
    :data:`MIN_ROWS_FOR_SECOND_ENGINE` of the plan's ``rows_per_group``)."""
    choice = _choose_by_memory(model_dirs, gpu_groups, gpu_memory_utilization=gpu_memory_utilization,
                               max_num_seqs=max_num_seqs, gpus=gpus)
    if choice.engines > 1 and rows_per_group is not None and not rows_pay_for_second_engine(rows_per_group):
        return EngineChoice(1, f"1 engine per GPU: {rows_per_group} rows per GPU group, fewer than the "
                               f"{MIN_ROWS_FOR_SECOND_ENGINE} a second engine needs to pay for its start (memory "
                               f"would allow {choice.engines})")
    return choice


def _choose_by_memory(model_dirs: list[Path], gpu_groups: tuple[tuple[int, ...], ...], *,
                      gpu_memory_utilization: float, max_num_seqs: int | None,
                      gpus: tuple[dict[str, Any], ...] | None) -> EngineChoice:
    if any(len(group) > 1 for group in gpu_groups):
        return EngineChoice(1, "1 engine per group: the groups are tensor parallel")
    if gpus is None:
        from trace_lib.reports.status import query_gpus

        gpus = query_gpus()
    wanted = {g for group in gpu_groups for g in group}
    free = [(g["memory_total_mib"] - g["memory_used_mib"]) * 2**20 for g in gpus if g["index"] in wanted]
    if not free:
        return EngineChoice(1, "1 engine per GPU: nvidia-smi lists none of the plan's GPUs")
    size = max((model_size(d) for d in model_dirs), key=lambda s: (s.weight_bytes, s.kv_bytes_per_token))
    return engines_per_gpu(size, min(free), gpu_memory_utilization=gpu_memory_utilization,
                           max_num_seqs=max_num_seqs or DEFAULT_MAX_NUM_SEQS)
