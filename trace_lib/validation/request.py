"""One TRACE-validation generation request per manifest row, exactly as upstream sends it.

``build_request(row, manifest, system_prompt=..., suite=...)`` returns a
:class:`~trace_lib.generation.request.ChatRequest` whose ``payload(served_model)`` is upstream's body: a system
message (the suite's prompt file, stripped), one user message (``prompt_answer`` split on ``<image>``, each image as
a ``data:`` URL of the exact prepared bytes, re-hashed against the manifest), the suite's decoding fields (``seed``
on every request, ``stream`` false) and its pixel bounds as ``mm_processor_kwargs``. ``n`` (1) is left to the
engines' default, which it equals, and restored for the hash: ``request_hash`` is upstream's H1 of its exact body.
The ground truth can never reach a request (checked structurally).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any, Mapping

from trace_lib.errors import InputError
from trace_lib.generation.request import ChatRequest
from trace_lib.validation import pins
from trace_lib.validation.canonical import h1
from trace_lib.validation.manifest import ValidationManifest
from trace_lib.release.validation_suite import ValidationSuite

DATA_URL = "data-url"
FILE_URL = "file-url"
MEDIA_TRANSPORTS = (DATA_URL, FILE_URL)


def image_url(manifest: ValidationManifest, image: Mapping[str, Any], *, media_transport: str = DATA_URL) -> str:
    """The URL of one prepared image: ``data:<mime>;base64,...`` of its exact bytes, or its ``file://`` URI.

    Raises:
        InputError: the file changed since the manifest was verified, or its MIME type is not ``image/*``.
    """
    path = manifest.media_path(image)
    if media_transport == FILE_URL:
        if not path.is_file():
            raise InputError("prepared image is missing", file=str(manifest.path), found=str(path))
        return path.as_uri()
    if media_transport != DATA_URL:
        raise InputError("unsupported media transport", field="--media-transport", expected=MEDIA_TRANSPORTS,
                         found=media_transport)
    payload = path.read_bytes()
    if hashlib.sha256(payload).hexdigest() != image.get("sha256"):
        raise InputError("prepared image changed after the manifest was verified", file=str(path))
    mime = image.get("mime_type")
    if not isinstance(mime, str) or not mime.startswith("image/"):
        raise InputError("prepared image has an invalid MIME type", file=str(manifest.path), found=mime)
    return f"data:{mime};base64,{base64.b64encode(payload).decode('ascii')}"


def user_content(row: Mapping[str, Any], manifest: ValidationManifest, *,
                 media_transport: str = DATA_URL) -> list[dict[str, Any]]:
    """``prompt_answer`` split on ``<image>``: each non-empty text segment, then the next image, in order.

    Raises:
        InputError: the number of ``<image>`` markers differs from the number of images.
    """
    prompt, images = row["prompt_answer"], row["images"]
    markers = prompt.count(pins.IMAGE_MARKER)
    if markers != len(images):
        raise InputError("<image> markers differ from the row's images", file=str(manifest.path),
                         field=f"rows[{row['row_index']}].prompt_answer", expected=len(images), found=markers)
    urls = [image_url(manifest, image, media_transport=media_transport) for image in images]
    content: list[dict[str, Any]] = []
    for index, segment in enumerate(prompt.split(pins.IMAGE_MARKER)):
        if segment:
            content.append({"type": "text", "text": segment})
        if index < len(urls):
            content.append({"type": "image_url", "image_url": {"url": urls[index]}})
    return content


def _leaked_keys(value: Any) -> set[str]:
    stack, leaked = [value], set()
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            leaked |= pins.GROUND_TRUTH_KEYS.intersection(item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return leaked


@dataclass(frozen=True)
class ValidationRequest:
    """A row's request: what the backend is sent, and upstream's hash of the canonical (data-URL) body."""

    chat: ChatRequest
    request_hash: str


def sampling_fields(suite: ValidationSuite) -> dict[str, Any]:
    """The sampling fields every request carries: the suite's decoding without ``stream`` and ``n``.

    Raises:
        InputError: the suite asks for more than one response per prompt.
    """
    decoding = suite.decoding()
    if decoding["n"] != 1:
        raise InputError("only one response per prompt is supported", file="suite.v1.json",
                         field="generation.responses_per_prompt", expected=1, found=decoding["n"])
    return {key: value for key, value in decoding.items() if key not in ("stream", "n")}


def _chat(row: Mapping[str, Any], manifest: ValidationManifest, *, system_prompt: str, suite: ValidationSuite,
          media_transport: str) -> ChatRequest:
    sampling = sampling_fields(suite)
    return ChatRequest(
        request_id=str(row["row_index"]),
        messages=(
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": user_content(row, manifest, media_transport=media_transport)},
        ),
        sampling=sampling,
        mm_processor_kwargs=suite.mm_processor_kwargs(),
    )


def canonical_body(chat: ChatRequest, served_model: str, suite: ValidationSuite) -> dict[str, Any]:
    """Upstream's exact request body for a data-URL ``chat``: its payload plus ``n`` (1, the engines' default)."""
    body = chat.payload(served_model)
    body["n"] = suite.decoding()["n"]
    return body


def build_request(
    row: Mapping[str, Any],
    manifest: ValidationManifest,
    *,
    system_prompt: str,
    suite: ValidationSuite,
    served_model: str,
    media_transport: str = DATA_URL,
) -> ValidationRequest:
    """The request of one manifest row (``request_id`` = the row index as text).

    ``request_hash`` is always upstream's H1 of the data-URL body (content-bound, transport independent); with
    ``media_transport="file-url"`` the backend is sent ``file://`` URLs of the same prepared files.

    Raises:
        InputError: marker/image mismatch, changed media, or a ground-truth key inside the request.
    """
    canonical = _chat(row, manifest, system_prompt=system_prompt, suite=suite, media_transport=DATA_URL)
    body = canonical_body(canonical, served_model, suite)
    leaked = _leaked_keys(body)
    if leaked:
        raise InputError("ground-truth fields leaked into a request", field=f"rows[{row['row_index']}]",
                         found=sorted(leaked))
    chat = canonical if media_transport == DATA_URL else _chat(
        row, manifest, system_prompt=system_prompt, suite=suite, media_transport=media_transport)
    return ValidationRequest(chat=chat, request_hash=h1(body))


def request_summary(row: Mapping[str, Any]) -> dict[str, Any]:
    """The receipt's ``request`` block: prompt sha256 and the ordered image sha256 list."""
    return {
        "prompt_sha256": hashlib.sha256(row["prompt_answer"].encode("utf-8")).hexdigest(),
        "ordered_image_sha256": [image["sha256"] for image in row["images"]],
    }
