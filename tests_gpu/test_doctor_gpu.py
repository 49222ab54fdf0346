"""``trace-repro doctor`` on a GPU machine: nvidia-smi and torch agree on the devices, and the gpu lane can run."""

from __future__ import annotations

import re

import pytest

from trace_lib.doctor.context import DoctorContext, Status
from trace_lib.doctor.cuda import check_cuda
from trace_lib.doctor.report import diagnose

pytestmark = pytest.mark.gpu


def test_nvidia_smi_and_torch_list_the_same_devices(vllm_gpu):
    quick = check_cuda(DoctorContext())
    probed = check_cuda(DoctorContext(probe_cuda=True))
    assert quick.status is Status.OK and probed.status is Status.OK, (quick.detail, probed.detail)
    count = lambda r: int(re.match(r"(\d+) device", r.detail).group(1))  # noqa: E731
    assert count(quick) == count(probed) >= 1


def test_the_gpu_lane_is_not_blocked_by_cuda_or_vllm(vllm_gpu):
    """Where vllm and a GPU are present, neither blocks the lane (another package of the extra may; printed)."""
    report = diagnose(DoctorContext(), ["gpu"])
    print(report.render_text())
    (verdict,) = report.lanes
    assert verdict.check != "cuda" and not verdict.missing.startswith("vllm "), report.render_text()
