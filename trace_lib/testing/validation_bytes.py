"""The bytes a TRACE-validation run writes, made comparable across runs (test support for the golden-bytes test).

``run_stub_validation(release, tmp)`` runs one model's validation slice stage by stage over loopback stubs: prepare
the tiny parquet, a generation in which one row comes back empty (an ``error`` receipt), the resume that
regenerates it, the first score, the judge with a ladder climb, an answer and an abstention, and the final score.
``normalized_digests(run)`` is the SHA-256 of every file under the work directory after replacing what differs
between two runs of the same code on the same inputs (never what the code decides): the temporary directory, the
release's location, the stub ports, timestamps, judge call durations, the scoring provenance's hashes of
trace_lib's own source, and then, transitively, every hash of a value that held one of those (the run identity,
file hashes). So a digest that moves means the code wrote other bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_lib.release.locate import ReleaseRoot

SLUG = "trace-qwen2.5-vl-3b"
#: row -> response: found+correct, ambiguous, missing (judge: ladder then ok), found, found+wrong, missing (abstain).
RESPONSES = {0: '{"answer": 4}', 1: "Answer: B\nD", 2: "The value is 2.5 units", 3: '{"answer": "Blue "}',
             4: "Final answer: 13", 5: "I pick option D."}
#: A Qwen3-style chat template (thinking off -> empty think block); the real one comes from the judge checkpoint.
QWEN3_LIKE = (
    "{%- for message in messages %}{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}"
)
_TIME = re.compile(rb'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?"')
_ELAPSED = re.compile(rb'"elapsed_seconds":[-+0-9.eE]+')


@dataclass(frozen=True)
class StubRun:
    """A finished stub validation run: its work directory and what varies between runs of it."""

    work: Path
    volatile: dict[str, str]  # text that differs between runs of the same code -> its placeholder
    parquet_sha256: str  # the input's bytes (pyarrow and Pillow build it: another version, other bytes)


def row_of(body: dict[str, Any]) -> int:
    """The manifest row a stub generation request is for (its question text names it)."""
    text = body["messages"][1]["content"][-1]["text"]
    return int(re.search(r"Question (\d+)", text).group(1))


def _judge(route: str, body: dict[str, Any]) -> str:
    (prompt,) = body["prompt"]  # batch size 1
    if "2.5 units" in prompt:  # invalid at the first rung, valid at the second
        return 'Sure! {"status":"ok"}' if body["max_tokens"] == 128 else '{"status":"ok","answer":2.5,"evidence":"2.5"}'
    return '{"status":"ambiguous","answer":null,"evidence":""}'


def prepare_stub_work(release: ReleaseRoot, tmp: Path) -> tuple[Any, Any, Path, Any]:
    """Under ``tmp``: the tiny dataset prepared into a work directory, an (empty) model directory and a judge
    tokenizer directory; returns ``(layout, dataset identity, model directory, judge chat template)``."""
    from trace_lib.validation.chat_template import ChatTemplate
    from trace_lib.validation.layout import ValidationLayout
    from trace_lib.validation.prepare import prepare_dataset
    from trace_lib.validation.tiny import build_tiny_parquet

    layout = ValidationLayout(Path(tmp) / "work")
    parquet, ident = build_tiny_parquet(release, Path(tmp) / "tiny.parquet")
    prepare_dataset(parquet, layout.dataset_dir, expected=ident)
    model_dir = Path(tmp) / "models" / SLUG
    model_dir.mkdir(parents=True)
    (Path(tmp) / "judge").mkdir()
    (Path(tmp) / "judge" / "tokenizer_config.json").write_text(json.dumps({"chat_template": QWEN3_LIKE}))
    return layout, ident, model_dir, ChatTemplate.from_tokenizer_dir(Path(tmp) / "judge")


def run_stub_validation(release: ReleaseRoot, tmp: Path) -> StubRun:
    """Run the stages (module docstring) under ``tmp`` and return the run."""
    from trace_lib.release.validation_suite import load_validation_suite
    from trace_lib.testing.openai_server import OpenAIStubServer
    from trace_lib.validation.generate import GenerationTarget, generate_validation_responses
    from trace_lib.validation.judge import load_pending, run_judge
    from trace_lib.validation.score import code_sha256, run_score

    tmp = Path(tmp).resolve()
    layout, ident, model_dir, template = prepare_stub_work(release, tmp)
    suite = load_validation_suite(release)
    model = suite.model(SLUG)
    first_pass = {"empty": True}

    def generator(route: str, body: dict[str, Any]) -> str:
        row = row_of(body)
        if row == 2 and first_pass["empty"]:
            return ""
        return RESPONSES[row]

    with OpenAIStubServer(generator, model=SLUG) as gen, \
            OpenAIStubServer(_judge, model=suite.judge.served_model_name) as judge:
        target = GenerationTarget(model=model, model_path=model_dir, backend="openai", served_model=SLUG,
                                  endpoint_url=gen.url)
        out = layout.generation_dir(SLUG)
        first = generate_validation_responses(release, layout.manifest, out, target, expected=ident, chunk_size=4)
        assert first.status == "incomplete" and first.error_rows == 1, first
        first_pass["empty"] = False
        again = generate_validation_responses(release, layout.manifest, out, target, expected=ident, chunk_size=4)
        assert again.complete and (again.generated_rows, again.reused_rows) == (1, 5), again
        run_score(release, layout.manifest, out, layout.scoring_dir(SLUG), model_slug=SLUG, expected=ident)
        pending = load_pending(layout.scoring_dir(SLUG) / "judge_pending.jsonl")
        run_judge(pending, judge=suite.judge, template=template, endpoints=[judge.url],
                  output_dir=layout.judge_dir(SLUG), batch_size=1, workers=1)
        run_score(release, layout.manifest, out, layout.scoring_dir(SLUG), model_slug=SLUG,
                  judge_results=layout.judge_results(SLUG), expected=ident)
        urls = {gen.url.rsplit("/v1", 1)[0]: "<GENERATOR>", judge.url.rsplit("/v1", 1)[0]: "<JUDGE>"}
    meta = json.loads((out / "run_metadata.json").read_text(encoding="utf-8"))
    volatile = {str(tmp): "<TMP>", str(Path(release.path).resolve()): "<RELEASE>", **urls,
                meta["run_identity_sha256"]: "<RUN_IDENTITY>"}
    volatile.update({sha: f"<CODE:{name}>" for name, sha in code_sha256().items()})
    return StubRun(layout.root, volatile, ident.file_sha256)


def _normalize(data: bytes, volatile: dict[str, str]) -> bytes:
    for value, placeholder in sorted(volatile.items(), key=lambda kv: -len(kv[0])):
        data = data.replace(value.encode("utf-8"), placeholder.encode("utf-8"))
    return _ELAPSED.sub(b'"elapsed_seconds":"<S>"', _TIME.sub(b'"<TIME>"', data))


def normalized_digests(run: StubRun) -> dict[str, str]:
    """Work-relative path -> SHA-256 of the file's normalized bytes (module docstring), for every file."""
    files = sorted(p for p in run.work.rglob("*") if p.is_file())
    raw = {p: p.read_bytes() for p in files}
    volatile = dict(run.volatile)
    while True:  # a file whose bytes hold a volatile value has a volatile hash, which other files may record
        changed = False
        for path, data in raw.items():
            digest = hashlib.sha256(data).hexdigest()
            if digest not in volatile and _normalize(data, volatile) != data:
                volatile[digest] = f"<SHA256:{path.relative_to(run.work).as_posix()}>"
                changed = True
        if not changed:
            break
    return {p.relative_to(run.work).as_posix(): hashlib.sha256(_normalize(raw[p], volatile)).hexdigest()
            for p in files}
