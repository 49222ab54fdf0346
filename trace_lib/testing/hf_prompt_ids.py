"""``python -m trace_lib.testing.hf_prompt_ids MODEL_DIR REQUESTS.json``: the transformers processor's prompt token
ids for chat requests, printed as JSON (one list per request).

The compatibility lane runs it under another interpreter (``TRACE_REFERENCE_PYTHON``: the current engine's
transformers 5.x) to compare with the ids vLLM 0.10.2 computes on transformers 4.57.6. ``REQUESTS.json`` is a
list of ``{"messages": [...], "mm_processor_kwargs": {...}}``; images are ``file://`` URLs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Mapping


def hf_prompt_ids(processor: Any, messages: list[dict[str, Any]], mm_processor_kwargs: Mapping[str, Any]) -> list[int]:
    """The hf backend's prompt token ids for one conversation (:func:`~trace_lib.generation.backends.hf.processor_inputs`)."""
    from trace_lib.generation.backends.hf import processor_inputs

    return processor_inputs(processor, messages, dict(mm_processor_kwargs))["input_ids"][0].tolist()


def main(argv: list[str]) -> int:
    from transformers import AutoProcessor

    model_dir, requests_file = argv
    processor = AutoProcessor.from_pretrained(model_dir)
    requests = json.loads(Path(requests_file).read_text())
    print(json.dumps([hf_prompt_ids(processor, r["messages"], r.get("mm_processor_kwargs") or {}) for r in requests]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
