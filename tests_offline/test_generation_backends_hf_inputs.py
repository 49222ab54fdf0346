"""The hf backend's model inputs on the installed transformers (4.57 in the paper's environment, 5.x here): every
image reaches the processor and is expanded into its placeholder tokens; the request's messages stay as sent."""

from __future__ import annotations

import copy

import pytest

pytestmark = pytest.mark.cpu_model


def test_images_reach_the_processor_and_messages_are_not_rewritten(tmp_path):
    pytest.importorskip("torch", reason="cpu_model lane needs torch (install the 'hf' extra)")
    pytest.importorskip("transformers", reason="cpu_model lane needs transformers (install the 'hf' extra)")
    from PIL import Image
    from transformers import AutoProcessor

    from trace_lib.generation.backends.hf import processor_inputs
    from trace_lib.testing.tiny_qwen import build_tiny_qwen25vl

    model = build_tiny_qwen25vl(tmp_path / "tiny")
    image = tmp_path / "a.png"
    Image.new("RGB", (120, 90), (10, 20, 30)).save(image)
    processor = AutoProcessor.from_pretrained(model)
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    messages = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": image.as_uri()}},
                                             {"type": "text", "text": "How many?"}]}]
    sent = copy.deepcopy(messages)
    bounds = {"min_pixels": 3136, "max_pixels": 12845056}
    ids = processor_inputs(processor, messages, bounds)["input_ids"][0].tolist()
    assert messages == sent
    grid = processor.image_processor(images=[Image.open(image).convert("RGB")], **bounds)["image_grid_thw"][0]
    assert ids.count(pad) == int(grid.prod()) // 4 > 1  # one token per 2x2 merged patch
