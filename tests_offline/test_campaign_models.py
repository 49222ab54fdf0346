"""Model descriptors: upstream's 5-tuple validation plus immutable revisions; release models and judge."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trace_lib.campaign.models import parse_descriptor, parse_descriptors, release_judge, release_models
from trace_lib.errors import UsageError

COMMIT = "66285546d2b821cf421d4f5eb2576359d3770cd3"
GOOD = ("my-model", "/models/x", COMMIT, f"Qwen/Qwen2.5-VL-3B-Instruct@{COMMIT}", "My model")

BAD = {
    "arity": (GOOD[:4], "--model[0]: needs five values"),
    "branch revision": (("m", "/p", "main", GOOD[3], "L"), "--model[0].IMMUTABLE_REVISION: not an immutable revision"),
    "short commit": (("m", "/p", COMMIT[:12], GOOD[3], "L"), "not an immutable revision"),
    "uppercase commit": (("m", "/p", COMMIT.upper(), GOOD[3], "L"), "not an immutable revision"),
    "sha256set source": (("m", "/p", "sha256set:" + "a" * 64, "sha256set:" + "a" * 64, "L"),
                         "--model[0].SOURCE: invalid source"),
    "source without revision": (("m", "/p", COMMIT, "Qwen/Qwen2.5-VL-3B-Instruct", "L"), "invalid source"),
    "source branch": (("m", "/p", COMMIT, "Qwen/Qwen2.5-VL-3B-Instruct@main", "L"), "invalid source"),
    "slug with slash": (("a/b", "/p", COMMIT, GOOD[3], "L"), "--model[0].SLUG: invalid slug"),
    "empty slug": (("", "/p", COMMIT, GOOD[3], "L"), "invalid slug"),
    "empty label": (("m", "/p", COMMIT, GOOD[3], "  "), "--model[0].LABEL: empty label"),
    # a $-anchored match passes a trailing newline: the slug would name a directory 'tiny\n'
    "slug with a newline": (("tiny\n", "/p", COMMIT, GOOD[3], "L"), "--model[0].SLUG: invalid slug"),
    "revision with a newline": (("m", "/p", COMMIT + "\n", GOOD[3], "L"), "not an immutable revision"),
    "source with a newline": (("m", "/p", COMMIT, GOOD[3] + "\n", "L"), "invalid source"),
}


def test_good_descriptor_keeps_every_field_verbatim():
    desc = parse_descriptor(GOOD)
    assert (desc.slug, desc.local_path, desc.revision, desc.source, desc.label) == GOOD
    assert desc.repository == "Qwen/Qwen2.5-VL-3B-Instruct" and desc.repository_revision == COMMIT


def test_sha256set_revision_registers_a_local_checkpoint():
    desc = parse_descriptor(("merged", "./out/merged", "sha256set:" + "0" * 64, GOOD[3], "Merged"))
    assert desc.revision.startswith("sha256set:")


@pytest.mark.parametrize("tokens,message", BAD.values(), ids=BAD.keys())
def test_bad_descriptor_is_one_line_error(tokens, message):
    with pytest.raises(UsageError) as info:
        parse_descriptor(tokens)
    rendered = info.value.render()
    assert message in rendered and "\n" not in rendered


def test_duplicate_slugs_are_refused():
    with pytest.raises(UsageError, match=r"--model\[1\]\.SLUG: duplicate slug"):
        parse_descriptors([GOOD, GOOD])


def test_release_models_come_from_results_json(release, tmp_path):
    models = release_models(release, tmp_path)
    doc = release.read_json("rlvr/evaluation/trace_eval/results.json")
    assert [m.slug for m in models] == [m["model_id"] for m in doc["models"]]
    for model, raw in zip(models, doc["models"]):
        assert model.source == f"{raw['repository_id']}@{raw['repository_revision']}"
        assert model.canonical_revision == raw["model_revision"]
        assert model.local_path == str(tmp_path / raw["model_id"])


def test_judge_is_the_one_every_run_recorded(release, tmp_path):
    judge = release_judge(release, tmp_path)
    recorded = {a["run_metadata"]["judge_model"]["model_revision"]
                for a in release.read_json("rlvr/evaluation/trace_eval/results.json")["source_artifacts"]}
    assert {judge.revision} == recorded and judge.source.endswith("@" + judge.revision)


def test_cli_rejects_mutable_revision_with_exit_2(release):
    proc = subprocess.run(
        [sys.executable, "-m", "trace_lib", "plan", "--trace-root", str(release.path), "--model", "m", "/p",
         "main", GOOD[3], "L"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0].startswith("error: --model[0].IMMUTABLE_REVISION: not an immutable revision")
