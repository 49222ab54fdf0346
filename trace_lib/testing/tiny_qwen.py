"""A tiny random Qwen2.5-VL checkpoint for tests: ``build_tiny_qwen25vl(dest) -> dest``.

The directory has the file set of a real ``Qwen/Qwen2.5-VL-*-Instruct`` snapshot (``config.json``,
``generation_config.json``, ``model.safetensors``, ``tokenizer.json``, ``tokenizer_config.json``,
``vocab.json``, ``merges.txt``, ``preprocessor_config.json``, ``chat_template.json``) so that transformers
(``AutoProcessor``, ``Qwen2_5_VLForConditionalGeneration``), vLLM and verl load it like the real thing:

- architecture ``Qwen2_5_VLForConditionalGeneration`` with a 2-layer text model (hidden 128, 2 heads of 64,
  M-RoPE sections summing to 32) and a 2-block vision tower (hidden 128, 2 heads, window attention on block 0,
  full attention on block 1), random weights from ``seed``, saved in bfloat16 like the release checkpoints;
- a byte-level BPE tokenizer trained here with the ``tokenizers`` library on a built-in corpus, using Qwen2's
  normaliser / pre-tokeniser / decoder pipeline, followed by the 22 Qwen special tokens in Qwen's order
  (``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, ... ``<|vision_start|>``, ``<|image_pad|>`` ...);
  ``config.vocab_size`` equals the tokenizer size, so every sampled id decodes;
- the Qwen2.5-VL chat template (default ``You are a helpful assistant.`` system turn when the first message
  is not a system message; images rendered as ``<|vision_start|><|image_pad|><|vision_end|>``);
- the Qwen2-VL image-processor settings (patch 14, merge 2, CLIP mean/std, min/max pixels of the release
  checkpoints) and a Qwen-like ``generation_config.json`` (its sampling defaults differ from the suite's on
  purpose: a request that forgets a decoding field changes behaviour and a test can see it).

Needs torch, transformers (4.57 or 5.x: the M-RoPE settings are written in the installed version's spelling)
and tokenizers; builds in a few seconds on CPU. Deterministic for a seed.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

#: Qwen2.5-VL special tokens in the release tokenizer's id order (they follow the BPE vocabulary).
SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
#: The ones the released tokenizer marks ``special: true`` (the tool-call / FIM tokens are plain added tokens).
_NON_SPECIAL = frozenset({"<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                          "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"})

#: The chat template shipped in the ``Qwen/Qwen2.5-VL-*-Instruct`` checkpoints (``chat_template.json``).
QWEN25VL_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

#: Qwen2's pre-tokenisation regex (the same pipeline transformers' ``Qwen2Tokenizer`` rebuilds on load).
_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

_BPE_VOCAB = 448  # trained merges + 256 byte symbols; the 22 special tokens follow

_CORPUS = """\
You are a helpful assistant. Answer the question using a single word or phrase.
Question: How many objects are in the image? Options: A. one B. two C. three D. four
Answer with the option's letter from the given choices directly. The answer is B.
Hint: Please answer the question and provide the correct option letter, e.g., A, B, C, D, at the end.
Which of the following is the largest value shown in the chart? Please reason step by step,
and put your final answer within \\boxed{}. The final answer is \\boxed{42}.
What is the area of the triangle? The base is 12 and the height is 5, so the area is 30.
Solve the puzzle: the pattern repeats every three shapes; the missing shape is a red circle.
Is the cube to the left of the sphere? Yes, the cube is closer to the camera than the sphere.
Count the apples on the table: there are 7 apples and 3 oranges, 10 fruits in total.
Estimate the distance in meters between the chair and the door; the answer is 2.5 meters.
The table lists revenue for 2019, 2020 and 2021; the growth rate is 12.5% per year.
{"answer": "C", "reasoning": "the angle is 45 degrees"} [1, 2, 3] (x + y) * z = 0; f(x) = x^2 - 1
Think about the physics: the ball accelerates at 9.8 m/s^2 until it reaches the ground.
Select the correct statement about the diagram. The arrow points from the leaf to the caterpillar.
0 1 2 3 4 5 6 7 8 9 10 100 1000 3.14159 -7 +8 1/2 \\frac{1}{2} \\sqrt{2} \\pi \\times \\div
"""


def _build_tokenizer(corpus: str):
    """A byte-level BPE in Qwen2's pipeline, trained on ``corpus``, then Qwen's special tokens appended."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers.trainers import BpeTrainer

    tok = Tokenizer(models.BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = BpeTrainer(
        vocab_size=_BPE_VOCAB,
        min_frequency=1,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(corpus.splitlines() * 4, trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=t not in _NON_SPECIAL, normalized=False) for t in SPECIAL_TOKENS])
    return tok


