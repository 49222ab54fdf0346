"""CPU rehearsal of the GPU judge lane (tests_gpu/test_judge_vllm.py): the same ``--judge-serve --phase all``
session with the hf backend generating on CPU and a fake ``vllm`` serving the judge (marker cpu_model)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.cpu_model


@pytest.mark.timeout(900)  # CPU generation of two tiny slices in the child session, then scoring
def test_phase_all_rehearsal_with_a_fake_vllm(release, tmp_path):
    pytest.importorskip("torch", reason="the hf backend generates on CPU (the 'hf' extra)")
    from trace_lib.testing.fake_vllm import write_fake_vllm
    from trace_lib.testing.judge_lane import ROWS, run_phase_all

    result = run_phase_all(release, tmp_path, vllm=str(write_fake_vllm(tmp_path / "bin")), backend="hf",
                           timeout_s=900)
    assert result.returncode == 0, result.output + result.judge_logs()
    assert [(p["test"], p["phase"]) for p in result.phases] == [
        ("eval", "generate"), ("validation", "generate"), ("eval", "score"), ("validation", "score")], result.phases
    assert result.phases[0]["generated"] == ROWS and result.phases[1]["generated"] > 0
    assert (result.judge_log_dir / "pids.txt").read_text() == ""
    assert 'name="phase" value="score"' in result.receipts.read_text()
    print(json.dumps(result.phases, indent=1))
