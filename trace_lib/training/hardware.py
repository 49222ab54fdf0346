"""The GPUs a training launch may use: the requested device list and ``nvidia-smi``'s inventory (spec §1.5 step 4).

``gpu_inventory(requested)`` -> :class:`GpuInventory` (visible count, normalised ``CUDA_VISIBLE_DEVICES``, one
row per host GPU). Upstream's rule: with a device list, its length is the visible count (nvidia-smi must list
at least that many); without one, every GPU nvidia-smi lists is visible.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

from trace_lib.errors import InputError, UsageError

_DEVICE = re.compile(r"[A-Za-z0-9_.:-]+")
_QUERY = ["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total", "--format=csv,noheader,nounits"]


@dataclass(frozen=True)
class GpuInventory:
    """Visible GPU count, the device list to export (None: inherit), and nvidia-smi's rows (all host GPUs)."""

    visible: int
    devices: str | None
    rows: tuple[dict[str, str], ...]

    def names_contain(self, text: str, count: int) -> bool:
        """Whether each of the first ``count`` rows' names contains ``text`` (upstream's reference-hardware match)."""
        rows = self.rows[:count]
        return len(rows) == count and all(text in row["name"] for row in rows)


def parse_devices(value: str) -> list[str]:
    """A comma-separated device list, trimmed, empties dropped; each item must be a plain device id.

    Raises:
        UsageError: an item is not a device id, or items repeat.
    """
    items = [item.strip() for item in value.split(",") if item.strip()]
    bad = [item for item in items if not _DEVICE.fullmatch(item)]
    if bad:
        raise UsageError("invalid CUDA device id", field="--cuda-visible-devices", found=bad)
    if len(set(items)) != len(items):
        raise UsageError("CUDA device ids repeat", field="--cuda-visible-devices", found=items)
    return items


def gpu_inventory(requested: str | None) -> GpuInventory:
    """The GPUs visible to a launch (``--cuda-visible-devices``, else ``CUDA_VISIBLE_DEVICES``, else all).

    Raises:
        InputError: nvidia-smi is missing or fails, or lists fewer GPUs than the device list names.
    """
    value = requested if requested is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
    devices = parse_devices(value) if value else None
    try:
        proc = subprocess.run(_QUERY, capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise InputError(f"nvidia-smi is required to inventory GPUs ({exc})") from None
    rows = []
    for line in proc.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            rows.append(dict(zip(("index", "name", "driver_version", "memory_mib"), parts)))
    if devices is not None and len(rows) < len(devices):
        raise InputError("nvidia-smi lists fewer GPUs than requested", expected=len(devices), found=len(rows))
    visible = len(devices) if devices is not None else len(rows)
    return GpuInventory(visible=visible, devices=",".join(devices) if devices else None, rows=tuple(rows))
