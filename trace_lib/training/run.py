"""``train run`` / ``train smoke``: verify inputs, convert data, write the verl config and run receipt, launch verl.

``run_training(release, profile, request) -> int`` follows upstream's ``run_training``: inputs
re-hashed against the input receipt; exactly the profile's GPU count; an empty output directory; the
resolved verl configuration (``resolved_verl.yaml``, composed with verl's own Hydra config and checked by
verl's validators) and ``run_receipt.json`` (``status: launching``) written before launch; then
``python -m verl.trainer.main_ppo <overrides>``; the receipt ends ``completed`` (and the expected
checkpoint is verified) or ``failed`` with the trainer's exit code, which is returned.

Smoke differs only where the profile allows (one step, save every step, one validation pass after it, as
EasyR1's smoke did) plus reductions allowed for smoke alone and recorded in the receipt as non-canonical:
fewer GPUs (``--gpus``; tensor parallel then shrinks to divide them), the ``tiny`` scale, a local base model
(``--base-model-dir``) or dataset (``--dataset-dir``), and SDPA attention without padding-free packing when
flash-attn is not installed. Canonical runs accept none of these.
"""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_lib.atomic import write_text_atomic
from trace_lib.errors import InputError, UsageError
from trace_lib.outputs import check_outside_inputs
from trace_lib.release.load import sha256_file
from trace_lib.release.locate import ReleaseRoot
from trace_lib.training.data import RowFormat, convert_splits, load_system_prompt
from trace_lib.training.hardware import gpu_inventory
from trace_lib.training.prepare import BASE_MODEL_DIR, DATASET_DIR, empty_directory, verify_input_receipt
from trace_lib.training.profiles import TrainingProfile
from trace_lib.training.receipts import INPUT_RECEIPT, RUN_RECEIPT, RUN_SCHEMA, write_receipt
from trace_lib.training.timeline import stamp
from trace_lib.training.verl_config import GAPS, Launch, VerlConfig, build_overrides

VERL_VERSION = "0.9.1"
RESOLVED_CONFIG = "resolved_verl.yaml"
TRAINER_LOG = "trainer.log"
METRICS_LOG = "metrics.jsonl"
CHECKPOINT_DIR = "checkpoint"
DATA_DIR = "verl_data"
GENERATIONS_DIR = "generations"  # smoke: <step>.jsonl of every rollout / validation sample with its reward
REFERENCE_GPU_NAME = "H100"  # upstream's informational reference_hardware_match test


@dataclass(frozen=True)
class Scale:
    """Batch / length / engine reductions of a smoke run (``profile`` = none)."""

    name: str
    rollout_batch_size: int | None = None
    max_response_length: int | None = None
    gpu_memory_utilization: float | None = None
    enforce_eager: bool | None = None
    use_torch_compile: bool | None = None


SCALES: dict[str, Scale] = {
    "profile": Scale("profile"),
    # a tiny model: 4 prompts x n rollouts of <= 256 tokens, no CUDA graphs / torch.compile (start-up time)
    "tiny": Scale("tiny", rollout_batch_size=4, max_response_length=256, gpu_memory_utilization=0.4,
                  enforce_eager=True, use_torch_compile=False),
}


@dataclass(frozen=True)
class TrainingRequest:
    """What the user asked for (CLI flags); ``smoke``-only fields must stay at their defaults for ``canonical``."""

    mode: str  # "canonical" | "smoke"
    output_dir: Path
    input_dir: Path | None = None
    cache_dir: Path | None = None
    cuda_visible_devices: str | None = None
    wandb: bool = False
    wandb_project: str | None = None
    wandb_entity: str | None = None
    gpus: int | None = None
    scale: str = "profile"
    base_model_dir: Path | None = None
    dataset_dir: Path | None = None
    nnodes: int = 1  # multi-node: the GPUs are spread over this many nodes of the Ray cluster at ray_address
    ray_address: str | None = None


@dataclass
class Inputs:
    """Where the model and the TRACE Parquet files come from, and what deviates from the canonical inputs."""

    model_dir: Path
    train_sources: list[Path]
    validation_source: Path
    input_receipt_sha256: str | None
    deviations: list[str] = field(default_factory=list)


