"""``trace-repro train check|prepare|smoke|run|merge|print-config --config ID``: the RLVR training workflow on verl.

Each subcommand first runs the release gate (:mod:`trace_lib.training.gate`) and loads the profile named by
``--config`` (an id of a ``rlvr/configs/*.yaml`` file of the release). Errors print one ``error:`` line and exit
2; ``run``/``smoke`` exit with the trainer's own exit code when the trainer fails.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trace_lib import options
from trace_lib.errors import UsageError
from trace_lib.exitcodes import ExitCode

_SUBCOMMANDS = {
    "check": "run the release gate for the profile and print its identity line (offline; writes nothing)",
    "prepare": "download the pinned dataset revision and base model, verify them, write input_receipt.json",
    "smoke": "one training step + checkpoint + one validation pass (reductions allowed, recorded as non-canonical)",
    "run": "the canonical run of the profile (exactly its GPU count, its full schedule)",
    "merge": "validate a finished run and merge its selected checkpoint into a Hugging Face model",
    "print-config": "print the verl configuration a run/smoke would use and how each profile field maps (no launch)",
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("train", help="RLVR training on verl: check, prepare, smoke, run, merge")
    parser.set_defaults(run=lambda args: (parser.print_help(), ExitCode.USAGE)[1])
    actions = parser.add_subparsers(dest="train_command", metavar="ACTION")
    for name, help_text in _SUBCOMMANDS.items():
        sub = actions.add_parser(name, help=help_text, description=help_text)
        options.add_to_argparse(sub, options.TRACE_ROOT)
        sub.add_argument("--config", required=True, help="profile id: the stem of a release rlvr/configs/*.yaml file")
        sub.set_defaults(run=run)
        if name in ("prepare", "smoke", "run"):
            sub.add_argument("--input-dir", type=Path, required=name == "prepare",
                             help="directory prepare fills (must be empty) / a prepared input directory")
            sub.add_argument("--cache-dir", type=Path, help="Hugging Face cache directory (HF_HOME for the trainer)")
        if name in ("smoke", "run"):
            sub.add_argument("--output-dir", type=Path, required=True, help="empty directory for receipts and checkpoints")
            sub.add_argument("--cuda-visible-devices", help="comma-separated device ids (default: CUDA_VISIBLE_DEVICES)")
            sub.add_argument("--wandb", action="store_true", help="also log to Weights & Biases")
            sub.add_argument("--wandb-project", help="W&B project (trainer.project_name; default: the profile's)")
            sub.add_argument("--wandb-entity", help="W&B entity (requires --wandb)")
        if name in ("smoke", "run", "print-config"):
            sub.add_argument("--nnodes", type=options.positive_int, default=1,
                             help="spread the run's GPUs over N nodes of a Ray cluster (verl trainer.nnodes; same "
                                  "world size, n_gpus_per_node = GPUs / N)")
            sub.add_argument("--ray-address", default=None, metavar="ADDR",
                             help="the Ray cluster verl joins (ray_kwargs.ray_init.address; 'auto' or HOST:PORT)")
        if name in ("smoke", "print-config"):
            sub.add_argument("--gpus", type=options.positive_int, help="smoke only: GPUs to use (default: the profile's count)")
            sub.add_argument("--scale", default="profile", help="smoke only: 'profile' or 'tiny' (small batch/length)")
        if name == "smoke":
            sub.add_argument("--base-model-dir", type=Path, help="smoke only: a local model instead of <input>/base_model")
            sub.add_argument("--dataset-dir", type=Path, help="smoke only: local TRACE Parquet files laid out like <input>/dataset")
        if name == "merge":
            sub.add_argument("--checkpoint-dir", type=Path, required=True, help="the checkpoint/ directory of a finished run")
            sub.add_argument("--output-dir", type=Path, required=True, help="merged model directory (must not exist)")
        if name == "print-config":
            sub.add_argument("--mode", choices=("run", "smoke"), default="run")
            sub.add_argument("--composed", action="store_true", help="print verl's full composed config (needs verl)")


def _request(args: argparse.Namespace) -> object:
    from trace_lib.training.run import TrainingRequest

    return TrainingRequest(
        mode="smoke" if args.train_command == "smoke" else "canonical",
        output_dir=args.output_dir,
        input_dir=args.input_dir,
        cache_dir=args.cache_dir,
        cuda_visible_devices=args.cuda_visible_devices,
        wandb=args.wandb,
        wandb_project=args.wandb_project,
        wandb_entity=args.wandb_entity,
        gpus=getattr(args, "gpus", None),
        scale=getattr(args, "scale", "profile"),
        base_model_dir=getattr(args, "base_model_dir", None),
        dataset_dir=getattr(args, "dataset_dir", None),
        nnodes=args.nnodes,
        ray_address=args.ray_address,
    )


def _print_config(release: object, profile: object, args: argparse.Namespace) -> None:
    import yaml

    from trace_lib.training.run import SCALES
    from trace_lib.training.verl_config import GAPS, Launch, build_overrides, mapping_report

    smoke = args.mode == "smoke"
    scale = SCALES[args.scale] if smoke and args.scale in SCALES else SCALES["profile"]
    gpus = args.gpus if smoke and args.gpus else profile.gpu_count
    tp_profile = profile.easyr1_value("worker.rollout.tensor_parallel_size")
    launch = Launch(
        train_files=tuple(f"<output>/verl_data/train/{Path(f).name}" for f in profile.dataset.train_files),
        val_file=f"<output>/verl_data/validation/{Path(profile.dataset.validation_file).name}",
        model_path="<input>/base_model",
        checkpoint_dir="<output>/checkpoint",
        experiment_name=f"{profile.config_id}-smoke" if smoke else profile.easyr1_value("trainer.experiment_name"),
        max_steps=1 if smoke else profile.easyr1_value("trainer.max_steps"),
        save_freq=1 if smoke else profile.easyr1_value("trainer.save_freq"),
        test_freq=1 if smoke else profile.easyr1_value("trainer.val_freq"),
        gpus=gpus,
        tensor_parallel=tp_profile if gpus % tp_profile == 0 else 1,
        rollout_batch_size=scale.rollout_batch_size,
        max_response_length=scale.max_response_length,
        gpu_memory_utilization=scale.gpu_memory_utilization,
        enforce_eager=scale.enforce_eager,
        use_torch_compile=scale.use_torch_compile,
        nnodes=args.nnodes,
        ray_address=args.ray_address,
    )
    config = build_overrides(profile, launch)
    if args.composed:
        try:
            from omegaconf import OmegaConf

            from trace_lib.training.verl_config import compose

            composed = compose(config)
        except ImportError as exc:
            raise UsageError(f"needs verl and its Hydra/OmegaConf stack ({exc.name or exc} is not "
                             "importable)", field="--composed",
                             hint="pip install -e '.[train]', or drop --composed for the overrides alone") from None
        print(OmegaConf.to_yaml(composed), end="")
        return
    doc = {
        "config_id": profile.config_id,
        "mode": args.mode,
        "verl_overrides": config.nested(),
        "field_mapping": mapping_report(profile),
        "gaps": [f"{g.number}. {g.title}: {g.handling}" for g in GAPS],
    }
    print(yaml.safe_dump(doc, sort_keys=False, width=120), end="")


def run(args: argparse.Namespace) -> ExitCode | int:
    from trace_lib.release.locate import locate_release
    from trace_lib.training.gate import check_summary, require_gate
    from trace_lib.training.profiles import load_profile

    release = locate_release(options.given(args, options.TRACE_ROOT))
    profile = load_profile(release, args.config)
    require_gate(release)
    command = args.train_command
    if command == "check":
        print(json.dumps(check_summary(release, profile), sort_keys=True, separators=(",", ":")))
        return ExitCode.OK
    if command == "print-config":
        _print_config(release, profile, args)
        return ExitCode.OK
    if command == "prepare":
        from trace_lib.training.prepare import run_prepare

        receipt = run_prepare(release, profile, args.input_dir, cache_dir=args.cache_dir)
        print(json.dumps(receipt, sort_keys=True, separators=(",", ":")))
        return ExitCode.OK
    if command == "merge":
        from trace_lib.training.merge import run_merge

        receipt = run_merge(profile, args.checkpoint_dir, args.output_dir)
        print(json.dumps(receipt, sort_keys=True, separators=(",", ":")))
        return ExitCode.OK
    from trace_lib.training.run import run_training

    return run_training(release, profile, _request(args))
