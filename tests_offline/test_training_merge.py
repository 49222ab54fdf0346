"""``train merge`` reads a finished run's checkpoint as an input like any other: a FIFO there is a problem named
before the merge (it used to block ``read_text`` for ever), a JSON file of another shape or a config without the
``model_type`` the merger's loader needs is one line, and what verl's merger raises on the checkpoint's files is
one line naming the actor directory, with nothing left beside the output."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from trace_lib.testing.cli_runner import run_cli
from trace_lib.training.merge import checkpoint_problems
from trace_lib.training.receipts import RUN_SCHEMA, write_receipt

pytestmark = pytest.mark.offline

CONFIG = "trace-qwen2.5-vl-3b"
HF_CONFIG = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl"}


def _run(tmp_path: Path) -> Path:
    """A complete one-rank smoke run of step 1 under ``tmp_path/run``; returns its checkpoint directory."""
    ckpt = tmp_path / "run" / "checkpoint"
    actor = ckpt / "global_step_1" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    (actor / "model_world_size_1_rank_0.pt").write_bytes(b"x")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 1, "world_size": 1}))
    (actor / "huggingface" / "config.json").write_text(json.dumps(HF_CONFIG))
    (ckpt / "latest_checkpointed_iteration.txt").write_text("1")
    write_receipt(tmp_path / "run" / "run_receipt.json", {"schema_version": RUN_SCHEMA, "config_id": CONFIG,
                  "status": "completed", "mode": "smoke", "expected_step": 1, "world_size": 1})
    return ckpt


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", ["latest_checkpointed_iteration.txt", "global_step_1/actor/fsdp_config.json",
                                  "global_step_1/actor/huggingface/config.json"])
def test_a_fifo_in_the_checkpoint_is_named_not_opened(tmp_path, name):
    ckpt = _run(tmp_path)
    (ckpt / name).unlink()
    os.mkfifo(ckpt / name)
    assert checkpoint_problems(ckpt, 1, 1) == [
        f"{ckpt / name}: is a FIFO, not a regular file; trace-repro reads inputs from regular files"]
    done = run_cli(["train", "merge", "--config", CONFIG, "--checkpoint-dir", str(ckpt),
                    "--output-dir", str(tmp_path / "merged")])
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "is a FIFO" in done.stderr, done.stderr
    assert not (tmp_path / "merged").exists()


@pytest.mark.parametrize("name, data, problem", [
    ("global_step_1/actor/huggingface/config.json", json.dumps({"architectures": ["X"]}), "no model_type"),
    ("global_step_1/actor/fsdp_config.json", "[1]", "not a JSON object"),
    ("global_step_1/actor/fsdp_config.json", '{"world_size": 1, "world_size": 1}', "duplicate key 'world_size'"),
    ("global_step_1/actor/huggingface/config.json", b"\xff{}", "not UTF-8 text at byte offset 0"),
    ("latest_checkpointed_iteration.txt", "\u00b9", "names no step"),
])
def test_checkpoint_files_of_the_wrong_shape_are_named(tmp_path, name, data, problem):
    ckpt = _run(tmp_path)
    if isinstance(data, bytes):
        (ckpt / name).write_bytes(data)
    else:
        (ckpt / name).write_text(data, encoding="utf-8")
    (found,) = checkpoint_problems(ckpt, 1, 1)
    assert found.startswith(f"{ckpt / name}: ") and problem in found, found


def test_what_the_merger_raises_on_the_checkpoint_is_one_line(tmp_path, monkeypatch):
    """verl's merger unpickles the shards (``torch.load``): a shard it cannot read was its traceback, exit 1."""
    ckpt = _run(tmp_path)

    def merge_shards(actor, target):
        (Path(target) / "model.safetensors").write_bytes(b"half")
        raise pickle.UnpicklingError("invalid load key, 'x'.")

    monkeypatch.setattr("trace_lib.training.merge.merge_shards", merge_shards)
    done = run_cli(["train", "merge", "--config", CONFIG, "--checkpoint-dir", str(ckpt),
                    "--output-dir", str(tmp_path / "merged")])
    actor = ckpt.resolve() / "global_step_1" / "actor"
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"error: {actor}: verl's merger cannot merge this checkpoint (UnpicklingError: invalid "
                           "load key, 'x'.); check the run's shards and huggingface/ config\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no output, no staging directory
