"""A fault while a validation receipt is written (a full disk, Ctrl-C) loses no receipt already written and leaves no
half of one; the resumed run asks only for the rows without a receipt and writes the same bytes as a run that was
never interrupted. Validation keeps upstream's per-row receipt files (each written by trace_lib.atomic: temp file,
fsync, rename), so the fault is injected into the receipt's temp file, half-way through its bytes."""

from __future__ import annotations

import json

import pytest

from trace_lib.atomic import TEMP_SUFFIX, atomic_output
from trace_lib.release.validation_suite import load_validation_suite
from trace_lib.testing.faulty_file import FaultyFile, enospc
from trace_lib.testing.openai_server import OpenAIStubServer
from trace_lib.testing.validation_bytes import RESPONSES, SLUG, StubRun, normalized_digests, prepare_stub_work, row_of
from trace_lib.validation import generate
from trace_lib.validation.canonical import canonical_bytes
from trace_lib.validation.generate import GenerationTarget, generate_validation_responses

ROWS = len(RESPONSES)


def _respond(route: str, body: dict) -> str:
    return RESPONSES[row_of(body)] if "messages" in body else ""


def _chats(server: OpenAIStubServer) -> list[dict]:
    return [body for route, body in server.requests if route == "chat/completions"]


def _target(model, model_dir, server):  # noqa: ANN001, ANN202
    return GenerationTarget(model=model, model_path=model_dir, backend="openai", served_model=SLUG,
                            endpoint_url=server.url)


@pytest.mark.parametrize("error", [enospc, KeyboardInterrupt], ids=["enospc", "sigint"])
def test_a_fault_in_any_receipt_write_then_resume_gives_the_bytes_of_an_unbroken_run(release, tmp_path, monkeypatch,
                                                                                     error):
    layout, ident, model_dir, _ = prepare_stub_work(release, tmp_path)
    model = load_validation_suite(release).model(SLUG)
    real_write = generate.write_json

    def run(out, server):  # noqa: ANN001, ANN202
        return generate_validation_responses(release, layout.manifest, out, _target(model, model_dir, server),
                                             expected=ident)

    def digests(out, server):  # noqa: ANN001, ANN202
        volatile = {str(out): "<OUT>", server.url: "<ENDPOINT>"}
        return normalized_digests(StubRun(out, volatile, ident.file_sha256))

    with OpenAIStubServer(_respond, model=SLUG) as server:
        run(tmp_path / "unbroken", server)
        unbroken = digests(tmp_path / "unbroken", server)
    for fail_at in range(ROWS):
        out, written = tmp_path / f"broken-{fail_at}", []

        def faulty(path, value, fail_at=fail_at, written=written):  # noqa: ANN001, ANN202
            if path.parent.name == "receipts" and len(written) == fail_at:
                data = canonical_bytes(value)
                with atomic_output(path) as handle:
                    FaultyFile(handle, len(data) // 2, error()).write(data)
            if path.parent.name == "receipts":
                written.append(path.name)
            return real_write(path, value)

        monkeypatch.setattr(generate, "write_json", faulty)
        with OpenAIStubServer(_respond, model=SLUG) as server, pytest.raises(type(error())):
            run(out, server)
        monkeypatch.setattr(generate, "write_json", real_write)
        receipts = sorted(p.name for p in (out / "receipts").glob("*")) if fail_at else []
        assert receipts == sorted(written[:fail_at]), fail_at  # every whole receipt, and nothing else
        assert not list(out.rglob(f"*{TEMP_SUFFIX}")) and not (out / generate.LOCK_FILE).exists()
        assert json.loads((out / "run_metadata.json").read_text())["status"] == "running"
        with OpenAIStubServer(_respond, model=SLUG) as server:
            report = run(out, server)
            assert (report.generated_rows, report.reused_rows) == (ROWS - fail_at, fail_at)
            assert len(_chats(server)) == ROWS - fail_at  # only the rows without a receipt are asked again
            assert digests(out, server) == unbroken, fail_at


def test_a_backend_that_does_not_start_leaves_no_run_behind(release, tmp_path, monkeypatch):
    """A wrong --backend or --base-url is corrected and run again: that is the same run, not 'a different run' whose
    metadata the first attempt left behind."""
    from trace_lib.errors import BackendError
    from trace_lib.generation.backends import base

    layout, ident, model_dir, _ = prepare_stub_work(release, tmp_path)
    model = load_validation_suite(release).model(SLUG)
    out = tmp_path / "out"

    def not_starting(*args, **kwargs):
        raise BackendError("vllm is not importable", field="--backend vllm")

    monkeypatch.setattr(base, "create_backend", not_starting)
    with OpenAIStubServer(_respond, model=SLUG) as server:
        with pytest.raises(BackendError):
            generate_validation_responses(release, layout.manifest, out, _target(model, model_dir, server),
                                          expected=ident)
        assert not (out / "run_metadata.json").exists()
        monkeypatch.undo()
        generate_validation_responses(release, layout.manifest, out, _target(model, model_dir, server), expected=ident)
    assert json.loads((out / "run_metadata.json").read_text())["completed_rows"] == ROWS


def test_a_judge_template_that_does_not_compile_and_a_parquet_that_is_not_one_are_one_line(tmp_path, capsys):
    from trace_lib.cli.main import main
    from trace_lib.errors import InputError
    from trace_lib.validation.chat_template import ChatTemplate

    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{% for %}"}))
    with pytest.raises(InputError) as refused:
        ChatTemplate.from_tokenizer_dir(tmp_path)
    assert refused.value.file == str(tmp_path / "tokenizer_config.json") and "does not compile" in str(refused.value)
    garbage = tmp_path / "validation.parquet"
    garbage.write_bytes(b"not a parquet file")
    code = main(["validation", "prepare", "--unpinned", "--parquet", str(garbage), "--work-dir", str(tmp_path / "w")])
    err = capsys.readouterr().err
    assert code == 2 and "not a readable parquet file" in err and "Traceback" not in err, err
