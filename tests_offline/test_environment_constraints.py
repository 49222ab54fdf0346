"""``trace-repro env constraints``: pins derived from the release's requirement files, every rewrite stated,
contradictions refused with one line naming file and line; pyproject extras admit the paper's engine."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from trace_lib.cli.main import main
from trace_lib.environment.constraints import build_constraints, render_constraints
from trace_lib.environment.requirements import read_requirements
from trace_lib.errors import ReleaseFileError
from trace_lib.release import identity
from trace_lib.release.locate import ReleaseRoot

REPO_ROOT = Path(__file__).resolve().parents[1]


def _copy(release, tmp_path: Path, replace: dict[str, str]) -> ReleaseRoot:
    shutil.copytree(release.file("rlvr"), tmp_path / "rlvr")
    for rel, text in replace.items():
        (tmp_path / rel).write_text(text, encoding="utf-8")
    return ReleaseRoot(tmp_path)


def _pins(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        body = line.split("  #", 1)[0].strip()
        if body and not body.startswith(("#", "-")):
            name, _, version = body.partition("==")
            out[name] = version
    return out


def test_eval_profile_is_every_line_of_the_three_release_files(release):
    constraints = build_constraints(release, "eval")
    assert constraints.source.files == [identity.EVAL_REQUIREMENTS_RUNTIME, identity.REQUIREMENTS_CU128,
                                        identity.EVAL_REQUIREMENTS]
    lines = {p.name: p.specifier for p in constraints.pins}
    for rel in constraints.source.files:  # every pinned line of every file is in the output, unchanged
        for pin in read_requirements(release, rel).pins:
            assert lines[pin.name] == pin.specifier, pin.where
    assert len(lines) == len({p.name for p in read_requirements(release, identity.EVAL_REQUIREMENTS_RUNTIME).pins})
    text = render_constraints(release, constraints, command="x")
    assert "--extra-index-url https://download.pytorch.org/whl/cu128" in text
    assert "ray==" in text and "ray[" not in text.split("Written differently")[1].split("\n", 2)[2]


def test_pypi_only_strips_local_labels_and_index_and_says_so(release):
    text = render_constraints(release, build_constraints(release, "eval", pypi_only=True), command="x")
    pins = _pins(text)
    paper = {p.name: p.exact_version for p in read_requirements(release, identity.REQUIREMENTS_CU128).pins}
    assert pins["torch"] == paper["torch"].split("+")[0] and "+" in paper["torch"]
    assert pins["vllm"] == paper["vllm"] and pins["transformers"] == paper["transformers"]
    assert not any(line.startswith("--") for line in text.splitlines())
    assert f"torch=={paper['torch']} written as torch=={pins['torch']}" in text
    assert "dropped --extra-index-url" in text


def test_train_profile_is_the_base_file_only_and_says_the_train_extra_is_separate(release):
    constraints = build_constraints(release, "train")
    assert constraints.source.files == [identity.REQUIREMENTS_CU128]
    text = render_constraints(release, constraints, command="x")
    assert "Not for trace-repro's 'train' extra" in text
    assert "openpyxl" not in _pins(text)


def test_duplicates_merge_and_conflicts_name_file_and_line(release, tmp_path):
    base = release.file(identity.EVAL_REQUIREMENTS).read_text(encoding="utf-8")
    same = _copy(release, tmp_path / "same", {identity.EVAL_REQUIREMENTS: base + "vllm==0.10.2\n"})
    assert [p.specifier for p in build_constraints(same, "eval").pins if p.name == "vllm"] == ["==0.10.2"]
    bad = _copy(release, tmp_path / "bad", {identity.EVAL_REQUIREMENTS: base + "# x\nVLLM==0.11.0\n"})
    with pytest.raises(ReleaseFileError) as info:
        build_constraints(bad, "eval")
    line = len(base.splitlines()) + 2
    assert str(info.value).startswith(f"{identity.EVAL_REQUIREMENTS}: line {line}: vllm is pinned twice")
    assert "rlvr/requirements-cu128.txt:8" in str(info.value)


def test_markers_hashes_and_continuations_are_kept(release, tmp_path):
    extra = ('foo==1.0; python_version < "3.11" \\\n    --hash=sha256:' + "a" * 64 + "\n"
             'foo==2.0; python_version >= "3.11"\n')
    copy = _copy(release, tmp_path / "release", {identity.EVAL_REQUIREMENTS: extra})
    text = render_constraints(copy, build_constraints(copy, "eval"), command="x")
    assert f'foo==1.0; python_version < "3.11" --hash=sha256:{"a" * 64}  # {identity.EVAL_REQUIREMENTS}:1' in text
    assert 'foo==2.0; python_version >= "3.11"' in text


@pytest.mark.parametrize(("text", "found"), [
    ("-e git+https://example.org/x.git#egg=x\n", "-e"),
    ("not a requirement ===\n", "not a requirement"),
    ("pkg==1.0 --install-option=x\n", "--install-option=x"),
    ("pkg @ https://example.org/pkg.whl\n", "URL requirements"),
])
def test_bad_lines_are_one_error_naming_file_and_line(release, tmp_path, capsys, text, found):
    copy = _copy(release, tmp_path / "release", {identity.EVAL_REQUIREMENTS: "absl-py==2.5.0\n" + text})
    out = tmp_path / "paper.txt"
    code = main(["env", "constraints", "--trace-root", str(copy.path), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith(f"error: {identity.EVAL_REQUIREMENTS}: line 2:") and found in lines[0]


@pytest.mark.parametrize("profile", ["eval", "train"])
@pytest.mark.parametrize("text", ["", "# only a comment\n\n"])
def test_an_emptied_requirement_file_is_refused_not_written_as_an_empty_constraints_file(
        release, tmp_path, capsys, profile, text):
    rel = identity.EVAL_REQUIREMENTS if profile == "eval" else identity.REQUIREMENTS_CU128
    copy = _copy(release, tmp_path / "release", {rel: text})
    out = tmp_path / "paper.txt"
    code = main(["env", "constraints", "--profile", profile, "--trace-root", str(copy.path), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists() and "Traceback" not in err
    assert f"error: {rel}: requirement file holds no requirement" in err


def test_cli_writes_atomically_and_unwritable_out_is_one_line(release, tmp_path, capsys):
    out = tmp_path / "paper.txt"
    assert main(["env", "constraints", "--trace-root", str(release.path), "--out", str(out), "--pypi-only"]) == 0
    assert _pins(out.read_text())["vllm"]
    code = main(["env", "constraints", "--trace-root", str(release.path), "--out", str(tmp_path)])
    assert code == 2 and f"error: {tmp_path}: --out: is a directory" in capsys.readouterr().err


@pytest.mark.skipif(sys.version_info < (3, 11), reason="reads pyproject.toml with tomllib (Python >= 3.11)")
def test_eval_hf_test_extras_admit_the_paper_pins_and_train_says_it_does_not(release):
    """Every requirement of the base, 'eval', 'hf', 'math', 'test' and 'report' sets is satisfied by the paper's
    pin of that package; 'train' (verl) is the one extra that contradicts it, on transformers only."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    pins = {p.name: p.exact_version for p in build_constraints(release, "eval", pypi_only=True).pins}
    groups = {"base": project["dependencies"], **project["optional-dependencies"]}
    contradicted: dict[str, list[str]] = {}
    for group, reqs in groups.items():
        for text in reqs:
            req = Requirement(text)
            name = req.name.lower().replace("_", "-")
            if name in pins and not req.specifier.contains(pins[name], prereleases=True):
                contradicted.setdefault(group, []).append(f"{text} vs {pins[name]}")
    assert list(contradicted) == ["train"], contradicted
    assert [c.split(">")[0].split("=")[0] for c in contradicted["train"]] == ["transformers"], contradicted
