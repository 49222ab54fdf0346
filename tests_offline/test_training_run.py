"""Training workflow without GPUs: profile loading, verl mapping, data conversion, receipts, merge preconditions, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from trace_lib.errors import InputError, ReleaseFileError, UsageError
from trace_lib.training import verl_config
from trace_lib.training.data import RowFormat, convert_file, load_system_prompt
from trace_lib.training.merge import checkpoint_problems, validate_run
from trace_lib.training.prepare import (
    DatasetExpectations,
    dataset_expectations,
    empty_directory,
    verify_dataset,
)
from trace_lib.training.profiles import load_profile, profile_ids
from trace_lib.training.receipts import RUN_SCHEMA, write_receipt
from trace_lib.training.timeline import phase_times, stamp
from trace_lib.training.tiny_dataset import build_tiny_trace_dataset
from trace_lib.training.verl_config import FIELD_MAP, Launch, build_overrides

pytest.importorskip("PIL", reason="pillow builds the tiny dataset's PNGs")


@pytest.fixture(scope="module", params=["trace-qwen2.5-vl-3b", "trace-qwen2.5-vl-7b"])
def profile(request, release):  # noqa: ANN001, ANN201
    return load_profile(release, request.param)


def _launch(profile, **kw) -> Launch:  # noqa: ANN001
    base = dict(train_files=("/d/t.parquet",), val_file="/d/v.parquet", model_path="/m", checkpoint_dir="/o/checkpoint",
                experiment_name=profile.config_id, max_steps=500, save_freq=100, test_freq=100, gpus=profile.gpu_count,
                tensor_parallel=profile.easyr1_value("worker.rollout.tensor_parallel_size"))
    base.update(kw)
    return Launch(**base)


def test_profile_ids_come_from_the_release_files(release) -> None:  # noqa: ANN001
    assert profile_ids(release) == ("trace-qwen2.5-vl-3b", "trace-qwen2.5-vl-7b")


def test_unknown_profile_lists_the_valid_ids(release) -> None:  # noqa: ANN001
    with pytest.raises(UsageError, match="choose one of: trace-qwen2.5-vl-3b, trace-qwen2.5-vl-7b"):
        load_profile(release, "trace-qwen2.5-vl-13b")


def test_every_profile_field_is_mapped(profile) -> None:  # noqa: ANN001
    keys = {dotted for dotted, _ in verl_config._leaves(profile.easyr1)}
    assert keys <= set(FIELD_MAP), sorted(keys - set(FIELD_MAP))
    assert {row["status"] for row in verl_config.mapping_report(profile)} <= {"exact", "equiv", "gap", "inert", "runtime"}


def test_canonical_overrides_carry_the_profile(profile) -> None:  # noqa: ANN001
    o = build_overrides(profile, _launch(profile)).overrides
    arr = "actor_rollout_ref"
    assert o["data.train_batch_size"] == profile.easyr1_value("data.rollout_batch_size")
    assert o[f"{arr}.actor.ppo_max_token_len_per_gpu"] == 4096 and o[f"{arr}.rollout.log_prob_max_token_len_per_gpu"] == 8192
    assert o[f"{arr}.rollout.max_model_len"] == 4096
    assert o[f"{arr}.actor.loss_agg_mode"] == "token-mean" and o[f"{arr}.actor.clip_ratio_c"] == 3.0
    assert o[f"{arr}.rollout.full_determinism"] is False and o["trainer.resume_mode"] == "disable"
    assert o["trainer.val_before_train"] is False and o["trainer.use_v1"] is False
    assert o[f"{arr}.rollout.val_kwargs.do_sample"] is True
    assert o["reward.custom_reward_function.path"] == "pkg://trace_lib.training.reward"
    assert o["data.trace_min_pixels"] == profile.easyr1_value("data.min_pixels")


def test_hydra_args_quote_strings_and_add_new_keys(profile) -> None:  # noqa: ANN001
    args = build_overrides(profile, _launch(profile, attention="sdpa")).hydra_args()
    assert "data.custom_cls.path='pkg://trace_lib.training.verl_dataset'" in args
    assert "+data.trace_min_pixels=262144" in args
    assert "+actor_rollout_ref.model.override_config.attn_implementation='sdpa'" in args
    assert "actor_rollout_ref.model.use_remove_padding=false" in args


def test_unsupported_profile_value_is_an_error(profile) -> None:  # noqa: ANN001
    from types import MappingProxyType

    easyr1 = dict(profile.easyr1)
    easyr1["trainer"] = MappingProxyType({**profile.easyr1["trainer"], "find_last_checkpoint": True})
    changed = type(profile)(**{**vars(profile), "easyr1": MappingProxyType(easyr1)})
    with pytest.raises(ReleaseFileError, match="easyr1.trainer.find_last_checkpoint: value not supported"):
        build_overrides(changed, _launch(profile))


def test_tensor_parallel_must_divide_gpus(profile) -> None:  # noqa: ANN001
    with pytest.raises(UsageError, match="tensor-parallel"):
        build_overrides(profile, _launch(profile, gpus=3, tensor_parallel=2))


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory, release):  # noqa: ANN001, ANN201
    profile = load_profile(release, "trace-qwen2.5-vl-3b")
    expect = dataset_expectations(release, profile)
    root = tmp_path_factory.mktemp("tiny")
    build_tiny_trace_dataset(root, expect.columns, profile.dataset.train_files[0], profile.dataset.validation_file)
    return profile, root


def test_conversion_keeps_prompt_answer_and_image_bytes(tiny_data, release, tmp_path) -> None:  # noqa: ANN001
    import pyarrow.parquet as pq

    profile, root = tiny_data
    fmt = RowFormat.from_profile(profile, load_system_prompt(release, profile))
    source = root / profile.dataset.train_files[0]
    done = convert_file(source, tmp_path / "t.parquet", fmt, split="train", first_index=100)
    src, out = pq.read_table(source).to_pylist(), pq.read_table(done.path).to_pylist()
    assert done.rows == len(src) == len(out)
    assert [r["prompt"][1]["content"] for r in out] == [r["prompt_answer"] for r in src]
    assert [r["reward_model"]["ground_truth"] for r in out] == [r["answer_gt"] for r in src]
    assert [r["images"] for r in out] == [r["images"] for r in src]
    assert {r["prompt"][0]["content"] for r in out} == {fmt.system_prompt}
    assert [r["extra_info"]["index"] for r in out] == list(range(100, 100 + len(src)))
    assert pq.read_schema(done.path).metadata is None  # no HF feature metadata: verl gets image dicts


def test_system_prompt_is_stripped_and_hash_checked(release) -> None:  # noqa: ANN001
    profile = load_profile(release, "trace-qwen2.5-vl-3b")
    text = load_system_prompt(release, profile)
    assert text.endswith('{"answer": ...}') and text == text.strip()
    bad = type(profile)(**{**vars(profile), "prompt_sha256": "0" * 64})
    with pytest.raises(InputError, match="system prompt hash differs"):
        load_system_prompt(release, bad)


def test_conversion_rejects_marker_mismatch(tiny_data, release, tmp_path) -> None:  # noqa: ANN001
    import pyarrow as pa
    import pyarrow.parquet as pq

    profile, root = tiny_data
    table = pq.read_table(root / profile.dataset.train_files[0])
    prompts = table.column("prompt_answer").to_pylist()
    prompts[2] = prompts[2].replace("<image>", "", 1)
    broken = table.set_column(table.schema.get_field_index("prompt_answer"), "prompt_answer", pa.array(prompts))
    pq.write_table(broken, tmp_path / "bad.parquet")
    fmt = RowFormat.from_profile(profile, "sys")
    with pytest.raises(InputError, match="row 2: <image> markers differ"):
        convert_file(tmp_path / "bad.parquet", tmp_path / "out" / "bad.parquet", fmt, split="train")
    assert not list((tmp_path / "out").glob("*"))  # nothing half-written


def _tiny_expectations(profile, root: Path) -> DatasetExpectations:  # noqa: ANN001
    import pyarrow.parquet as pq

    from trace_lib.release.load import sha256_file

    train, val = profile.dataset.train_files[0], profile.dataset.validation_file
    tasks = Counter(pq.read_table(root / train, columns=["task"]).column(0).to_pylist())
    for rel in profile.dataset.manifests:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text('{"rows": 1}')
    return DatasetExpectations(
        columns=tuple(pq.read_schema(root / train).names), train_files=(train,), validation_file=val,
        manifests=profile.dataset.manifests, train_rows=8, validation_rows=4, task_count=len(tasks),
        train_rows_per_task=4, validation_rows_per_task=2,
        sha256={train: sha256_file(root / train), val: sha256_file(root / val)},
    )


def test_verify_dataset_records_and_refuses_a_changed_file(tiny_data) -> None:  # noqa: ANN001
    profile, root = tiny_data
    expect = _tiny_expectations(profile, root)
    records = verify_dataset(root, expect)
    assert [r["path"] for r in records] == sorted([*expect.train_files, expect.validation_file, *expect.manifests])
    wrong = DatasetExpectations(**{**vars(expect), "sha256": {**expect.sha256, expect.validation_file: "0" * 64}})
    with pytest.raises(InputError, match="SHA-256 differs from the dataset-equivalence receipt"):
        verify_dataset(root, wrong)
    rows = DatasetExpectations(**{**vars(expect), "train_rows": 64000})
    with pytest.raises(InputError, match="train row count differs"):
        verify_dataset(root, rows)


def test_empty_directory_rules(tmp_path) -> None:  # noqa: ANN001
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(InputError, match="must be an empty directory"):
        empty_directory(tmp_path / "full", "--output-dir")
    (tmp_path / "link").symlink_to(tmp_path / "full")
    with pytest.raises(InputError, match="must not be a symlink"):
        empty_directory(tmp_path / "link", "--output-dir")
    assert empty_directory(tmp_path / "new" / "dir", "--output-dir").is_dir()


def _fake_run(tmp_path: Path, *, step: int = 1, world: int = 2, status: str = "completed", mode: str = "smoke",
              config_id: str = "trace-qwen2.5-vl-3b") -> Path:
    ckpt = tmp_path / "run" / "checkpoint"
    actor = ckpt / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    for r in range(world):
        (actor / f"model_world_size_{world}_rank_{r}.pt").write_bytes(b"x")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 1, "world_size": world}))
    config = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl"}
    (actor / "huggingface" / "config.json").write_text(json.dumps(config))
    (ckpt / "latest_checkpointed_iteration.txt").write_text(str(step))
    write_receipt(tmp_path / "run" / "run_receipt.json", {"schema_version": RUN_SCHEMA, "config_id": config_id,
                  "status": status, "mode": mode, "expected_step": step, "world_size": world})
    return ckpt


def test_merge_preconditions_accept_a_complete_smoke_run(tmp_path, release) -> None:  # noqa: ANN001
    profile = load_profile(release, "trace-qwen2.5-vl-3b")
    receipt, step, world = validate_run(profile, _fake_run(tmp_path))
    assert (step, world, receipt["status"]) == (1, 2, "completed")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"status": "failed"}, "missing, incomplete, or for another config"),
        ({"config_id": "trace-qwen2.5-vl-7b"}, "missing, incomplete, or for another config"),
        ({"mode": "canonical"}, "invalid selected step"),
    ],
    ids=["not-completed", "other-config", "step1-not-smoke"],
)
def test_merge_preconditions_refuse(tmp_path, release, change, message) -> None:  # noqa: ANN001
    profile = load_profile(release, "trace-qwen2.5-vl-3b")
    with pytest.raises(InputError, match=message):
        validate_run(profile, _fake_run(tmp_path, **change))


def test_checkpoint_problems_name_each_defect(tmp_path) -> None:  # noqa: ANN001
    ckpt = _fake_run(tmp_path, world=2)
    actor = ckpt / "global_step_1" / "actor"
    (actor / "model_world_size_2_rank_1.pt").unlink()
    (ckpt / "latest_checkpointed_iteration.txt").write_text("2")
    problems = checkpoint_problems(ckpt, 1, 2)
    assert any("names step 2" in p for p in problems) and any("model shards" in p for p in problems)


def test_timeline_splits_phases(tmp_path) -> None:  # noqa: ANN001
    log = tmp_path / "trainer.log"
    lines = [(0, "launch"), (4, "ray init kwargs: {}"), (9, "TaskRunner hostname: x"), (60, "Training Progress: 0%"),
             (75, "local_global_step_folder: /o"), (80, "step:1 - a:1"), (82, "exit: 0")]
    log.write_text("".join(stamp(t, text + "\n") for t, text in lines))
    assert phase_times(log) == {"import": 4.0, "ray_start": 5.0, "engine_start": 51.0, "step": 15.0,
                                "save_and_validate": 5.0, "shutdown": 2.0}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trace_lib", "train", *args], capture_output=True, text=True, timeout=120)


def test_cli_check_prints_upstreams_line(release) -> None:  # noqa: ANN001
    proc = _cli("check", "--config", "trace-qwen2.5-vl-7b", "--trace-root", str(release.path))
    assert proc.returncode == 0, proc.stderr
    line = json.loads(proc.stdout)
    assert line["config_id"] == "trace-qwen2.5-vl-7b" and line["status"] == "ok"
    assert line["config_sha256"] == release.sha256("rlvr/configs/trace-qwen2.5-vl-7b.yaml")


def test_cli_unknown_config_is_one_line_exit_2(release) -> None:  # noqa: ANN001
    proc = _cli("check", "--config", "nope", "--trace-root", str(release.path))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: --config: unknown training profile 'nope'")


def test_cli_canonical_run_refuses_smoke_only_flags(release, tmp_path) -> None:  # noqa: ANN001
    proc = _cli("run", "--config", "trace-qwen2.5-vl-3b", "--trace-root", str(release.path), "--input-dir",
                str(tmp_path / "in"), "--output-dir", str(tmp_path / "out"), "--wandb-entity", "me")
    assert proc.returncode == 2 and "--wandb-entity requires --wandb" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_cli_print_config_needs_no_verl(release) -> None:  # noqa: ANN001
    proc = _cli("print-config", "--config", "trace-qwen2.5-vl-3b", "--trace-root", str(release.path), "--mode", "smoke",
                "--gpus", "1", "--scale", "tiny")
    assert proc.returncode == 0, proc.stderr
    assert "tensor_model_parallel_size: 1" in proc.stdout and "experiment_name: trace-qwen2.5-vl-3b-smoke" in proc.stdout


def test_cli_train_imports_no_heavy_module(release) -> None:  # noqa: ANN001
    code = ("import sys; from trace_lib.cli.main import main; main(['train','check','--config','trace-qwen2.5-vl-3b',"
            f"'--trace-root',{str(release.path)!r}]); "
            "print(sorted(m for m in ('torch','ray','vllm','transformers','verl') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stderr


def test_outputs_inside_the_inputs_they_read_are_refused(tmp_path, release) -> None:  # noqa: ANN001
    """merge's --output-dir inside the checkpoint it merges, and a run's inside its --input-dir: one line naming
    --output-dir, before anything is read or created."""
    from trace_lib.testing.cli_runner import run_cli
    from trace_lib.training.merge import run_merge

    ckpt = _fake_run(tmp_path)
    with pytest.raises(UsageError) as refused:
        run_merge(load_profile(release, "trace-qwen2.5-vl-3b"), ckpt, ckpt / "merged")
    assert refused.value.render() == (f"{ckpt / 'merged'}: --output-dir: lies inside the checkpoint directory this "
                                      f"command reads ({ckpt}); outputs are never written into an input; name a "
                                      "directory outside it")
    assert not (ckpt / "merged").exists()
    (tmp_path / "in").mkdir()
    done = run_cli(["train", "run", "--config", "trace-qwen2.5-vl-3b", "--trace-root", str(release.path),
                    "--input-dir", str(tmp_path / "in"), "--output-dir", str(tmp_path / "in" / "out")])
    assert done.returncode == 2 and done.stderr.startswith(
        f"error: {tmp_path / 'in' / 'out'}: --output-dir: lies inside the prepared input directory"), done.stderr
    assert not (tmp_path / "in" / "out").exists()