def _write_json(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _write_tokenizer_files(tok, dest: Path) -> dict[str, int]:
    """Write tokenizer.json, vocab.json, merges.txt, tokenizer_config.json; return special token -> id."""
    tok.save(str(dest / "tokenizer.json"))
    doc = json.loads((dest / "tokenizer.json").read_text(encoding="utf-8"))
    model = doc["model"]
    _write_json(dest / "vocab.json", model["vocab"])
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    (dest / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
    added = {
        str(ids[t]): {
            "content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
            "special": t not in _NON_SPECIAL,
        }
        for t in SPECIAL_TOKENS
    }
    _write_json(
        dest / "tokenizer_config.json",
        {
            "add_bos_token": False,
            "add_prefix_space": False,
            "added_tokens_decoder": added,
            "additional_special_tokens": [t for t in SPECIAL_TOKENS[1:14]],
            "bos_token": None,
            "chat_template": QWEN25VL_CHAT_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|im_end|>",
            "errors": "replace",
            "model_max_length": 131072,
            "pad_token": "<|endoftext|>",
            "split_special_tokens": False,
            "tokenizer_class": "Qwen2Tokenizer",
            "unk_token": None,
        },
    )
    return ids


def _rope_fields(transformers_version: str) -> dict:
    """M-RoPE settings as the installed transformers spells them: ``rope_parameters`` (5.x) or the
    ``rope_scaling`` + ``rope_theta`` of the released checkpoints' config.json (4.x, read by vLLM 0.10.2 too)."""
    sections = [8, 12, 12]
    if int(transformers_version.split(".")[0]) >= 5:
        return {"rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": sections}}
    return {"rope_theta": 1000000.0, "rope_scaling": {"type": "mrope", "rope_type": "default",
                                                      "mrope_section": sections}}


def _config_dict(vocab_size: int, ids: dict[str, int], transformers_version: str = "5") -> dict:
    text = {
        "vocab_size": vocab_size,
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
        "use_cache": True,
        "use_sliding_window": False,
        "max_window_layers": 2,
        "attention_dropout": 0.0,
        **_rope_fields(transformers_version),
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }
    vision = {
        "depth": 2,
        "hidden_size": 128,
        "hidden_act": "silu",
        "intermediate_size": 256,
        "num_heads": 2,
        "in_channels": 3,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "tokens_per_second": 2,
        "window_size": 112,
        "out_hidden_size": 128,
        "fullatt_block_indexes": [1],
    }
    return {
        "text_config": text,
        "vision_config": vision,
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "tie_word_embeddings": False,
    }


def _preprocessor_config() -> dict:
    """The image-processor settings of the Qwen2.5-VL release checkpoints (hub ``preprocessor_config.json``)."""
    return {
        "min_pixels": 3136,
        "max_pixels": 12845056,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2_5_VLProcessor",
    }


def _generation_config(ids: dict[str, int]) -> dict:
    """Qwen2.5-VL-Instruct-like generation defaults (deliberately not the suite's decoding settings)."""
    return {
        "bos_token_id": ids["<|endoftext|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "do_sample": True,
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "repetition_penalty": 1.05,
        "temperature": 0.1,
        "top_p": 0.001,
        "top_k": 1,
    }


def _refuse_filled(dest: Path) -> None:
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest}: directory is not empty")


def empty_dir(dest: Path) -> Path:
    """``dest``, created if absent, for a checkpoint written in place.

    Raises:
        FileExistsError: ``dest`` exists and is not empty.
    """
    dest = Path(dest)
    _refuse_filled(dest)
    dest.mkdir(parents=True, exist_ok=True)
    return dest


def staging_dir(dest: Path) -> Path:
    """A fresh directory beside ``dest`` to build a checkpoint in, later moved to ``dest`` in one rename.

    Raises:
        FileExistsError: ``dest`` exists and is not empty.
    """
    _refuse_filled(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))


