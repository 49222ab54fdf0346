"""TrainingProfile -> verl 0.9.1 Hydra overrides; every ``easyr1`` field is mapped here and every gap is named.

``build_overrides(profile, launch) -> VerlConfig`` maps each leaf of the profile's ``easyr1`` block through
:data:`FIELD_MAP` (a profile field without an entry, or with a value the port does not support, is an error:
nothing is silently dropped) and adds the run-time paths and verl-only settings. Statuses follow spec §6.2:
``exact`` same semantics, ``equiv`` same effect by another mechanism, ``gap`` see :data:`GAPS`, ``inert`` no
effect with this profile, ``runtime`` filled by the launcher. ``compose(config)`` builds verl's real Hydra
config from the overrides (needs hydra and verl) and ``validate(...)`` runs verl's own config checks on it.

Decisions that are not profile fields (all recorded in the run receipt):
- verl's legacy synchronous ``RayPPOTrainer`` (``trainer.use_v1=false``): the same loop as EasyR1 (one
  StatefulDataLoader batch per step, generate, reward, old log-probs, GRPO, one optimizer step), without the
  TransferQueue dependency of the v1 trainer;
- never verl's ``full_determinism`` (it gives the 8 rollouts of a prompt one seed: identical samples, zero
  advantages), never resume (``trainer.resume_mode=disable``), no validation before training;
- ``trainer.logger`` adds verl's ``file`` logger (metrics JSONL in the output directory) to ``console``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from trace_lib.errors import ReleaseFileError, UsageError
from trace_lib.training.profiles import TrainingProfile

ARR = "actor_rollout_ref"
DATASET_CLASS_PATH = "pkg://trace_lib.training.verl_dataset"
DATASET_CLASS_NAME = "TraceRLHFDataset"
REWARD_PATH = "pkg://trace_lib.training.reward"
REWARD_NAME = "compute_score"
#: verl keys absent from ppo_trainer.yaml (Hydra needs a ``+`` to add them).
NEW_KEYS = frozenset({"data.trace_min_pixels", "data.trace_max_pixels", f"{ARR}.model.override_config.attn_implementation",
                      "ray_kwargs.ray_init.address"})


@dataclass(frozen=True)
class Gap:
    """A semantic difference between EasyR1 and verl 0.9.1 and how this port handles it."""

    number: int
    title: str
    handling: str


GAPS: tuple[Gap, ...] = (
    Gap(1, "system prompt", "closed: the stripped prompt file is the first message of every converted row"),
    Gap(2, "image preprocessing", "closed: TraceRLHFDataset applies EasyR1's resize (min/max pixels) before the processor"),
    Gap(3, "over-length prompts", "verl fails closed (data.truncation=error; agent loop raises) where EasyR1 truncated"),
    Gap(4, "sampling seeds", "rollout.seed=1 seeds the engines; verl sends no per-request seed (full_determinism would "
        "make the n rollouts identical); rollouts are not reproducible in either system"),
    Gap(5, "image-pad logit bias", "open: EasyR1's logit_bias -100 on <|image_pad|> has no verl setting (negligible)"),
    Gap(6, "dynamic micro-batching", "equiv: same token budgets and global token-mean loss; partition may differ"),
    Gap(7, "data order", "equiv: torchdata RandomSampler seeded with data.seed over the shards in profile order"),
    Gap(8, "checkpoint retention", "max_actor_ckpt_to_keep=1 keeps only the newest (EasyR1 also kept a 'best' one)"),
    Gap(9, "smoke validation", "closed: smoke sets trainer.test_freq=1, so one validation pass follows the saved step"),
    Gap(10, "reward interface", "closed: trace_lib.training.reward.compute_score, fail-closed on malformed rows"),
    Gap(11, "numerics", "open: bf16 reduced-precision reductions stay at PyTorch defaults; library versions differ"),
    Gap(12, "metrics", "open: EasyR1's rlvr_stats/* and solve-threshold metrics are not computed"),
)


@dataclass(frozen=True)
class Launch:
    """Run-time values the profile leaves open (paths) and the smoke-only reductions."""

    train_files: tuple[str, ...]
    val_file: str
    model_path: str
    checkpoint_dir: str
    experiment_name: str
    max_steps: int
    save_freq: int
    test_freq: int
    gpus: int
    tensor_parallel: int
    logger: tuple[str, ...] = ("console", "file")
    project_name: str | None = None  # None: the profile's
    rollout_batch_size: int | None = None  # None: the profile's (smoke 'tiny' scale only)
    max_response_length: int | None = None
    gpu_memory_utilization: float | None = None
    enforce_eager: bool | None = None
    use_torch_compile: bool | None = None
    attention: str = "flash_attention_2"  # 'sdpa' (padded, no padding-free) only for smoke without flash-attn
    generations_dir: str | None = None  # smoke: dump every rollout/validation sample with its reward (JSONL)
    nnodes: int = 1  # the run's GPUs spread evenly over this many nodes of a Ray cluster (trainer.nnodes)
    ray_address: str | None = None  # the cluster verl's driver joins (ray_kwargs.ray_init.address); None: local


@dataclass
class _Ctx:
    profile: TrainingProfile
    launch: Launch

    def value(self, dotted: str) -> Any:
        return self.profile.easyr1_value(dotted)

    def seq_len(self) -> int:
        return self.value("data.max_prompt_length") + self.response_length()

    def response_length(self) -> int:
        return self.launch.max_response_length or self.value("data.max_response_length")


Handler = Callable[[Any, _Ctx], dict[str, Any]]


@dataclass(frozen=True)
class FieldMapping:
    """How one ``easyr1`` field reaches verl."""

    status: str  # exact | equiv | gap | inert | runtime
    handler: Handler
    note: str = ""


def _to(*keys: str, transform: Callable[[Any], Any] = lambda v: v) -> Handler:
    return lambda v, c: {k: transform(v) for k in keys}


def _none(_: Any, __: _Ctx) -> dict[str, Any]:
    return {}


def _require(expected: Any, then: Handler = _none) -> Handler:
    def handler(value: Any, ctx: _Ctx) -> dict[str, Any]:
        if isinstance(value, Mapping):
            value = dict(value)
        if value != expected or type(value) is not type(expected):
            raise _Unsupported(expected, value)
        return then(value, ctx)

    return handler


class _Unsupported(Exception):
    def __init__(self, expected: Any, found: Any) -> None:
        super().__init__(f"expected {expected!r}, found {found!r}")
        self.expected, self.found = expected, found


_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}

#: easyr1 dotted key -> mapping. The table is the contract; tests assert it covers both profiles.
FIELD_MAP: Mapping[str, FieldMapping] = {
    # -- data ------------------------------------------------------------------------------------------
    "data.train_files": FieldMapping("runtime", _require(None), "converted shards, profile order"),
    "data.val_files": FieldMapping("runtime", _require(None), "converted validation file"),
    "data.prompt_key": FieldMapping("gap", _none, "column read by the converter; verl reads 'prompt' (gap 1)"),
    "data.answer_key": FieldMapping("gap", _none, "column copied to reward_model.ground_truth by the converter"),
    "data.image_key": FieldMapping("exact", _to("data.image_key", transform=lambda v: "images")),
    "data.video_key": FieldMapping("inert", _none),
    "data.image_dir": FieldMapping("inert", _require(None)),
    "data.video_fps": FieldMapping("inert", _none),
    "data.max_prompt_length": FieldMapping("exact", _to("data.max_prompt_length")),
    "data.max_response_length": FieldMapping("exact", lambda v, c: {"data.max_response_length": c.response_length()}),
    "data.rollout_batch_size": FieldMapping(
        "exact", lambda v, c: {"data.train_batch_size": c.launch.rollout_batch_size or v}
    ),
    "data.mini_rollout_batch_size": FieldMapping("exact", _require(None, _to("data.gen_batch_size"))),
    "data.val_batch_size": FieldMapping("equiv", _to("data.val_batch_size")),
    "data.format_prompt": FieldMapping("inert", _require(None)),
    "data.system_prompt_file": FieldMapping("gap", _require(None), "embedded by the converter (gap 1)"),
    "data.override_chat_template": FieldMapping("exact", _require(None, _to(f"{ARR}.model.custom_chat_template"))),
    "data.shuffle": FieldMapping("exact", _to("data.shuffle")),
    "data.seed": FieldMapping("equiv", _to("data.seed"), "gap 7"),
    "data.min_pixels": FieldMapping("gap", _to("data.trace_min_pixels"), "read by TraceRLHFDataset (gap 2)"),
    "data.max_pixels": FieldMapping("gap", _to("data.trace_max_pixels"), "read by TraceRLHFDataset (gap 2)"),
    "data.filter_overlong_prompts": FieldMapping("exact", _to("data.filter_overlong_prompts")),
    "data.filter_overlong_prompts_workers": FieldMapping("inert", _to("data.filter_overlong_prompts_workers")),
    # -- algorithm -------------------------------------------------------------------------------------
    "algorithm.gamma": FieldMapping("inert", _to("algorithm.gamma")),
    "algorithm.lam": FieldMapping("inert", _to("algorithm.lam")),
    "algorithm.adv_estimator": FieldMapping(
        "exact", _require("grpo", lambda v, c: {"algorithm.adv_estimator": "grpo", "algorithm.norm_adv_by_std_in_grpo": True})
    ),
    "algorithm.disable_kl": FieldMapping("equiv", _require(True, _to("algorithm.use_kl_in_reward", transform=lambda v: False))),
    "algorithm.use_kl_loss": FieldMapping("exact", _require(False, _to(f"{ARR}.actor.use_kl_loss"))),
    "algorithm.kl_penalty": FieldMapping("inert", _to("algorithm.kl_penalty", f"{ARR}.actor.kl_loss_type")),
    "algorithm.kl_coef": FieldMapping("inert", _to("algorithm.kl_ctrl.kl_coef", f"{ARR}.actor.kl_loss_coef")),
    "algorithm.kl_type": FieldMapping("inert", _to("algorithm.kl_ctrl.type")),
    "algorithm.kl_horizon": FieldMapping("inert", _to("algorithm.kl_ctrl.horizon", transform=int)),
    "algorithm.kl_target": FieldMapping("inert", _to("algorithm.kl_ctrl.target_kl")),
    "algorithm.online_filtering": FieldMapping("exact", _require(False, _to("algorithm.filter_groups.enable"))),
    "algorithm.filter_key": FieldMapping("inert", _none),
    "algorithm.filter_low": FieldMapping("inert", _none),
    "algorithm.filter_high": FieldMapping("inert", _none),
    "algorithm.perfect_solve_threshold": FieldMapping("gap", _none, "metrics only (gap 12)"),
    "algorithm.zero_solve_threshold": FieldMapping("gap", _none, "metrics only (gap 12)"),
    # -- worker / actor --------------------------------------------------------------------------------
    "worker.hybrid_engine": FieldMapping("exact", _require(True, _to(f"{ARR}.hybrid_engine"))),
    "worker.actor.strategy": FieldMapping(
        "exact", _require("fsdp", _to(f"{ARR}.actor.strategy", f"{ARR}.actor.fsdp_config.strategy"))
    ),
    "worker.actor.global_batch_size": FieldMapping(
        "exact", lambda v, c: {f"{ARR}.actor.ppo_mini_batch_size": c.launch.rollout_batch_size or v}
    ),
    "worker.actor.micro_batch_size_per_device_for_update": FieldMapping(
        "equiv", lambda v, c: {f"{ARR}.actor.ppo_max_token_len_per_gpu": v * c.seq_len()}, "token budget (gap 6)"
    ),
    "worker.actor.micro_batch_size_per_device_for_experience": FieldMapping(
        "equiv",
        lambda v, c: {
            f"{ARR}.rollout.log_prob_use_dynamic_bsz": True,
            f"{ARR}.rollout.log_prob_max_token_len_per_gpu": v * c.seq_len(),
        },
        "token budget (gap 6)",
    ),
    "worker.actor.max_grad_norm": FieldMapping("exact", _to(f"{ARR}.actor.optim.clip_grad", f"{ARR}.actor.grad_clip")),
    "worker.actor.clip_ratio_low": FieldMapping("exact", _to(f"{ARR}.actor.clip_ratio_low")),
    "worker.actor.clip_ratio_high": FieldMapping("exact", _to(f"{ARR}.actor.clip_ratio_high")),
    "worker.actor.clip_ratio_dual": FieldMapping("exact", _to(f"{ARR}.actor.clip_ratio_c")),
    "worker.actor.loss_avg_mode": FieldMapping(
        "exact", _require("token", _to(f"{ARR}.actor.loss_agg_mode", transform=lambda v: "token-mean"))
    ),
    "worker.actor.loss_type": FieldMapping(
        "exact", _require("default", _to(f"{ARR}.actor.policy_loss.loss_mode", transform=lambda v: "vanilla"))
    ),
    "worker.actor.ppo_epochs": FieldMapping("exact", _to(f"{ARR}.actor.ppo_epochs")),
    "worker.actor.padding_free": FieldMapping(
        "exact", _require(True, lambda v, c: {f"{ARR}.model.use_remove_padding": c.launch.attention == "flash_attention_2"})
    ),
    "worker.actor.dynamic_batching": FieldMapping("exact", _require(True, _to(f"{ARR}.actor.use_dynamic_bsz"))),
    "worker.actor.ulysses_size": FieldMapping(
        "exact",
        _to(f"{ARR}.actor.ulysses_sequence_parallel_size", f"{ARR}.actor.fsdp_config.ulysses_sequence_parallel_size"),
    ),
    "worker.actor.use_torch_compile": FieldMapping(
        "equiv",
        lambda v, c: {
            key: v if c.launch.use_torch_compile is None else c.launch.use_torch_compile
            for key in (f"{ARR}.actor.use_torch_compile", f"{ARR}.actor.fsdp_config.use_torch_compile")
        },
    ),
    "worker.actor.tau_positive": FieldMapping("inert", _to(f"{ARR}.actor.tau_pos")),
    "worker.actor.tau_negative": FieldMapping("inert", _to(f"{ARR}.actor.tau_neg")),
    "worker.actor.model.model_path": FieldMapping("runtime", _require(None), "<input>/base_model"),
    "worker.actor.model.tokenizer_path": FieldMapping("runtime", _require(None), "<input>/base_model"),
    "worker.actor.model.enable_gradient_checkpointing": FieldMapping("exact", _to(f"{ARR}.model.enable_gradient_checkpointing")),
    "worker.actor.model.trust_remote_code": FieldMapping(
        "exact", _require(False, _to(f"{ARR}.model.trust_remote_code", "data.trust_remote_code"))
    ),
    "worker.actor.model.freeze_vision_tower": FieldMapping("exact", _to(f"{ARR}.actor.freeze_vision_tower")),
    "worker.actor.model.lora.rank": FieldMapping("exact", _require(0, _to(f"{ARR}.model.lora_rank"))),
    "worker.actor.model.lora.alpha": FieldMapping("inert", _none, "LoRA off"),
    "worker.actor.model.lora.target_modules": FieldMapping("inert", _none, "LoRA off"),
    "worker.actor.model.lora.exclude_modules": FieldMapping("inert", _none, "LoRA off"),
    "worker.actor.optim.lr": FieldMapping("exact", _to(f"{ARR}.actor.optim.lr")),
    "worker.actor.optim.betas": FieldMapping("exact", _to(f"{ARR}.actor.optim.betas", transform=list)),
    "worker.actor.optim.weight_decay": FieldMapping("exact", _to(f"{ARR}.actor.optim.weight_decay")),
    "worker.actor.optim.strategy": FieldMapping(
        "equiv",
        _require("adamw", lambda v, c: {f"{ARR}.actor.optim.optimizer": "AdamW", f"{ARR}.actor.optim.optimizer_impl": "torch.optim"}),
        "torch AdamW (EasyR1 passed fused=True)",
    ),
    "worker.actor.optim.lr_warmup_ratio": FieldMapping("exact", _to(f"{ARR}.actor.optim.lr_warmup_steps_ratio")),
    "worker.actor.optim.lr_warmup_steps": FieldMapping(
        "exact", _require(None, _to(f"{ARR}.actor.optim.lr_warmup_steps", transform=lambda v: -1))
    ),
    "worker.actor.optim.min_lr_ratio": FieldMapping("inert", _require(None, _to(f"{ARR}.actor.optim.min_lr_ratio", transform=lambda v: 0.0))),
    "worker.actor.optim.lr_scheduler_type": FieldMapping("exact", _require("constant", _to(f"{ARR}.actor.optim.lr_scheduler_type"))),
    "worker.actor.fsdp.enable_full_shard": FieldMapping("exact", _require(True, _to(f"{ARR}.actor.fsdp_config.reshard_after_forward"))),
    "worker.actor.fsdp.enable_cpu_offload": FieldMapping(
        "exact", _require(False, _to(f"{ARR}.actor.fsdp_config.offload_policy"))
    ),
    "worker.actor.fsdp.enable_rank0_init": FieldMapping("equiv", _require(True), "verl always initialises on rank 0"),
    "worker.actor.fsdp.use_orig_params": FieldMapping("exact", _to(f"{ARR}.actor.fsdp_config.use_orig_params")),
    "worker.actor.fsdp.torch_dtype": FieldMapping(
        "exact", _require(None, _to(f"{ARR}.actor.fsdp_config.model_dtype", transform=lambda v: "fp32"))
    ),
    "worker.actor.fsdp.fsdp_size": FieldMapping("exact", _to(f"{ARR}.actor.fsdp_config.fsdp_size")),
    "worker.actor.fsdp.mp_param_dtype": FieldMapping("exact", _require("bf16"), "verl's FSDP mixed-precision default"),
    "worker.actor.fsdp.mp_reduce_dtype": FieldMapping("exact", _require("fp32"), "verl's FSDP mixed-precision default"),
    "worker.actor.fsdp.mp_buffer_dtype": FieldMapping("exact", _require("fp32"), "verl's FSDP mixed-precision default"),
    "worker.actor.offload.offload_params": FieldMapping("equiv", _to(f"{ARR}.actor.fsdp_config.param_offload")),
    "worker.actor.offload.offload_optimizer": FieldMapping("equiv", _to(f"{ARR}.actor.fsdp_config.optimizer_offload")),
    # -- worker / rollout ------------------------------------------------------------------------------
    "worker.rollout.name": FieldMapping(
        "equiv", _require("vllm", lambda v, c: {f"{ARR}.rollout.name": "vllm", f"{ARR}.rollout.mode": "async"})
    ),
    "worker.rollout.n": FieldMapping("equiv", _to(f"{ARR}.rollout.n")),
    "worker.rollout.temperature": FieldMapping("exact", _to(f"{ARR}.rollout.temperature")),
    "worker.rollout.top_p": FieldMapping("exact", _to(f"{ARR}.rollout.top_p")),
    "worker.rollout.top_k": FieldMapping("exact", _to(f"{ARR}.rollout.top_k")),
    "worker.rollout.seed": FieldMapping(
        "gap", lambda v, c: {f"{ARR}.rollout.seed": v, f"{ARR}.rollout.full_determinism": False}, "gap 4"
    ),
    "worker.rollout.limit_images": FieldMapping("exact", _require(0), "0 = no limit: left unset"),
    "worker.rollout.dtype": FieldMapping("exact", _to(f"{ARR}.rollout.dtype", transform=lambda v: _DTYPES[v])),
    "worker.rollout.gpu_memory_utilization": FieldMapping(
        "exact", lambda v, c: {f"{ARR}.rollout.gpu_memory_utilization": c.launch.gpu_memory_utilization or v}
    ),
    "worker.rollout.ignore_eos": FieldMapping("exact", _to(f"{ARR}.rollout.ignore_eos")),
    "worker.rollout.enforce_eager": FieldMapping(
        "exact",
        lambda v, c: {f"{ARR}.rollout.enforce_eager": v if c.launch.enforce_eager is None else c.launch.enforce_eager},
    ),
    "worker.rollout.enable_chunked_prefill": FieldMapping("exact", _to(f"{ARR}.rollout.enable_chunked_prefill")),
    "worker.rollout.tensor_parallel_size": FieldMapping(
        "exact", lambda v, c: {f"{ARR}.rollout.tensor_model_parallel_size": c.launch.tensor_parallel}
    ),
    "worker.rollout.max_model_len": FieldMapping(
        "exact", _require(None, lambda v, c: {f"{ARR}.rollout.max_model_len": c.seq_len()})
    ),
    "worker.rollout.max_num_batched_tokens": FieldMapping("exact", _to(f"{ARR}.rollout.max_num_batched_tokens")),
    "worker.rollout.disable_log_stats": FieldMapping("exact", _to(f"{ARR}.rollout.disable_log_stats")),
    "worker.rollout.disable_tqdm": FieldMapping("inert", _none, "cosmetic"),
    "worker.rollout.val_override_config.temperature": FieldMapping("exact", _to(f"{ARR}.rollout.val_kwargs.temperature")),
    "worker.rollout.val_override_config.top_p": FieldMapping("exact", _to(f"{ARR}.rollout.val_kwargs.top_p")),
    "worker.rollout.val_override_config.n": FieldMapping(
        "exact",
        lambda v, c: {f"{ARR}.rollout.val_kwargs.n": v, f"{ARR}.rollout.val_kwargs.top_k": -1,
                      f"{ARR}.rollout.val_kwargs.do_sample": True},
    ),
    # -- worker / ref, reward --------------------------------------------------------------------------
    **{f"worker.ref.{k}": FieldMapping("inert", _none, "no reference model (KL disabled)") for k in (
        "strategy", "fsdp.enable_full_shard", "fsdp.enable_cpu_offload", "fsdp.enable_rank0_init", "fsdp.use_orig_params",
        "fsdp.torch_dtype", "fsdp.fsdp_size", "fsdp.mp_param_dtype", "fsdp.mp_reduce_dtype", "fsdp.mp_buffer_dtype",
        "offload.offload_params", "offload.offload_optimizer")},
    "worker.reward.reward_function": FieldMapping(
        "gap",
        _require(None, lambda v, c: {"reward.custom_reward_function.path": REWARD_PATH,
                                     "reward.custom_reward_function.name": REWARD_NAME,
                                     "reward.reward_manager.name": "naive"}),
        "gap 10",
    ),
    "worker.reward.reward_function_kwargs": FieldMapping("exact", _require({}), "no extra kwargs"),
    "worker.reward.skip_special_tokens": FieldMapping("exact", _require(True), "verl's naive manager always skips them"),
    "worker.reward.num_cpus": FieldMapping("inert", _none, "performance only"),
    # -- trainer ---------------------------------------------------------------------------------------
    "trainer.total_epochs": FieldMapping("inert", _to("trainer.total_epochs")),
    "trainer.max_steps": FieldMapping("exact", lambda v, c: {"trainer.total_training_steps": c.launch.max_steps}),
    "trainer.project_name": FieldMapping("exact", lambda v, c: {"trainer.project_name": c.launch.project_name or v}),
    "trainer.experiment_name": FieldMapping("exact", lambda v, c: {"trainer.experiment_name": c.launch.experiment_name}),
    "trainer.logger": FieldMapping("exact", lambda v, c: {"trainer.logger": list(c.launch.logger)}),
    "trainer.nnodes": FieldMapping("exact", _require(1, lambda v, c: {"trainer.nnodes": c.launch.nnodes}),
                                   "--nnodes spreads the same GPUs (same world size) over N nodes"),
    "trainer.n_gpus_per_node": FieldMapping(
        "exact", lambda v, c: {"trainer.n_gpus_per_node": c.launch.gpus // c.launch.nnodes}),
    "trainer.max_try_make_batch": FieldMapping("inert", _none, "no online filtering"),
    "trainer.critic_warmup": FieldMapping("exact", lambda v, c: {"trainer.critic_warmup": v, "critic.enable": False}),
    "trainer.val_freq": FieldMapping("exact", lambda v, c: {"trainer.test_freq": c.launch.test_freq}),
    "trainer.val_before_train": FieldMapping("exact", _require(False, _to("trainer.val_before_train"))),
    "trainer.val_only": FieldMapping("exact", _require(False, _to("trainer.val_only"))),
    "trainer.val_generations_to_log": FieldMapping("equiv", _to("trainer.log_val_generations")),
    "trainer.save_freq": FieldMapping("exact", lambda v, c: {"trainer.save_freq": c.launch.save_freq}),
    "trainer.save_limit": FieldMapping("gap", _to("trainer.max_actor_ckpt_to_keep"), "gap 8"),
    "trainer.save_model_only": FieldMapping(
        "exact", _require(False, _to(f"{ARR}.actor.checkpoint.save_contents", transform=lambda v: ["model", "optimizer", "extra"]))
    ),
    "trainer.save_checkpoint_path": FieldMapping(
        "runtime", _require(None, lambda v, c: {"trainer.default_local_dir": c.launch.checkpoint_dir})
    ),
    "trainer.load_checkpoint_path": FieldMapping("exact", _require(None, lambda v, c: {"trainer.resume_mode": "disable"})),
    "trainer.find_last_checkpoint": FieldMapping("exact", _require(False, lambda v, c: {"trainer.resume_from_path": None})),
    "trainer.ray_timeline": FieldMapping("exact", _require(None, _to("ray_kwargs.timeline_json_file"))),
}


def _fixed(ctx: _Ctx) -> dict[str, Any]:
    """verl settings that are not profile fields (see the module docstring)."""
    launch = ctx.launch
    out: dict[str, Any] = {
        "trainer.use_v1": False,
        "trainer.device": "cuda",
        "trainer.balance_batch": True,
        "algorithm.rollout_correction.bypass_mode": False,
        f"{ARR}.actor.entropy_coeff": 0,
        f"{ARR}.rollout.free_cache_engine": True,
        f"{ARR}.rollout.load_format": "dummy",
        "data.train_files": list(launch.train_files),
        "data.val_files": launch.val_file,
        "data.prompt_key": "prompt",
        "data.truncation": "error",
        "data.return_raw_chat": True,
        "data.custom_cls.path": DATASET_CLASS_PATH,
        "data.custom_cls.name": DATASET_CLASS_NAME,
        f"{ARR}.model.path": launch.model_path,
        f"{ARR}.model.tokenizer_path": launch.model_path,
    }
    if launch.attention != "flash_attention_2":
        out[f"{ARR}.model.override_config.attn_implementation"] = launch.attention
    if launch.ray_address:
        out["ray_kwargs.ray_init.address"] = launch.ray_address
    if launch.generations_dir is not None:
        out["trainer.rollout_data_dir"] = f"{launch.generations_dir}/rollout"
        out["trainer.validation_data_dir"] = f"{launch.generations_dir}/validation"
    return out


def _leaves(node: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and dotted not in FIELD_MAP:
            yield from _leaves(value, dotted + ".")
        else:
            yield dotted, value


@dataclass(frozen=True)
class VerlConfig:
    """The verl overrides for one launch (dotted key -> value, insertion-ordered) and where each came from."""

    overrides: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)  # verl key -> easyr1 field (or 'trace-repro')

    def hydra_args(self) -> list[str]:
        """The overrides as Hydra command-line arguments (``+`` for keys verl's YAML does not declare)."""
        return [f"{'+' if key in NEW_KEYS else ''}{key}={render_value(value)}" for key, value in self.overrides.items()]

    def nested(self) -> dict[str, Any]:
        """The overrides as a nested mapping (for printing)."""
        tree: dict[str, Any] = {}
        for key, value in self.overrides.items():
            node = tree
            *parents, leaf = key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        return tree


def build_overrides(profile: TrainingProfile, launch: Launch) -> VerlConfig:
    """verl overrides for ``profile`` run as described by ``launch``.

    Raises:
        ReleaseFileError: an ``easyr1`` field has no mapping, or a value this port does not support.
        UsageError: the launch is inconsistent (tensor parallel size does not divide the GPU count).
    """
    if launch.gpus % launch.tensor_parallel:
        raise UsageError("rollout tensor-parallel size must divide the GPU count",
                         expected=f"a divisor of {launch.gpus}", found=launch.tensor_parallel)
    if launch.nnodes < 1 or launch.gpus % launch.nnodes or (launch.gpus // launch.nnodes) % launch.tensor_parallel:
        raise UsageError("the node count must split the GPUs evenly, tensor-parallel groups inside one node",
                         field="--nnodes", expected=f"a divisor of {launch.gpus} leaving a multiple of "
                         f"{launch.tensor_parallel} GPUs per node", found=launch.nnodes)
    ctx = _Ctx(profile, launch)
    overrides: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for dotted, value in _leaves(profile.easyr1):
        mapping = FIELD_MAP.get(dotted)
        if mapping is None:
            raise ReleaseFileError("profile field has no verl mapping", file=profile.path, field=f"easyr1.{dotted}",
                                   hint="extend trace_lib.training.verl_config.FIELD_MAP")
        try:
            produced = mapping.handler(value, ctx)
        except _Unsupported as exc:
            raise ReleaseFileError("value not supported by the verl port", file=profile.path, field=f"easyr1.{dotted}",
                                   expected=exc.expected, found=exc.found) from None
        for key, verl_value in produced.items():
            overrides[key] = verl_value
            sources[key] = f"easyr1.{dotted}"
    for key, verl_value in _fixed(ctx).items():
        overrides[key] = verl_value
        sources.setdefault(key, "trace-repro")
    return VerlConfig(overrides=overrides, sources=sources)


def render_value(value: Any) -> str:
    """A Python value in Hydra override syntax (strings single-quoted)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(render_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{render_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot render {type(value).__name__} as a Hydra value")


def compose(config: VerlConfig) -> Any:
    """verl's full Hydra config (``ppo_trainer`` + the overrides), as ``main_ppo`` would compose it."""
    from pathlib import Path

    import verl.trainer
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    config_dir = Path(verl.trainer.__file__).parent / "config"
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=config.hydra_args())


def validate(composed: Any) -> None:
    """verl's own pre-launch checks (``main_ppo.main`` runs the same): config consistency and dataclass checks."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config=composed, use_reference_policy=need_reference_policy(composed), use_critic=need_critic(composed))


def mapping_report(profile: TrainingProfile) -> list[dict[str, str]]:
    """One row per ``easyr1`` field: key, status, note (what ``print-config`` shows next to the config)."""
    return [
        {"field": f"easyr1.{dotted}", "status": FIELD_MAP[dotted].status, "note": FIELD_MAP[dotted].note}
        for dotted, _ in _leaves(profile.easyr1)
        if dotted in FIELD_MAP
    ]


def build_worker_configs(composed: Any) -> dict[str, Any]:
    """The dataclasses verl's workers build from the config (rollout, actor, checkpoint engine, model), built here
    first so a type or consistency error shows before any GPU is touched. Loads the model's tokenizer/processor."""
    from omegaconf import OmegaConf
    from verl.utils.config import omega_conf_to_dataclass

    resolved = OmegaConf.create(OmegaConf.to_container(composed, resolve=True))
    arr = resolved.actor_rollout_ref
    return {
        "rollout": omega_conf_to_dataclass(arr.rollout),
        "actor": omega_conf_to_dataclass(arr.actor),
        "checkpoint_engine": omega_conf_to_dataclass(arr.rollout.checkpoint_engine),
        "model": omega_conf_to_dataclass(arr.model),
    }
