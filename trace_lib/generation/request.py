"""One generation request exactly as upstream sends it, and what a backend returns for it.

``build_eval_request`` is the ``trace_eval_v1`` contract (eval-campaign spec §3.2-3.3): one user message holding
the prompt's images (``file://`` URLs) then its text parts in order, empty text parts dropped, no system
message; every decoding field of the suite's ``generation`` block sent explicitly; pixel bounds as
``mm_processor_kwargs``; the pass-wide seed on every request. :class:`ChatRequest` itself is generic (the TRACE
validation workflow builds its own, with a system message and its own sampling).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from trace_lib.protocol import PromptItem
from trace_lib.errors import InputError

#: The suite ``generation`` fields that become request sampling fields, in upstream's payload order.
_SUITE_SAMPLING_FIELDS: tuple[str, ...] = (
    "temperature", "top_p", "max_tokens", "presence_penalty", "top_k", "repetition_penalty",
)
#: The only media transport trace_eval_v1 allows (``suite.v1.json`` ``generation.media_transport``).
FILE_URL_TRANSPORT = "file-url"


_SCALARS = (str, int, float, bool, type(None))
_MAPPINGS = (dict, MappingProxyType)


def _freeze(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:  # exact type checks first: abc isinstance checks dominated request building
        return value
    if kind in _MAPPINGS or isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if kind in (list, tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind in _MAPPINGS or isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if kind is tuple:
        return [_thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class ChatRequest:
    """One ``/v1/chat/completions`` request: messages, explicit sampling fields, image-processor bounds."""

    request_id: str  # the row key; results are matched back by it
    messages: tuple[Mapping[str, Any], ...]  # OpenAI chat messages (images as file:// image_url parts)
    sampling: Mapping[str, Any]  # every decoding field sent explicitly, including ``seed``
    mm_processor_kwargs: Mapping[str, int] = field(default_factory=dict)  # {"min_pixels", "max_pixels"}

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(_freeze(m) for m in self.messages))
        object.__setattr__(self, "sampling", _freeze(dict(self.sampling)))
        object.__setattr__(self, "mm_processor_kwargs", _freeze(dict(self.mm_processor_kwargs)))

    def __reduce__(self) -> tuple[Any, ...]:
        # mappingproxy values do not pickle: rebuild from plain JSON values (Ray actors, spawned workers)
        return (ChatRequest, (self.request_id, self.messages_json(), _thaw(self.sampling),
                              _thaw(self.mm_processor_kwargs)))

    @property
    def seed(self) -> int | None:
        return self.sampling.get("seed")

    def messages_json(self) -> list[dict[str, Any]]:
        """The messages as plain (mutable) JSON values, as backends hand them to an engine."""
        return [_thaw(m) for m in self.messages]

    def image_paths(self) -> list[Path]:
        """Local paths of every ``file://`` image of the request, in prompt order."""
        from urllib.parse import unquote, urlparse

        paths = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, str) or content is None:
                continue
            for part in content:
                if part.get("type") == "image_url":
                    url = urlparse(part["image_url"]["url"])
                    if url.scheme == "file":
                        paths.append(Path(unquote(url.path)))
        return paths

    def payload(self, model: str) -> dict[str, Any]:
        """The exact JSON body POSTed to ``/v1/chat/completions`` for served model name ``model``."""
        body: dict[str, Any] = {"model": model, "messages": self.messages_json()}
        body.update(_thaw(self.sampling))
        body["stream"] = False
        if self.mm_processor_kwargs:
            body["mm_processor_kwargs"] = _thaw(self.mm_processor_kwargs)
        return body

    def request_hash(self, model: str) -> str:
        """SHA-256 of :meth:`payload` serialised with sorted keys, compact separators, ``ensure_ascii=False``."""
        text = json.dumps(self.payload(model), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class GenerationResult:
    """What a backend returns for one request (``text`` is ``""`` when the engine returned no content)."""

    request_id: str
    text: str
    finish_reason: str  # "stop" or "length" from an engine; anything else is recorded verbatim
    prompt_tokens: int | None
    completion_tokens: int | None


@dataclass(frozen=True)
class RequestFailure:
    """A request the backend could not answer while the backend itself is fine (the endpoint refused it, or kept
    answering malformed bodies): ``error`` is the one-line reason. Streams yield it in place of a result so that
    only the request's own slice fails (:func:`~trace_lib.generation.backends.base.stream_generate`)."""

    request_id: str
    error: str


def build_user_content(items: Sequence[PromptItem]) -> list[dict[str, Any]]:
    """Prompt items -> one user message's content: images as ``file://`` URLs, non-empty text, in order.

    Raises:
        InputError: an image path is not absolute, or an item kind is neither image nor text.
    """
    content: list[dict[str, Any]] = []
    for position, item in enumerate(items):
        if item.kind == "image":
            path = Path(item.value)
            if not path.is_absolute():
                raise InputError(
                    "image path must be absolute", field=f"prompt[{position}]", found=item.value,
                    hint="the protocol's build_prompt must materialise images under the data root",
                )
            content.append({"type": "image_url", "image_url": {"url": path.as_uri()}})
        elif item.kind == "text":
            if item.value:
                content.append({"type": "text", "text": item.value})
        else:
            raise InputError("unknown prompt item kind", field=f"prompt[{position}]", expected="image or text",
                             found=item.kind)
    return content or [{"type": "text", "text": ""}]


def suite_sampling(generation: Mapping[str, Any], *, seed: int) -> dict[str, Any]:
    """The explicit sampling fields of the suite's ``generation`` block plus the pass-wide ``seed``.

    Raises:
        InputError: a decoding field is missing, or the seed is not a non-negative integer.
    """
    missing = [name for name in _SUITE_SAMPLING_FIELDS if name not in generation]
    if missing:
        raise InputError("suite generation block lacks decoding fields", field="generation", found=missing)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError("seed must be a non-negative integer", field="seed", found=seed)
    sampling = {name: generation[name] for name in _SUITE_SAMPLING_FIELDS}
    sampling["seed"] = seed
    return sampling


def suite_mm_processor_kwargs(generation: Mapping[str, Any]) -> dict[str, int]:
    """``{"min_pixels", "max_pixels"}`` from the suite's ``min_image_pixels`` / ``max_image_pixels``.

    Raises:
        InputError: a bound is missing, or the media transport is not ``file-url``.
    """
    transport = generation.get("media_transport")
    if transport != FILE_URL_TRANSPORT:
        raise InputError("unsupported media transport", field="generation.media_transport",
                         expected=FILE_URL_TRANSPORT, found=transport)
    for name in ("min_image_pixels", "max_image_pixels"):
        if not isinstance(generation.get(name), int):
            raise InputError("pixel bound missing or not an integer", field=f"generation.{name}",
                             found=generation.get(name))
    return {"min_pixels": generation["min_image_pixels"], "max_pixels": generation["max_image_pixels"]}


def build_eval_request(
    items: Sequence[PromptItem], *, request_id: str, generation: Mapping[str, Any], seed: int
) -> ChatRequest:
    """A ``trace_eval_v1`` request: one user message from ``items``, no system message, suite decoding, ``seed``."""
    return ChatRequest(
        request_id=request_id,
        messages=({"role": "user", "content": build_user_content(items)},),
        sampling=suite_sampling(generation, seed=seed),
        mm_processor_kwargs=suite_mm_processor_kwargs(generation),
    )


def prompt_text(items: Sequence[PromptItem]) -> str:
    """The persisted prompt: the text items joined with a newline (no media), as upstream records it."""
    return "\n".join(item.value for item in items if item.kind == "text" and item.value)