def save_random_weights(model_class: Any, config: Any, staging: Path, *, seed: int) -> None:
    """Initialise ``model_class(config)`` from ``seed`` (the global torch RNG left as it was) and save it to
    ``staging`` in bf16 safetensors."""
    import torch

    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = model_class(config)
    finally:
        torch.random.set_rng_state(state)
    model = model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.save_pretrained(staging, safe_serialization=True)


def build_tiny_qwen25vl(dest: Path, *, seed: int = 0) -> Path:
    """Write a tiny random Qwen2.5-VL checkpoint into ``dest`` (created; must be empty or absent) and return it.

    Raises:
        FileExistsError: ``dest`` exists and is not empty.
    """
    import transformers
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    dest = Path(dest)
    staging = staging_dir(dest)

    tok = _build_tokenizer(_CORPUS)
    ids = _write_tokenizer_files(tok, staging)
    vocab_size = tok.get_vocab_size(with_added_tokens=True)

    config = Qwen2_5_VLConfig(**_config_dict(vocab_size, ids, transformers.__version__))
    config.architectures = ["Qwen2_5_VLForConditionalGeneration"]
    save_random_weights(Qwen2_5_VLForConditionalGeneration, config, staging, seed=seed)
    # save_pretrained writes transformers' own generation config; replace it with the Qwen-like one
    _write_json(staging / "generation_config.json", _generation_config(ids))
    _write_json(staging / "preprocessor_config.json", _preprocessor_config())
    _write_json(staging / "chat_template.json", {"chat_template": QWEN25VL_CHAT_TEMPLATE})

    if dest.exists():
        dest.rmdir()
    os.replace(staging, dest)
    return dest


# -- release-shaped configs without weights (benchmarks/campaign_throughput.py; issue 15) ------------------------

#: The layer shapes of the ``Qwen/Qwen2.5-VL-3B-Instruct`` release (its config.json); the vocabulary stays the
#: tiny tokenizer's, so every sampled id decodes and random weights stop at ``<|im_end|>`` now and then.
QWEN25VL_3B_SHAPES = {
    "text": {"hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36, "num_attention_heads": 16,
             "num_key_value_heads": 2, "max_window_layers": 70,
             "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]}},
    "vision": {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16, "out_hidden_size": 2048,
               "fullatt_block_indexes": [7, 15, 23, 31]},
}

#: The 7B release's layers (Qwen2.5-VL-7B-Instruct's config.json): 28 text layers, hidden 3584, MLP 18944, 28 query /
#: 4 KV heads; the same 32-block vision tower, merged into 3584.
QWEN25VL_7B_SHAPES = {
    "text": {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
             "num_key_value_heads": 4, "max_window_layers": 28,
             "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]}},
    "vision": {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16, "out_hidden_size": 3584,
               "fullatt_block_indexes": [7, 15, 23, 31]},
}
#: ``--shape`` values of the GPU benchmarks.
QWEN25VL_SHAPES = {"3b": QWEN25VL_3B_SHAPES, "7b": QWEN25VL_7B_SHAPES}


def write_qwen25vl_shaped_config(dest: Path, shapes: dict = QWEN25VL_3B_SHAPES) -> Path:
    """Write a Qwen2.5-VL checkpoint directory with ``shapes`` (default: the 3B release's layers) and *no*
    weights -- load it with vLLM's ``load_format="dummy"`` (random weights). Same tokenizer, chat template,
    processor and generation config as :func:`build_tiny_qwen25vl`; returns ``dest``.

    Raises:
        FileExistsError: ``dest`` exists and is not empty.
    """
    from transformers import Qwen2_5_VLConfig

    dest = empty_dir(dest)
    tok = _build_tokenizer(_CORPUS)
    ids = _write_tokenizer_files(tok, dest)
    config_dict = _config_dict(tok.get_vocab_size(with_added_tokens=True), ids)
    config_dict["text_config"].update(shapes["text"])
    config_dict["vision_config"].update(shapes["vision"])
    config = Qwen2_5_VLConfig(**config_dict)
    config.architectures = ["Qwen2_5_VLForConditionalGeneration"]
    config.dtype = "bfloat16"
    config.save_pretrained(dest)
    _write_json(dest / "generation_config.json", _generation_config(ids))
    _write_json(dest / "preprocessor_config.json", _preprocessor_config())
    _write_json(dest / "chat_template.json", {"chat_template": QWEN25VL_CHAT_TEMPLATE})
    return dest
