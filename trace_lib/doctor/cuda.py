"""CUDA devices and their memory, from ``nvidia-smi`` (no torch import) or, with ``--probe-cuda``, from torch."""

from __future__ import annotations

import shutil
import subprocess

from trace_lib.doctor.context import CheckResult, DoctorContext, Status

QUERY = ("--query-gpu=index,name,memory.total,memory.used", "--format=csv,noheader,nounits")
NO_GPU_FIX = "run on a machine with an NVIDIA GPU and driver (nvidia-smi lists it)"


def _hidden(ctx: DoctorContext) -> bool:
    return ctx.env.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1")


def _from_nvidia_smi(ctx: DoctorContext) -> CheckResult:
    exe = shutil.which("nvidia-smi", path=ctx.env.get("PATH"))
    if exe is None:
        return CheckResult("cuda", Status.MISSING, "no NVIDIA GPU visible (nvidia-smi not found on PATH)",
                           missing="a CUDA GPU", fix=NO_GPU_FIX)
    try:
        done = subprocess.run([exe, *QUERY], capture_output=True, text=True, timeout=max(ctx.timeout, 5.0),
                              env=dict(ctx.env))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return CheckResult("cuda", Status.MISSING, f"nvidia-smi failed: {exc}", missing="a working NVIDIA driver",
                           fix="nvidia-smi (fix the driver until it lists the GPUs)")
    rows = [[c.strip() for c in line.split(",")] for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not rows:
        reason = (done.stderr or done.stdout).strip().splitlines()[:1] or ["no devices listed"]
        return CheckResult("cuda", Status.MISSING, f"nvidia-smi: {reason[0]}", missing="a CUDA GPU", fix=NO_GPU_FIX)
    devices = []
    for row in rows:
        if len(row) >= 4:
            devices.append(f"{row[0]}: {row[1]} {_gib(row[2])} GiB ({_gib(row[3])} GiB used)")
        else:
            devices.append(", ".join(row))
    return CheckResult("cuda", Status.OK, f"{len(devices)} device(s) via nvidia-smi: " + "; ".join(devices))


def _gib(mib: str) -> str:
    try:
        return f"{float(mib) / 1024:.1f}"
    except ValueError:
        return mib


def _from_torch() -> CheckResult:
    try:
        import torch
    except ImportError:
        return CheckResult("cuda", Status.MISSING, "--probe-cuda: torch is not installed", missing="torch",
                           fix="pip install torch")
    if not torch.cuda.is_available():
        return CheckResult("cuda", Status.MISSING, f"torch {torch.__version__}: CUDA not available "
                           f"(built for CUDA {torch.version.cuda})", missing="a CUDA GPU visible to torch",
                           fix=NO_GPU_FIX)
    devices = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        devices.append(f"{i}: {props.name} {props.total_memory / 2**30:.1f} GiB")
    return CheckResult("cuda", Status.OK, f"{len(devices)} device(s) via torch {torch.__version__} "
                       f"(CUDA {torch.version.cuda}): " + "; ".join(devices))


def check_cuda(ctx: DoctorContext) -> CheckResult:
    if _hidden(ctx):
        return CheckResult("cuda", Status.MISSING, "CUDA_VISIBLE_DEVICES hides every GPU",
                           missing="a visible CUDA GPU", fix="unset CUDA_VISIBLE_DEVICES")
    return _from_torch() if ctx.probe_cuda else _from_nvidia_smi(ctx)


def _checks():
    from trace_lib.doctor.registry import Check

    return (Check("cuda", "CUDA devices and memory (nvidia-smi; torch with --probe-cuda)", check_cuda),)


CHECKS = _checks()
