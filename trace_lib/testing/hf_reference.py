"""An independent transformers reference for tiny-model lanes: what ``model.generate`` says for a request.

Written from the request alone (chat template, images, ``min_pixels``/``max_pixels``, sampling fields, seed), not
through :mod:`trace_lib.generation.backends.hf`, so a lane can check that the engine's stored responses are the
model's own output for the request it was sent (a canned or misrouted answer fails).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Sequence


def processed_inputs(processor: Any, request: Any) -> Any:
    """The processor's tensors for ``request``: chat template text plus its images at the request's pixel bounds."""
    import base64
    import io
    from urllib.parse import unquote, urlparse

    from PIL import Image

    messages = request.messages_json()
    images = []
    for message in messages:
        for part in message["content"] if isinstance(message["content"], list) else []:
            if part.get("type") == "image_url":
                url = part["image_url"]["url"]
                source = (io.BytesIO(base64.b64decode(url.split(",", 1)[1])) if url.startswith("data:")
                          else unquote(urlparse(url).path))
                images.append(Image.open(source).convert("RGB"))
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    extra = dict(request.mm_processor_kwargs) if images else {}
    return processor(text=[text], images=images or None, return_tensors="pt", **extra)


def reference_prompt_lengths(model_dir: Path, requests: Sequence[Any]) -> dict[str, int]:
    """``{request_id: prompt token count}`` (image placeholders expanded) as the checkpoint's processor makes it."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(str(model_dir))
    return {r.request_id: int(processed_inputs(processor, r)["input_ids"].shape[1]) for r in requests}


def reference_responses(model_dir: Path, requests: Sequence[Any]) -> dict[str, str]:
    """``{request_id: decoded new tokens}`` of ``Qwen2_5_VLForConditionalGeneration.generate`` on each
    :class:`~trace_lib.generation.request.ChatRequest`, seeded with ``torch.manual_seed(request seed)``."""
    import torch
    from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration

    processor = AutoProcessor.from_pretrained(str(model_dir))
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    out: dict[str, str] = {}
    for request in requests:
        inputs = processed_inputs(processor, request)
        s = dict(request.sampling)
        sample = float(s["temperature"]) > 0
        top_k = s.get("top_k", -1)
        torch.manual_seed(int(s["seed"]))
        with torch.no_grad():
            tokens = model.generate(
                **inputs, max_new_tokens=int(s["max_tokens"]), do_sample=sample,
                temperature=float(s["temperature"]) if sample else 1.0,
                top_p=float(s.get("top_p", 1.0)) if sample else 1.0,
                top_k=(0 if top_k is None or top_k < 0 else int(top_k)) if sample else 0,
                repetition_penalty=float(s.get("repetition_penalty", 1.0)),
            )
        new = tokens[0, inputs["input_ids"].shape[1]:]
        out[request.request_id] = processor.tokenizer.decode(new, skip_special_tokens=True)
    return out


class RecordingBackend:
    """Wraps a backend and keeps every request it was sent (results pass through untouched)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.requests: list[Any] = []

    def generate(self, requests: Sequence[Any]) -> Iterator[Any]:
        self.requests.extend(requests)
        yield from self.inner.generate(requests)

    def close(self) -> None:
        self.inner.close()
