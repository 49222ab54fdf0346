"""The validation artifacts are read by one reader (``validation/canonical.py``: ``read_text``, ``read_json_object``)
that holds them to the input policy every file has: an artifact that is JSON of another shape (``[1]``, ``null``
where run metadata, a receipt or a summary belongs), a field that should be an object and is not, a text file that
is not UTF-8, is one line naming the file and the field, where each was an ``AttributeError`` or
``UnicodeDecodeError`` traceback (exit 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trace_lib.errors import InputError
from trace_lib.testing.cli_runner import run_cli
from trace_lib.testing.validation_bytes import SLUG, prepare_stub_work, run_stub_validation
from trace_lib.validation.chat_template import ChatTemplate

pytestmark = pytest.mark.offline


@pytest.fixture
def run(release, tmp_path):
    return run_stub_validation(release, tmp_path)


def _verify(release, work: Path, phase: str):  # noqa: ANN202
    return run_cli(["validation", "verify", phase, "--trace-root", str(release.path), "--unpinned", "--work-dir",
                    str(work), "--model", SLUG, "--parquet", str(work.parent / "tiny.parquet")])


def _edit(path: Path, change) -> None:  # noqa: ANN001
    doc = json.loads(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")


@pytest.mark.parametrize("text, found", [("[1]", "array"), ("null", "null"), ('"x"', "string")])
def test_run_metadata_that_is_not_an_object_is_one_line(release, run, text, found):
    meta = run.work / "generation" / SLUG / "run_metadata.json"
    meta.write_text(text)
    for phase in ("generation-only", "full"):
        done = _verify(release, run.work, phase)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr == f"error: {meta}: not a JSON object (found {found})\n"
    done = run_cli(["validation", "score", "--trace-root", str(release.path), "--unpinned", "--work-dir",
                    str(run.work), "--model", SLUG, "--final"])
    assert (done.returncode, done.stderr) == (2, f"error: {meta}: not a JSON object (found {found})\n")


def test_a_manifest_media_block_that_is_not_an_object_is_a_finding(release, run):
    manifest = run.work / "dataset" / "manifest.json"
    _edit(manifest, lambda doc: doc.__setitem__("media", "x"))
    done = _verify(release, run.work, "generation-only")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["error"] == f"{manifest}: media: not a JSON object (found string)"


@pytest.mark.parametrize("change, line", [
    (lambda summary: summary.__setitem__("provenance", "x"), "provenance: not a JSON object (found string)"),
    (lambda summary: summary.__setitem__("provenance", {**summary["provenance"], "generation_files": {"a": 1}}),
     "provenance.generation_files: generation file hash differs"),
])
def test_a_summary_of_another_shape_is_a_finding(release, run, change, line):
    summary = run.work / "scoring" / SLUG / "summary.json"
    _edit(summary, change)
    done = _verify(release, run.work, "full")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["error"] == f"{summary}: {line}"


def test_a_summary_that_is_an_array_or_markdown_that_is_not_utf8_is_one_line(release, run):
    summary, markdown = (run.work / "scoring" / SLUG / name for name in ("summary.json", "summary.md"))
    original = summary.read_bytes()
    summary.write_text("[]")
    done = _verify(release, run.work, "full")
    assert (done.returncode, done.stderr) == (2, f"error: {summary}: not a JSON object (found array)\n")
    summary.write_bytes(original)
    markdown.write_bytes(b"| model |\xff\n")
    done = _verify(release, run.work, "full")
    assert (done.returncode, done.stderr) == (
        2, f"error: {markdown}: not UTF-8 text at byte offset 9 (bytes ff); save it as UTF-8\n")


def test_a_judge_tokenizer_of_another_shape_is_one_line(release, run, tmp_path):
    tokenizer = tmp_path / "judge"
    (tokenizer / "tokenizer_config.json").write_text("[1]")
    with pytest.raises(InputError) as refused:
        ChatTemplate.from_tokenizer_dir(tokenizer)
    assert refused.value.render() == f"{tokenizer / 'tokenizer_config.json'}: not a JSON object (found array)"
    (tokenizer / "tokenizer_config.json").write_text("{}")
    (tokenizer / "chat_template.jinja").write_bytes(b"{{ messages }}\xe9")
    done = run_cli(["validation", "judge", "--trace-root", str(release.path), "--unpinned", "--work-dir",
                    str(run.work), "--model", SLUG, "--judge-url", "http://127.0.0.1:9/v1", "--judge-tokenizer",
                    str(tokenizer)])
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"error: {tokenizer / 'chat_template.jinja'}: not UTF-8 text at byte offset 14 (bytes e9); "
                           "save it as UTF-8\n")


def test_a_generation_receipt_that_is_not_an_object_is_one_line_on_resume(release, tmp_path):
    from trace_lib.testing.openai_server import OpenAIStubServer
    from trace_lib.release.validation_suite import load_validation_suite
    from trace_lib.validation.generate import GenerationTarget, generate_validation_responses

    layout, ident, model_dir, _ = prepare_stub_work(release, tmp_path)
    out = layout.generation_dir(SLUG)
    with OpenAIStubServer(lambda route, body: '{"answer": 1}', model=SLUG) as server:
        target = GenerationTarget(model=load_validation_suite(release).model(SLUG), model_path=model_dir,
                                  backend="openai", served_model=SLUG, endpoint_url=server.url)
        assert generate_validation_responses(release, layout.manifest, out, target, expected=ident).complete
        receipt = out / "receipts" / "000001.json"
        receipt.write_text("[1]")
        with pytest.raises(InputError) as refused:
            generate_validation_responses(release, layout.manifest, out, target, expected=ident)
    assert refused.value.render() == f"{receipt}: not a JSON object (found array)"
