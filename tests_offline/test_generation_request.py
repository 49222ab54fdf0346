"""Requests exactly as upstream sends them (eval-campaign spec §3.2-3.3) and their hash."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict

import pytest

from trace_lib.benchmarks.protocol import PromptItem
from trace_lib.errors import InputError
from trace_lib.generation.request import ChatRequest, build_eval_request, prompt_text
from trace_lib.release.suite import load_suite


@pytest.fixture(scope="module")
def generation(release):
    return load_suite(release).generation


def test_payload_is_the_upstream_body(generation, tmp_path):
    image = tmp_path / "img dir" / "0.png"
    items = [PromptItem("image", str(image)), PromptItem("text", "Question: 1+1?\n"), PromptItem("text", "")]
    request = build_eval_request(items, request_id="00000000:0:abcd", generation=generation, seed=43)
    expected = {
        "model": "trace-qwen2.5-vl-3b",
        "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": image.as_uri()}},
            {"type": "text", "text": "Question: 1+1?\n"},
        ]}],
        "temperature": generation["temperature"],
        "top_p": generation["top_p"],
        "max_tokens": generation["max_tokens"],
        "presence_penalty": generation["presence_penalty"],
        "stream": False,
        "mm_processor_kwargs": {"min_pixels": generation["min_image_pixels"],
                                "max_pixels": generation["max_image_pixels"]},
        "top_k": generation["top_k"],
        "repetition_penalty": generation["repetition_penalty"],
        "seed": 43,
    }
    assert request.payload("trace-qwen2.5-vl-3b") == expected
    assert "%20" in expected["messages"][0]["content"][0]["image_url"]["url"]  # percent-encoded like Path.as_uri


def test_request_hash_is_sha256_of_sorted_compact_utf8_json(generation, tmp_path):
    items = [PromptItem("image", str(tmp_path / "a.png")), PromptItem("text", "Größe → ∞?")]
    request = build_eval_request(items, request_id="k", generation=generation, seed=42)
    body = json.dumps(request.payload("m"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert request.request_hash("m") == hashlib.sha256(body.encode("utf-8")).hexdigest()
    assert "∞" in body  # not \\u-escaped


def test_hash_changes_with_seed_model_and_image_path(generation, tmp_path):
    def make(seed, path):
        return build_eval_request([PromptItem("image", str(path)), PromptItem("text", "q")], request_id="k",
                                  generation=generation, seed=seed)

    base = make(42, tmp_path / "a.png").request_hash("m")
    assert make(43, tmp_path / "a.png").request_hash("m") != base
    assert make(42, tmp_path / "b.png").request_hash("m") != base
    assert make(42, tmp_path / "a.png").request_hash("other") != base
    assert make(42, tmp_path / "a.png").request_hash("m") == base


def test_no_text_at_all_sends_one_empty_text_part(generation):
    request = build_eval_request([PromptItem("text", "")], request_id="k", generation=generation, seed=1)
    assert request.payload("m")["messages"] == [{"role": "user", "content": [{"type": "text", "text": ""}]}]


def test_relative_image_path_is_refused(generation):
    with pytest.raises(InputError, match=r"prompt\[0\]: image path must be absolute"):
        build_eval_request([PromptItem("image", "images/0.png")], request_id="k", generation=generation, seed=1)


def test_data_url_transport_is_refused(generation):
    with pytest.raises(InputError, match="unsupported media transport"):
        build_eval_request([PromptItem("text", "q")], request_id="k",
                           generation={**generation, "media_transport": "data-url"}, seed=1)


def test_missing_decoding_field_is_refused(generation):
    incomplete = {k: v for k, v in generation.items() if k != "top_k"}
    with pytest.raises(InputError, match="lacks decoding fields"):
        build_eval_request([PromptItem("text", "q")], request_id="k", generation=incomplete, seed=1)


def test_generic_request_with_system_message_and_image_paths(tmp_path):
    image = tmp_path / "x y.png"
    request = ChatRequest(
        request_id="r", messages=({"role": "system", "content": "S"},
                                  {"role": "user", "content": [{"type": "image_url",
                                                                "image_url": {"url": image.as_uri()}}]}),
        sampling={"temperature": 1.0, "top_p": 0.95, "max_tokens": 2048, "seed": 42},
    )
    assert request.payload("m")["messages"][0] == {"role": "system", "content": "S"}
    assert "mm_processor_kwargs" not in request.payload("m")
    assert request.image_paths() == [image]


def test_persisted_prompt_joins_text_items():
    items = [PromptItem("image", "/a.png"), PromptItem("text", "Hint: h"), PromptItem("text", ""),
             PromptItem("text", "Question: q")]
    assert prompt_text(items) == "Hint: h\nQuestion: q"


_ABSOLUTE_HINT = "the protocol's build_prompt must materialise images under the data root"


@pytest.mark.parametrize("items, line", [
    ([PromptItem("image", "images/0.png")], f"prompt[0]: image path must be absolute (found 'images/0.png'); "
                                             f"{_ABSOLUTE_HINT}"),
    ([PromptItem("text", "q"), PromptItem("audio", "a.wav")],
     "prompt[1]: unknown prompt item kind (expected 'image or text', found 'audio')"),
], ids=["relative", "kind"])
def test_prompt_item_refusal_lines(generation, items, line):
    with pytest.raises(InputError) as excinfo:
        build_eval_request(items, request_id="k", generation=generation, seed=1)
    assert str(excinfo.value) == line


@pytest.mark.parametrize("drop, extra, line", [
    ("top_k", {}, "generation: suite generation block lacks decoding fields (found ['top_k'])"),
    ("min_image_pixels", {}, "generation.min_image_pixels: pixel bound missing or not an integer (found None)"),
    (None, {"max_image_pixels": 1.5}, "generation.max_image_pixels: pixel bound missing or not an integer (found 1.5)"),
], ids=["decoding", "min-px", "max-px"])
def test_generation_block_refusal_lines(generation, drop, extra, line):
    block = {**{k: v for k, v in generation.items() if k != drop}, **extra}
    with pytest.raises(InputError) as excinfo:
        build_eval_request([PromptItem("text", "q")], request_id="k", generation=block, seed=1)
    assert str(excinfo.value) == line


@pytest.mark.parametrize("seed", [-1, True, 1.0, "1"], ids=["neg", "bool", "float", "str"])
def test_bad_seed_is_refused(generation, seed):
    with pytest.raises(InputError) as excinfo:
        build_eval_request([PromptItem("text", "q")], request_id="k", generation=generation, seed=seed)
    assert str(excinfo.value) == f"seed: seed must be a non-negative integer (found {seed!r})"


def test_seed_zero_is_sent(generation):
    request = build_eval_request([PromptItem("text", "q")], request_id="k", generation=generation, seed=0)
    assert request.seed == 0 and request.payload("m")["seed"] == 0


def test_request_is_a_frozen_copy_of_its_inputs():
    message = OrderedDict(role="user", content=[{"type": "text", "text": "q"}])
    sampling = {"temperature": 0.0, "seed": 7}
    bounds = {"min_pixels": 1, "max_pixels": 2}
    request = ChatRequest("r", (message,), sampling=sampling, mm_processor_kwargs=bounds)
    message["content"].append({"type": "text", "text": "late"})
    sampling["seed"], bounds["max_pixels"] = 8, 3
    payload = request.payload("m")
    assert payload["messages"] == [{"role": "user", "content": [{"type": "text", "text": "q"}]}]
    assert payload["seed"] == 7 and payload["mm_processor_kwargs"] == {"min_pixels": 1, "max_pixels": 2}
    for frozen in (request.messages[0], request.sampling, request.mm_processor_kwargs):
        with pytest.raises(TypeError):
            frozen["x"] = 1
