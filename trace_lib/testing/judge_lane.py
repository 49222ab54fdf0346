"""The judge-lane scenario shared by the GPU test (real ``vllm serve``) and its CPU rehearsal (fake ``vllm``).

:func:`run_phase_all` builds a tiny random Qwen3 judge and the tiny Qwen2.5-VL, a tiny MMStar slice and a tiny TRACE
validation slice, then runs ``pytest --judge-serve --phase all`` on a throwaway project in a subprocess: the child
``--phase generate`` session generates both slices (``backend``: ``vllm`` on the GPU, ``hf`` on CPU) and exits, the
judge pool starts, and the ``score`` phase judges both slices through it with no generation engine. Returns what
each phase recorded, for the caller's assertions.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from trace_lib import options

REPO = Path(__file__).resolve().parents[2]
SLUG = "trace-qwen2.5-vl-3b"  # the validation model whose slice runs on the tiny checkpoint
ROWS = 16

THROWAWAY = r'''
import json, os
from pathlib import Path

WORK = Path(os.environ["JUDGE_GPU_WORK"])
LOG = WORK / "phases.jsonl"
ROWS = int(os.environ["JUDGE_GPU_ROWS"])
BACKEND = os.environ.get("JUDGE_GPU_BACKEND", "vllm")
VLLM = BACKEND == "vllm"


def _log(**record):
    with LOG.open("a") as handle:
        handle.write(json.dumps(record) + "\n")


def test_eval_slice(release, trace_phase):
    from trace_lib.scoring.judge import OpenAIJudge
    from trace_lib.testing.synthetic_campaign import TINY_SLUG, tiny_canonical, tiny_slice_runner

    url = os.environ.get("TRACE_JUDGE_URL")
    runner = tiny_slice_runner(release, WORK / "eval", WORK / "models" / TINY_SLUG, backend=BACKEND, judge_url=url,
                               canonical=tiny_canonical(release, 50.0, rows=ROWS), rows=ROWS, seeds=(42,), max_tokens=64,
                               backend_overrides={"max_model_len": 8192, "gpu_memory_utilization": 0.25}
                               if VLLM else {})
    try:
        slice_ = runner.plan.slices[0]
        if trace_phase == "generate":
            assert url is None
            run = runner.generate(slice_)
            assert run.complete
            _log(test="eval", phase=trace_phase, generated=run.generated)
            return
        assert url
        outcome = runner.run(slice_)
        assert outcome.scored.score.rows == ROWS and runner.engines.loads == []  # judged, nothing generated
        judge = OpenAIJudge(url)
        judge.check()
        chat = judge.chat(["Which option is right? A. cat B. dog"], max_tokens=16)
        done = judge.complete(["Extract the answer: B"], max_tokens=16)
        assert chat[0].ok or chat[0].failure == "empty"  # a random judge may answer only a think block
        assert done[0].finish_reason in ("stop", "length")
        _log(test="eval", phase=trace_phase, judge_calls=outcome.scored.score.judge_calls,
             fallbacks=outcome.scored.score.fallbacks, url=url)
    finally:
        runner.engines.close()


def test_validation_slice(trace_phase):
    from trace_lib.release.locate import locate_release
    from trace_lib.validation.chat_template import ChatTemplate
    from trace_lib.validation.generate import default_backend_options
    from trace_lib.validation.layout import ValidationLayout
    from trace_lib.validation.pipeline import (SliceSettings, plan_validation, run_validation_generation,
                                               run_validation_slice)
    from trace_lib.validation.pins import DatasetIdentity
    from trace_lib.release.validation_suite import load_validation_suite

    short = locate_release(str(WORK / "release"))
    suite = load_validation_suite(short)
    layout = ValidationLayout(WORK / "validation")
    ident = DatasetIdentity(**json.loads((WORK / "ident.json").read_text()))
    url = os.environ.get("TRACE_JUDGE_URL")
    settings = SliceSettings(
        backend=BACKEND,
        backend_options={**default_backend_options(BACKEND, suite.generation),
                         **({"gpu_memory_utilization": 0.25} if VLLM else {})},
        judge_urls=tuple(url.split(",")) if url else (),
        judge_template=ChatTemplate.from_tokenizer_dir(WORK / "models" / "qwen3-32b-judge"), expected=ident)
    (slice_,) = plan_validation(short, [os.environ["JUDGE_GPU_SLUG"]])
    from trace_lib.testing.synthetic_campaign import TINY_SLUG

    model = WORK / "models" / TINY_SLUG
    if trace_phase == "generate":
        generation = run_validation_generation(short, slice_, layout, model, settings)
        _log(test="validation", phase=trace_phase, generated=generation.generated_rows)
        return
    outcome = run_validation_slice(short, slice_, layout, model, settings)
    assert outcome.generation.generated_rows == 0 and outcome.score.rows > 0
    judged = outcome.judge.rows if outcome.judge is not None else 0
    _log(test="validation", phase=trace_phase, judged=judged, by_status=dict(outcome.judge.by_status)
         if outcome.judge is not None else {})
'''




@dataclass(frozen=True)
class LaneResult:
    """What the session did: its exit code and output, each phase's records, the receipts and the judge logs."""

    returncode: int
    output: str
    phases: list
    receipts: Path
    generate_receipts: Path
    judge_log_dir: Path
    chat_template_source: str

    def judge_logs(self) -> str:
        return "".join(f"\n--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                       for p in sorted(self.judge_log_dir.glob("*.log")))


def run_phase_all(release, tmp_path: Path, *, vllm: str, backend: str = "vllm", timeout_s: float = 1400) -> LaneResult:
    """Build the tiny models and data under ``tmp_path`` and run the throwaway session (module docstring)."""
    from trace_lib.scoring import judge_pool as jp
    from trace_lib.testing.fake_vllm import free_port_run
    from trace_lib.testing.synthetic_campaign import TINY_SLUG
    from trace_lib.testing.tiny_qwen import build_tiny_qwen25vl
    from trace_lib.testing.tiny_qwen3 import QWEN3_NO_THINK_TEMPLATE, build_tiny_qwen3_judge
    from trace_lib.validation.layout import ValidationLayout
    from trace_lib.validation.prepare import prepare_dataset
    from trace_lib.validation.tiny import build_tiny_parquet, release_variant

    work = tmp_path / "work"
    build_tiny_qwen3_judge(work / "models" / "qwen3-32b-judge")
    build_tiny_qwen25vl(work / "models" / TINY_SLUG)  # the eval slice's model and the validation slice's checkpoint
    short = release_variant(release, work / "release", generation={"max_tokens": 64})
    parquet, ident = build_tiny_parquet(short, work / "tiny.parquet", tasks=8)
    prepare_dataset(parquet, ValidationLayout(work / "validation").dataset_dir, expected=ident)
    (work / "ident.json").write_text(json.dumps(dataclasses.asdict(ident)))
    if (release.path / jp.CHAT_TEMPLATE_REL).is_file():
        template, source = jp.release_chat_template(release), "release"
    else:
        template, source = work / "no_think.jinja", "tiny (the release copy lacks the file)"
        template.write_text(QWEN3_NO_THINK_TEMPLATE)

    project = tmp_path / "proj"
    project.mkdir()
    (project / "conftest.py").write_text('pytest_plugins = ["trace_lib.pytest_plugin"]\n')
    (project / "test_judge_throwaway.py").write_text(THROWAWAY)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TRACE_JUDGE_", options.PHASE_ENV.name))}
    env.update(TRACE_ROOT=str(release.path), JUDGE_GPU_WORK=str(work), JUDGE_GPU_ROWS=str(ROWS),
               JUDGE_GPU_SLUG=SLUG, JUDGE_GPU_BACKEND=backend,
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    receipts = tmp_path / "receipts.xml"
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_judge_throwaway.py",
               "--phase", "all", "--judge-serve", "--judge-model", str(work / "models" / "qwen3-32b-judge"),
               "--judge-gpu-groups", "0", "--judge-port-start", str(free_port_run(1)),
               "--judge-chat-template", str(template), "--judge-vllm", vllm,
               "--judge-ready-timeout", "600", "--judge-log-dir", str(work / "judge-logs"), f"--junitxml={receipts}"]
    done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=timeout_s)
    log = work / "phases.jsonl"
    phases = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return LaneResult(done.returncode, done.stdout[-8000:] + done.stderr[-4000:], phases, receipts,
                      tmp_path / "receipts.generate.xml", work / "judge-logs", source)
