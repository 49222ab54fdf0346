"""A validation slice with the tiny random Qwen2.5-VL through offline ``vllm.LLM`` (marker gpu).

The exact validation requests (system prompt, data-URL images, suite sampling with per-request seed 42, pixel
bounds) go through the engine's ``vllm`` backend with the paper server's settings (context 8192, one image per
prompt, ``generation_config=vllm``); then scoring, a loopback judge stub and ``verify full``. The release variant
shortens ``max_tokens`` to 64 for the random model. With ``TRACE_JUDGE_TOKENIZER`` pointing at the real Qwen3-32B
checkpoint, the judge-prompt rendering is also checked against transformers' ``apply_chat_template``.

Run on a CUDA host with vllm installed:
``TRACE_ROOT=<release> python -m pytest tests_gpu/test_validation_vllm.py -m gpu -v``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu]

SLUG = "trace-qwen2.5-vl-3b"
GPU_MEMORY = 0.25


@pytest.fixture(scope="module", autouse=True)
def _requirements(vllm_gpu):
    """Every test here needs vLLM on a CUDA GPU (tests_gpu/conftest.py)."""


@pytest.fixture(scope="module")
def short_release(release, tmp_path_factory):
    from trace_lib.validation.tiny import release_variant

    return release_variant(release, tmp_path_factory.mktemp("release"), generation={"max_tokens": 64})


def _abstain(route: str, body: dict) -> str:
    return '{"status":"missing","answer":null,"evidence":""}'


def _judge_template(tiny_model: Path, dest: Path):
    from trace_lib.validation.chat_template import ChatTemplate

    text = json.loads((Path(tiny_model) / "chat_template.json").read_text())["chat_template"]
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "tokenizer_config.json").write_text(json.dumps({"chat_template": text}))
    return ChatTemplate.from_tokenizer_dir(dest)


def test_tiny_model_slice_with_vllm(short_release, tiny_model, tmp_path: Path) -> None:
    from trace_lib.generation.backends.base import create_backend
    from trace_lib.testing.openai_server import OpenAIStubServer
    from trace_lib.validation.canonical import read_jsonl
    from trace_lib.validation.generate import GenerationTarget, default_backend_options, generate_validation_responses
    from trace_lib.validation.layout import ValidationLayout
    from trace_lib.validation.pipeline import SliceSettings, plan_validation, run_validation_slice
    from trace_lib.validation.prepare import prepare_dataset
    from trace_lib.release.validation_suite import load_validation_suite
    from trace_lib.validation.tiny import build_tiny_parquet
    from trace_lib.validation.verify import verify_full

    suite = load_validation_suite(short_release)
    layout = ValidationLayout(tmp_path / "work")
    parquet, ident = build_tiny_parquet(short_release, tmp_path / "tiny.parquet", tasks=16)
    prepare_dataset(parquet, layout.dataset_dir, expected=ident)
    options = {**default_backend_options("vllm", suite.generation), "gpu_memory_utilization": GPU_MEMORY}
    assert options["llm_kwargs"] == {"generation_config": "vllm"} and options["limit_mm_per_prompt"]["image"] == 1
    engine = create_backend("vllm", model_path=str(tiny_model), served_name=SLUG, **options)
    try:
        (slice_,) = plan_validation(short_release, [SLUG])
        with OpenAIStubServer(_abstain, model=suite.judge.served_model_name) as judge:
            settings = SliceSettings(backend="vllm", backend_options=options, judge_urls=(judge.url,),
                                     judge_template=_judge_template(tiny_model, tmp_path / "judge"), expected=ident)
            outcome = run_validation_slice(short_release, slice_, layout, tiny_model, settings, backend=engine)
        assert outcome.generation.complete and outcome.score.rows == 32
        rows = read_jsonl(layout.responses(SLUG))
        assert all(r["backend_response"]["completion_tokens"] <= 64 for r in rows)
        assert all(r["finish_reason"] in ("stop", "length") for r in rows)
        report = verify_full(short_release, layout, parquet=parquet, expected=ident, models=[SLUG])
        assert report["generation_rows"] == 32 and report["scored_rows"] == 32

        # A fresh directory binds the same requests (hashes) and completes again; texts are not compared because
        # prefix caching may change kernel paths (and so sampled tokens) between the two passes.
        target = GenerationTarget(model=slice_.model, model_path=Path(tiny_model), backend="vllm", served_model=SLUG,
                                  backend_options=options)
        report = generate_validation_responses(short_release, layout.manifest, tmp_path / "again", target,
                                               expected=ident, backend=engine)
        again = read_jsonl(tmp_path / "again" / "responses.jsonl")
        assert report.complete and report.generated_rows == 32
        assert [r["request_hash"] for r in again] == [r["request_hash"] for r in rows]
    finally:
        engine.close()


def test_judge_prompt_matches_transformers_rendering(tiny_model, tmp_path: Path) -> None:
    """Our Jinja rendering equals ``apply_chat_template`` (the tiny template; the real judge's when available)."""
    from transformers import AutoTokenizer

    from trace_lib.validation import pins
    from trace_lib.validation.chat_template import ChatTemplate
    from trace_lib.validation.judge import render_prompt

    cases = [(Path(tiny_model), _judge_template(tiny_model, tmp_path / "judge"))]
    real = os.environ.get("TRACE_JUDGE_TOKENIZER")
    if real and Path(real).is_dir():
        cases.append((Path(real), ChatTemplate.from_tokenizer_dir(Path(real))))
    for tokenizer_dir, template in cases:
        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        for raw, answer_type in (("Answer: B\nD", "option_letter"), ('Résumé "x" {y}', "string")):
            user = json.dumps({"answer_type": answer_type, "model_response": raw}, ensure_ascii=False,
                              sort_keys=True, separators=(",", ":"))
            messages = [{"role": "system", "content": pins.JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": user}]
            expected = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                     enable_thinking=False, chat_template=template.text)
            assert render_prompt(template, raw, answer_type) == expected, tokenizer_dir
