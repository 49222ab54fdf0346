"""vLLM's own request preprocessing without an engine or a GPU: chat-template rendering, multimodal parsing and
prompt token ids exactly as ``LLM.chat`` computes them before the engine runs (compatibility lane).

:func:`vllm_prompts` builds vLLM's ``ModelConfig`` and tokenizer for a local checkpoint, renders each
conversation with ``LLM.preprocess_chat`` (vLLM's chat-template and multimodal parsing, ``mm_processor_kwargs``
attached) and runs the engine's ``InputPreprocessor`` (the multimodal processor that expands each image into its
placeholder tokens). Written against vLLM 0.10.2, the paper's engine; on later versions whose internal API moved,
it raises ``RuntimeError`` naming the missing piece (the GPU lane then compares prompt tokens instead).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class VLLMPrompt:
    """One rendered conversation: the chat-template prompt's token ids before and after image expansion."""

    template_token_ids: list[int]  # tokenizer(chat template text): one image pad per image
    prompt_token_ids: list[int]  # what the engine schedules: each image pad expanded by the image processor


class _Engine:
    def __init__(self, model_config: Any) -> None:
        self.model_config = model_config

    def get_model_config(self) -> Any:
        return self.model_config


class _LLMView:
    """The two attributes ``LLM.preprocess_chat`` reads from its ``LLM``."""

    def __init__(self, model_config: Any, tokenizer: Any) -> None:
        self.llm_engine = _Engine(model_config)
        self._tokenizer = tokenizer

    def get_tokenizer(self, lora_request: Any = None) -> Any:
        return self._tokenizer


class VLLMPreprocessor:
    """vLLM's model config, tokenizer and input preprocessor for ``model_path`` (CPU only, no weights loaded)."""

    def __init__(self, model_path: str | Path, *, max_model_len: int = 32768,
                 limit_mm_per_prompt: Mapping[str, int] | None = None,
                 allowed_local_media_path: str = "/") -> None:
        from vllm.config import ModelConfig
        from vllm.transformers_utils.tokenizer import get_tokenizer

        self.model_config = ModelConfig(
            model=str(model_path), trust_remote_code=True, max_model_len=max_model_len,
            allowed_local_media_path=allowed_local_media_path,
            limit_mm_per_prompt=dict(limit_mm_per_prompt or {"image": 24, "video": 3}),
        )
        self.tokenizer = get_tokenizer(str(model_path), trust_remote_code=True)
        self._input = _input_preprocessor(self.model_config, str(model_path))

    def default_sampling(self) -> dict[str, Any]:
        """``ModelConfig.get_diff_sampling_param()``: the checkpoint's generation-config sampling defaults."""
        return dict(self.model_config.get_diff_sampling_param())

    def prompts(self, conversations: Sequence[list[dict[str, Any]]],
                mm_processor_kwargs: Mapping[str, Any] | None) -> list[VLLMPrompt]:
        """Render and preprocess each conversation as ``LLM.chat`` would (one ``mm_processor_kwargs`` for all)."""
        from vllm.entrypoints.llm import LLM

        rendered = LLM.preprocess_chat(_LLMView(self.model_config, self.tokenizer), list(conversations),
                                       mm_processor_kwargs=dict(mm_processor_kwargs) if mm_processor_kwargs else None)
        out = []
        for prompt in rendered:
            processed = self._input.preprocess(prompt)
            out.append(VLLMPrompt(list(prompt["prompt_token_ids"]), list(processed["prompt_token_ids"])))
        return out


def _input_preprocessor(model_config: Any, tokenizer_id: str) -> Any:
    try:
        from vllm.inputs.preprocess import InputPreprocessor
        from vllm.transformers_utils.tokenizer_group import TokenizerGroup
    except ImportError as exc:
        raise RuntimeError(f"this vLLM has no InputPreprocessor/TokenizerGroup ({exc}); written for 0.10.2") from None
    group = TokenizerGroup(tokenizer_id=tokenizer_id, enable_lora=False, max_num_seqs=1, max_input_length=None,
                           trust_remote_code=True)
    return InputPreprocessor(model_config, group)