def _check_request(request: TrainingRequest) -> None:
    if request.mode not in ("canonical", "smoke"):
        raise UsageError("unknown training mode", expected="canonical or smoke", found=request.mode)
    if request.wandb_entity and not request.wandb:
        raise UsageError("--wandb-entity requires --wandb")
    if request.nnodes > 1 and not request.ray_address:
        raise UsageError("--nnodes above 1 needs the Ray cluster's address", field="--ray-address",
                         hint="start Ray on every node ('ray start'), then pass --ray-address HEAD:6379 or auto")
    if request.scale not in SCALES:
        raise UsageError("unknown scale", field="--scale", expected=sorted(SCALES), found=request.scale)
    inputs = {"prepared input directory": request.input_dir, "base model directory": request.base_model_dir,
              "dataset directory": request.dataset_dir}
    check_outside_inputs(request.output_dir, [(what, p) for what, p in inputs.items() if p is not None],
                         flag="--output-dir")
    if request.mode == "canonical":
        extras = {"--gpus": request.gpus, "--base-model-dir": request.base_model_dir, "--dataset-dir": request.dataset_dir}
        used = [flag for flag, value in extras.items() if value is not None] + (
            ["--scale"] if request.scale != "profile" else []
        )
        if used:
            raise UsageError(f"{', '.join(used)} is allowed only for 'train smoke'")


def _smoke_dataset(profile: TrainingProfile, dataset_dir: Path) -> tuple[list[Path], Path]:
    """Train shards (sorted) and the one validation file of a local dataset laid out like ``<input>/dataset``."""
    train_dir = dataset_dir / Path(profile.dataset.train_files[0]).parent
    val_dir = dataset_dir / Path(profile.dataset.validation_file).parent
    train = sorted(train_dir.glob("*.parquet"))
    val = sorted(val_dir.glob("*.parquet"))
    if not train:
        raise InputError("no train Parquet files", file=str(train_dir))
    if len(val) != 1:
        raise InputError("expected exactly one validation Parquet file", file=str(val_dir), found=len(val))
    return train, val[0]


def resolve_inputs(release: ReleaseRoot, profile: TrainingProfile, request: TrainingRequest) -> Inputs:
    """The verified inputs of a launch (canonical: the prepared input directory, every file re-hashed)."""
    receipt_sha = None
    overrides = request.base_model_dir is not None or request.dataset_dir is not None
    if request.input_dir is None and not (request.base_model_dir and request.dataset_dir):
        raise UsageError("--input-dir is required", hint="run 'trace-repro train prepare' first" if not overrides
                         else "a smoke run without --input-dir needs both --base-model-dir and --dataset-dir")
    if request.input_dir is not None:
        input_dir = request.input_dir.resolve()
        verify_input_receipt(release, profile, input_dir)
        receipt_sha = sha256_file(input_dir / INPUT_RECEIPT)
    deviations = []
    if request.base_model_dir is not None:
        model_dir = request.base_model_dir.resolve()
        if not (model_dir / "config.json").is_file():
            raise InputError("not a model directory (no config.json)", field="--base-model-dir", found=str(model_dir))
        deviations.append(f"base model: local directory {model_dir} (profile: {profile.base_model.repo_id})")
    else:
        model_dir = input_dir / BASE_MODEL_DIR
    if request.dataset_dir is not None:
        train, val = _smoke_dataset(profile, request.dataset_dir.resolve())
        deviations.append(f"dataset: local directory {request.dataset_dir.resolve()} (profile: {profile.dataset.repo_id})")
    else:
        root = input_dir / DATASET_DIR
        train = [root / rel for rel in profile.dataset.train_files]
        val = root / profile.dataset.validation_file
    return Inputs(model_dir, train, val, receipt_sha, deviations)


