"""A validation slice on CPU with the tiny random Qwen2.5-VL through the hf backend (marker cpu_model).

Real transformers generation of the exact validation requests (system prompt, suite sampling and seed, pixel
bounds), then scoring, a loopback judge stub and ``verify full``. The release variant shortens ``max_tokens`` to
32 so a random model finishes in seconds; everything else is the release's suite.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu_model

SLUG = "qwen2.5-vl-3b-base"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    pytest.importorskip("torch", reason="cpu_model lane needs torch (install the 'hf' extra)")
    pytest.importorskip("transformers", reason="cpu_model lane needs transformers (install the 'hf' extra)")
    from trace_lib.testing.tiny_qwen import build_tiny_qwen25vl

    return build_tiny_qwen25vl(tmp_path_factory.mktemp("tiny") / "tiny-qwen25vl", seed=0)


@pytest.fixture(scope="module")
def short_release(release, tmp_path_factory):
    from trace_lib.validation.tiny import release_variant

    return release_variant(release, tmp_path_factory.mktemp("release") / "release", generation={"max_tokens": 32})


def _abstain(route: str, body: dict) -> str:
    return '{"status":"missing","answer":null,"evidence":""}'


def test_tiny_model_slice_on_cpu(short_release, tiny_model, tmp_path: Path) -> None:
    from trace_lib.testing.openai_server import OpenAIStubServer
    from trace_lib.validation.canonical import read_jsonl
    from trace_lib.validation.chat_template import ChatTemplate
    from trace_lib.validation.generate import GenerationTarget, generate_validation_responses
    from trace_lib.validation.layout import ValidationLayout
    from trace_lib.validation.pipeline import SliceSettings, plan_validation, run_validation_slice
    from trace_lib.validation.prepare import prepare_dataset
    from trace_lib.release.validation_suite import load_validation_suite
    from trace_lib.validation.tiny import build_tiny_parquet
    from trace_lib.validation.verify import verify_full
    from trace_lib.generation.backends.hf import HFBackend
    from trace_lib.testing.hf_reference import RecordingBackend, reference_responses

    layout = ValidationLayout(tmp_path / "work")
    parquet, ident = build_tiny_parquet(short_release, tmp_path / "tiny.parquet", tasks=2)
    prepare_dataset(parquet, layout.dataset_dir, expected=ident)
    judge_dir = tmp_path / "judge"
    judge_dir.mkdir()
    template = json.loads((Path(tiny_model) / "tokenizer_config.json").read_text()).get("chat_template")
    if not template:  # the tiny checkpoint keeps its template in chat_template.json
        template = json.loads((Path(tiny_model) / "chat_template.json").read_text())["chat_template"]
    (judge_dir / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    (slice_,) = plan_validation(short_release, [SLUG])
    served = load_validation_suite(short_release).judge.served_model_name
    engine = RecordingBackend(HFBackend(model_path=str(tiny_model), served_name=SLUG))
    with OpenAIStubServer(_abstain, model=served) as judge:
        settings = SliceSettings(backend="hf", media_transport="file-url", judge_urls=(judge.url,),
                                 judge_template=ChatTemplate.from_tokenizer_dir(judge_dir), expected=ident)
        outcome = run_validation_slice(short_release, slice_, layout, tiny_model, settings, backend=engine)
    assert outcome.generation.complete and outcome.score.rows == 4
    # each stored response is the model's own output for the request sent for that row (system prompt, images,
    # suite sampling and seed), by an independent model.generate
    stored = {str(r["row_index"]): r["raw_response"] for r in read_jsonl(layout.responses(SLUG))}
    assert len(engine.requests) == 4 and stored == reference_responses(tiny_model, engine.requests)
    assert any(r.image_paths() for r in engine.requests)
    assert outcome.score.judge_requested == outcome.score.unresolved  # the stub judge abstains on every row
    report = verify_full(short_release, layout, parquet=parquet, expected=ident, models=[SLUG])
    assert report["generation_rows"] == 4 and report["scored_rows"] == 4

    # The same seed on the same requests gives the same responses (per-request seeding).
    again = GenerationTarget(model=slice_.model, model_path=Path(tiny_model), backend="hf", served_model=SLUG,
                             media_transport="file-url")
    generate_validation_responses(short_release, layout.manifest, tmp_path / "again", again, expected=ident)
    first = [r["raw_response"] for r in read_jsonl(layout.responses(SLUG))]
    second = [r["raw_response"] for r in read_jsonl(tmp_path / "again" / "responses.jsonl")]
    assert first == second and all(first)


def test_judge_prompt_rendering_matches_transformers(tiny_model, tmp_path: Path) -> None:
    """Our Jinja rendering of a checkpoint's chat template equals transformers' ``apply_chat_template``."""
    from transformers import AutoTokenizer

    from trace_lib.validation import pins
    from trace_lib.jsonio import canonical_json_utf8
    from trace_lib.validation.chat_template import ChatTemplate
    from trace_lib.validation.judge import render_prompt

    text = json.loads((Path(tiny_model) / "chat_template.json").read_text())["chat_template"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": text}))
    template = ChatTemplate.from_tokenizer_dir(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    for raw, answer_type in (("Answer: B\nD", "option_letter"), ('Résumé "x" {y}\n', "string")):
        user = canonical_json_utf8({"answer_type": answer_type, "model_response": raw})
        messages = [{"role": "system", "content": pins.JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": user}]
        expected = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                 enable_thinking=False, chat_template=text)
        assert render_prompt(template, raw, answer_type) == expected
