"""A tiny random Qwen3 text checkpoint standing in for the Qwen3-32B judge: ``build_tiny_qwen3_judge(dest) -> dest``.

The directory loads like a real ``Qwen/Qwen3-*`` snapshot in transformers and ``vllm serve`` (``Qwen3ForCausalLM``,
2 layers, hidden 128, 2 query heads / 1 KV head of 64, q/k norms, 40,960 positions so ``--max-model-len 8192``
fits), random weights from ``seed`` in bfloat16. The tokenizer is :mod:`trace_lib.testing.tiny_qwen`'s byte-level
BPE plus ``<think>`` / ``</think>`` (the ``qwen3`` reasoning parser needs both), and its chat template is
:data:`QWEN3_NO_THINK_TEMPLATE`: system/user/assistant turns, and with ``add_generation_prompt`` the assistant
header followed by an empty think block when ``enable_thinking`` is false (the rendering
:func:`trace_lib.scoring.judge.render_qwen3_no_think` sends). Needs torch, transformers and tokenizers.

:func:`write_qwen3_judge_shaped_config` writes the same tokenizer beside a config with Qwen3-32B's layer shapes
(:data:`QWEN3_32B_SHAPES`) and no weights, for ``vllm serve --load-format dummy`` (``benchmarks/judge_throughput.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

#: A Qwen3-like chat template: thinking off renders ``<think>\n\n</think>\n\n`` after the assistant header.
QWEN3_NO_THINK_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for part in message['content'] %}{%- if part['type'] == 'text' %}{{- part['text'] }}"
    "{%- endif %}{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}"
)
THINK_TOKENS = ("<think>", "</think>")


def build_tiny_qwen3_judge(dest: Path, *, seed: int = 0) -> Path:
    """Write the tiny judge into ``dest`` (created; must be empty or absent) and return it.

    Raises:
        FileExistsError: ``dest`` exists and is not empty.
    """
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from trace_lib.testing.tiny_qwen import _write_json, save_random_weights, staging_dir

    dest = Path(dest)
    staging = staging_dir(dest)
    ids, vocab_size = _write_judge_tokenizer(staging)

    config = Qwen3Config(
        vocab_size=vocab_size, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=64, max_position_embeddings=40960, rms_norm_eps=1e-6,
        tie_word_embeddings=False, bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    config.architectures = ["Qwen3ForCausalLM"]
    save_random_weights(Qwen3ForCausalLM, config, staging, seed=seed)
    _write_json(staging / "generation_config.json", _generation_config(ids))
    if dest.exists():
        dest.rmdir()
    os.replace(staging, dest)
    return dest


def _write_judge_tokenizer(dest: Path) -> tuple[dict[str, int], int]:
    """Write the judge's tokenizer files (tiny BPE + think tokens, :data:`QWEN3_NO_THINK_TEMPLATE`) into ``dest``;
    return (special token -> id, vocabulary size)."""
    from tokenizers import AddedToken

    from trace_lib.testing.tiny_qwen import _CORPUS, _build_tokenizer, _write_json, _write_tokenizer_files

    tok = _build_tokenizer(_CORPUS)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK_TOKENS])
    ids = _write_tokenizer_files(tok, dest)
    config_path = dest / "tokenizer_config.json"
    tokenizer_config = json.loads(config_path.read_text(encoding="utf-8"))
    for token in THINK_TOKENS:
        tokenizer_config["added_tokens_decoder"][str(tok.token_to_id(token))] = {
            "content": token, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
            "special": False,
        }
    tokenizer_config["chat_template"] = QWEN3_NO_THINK_TEMPLATE
    _write_json(config_path, tokenizer_config)
    return ids, tok.get_vocab_size(with_added_tokens=True)


def _generation_config(ids: dict[str, int]) -> dict:
    return {"bos_token_id": ids["<|endoftext|>"], "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
            "pad_token_id": ids["<|endoftext|>"], "do_sample": True, "temperature": 0.6, "top_p": 0.95, "top_k": 20}


#: The layer shapes of ``Qwen/Qwen3-32B``'s ``config.json`` (the pinned judge): 64 layers, hidden 5120, MLP 25600,
#: 64 query / 8 KV heads of 128, vocabulary 151,936, untied embeddings (32.8B parameters).
QWEN3_32B_SHAPES = {
    "hidden_size": 5120, "intermediate_size": 25600, "num_hidden_layers": 64, "num_attention_heads": 64,
    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
    "rope_theta": 1000000, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
}


def write_qwen3_judge_shaped_config(dest: Path, shapes: dict = QWEN3_32B_SHAPES) -> Path:
    """Write a Qwen3 judge directory with ``shapes`` (default: Qwen3-32B's; the vocabulary is the tokenizer's) and
    *no* weights -- serve it with ``--load-format dummy`` (random weights); the tokenizer and chat template are the
    tiny judge's. Needs
    ``tokenizers`` only. Returns ``dest``.

    Raises:
        FileExistsError: ``dest`` exists and is not empty.
    """
    from trace_lib.testing.tiny_qwen import _write_json, empty_dir

    dest = empty_dir(dest)
    ids, vocab_size = _write_judge_tokenizer(dest)
    _write_json(dest / "config.json", {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_act": "silu", "attention_bias": False,
        "attention_dropout": 0.0, "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False,
        "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
        # the tokenizer's vocabulary: random weights must sample ids it can decode (2% of the 32B's weights less)
        **shapes, "vocab_size": vocab_size,
    })
    _write_json(dest / "generation_config.json", _generation_config(ids))
    return dest