def _launch(profile: TrainingProfile, request: TrainingRequest, gpus: int, inputs: Inputs, output: Path,
            converted: tuple[list, Any], attention: str) -> tuple[Launch, list[str]]:
    scale = SCALES[request.scale]
    profile_tp = profile.easyr1_value("worker.rollout.tensor_parallel_size")
    tp = profile_tp if gpus % profile_tp == 0 else math.gcd(profile_tp, gpus)
    smoke = request.mode == "smoke"
    launch = Launch(
        train_files=tuple(c.path for c in converted[0]),
        val_file=converted[1].path,
        model_path=str(inputs.model_dir),
        checkpoint_dir=str(output / CHECKPOINT_DIR),
        experiment_name=f"{profile.config_id}-smoke" if smoke else profile.easyr1_value("trainer.experiment_name"),
        max_steps=1 if smoke else profile.easyr1_value("trainer.max_steps"),
        save_freq=1 if smoke else profile.easyr1_value("trainer.save_freq"),
        test_freq=1 if smoke else profile.easyr1_value("trainer.val_freq"),
        gpus=gpus,
        tensor_parallel=tp,
        logger=("console", "file", "wandb") if request.wandb else ("console", "file"),
        project_name=request.wandb_project,
        rollout_batch_size=scale.rollout_batch_size,
        max_response_length=scale.max_response_length,
        gpu_memory_utilization=scale.gpu_memory_utilization,
        enforce_eager=scale.enforce_eager,
        use_torch_compile=scale.use_torch_compile,
        attention=attention,
        generations_dir=str(output / GENERATIONS_DIR) if smoke else None,
        nnodes=request.nnodes,
        ray_address=request.ray_address,
    )
    deviations = list(inputs.deviations)
    if gpus != profile.gpu_count:
        deviations.append(f"GPUs: {gpus} (profile: {profile.gpu_count})")
    if tp != profile_tp:
        deviations.append(f"rollout tensor parallel: {tp} (profile: {profile_tp})")
    if scale.name != "profile":
        deviations.append(f"scale {scale.name}: {scale}")
    if attention != "flash_attention_2":
        deviations.append(f"attention: {attention} without padding-free packing (flash-attn not installed)")
    return launch, deviations


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    from trace_lib import __version__

    out: dict[str, str | None] = {"trace-repro": __version__}
    for name in ("verl", "torch", "transformers", "vllm", "ray", "flash-attn"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def _require_verl() -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("verl")
    except PackageNotFoundError:
        raise InputError("training needs verl", expected=VERL_VERSION, found=None,
                         hint="pip install 'trace-repro[train]'") from None
    if found != VERL_VERSION:
        raise InputError("the profile mapping is verified for one verl release only", field="verl",
                         expected=VERL_VERSION, found=found)


def write_resolved_config(config: VerlConfig, model_check: bool, path: Path) -> str:
    """Compose verl's config from ``config``, run verl's validators (and build the worker dataclasses when
    ``model_check``), write it to ``path``; return its SHA-256."""
    from omegaconf import OmegaConf

    from trace_lib.training.verl_config import build_worker_configs, compose, validate

    composed = compose(config)
    validate(composed)
    if model_check:
        build_worker_configs(composed)
    return write_text_atomic(path, OmegaConf.to_yaml(composed))


def trainer_env(output: Path, request: TrainingRequest, devices: str | None) -> dict[str, str]:
    """The trainer's environment: trace_lib importable in every Ray worker, metrics file, offline hub, W&B mode."""
    import trace_lib

    env = dict(os.environ)
    root = str(Path(trace_lib.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([root, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    env.update({"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "true", "HF_HUB_OFFLINE": "1",
                "VERL_FILE_LOGGER_PATH": str(output / METRICS_LOG), "WANDB_MODE": "online" if request.wandb else "disabled"})
    for key in ("WANDB_NAME", "WANDB_RESUME", "WANDB_RUN_ID", "USE_MODELSCOPE_HUB"):
        env.pop(key, None)
    env.pop("WANDB_ENTITY", None)
    if request.wandb_entity:
        env["WANDB_ENTITY"] = request.wandb_entity
    if request.cache_dir is not None:
        env["HF_HOME"] = str(request.cache_dir.resolve())
    if devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = devices
    return env


def _stream(cmd: list[str], env: dict[str, str], cwd: Path, log_path: Path) -> int:
    """Run ``cmd``; echo its output and write it, stamped with elapsed seconds, to ``log_path``."""
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(stamp(0.0, "launch: " + " ".join(cmd[:3]) + "\n"))
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", bufsize=1)
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(stamp(time.monotonic() - start, line))
        code = proc.wait()
        log.write(stamp(time.monotonic() - start, f"exit: {code}\n"))
    return code


def run_training(release: ReleaseRoot, profile: TrainingProfile, request: TrainingRequest) -> int:
    """Launch verl for ``profile`` (canonical 500-step run or one-step smoke); return the trainer's exit code.

    Raises:
        UsageError / InputError: a precondition fails (nothing launched; the output directory holds at most the
            converted data and receipts written before the failure).
    """
    _check_request(request)
    smoke = request.mode == "smoke"
    inputs = resolve_inputs(release, profile, request)
    inventory = gpu_inventory(request.cuda_visible_devices)
    gpus = request.gpus if request.gpus is not None else profile.gpu_count
    if smoke:
        if not 1 <= gpus <= inventory.visible:
            raise InputError("not enough visible GPUs for the smoke run", field="--gpus", expected=f"1..{inventory.visible}",
                             found=gpus)
    elif request.nnodes == 1 and inventory.visible != profile.gpu_count:
        raise InputError(f"canonical training requires exactly {profile.gpu_count} distinct visible CUDA devices",
                         expected=profile.gpu_count, found=inventory.visible)
    output = empty_directory(request.output_dir, "--output-dir")
    _require_verl()
    has_flash = importlib.util.find_spec("flash_attn") is not None
    if not has_flash and not smoke:
        raise InputError("canonical training needs flash-attn (padding-free attention, as upstream)",
                         hint="pip install flash-attn==2.8.3")
    attention = "flash_attention_2" if has_flash else "sdpa"
    fmt = RowFormat.from_profile(profile, load_system_prompt(release, profile))
    converted = convert_splits(inputs.train_sources, inputs.validation_source, output / DATA_DIR, fmt)
    launch, deviations = _launch(profile, request, gpus, inputs, output, converted, attention)
    config = build_overrides(profile, launch)
    resolved_sha = write_resolved_config(config, True, output / RESOLVED_CONFIG)
    expected_step = launch.max_steps
    if not smoke and expected_step != profile.selected_checkpoint_step:
        raise InputError("the profile's max_steps is not its selected checkpoint step", file=profile.path,
                         expected=profile.selected_checkpoint_step, found=expected_step)
    receipt: dict[str, Any] = {
        "schema_version": RUN_SCHEMA,
        "config_id": profile.config_id,
        "config_sha256": profile.sha256,
        "input_receipt_sha256": inputs.input_receipt_sha256,
        "mode": request.mode,
        "canonical": not deviations,
        "deviations": deviations,
        "expected_step": expected_step,
        "world_size": launch.gpus,
        "tensor_parallel": launch.tensor_parallel,
        "resolved_config": RESOLVED_CONFIG,
        "resolved_config_sha256": resolved_sha,
        "verl_overrides": config.hydra_args(),
        "gaps": [f"{g.number}. {g.title}: {g.handling}" for g in GAPS],
        "converted_data": [vars(c) for c in (*converted[0], converted[1])],
        "hardware": list(inventory.rows),
        "reference_hardware_match": inventory.names_contain(REFERENCE_GPU_NAME, profile.gpu_count),
        "versions": _versions(),
        "wandb_enabled": request.wandb,
        "status": "launching",
    }
    write_receipt(output / RUN_RECEIPT, receipt)
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *config.hydra_args(), f"hydra.run.dir={output / 'hydra'}"]
    started = time.monotonic()
    code = _stream(cmd, trainer_env(output, request, inventory.devices), output, output / TRAINER_LOG)
    receipt["wall_s"] = round(time.monotonic() - started, 3)
    if code == 0:
        from trace_lib.training.merge import checkpoint_problems

        problems = checkpoint_problems(output / CHECKPOINT_DIR, expected_step, launch.gpus)
        if problems:
            receipt.update(status="failed", exit_code=1, problems=problems)
            write_receipt(output / RUN_RECEIPT, receipt)
            print(f"error: trainer exited 0 but the checkpoint is incomplete: {'; '.join(problems)}", file=sys.stderr)
            return 1
        receipt["status"] = "completed"
    else:
        receipt.update(status="failed", exit_code=code)
    write_receipt(output / RUN_RECEIPT, receipt)
    return code
