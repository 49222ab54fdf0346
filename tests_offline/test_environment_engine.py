"""Engine versions against the paper's pins: read from the release, recorded in response-file headers, refused
on resume when they changed, and said by slice verdicts, ``summarize`` and ``trace-repro env show``."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from http.server import BaseHTTPRequestHandler

import pytest

from trace_lib.cli.main import main
from trace_lib.environment.engine import (
    EngineVersions,
    campaign_engine_line,
    compare_to_paper,
    engine_change,
    engine_versions,
    generation_engine,
    paper_engine,
    stored_drift,
)
from trace_lib.errors import InputError
from trace_lib.generation.store import SliceIdentity, SliceStore
from trace_lib.release import identity
from trace_lib.testing.loopback_http import serving


def _pinned(release, name: str) -> str:
    text = release.file(identity.REQUIREMENTS_CU128).read_text()
    return re.search(rf"^{name}==(\S+)", text, re.M).group(1)


def _engine(vllm, torch, transformers, cuda=None, gpu=None) -> EngineVersions:
    return EngineVersions({"vllm": vllm, "torch": torch, "transformers": transformers}, cuda, gpu)


def test_paper_engine_is_read_from_the_release(release):
    paper = paper_engine(release)
    for name in ("vllm", "torch", "transformers"):
        assert paper.packages[name] == _pinned(release, name)
        assert paper.where[name].startswith(identity.REQUIREMENTS_CU128 + ":")
    ref = release.read_json(identity.ENVIRONMENT_RECEIPT)["reference_platform"]
    assert (paper.cuda, paper.gpu) == (ref["cuda"], ref["gpu"])


def test_public_versions_match_and_each_difference_is_named(release):
    paper = paper_engine(release)
    torch_public = paper.packages["torch"].split("+")[0]
    same = compare_to_paper(_engine(paper.packages["vllm"], torch_public, paper.packages["transformers"],
                                    cuda=paper.cuda + ".1", gpu="NVIDIA H200"), paper)
    assert same.matches_paper and same.drift() == "" and same.gpu_matches_paper is False
    other = compare_to_paper(_engine("0.24.0", "2.11.0", paper.packages["transformers"], cuda="13.0"), paper)
    assert not other.matches_paper
    assert other.drift() == (f"engine differs from the paper's (vllm 0.24.0 vs {paper.packages['vllm']}; "
                             f"torch 2.11.0 vs {paper.packages['torch']}; cuda 13.0 vs {paper.cuda})")
    missing = compare_to_paper(_engine(None, torch_public, paper.packages["transformers"]), paper)
    assert missing.drift() == f"engine differs from the paper's (vllm not installed vs {paper.packages['vllm']})"
    assert missing.unchecked == ("cuda", "gpu")
    doc = other.to_json()
    assert doc["matches_paper"] is False and doc["paper"]["vllm"] == paper.packages["vllm"]
    assert ("engine_matches_paper", "false") in other.properties()


def test_engine_versions_import_nothing_heavy():
    before = set(sys.modules)
    versions = engine_versions()
    assert not {"torch", "vllm", "transformers"} & (set(sys.modules) - before)
    from importlib.metadata import PackageNotFoundError, version

    for name, found in versions.packages.items():
        try:
            assert found == version(name)
        except PackageNotFoundError:
            assert found is None


IDENTITY = SliceIdentity(slice="m-seed42-b", model="m", model_revision="a" * 40, seed=42, benchmark="b",
                         contract={"seed": 42})


def test_store_records_the_engine_and_refuses_to_resume_on_another(release, tmp_path):
    paper = paper_engine(release)
    here = compare_to_paper(_engine("0.24.0", "2.11.0", "5.17.0"), paper).to_json() | {"backend": "vllm"}
    path = tmp_path / "s.jsonl"
    with SliceStore.open(path, dataclasses.replace(IDENTITY, engine=here)) as store:
        assert store.header["engine"]["vllm"] == "0.24.0"
    assert json.loads(path.read_text().splitlines()[0])["engine"]["matches_paper"] is False
    SliceStore.open(path, dataclasses.replace(IDENTITY, engine=here | {"cuda": "12.8"})).close()  # unknown -> known
    there = compare_to_paper(_engine(paper.packages["vllm"], "2.8.0", "4.57.6"), paper).to_json() | {"backend": "vllm"}
    with pytest.raises(InputError) as info:
        SliceStore.open(path, dataclasses.replace(IDENTITY, engine=there))
    assert str(info.value).startswith(f"{path}: header.engine.vllm: responses were generated on another engine "
                                      f"(expected '{paper.packages['vllm']}', found '0.24.0')")
    SliceStore.open(path, IDENTITY).close()  # a caller that does not know its engine is not refused
    old = tmp_path / "old.jsonl"
    SliceStore.open(old, IDENTITY).close()  # a file from before engines were recorded resumes anywhere
    SliceStore.open(old, dataclasses.replace(IDENTITY, engine=there)).close()


def test_engine_change_skips_unknown_facts_and_ignores_the_gpu():
    a = {"vllm": "0.10.2", "torch": "2.8.0", "transformers": "4.57.6", "cuda": "12.8", "gpu": "H100", "backend": "vllm"}
    assert engine_change(a, a | {"gpu": "H200", "cuda": "12.8.1"}) == []
    assert engine_change(a, a | {"cuda": None}) == []
    assert engine_change(a, a | {"backend": "hf"}) == [("backend", "vllm", "hf")]
    assert engine_change(None, a) == [] and engine_change(a, None) == []


def test_verdicts_and_summaries_say_the_engine_differs(release, monkeypatch):
    from trace_lib.aggregation.credits import CreditTable
    from trace_lib.aggregation.verdict import judge_credits

    rows = [{"model_id": "qwen2.5-vl-3b-base", "seed": 42, "benchmark_id": "erqa", "index": str(i),
             "credit": float(i % 2)} for i in range(400)]
    verdict = judge_credits(CreditTable.from_records(rows), release).verdicts[0]
    note = "engine differs from the paper's (vllm 0.24.0 vs 0.10.2)"
    noted = verdict.noted(note)
    assert noted.explain() == verdict.explain() + f" ({note})"
    assert ("verdict_note", note) in noted.properties()
    paper = paper_engine(release)
    drifted = compare_to_paper(_engine("0.24.0", paper.packages["torch"], paper.packages["transformers"]),
                               paper).to_json()
    matching = compare_to_paper(_engine(paper.packages["vllm"], paper.packages["torch"],
                                        paper.packages["transformers"]), paper).to_json()
    line = campaign_engine_line({"a": drifted, "b": drifted, "c": matching, "d": None})
    assert line == (f"engine: engine differs from the paper's (vllm 0.24.0 vs {paper.packages['vllm']}) "
                    "(2/4 slices); matches the paper's pins (1/4 slices); engine not recorded (1/4 slices)")


class _VersionHandler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = json.dumps({"version": "0.24.0"}).encode()
        self.send_response(200 if self.path == "/version" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # noqa: D401
        pass


def test_openai_engine_is_what_the_endpoint_reports(release):
    with serving(_VersionHandler) as base:
        url = f"{base}/v1"
        doc = generation_engine(release, "openai", base_url=url)
    assert doc["vllm"] == "0.24.0" and doc["torch"] is None and doc["backend"] == "openai"
    assert doc["matches_paper"] is False and doc["endpoint"] == url
    silent = generation_engine(release, "openai", base_url="http://127.0.0.1:9/v1")
    assert silent["matches_paper"] is None and "vllm" in silent["unchecked"]


def test_env_show_exit_code_follows_the_match(release, capsys, monkeypatch):
    from trace_lib.environment import engine as engine_module

    paper = paper_engine(release)
    exact = _engine(paper.packages["vllm"], paper.packages["torch"], paper.packages["transformers"])
    monkeypatch.setattr(engine_module, "engine_versions", lambda probe=False: exact)
    assert main(["env", "show", "--trace-root", str(release.path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "engine matches the paper's pins"
    monkeypatch.setattr(engine_module, "engine_versions",
                        lambda probe=False: dataclasses.replace(exact, packages={**exact.packages, "vllm": "0.24.0"}))
    assert main(["env", "show", "--json", "--trace-root", str(release.path)]) == 1
    assert json.loads(capsys.readouterr().out)["differences"] == [
        {"name": "vllm", "found": "0.24.0", "paper": paper.packages["vllm"]}]


def test_a_release_without_pins_records_the_engine_uncompared(release, tmp_path):
    import shutil

    from trace_lib.environment.engine import engine_drift_text
    from trace_lib.release.locate import ReleaseRoot

    copy = tmp_path / "release"
    shutil.copytree(release.file("rlvr"), copy / "rlvr")
    (copy / identity.REQUIREMENTS_CU128).unlink()
    doc = generation_engine(ReleaseRoot(copy), "hf")
    assert doc["paper"] is None and doc["matches_paper"] is None and doc["backend"] == "hf"
    assert engine_drift_text(doc) == (f"engine not compared with the paper's ({identity.REQUIREMENTS_CU128}: "
                                      "file is missing)")


def test_generate_records_the_endpoint_engine_in_the_header(release, tmp_path, capsys):
    from trace_lib.generation.store import load_header, response_path
    from trace_lib.testing.openai_server import OpenAIStubServer
    from trace_lib.testing.tiny_bench import build_tiny_tsv

    build_tiny_tsv(tmp_path / "data" / "MMStar.tsv", style="mcq", rows=2)
    argv = ["generate", "--trace-root", str(release.path), "--model", "tiny", str(tmp_path / "model"),
            f"sha256set:{'1' * 64}", f"org/tiny@{'0' * 40}", "Tiny", "--seeds", "43", "--benchmark", "mmstar",
            "--campaign-root", str(tmp_path / "campaign"), "--data-root", str(tmp_path / "data"),
            "--backend", "openai", "--unprepared-data", "--no-progress"]
    with OpenAIStubServer(lambda route, body: "B", model="tiny") as server:
        assert main([*argv, "--base-url", server.url]) == 0
    err = capsys.readouterr().err
    assert "[generate] tiny: engine not known (openai endpoint did not report its versions)" in err
    engine = load_header(response_path(tmp_path / "campaign", model="tiny", seed=43, benchmark="mmstar"))["engine"]
    assert engine["backend"] == "openai" and engine["matches_paper"] is None and engine["endpoint"] == server.url


# -- refresh_engine: a local record completed once torch and CUDA are up (issue 25) --------------------------

def test_refresh_engine_completes_a_local_record_and_leaves_the_others_alone(release, monkeypatch):
    from trace_lib.environment import engine as engine_module
    from trace_lib.environment.engine import refresh_engine

    paper = paper_engine(release)
    torch_public = paper.packages["torch"].split("+")[0]
    monkeypatch.setattr(engine_module, "engine_versions", lambda probe=False: _engine(
        "0.24.0", torch_public, paper.packages["transformers"], cuda=paper.cuda, gpu="NVIDIA H200"))
    started = generation_engine(release, "vllm")  # before torch: cuda and gpu unknown
    started.update(cuda=None, gpu=None)
    for half_known in ({"cuda": None, "gpu": None}, {"cuda": paper.cuda, "gpu": None}, {"cuda": None, "gpu": "x"}):
        refreshed = refresh_engine({**started, **half_known})
        assert (refreshed["cuda"], refreshed["gpu"], refreshed["backend"]) == (paper.cuda, "NVIDIA H200", "vllm")
        assert refreshed["paper"] == started["paper"] and refreshed["vllm"] == "0.24.0"
        assert refreshed["matches_paper"] is False and [d["name"] for d in refreshed["differences"]] == ["vllm"]
    complete = {**started, "cuda": "12.1", "gpu": "A100"}
    remote = {**started, "backend": "openai"}
    unpinned = {**started, "paper": None}
    for doc in (complete, remote, unpinned, None):
        assert refresh_engine(doc) is doc  # nothing new to learn: the record is kept as it is


def test_the_vllm_model_runner_is_recorded_and_v2_is_a_difference(release, monkeypatch):
    from trace_lib.environment.engine import MODEL_RUNNER_ENV, model_runner_setting

    monkeypatch.delenv(MODEL_RUNNER_ENV, raising=False)
    default = generation_engine(release, "vllm")
    assert default["model_runner"] == "vllm default"
    assert "model_runner" not in {d["name"] for d in default["differences"]}
    assert "model_runner" not in generation_engine(release, "hf")  # only vLLM has model runners

    monkeypatch.setenv(MODEL_RUNNER_ENV, "1")
    v2 = generation_engine(release, "vllm")
    assert v2["model_runner"] == "v2" and v2["matches_paper"] is False
    assert {"name": "model_runner", "found": "v2", "paper": "v1"} in v2["differences"]
    assert "model_runner v2 vs v1" in stored_drift(v2)
    from trace_lib.environment.engine import engine_properties

    assert ("engine_model_runner", "v2") in engine_properties(v2)  # the JUnit receipt names it
    # a slice begun on one runner never resumes on the other: the same seed samples other tokens there
    assert ("model_runner", "vllm default", "v2") in engine_change(default, v2)
    older = {k: v for k, v in default.items() if k != "model_runner"}  # a header written before runners were
    assert "model_runner" not in {name for name, _, _ in engine_change(older, v2)}  # recorded resumes as before

    assert model_runner_setting({MODEL_RUNNER_ENV: "0"}) == "v1"
    assert model_runner_setting({MODEL_RUNNER_ENV: "yes"}) == "yes"  # vLLM itself fails on it; recorded as found


# -- torch's facts only once torch (and CUDA) are up; the release's pins read strictly ---------------------------

def _fake_torch(*, initialized: bool, available: bool = True):
    from types import SimpleNamespace

    cuda = SimpleNamespace(is_initialized=lambda: initialized, is_available=lambda: available,
                           device_count=lambda: 2, get_device_name=lambda index: "NVIDIA H100 80GB HBM3")
    return SimpleNamespace(version=SimpleNamespace(cuda="12.8"), cuda=cuda)


def test_the_gpu_is_read_only_once_cuda_is_initialised_or_probed(release, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(initialized=False))
    versions = engine_versions()
    assert (versions.cuda, versions.gpu, versions.gpu_count) == ("12.8", None, None)  # CUDA not touched
    assert engine_versions(probe=True).gpu == "NVIDIA H100 80GB HBM3"
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(initialized=True))
    assert (engine_versions().gpu, engine_versions().gpu_count) == ("NVIDIA H100 80GB HBM3", 2)
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(initialized=True, available=False))
    none = engine_versions()
    assert (none.gpu, none.gpu_count) == (None, 0)
    gpu_line = next(line for line in compare_to_paper(none, paper_engine(release)).render_lines()
                    if line.startswith("gpu"))
    assert gpu_line.split()[1:3] == ["none", "visible"]  # not "not checked": there is no GPU to check


def test_an_unknown_paper_gpu_is_no_match_either_way(release):
    paper = dataclasses.replace(paper_engine(release), gpu=None)
    assert compare_to_paper(_engine("0.10.2", "2.8.0", "4.57.6", gpu="NVIDIA H100"), paper).gpu_matches_paper is None


def test_a_version_pep_440_cannot_read_still_drops_its_local_label(release):
    paper = paper_engine(release)
    odd = paper.packages["transformers"] + "+local/build"  # not a PEP 440 version
    record = compare_to_paper(_engine(paper.packages["vllm"], "2.8.0", odd), paper)
    assert "transformers" not in [name for name, _, _ in record.differences]


def _release_copy(release, tmp_path, edit):  # noqa: ANN001
    import shutil

    from trace_lib.release.locate import ReleaseRoot

    copy = tmp_path / "release"
    shutil.copytree(release.file("rlvr"), copy / "rlvr")
    edit(copy)
    return ReleaseRoot(copy)


def test_a_requirements_file_without_an_engine_pin_is_named(release, tmp_path):
    from trace_lib.errors import ReleaseFileError

    def unpin_vllm(root):
        path = root / identity.REQUIREMENTS_CU128
        path.write_text(re.sub(r"^vllm==.*$", "vllm>=0.10", path.read_text(), flags=re.M))

    copy = _release_copy(release, tmp_path, unpin_vllm)
    with pytest.raises(ReleaseFileError) as refused:
        paper_engine(copy)
    assert str(refused.value) == f"{identity.REQUIREMENTS_CU128}: engine package not pinned with == (found ['vllm'])"
    assert generation_engine(copy, "hf")["paper"] is None  # a generation still records its engine, uncompared


def test_a_receipt_without_the_reference_cuda_leaves_it_unknown(release, tmp_path):
    def drop_cuda(root):
        path = root / identity.ENVIRONMENT_RECEIPT
        doc = json.loads(path.read_text())
        doc["reference_platform"].pop("cuda")
        path.write_text(json.dumps(doc))

    paper = paper_engine(_release_copy(release, tmp_path, drop_cuda))
    assert paper.cuda is None and paper.gpu == paper_engine(release).gpu
    assert "cuda" in compare_to_paper(_engine("0.10.2", "2.8.0", "4.57.6", cuda="12.8"), paper).unchecked


def test_the_v2_model_runner_on_an_uncompared_engine_stays_unknown(release, tmp_path, monkeypatch):
    from trace_lib.environment.engine import MODEL_RUNNER_ENV

    monkeypatch.setenv(MODEL_RUNNER_ENV, "1")
    copy = _release_copy(release, tmp_path, lambda root: (root / identity.REQUIREMENTS_CU128).unlink())
    doc = generation_engine(copy, "vllm")
    assert doc["matches_paper"] is None and {"name": "model_runner", "found": "v2", "paper": "v1"} in doc["differences"]


class _Answers(BaseHTTPRequestHandler):
    """``/version`` answers as ``status`` and ``body`` say (class attributes set per test)."""

    status, body = 200, b"{}"

    def do_GET(self):  # noqa: N802
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):  # noqa: D401
        pass


@pytest.mark.parametrize(("status", "body"), [(500, b'{"version": "0.24.0"}'), (200, b'{"version": 24}'),
                                              (200, b"not json")])
def test_an_endpoint_that_does_not_say_its_vllm_version_reports_none(status, body):
    from trace_lib.environment.engine import remote_vllm_version

    with serving(type("Handler", (_Answers,), {"status": status, "body": body})) as base:
        assert remote_vllm_version(f"{base}/v1") is None


def test_a_pool_s_vllm_version_is_its_first_endpoint_s():
    from trace_lib.environment.engine import remote_vllm_version

    with serving(_VersionHandler) as base:
        assert remote_vllm_version(f" {base}/v1, http://127.0.0.1:9/v1") == "0.24.0"
        assert remote_vllm_version("ftp://127.0.0.1/v1") is None and remote_vllm_version("http:///v1") is None


def test_stored_engine_records_read_back_whatever_the_file_holds(release, tmp_path):
    from trace_lib.environment.engine import engine_properties, read_stored_engine

    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"not json\n")
    assert read_stored_engine(garbage) is None and read_stored_engine(tmp_path / "absent.jsonl") is None
    assert campaign_engine_line({}) == "engine: no response files"
    paper = paper_engine(release)
    drifted = compare_to_paper(_engine("0.24.0", paper.packages["torch"], paper.packages["transformers"]),
                               paper).to_json()
    assert ("engine_drift", f"engine differs from the paper's (vllm 0.24.0 vs {paper.packages['vllm']})") in (
        engine_properties(drifted))
