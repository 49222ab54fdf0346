"""GPU smoke of the training path: tiny Qwen2.5-VL + tiny TRACE-schema data -> ``train smoke`` through verl with
vLLM rollouts (1 GPU; TP 2 when 2 are present) -> step-1 checkpoint -> ``train merge`` -> transformers reload and
generate. Asserts finite loss/grad norm and every reward in {0, 0.05, 0.95, 1}; prints the wall time per phase.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

import pytest

from trace_lib.training.reward import REWARD_VALUES

# Ray + vLLM engine start dominates (about 140 s on one H200 with TP=1, more with TP=2): well past the
# default 300 s per-test timeout of pytest.ini.
pytestmark = [pytest.mark.gpu, pytest.mark.timeout(1500)]

CONFIG = "trace-qwen2.5-vl-3b"


def _requirements() -> int:
    torch = pytest.importorskip("torch", reason="torch not installed")
    for module in ("verl", "vllm", "ray", "transformers"):
        pytest.importorskip(module, reason=f"{module} not installed (training smoke needs verl + vLLM)")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    return 2 if torch.cuda.device_count() >= 2 else 1


def _cli(*args: str, timeout: int) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "trace_lib", "train", *args]
    return subprocess.run(cmd, text=True, timeout=timeout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _tail(text: str, n: int = 80) -> str:
    return "\n".join(text.splitlines()[-n:])


def test_smoke_training_then_merge(tmp_path, release, receipt) -> None:  # noqa: ANN001
    from trace_lib.testing.tiny_qwen import build_tiny_qwen25vl
    from trace_lib.training.prepare import dataset_expectations
    from trace_lib.training.profiles import load_profile
    from trace_lib.training.timeline import phase_times
    from trace_lib.training.tiny_dataset import build_tiny_trace_dataset

    gpus = _requirements()
    profile = load_profile(release, CONFIG)
    model = build_tiny_qwen25vl(tmp_path / "model")
    data = build_tiny_trace_dataset(tmp_path / "data", dataset_expectations(release, profile).columns,
                                    profile.dataset.train_files[0], profile.dataset.validation_file)
    out = tmp_path / "run"
    proc = _cli("smoke", "--config", CONFIG, "--trace-root", str(release.path), "--output-dir", str(out),
                "--gpus", str(gpus), "--scale", "tiny", "--base-model-dir", str(model), "--dataset-dir", str(data),
                timeout=1500)
    assert proc.returncode == 0, _tail(proc.stdout)

    run = json.loads((out / "run_receipt.json").read_text())
    assert run["status"] == "completed" and run["canonical"] is False and run["expected_step"] == 1
    assert run["world_size"] == gpus and run["tensor_parallel"] == gpus
    actor = out / "checkpoint" / "global_step_1" / "actor"
    assert sorted(p.name for p in actor.glob("model_world_size_*")) == [
        f"model_world_size_{gpus}_rank_{r}.pt" for r in range(gpus)
    ]
    assert (out / "checkpoint" / "latest_checkpointed_iteration.txt").read_text().strip() == "1"

    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    step1 = next(m["data"] for m in metrics if m["step"] == 1)
    for suffix in ("pg_loss", "grad_norm"):  # verl logs actor/pg_loss and actor/grad_norm (prefixes vary by path)
        values = {k: v for k, v in step1.items() if k.startswith("actor/") and k.endswith(suffix)}
        assert values and all(math.isfinite(v) for v in values.values()), (suffix, values)

    rollouts = [json.loads(line) for line in (out / "generations" / "rollout" / "1.jsonl").read_text().splitlines()]
    assert len(rollouts) == 4 * profile.easyr1_value("worker.rollout.n")
    assert {r["overall"] for r in rollouts} <= REWARD_VALUES
    assert all(abs(r["score"] - r["overall"]) < 1e-6 for r in rollouts)
    validation = list((out / "generations" / "validation").glob("*.jsonl"))
    assert validation, "the smoke's post-step validation pass wrote no generations"

    start = time.monotonic()
    merged = tmp_path / "merged"
    proc = _cli("merge", "--config", CONFIG, "--trace-root", str(release.path), "--checkpoint-dir",
                str(out / "checkpoint"), "--output-dir", str(merged), timeout=600)
    merge_s = time.monotonic() - start
    assert proc.returncode == 0, _tail(proc.stdout)
    assert json.loads((merged / "trace_merge_receipt.json").read_text())["checkpoint_step"] == 1

    import torch
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    reloaded = AutoModelForImageTextToText.from_pretrained(merged, dtype=torch.bfloat16).to("cuda")
    tokenizer = AutoTokenizer.from_pretrained(merged)
    ids = tokenizer("Count the apples", return_tensors="pt").input_ids.to("cuda")
    generated = reloaded.generate(ids, max_new_tokens=8, do_sample=False)
    assert generated.shape[1] == ids.shape[1] + 8

    phases = {**phase_times(out / "trainer.log"), "merge": round(merge_s, 3)}
    print("smoke training wall time (s):", json.dumps(phases), f"total run {run['wall_s']}", file=sys.stderr)
    for name, seconds in phases.items():
        receipt(f"seconds_{name}", seconds)
    receipt("gpus", gpus)
