"""The verl dataset class for TRACE rows: verl's ``RLHFDataset`` with EasyR1's image preprocessing (gap 2).

verl config: ``data.custom_cls.path=pkg://trace_lib.training.verl_dataset``, ``data.custom_cls.name=
TraceRLHFDataset``, plus ``+data.trace_min_pixels`` / ``+data.trace_max_pixels`` (the profile's
``easyr1.data.min_pixels`` / ``max_pixels``). verl's agent loop asks the dataset class for the images of each
prompt (``process_multi_modal_info``); this class returns, in message order, EasyR1's ``process_image`` result
for each image: downscale above ``max_pixels``, then upscale below ``min_pixels`` (``int()`` truncation,
Pillow's default filter), then ``convert("RGB")`` (alpha dropped, not composited). The Qwen2.5-VL processor then
applies its own 28-multiple ``smart_resize`` for training inputs and inside vLLM alike, as in EasyR1, so a
512x512 image costs 324 image tokens (verl's default qwen-vl-utils path would give 361 with these bounds).

The class is built on first attribute access (PEP 562), so importing this module does not import verl.
"""

from __future__ import annotations

import math
from io import BytesIO
from typing import Any

MIN_PIXELS_KEY = "trace_min_pixels"
MAX_PIXELS_KEY = "trace_max_pixels"
CLASS_NAME = "TraceRLHFDataset"


def easyr1_resize(image: Any, min_pixels: int | None, max_pixels: int | None) -> Any:
    """EasyR1's ``process_image``: PIL image (or ``{"bytes": ...}`` / raw bytes / path) -> resized RGB PIL image."""
    from PIL import Image

    if isinstance(image, str):
        image = Image.open(image)
    elif isinstance(image, dict):
        image = Image.open(BytesIO(image["bytes"]))
    elif isinstance(image, bytes):
        image = Image.open(BytesIO(image))
    image.load()
    if max_pixels is not None and image.width * image.height > max_pixels:
        factor = math.sqrt(max_pixels / (image.width * image.height))
        image = image.resize((int(image.width * factor), int(image.height * factor)))
    if min_pixels is not None and image.width * image.height < min_pixels:
        factor = math.sqrt(min_pixels / (image.width * image.height))
        image = image.resize((int(image.width * factor), int(image.height * factor)))
    if image.mode != "RGB":
        image = image.convert("RGB")
    return image


def _pixel_bounds(config: Any) -> tuple[int, int]:
    try:
        return int(config[MIN_PIXELS_KEY]), int(config[MAX_PIXELS_KEY])
    except (KeyError, TypeError) as exc:
        raise KeyError(
            f"data.{MIN_PIXELS_KEY} / data.{MAX_PIXELS_KEY} must be set for {CLASS_NAME} "
            "(trace-repro passes the profile's easyr1.data.min_pixels / max_pixels)"
        ) from exc


def images_of(messages: list[dict], config: Any) -> list[Any] | None:
    """EasyR1-resized images of every image item in ``messages`` (message order), or None when there are none.

    Raises:
        ValueError: a video item is present (TRACE prompts have none; EasyR1's video path is not reproduced).
    """
    min_pixels, max_pixels = _pixel_bounds(config)
    images = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for item in content:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "video":
                raise ValueError(f"{CLASS_NAME}: video inputs are not supported (TRACE rows have none)")
            if item.get("type") == "image":
                source = item.get("image")
                if source is None:
                    source = {"bytes": item["bytes"]}
                images.append(easyr1_resize(source, min_pixels, max_pixels))
    return images or None


def _build_class() -> type:
    from verl.utils.dataset.rl_dataset import RLHFDataset

    class TraceRLHFDataset(RLHFDataset):
        """verl's RLHFDataset whose multimodal extraction reproduces EasyR1's image preprocessing."""

        @classmethod
        def _process_multi_modal_info(cls, messages, image_patch_size, config):  # noqa: ANN001, ANN206
            return images_of(messages, config), None, cls._extract_audio_info(messages)

    TraceRLHFDataset.__module__ = __name__
    TraceRLHFDataset.__qualname__ = CLASS_NAME
    return TraceRLHFDataset


_built: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    if name == CLASS_NAME:
        if name not in _built:
            _built[name] = _build_class()
        return _built[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
