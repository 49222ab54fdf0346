"""The compatibility lane (marker ``paper_env``): trace-repro on the paper's engine (vllm 0.10.2, torch 2.8.0,
transformers 4.57.6) without a GPU. Every test skips, with the installed and pinned versions in the reason,
unless this interpreter's engine equals the paper's pins (read from the release); build the environment with
``.ci/paper-env`` (README "Compatibility lane")."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests_paper_env" in item.nodeid.split("/")[0]:
            item.add_marker(pytest.mark.paper_env)


@pytest.fixture(scope="session")
def paper_record(release):
    """This interpreter's engine record against the release's pins; skips the lane when it is not the paper's."""
    from trace_lib.environment.engine import engine_record

    record = engine_record(release, probe=True)
    if not record.matches_paper:
        pytest.skip(f"not the paper's engine: {record.drift()} (build it with .ci/paper-env)")
    return record


@pytest.fixture(scope="session")
def tiny_model(paper_record, tmp_path_factory) -> Path:
    from trace_lib.testing.tiny_qwen import build_tiny_qwen25vl

    return build_tiny_qwen25vl(tmp_path_factory.mktemp("paper-tiny") / "tiny-qwen25vl", seed=0)


@pytest.fixture(scope="session")
def images(tmp_path_factory) -> list[Path]:
    from PIL import Image

    root = tmp_path_factory.mktemp("paper-images")
    paths = []
    for i, size in enumerate([(64, 48), (300, 200), (37, 911)]):
        path = root / f"img{i}.png"
        Image.new("RGB", size, (40 * i, 200 - 50 * i, 90)).save(path)
        paths.append(path)
    return paths


@pytest.fixture(scope="session")
def requests(release, images, paper_record):
    """trace_eval_v1 requests for the three decoding seeds: one image, two images, text only."""
    from trace_lib.benchmarks.protocol import PromptItem
    from trace_lib.generation.request import build_eval_request
    from trace_lib.release.suite import load_suite

    generation = load_suite(release).generation
    prompts = [
        [PromptItem("image", str(images[0])), PromptItem("text", "How many objects are in the image?")],
        [PromptItem("image", str(images[1])), PromptItem("image", str(images[2])),
         PromptItem("text", "Which chart shows the largest value?\nAnswer with the option's letter.")],
        [PromptItem("text", "What is 12 times 5? Please reason step by step.")],
    ]
    return [build_eval_request(items, request_id=f"{seed}:{i}", generation=generation, seed=seed)
            for seed in (42, 43, 44) for i, items in enumerate(prompts)]
