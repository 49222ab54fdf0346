"""Locating a release and reading its files strictly: every bad input is one line naming the file, never a
traceback and never a partial document."""

from __future__ import annotations

from pathlib import Path

import pytest
from preflight_support import copy_data_files

from trace_lib.errors import ReleaseFileError, ReleaseNotFoundError
from trace_lib.release import identity
from trace_lib.release.load import load_json, load_yaml, parse_json_text
from trace_lib.release.locate import locate_release


@pytest.fixture
def data_copy(release, tmp_path) -> Path:
    return copy_data_files(release, tmp_path / "copy")


def test_flag_beats_environment(data_copy, tmp_path):
    found = locate_release(str(data_copy), env={"TRACE_ROOT": str(tmp_path / "elsewhere")})
    assert found.path == data_copy.resolve() and found.source == "--trace-root"


def test_environment_is_used_without_flag(data_copy):
    found = locate_release(None, env={"TRACE_ROOT": str(data_copy)})
    assert found.path == data_copy.resolve() and found.source == "TRACE_ROOT"


def test_rlvr_directory_is_accepted_as_the_root(data_copy):
    assert locate_release(str(data_copy / "rlvr"), env={}).path == data_copy.resolve()


def test_discovery_from_inside_a_release(data_copy, monkeypatch):
    monkeypatch.chdir(data_copy / "rlvr" / "evaluation")
    found = locate_release(None, env={})
    assert found.path == data_copy.resolve() and found.source == "discovery"


def test_discovery_of_a_release_beside_the_working_directory(data_copy, monkeypatch):
    work = data_copy.parent / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert locate_release(None, env={}).path == data_copy.resolve()


def test_discovery_does_not_climb_beyond_the_parent(data_copy, monkeypatch):
    """A release beside a grandparent (say /tmp/other-checkout next to /tmp/a/b/work) is not this suite's."""
    work = data_copy.parent / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    assert locate_release(None, env={}).path != data_copy.resolve()


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_bad_root_says_how_to_point_at_a_release(tmp_path, make):
    target = tmp_path / "x"
    if make == "empty":
        target.mkdir()
    with pytest.raises(ReleaseNotFoundError) as info:
        locate_release(str(target), env={})
    text = info.value.render()
    assert text.startswith(f"--trace-root {target}: ")
    assert text.endswith("pass --trace-root DIR, set TRACE_ROOT, or run 'trace-repro fetch-release --dest DIR'")
    assert "\n" not in text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1, "a": 2}', "f.json: duplicate key 'a'"),
        ('{"a": [1, NaN]}', "f.json: non-finite number NaN at line 1 column 11 is not valid JSON"),
        ('{"s": "NaN", "b":\n Infinity}', "f.json: non-finite number Infinity at line 2 column 2 is not valid JSON"),
        ('{"a": [1, 2', "f.json: malformed JSON at line 1 column 12: Expecting ',' delimiter"),
        ("", "f.json: malformed JSON at line 1 column 1: Expecting value"),
    ],
    ids=["duplicate-key", "nan", "infinity-line-2", "truncated", "empty"],
)
def test_strict_json_errors_name_file_and_place(text, message):
    with pytest.raises(ReleaseFileError) as info:
        parse_json_text(text, name="f.json")
    assert info.value.render() == message


def test_json_file_errors(tmp_path):
    with pytest.raises(ReleaseFileError, match=r"^.*nope.json: file is missing$"):
        load_json(tmp_path / "nope.json")
    (tmp_path / "latin.json").write_bytes(b'{"a": "\xe9"}')
    with pytest.raises(ReleaseFileError, match=r"latin.json: not UTF-8 text at byte offset 7 \(bytes e9\)"):
        load_json(tmp_path / "latin.json")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: 1\nb:\n  c: 2\n  c: 3\n", "p.yaml: duplicate key 'c' at line 4"),
        ("a: [1,\n", "p.yaml: malformed YAML at line 2 column 1: did not find expected node content"),
    ],
    ids=["duplicate-key", "truncated"],
)
def test_strict_yaml_errors_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ReleaseFileError) as info:
        load_yaml(path, name="p.yaml")
    assert info.value.render() == message


def test_yaml_reader_matches_pyyaml_safe_load(release):
    import yaml

    for rel in (identity.PROFILE_3B, identity.PROFILE_7B):
        assert load_yaml(release.file(rel)) == yaml.safe_load(release.file(rel).read_text())


def test_reader_records_hashes_of_files_read(data_copy):
    found = locate_release(str(data_copy), env={})
    found.read_json(identity.SUITE)
    assert list(found.hashes_read) == [identity.SUITE]
    assert found.is_pinned_release()
