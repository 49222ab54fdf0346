"""verl 0.9.1 on CPU with the tiny Qwen2.5-VL: config composition, the dataset class, and the FSDP merger.

Needs the 'train' extra (verl 0.9.1, transformers 5.10) plus torch; skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trace_lib.training.data import RowFormat, convert_splits, load_system_prompt
from trace_lib.training.prepare import dataset_expectations
from trace_lib.training.profiles import load_profile
from trace_lib.training.receipts import RUN_SCHEMA, write_receipt
from trace_lib.training.tiny_dataset import build_tiny_trace_dataset
from trace_lib.training.verl_config import Launch, build_overrides

pytestmark = pytest.mark.cpu_model


def _need(module: str) -> None:
    pytest.importorskip(module, reason=f"{module} not installed (pip install 'trace-repro[train]')")


@pytest.fixture(scope="module")
def env(tmp_path_factory, release):  # noqa: ANN001, ANN201
    for module in ("torch", "transformers", "verl", "hydra"):
        _need(module)
    from trace_lib.testing.tiny_qwen import build_tiny_qwen25vl

    profile = load_profile(release, "trace-qwen2.5-vl-3b")
    root = tmp_path_factory.mktemp("verl_cpu")
    build_tiny_trace_dataset(root / "data", dataset_expectations(release, profile).columns,
                             profile.dataset.train_files[0], profile.dataset.validation_file)
    model = build_tiny_qwen25vl(root / "model")
    fmt = RowFormat.from_profile(profile, load_system_prompt(release, profile))
    train, val = convert_splits([root / "data" / profile.dataset.train_files[0]],
                                root / "data" / profile.dataset.validation_file, root / "verl_data", fmt)
    launch = Launch(train_files=tuple(c.path for c in train), val_file=val.path, model_path=str(model),
                    checkpoint_dir=str(root / "ckpt"), experiment_name="cpu", max_steps=1, save_freq=1, test_freq=1,
                    gpus=1, tensor_parallel=1, rollout_batch_size=4, max_response_length=256, attention="sdpa")
    return profile, root, model, build_overrides(profile, launch)


def test_overrides_compose_and_pass_verls_validators(env) -> None:  # noqa: ANN001
    from trace_lib.training.verl_config import build_worker_configs, compose, validate

    profile, _, model, config = env
    composed = compose(config)
    validate(composed)
    workers = build_worker_configs(composed)
    assert composed.trainer.use_v1 is False and composed.data.custom_cls.name == "TraceRLHFDataset"
    assert workers["rollout"].tensor_model_parallel_size == 1 and workers["rollout"].seed == 1
    assert workers["model"].processor is not None and workers["model"].local_path == str(model)


def test_canonical_profile_composes_too(env) -> None:  # noqa: ANN001
    from trace_lib.training.verl_config import compose, validate

    profile = env[0]
    launch = Launch(train_files=("/d/a.parquet",), val_file="/d/v.parquet", model_path="/m", checkpoint_dir="/c",
                    experiment_name=profile.config_id, max_steps=500, save_freq=100, test_freq=100, gpus=8, tensor_parallel=2)
    composed = compose(build_overrides(profile, launch))
    validate(composed)
    assert composed.actor_rollout_ref.rollout.tensor_model_parallel_size == 2
    assert composed.actor_rollout_ref.actor.ppo_max_token_len_per_gpu == 4096


@pytest.mark.parametrize("size, tokens", [((512, 512), 324), ((448, 448), 324), ((400, 300), 336), ((640, 480), 391)])
def test_dataset_class_reproduces_easyr1_image_tokens(env, size, tokens) -> None:  # noqa: ANN001
    from io import BytesIO

    from PIL import Image

    from trace_lib.training.verl_config import compose

    _, _, model, config = env
    composed = compose(config)
    from transformers import AutoProcessor
    from verl.utils.dataset.rl_dataset import get_dataset_class

    buffer = BytesIO()
    Image.new("RGB", size, (10, 20, 30)).save(buffer, format="PNG")
    messages = [{"role": "user", "content": [{"type": "image", "image": Image.open(BytesIO(buffer.getvalue()))},
                                             {"type": "text", "text": "How many?"}]}]
    images, videos, _ = get_dataset_class(composed.data)._process_multi_modal_info(messages, 14, composed.data)
    grid = AutoProcessor.from_pretrained(model).image_processor(images=images, return_tensors="pt")["image_grid_thw"]
    assert videos is None and int(grid.prod()) // 4 == tokens


def test_dataset_rows_render_the_upstream_prompt(env) -> None:  # noqa: ANN001
    from trace_lib.training.verl_config import build_worker_configs, compose
    from verl.utils.dataset.rl_dataset import get_dataset_class

    _, _, _, config = env
    composed = compose(config)
    model = build_worker_configs(composed)["model"]
    cls = get_dataset_class(composed.data)
    dataset = cls(data_files=list(composed.data.train_files), tokenizer=model.tokenizer, processor=model.processor,
                  config=composed.data)
    row = dataset[1]
    images, _, _ = cls._process_multi_modal_info(row["raw_prompt"], 14, composed.data)
    text = model.processor.apply_chat_template(row["raw_prompt"], add_generation_prompt=True, tokenize=False)
    assert text.startswith("<|im_start|>system\nYou are a helpful, conversational assistant")
    assert "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|><|vision_start|>" in text
    assert text.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert len(images) == 2 and all(im.mode == "RGB" for im in images)
    assert json.loads(row["reward_model"]["ground_truth"])["type"] == "number"


def _write_fsdp_shards(model_dir: Path, actor: Path) -> None:
    """A world-size-1 FSDP-style checkpoint of ``model_dir``: DTensor state dict (Shard(0)) + huggingface/."""
    import os

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    from transformers import AutoModelForImageTextToText

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",))
        model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32)
        state = {k: distribute_tensor(v, mesh, [Shard(0)]) if v.dim() else v for k, v in model.state_dict().items()}
        actor.mkdir(parents=True)
        torch.save(state, actor / "model_world_size_1_rank_0.pt")
    finally:
        dist.destroy_process_group()
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 1, "world_size": 1}))
    shutil.copytree(model_dir, actor / "huggingface", ignore=shutil.ignore_patterns("*.safetensors"))


def test_merge_with_verls_merger_then_generate(env, tmp_path) -> None:  # noqa: ANN001
    import torch
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    from trace_lib.training.merge import run_merge

    profile, _, model_dir, _ = env
    ckpt = tmp_path / "run" / "checkpoint"
    _write_fsdp_shards(model_dir, ckpt / "global_step_1" / "actor")
    (ckpt / "latest_checkpointed_iteration.txt").write_text("1")
    write_receipt(tmp_path / "run" / "run_receipt.json", {"schema_version": RUN_SCHEMA, "config_id": profile.config_id,
                  "status": "completed", "mode": "smoke", "expected_step": 1, "world_size": 1, "canonical": False})
    receipt = run_merge(profile, ckpt, tmp_path / "merged")
    assert receipt["checkpoint_step"] == 1 and receipt["publication_performed"] is False
    merged = AutoModelForImageTextToText.from_pretrained(tmp_path / "merged")
    original = AutoModelForImageTextToText.from_pretrained(model_dir)
    for (name, a), (_, b) in zip(merged.state_dict().items(), original.state_dict().items()):
        assert torch.equal(a.to(torch.bfloat16), b.to(torch.bfloat16)), name
    tok = AutoTokenizer.from_pretrained(tmp_path / "merged")
    ids = tok("Count the apples", return_tensors="pt").input_ids
    out = merged.generate(ids, max_new_tokens=4, do_sample=False)
    assert out.shape[1] == ids.shape[1] + 4
    assert not list(tmp_path.glob(".merged.*"))  # staging directory renamed away


def test_verl_padded_actor_forward_with_sdpa(env) -> None:  # noqa: ANN001
    """The smoke's no-flash-attn path: verl's Qwen2.5-VL patch, padded batch, 4-row M-RoPE ids, SDPA, backward."""
    import torch
    from PIL import Image
    from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor
    from verl.models.transformers.monkey_patch import apply_monkey_patch
    from verl.models.transformers.qwen2_vl import get_rope_index

    model_dir = env[2]
    config = AutoConfig.from_pretrained(model_dir, attn_implementation="sdpa")
    model = AutoModelForImageTextToText.from_pretrained(model_dir, config=config, dtype=torch.float32)
    apply_monkey_patch(model=model, use_remove_padding=False, ulysses_sp_size=1, use_fused_kernels=False)
    processor = AutoProcessor.from_pretrained(model_dir)
    text = processor.apply_chat_template([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "How many?"}]}],
                                         add_generation_prompt=True, tokenize=False)
    inputs = processor(text=[text], images=[Image.new("RGB", (512, 512))], return_tensors="pt")
    ids = inputs["input_ids"][0]
    vision = get_rope_index(processor, input_ids=ids, image_grid_thw=inputs["image_grid_thw"],
                            attention_mask=inputs["attention_mask"][0])
    position_ids = torch.cat([torch.arange(len(ids)).unsqueeze(0), vision], 0).unsqueeze(1)  # (4, 1, L)
    out = model(input_ids=ids.unsqueeze(0), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                position_ids=position_ids, pixel_values=inputs["pixel_values"], image_grid_thw=inputs["image_grid_thw"])
    assert torch.isfinite(out.logits).all()
    out.logits.log_softmax(-1).mean().backward()
    assert model.lm_head.weight.grad is not None and torch.isfinite(model.lm_head.weight.grad).all()
