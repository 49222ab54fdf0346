"""The ``hf`` backend: transformers ``generate`` on one request at a time -- the CPU reference for tiny models.

The checkpoint's own chat template renders the messages (as vLLM's server does; no system message is added
by us), images are read from their ``file://`` paths or decoded from ``data:`` URLs (TRACE validation's
transport), the image processor gets the request's
``min_pixels``/``max_pixels``, and sampling uses the request's fields explicitly (temperature, top_p, top_k
with ``-1`` = off, repetition_penalty, max_tokens) with ``torch.manual_seed(request seed)`` before each
request, so one request always samples the same way. ``presence_penalty``/``frequency_penalty`` other than 0
have no transformers equivalent and are refused rather than ignored.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from trace_lib.errors import BackendError
from trace_lib.generation.backends.base import engine_stopped_error
from trace_lib.generation.request import ChatRequest, GenerationResult


class HFBackend:
    """transformers ``Qwen2_5_VLForConditionalGeneration`` + ``AutoProcessor``.

    Options: ``device`` ("cpu"), ``dtype`` ("float32"; the checkpoint's bfloat16 weights are cast).
    """

    name = "hf"

    def __init__(self, *, model_path: str, served_name: str, device: str = "cpu", dtype: str = "float32") -> None:
        try:
            import torch
            from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration
        except ImportError as exc:
            raise BackendError(f"transformers/torch not importable ({exc})", field="--backend hf",
                               hint="install the 'hf' extra") from None
        self.served_name = served_name
        self.device = device
        self._torch = torch
        self.processor = AutoProcessor.from_pretrained(model_path, local_files_only=True)  # never a hub
        self.model = Qwen2_5_VLForConditionalGeneration.from_pretrained(
            model_path, dtype=getattr(torch, dtype), local_files_only=True
        ).to(device)
        self.model.eval()
        eos = self.model.generation_config.eos_token_id
        self._eos = set(eos if isinstance(eos, list) else [eos]) - {None}

    def _inputs(self, request: ChatRequest) -> Any:
        return processor_inputs(self.processor, request.messages_json(), request.mm_processor_kwargs).to(self.device)

    def _generate_kwargs(self, sampling: dict[str, Any]) -> dict[str, Any]:
        for name in ("presence_penalty", "frequency_penalty"):
            if sampling.get(name, 0.0) not in (0, 0.0):
                raise BackendError(f"{name} has no transformers equivalent", field=f"sampling.{name}",
                                   found=sampling[name])
        unknown = set(sampling) - {"temperature", "top_p", "top_k", "max_tokens", "repetition_penalty", "seed",
                                   "presence_penalty", "frequency_penalty"}
        if unknown:
            raise BackendError("sampling fields not supported by the hf backend", field="sampling",
                               found=sorted(unknown))
        temperature = float(sampling.get("temperature", 1.0))
        top_k = sampling.get("top_k", -1)
        kwargs: dict[str, Any] = {
            "max_new_tokens": int(sampling["max_tokens"]),
            "repetition_penalty": float(sampling.get("repetition_penalty", 1.0)),
            "do_sample": temperature > 0,
        }
        if temperature > 0:
            kwargs.update(
                temperature=temperature,
                top_p=float(sampling.get("top_p", 1.0)),
                top_k=0 if top_k is None or top_k < 0 else int(top_k),
            )
        else:  # greedy: neutralise the checkpoint's sampling defaults explicitly
            kwargs.update(temperature=1.0, top_p=1.0, top_k=0)
        return kwargs

    def generate(self, requests: Sequence[ChatRequest]) -> Iterator[GenerationResult]:
        """One result per request, in order. The model's own exception while it generates (torch out of memory)
        is :class:`~trace_lib.errors.EngineStoppedError` after the results before it."""
        torch = self._torch
        for answered, request in enumerate(requests):
            sampling = dict(request.sampling)
            kwargs = self._generate_kwargs(sampling)
            inputs = self._inputs(request)
            prompt_len = int(inputs["input_ids"].shape[1])
            seed = sampling.get("seed")
            try:
                with torch.random.fork_rng(devices=[] if self.device == "cpu" else None):
                    if seed is not None:
                        torch.manual_seed(int(seed))
                    with torch.no_grad():
                        output = self.model.generate(**inputs, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the model's own: one line, never a bare traceback
                raise engine_stopped_error(exc, backend=self.name, served_name=self.served_name, answered=answered,
                                           unanswered=len(requests) - answered) from exc
            new_tokens = output[0, prompt_len:].tolist()
            ended = bool(new_tokens) and new_tokens[-1] in self._eos
            finish = "stop" if ended or len(new_tokens) < kwargs["max_new_tokens"] else "length"
            text = self.processor.tokenizer.decode(new_tokens, skip_special_tokens=True)
            yield GenerationResult(
                request_id=request.request_id,
                text=text,
                finish_reason=finish,
                prompt_tokens=prompt_len,
                completion_tokens=len(new_tokens),
            )

    def close(self) -> None:
        self.model = None
        self.processor = None


def processor_inputs(processor: Any, messages: list[dict[str, Any]], mm_processor_kwargs: Any) -> Any:
    """The model inputs of one conversation: the checkpoint's chat template, then the processor with the images
    and the request's pixel bounds (same call on transformers 4.57 and 5.x). The images are collected first and
    the template gets a copy: transformers 5.x's ``apply_chat_template`` rewrites ``image_url`` parts in place."""
    import copy

    images = [_open_image(url) for url in _image_urls(messages)]
    text = processor.apply_chat_template(copy.deepcopy(messages), tokenize=False, add_generation_prompt=True)
    kwargs: dict[str, Any] = {}
    if images:
        kwargs["images"] = images
        kwargs.update(mm_processor_kwargs)
    return processor(text=[text], return_tensors="pt", **kwargs)


def _image_urls(messages: list[dict[str, Any]]) -> list[str]:
    """Every ``image_url`` of the messages, in prompt order."""
    return [
        part["image_url"]["url"]
        for message in messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


def _open_image(url: str) -> Any:
    """The RGB image behind a ``file://`` or base64 ``data:`` URL (what vLLM's media loader accepts)."""
    import base64
    import io
    from urllib.parse import unquote, urlparse

    from PIL import Image

    if url.startswith("data:"):
        header, _, payload = url.partition(",")
        if not header.endswith(";base64"):
            raise BackendError("only base64 data URLs are supported", field="image_url", found=header[:40])
        source: Any = io.BytesIO(base64.b64decode(payload))
    else:
        parsed = urlparse(url)
        if parsed.scheme != "file":
            raise BackendError("image URL must be file:// or data:", field="image_url", found=url[:80])
        source = unquote(parsed.path)
    with Image.open(source) as img:
        return img.convert("RGB")
