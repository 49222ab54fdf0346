"""The judge pool through real ``vllm serve`` in ``--phase all`` (marker gpu).

A tiny random Qwen3 judge (no-think template, ``<think>`` tokens for the ``qwen3`` reasoning parser) and the tiny
random Qwen2.5-VL are built here; a throwaway project then runs ``pytest --judge-serve --phase all`` in a
subprocess: the child ``--phase generate`` session generates a tiny MMStar slice and a tiny TRACE validation slice
on the GPU and exits, the pool (``vllm serve`` with upstream's judge flags) starts on GPU 0, and the ``score`` phase
judges both slices end to end through it (both client stacks: chat and completions routes, and the validation
judge), with no generation engine in that phase. The pool is gone afterwards.

The release's ``rlvr/examples/prompts/chat_template_no_think.jinja`` is used when the release copy has it; a
data-only copy lacks it, and then the tiny judge's own no-think template is passed instead (the test says which).

Run on a CUDA host with vllm installed (``vllm`` on PATH or importable):
``TRACE_ROOT=<release> python -m pytest tests_gpu/test_judge_vllm.py -m gpu -v -s``.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu



def _vllm_executable(bin_dir: Path) -> str:
    """``vllm`` on PATH, else a wrapper running vLLM's CLI with this interpreter (wheels installed by PYTHONPATH)."""
    found = shutil.which("vllm")
    if found:
        return found
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrapper = bin_dir / "vllm"
    wrapper.write_text(f"#!{sys.executable}\nimport sys\nfrom vllm.entrypoints.cli.main import main\n"
                       "sys.exit(main())\n")
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.mark.timeout(1500)  # two engine starts in the generate phase, then the judge server's start
def test_phase_all_serves_a_tiny_judge_and_judges_both_slices(vllm_gpu, release, tmp_path):
    from trace_lib.testing.judge_lane import ROWS, run_phase_all

    result = run_phase_all(release, tmp_path, vllm=_vllm_executable(tmp_path / "bin"), backend="vllm")
    print(f"chat template: {result.chat_template_source}")
    assert result.returncode == 0, result.output + result.judge_logs()
    print(json.dumps(result.phases, indent=1))
    assert [(p["test"], p["phase"]) for p in result.phases] == [
        ("eval", "generate"), ("validation", "generate"), ("eval", "score"), ("validation", "score")]
    assert result.phases[0]["generated"] == ROWS and result.phases[1]["generated"] > 0
    assert (result.judge_log_dir / "pids.txt").read_text() == ""  # stopped at the end of the session
    assert 'name="phase" value="score"' in result.receipts.read_text()
    assert 'name="phase" value="generate"' in result.generate_receipts.read_text()
